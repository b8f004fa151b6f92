"""A finished run whose corpus has moved since it trained: `evaluate --data` and `inspect --data`
read it from its new place and give what they gave before the move (the messages without
--data are rows of tests/test_bad_inputs.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import PTB_SAMPLE, tiny_options

from convatt.cli import main


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> tuple[Path, Path, Path]:
    """(a tiny finished run, its copy whose config.json points at a corpus that is gone, the
    corpus' new place)."""
    from convatt.training.trainer import train_run

    tmp = tmp_path_factory.mktemp("moved")
    train_run(tiny_options(tmp / "run", epochs=1, limit=30, curve_every=0), log=lambda s: None)
    shutil.copytree(tmp / "run", tmp / "moved-run")
    config = json.loads((tmp / "moved-run" / "config.json").read_text())
    (tmp / "moved-run" / "config.json").write_text(json.dumps({**config, "data": str(tmp / "old" / PTB_SAMPLE.name)}))
    (tmp / "new").mkdir()
    shutil.copy(PTB_SAMPLE, tmp / "new" / PTB_SAMPLE.name)
    return tmp / "run", tmp / "moved-run", tmp / "new" / PTB_SAMPLE.name


def test_evaluate_reads_the_moved_corpus_from_data(runs):
    from convatt.inference.evaluation import evaluate_run

    run, moved, new_place = runs
    assert evaluate_run(moved, new_place, "dev") == evaluate_run(run, None, "dev")


def test_inspect_reads_the_moved_corpus_from_data(runs, tmp_path, capsys):
    run, moved, new_place = runs
    assert main(["inspect", str(moved), "--data", str(new_place), "--out", str(tmp_path / "moved")]) == 0
    assert main(["inspect", str(run), "--out", str(tmp_path / "before")]) == 0
    statistics = [(tmp_path / d / "attention_statistics.csv").read_text() for d in ("moved", "before")]
    assert statistics[0] == statistics[1]  # the same dev split, the same model
    assert "convatt: error" not in capsys.readouterr().err
