"""Shared fixtures: the embedded corpora and a runs root made by real tiny training runs."""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import sys
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from filelock import FileLock

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
if os.environ.get("KERAS_BACKEND", "tensorflow") == "tensorflow":
    from convatt.cli._common import block_jax  # TFLite would import JAX for nothing

    block_jax()

# A progress line after every batch in the runs' logs (by default one line an epoch): the
# kill and signal tests act on the line "epoch 2/2  batch 1/...", in the middle of an epoch.
os.environ.setdefault("CONVATT_PROGRESS_EVERY", "1")

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
    from convatt.training.trainer import TrainOptions

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
    return TrainOptions(**{**base, **changes})


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


def built_once(tmp_path_factory, name: str, builds: dict[str, Callable[[Path], None]]) -> Path:
    """A directory `name` holding `builds` (a path inside it -> what writes that path), each
    built once per test session, shared by its xdist workers.

    A session fixture is made once per worker: with `-n 2` each worker would train the same
    tiny runs again. The first worker to get to a path builds it in the session's shared
    temporary directory, under that path's file lock; the others wait, then read the same
    directory (its tests only read it). The workers take the paths in opposite orders: two
    that need the directory at once train different runs side by side, neither idle until
    the other has trained them all. Paths already built (by another fixture) are not built again."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    # one per session, beside each worker's own; without xdist the session's own, so that two
    # fixtures building paths of the same directory (one a subset of the other's) share them
    shared = tmp_path_factory.getbasetemp() if worker is None else tmp_path_factory.getbasetemp().parent
    directory, marks = shared / name, shared / f"{name}.marks"  # marks: kept out of the runs root
    marks.mkdir(exist_ok=True)
    order = list(builds) if int((worker or "gw0").removeprefix("gw")) % 2 == 0 else list(reversed(builds))
    for path in order:
        mark = marks / path.replace("/", "-")
        with FileLock(f"{mark}.lock"):
            if not Path(f"{mark}.finished").exists():
                shutil.rmtree(directory / path, ignore_errors=True)  # what a worker that failed here left
                (directory / path).parent.mkdir(parents=True, exist_ok=True)
                builds[path](directory / path)
                Path(f"{mark}.finished").touch()
    return directory


def _tiny_run(variant: str, seed: int) -> Callable[[Path], None]:
    from convatt.training.trainer import train_run

    return lambda out: train_run(tiny_options(out, variant, seed), log=lambda s: None)


@pytest.fixture(scope="session")
def tiny_runs(tmp_path_factory) -> Path:
    """A runs root `ptb/<variant>/seed<S>/` of real 2-epoch runs on 160 PTB-sample sentences."""
    builds = {f"ptb/{v}/seed{seed}": _tiny_run(v, seed) for v in TINY_VARIANTS for seed in TINY_SEEDS}
    return built_once(tmp_path_factory, "runs", builds)


def _small_run(out: Path) -> None:
    from convatt.training.trainer import train_run

    train_run(tiny_options(out, epochs=1, limit=30, curve_every=0), log=lambda s: None)


@pytest.fixture(scope="session")
def small_run(tmp_path_factory) -> Path:
    """One finished 1-epoch PTB run on 30 sentences without a curve (test_bad_inputs.py's
    RUN_OPTIONS), for the tests that only read it or copy it."""
    return built_once(tmp_path_factory, "small-run", {"run": _small_run}) / "run"


INSPECT_VARIANTS = ("san-pe-add", "san-p-r", "san-pe-add-temp", "san-pe-add-conv", "san-pe-add-conv2d")
TAGGING_UD_SIZE = dict(epochs=2, limit=300)  # SAN+PE[add]'s tiny UD run: it must tag (test_training.py)


def _tiny_ud_run(variant: str) -> Callable[[Path], None]:
    from convatt.training.trainer import train_run

    size = TAGGING_UD_SIZE if variant == "san-pe-add" else dict(epochs=1, limit=64)
    options = lambda out: tiny_options(out, variant, preset="ud", data=str(LINES), curve_every=0, **size)
    return lambda out: train_run(options(out), log=lambda s: None)


def _ud_run_path(variant: str) -> str:
    return f"ud/UD_English-LinES/{variant}/seed1"


@pytest.fixture(scope="session")
def tiny_ud_runs(tmp_path_factory) -> Path:
    """A runs root `ud/UD_English-LinES/<variant>/seed1/` of real tiny UD runs, one per variant of
    INSPECT_VARIANTS (SAN+PE[add]: 2 epochs on 300 sentences, so that it tags; the others 1 on 64)."""
    return built_once(tmp_path_factory, "ud-runs", {_ud_run_path(v): _tiny_ud_run(v) for v in INSPECT_VARIANTS})


@pytest.fixture(scope="session")
def tiny_ud_run(tmp_path_factory) -> Path:
    """`tiny_ud_runs`' SAN+PE[add] run alone (the one that tags), for the tests that need no other."""
    root = built_once(tmp_path_factory, "ud-runs", {_ud_run_path("san-pe-add"): _tiny_ud_run("san-pe-add")})
    return root / _ud_run_path("san-pe-add")


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
