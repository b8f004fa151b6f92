"""The command line: Table 1c, and bad input reported without a traceback."""

import gzip

import pytest
from cli_process import convatt
from helpers import LINES, PTB_SAMPLE_FILES, ROOT


@pytest.mark.slow  # a process; Table 1c's counts in-process: tests/test_model.py
def test_params_prints_table_1c():
    r = convatt("params", "--preset", "ptb", "--n-words", 20002, "--n-chars", 84, "--n-labels", 47)
    assert r.returncode == 0, r.stderr
    assert "oneDNN" not in r.stderr and "absl" not in r.stderr  # the backend's start-up lines hidden
    rows = {line.split()[0]: line.split() for line in r.stdout.splitlines()[2:]}
    assert rows["san"][2] == "7,691,823"
    expected = {
        "san-pe-add": "+18,000",
        "san-p": "+14,400",
        "san-r": "+480",
        "san-pe-add-temp": "+48",
        "san-pe-add-conv": "+173,760",
        "san-pe-add-conv2d": "+160",
    }
    for variant, delta in expected.items():
        assert rows[variant][-1] == delta, rows[variant]
    assert rows["san-pe-con"][2] == "8,309,935"  # 300 + 64 + 64 = 428 wide
    # Beyond the paper: Shaw et al.'s w^K, w^V (2 x (2*16 + 1) x 91) in each of 4 layers;
    # sinusoids and ALiBi have no parameters.
    assert rows["san-shaw"][3] == f"{4 * 2 * 33 * 91:+,}"
    assert rows["san-sin-add"][3] == "+0" and rows["san-alibi"][3] == "+0"
    # Issue 16, each against SAN+PE[add] (SAN+Denser against SAN), per layer of 4 heads of 91:
    # the 3x3 filters and biases moved before the softmax; two 4x4 talking-heads kernels; narrowing
    # keeps the width (no parameters); denser: queries and keys of 92 (one column more per head)
    # and the Dense layer from 4 heads x 2 segments x 91 back to 364, with its bias.
    denser = 4 * (2 * 364 * 4 * 1 + 728 * 364 + 364)
    expected = {
        "san-pe-add-conv2d-pre": "+160",
        "san-pe-add-talking": f"{4 * 2 * 16:+,}",
        "san-pe-add-narrowing": "+0",
        "san-pe-add-denser": f"{denser:+,}",
        "san-denser": f"{denser:+,}",
    }
    for variant, delta in expected.items():
        assert rows[variant][-1] == delta, rows[variant]


@pytest.mark.parametrize(
    "args, message",
    [
        (["train", "--preset", "ptb", "--variant", "san-pe-ad", "--out", "x"], "Did you mean 'san-pe-add'"),
        (["train", "--preset", "pdb", "--variant", "san", "--out", "x"], "Did you mean 'ptb'"),
        (
            ["train", "--preset", "ud", "--variant", "san", "--data", "/no/such/treebank", "--out", "{tmp}/r"],
            "/no/such/treebank",
        ),
        (["params", "--preset", "pdb"], "Did you mean 'ptb'"),
        (
            ["params", "--preset", "ud", "--n-words", "0", "--n-chars", "5", "--n-labels", "5"],
            "--n-words must be at least 3",
        ),
        (
            ["train", "--preset", "ptb", "--variant", "san", "--limit", "-1", "--out", "{tmp}/r"],
            "--limit must be at least 1",
        ),
        (
            ["train", "--preset", "ptb", "--variant", "san", "--embeddings-limit", "-1", "--out", "{tmp}/r"],
            "--embeddings-limit must be at least 0",
        ),
        (
            ["train", "--preset", "ud", "--variant", "san", "--embeddings", "{tmp}/v.vec", "--out", "{tmp}/r"],
            "--embeddings applies to the ptb preset",
        ),
        (
            [
                "train",
                "--preset",
                "ptb",
                "--variant",
                "san",
                "--embeddings",
                "{tmp}/bad.vec",
                "--limit",
                "20",
                "--out",
                "{tmp}/r",
            ],
            "bad.vec:3",
        ),
    ],
)
def test_bad_arguments_fail_clearly(tmp_path, args, message, capsys):
    """Through `main`, in this process (as a process: the tests below and test_bad_inputs.py)."""
    from convatt.cli import main

    # a vectors file whose second row is one value short of the header's 300
    row = lambda word, n: " ".join([word] + ["0.1"] * n)
    (tmp_path / "bad.vec").write_text("\n".join(["2 300", row("the", 300), row("of", 299)]) + "\n")
    try:
        code = main([a.format(tmp=tmp_path) for a in args])
    except SystemExit as e:  # argparse
        code = e.code
    stderr = capsys.readouterr().err
    assert code == 2 and message in stderr, stderr
    assert "Traceback" not in stderr and stderr.strip().splitlines()[-1].startswith("convatt: error:")


