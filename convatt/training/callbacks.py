"""The Keras callbacks a run trains with, one per concern of the paper's protocol.

`convatt.training.loop.Trainer` trains through `keras.Model.fit` with, in this order:

    EpochMeter        per-batch loss and accuracy (as the original's `train_on_batch`), the
                      epoch's running means in the logs; a non-finite loss stops the run
    DevCurve          dev accuracy every `curve_every` batches (curve.csv, Figure 2)
    ProgressLines     a line per ~10% of an epoch, with ETA, when stdout is not a terminal
    StopRequests      a SIGINT/SIGTERM stop request (`interrupt`) -> `model.stop_training`
    DevEvaluation     the epoch's dev accuracy, its history.csv row, `val_*` in the logs
    EarlyStopping     the original's: batch-mean dev accuracy, patience 3, best weights restored
    EpochCheckpoint   the epoch's checkpoint (exact resume), the previous good one kept
    keras' ProgbarLogger, on a terminal (a live bar with ETA)
    EpochSummary      "epoch N: dev accuracy ..." after each epoch
    keras' TensorBoard and CurveToTensorBoard, with `--tensorboard DIR`
    then the user's callbacks, which see `fit`'s usual logs: loss, sparse_categorical_accuracy,
    val_sparse_categorical_accuracy (exact dev accuracy), val_batch_mean_accuracy.

They share the run's `TrainState` (what a checkpoint keeps); each updates its own part.
A stopped run (a stop request) finishes the batch and writes nothing for the partial epoch.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from pathlib import Path

import keras
import numpy as np

from convatt.errors import ConvattError
from convatt.rundir.run_config import RunConfig
from convatt.rundir.schema import CURVE_COLUMNS, CURVE_FILE, HISTORY_COLUMNS, HISTORY_FILE, columns_of
from convatt.rundir.storage import write_csv
from convatt.training import interrupt
from convatt.training.checkpoints import Checkpoints
from convatt.training.feed import TrainBatches
from convatt.training.state import DevScore, TrainState

ACCURACY = "sparse_categorical_accuracy"  # the tagger's compiled metric
Log = Callable[[str], None]
MeasureDev = Callable[[keras.Model], DevScore]  # the model's dev score (the trainer's `measure_dev`)


class StopRequests(keras.callbacks.Callback):
    """After every batch: a stop request (the CLI's SIGINT/SIGTERM handler) ends `fit`.
    An epoch that ends early (a request, or a callback's `model.stop_training` in the middle
    of it) is `stopped`: the callbacks after this one record nothing of it."""

    def __init__(self, n_batches: int):
        super().__init__()
        self.n_batches, self.stopped, self.batches = n_batches, False, 0

    def on_epoch_begin(self, epoch, logs=None):
        self.batches = 0

    def on_train_batch_end(self, batch, logs=None):
        self.batches = batch + 1
        if interrupt.requested():
            self.stopped = self.model.stop_training = True

    def on_epoch_end(self, epoch, logs=None):
        self.stopped = self.stopped or self.batches < self.n_batches


class _RunCallback(keras.callbacks.Callback):
    """A callback on the run's shared state, idle for the partial epoch of a stopped run."""

    def __init__(self, state: TrainState, stop: StopRequests):
        super().__init__()
        self.state, self.stop = state, stop


class EpochMeter(_RunCallback):
    """Loss and token accuracy per batch, as `train_on_batch` gave them (the metrics are reset
    before each batch); their epoch means are what history.csv records. In the logs that
    later callbacks see, they are replaced by the epoch's running means, as `fit` gives."""

    def __init__(self, state: TrainState, stop: StopRequests, batches: TrainBatches, out: Path):
        super().__init__(state, stop)
        self.batches, self.out = batches, out
        self.epoch = self.batch = 0

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch, self.batch, self.start = epoch + 1, 0, time.perf_counter()
        self.loss_sum = self.correct = self.tokens = 0.0

    def on_train_batch_begin(self, batch, logs=None):
        self.batch = batch + 1  # the batch in progress (1-based), for a failure's message
        self.model.reset_metrics()

    def on_train_batch_end(self, batch, logs=None):
        self.check_finite(logs["loss"])
        tokens = self.batches.tokens(self.epoch, self.batch)
        self.loss_sum += logs["loss"]
        self.correct += logs[ACCURACY] * tokens
        self.tokens += tokens
        self.state.step += 1
        logs["loss"], logs[ACCURACY] = self.loss(), self.accuracy()

    def check_finite(self, loss: float) -> None:
        if not math.isfinite(loss):
            raise ConvattError(
                f"the loss became {loss} at epoch {self.epoch}, batch {self.batch}: training "
                f"diverged. Epoch {self.epoch - 1} and earlier are kept; check the data and settings",
                self.out,
            )

    def loss(self) -> float:
        return self.loss_sum / max(self.batch, 1)

    def accuracy(self) -> float:
        return self.correct / max(self.tokens, 1)


class DevCurve(_RunCallback):
    """Dev accuracy every `curve_every` global batches, up to `curve_until` (curve.csv)."""

    def __init__(self, state: TrainState, stop: StopRequests, run: RunConfig, measure: MeasureDev, meter: EpochMeter):
        super().__init__(state, stop)
        self.run, self.measure, self.meter = run, measure, meter

    def on_train_batch_end(self, batch, logs=None):
        run, step = self.run, self.state.step
        due = run.curve_every and step % run.curve_every == 0
        if due and (run.curve_until < 0 or step <= run.curve_until):
            score = self.measure(self.model)
            self.state.curve.append({"step": step, "epoch": self.meter.epoch, **score.columns()})


PROGRESS_EVERY = "CONVATT_PROGRESS_EVERY"
"""Environment variable: in logs, a progress line every N batches (0 or unset: none, only the
epoch's line; on a terminal Keras' progress bar is shown instead)."""


def progress_every() -> int:
    """The batches between two progress lines in logs (`PROGRESS_EVERY`), 0: none."""
    value = os.environ.get(PROGRESS_EVERY, "").strip()
    if not value:
        return 0
    if not value.isdigit():
        raise ConvattError(f"{PROGRESS_EVERY}={value!r}: expected a number of batches (0: only the epoch's line)")
    return int(value)


class Progress:
    """A line every `every` batches of an epoch, with the time the epoch has left."""

    def __init__(self, log: Log, epoch: int, epochs: int, n_batches: int, every: int = 1):
        self.log, self.epoch, self.epochs, self.n = log, epoch, epochs, n_batches
        self.start = time.perf_counter()
        self.every = max(1, every)

    def update(self, i: int, loss: float, acc: float) -> None:
        if i % self.every and i != self.n:
            return
        elapsed = max(time.perf_counter() - self.start, 1e-9)
        left = f"ETA {(self.n - i) * elapsed / i:.0f} s" if i < self.n else f"{elapsed:.1f} s"
        self.log(
            f"epoch {self.epoch}/{self.epochs}  batch {i}/{self.n}  loss {loss:.4f}  "
            f"train acc {100 * acc:.2f}%  {i / elapsed:.1f} batches/s  {left}"
        )


class ProgressLines(keras.callbacks.Callback):
    """`Progress` lines within an epoch for logs (Slurm, make's train.log), where asked for
    (`PROGRESS_EVERY`); without them a log has one line an epoch."""

    def __init__(self, log: Log, epochs: int, n_batches: int, every: int):
        super().__init__()
        self.log, self.epochs, self.n, self.every = log, epochs, n_batches, every

    def on_epoch_begin(self, epoch, logs=None):
        self.progress = Progress(self.log, epoch + 1, self.epochs, self.n, self.every)

    def on_train_batch_end(self, batch, logs=None):
        self.progress.update(batch + 1, logs["loss"], logs[ACCURACY])


class DevEvaluation(_RunCallback):
    """After each epoch: the dev score, the history row, and the `val_*` logs."""

    def __init__(self, state: TrainState, stop: StopRequests, measure: MeasureDev, meter: EpochMeter):
        super().__init__(state, stop)
        self.measure, self.meter = measure, meter
        self.score: DevScore | None = None

    def on_epoch_end(self, epoch, logs=None):
        if self.stop.stopped:
            return
        self.score = self.measure(self.model)
        seconds = time.perf_counter() - self.meter.start
        row = {
            "epoch": epoch + 1,
            "loss": round(self.meter.loss(), 6),
            "train_accuracy": round(self.meter.accuracy(), 6),
            **self.score.columns(),
            "seconds": round(seconds, 2),
        }
        self.state.record_epoch(row, seconds)
        logs.update(
            {
                "loss": self.meter.loss(),
                ACCURACY: self.meter.accuracy(),
                f"val_{ACCURACY}": self.score.exact,
                "val_batch_mean_accuracy": self.score.batch_mean,
            }
        )


class EarlyStopping(_RunCallback):
    """The original's early stopping: on the protocol's dev metric (the batch mean), patience
    `run.patience`, strict improvement; at the end the best epoch's weights are restored."""

    def __init__(
        self,
        state: TrainState,
        stop: StopRequests,
        run: RunConfig,
        evaluation: DevEvaluation,
        checkpoints: Checkpoints,
        log: Log,
    ):
        super().__init__(state, stop)
        self.run, self.evaluation, self.checkpoints, self.log = run, evaluation, checkpoints, log
        self.improved = False

    def on_epoch_end(self, epoch, logs=None):
        if self.stop.stopped:
            return
        self.improved = self.state.judge(self.evaluation.score.selection(self.run.protocol))
        if self.state.bad_epochs >= self.run.patience:
            self.model.stop_training = True

    def on_train_end(self, logs=None):
        if self.stop.stopped:
            return
        if self.state.bad_epochs >= self.run.patience:
            self.log(f"early stopping: no dev improvement for {self.run.patience} epochs")
        self.model.load_weights(self.checkpoints.best_weights(self.state.best_epoch))


class EpochCheckpoint(_RunCallback):
    """After each epoch: its checkpoint (see `Checkpoints`), then history.csv and curve.csv."""

    def __init__(self, state: TrainState, stop: StopRequests, checkpoints: Checkpoints, judge: EarlyStopping):
        super().__init__(state, stop)
        self.checkpoints, self.judge = checkpoints, judge

    def on_epoch_end(self, epoch, logs=None):
        if self.stop.stopped:
            return
        self.checkpoints.save(self.model, self.state, self.judge.improved)
        out = self.checkpoints.directory.parent
        write_csv(out / HISTORY_FILE, self.state.history, columns_of(self.state.history, HISTORY_COLUMNS))
        write_csv(out / CURVE_FILE, self.state.curve, columns_of(self.state.curve, CURVE_COLUMNS))


class EpochSummary(_RunCallback):
    """The line each epoch ends with: its dev accuracy, whether it is the best so far, its time."""

    def __init__(self, state: TrainState, stop: StopRequests, log: Log):
        super().__init__(state, stop)
        self.log = log

    def on_epoch_end(self, epoch, logs=None):
        if self.stop.stopped:
            return
        row = self.state.history[-1]
        best = " (best)" if self.state.best_epoch == row["epoch"] else ""
        self.log(
            f"epoch {row['epoch']}: loss {row['loss']:.4f}  train acc {100 * row['train_accuracy']:.2f}%  "
            f"dev accuracy {100 * row['dev_accuracy']:.2f}% "
            f"(batch mean {100 * row['dev_batch_mean_accuracy']:.2f}%){best}  {row['seconds']:.1f} s"
        )


class CurveToTensorBoard(_RunCallback):
    """The dev curve's points as TensorBoard scalars at their global batch (`dev_curve/...`),
    beside Keras' TensorBoard callback's per-epoch scalars."""

    def __init__(self, state: TrainState, stop: StopRequests, log_dir: Path):
        super().__init__(state, stop)
        self.log_dir, self.written = Path(log_dir), len(state.curve)

    def on_train_begin(self, logs=None):
        import tensorflow as tf  # TensorBoard's event files are TensorFlow's

        self.writer = tf.summary.create_file_writer(str(self.log_dir / "validation"))

    def on_train_batch_end(self, batch, logs=None):
        import tensorflow as tf

        points, self.written = self.state.curve[self.written :], len(self.state.curve)
        with self.writer.as_default():
            for point in points:
                tf.summary.scalar("dev_curve/accuracy", point["dev_accuracy"], step=point["step"])
                tf.summary.scalar("dev_curve/batch_mean_accuracy", point["dev_batch_mean_accuracy"], step=point["step"])
        if points:
            self.writer.flush()

    def on_train_end(self, logs=None):
        self.writer.close()


def tensorboard(state: TrainState, stop: StopRequests, log_dir: Path) -> list[keras.callbacks.Callback]:
    """Keras' TensorBoard callback (per-epoch scalars: train/ and validation/) and the dev curve."""
    import importlib.util

    if importlib.util.find_spec("tensorboard") is None:
        raise ConvattError("TensorBoard logs need the tensorboard package: pip install tensorboard", log_dir)
    epochs = keras.callbacks.TensorBoard(str(log_dir), write_graph=False, update_freq="epoch")
    return [epochs, CurveToTensorBoard(state, stop, log_dir)]


def weights_finite(model: keras.Model) -> bool:
    return all(np.isfinite(keras.ops.convert_to_numpy(w)).all() for w in model.trainable_weights)
