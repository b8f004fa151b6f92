"""Nothing lost, nothing silently wrong (issue 18): one test per class of damage or bad input.

Real tiny runs (one interrupted after epoch 1, copied for each test), real files, real
processes for the command line.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
from pathlib import Path

import pytest
from cli_process import convatt
from helpers import PTB_SAMPLE_FILES, tiny_command, tiny_options, train_stopped_in_epoch

from convatt.errors import ConvattError
from convatt.inference.evaluation import evaluate_run
from convatt.rundir.modelfiles import check_weights_file
from convatt.rundir.run_config import RunConfig
from convatt.training.trainer import train_run

QUIET = lambda line: None


def one_line_error(r, *fragments):
    """Exit 2 and one `convatt: error:` line (TensorFlow's start-up lines may precede it)."""
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("convatt: error:"), r.stderr
    for fragment in fragments:
        assert fragment in last, last


def snapshot(directory: Path) -> dict:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def ptb_copy(tmp_path_factory) -> Path:
    """A copy of the PTB sample that a test may change."""
    data = tmp_path_factory.mktemp("data") / "ptb"
    shutil.copytree(PTB_SAMPLE_FILES, data)
    return data


LAUNCHER_FILES = ("train.log", "slurm-12_3.out", ".lock")


@pytest.fixture(scope="module")
def interrupted(tmp_path_factory, ptb_copy) -> Path:
    """A run stopped (as by a signal) after epoch 1 of 2: its checkpoint is epoch 1. It starts
    in a launcher's fresh directory: make and Slurm create it and append train.log before
    convatt starts, and a write killed before its rename left a .tmp file."""
    run = tmp_path_factory.mktemp("interrupted") / "run"
    run.mkdir()
    for name in LAUNCHER_FILES:
        (run / name).write_text("started\n")
    (run / ".tmp-999-config.json").write_text("{")
    train_stopped_in_epoch(tiny_options(run, data=str(ptb_copy)), 2)
    return run


@pytest.fixture
def run_copy(interrupted, tmp_path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(interrupted, copy)
    return copy


@pytest.fixture(scope="module")
def resumed(interrupted, tmp_path_factory, ptb_copy) -> tuple[Path, list[str]]:
    """The interrupted run resumed to its end, and the lines it logged. Its config.json made
    older (no fingerprint), which must resume with a note; a file of someone else's in its
    checkpoint/ and its best-weights file truncated, which the resume must find and rewrite."""
    run = tmp_path_factory.mktemp("finished") / "run"
    shutil.copytree(interrupted, run)
    config = json.loads((run / "config.json").read_text())
    del config["data_fingerprint"]
    (run / "config.json").write_text(json.dumps(config))
    (run / "checkpoint" / "mine").write_text("x")
    truncate(run / "checkpoint" / "best-1.weights.h5")
    lines = []
    train_run(tiny_options(run, data=str(ptb_copy)), log=lines.append)
    return run, lines


@pytest.fixture(scope="module")
def finished(resumed) -> Path:
    return resumed[0]


# ---- the run directory is recognised; nothing of someone else's is written or deleted ----


@pytest.mark.parametrize(
    "contents",
    [
        {"checkpoint/mine": "x", "curve.csv": "y"},
        {"result.json": json.dumps({"preset": "ptb", "variant": "san", "seed": 1, "corpus": "x", "test": {}})},
        {"config.json": json.dumps({"format": "something-else", "seed": 1})},
        {"config.json": json.dumps({"name": "not a run"}), "notes.txt": "mine"},
        {"notes.txt": "mine"},
    ],
    ids=["checkpoint-and-curve", "unrelated-result", "other-format", "other-json", "one-file"],
)
def test_a_directory_that_is_not_a_run_is_refused_untouched(tmp_path, contents):
    for name, text in contents.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    before = snapshot(tmp_path)
    with pytest.raises(ConvattError, match="not a convatt run"):
        train_run(tiny_options(tmp_path), log=QUIET)
    assert snapshot(tmp_path) == before


def test_out_naming_a_file_is_refused(tmp_path):
    (tmp_path / "f").write_text("mine")
    with pytest.raises(ConvattError, match="names a file"):
        train_run(tiny_options(tmp_path / "f"), log=QUIET)
    assert (tmp_path / "f").read_text() == "mine"


def test_a_launchers_fresh_directory_is_a_new_run_and_checkpoint_strangers_stay(interrupted, resumed):
    """A launcher's fresh directory (see `interrupted`) trains as a new run, its files kept and
    the stale .tmp file gone; the resume keeps a file of someone else's in checkpoint/ and meets
    a truncated best-weights file: found before training, and rewritten (best epoch = last)."""
    assert not list(interrupted.rglob(".tmp-*"))
    run, lines = resumed
    assert all((run / name).read_text() == "started\n" for name in ("train.log", "slurm-12_3.out"))
    rewritten = next(i for i, line in enumerate(lines) if "best-1.weights.h5 was damaged; rewritten" in line)
    assert rewritten < next(i for i, line in enumerate(lines) if line.startswith("epoch 2/2"))
    assert (run / "result.json").exists() and (run / "checkpoint" / "mine").read_text() == "x"
    assert not list(run.rglob(".tmp-*"))


def test_a_truncated_weights_file_is_found(run_copy):
    best = run_copy / "checkpoint" / "best-1.weights.h5"
    truncate(best)
    with pytest.raises(ConvattError, match="damaged weights file"):
        check_weights_file(best, "delete it")


# ---- a changed dataset is never resumed --------------------------------------------------


@pytest.mark.parametrize("older", [False, True], ids=["fingerprinted", "older-run"])
def test_resume_on_changed_data_is_refused_naming_what_changed(run_copy, ptb_copy, older):
    """An older run (no fingerprint) has its vocab.json compared, which a new tag changes."""
    if older:
        config = json.loads((run_copy / "config.json").read_text())
        del config["data_fingerprint"]
        (run_copy / "config.json").write_text(json.dumps(config))
    first = ptb_copy / "wsj_0001.mrg"
    original = first.read_text()
    first.write_text(original.replace("(NNP Pierre)", "(NNX Pierre)"))  # a new tag: every id after it shifts
    state = (run_copy / "checkpoint" / "state.json").read_bytes()
    try:
        with pytest.raises(ConvattError) as e:
            train_run(tiny_options(run_copy, data=str(ptb_copy)), log=QUIET)
    finally:
        first.write_text(original)
    assert "tags vocabulary changed" in str(e.value)
    if not older:
        assert "wsj_0001.mrg changed" in str(e.value) and "train split changed" in str(e.value)
    assert (run_copy / "checkpoint" / "state.json").read_bytes() == state  # nothing of the run touched


@pytest.mark.parametrize(
    "state, changes, differ, advice",
    [
        ("unfinished", dict(seed=3), "a different run (seed: 1 -> 3)", "to resume that run, give `--seed 1` instead"),
        ("finished", dict(seed=3), "a finished run with other options (seed: 1 -> 3)", "give `--seed 1` instead"),
        ("finished", dict(epochs=5), "a finished run with other options (epochs: 2 -> 5)", "give `--epochs 2` instead"),
    ],
)
def test_other_options_on_a_run_name_what_differs_whether_it_finished_or_not(
    state, changes, differ, advice, run_copy, finished, ptb_copy, tmp_path
):
    """One path for every run directory asked for with other options: never "nothing to do"
    for a finished run asked for with more epochs, nor a silently resumed other run."""
    if state == "finished":
        run_copy = tmp_path / "finished"
        shutil.copytree(finished, run_copy)
    before = snapshot(run_copy)
    lines = []
    with pytest.raises(ConvattError) as e:
        train_run(tiny_options(run_copy, data=str(ptb_copy), **changes), log=lines.append)
    assert differ in str(e.value) and advice in str(e.value) and "choose another --out" in str(e.value)
    assert str(e.value).startswith(str(run_copy / "config.json")) and not lines
    assert snapshot(run_copy) == before


def test_a_finished_run_asked_for_with_other_execution_options_is_not_redone(finished, ptb_copy):
    before = snapshot(finished)
    lines = []
    train_run(tiny_options(finished, data=str(ptb_copy), jit_compile=True, eval_batch_size=7), log=lines.append)
    assert lines == [f"{finished}: complete (result.json exists, model.keras checked); nothing to do"]
    assert snapshot(finished) == before


def test_older_runs_without_a_fingerprint_resume_with_a_note(resumed):
    finished, lines = resumed
    assert any("kept no data fingerprint" in line for line in lines)
    assert json.loads((finished / "result.json").read_text())["epochs_run"] == 2
    assert "data_fingerprint" in json.loads((finished / "config.json").read_text())


# ---- damaged files: an error naming the file and what to do ------------------------------


def truncate(path: Path, keep: float = 0.5) -> None:
    path.write_bytes(path.read_bytes()[: int(path.stat().st_size * keep)])


@pytest.mark.parametrize(
    "damage, file, says",
    [
        (lambda ckpt: truncate(ckpt / "epoch-1.keras"), "epoch-1.keras", "not a complete Keras model archive"),
        (lambda ckpt: (ckpt / "epoch-1.keras").write_bytes(b""), "epoch-1.keras", "not a complete Keras"),
        (lambda ckpt: truncate(ckpt / "state.json"), "state.json", "damaged: not valid JSON"),
        (lambda ckpt: (ckpt / "state.json").write_text('{"epoch": "one"}'), "state.json", "epoch is 'one'"),
        (lambda ckpt: (ckpt / "epoch-1.keras").unlink(), "epoch-1.keras", "model file not found"),
    ],
    ids=["truncated-model", "empty-model", "truncated-state", "wrong-type-state", "missing-model"],
)
def test_a_damaged_checkpoint_says_which_file_and_what_to_do(run_copy, ptb_copy, damage, file, says):
    damage(run_copy / "checkpoint")
    with pytest.raises(ConvattError) as e:
        train_run(tiny_options(run_copy, data=str(ptb_copy)), log=QUIET)
    assert e.value.path.endswith(file) and says in str(e.value)
    assert f"delete {run_copy / 'checkpoint'} to train this run again from epoch 1" in str(e.value)


@pytest.mark.parametrize(
    "damage, commands, says",
    [
        (lambda run: truncate(run / "model.keras"), ["evaluate"], "model.keras: damaged: not a complete Keras model"),
        (lambda run: truncate(run / "result.json"), ["train"], "damaged: not valid JSON"),
        (
            lambda run: (run / "vocab.json").write_text('{"format": "convatt-vocabularies", "words": [1, 2]}'),
            ["evaluate"],
            "vocab.json: malformed vocabularies file: words is not a list of strings",
        ),
        (
            lambda run: (run / "config.json").write_bytes(b"\xff{}"),
            ["evaluate", "train"],
            "config.json: damaged: not UTF-8",
        ),
    ],
    ids=["model", "result", "vocab", "config"],
)
def test_a_damaged_finished_run_is_reported(finished, ptb_copy, tmp_path, damage, commands, says):
    """By `evaluate`, and by `train` (which reads back a finished run's config.json and result.json)."""
    run = tmp_path / "run"
    shutil.copytree(finished, run)
    damage(run)
    read_back = {"evaluate": evaluate_run, "train": lambda r: train_run(tiny_options(r, data=str(ptb_copy)), log=QUIET)}
    for command in commands:
        with pytest.raises(ConvattError) as e:
            read_back[command](run)
        assert says in str(e.value), command


# ---- options and OS errors: one line, before anything is written --------------------------


@pytest.mark.parametrize("seed", ["-1", "99999999999"])
def test_a_bad_seed_fails_before_anything_is_written(tmp_path, seed):
    r = convatt("train", "--preset", "ptb", "--variant", "san", "--seed", seed, "--out", tmp_path / "run")
    one_line_error(r, "--seed must be between 0 and 4,294,967,295")
    assert not (tmp_path / "run").exists()


def test_a_file_where_a_directory_should_be_is_one_line(tmp_path):
    (tmp_path / "file").write_text("")
    r = convatt("train", "--preset", "ptb", "--variant", "san", "--out", tmp_path / "file" / "run")
    one_line_error(r, str(tmp_path / "file"), "Not a directory")


@pytest.mark.slow  # a training process under a file size limit; a full disk's one line: test_bad_inputs.py
def test_a_full_disk_is_one_line_naming_the_file_and_leaves_no_tmp(tmp_path):
    """RLIMIT_FSIZE makes writes past 1 MB fail (EFBIG), as a full disk fails them (ENOSPC)."""

    def limit_file_size():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))

    run = tmp_path / "run"
    command = tiny_command(run, limit=64)  # 2 batches an epoch: what is checked is the files
    full = subprocess.run(command, capture_output=True, text=True, preexec_fn=limit_file_size)
    one_line_error(full, str(run / "checkpoint"), "File too large")
    assert not list(run.rglob(".tmp-*")) and not (run / "result.json").exists()
    # space again: the run goes on (here stopped once epoch 1's checkpoint, the write that failed, is made)
    train_stopped_in_epoch(tiny_options(run, limit=64), 2)
    assert json.loads((run / "checkpoint" / "state.json").read_text())["epoch"] == 1


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_a_read_only_directory_is_one_line(tmp_path):
    tmp_path.chmod(0o555)
    try:
        r = convatt("train", "--preset", "ptb", "--variant", "san", "--out", tmp_path / "run")
    finally:
        tmp_path.chmod(0o755)
    one_line_error(r, str(tmp_path / "run"), "Permission denied")


