"""What the tests share besides fixtures: the embedded corpora's paths, the tiny runs' options
and command lines, stopping a run in an epoch, another process holding a lock. Test files
import it (`from helpers import ...`); conftest.py's fixtures build on it."""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PTB_SAMPLE = ROOT / "convatt" / "embedded" / "ptb-sample.tar.gz"


def _extract_ptb_sample() -> Path:
    """The sample's .mrg files unpacked, for the tests that read or copy single files."""
    target = Path(tempfile.mkdtemp(prefix="convatt-ptb-sample-"))
    with tarfile.open(PTB_SAMPLE) as tar:
        tar.extractall(target, filter="data")
    atexit.register(shutil.rmtree, target, ignore_errors=True)
    return target


PTB_SAMPLE_FILES = _extract_ptb_sample()
UD_DIR = ROOT / "convatt" / "embedded" / "ud-2.2"
LINES = UD_DIR / "UD_English-LinES"
TINY_VARIANTS = ("san-pe-add", "san-pe-add-conv2d")
# The tiny runs compiled under JAX (eager JAX runs op by op: minutes for a tiny run), not under
# TensorFlow (XLA's compile takes longer than such a run).
TINY_JIT = os.environ.get("KERAS_BACKEND", "tensorflow") == "jax"
TINY_SEEDS = (1, 2)


def tiny_options(out: Path, variant: str = "san-pe-add", seed: int = 1, **changes):
    from convatt.rundir.run_config import RunConfig

    base = dict(
        preset="ptb",
        variant=variant,
        seed=seed,
        data=str(PTB_SAMPLE),
        out=str(out),
        epochs=2,
        limit=160,
        curve_every=2,
        jit_compile=TINY_JIT,
    )
    return RunConfig(**{**base, **changes})


def train_stopped_in_epoch(options, epoch: int) -> list[str]:
    """Train `options`, stopped as by a signal at the first batch of `epoch`: the run keeps
    the checkpoint of epoch `epoch - 1`. Returns the lines the run logged."""
    from convatt.training import interrupt
    from convatt.training.trainer import train_run

    first_batch = f"epoch {epoch}/{options.epochs}  batch 1/"
    logged = []

    def stop(line: str) -> None:
        logged.append(line)
        if line.startswith(first_batch):
            interrupt.request_stop()

    try:
        with pytest.raises(KeyboardInterrupt):
            train_run(options, log=stop)
    finally:
        interrupt.clear()
    return logged


def tiny_command(out: Path, variant: str = "san-pe-add", seed: int = 1, limit: int = 160) -> list[str]:
    """The `convatt train` command line of `tiny_options` (same run, same results)."""
    import sys

    return [
        sys.executable,
        "-m",
        "convatt",
        "train",
        "--preset",
        "ptb",
        "--variant",
        variant,
        "--seed",
        str(seed),
        "--data",
        str(PTB_SAMPLE),
        "--limit",
        str(limit),
        "--epochs",
        "2",
        "--curve-every",
        "2",
        "--jit-compile",
        "on" if TINY_JIT else "off",
        "--out",
        str(out),
    ]


PAUSING_CLI = """
import sys, time
from convatt.training import trainer as training

update = training.Progress.update


def update_then_pause(self, i, loss, acc):
    update(self, i, loss, acc)
    if (self.epoch, i) == (2, 1):  # the test signals now; wait for it and, as a backend may, swallow it
        try:
            time.sleep(120)
        except KeyboardInterrupt:
            pass


training.Progress.update = update_then_pause
from convatt.cli import main
sys.exit(main(sys.argv[1:]))
"""


def pausing_command(out: Path, limit: int = 160) -> list[str]:
    """`tiny_command`, but the process waits after printing "epoch 2/2  batch 1/..." and
    swallows the KeyboardInterrupt a signal raises there: a test that signals it on that
    line cannot race (the run never gets ahead of the test), and only the stop flag
    (convatt.training.interrupt) that the CLI's handler sets can stop the run."""
    return [sys.executable, "-c", PAUSING_CLI, *tiny_command(out, limit=limit)[3:]]


INSPECT_VARIANTS = ("san-pe-add", "san-p-r", "san-pe-add-temp", "san-pe-add-conv", "san-pe-add-conv2d")
TAGGING_UD_SIZE = dict(epochs=2, limit=300)  # SAN+PE[add]'s tiny UD run: it must tag (test_training.py)


@contextlib.contextmanager
def lock_held(path: Path, holder: str, seconds: int = 600):
    """Another process holds an flock on `path` (as a trainer does its run lock), writing `holder`."""
    import subprocess

    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                "import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_CREAT | os.O_RDWR); "
                "fcntl.flock(fd, fcntl.LOCK_EX); os.write(fd, sys.argv[2].encode()); print('locked', flush=True); "
                "time.sleep(int(sys.argv[3]))"
            ),
            str(path),
            holder,
            str(seconds),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout.readline().strip() == "locked"
        yield
    finally:
        process.kill()
        process.wait()


def skip_where_keras_is_older_than_the_saver(path: Path) -> None:
    """Skip where the installed Keras is older than the one that saved the `.keras` file `path`:
    an older Keras refuses config keys a newer one writes (e.g. Keras 3.15's `quantization_config`
    of `Embedding`), Keras' own behaviour (docs/layers.md, "Keras versions")."""
    import json
    import zipfile

    import keras
    from packaging.version import Version

    with zipfile.ZipFile(path) as archive:
        saved_by = json.loads(archive.read("metadata.json"))["keras_version"]
    if Version(keras.version()) < Version(saved_by):
        pytest.skip(f"{path.name} was saved by Keras {saved_by}; Keras {keras.version()} refuses its newer keys")
