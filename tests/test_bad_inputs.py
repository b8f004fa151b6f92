"""Bad inputs, one row each: every CLI command and `experiments/` script answers with one clear
line (naming the file, and the line where there is one) and a non-zero exit, never a traceback.

A row is (id, command line, fixture builder, exit code, message fragment); the next case is
one more row. Rows run in-process through `convatt.cli.main` (fast), or as a real process
where the process itself matters (an environment variable read before Keras is imported,
the `experiments/` scripts). One tiny finished run (1 epoch, 30 sentences) serves them all;
a row that damages it damages a copy.

`python tests/test_bad_inputs.py` prints the number of rows by command (docs/bad-inputs.md).
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from helpers import LINES, PTB_SAMPLE, PTB_SAMPLE_FILES, ROOT  # noqa: E402

Build = Callable[[Path, Path], None]  # (tmp directory, the tiny finished run) -> files under tmp


@dataclass(frozen=True)
class Case:
    id: str
    argv: list[str]  # "{tmp}" and "{run}" are replaced; a process row starts with its program
    build: Build | None
    code: int
    says: str  # a fragment of the last line of stderr
    process: bool = False  # run `python ARGV...` (with `env`) from the project root
    env: dict[str, str] = field(default_factory=dict)
    root_writes: bool = False  # root ignores file permissions: skipped when run as root

    @property
    def command(self) -> str:
        """The command the row covers: a `convatt` command or the `experiments/` script."""
        if self.process and self.argv[0].startswith("experiments/"):
            return self.argv[0]
        return "convatt " + (self.argv[2] if self.process else self.argv[0])


# ---- fixture builders ------------------------------------------------------------------


def write(relative: str, content: str | bytes) -> Build:
    def build(tmp: Path, run: Path) -> None:
        path = tmp / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())

    return build


def both(*builds: Build) -> Build:
    return lambda tmp, run: [b(tmp, run) for b in builds] and None


def run_copy(damage: Callable[[Path], None] = lambda run: None) -> Build:
    """A copy of the tiny run at {tmp}/run, then `damage(copy)`."""

    def build(tmp: Path, run: Path) -> None:
        shutil.copytree(run, tmp / "run")
        damage(tmp / "run")

    return build


def truncate(name: str) -> Callable[[Path], None]:
    def damage(run: Path) -> None:
        data = (run / name).read_bytes()
        (run / name).write_bytes(data[: len(data) // 2])

    return damage


def edit_config(change: Callable[[dict], None]) -> Callable[[Path], None]:
    """Change the run's config.json in place, as a person (or a move of the corpus) would."""

    def damage(run: Path) -> None:
        config = json.loads((run / "config.json").read_text())
        change(config)
        (run / "config.json").write_text(json.dumps(config))

    return damage


def both_damages(*damages: Callable[[Path], None]) -> Callable[[Path], None]:
    return lambda run: [d(run) for d in damages] and None


corpus_moved = edit_config(lambda config: config.update(data="/gone/ptb-sample.tar.gz"))
MOVED = "config.json: the ptb corpus this run trained on is not at /gone/ptb-sample.tar.gz (this file's \"data\"): "


def without(key: str) -> Callable[[Path], None]:
    return edit_config(lambda config: config.pop(key))


def runs_root_of_one(damage: Callable[[Path], None]) -> Build:
    """{tmp}/runs/ptb/san-pe-add/seed1: a copy of the tiny run, damaged; the folder's only run."""

    def build(tmp: Path, run: Path) -> None:
        target = tmp / "runs" / "ptb" / "san-pe-add" / "seed1"
        shutil.copytree(run, target)
        damage(target)

    return build


WORD = "{i}\t{form}\t_\t{upos}\t_\t_\t{head}\t{rel}\t_\t_"


def conllu(forms: list[str], upos: str = "NOUN") -> str:
    lines = [
        WORD.format(i=i, form=f, upos=upos, head=0 if i == 1 else 1, rel="root" if i == 1 else "dep")
        for i, f in enumerate(forms, 1)
    ]
    return "\n".join(["# sent_id = 1", *lines]) + "\n\n"