# ---- paths and quiet surprises --------------------------------------------------------


def test_an_older_relative_data_path_is_found_from_the_run_directory(tmp_path, finished, ptb_copy, monkeypatch):
    """An older config.json keeps --data as typed, relative to where training started."""
    project = tmp_path / "project"
    shutil.copytree(ptb_copy, project / "data" / "ptb")
    shutil.copytree(finished, project / "runs" / "r1")
    config = json.loads((project / "runs" / "r1" / "config.json").read_text())
    config.update(data="data/ptb", out="runs/r1")
    (project / "runs" / "r1" / "config.json").write_text(json.dumps(config))
    monkeypatch.chdir(tmp_path)  # elsewhere: data/ptb does not exist from here
    assert RunConfig.load(project / "runs" / "r1").data_path(project / "runs" / "r1") == str(project / "data" / "ptb")
    warnings = []
    scores = evaluate_run(project / "runs" / "r1", split="dev", warn=warnings.append)
    assert scores["n_all"] > 0


def test_evaluate_notes_a_limit_run_and_warns_of_tags_never_trained(finished):
    warnings = []
    scores = evaluate_run(finished, split="test", warn=warnings.append)
    assert any("--limit" in w and "whole test split (413 sentences)" in w for w in warnings), warnings
    unseen = next(w for w in warnings if "never seen in training" in w)
    assert "-LRB- (12 tokens)" in unseen and scores["n_all"] > 0
