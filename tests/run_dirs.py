"""Run directories for the tests of the tables: clones of the real tiny runs with known numbers."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest


def result_files(root: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(root.rglob("result.json"))]


def clone_run(src: Path, dst: Path, config: dict | None = None, **changes) -> Path:
    """A copy of the run `src` at `dst` with result.json fields changed (dotted keys: "test.all")
    and config.json fields set from `config`."""
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("model.keras", "checkpoint"))
    if config:
        options = json.loads((dst / "config.json").read_text())
        (dst / "config.json").write_text(json.dumps({**options, **config}))
    result = json.loads((dst / "result.json").read_text())
    for key, value in changes.items():
        where = result
        *path, last = key.split(".")
        for part in path:
            where = where[part]
        where[last] = value
    (dst / "result.json").write_text(json.dumps(result))
    return dst


FULL_PROTOCOL = {"limit": None, "epochs": 100}  # clones of the tiny runs, as if run as the paper


def clone_ud_run(
    src: Path,
    runs: Path,
    treebank: str,
    variant: str,
    seed: int,
    config: dict = FULL_PROTOCOL,
    directory_seed: int | None = None,
    **changes,
) -> Path:
    """A clone of the run `src` as a UD run of `treebank` and `variant`, where `make ud-all`
    puts it under `runs` (the directory's seed `directory_seed`, default `seed`)."""
    from convatt.model.variants import VARIANTS

    dst = runs / "ud" / f"UD_{treebank}" / variant / f"seed{directory_seed or seed}"
    ud = {"preset": "ud", "corpus": treebank, "is_sample": False, "variant": variant, "seed": seed}
    return clone_run(src, dst, config, label=VARIANTS[variant].label, **ud, **changes)


def assert_same(ours, expected) -> None:
    """Equal to 1e-9, or both missing (a metric with no tokens, e.g. no OOV token in a tiny run)."""
    if expected is None or np.isnan(expected):
        assert ours is None or np.isnan(ours)
    else:
        assert ours == pytest.approx(expected, abs=1e-9)


def numpy_stats(values: list) -> tuple[float, float]:
    """np.mean and np.std over the non-null values, NaN when there is none (std: below two)."""
    a = np.array([v for v in values if v is not None], dtype=float)
    return (float(np.mean(a)) if a.size else math.nan), (float(np.std(a)) if a.size >= 2 else math.nan)


def one_tiny_run(tiny_runs: Path) -> Path:
    return sorted(tiny_runs.rglob("result.json"))[0].parent
