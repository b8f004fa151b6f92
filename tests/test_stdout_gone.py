"""Every command with its standard output closed (`>&-`) or a pipe whose reader has gone
(`| head -1`): no traceback, no "a bug in convatt". With standard output closed, a command
whose product goes there (the tagged text, the scores, the help) fails at once with status 2
and one line saying so ("Bad file descriptor", as `cat >&-`), and one whose product is files
runs to its end (status 0) with its progress discarded; a gone reader stops any command
quietly with status 141, as a shell's tools are stopped by SIGPIPE.

One process runs every command through `convatt.cli.main`, with file descriptor 1 really
closed (and `sys.stdout` None, as Python leaves it when started so), then again as the
line-buffered write end of a real pipe whose read end is closed (so a command stops at its
first line, not after its work). Two more processes are the real thing, from start to
exit status: `convatt score ... >&-`, `convatt tag RUN --input F >&-` (and with `--output`)
and `convatt status | true`. `convatt bench` takes
minutes, so in the first process its benchmark is replaced by one that prints its heading
lines: what is tested is the command's path from `main` to standard output."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import LINES, ROOT, tiny_command

READER_GONE = 141
SENTENCES = 20

EVERY_COMMAND = """
import io, json, os, sys
import convatt.speed.bench
from convatt.cli import main

def heading_only(**options):  # the benchmark takes minutes; its heading goes through print as its lines do
    for n in range(3):
        print(f"bench heading line {n}: {options}")

convatt.speed.bench.run_benchmark = heading_only
commands = json.loads(sys.argv[1])
terminal = os.dup(1)
results = {}
for mode in ("closed", "broken"):
    for name, argv in commands[mode].items():
        if mode == "closed":
            os.close(1)
            sys.stdout = None  # what Python sets when started with descriptor 1 closed
        else:
            read, write = os.pipe()
            os.close(read)
            os.dup2(write, 1)
            os.close(write)
            sys.stdout = open(1, "w", closefd=False, buffering=1)
        sys.stderr = io.StringIO()
        try:
            code = main(argv)
        except SystemExit as e:  # argparse's --help
            code = e.code
        errors, sys.stderr = sys.stderr.getvalue(), sys.__stderr__
        os.dup2(terminal, 1)
        sys.stdout = open(1, "w", closefd=False)
        results[f"{mode} {name}"] = [code, errors]
print(json.dumps(results))
"""


@pytest.fixture
def small(tmp_path) -> Path:
    """The first SENTENCES sentences of UD English-LinES' test file."""
    text = gzip.decompress(next(LINES.glob("*-ud-test.conllu.gz")).read_bytes()).decode()
    path = tmp_path / "small.conllu"
    path.write_text("\n\n".join(text.split("\n\n")[:SENTENCES]) + "\n\n")
    return path


# A closed standard output is /dev/null before any command runs (the same path for all), so
# the commands that work longest before they write run in the broken mode only; a new run
# there stops at its first line, raised through the trainer as a ConvattError.
BROKEN_ONLY = ("train-new", "inspect", "tables", "plot")
# The commands whose product is their standard output, with these arguments: closed, an error.
PRODUCT_ON_STDOUT = ("help", "params", "status", "evaluate", "tag", "score", "bench", "generate")
# Closed only: conftest's tiny runs are taggers, which `generate` refuses (after the closed
# output's check, before it would write).
CLOSED_ONLY = ("generate",)
CLOSED_ERROR = "convatt: error: standard output is closed (Bad file descriptor), and "


