"""Real (tiny) training runs: they learn, write complete run directories, resume."""

import csv
import json
import os
import signal
import subprocess
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import keras
import numpy as np
import pandas as pd
import pytest
from float_order import close_to
from helpers import (
    LINES,
    PTB_SAMPLE,
    TAGGING_UD_SIZE,
    TINY_SEEDS,
    TINY_VARIANTS,
    lock_held,
    pausing_command,
    tiny_command,
    tiny_options,
    train_stopped_in_epoch,
)

from convatt import machine
from convatt.data import load_corpus
from convatt.errors import ConvattError
from convatt.inference.evaluation import evaluate_run
from convatt.rundir import provenance
from convatt.training import tagger_trainer
from convatt.training.trainer import train_run


def read_csv(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def test_tiny_ud_run_beats_the_majority_tag(tiny_ud_run):
    """The shared tiny UD run of SAN+PE[add] learned to tag: 10 points above the majority tag."""
    run = tiny_ud_run
    result = json.loads((run / "result.json").read_text())
    limit = TAGGING_UD_SIZE["limit"]
    corpus = load_corpus("ud", LINES)
    train_tags = Counter(tag for s in corpus.train[:limit] for _, tag in s)
    majority = train_tags.most_common(1)[0][0]
    test_tokens = [tag for s in corpus.test[:limit] for _, tag in s]
    baseline = sum(tag == majority for tag in test_tokens) / len(test_tokens)
    assert result["test"]["n_all"] == len(test_tokens)
    assert result["test"]["all"] > baseline + 0.10, (result["test"]["all"], baseline)


def test_run_directory_is_complete(tiny_runs):
    for variant in TINY_VARIANTS:
        for seed in TINY_SEEDS:
            run = tiny_runs / "ptb" / variant / f"seed{seed}"
            result = json.loads((run / "result.json").read_text())
            assert (result["variant"], result["seed"], result["preset"]) == (variant, seed, "ptb")
            assert result["is_sample"] and "not comparable" in result["corpus_note"]
            assert result["epochs_run"] == 2 and 1 <= result["best_epoch"] <= 2
            assert result["source_commit"] == provenance.source_commit()  # "" outside a git checkout
            assert f", {os.cpu_count()} CPUs, " in result["machine"]
            here = machine.platform()  # the CPU, the kernels' instruction sets, oneDNN, the packages
            assert [result[k] for k in ("cpu", "cpu_features", "onednn", "packages")] == [
                here.cpu,
                here.cpu_features,
                here.onednn,
                here.packages,
            ]
            for split in ("dev", "test"):
                r = result[split]
                assert 0 <= r["all"] <= 1 and r["n_all"] > 0 and r["per_tag"]
            history = read_csv(run / "history.csv")
            assert [int(h["epoch"]) for h in history] == [1, 2]
            # early stopping on the original's batch-mean metric; the best epoch's weights restored
            selection = [float(h["dev_batch_mean_accuracy"]) for h in history]
            assert result["best_epoch"] == 1 + int(np.argmax(selection))
            best = history[result["best_epoch"] - 1]
            assert result["dev"]["all"] == pytest.approx(float(best["dev_accuracy"]), abs=1e-6)
            curve = read_csv(run / "curve.csv")
            assert [int(c["step"]) for c in curve] == [2, 4, 6, 8, 10]  # 5 batches/epoch
            assert not (run / "checkpoint").exists() and not (run / ".lock").exists()
            model = keras.saving.load_model(run / "model.keras")
            assert model.count_params() == result["parameters"]


def test_seeds_differ_and_a_finished_run_is_not_redone(tiny_runs, capsys):
    a = json.loads((tiny_runs / "ptb/san-pe-add/seed1/result.json").read_text())
    b = json.loads((tiny_runs / "ptb/san-pe-add/seed2/result.json").read_text())
    assert a["dev"]["all"] != b["dev"]["all"]
    before = os.path.getmtime(tiny_runs / "ptb/san-pe-add/seed1/result.json")
    again = train_run(tiny_options(tiny_runs / "ptb/san-pe-add/seed1"), log=print)
    assert again == a and "nothing to do" in capsys.readouterr().out
    assert os.path.getmtime(tiny_runs / "ptb/san-pe-add/seed1/result.json") == before


def test_a_directory_holding_another_run_is_refused(tiny_runs):
    with pytest.raises(ConvattError, match=r"finished run with other options \(seed: 1 -> 3\)"):
        train_run(tiny_options(tiny_runs / "ptb/san-pe-add/seed1", seed=3))


def test_a_live_lock_is_refused(tmp_path):
    with lock_held(tmp_path / ".lock", "otherhost pid 4242", seconds=60):
        with pytest.raises(ConvattError, match=r"another process \(otherhost pid 4242\)"):
            train_run(tiny_options(tmp_path), log=lambda s: None)


def test_a_run_that_failed_on_bad_data_can_be_rerun_with_good_data_past_a_stale_lock(tmp_path):
    """A lock file left by a killed process (even an empty one) holds no lock."""
    with pytest.raises(ConvattError, match="corpus path not found"):
        train_run(tiny_options(tmp_path / "run", data=str(tmp_path / "missing")), log=lambda s: None)
    assert not (tmp_path / "run" / "config.json").exists()
    (tmp_path / "run").mkdir(exist_ok=True)
    (tmp_path / "run" / ".lock").write_text("")
    train_run(tiny_options(tmp_path / "run", epochs=1, limit=32), log=lambda s: None)
    assert (tmp_path / "run" / "result.json").exists() and not (tmp_path / "run" / ".lock").exists()


def test_nan_loss_stops_with_a_clear_message(tmp_path, monkeypatch):
    build = tagger_trainer.build_tagger

    def poisoned(*args, **kwargs):
        model = build(*args, **kwargs)
        kernel = model.get_layer("tags").kernel
        kernel.assign(np.full(kernel.shape, np.nan, "float32"))
        return model

    monkeypatch.setattr(tagger_trainer, "build_tagger", poisoned)
    with pytest.raises(ConvattError, match=r"loss became nan at epoch 1, batch 1: training diverged"):
        train_run(tiny_options(tmp_path / "run"), log=lambda s: None)
    assert not (tmp_path / "run" / "result.json").exists()
    assert not (tmp_path / "run" / ".lock").exists()


# One thread per process: TensorFlow's multi-threaded float sums round differently from
# run to run on a loaded CPU, and RMSprop turns such differences in near-zero gradients
# into whole steps; with one thread two processes compute the same numbers.
ONE_THREAD = {"TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1"}


def _start(out, env: dict | None = None, limit: int = 160):
    """A tiny run that pauses in epoch 2, batch 1 (see `pausing_command`)."""
    return subprocess.Popen(
        pausing_command(out, limit),
        env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _uninterrupted(request, tmp_path, env: dict) -> Callable[[], Path]:
    """The kill test's run, never interrupted, as a call that returns its directory once it is
    finished. Under TensorFlow the shared `tiny_runs` one (trained in a pytest process; its
    numbers equal a one-thread CLI run's within the test's 1e-4). Under JAX, where `make test`
    runs only the jax_too tests and `tiny_runs` would train four runs for this one: a CLI run
    started now, beside the interrupted one."""
    if keras.backend.backend() == "tensorflow":
        reference = request.getfixturevalue("tiny_runs") / "ptb" / "san-pe-add" / "seed1"
        return lambda: reference
    reference = tmp_path / "reference"
    process = subprocess.Popen(
        tiny_command(reference), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=os.environ | env
    )

    def finished() -> Path:
        assert process.wait(timeout=600) == 0, process.stderr.read().decode()[-2000:]
        process.stderr.close()
        return reference

    return finished


def assert_resumed_as_uninterrupted(run: Path, reference: Path) -> None:
    """The resumed `run` ended where the uninterrupted `reference` did: numbers to 1e-4 (columns,
    epochs and steps exactly), a margin for rounding between two processes or multi-threaded
    sums; a resume that lost the optimizer's state or a batch is off by far more."""
    for name in ("history.csv", "curve.csv"):
        resumed_rows, reference_rows = (
            pd.read_csv(d / name).drop(columns="seconds", errors="ignore") for d in (run, reference)
        )
        pd.testing.assert_frame_equal(resumed_rows, reference_rows, rtol=1e-4, atol=0, obj=name)
    a, b = (json.loads((d / "result.json").read_text()) for d in (reference, run))
    for key in ("wall_seconds", "source_commit"):  # the reference may be older than a commit made meanwhile
        a.pop(key), b.pop(key)
    assert b == close_to(a)
    weights = [keras.saving.load_model(d / "model.keras").get_weights() for d in (reference, run)]
    assert len(weights[0]) == len(weights[1])
    for x, y in zip(*weights):  # the same margin
        np.testing.assert_allclose(x, y, rtol=1e-4, atol=1e-6)
    # `convatt evaluate` scores the whole test split (the runs trained on --limit 160): the same
    # tokens for both, and the resumed run's kept model as the uninterrupted one's
    evaluated = [evaluate_run(d) for d in (reference, run)]
    test_tokens = sum(len(s) for s in load_corpus("ptb", PTB_SAMPLE).test)
    assert evaluated[0]["n_all"] == test_tokens > b["test"]["n_all"]
    assert evaluated[1] == close_to(evaluated[0])


@pytest.mark.jax_too
def test_a_run_stopped_in_epoch_2_resumes_to_the_uninterrupted_result(request, tmp_path):
    """Stopped as by a signal at epoch 2's first batch (the stop flag the CLI's handler sets, in
    this process), the same options resume from epoch 1's checkpoint and end where the
    uninterrupted run ends. Under TensorFlow that run is the shared `tiny_runs` one; under JAX
    one trained here. The processes killed and signalled are the slow tier's (below)."""
    if keras.backend.backend() == "tensorflow":
        reference = request.getfixturevalue("tiny_runs") / "ptb" / "san-pe-add" / "seed1"
    else:
        reference = tmp_path / "reference"
        train_run(tiny_options(reference), log=lambda s: None)
    run = tmp_path / "stopped"
    train_stopped_in_epoch(tiny_options(run), 2)
    assert json.loads((run / "checkpoint" / "state.json").read_text())["epoch"] == 1
    lines = []
    train_run(tiny_options(run), log=lines.append)
    assert any(line.startswith("resuming from epoch 1") for line in lines)
    assert_resumed_as_uninterrupted(run, reference)


@pytest.mark.jax_too
@pytest.mark.slow  # a process killed and two more started; in-process: the test above
def test_killed_run_resumes_to_the_same_result_and_evaluates_to_it(request, tmp_path):
    # under JAX the processes share their compiled programs (the same shapes), as make's runs do
    env = ONE_THREAD | {"JAX_COMPILATION_CACHE_DIR": str(tmp_path / "jax-cache")}
    uninterrupted = _uninterrupted(request, tmp_path, env)
    run = tmp_path / "interrupted"
    proc = _start(run, env)
    for line in proc.stdout:  # power loss in the middle of epoch 2
        if line.startswith("epoch 2/2  batch 1/"):
            proc.send_signal(signal.SIGKILL)
            break
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert not (run / "result.json").exists()
    assert json.loads((run / "checkpoint" / "state.json").read_text())["epoch"] == 1

    reference = uninterrupted()
    resumed = subprocess.run(tiny_command(run), check=True, capture_output=True, text=True, env=os.environ | env)
    assert "resuming from epoch 1" in resumed.stdout
    assert_resumed_as_uninterrupted(run, reference)


SIGNALLED_LIMIT = 64  # 2 batches an epoch: nothing here compares numbers


def _signalled_in_epoch_2(run: Path, signum: int) -> list[str]:
    """The lines of a pausing run in `run` sent `signum` on "epoch 2/2  batch 1/": it stops,
    exit 130, leaving epoch 1's checkpoint and no lock."""
    proc, lines = _start(run, limit=SIGNALLED_LIMIT), []
    for line in proc.stdout:
        lines.append(line)
        if line.startswith("epoch 2/2  batch 1/"):
            proc.send_signal(signum)
            break
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "rerun the same command to resume" in out
    assert not (run / ".lock").exists() and not (run / "result.json").exists()
    assert json.loads((run / "checkpoint" / "state.json").read_text())["epoch"] == 1
    return lines + out.splitlines()


@pytest.mark.slow  # two processes signalled; the stop flag in-process: the test above it
def test_a_signal_leaves_a_resumable_directory(tmp_path):
    """Both signals take the stop flag's path: the run stops even though the process
    swallows the KeyboardInterrupt (a handler that only raised it would run on, exit 0).
    SIGTERM stops a new run; the same command resumes it, from epoch 1, and SIGINT stops
    that in epoch 2. It resumes again, in-process, where the stop flag alone, set as the
    CLI's handler sets it and its KeyboardInterrupt lost (a backend may swallow it: JAX's gc
    callback does), stops it again after the batch (that a resumed run ends where an
    uninterrupted one does, the kill test checks)."""
    run = tmp_path / "run"
    assert not any(line.startswith("resuming") for line in _signalled_in_epoch_2(run, signal.SIGTERM))
    assert any(line.startswith("resuming from epoch 1") for line in _signalled_in_epoch_2(run, signal.SIGINT))
    resumed = train_stopped_in_epoch(tiny_options(run, limit=SIGNALLED_LIMIT), 2)
    assert any(line.startswith("resuming from epoch 1") for line in resumed)
    assert json.loads((run / "checkpoint" / "state.json").read_text())["epoch"] == 1
    assert not (run / "result.json").exists() and not (run / ".lock").exists()


@pytest.mark.slow  # a run of its own; the policies' training step: tests/test_model.py
def test_a_mixed_bfloat16_run_trains_and_is_recorded(tmp_path):
    from convatt.rundir.run_config import RunConfig

    options = tiny_options(tmp_path / "run", epochs=1, limit=32, precision="mixed_bfloat16")
    result = train_run(options, log=lambda s: None)
    config = RunConfig.load(tmp_path / "run")
    assert config.precision == "mixed_bfloat16" and config.setting.label() == "mixed_bfloat16, limit 32, max 1 epoch"
    model = keras.saving.load_model(tmp_path / "run" / "model.keras")
    assert model.get_layer("attention_1").compute_dtype == "bfloat16"
    assert (
        model.get_layer("tags").compute_dtype == "float32"
        and model.get_layer("attention_1").variable_dtype == "float32"
    )
    assert 0 < result["test"]["all"] <= 1
