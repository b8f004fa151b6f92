"""Finished run directories with hand-made histories and curves, written through the
run directory's schema (`RunConfig`, `RunResult`) as `convatt train` writes them."""

from __future__ import annotations

import csv
from pathlib import Path

from convatt.model.variants import VARIANTS
from convatt.rundir.run_config import RunConfig
from convatt.rundir.run_result import RunResult
from convatt.rundir.schema import CURVE_COLUMNS, HISTORY_COLUMNS


def _write_csv(path: Path, columns: list[str], rows: list[dict]) -> None:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)


def write_run(
    root: Path,
    variant: str,
    seed: int,
    dev_by_epoch: list[float],
    dev_by_step: list[float],
    preset: str = "ptb",
    corpus: str = "PTB sample",
    curve_every: int = 100,
    test_all: float = 0.9,
    **config,
) -> Path:
    """A run of `variant` under `root` whose history.csv has `dev_by_epoch` (epochs 1..n) and whose
    curve.csv has `dev_by_step` at steps curve_every, 2 curve_every, ..., spread over the epochs."""
    out = root / preset / corpus / variant / f"seed{seed}"
    out.mkdir(parents=True)
    RunConfig(
        preset=preset, variant=variant, seed=seed, data="/data", out=str(out), curve_every=curve_every, **config
    ).save(out)
    history = [
        {
            "epoch": e,
            "loss": 1.0 / e,
            "train_accuracy": acc,
            "dev_accuracy": acc,
            "dev_batch_mean_accuracy": acc,
            "seconds": 1.5,
        }
        for e, acc in enumerate(dev_by_epoch, start=1)
    ]
    _write_csv(out / "history.csv", HISTORY_COLUMNS, history)
    batches_per_epoch = -(-curve_every * len(dev_by_step) // len(dev_by_epoch))  # the curve ends in the last epoch
    curve = [
        {
            "step": curve_every * i,
            "epoch": -(-curve_every * i // batches_per_epoch),
            "dev_accuracy": acc,
            "dev_batch_mean_accuracy": acc,
        }
        for i, acc in enumerate(dev_by_step, start=1)
    ]
    _write_csv(out / "curve.csv", CURVE_COLUMNS, curve)
    scores = {"all": test_all, "oov": 0.5, "ambiguous": 0.8, "n_all": 100, "n_oov": 10, "n_ambiguous": 30}
    best = max(range(len(dev_by_epoch)), key=lambda i: dev_by_epoch[i]) + 1
    RunResult(
        preset=preset,
        variant=variant,
        label=VARIANTS[variant].label,
        seed=seed,
        corpus=corpus,
        is_sample=False,
        corpus_note="",
        vectors_note="",
        mask_padding=False,
        dev={**scores, "all": max(dev_by_epoch)},
        test=scores,
        parameters=1000,
        epochs_run=len(dev_by_epoch),
        best_epoch=best,
        wall_seconds=12.5,
        backend="tensorflow",
        convatt_version="0.1.0",
    ).save(out)
    return out