@pytest.mark.parametrize("where", ["{tmp}/a-file", "{tmp}/a-file/logs"])
def test_a_tensorboard_directory_that_cannot_be_written_is_refused_before_the_run_starts(tmp_path, where, capsys):
    from convatt.cli import main

    (tmp_path / "a-file").write_text("not a directory\n")
    args = ["train", "--preset", "ptb", "--variant", "san", "--limit", "20", "--out", f"{tmp_path}/run"]
    code = main([*args, "--tensorboard", where.format(tmp=tmp_path)])
    stderr = capsys.readouterr().err
    assert code == 2 and "(--tensorboard)" in stderr and "cannot write there" in stderr, stderr
    assert "a bug in convatt" not in stderr and len(stderr.strip().splitlines()) == 1, stderr
    assert not (tmp_path / "run").exists()  # nothing written


@pytest.mark.slow  # two processes; the readers' file and line in-process: tests/test_readers_errors.py
def test_a_corrupt_treebank_names_file_and_line(tmp_path):
    bank = tmp_path / "UD_English-LinES"
    bank.mkdir()
    for split in ("train", "dev", "test"):
        lines = gzip.open(LINES / f"en_lines-ud-{split}.conllu.gz", "rt").read().splitlines()
        if split == "dev":
            lines[7] = lines[7].replace("\t", "  ")  # tabs replaced by spaces
        (bank / f"en_lines-ud-{split}.conllu").write_text("\n".join(lines) + "\n")
    r = convatt("train", "--preset", "ud", "--variant", "san", "--data", bank, "--out", tmp_path / "run")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "en_lines-ud-dev.conllu:8" in r.stderr
    debug = convatt("--debug", "train", "--preset", "ud", "--variant", "san", "--data", bank, "--out", tmp_path / "run")
    assert "Traceback" in debug.stderr


@pytest.mark.slow  # a process; the readers' file and line in-process: tests/test_readers_errors.py
def test_unbalanced_mrg_names_file_and_line(tmp_path):
    for f in sorted(PTB_SAMPLE_FILES.glob("wsj_*.mrg")):
        (tmp_path / f.name).write_text(f.read_text())
    broken = tmp_path / "wsj_0003.mrg"
    broken.write_text(broken.read_text().rstrip()[:-1] + "\n")  # drop the last ")"
    r = convatt("params", "--preset", "ptb", "--data", tmp_path)
    assert r.returncode == 2 and "wsj_0003.mrg:" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.slow  # a process starting the backend loudly
def test_debug_shows_the_backends_start_up_and_still_works():
    """Without --debug the start-up lines are hidden: see test_params_prints_table_1c."""
    loud = convatt("--debug", "params", "--preset", "ud", "--n-words", 50, "--n-chars", 9, "--n-labels", 5)
    assert loud.returncode == 0 and "Table 1c" in loud.stdout, loud.stderr


def test_every_option_has_help_and_shows_its_default():
    import argparse

    from convatt.cli import build_parser

    commands = build_parser()._subparsers._group_actions[0].choices
    for name, parser in commands.items():
        text = parser.format_help()
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            assert action.help, f"convatt {name} {action.option_strings or action.dest}: no help text"
            unshown = action.default is None or action.default is False or action.default == argparse.SUPPRESS
            if action.option_strings and not unshown:  # 0 is a default to show (`0 in (False,)` is true)
                assert "default" in (action.help or "").lower() or f"default: {action.default}" in " ".join(
                    text.split()
                ), f"convatt {name} {action.option_strings[0]}: its default {action.default!r} is not shown"


def test_version_is_the_packages_and_setup_cfgs():
    import configparser

    from convatt import __version__

    setup = configparser.ConfigParser()
    setup.read(ROOT / "setup.cfg")
    done = convatt("--version")
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert done.stdout == f"convatt {__version__}\n"
    assert setup["metadata"]["version"] == __version__
