"""Train one run (the tagger or a causal sequence task) and write a complete run directory.

Protocol (REFERENCE.md; `convatt.protocol` for the original code's computations and
the Keras 3 alternative): RMSprop, batch 32, up to 100 epochs, early stopping with
patience 3 on dev accuracy over non-PAD tokens (the original's per-batch mean by
default), then the best epoch's weights are restored and evaluated exactly on dev
and test.

Run directory (its file names in `convatt.rundir.schema`, its JSON files typed in
`convatt.rundir.run_config` and `convatt.rundir.run_result`):
    config.json     the options of the run (`RunConfig`)
    vocab.json      the vocabularies (to re-evaluate the model)
    history.csv     one row per epoch (HISTORY_COLUMNS)
    curve.csv       dev accuracy every `curve_every` batches (CURVE_COLUMNS)
    model.keras     the best epoch's model
    result.json     written last: dev/test accuracy (all, OOV, ambiguous, per tag), ... (`RunResult`)
    checkpoint/     while training: the last finished epoch (and the one before), to resume from

A run trains through `keras.Model.fit`, one callback per concern of the protocol
(`convatt.training.callbacks`), the user's callbacks after them: the one loop of
`convatt.training.loop.Trainer`, whose hooks `TaggerTrainer` (the tagger) and
`SequenceTrainer` (a causal sequence task) fill; `train_run` chooses between them by the
run's preset. A rerun with the same options resumes from the last finished epoch (`fit`'s
`initial_epoch`); a run that is killed loses at most the epoch in progress.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import keras

from convatt.data.formats import is_sequence_preset
from convatt.errors import ConvattError
from convatt.rundir.advice import saved_run_config
from convatt.rundir.modelfiles import check_keras_file
from convatt.rundir.run_config import RunConfig
from convatt.rundir.run_result import RunResult
from convatt.rundir.schema import CHECKPOINT_DIR, CONFIG_FILE, LOCK_FILE, MODEL_FILE, RESULT_FILE, foreign_entries
from convatt.rundir.storage import check_writable_directory, os_error_reason, run_lock
from convatt.training.callbacks import CURVE_COLUMNS, HISTORY_COLUMNS, Progress
from convatt.training.checkpoints import Checkpoints
from convatt.training.loop import Trainer
from convatt.training.sequence_trainer import SequenceTrainer
from convatt.training.state import DevScore, TrainState
from convatt.training.tagger_trainer import TaggerTrainer

__all__ = [
    "CURVE_COLUMNS",
    "HISTORY_COLUMNS",
    "DevScore",
    "Progress",
    "TrainState",
    "train_result",
    "train_run",
    "trainer_class",
]


def trainer_class(run: RunConfig) -> type[Trainer]:
    """The kind of run the preset names: a causal sequence task's or the tagger's."""
    return SequenceTrainer if is_sequence_preset(run.preset) else TaggerTrainer


def train_run(
    run: RunConfig,
    log: Callable[[str], None] = print,
    callbacks: Sequence[keras.callbacks.Callback] = (),
    tensorboard: str | Path | None = None,
) -> dict:
    """Train (or resume, or skip if complete) one run; return its result.json content.
    `callbacks` (Keras callbacks) run after the run's own; `tensorboard`: a log directory."""
    return train_result(run, log, callbacks, tensorboard).to_json()


def train_result(
    run: RunConfig,
    log: Callable[[str], None] = print,
    callbacks: Sequence[keras.callbacks.Callback] = (),
    tensorboard: str | Path | None = None,
) -> RunResult:
    """`train_run`, returning the typed `RunResult`."""
    run.check()
    out = Path(run.out)
    _check_out_dir(out, run)
    if tensorboard is not None:  # before the run directory is written
        check_writable_directory(Path(tensorboard), "the TensorBoard log directory (--tensorboard)")
    if (out / RESULT_FILE).exists():
        result = RunResult.load(out)
        _check_finished_model(out)
        log(f"{out}: complete (result.json exists, model.keras checked); nothing to do")
        return result
    created = not out.exists()
    try:
        out.mkdir(parents=True, exist_ok=True)
        with run_lock(out / LOCK_FILE):
            if (out / RESULT_FILE).exists():  # finished by another process meanwhile
                saved_run_config(out, run, finished=True)
                return RunResult.load(out)
            return trainer_class(run)(run, out, log, list(callbacks), tensorboard).run()
    except OSError as e:  # e.g. mkdir or the lock: a read-only or full file system, a file in the way
        raise ConvattError(os_error_reason(e), e.filename or out) from e
    finally:
        if created and out.is_dir() and not any(out.iterdir()):
            out.rmdir()  # failed before writing anything: leave no trace


def _check_finished_model(out: Path) -> None:
    """A finished run's model.keras is whole (every member's checksum), before "nothing to do"."""
    checkpoint = Checkpoints(out / CHECKPOINT_DIR, print)
    again = "training resumes from its checkpoint" if checkpoint.exists else "training starts again from epoch 1"
    check_keras_file(
        out / MODEL_FILE,
        f"the run's result.json stands but its model cannot be read: delete {out / RESULT_FILE} and "
        f"{out / MODEL_FILE} and rerun the same command ({again})",
    )


def _check_out_dir(out: Path, run: RunConfig) -> None:
    """`out` is new, empty, a launcher's fresh directory (train.log) or this same run;
    convatt never writes into a directory holding anything else."""
    if out.exists() and not out.is_dir():
        raise ConvattError("--out names a file, not a directory", out)
    if not out.is_dir():
        return
    if (out / CONFIG_FILE).exists():  # the same run, or an error naming the options that would resume it
        saved_run_config(out, run, finished=(out / RESULT_FILE).exists())
        return
    foreign = foreign_entries(out)
    if foreign:
        shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        raise ConvattError(
            f"--out is not empty and is not a convatt run directory (no config.json; it holds "
            f"{shown}); convatt does not write into it: use a new or empty directory",
            out,
        )
