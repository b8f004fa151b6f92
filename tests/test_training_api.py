"""`convatt.train(...)` with a user's Keras callback, and TensorBoard logs read back."""

import importlib.util
from pathlib import Path

import keras
import numpy as np
import pandas as pd
import pytest
from helpers import LINES

import convatt
from convatt.errors import ConvattError
from convatt.rundir.run_result import RunResult


class Temperatures(keras.callbacks.Callback):
    """The docs' example: the learned temperatures (gamma_q, gamma_k, gamma_v per head) after each epoch."""

    def __init__(self):
        super().__init__()
        self.seen: dict[int, dict[str, np.ndarray]] = {}
        self.logs: dict[int, dict] = {}

    def on_epoch_end(self, epoch, logs=None):
        self.seen[epoch + 1] = {
            v.path: keras.ops.convert_to_numpy(v).copy() for v in self.model.weights if v.path.endswith("temperature")
        }
        self.logs[epoch + 1] = dict(logs)


@pytest.fixture(scope="module")
def temp_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("api") / "run"
    temperatures = Temperatures()
    board = out / "tensorboard" if importlib.util.find_spec("tensorboard") else None
    result = convatt.train(
        preset="ud",
        variant="san-pe-add-temp",
        data=LINES,
        out=out,
        seed=1,
        epochs=2,
        limit=64,
        curve_every=1,
        jit_compile="off",
        callbacks=[temperatures],
        tensorboard=board,
        log=lambda line: None,
    )
    return out, result, temperatures


def test_a_users_callback_sees_the_temperatures_change_each_epoch(temp_run):
    out, result, temperatures = temp_run
    assert isinstance(result, RunResult) and result.epochs_run == 2 and (out / "result.json").exists()
    assert sorted(temperatures.seen) == [1, 2]
    first, second = temperatures.seen[1], temperatures.seen[2]
    assert len(first) == 4 and first.keys() == second.keys()  # one (3, heads) weight per attention layer
    for path, gammas in first.items():
        assert gammas.shape == (3, 4) and not np.allclose(gammas, 1.0)  # learned away from their init, 1
        assert not np.allclose(gammas, second[path])  # and still moving in epoch 2
    history = pd.read_csv(out / "history.csv")
    for epoch, logs in temperatures.logs.items():  # fit's logs: the run's own numbers, Keras' names
        row = history.iloc[epoch - 1]
        assert logs["val_sparse_categorical_accuracy"] == pytest.approx(row["dev_accuracy"], abs=1e-6)
        assert logs["val_batch_mean_accuracy"] == pytest.approx(row["dev_batch_mean_accuracy"], abs=1e-6)
        assert logs["loss"] == pytest.approx(row["loss"], abs=1e-6)
        assert logs["sparse_categorical_accuracy"] == pytest.approx(row["train_accuracy"], abs=1e-6)


def scalars(directory: Path) -> dict[str, dict[int, float]]:
    """tag -> {step: value} of the TensorBoard event files under `directory` (read back with TensorBoard's reader)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.util import tensor_util

    found = {}
    for events in sorted(directory.rglob("events.out.tfevents.*")):
        accumulator = EventAccumulator(str(events), size_guidance={"tensors": 0, "scalars": 0})
        accumulator.Reload()
        for tag in accumulator.Tags()["tensors"]:
            values = {e.step: float(tensor_util.make_ndarray(e.tensor_proto)) for e in accumulator.Tensors(tag)}
            found.setdefault(f"{events.parent.name}/{tag}", {}).update(values)
    return found


def test_tensorboard_logs_hold_the_epochs_and_the_dev_curve(temp_run):
    pytest.importorskip("tensorboard")
    out, result, _ = temp_run
    logged = scalars(out / "tensorboard")
    history = pd.read_csv(out / "history.csv")
    curve = pd.read_csv(out / "curve.csv")
    expect = {
        "train/epoch_loss": history["loss"],
        "train/epoch_sparse_categorical_accuracy": history["train_accuracy"],
        "validation/epoch_sparse_categorical_accuracy": history["dev_accuracy"],
        "validation/epoch_batch_mean_accuracy": history["dev_batch_mean_accuracy"],
    }
    for tag, column in expect.items():  # Keras' TensorBoard counts epochs from 0
        assert logged[tag] == {i: pytest.approx(v, abs=1e-6) for i, v in enumerate(column)}, tag
    assert len(curve) == 4  # 2 batches an epoch, a point after each
    assert logged["validation/dev_curve/accuracy"] == {
        s: pytest.approx(v, abs=1e-6) for s, v in zip(curve["step"], curve["dev_accuracy"])
    }


def test_bad_options_fail_before_anything_is_written(tmp_path):
    with pytest.raises(ConvattError, match="unknown option"):
        convatt.train(preset="ud", variant="san", out=tmp_path / "run", optimiser="adam")
    with pytest.raises(ConvattError, match="epochs must be at least 1"):
        convatt.train(preset="ud", variant="san", out=tmp_path / "run", epochs=0)
    assert not (tmp_path / "run").exists()


class StopInEpoch2(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        if int(self.model.optimizer.iterations.numpy()) == 3:  # epoch 2, batch 1 (2 batches an epoch)
            self.model.stop_training = True


@pytest.mark.slow  # a run of its own; a user's callback: the tests above
def test_a_callback_stopping_mid_epoch_keeps_the_finished_epochs_only(tmp_path):
    lines = []
    result = convatt.train(
        preset="ud",
        variant="san",
        data=LINES,
        out=tmp_path / "run",
        epochs=3,
        limit=40,  # 2 batches an epoch
        curve_every=0,
        jit_compile="off",
        callbacks=[StopInEpoch2()],
        log=lines.append,
    )
    assert result.epochs_run == 1 and result.best_epoch == 1
    assert list(pd.read_csv(tmp_path / "run" / "history.csv")["epoch"]) == [1]
    assert any("stopped by a callback in epoch 2" in line for line in lines)
    assert not (tmp_path / "run" / "checkpoint").exists()
