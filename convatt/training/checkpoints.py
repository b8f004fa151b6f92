"""A run's `checkpoint/` directory: what makes a resume exact, and the previous good epoch.

After epoch N it holds
    epoch-N.keras          the model and its optimizer state
    best-B.weights.h5      the weights of the best epoch B so far
    state.json             written last, naming them: `TrainState` and the dropout RNG states
and, until epoch N's files are written and verified, the previous epoch P's
(`epoch-P.keras`, its best weights and `state-P.json`, a copy of its state.json), so that
one damaged file costs one epoch, not the run: a resume falls back to them with a note.

Every file is written under a new name, then state.json naming them, then older files are
deleted: a kill at any point leaves a consistent checkpoint.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from pathlib import Path

import keras
import numpy as np

from convatt.errors import ConvattError
from convatt.rundir.modelfiles import check_keras_file, check_weights_file, load_keras_model
from convatt.rundir.schema import CHECKPOINT_FILE, STATE_FILE, best_weights_file, epoch_model_file
from convatt.rundir.storage import read_json, write_atomically, write_json
from convatt.training.state import TrainState

_PREVIOUS_STATE = re.compile(r"state-(\d+)\.json")


class Checkpoints:
    """The checkpoint directory of one run."""

    def __init__(self, directory: Path, log: Callable[[str], None]):
        self.directory, self.log = Path(directory), log
        self.last: dict | None = None  # the last good state.json's content, restored or written

    @property
    def exists(self) -> bool:
        return (self.directory / STATE_FILE).exists()  # written last: an epoch's checkpoint is complete

    def best_weights(self, epoch: int) -> Path:
        return self.directory / best_weights_file(epoch)

    def model_file(self, epoch: int) -> Path:
        return self.directory / epoch_model_file(epoch)

    def remedy(self, fallback: bool = False) -> str:
        what = "the previous epoch's checkpoint is damaged too" if fallback else "older epochs are not kept"
        return f"the checkpoint is damaged and {what}: delete {self.directory} to train this run again from epoch 1"

    # ---- writing ----

    def save(self, model: keras.Model, state: TrainState, improved: bool) -> None:
        """Epoch `state.epoch`'s files, verified, then state.json; the previous epoch's are
        kept (its state.json as state-P.json) and anything older is deleted."""
        self.directory.mkdir(exist_ok=True)
        if improved:
            write_atomically(self.best_weights(state.epoch), model.save_weights)
            check_weights_file(self.best_weights(state.epoch), "the disk wrote a damaged file")
        write_atomically(self.model_file(state.epoch), model.save)
        check_keras_file(self.model_file(state.epoch), "the disk wrote a damaged file")
        previous = None
        if self.last is not None:  # the previous epoch's state, still good: kept as state-P.json
            previous = TrainState.from_json(self.last)
            write_json(self.directory / f"state-{previous.epoch}.json", self.last)
        seed_states = [keras.ops.convert_to_numpy(v).tolist() for v in seed_state_variables(model)]
        write_json(self.directory / STATE_FILE, {**state.to_json(), "seed_states": seed_states})
        self.last = read_json(self.directory / STATE_FILE)
        TrainState.from_json(self.last, self.directory / STATE_FILE)  # verified as a resume reads it
        keep = {STATE_FILE, self.model_file(state.epoch).name, self.best_weights(state.best_epoch).name}
        if previous is not None:
            keep |= {f"state-{previous.epoch}.json", self.model_file(previous.epoch).name}
            keep.add(self.best_weights(previous.best_epoch).name)
        for f in self.directory.iterdir():
            if f.name not in keep and CHECKPOINT_FILE.fullmatch(f.name):  # never a file of someone else's
                f.unlink(missing_ok=True)

    # ---- reading ----

    def restore(self) -> tuple[keras.Model, TrainState]:
        """The last finished epoch's model and state, every file checked first; if one is
        damaged, the previous good epoch's, with a note naming the damaged file."""
        try:
            return self._restore(self.directory / STATE_FILE, self.remedy())
        except ConvattError as damage:
            previous = self._previous_states()
            if not previous:
                raise
            path = previous[0]
            reason = damage.message.split("; the checkpoint is damaged")[0]
            self.log(
                f"note: {damage.path}: {reason}; resuming from the previous good checkpoint, "
                f"{path.name} (one epoch is trained again)"
            )
            return self._restore(path, self.remedy(fallback=True))

    def _previous_states(self) -> list[Path]:
        """The state-P.json files, newest first."""
        found = [(int(m.group(1)), p) for p in self.directory.iterdir() if (m := _PREVIOUS_STATE.fullmatch(p.name))]
        return [p for _, p in sorted(found, reverse=True)]

    def _restore(self, path: Path, remedy: str) -> tuple[keras.Model, TrainState]:
        saved = read_json(path, remedy)
        try:
            state = TrainState.from_json(saved, path)
        except ConvattError as e:
            raise ConvattError(f"{e.message}; {remedy}", path) from None
        model = load_keras_model(self.model_file(state.epoch), remedy)
        seed_states, variables = saved.get("seed_states"), seed_state_variables(model)
        if not (isinstance(seed_states, list) and len(seed_states) == len(variables)):
            raise ConvattError(f"damaged state: seed_states do not match the model's; {remedy}", path)
        try:
            for variable, value in zip(variables, seed_states):
                variable.assign(np.asarray(value, dtype=variable.dtype).reshape(variable.shape))
        except (ValueError, TypeError) as e:
            raise ConvattError(f"damaged state: seed_states ({e}); {remedy}", path) from None
        self.last = copy.deepcopy(saved)  # `state` shares its lists, and training appends to them
        best = self.best_weights(state.best_epoch)
        try:  # now, not after the remaining epochs
            check_weights_file(best, remedy)
        except ConvattError:
            if state.best_epoch != state.epoch:
                raise
            write_atomically(best, model.save_weights)  # the best epoch is the last one: rewrite its weights
            self.log(f"note: {best.name} was damaged; rewritten from {self.model_file(state.epoch).name}")
        return model, state

    def remove(self) -> None:
        """Delete the checkpoint's files (only ours) and then the directory, if nothing else is in it."""
        if not self.directory.is_dir():
            return
        for f in self.directory.iterdir():
            if CHECKPOINT_FILE.fullmatch(f.name):
                f.unlink(missing_ok=True)
        if any(self.directory.iterdir()):
            self.log(f"note: {self.directory} holds files convatt did not write; they are left there")
        else:
            self.directory.rmdir()


def seed_state_variables(model: keras.Model) -> list:
    """The dropout RNG states: `.keras` files don't keep them, the checkpoint must."""
    return [v for v in model.variables if "seed_generator_state" in v.path]