def treebank(dev: str) -> Build:
    """{tmp}/UD_Tiny: train and test of LinES (its first sentences), and `dev` as given."""

    def build(tmp: Path, run: Path) -> None:
        directory = tmp / "UD_Tiny"
        directory.mkdir()
        for split in ("train", "test"):
            text = gzip.decompress((LINES / f"en_lines-ud-{split}.conllu.gz").read_bytes()).decode()
            (directory / f"tiny-ud-{split}.conllu").write_text("\n\n".join(text.split("\n\n")[:20]) + "\n\n")
        (directory / "tiny-ud-dev.conllu").write_text(dev)

    return build


def ptb_with_a_directory(tmp: Path, run: Path) -> None:
    shutil.copytree(PTB_SAMPLE_FILES, tmp / "ptb")
    (tmp / "ptb" / "wsj_0300.mrg").mkdir()


def fasttext_bin(keep: float) -> Build:
    """{tmp}/v.bin: a real fastText model (gensim), the first `keep` of its bytes."""

    def build(tmp: Path, run: Path) -> None:
        from gensim.models import FastText
        from gensim.models.fasttext import save_facebook_model

        sentences = [["the", "dog", "runs"], ["a", "cat"]] * 5
        model = FastText(vector_size=300, min_count=1, bucket=100, workers=1, seed=1)
        model.build_vocab(corpus_iterable=sentences)
        model.train(corpus_iterable=sentences, total_examples=len(sentences), epochs=1)
        save_facebook_model(model, str(tmp / "whole.bin"))
        data = (tmp / "whole.bin").read_bytes()
        (tmp / "v.bin").write_bytes(data[: int(len(data) * keep)])

    return build


def read_only(relative: str) -> Build:
    def build(tmp: Path, run: Path) -> None:
        (tmp / relative).mkdir(parents=True, exist_ok=True)
        (tmp / relative).chmod(0o555)

    return build


def _train(out: str, *more: str, data: str = str(PTB_SAMPLE)) -> list[str]:
    return ["train", "--preset", "ptb", "--variant", "san-pe-add", "--data", data, "--out", out, *more]


def _ud_train(data: str) -> list[str]:
    return ["train", "--preset", "ud", "--variant", "san-pe-add", "--data", data, "--out", "{tmp}/out", "--limit", "5"]


RUN_OPTIONS = ["--limit", "30", "--epochs", "1", "--curve-every", "0", "--jit-compile", "off"]
SUBMIT = ["experiments/slurm_submit.py", "submit", "--grid", "g", "--python", sys.executable]
RUNS_FILE = "{tmp}/runs.txt"

# ---- the table ---------------------------------------------------------------------------

GOLD_SENTENCE = "1\tThe\t_\tDET\t_\t_\t_\t_\t_\t_\n2\tcat\t_\tNOUN\t_\t_\t_\t_\t_\t_\n\n"