def commands(runs: Path, small: Path, tmp: Path) -> dict[str, list[str]]:
    """Every command, with arguments that make it write to standard output (`runs`: conftest's
    tiny runs, the same as other modules' tests use)."""
    run = runs / "ptb" / "san-pe-add" / "seed1"
    return {
        "train-new": tiny_command(tmp / "new")[3:],
        "help": ["--help"],
        "params": ["params", "--n-words", "50", "--n-chars", "20", "--n-labels", "5"],
        "train": tiny_command(run)[3:],  # finished: "nothing to do"
        "status": ["status", "--runs", str(runs)],
        "evaluate": ["evaluate", str(run), "--split", "dev"],
        "tag": ["tag", str(run), "--input", str(small)],
        "score": ["score", str(small), str(small)],
        "inspect": ["inspect", str(run), "--out", str(tmp / "inspect"), "--sentence", "The cat sat ."],
        "tables": ["tables", "--runs", str(runs), "--out", str(tmp / "tables")],
        "plot": ["plot", "--runs", str(runs), "--out", str(tmp / "plots")],
        "bench": ["bench", "--quick"],
        "generate": ["generate", str(run), "--prompt", "The", "--length", "5"],
    }


def assert_quiet(errors: str) -> None:
    for sign in ("Traceback", "a bug in convatt", "convatt: error", "Exception ignored", "Broken pipe"):
        assert sign not in errors, errors


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "3"}


@pytest.mark.slow  # every command run; a process with stdout closed and one whose reader is gone: below
def test_every_command_with_stdout_closed_or_its_reader_gone(tiny_runs, small, tmp_path):
    from convatt.cli import build_parser

    every = commands(tiny_runs, small, tmp_path)
    assert set(build_parser()._subparsers._group_actions[0].choices) == set(every) - {"help", "train-new"}
    modes = {
        "closed": {k: v for k, v in every.items() if k not in BROKEN_ONLY},
        "broken": {k: v for k, v in every.items() if k not in CLOSED_ONLY},
    }
    done = subprocess.run(
        [sys.executable, "-c", EVERY_COMMAND, json.dumps(modes)], capture_output=True, text=True, env=env(), timeout=600
    )
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(results) == len(modes["closed"]) + len(modes["broken"])
    for name in modes["broken"]:
        code, errors = results[f"broken {name}"]
        assert code == READER_GONE, (name, errors)
        assert_quiet(errors)
    for name in modes["closed"]:
        code, errors = results[f"closed {name}"]
        if name in PRODUCT_ON_STDOUT:
            assert code == 2 and errors.startswith(CLOSED_ERROR) and errors.count("\n") == 1, (name, errors)
        else:
            assert code == 0, (name, errors)
            assert_quiet(errors)
    assert f"tagged {SENTENCES} sentences" not in results["closed tag"][1]  # refused before any work
    assert "Exception ignored" not in done.stderr


def closed(*argv) -> subprocess.CompletedProcess:
    """`convatt ARGV >&-` in a process of its own, started by a shell."""
    argv = [sys.executable, "-m", "convatt", *map(str, argv)]
    return subprocess.run(["sh", "-c", 'exec "$@" >&-', "sh", *argv], capture_output=True, text=True, env=env())


def test_a_process_started_with_stdout_closed(small):
    done = closed("score", small, small)
    assert done.returncode == 2 and done.stdout == "", done.stderr
    assert done.stderr == CLOSED_ERROR + "the scores would go there: redirect it to a file (> FILE)\n"


@pytest.mark.slow  # two tagging processes; stdout closed in a process: test_a_process_started_with_stdout_closed
def test_tag_with_stdout_closed_is_an_error_and_with_output_runs(tiny_runs, small, tmp_path):
    run = tiny_runs / "ptb" / "san-pe-add" / "seed1"
    done = closed("tag", run, "--input", small)
    assert done.returncode == 2 and done.stderr.startswith(CLOSED_ERROR + "the tagged CoNLL-U"), done.stderr
    assert done.stderr.rstrip().endswith("or give --output FILE") and "Traceback" not in done.stderr
    written = closed("tag", run, "--input", small, "--output", tmp_path / "tagged.conllu")
    assert written.returncode == 0, written.stderr
    assert_quiet(written.stderr)
    assert (tmp_path / "tagged.conllu").read_text().count("# text = ") == SENTENCES


def test_a_process_whose_reader_has_gone(tmp_path):
    argv = [sys.executable, "-m", "convatt", "status", "--runs", str(tmp_path)]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env()) as status:
        status.stdout.close()  # as `| true` does
        errors = status.stderr.read().decode()
    assert status.returncode == READER_GONE, errors
    assert_quiet(errors)
