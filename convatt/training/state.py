"""Where a run's training stands: its dev score, and the state an epoch checkpoint keeps.

`TrainState` is what `checkpoint/state.json` holds; the training callbacks
(`convatt.training.callbacks`) each update their part of it during `fit`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from convatt.errors import ConvattError
from convatt.protocol import TrainingProtocol
from convatt.rundir.run_config import RunConfig
from convatt.rundir.schema import DEV_BITS_COLUMN, check_types


@dataclass(frozen=True)
class DevScore:
    """Dev accuracy over non-PAD tokens: exact, and as the original's `val_true_acc`
    (per batch of `batch_size` sequences, averaged over batches). Each kind of run measures
    it in its trainer's `measure_dev` hook."""

    exact: float
    batch_mean: float
    bits_per_symbol: float | None = None  # a causal sequence task's (`convatt.sequence`)

    def selection(self, protocol: TrainingProtocol) -> float:
        """The early-stopping metric of `protocol`."""
        return self.batch_mean if protocol.early_stopping == "batch-mean" else self.exact

    def columns(self) -> dict:
        columns = {"dev_accuracy": round(self.exact, 6), "dev_batch_mean_accuracy": round(self.batch_mean, 6)}
        if self.bits_per_symbol is not None:
            columns[DEV_BITS_COLUMN] = round(self.bits_per_symbol, 6)
        return columns


@dataclass
class TrainState:
    """Where training stands after the last finished epoch (checkpoint/state.json)."""

    epoch: int = 0
    step: int = 0
    best_dev: float = -1.0  # the best early-stopping metric so far
    best_epoch: int = 0
    bad_epochs: int = 0
    seconds: float = 0.0
    history: list[dict] = field(default_factory=list)
    curve: list[dict] = field(default_factory=list)
    started_from: dict = field(default_factory=dict)  # `SourceRun` of a run started from another (--from)

    def should_continue(self, run: RunConfig) -> bool:
        return self.epoch < run.epochs and self.bad_epochs < run.patience

    def record_epoch(self, row: dict, seconds: float) -> None:
        """A finished epoch's history row."""
        self.epoch, self.seconds = row["epoch"], self.seconds + seconds
        self.history.append(row)

    def judge(self, selection: float) -> bool:
        """Early stopping's bookkeeping for the epoch just recorded; whether it improved the
        metric (strictly, as Keras' EarlyStopping with min_delta 0)."""
        improved = selection > self.best_dev
        if improved:
            self.best_dev, self.best_epoch, self.bad_epochs = selection, self.epoch, 0
        else:
            self.bad_epochs += 1
        return improved

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict, where: Path | None = None) -> TrainState:
        """Read state.json, checking types and that its numbers agree with each other."""
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        check_types(cls, {k: v for k, v in values.items() if k not in ("history", "curve")}, where, "state")
        for key in ("history", "curve"):
            rows = values.get(key, [])
            if not (isinstance(rows, list) and all(isinstance(r, dict) for r in rows)):
                raise ConvattError(f"damaged state: {key} is not a list of rows", where)
        state = cls(**values)
        consistent = (
            1 <= state.epoch == len(state.history)
            and 1 <= state.best_epoch <= state.epoch
            and 0 <= state.bad_epochs <= state.epoch
            and state.step >= 0
        )
        if not consistent:
            raise ConvattError(
                f"damaged state: epoch {state.epoch}, best epoch {state.best_epoch}, "
                f"{len(state.history)} history rows do not agree",
                where,
            )
        return state