CASES = [
    # params
    Case("params-unknown-preset", ["params", "--preset", "ptbb"], None, 2, "ptbb"),
    Case("params-data-missing", ["params", "--data", "{tmp}/nope"], None, 2, "nope: ptb corpus path not found"),
    Case("params-data-is-a-file", ["params", "--preset", "ud", "--data", "{tmp}/f"], write("f", "x"), 2, "f: expected"),
    Case("params-too-few-words", ["params", "--n-words", "1"], None, 2, "--n-words must be at least 3"),
    # train: paths and data
    Case("train-data-missing", _train("{tmp}/out", data="{tmp}/nope"), None, 2, "nope: "),
    Case("train-out-is-a-file", _train("{tmp}/f"), write("f", "mine"), 2, "--out names a file"),
    Case("train-out-under-a-file", _train("{tmp}/f/run"), write("f", "mine"), 2, "Not a directory"),
    Case("train-out-read-only", _train("{tmp}/ro/run"), read_only("ro"), 2, "Permission denied", root_writes=True),
    Case(
        "train-out-foreign-config",
        _train("{tmp}/mine"),
        write("mine/config.json", '{"name": "my notes"}'),
        2,
        "is not a convatt run directory and convatt does not write into it; choose another --out",
    ),
    Case(
        "train-out-holds-a-foreign-file",
        _train("{tmp}/mine"),
        write("mine/notes.txt", "mine"),
        2,
        "convatt does not write into it: use a new or empty directory",
    ),
    Case(
        "train-finished-run-with-other-flags",
        _train("{run}", "--seed", "7", "--epochs", "1", "--jit-compile", "off"),
        None,
        2,
        "holds a finished run with other options (seed: 1 -> 7, limit: 30 -> None, curve_every: 0 -> 100): "
        "to use it, give `--seed 1 --limit 30 --curve-every 0` instead",
    ),
    Case(
        "train-finished-run-with-more-epochs",
        _train("{run}", *[("5" if o == "1" else o) for o in RUN_OPTIONS]),
        None,
        2,
        "holds a finished run with other options (epochs: 1 -> 5): to use it, give `--epochs 1` instead; "
        "to train this one, choose another --out",
    ),
    Case(
        "train-damaged-config",
        _train("{tmp}/run", *RUN_OPTIONS),
        run_copy(truncate("config.json")),
        2,
        "damaged: not valid JSON",
    ),
    Case(
        "train-ptb-directory-named-mrg",
        _train("{tmp}/out", data="{tmp}/ptb"),
        ptb_with_a_directory,
        2,
        "wsj_0300.mrg: named like a PTB file",
    ),
    Case(
        "train-ud-form-with-two-spaces",
        _ud_train("{tmp}/UD_Tiny"),
        treebank(conllu(["a", "big  dog"])),
        2,
        "tiny-ud-dev.conllu:3: FORM 'big  dog' holds two consecutive spaces",
    ),
    Case(
        "train-ud-tab-only-line",
        _ud_train("{tmp}/UD_Tiny"),
        treebank(conllu(["a", "dog"]).replace("\n2\t", "\n\t\n2\t")),
        2,
        "tiny-ud-dev.conllu:3: a line of only whitespace",
    ),
    Case(
        "train-ud-missing-split", _ud_train("{tmp}/UD_None"), write("UD_None/x-ud-train.conllu", ""), 2, "no *-ud-dev"
    ),
    Case(
        "train-embeddings-random-bytes",
        _train("{tmp}/out", "--embeddings", "{tmp}/v.bin", "--limit", "5"),
        write("v.bin", bytes(range(256)) * 20),
        2,
        "v.bin: not a fastText .bin model (wrong magic number)",
    ),
    Case(
        "train-embeddings-vec-named-bin",
        _train("{tmp}/out", "--embeddings", "{tmp}/v.bin", "--limit", "5"),
        write("v.bin", "2 300\nthe " + " ".join(["0.1"] * 300) + "\n"),
        2,
        "v.bin: not a fastText .bin model (it starts with text",
    ),
    Case(
        "train-embeddings-empty-bin",
        _train("{tmp}/out", "--embeddings", "{tmp}/v.bin", "--limit", "5"),
        write("v.bin", b""),
        2,
        "v.bin: truncated fastText .bin model (0 bytes)",
    ),
    Case(
        "train-embeddings-truncated-bin",
        _train("{tmp}/out", "--embeddings", "{tmp}/v.bin", "--limit", "5"),
        fasttext_bin(0.5),
        2,
        "v.bin: truncated fastText .bin model",
    ),
    Case(
        "train-embeddings-vec-bad-row",
        _train("{tmp}/out", "--embeddings", "{tmp}/v.vec", "--limit", "5"),
        write("v.vec", "1 300\nthe 0.1\n"),
        2,
        "v.vec:2: expected a word and 300 numbers",
    ),
    Case("train-seed-out-of-range", _train("{tmp}/out", "--seed", "-1"), None, 2, "--seed must be between 0"),
    Case(
        "train-keras-backend-torch",
        ["-m", "convatt", *_train("{tmp}/out")],
        None,
        2,
        "KERAS_BACKEND='torch' is not supported: convatt runs on tensorflow or jax",
        process=True,
        env={"KERAS_BACKEND": "torch"},
    ),
    # evaluate
    Case("evaluate-run-missing", ["evaluate", "{tmp}/nope"], None, 2, "nope"),
    Case(
        "evaluate-truncated-model",
        ["evaluate", "{tmp}/run", "--split", "dev"],
        run_copy(truncate("model.keras")),
        2,
        "model.keras: damaged: not a complete Keras model archive",
    ),
    Case("evaluate-data-missing", ["evaluate", "{run}", "--data", "{tmp}/nope", "--split", "dev"], None, 2, "nope"),
    Case(
        "evaluate-corpus-moved",
        ["evaluate", "{tmp}/run", "--split", "dev"],
        run_copy(corpus_moved),
        2,
        MOVED + "if it moved, give its new place with --data",
    ),
    Case(
        "evaluate-sentences-corpus-moved",
        ["evaluate", "{tmp}/run", "--sentences"],
        run_copy(corpus_moved),
        2,
        MOVED + "put it back there (or a link to it)",
    ),
    Case(
        "evaluate-config-without-variant",
        ["evaluate", "{tmp}/run"],
        run_copy(without("variant")),
        2,
        "config.json: damaged run configuration: no variant (a run's config.json holds preset, variant, seed, "
        "data, out at least)",
    ),
    Case(
        "tag-config-without-preset",
        ["tag", "{tmp}/run", "--input", "{tmp}/in.txt", "--format", "text"],
        both(run_copy(without("preset")), write("in.txt", "The dog barks .\n")),
        2,
        "config.json: damaged run configuration: no preset (",
    ),
    Case(
        "evaluate-config-with-a-bad-precision",
        ["evaluate", "{tmp}/run"],
        run_copy(edit_config(lambda config: config.update(precision="float8"))),
        2,
        "config.json: damaged run configuration: precision must be one of float32, mixed_bfloat16, "
        "mixed_float16, not 'float8'",
    ),
    # tag
    Case("status-runs-missing", ["status", "--runs", "{tmp}/nope"], None, 2, "nope: runs directory not found"),
    Case("status-runs-is-a-file", ["status", "--runs", "{tmp}/f"], write("f", "x"), 2, "f: not a directory"),
    Case(
        "score-gold-missing",
        ["score", "{tmp}/nope.conllu", "{tmp}/nope2.conllu"],
        None,
        2,
        "nope.conllu: file not found",
    ),
    Case(
        "score-system-not-conllu",
        ["score", "{tmp}/gold.conllu", "{tmp}/sys.conllu"],
        lambda tmp, run: (write("gold.conllu", GOLD_SENTENCE)(tmp, run), write("sys.conllu", "1\tThe\n")(tmp, run)),
        2,
        "sys.conllu:1: expected 10 tab-separated fields",
    ),
    Case("tag-run-missing", ["tag", "{tmp}/nope", "--input", "{tmp}/in.txt"], None, 2, "run directory not found"),
    Case(
        "tag-truncated-model",
        ["tag", "{tmp}/run", "--input", "{tmp}/in.txt", "--format", "text"],
        both(run_copy(truncate("model.keras")), write("in.txt", "A dog runs .\n")),
        2,
        "model.keras: damaged: not a complete Keras model archive",
    ),
    Case("tag-input-missing", ["tag", "{run}", "--input", "{tmp}/nope.conllu"], None, 2, "nope.conllu: file not found"),
    Case("tag-input-is-a-directory", ["tag", "{run}", "--input", "{tmp}"], None, 2, "expected a file"),
    Case(
        "tag-input-form-with-two-spaces",
        ["tag", "{run}", "--input", "{tmp}/in.conllu"],
        write("in.conllu", conllu(["a", "big  dog"])),
        2,
        "in.conllu:3: FORM 'big  dog' holds two consecutive spaces",
    ),
    Case(
        "tag-input-tab-only-line",
        ["tag", "{run}", "--input", "{tmp}/in.conllu"],
        write("in.conllu", conllu(["a", "dog"]).replace("\n2\t", "\n\t\n2\t")),
        2,
        "in.conllu:3: a line of only whitespace",
    ),
    Case(
        "tag-input-not-utf8",
        ["tag", "{run}", "--input", "{tmp}/in.txt", "--format", "text"],
        write("in.txt", b"a \xff dog\n"),
        2,
        "in.txt:1: not valid UTF-8",
    ),
    Case(
        "tag-output-is-a-directory",
        ["tag", "{run}", "--input", "{tmp}/in.txt", "--format", "text", "--output", "{tmp}/outdir"],
        both(write("in.txt", "A dog runs .\n"), lambda tmp, run: (tmp / "outdir").mkdir()),
        2,
        "outdir",
    ),
    # generate
    Case("generate-run-missing", ["generate", "{tmp}/nope", "--prompt", "x"], None, 2, "run directory not found"),
    Case(
        "generate-temperature-zero",
        ["generate", "{run}", "--prompt", "x", "--temperature", "0"],
        None,
        2,
        "--temperature takes a finite number > 0",
    ),
    Case(
        "generate-temperature-nan",
        ["generate", "{run}", "--prompt", "x", "--temperature", "nan"],
        None,
        2,
        "--temperature takes a finite number > 0",
    ),
    Case("generate-seed-negative", ["generate", "{run}", "--prompt", "x", "--seed", "-1"], None, 2, "--seed takes"),
    Case(
        "train-tensorboard-a-file",
        ["train", "--preset", "ptb", "--variant", "san", "--out", "{tmp}/r", "--tensorboard", "{tmp}/in.txt"],
        write("in.txt", "a file\n"),
        2,
        "(--tensorboard)",
    ),
    # inspect
    Case("inspect-run-missing", ["inspect", "{tmp}/nope"], None, 2, "run directory not found"),
    Case(
        "inspect-truncated-model",
        ["inspect", "{tmp}/run"],
        run_copy(truncate("model.keras")),
        2,
        "model.keras: damaged: not a complete Keras model archive",
    ),
    Case(
        "inspect-out-is-a-file",
        ["inspect", "{run}", "--out", "{tmp}/f"],
        write("f", "x"),
        2,
        "/f is a file, expected a directory",
    ),
    Case("inspect-no-words", ["inspect", "{run}", "--sentence", "  "], None, 2, "--sentence has no words"),
    Case(
        "inspect-corpus-moved",
        ["inspect", "{tmp}/run", "--out", "{tmp}/i"],
        run_copy(corpus_moved),
        2,
        MOVED + "if it moved, give its new place with --data",
    ),
    Case("inspect-data-missing", ["inspect", "{run}", "--data", "{tmp}/nope"], None, 2, "nope: --data: ptb corpus"),
    Case(
        "inspect-config-without-seed-and-data",
        ["inspect", "{tmp}/run"],
        run_copy(both_damages(without("seed"), without("data"))),
        2,
        "config.json: damaged run configuration: no seed, data (",
    ),
    # tables and plot
    Case(
        "tables-runs-missing",
        ["tables", "--runs", "{tmp}/nope", "--out", "{tmp}/res"],
        None,
        2,
        "no such runs directory",
    ),
    Case(
        "tables-out-is-a-file",
        ["tables", "--runs", "{run}", "--out", "{tmp}/f"],
        write("f", "x"),
        2,
        "/f is a file, expected a directory",
    ),
    Case(
        "tables-only-run-truncated-result",
        ["tables", "--runs", "{tmp}/runs", "--out", "{tmp}/res"],
        runs_root_of_one(truncate("result.json")),
        2,
        "1 run skipped as damaged: ",
    ),
    Case(
        "tables-only-run-bad-history",
        ["tables", "--runs", "{tmp}/runs", "--out", "{tmp}/res"],
        runs_root_of_one(lambda run: (run / "history.csv").write_text("epoch,loss\none,x\n")),
        2,
        "history.csv",
    ),
    Case(
        "tables-unknown-setting",
        ["tables", "--runs", "{run}", "--out", "{tmp}/res", "--setting", "nope"],
        None,
        2,
        "no finished run of the setting(s) 'nope'",
    ),
    Case(
        "plot-out-is-a-file",
        ["plot", "--runs", "{run}", "--out", "{tmp}/f"],
        write("f", "x"),
        2,
        "/f is a file, expected a directory",
    ),
    Case(
        "plot-only-run-truncated-result",
        ["plot", "--runs", "{tmp}/runs", "--out", "{tmp}/res"],
        runs_root_of_one(truncate("result.json")),
        2,
        "1 run skipped as damaged: ",
    ),
    # bench
    Case("bench-unknown-variant", ["bench", "--variant", "san-nope", "--quick"], None, 2, "san-nope"),
    Case("bench-unknown-preset", ["bench", "--preset", "nope", "--quick"], None, 2, "nope"),
    Case("bench-attention-unknown-case", ["bench", "--attention", "--cases", "nope"], None, 2, "received nope"),
    Case("bench-attention-zero-length", ["bench", "--attention", "--lengths", "0"], None, 2, "at least 1"),
    Case("bench-attention-with-variant", ["bench", "--attention", "--variant", "san-p"], None, 2, "--variant is an"),
    Case("bench-lengths-without-attention", ["bench", "--lengths", "64"], None, 2, "of --attention"),
    Case("bench-attention-out-missing-dir", ["bench", "--attention", "--out", "{tmp}/no/a.csv"], None, 2, "--out"),
    # experiments/ scripts
    Case(
        "slurm-submit-runs-file-missing",
        [*SUBMIT, "--runs", "{tmp}/runs", "--runs-file", "{tmp}/nope.runs"],
        None,
        2,
        "nope.runs: file not found",
        process=True,
    ),
    Case(
        "slurm-submit-runs-file-is-a-directory",
        [*SUBMIT, "--runs", "{tmp}/runs", "--runs-file", "{tmp}"],
        None,
        2,
        "expected a file, found a directory",
        process=True,
    ),
    Case(
        "slurm-submit-runs-file-not-utf8",
        [*SUBMIT, "--runs", "{tmp}/runs", "--runs-file", RUNS_FILE],
        write("runs.txt", b"r \xff\n"),
        2,
        "runs.txt: cannot read",
        process=True,
    ),
    Case(
        "slurm-task-tasks-file-missing",
        ["experiments/slurm_submit.py", "task", "{tmp}/tasks.txt", "0"],
        None,
        2,
        "tasks.txt: file not found",
        process=True,
    ),
    Case(
        "readme-tables-readme-missing",
        ["experiments/readme_tables.py", "{tmp}/README.md"],
        None,
        2,
        "README.md: No such file or directory",
        process=True,
    ),
    Case(
        "readme-tables-readme-is-a-directory",
        ["experiments/readme_tables.py", "{tmp}"],
        None,
        2,
        "Is a directory",
        process=True,
    ),
]


