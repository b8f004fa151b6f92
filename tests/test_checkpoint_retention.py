"""One damaged file costs one epoch, not the run: the previous good epoch's checkpoint is
kept until the next is written and verified; a finished run's model is checked before
"nothing to do". Real tiny runs, stopped as by a signal after epoch 2 of 3."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from helpers import tiny_options, train_stopped_in_epoch

from convatt.errors import ConvattError
from convatt.training.trainer import train_run


def three_epochs(run: Path):
    """The tiny run's options for 3 epochs of 2 batches (64 sentences): what is checked is the files."""
    return tiny_options(run, epochs=3, limit=64)


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


@pytest.fixture(scope="module")
def stopped(tmp_path_factory) -> Path:
    """A 3-epoch run stopped in epoch 3: its checkpoint is epoch 2, epoch 1's kept."""
    run = tmp_path_factory.mktemp("stopped") / "run"
    train_stopped_in_epoch(three_epochs(run), 3)
    return run


@pytest.fixture
def run_copy(stopped, tmp_path) -> Path:
    shutil.copytree(stopped, tmp_path / "run")
    return tmp_path / "run"


def test_the_previous_epochs_checkpoint_is_kept(stopped):
    ckpt = stopped / "checkpoint"
    names = {p.name for p in ckpt.iterdir()}
    assert {"state.json", "epoch-2.keras", "state-1.json", "epoch-1.keras"} <= names
    assert not any(name.startswith(".tmp-") for name in names)
    latest, previous = (json.loads((ckpt / n).read_text()) for n in ("state.json", "state-1.json"))
    assert (latest["epoch"], previous["epoch"]) == (2, 1)
    for state in (latest, previous):  # each one's best weights are there
        assert f"best-{state['best_epoch']}.weights.h5" in names


def resumed_lines(lines: list[str], damaged: str) -> None:
    """`lines` say that `damaged` was passed over for the previous checkpoint, epoch 1's."""
    note = next(line for line in lines if "previous good checkpoint" in line)
    assert damaged in note and "state-1.json" in note
    assert any(line.startswith("resuming from epoch 1") for line in lines)


@pytest.mark.slow  # a resumed run; the previous checkpoint kept: the test above
def test_a_damaged_last_state_resumes_from_the_previous_checkpoint(run_copy):
    """Epoch 2 trained and checkpointed again (the run stopped in epoch 3; the next test finishes one)."""
    truncate(run_copy / "checkpoint" / "state.json")
    resumed_lines(train_stopped_in_epoch(three_epochs(run_copy), 3), "state.json")
    assert json.loads((run_copy / "checkpoint" / "state.json").read_text())["epoch"] == 2


@pytest.mark.slow  # a resumed run; the previous checkpoint kept: the first test
def test_a_damaged_last_model_resumes_from_the_previous_checkpoint_and_finishes(run_copy):
    truncate(run_copy / "checkpoint" / "epoch-2.keras")
    lines = []
    result = train_run(three_epochs(run_copy), log=lines.append)
    resumed_lines(lines, "epoch-2.keras")
    assert result["epochs_run"] == 3 and list(pd.read_csv(run_copy / "history.csv")["epoch"]) == [1, 2, 3]
    assert not (run_copy / "checkpoint").exists()

    truncate(run_copy / "model.keras")  # finished, then its model damaged: not "nothing to do"
    lines.clear()
    with pytest.raises(ConvattError) as e:
        train_run(three_epochs(run_copy), log=lines.append)
    assert e.value.path.endswith("model.keras") and "not a complete Keras model archive" in str(e.value)
    assert f"delete {run_copy / 'result.json'} and {run_copy / 'model.keras'}" in str(e.value)
    assert "from epoch 1" in str(e.value) and not any("nothing to do" in line for line in lines)
