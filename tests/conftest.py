"""Shared fixtures: runs roots made by real tiny training runs (the helpers they and the tests
share: helpers.py)."""

from __future__ import annotations

import os
import shutil
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

from helpers import INSPECT_VARIANTS, LINES, TAGGING_UD_SIZE, TINY_SEEDS, TINY_VARIANTS, tiny_options  # noqa: E402


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
    return built_once(tmp_path_factory, "runs", _tiny_builds(TINY_VARIANTS))


@pytest.fixture(scope="session")
def tiny_plain_runs(tmp_path_factory) -> Path:
    """`tiny_runs`' root with its SAN+PE[add] runs built (both seeds), for the tests that start
    from them: they wait for these two runs only (the +Conv2d ones are other tests' needs)."""
    return built_once(tmp_path_factory, "runs", _tiny_builds(("san-pe-add",)))


def _tiny_builds(variants) -> dict[str, Callable[[Path], None]]:
    """`tiny_runs`' layout, `ptb/<variant>/seed<S>`, for `variants` and every seed."""
    return {f"ptb/{v}/seed{seed}": _tiny_run(v, seed) for v in variants for seed in TINY_SEEDS}


def _small_run(out: Path) -> None:
    from convatt.training.trainer import train_run

    train_run(tiny_options(out, epochs=1, limit=30, curve_every=0), log=lambda s: None)


@pytest.fixture(scope="session")
def small_run(tmp_path_factory) -> Path:
    """One finished 1-epoch PTB run on 30 sentences without a curve (test_bad_inputs.py's
    RUN_OPTIONS), for the tests that only read it or copy it."""
    return built_once(tmp_path_factory, "small-run", {"run": _small_run}) / "run"


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