def fake_slurm(tmp: Path) -> dict[str, str]:
    """A PATH where `sbatch` and `squeue` answer as an empty cluster's do, so that `submit` gets
    as far as writing into RUNS (sbatch is never reached)."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    for tool, script in (("squeue", "exit 0"), ("sbatch", "echo 1; exit 0")):
        (bin_dir / tool).write_text(f"#!/bin/sh\n{script}\n")
        (bin_dir / tool).chmod(0o755)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


_SUBMIT_RUNS = [*SUBMIT, "--runs", "{tmp}/runs", "--runs-file", RUNS_FILE]
SLURM_RUNS_CASES = [  # run with `fake_slurm` on PATH and a runs file of one run
    Case("slurm-submit-runs-is-a-file", _SUBMIT_RUNS, write("runs", "x"), 2, "Not a directory", process=True),
    Case(
        "slurm-submit-runs-read-only",
        _SUBMIT_RUNS,
        read_only("runs"),
        2,
        "Permission denied",
        process=True,
        root_writes=True,
    ),
]


# ---- running a row ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_run(small_run) -> Path:
    """One finished 1-epoch PTB run on 30 sentences (the same options as RUN_OPTIONS)."""
    return small_run


def run_case(case: Case, tmp: Path, run: Path, capsys, extra_env: dict | None = None) -> tuple[int, str]:
    """(exit code, stdout + stderr) of the row's command."""
    argv = [a.replace("{tmp}", str(tmp)).replace("{run}", str(run)) for a in case.argv]
    if case.process:
        env = {**os.environ, "PYTHONPATH": str(ROOT), **case.env, **(extra_env or {})}
        r = subprocess.run([sys.executable, *argv], capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
        return r.returncode, r.stdout + r.stderr
    from convatt.cli import main

    try:
        code = main(argv)
    except SystemExit as e:  # argparse
        code = e.code
    captured = capsys.readouterr()
    return code, captured.out + captured.err


@pytest.mark.parametrize("case", CASES + SLURM_RUNS_CASES, ids=lambda c: c.id)
def test_a_bad_input_is_one_line_and_a_non_zero_exit(case, tiny_run, tmp_path, capsys):
    if case.root_writes and os.geteuid() == 0:
        pytest.skip("root writes into read-only directories")
    if case.build is not None:
        case.build(tmp_path, tiny_run)
    extra = fake_slurm(tmp_path) if case in SLURM_RUNS_CASES else None
    if case in SLURM_RUNS_CASES:
        (tmp_path / "runs.txt").write_text(f"{tmp_path}/r1 true\n")
    try:
        code, output = run_case(case, tmp_path, tiny_run, capsys, extra)
    finally:
        for p in tmp_path.rglob("*"):  # let pytest remove what a row made read-only
            if p.is_dir():
                p.chmod(0o755)
    assert "Traceback" not in output and "Exception ignored" not in output, output
    assert code == case.code, output
    last = output.strip().splitlines()[-1]
    assert case.says in last, output
    assert last.startswith(("convatt: error:", "slurm_submit: error:", "readme_tables: error:")), output


def test_the_rows_cover_every_command():
    from convatt.cli import build_parser

    parser = build_parser()
    commands = set(parser._subparsers._group_actions[0].choices)
    covered = Counter(c.command for c in CASES + SLURM_RUNS_CASES)
    assert {f"convatt {c}" for c in commands} <= set(covered), covered
    assert {"experiments/slurm_submit.py", "experiments/readme_tables.py"} <= set(covered)


# ---- a full disk during a checkpoint: convatt's line, then nothing -------------------------

FILL_DURING_WEIGHTS = """
import signal, resource, sys
from pathlib import Path
import keras
from convatt.rundir.storage import write_atomically
model = keras.Sequential([keras.Input((100,)), keras.layers.Dense(3000), keras.layers.Dense(10)])
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (1000, 1000))  # writes past 1000 bytes fail, as on a full disk
try:
    write_atomically(Path(sys.argv[1]), model.save_weights)
except Exception as e:
    print(f"convatt: error: {e}".splitlines()[0], file=sys.stderr)
    sys.exit(2)
"""


def test_a_full_disk_while_writing_weights_ends_with_convatts_line(tmp_path):
    """Keras leaves the HDF5 file of a failed `save_weights` open; closed at exit, it failed
    again with h5py's "Exception ignored ... errno" tracebacks after convatt's message."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "3"}
    target = tmp_path / "best-1.weights.h5"
    r = subprocess.run(
        [sys.executable, "-c", FILL_DURING_WEIGHTS, str(target)], capture_output=True, text=True, env=env, timeout=300
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr and "Exception ignored" not in r.stderr, r.stderr
    assert r.stderr.strip().splitlines()[-1] == f"convatt: error: {target}: cannot write this file: File too large"
    assert list(tmp_path.iterdir()) == []  # no temporary file left


def counts_by_command() -> dict[str, tuple[int, int]]:
    """{command: (rows, rows run as a process of their own)}, in the table's order."""
    rows = CASES + SLURM_RUNS_CASES
    return {
        c: (sum(r.command == c for r in rows), sum(r.command == c and r.process for r in rows))
        for c in Counter(r.command for r in rows)
    }


if __name__ == "__main__":  # the table of docs/bad-inputs.md
    counts = counts_by_command()
    print("| command | bad-input rows | of them in a process of their own |\n|---|---:|---:|")
    for command, (n, processes) in counts.items():
        print(f"| `{command}` | {n} | {processes} |")
    skipped = sum(c.root_writes for c in CASES + SLURM_RUNS_CASES)
    total = sum(n for n, _ in counts.values())
    print(f"| all | {total} | {sum(p for _, p in counts.values())} |")
    print(f"\n{skipped} rows (read-only directories) are skipped when the tests run as root.")
