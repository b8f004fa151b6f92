"""A finished run whose corpus has moved since it trained: `evaluate --data` and `inspect --data`
read it from its new place and give what they gave before the move (the messages without
--data are rows of tests/test_bad_inputs.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from helpers import PTB_SAMPLE

from convatt.cli import main


@pytest.fixture(scope="module")
def runs(small_run, tmp_path_factory) -> tuple[Path, Path, Path]:
    """(a tiny finished run, its copy whose config.json points at a corpus that is gone, the
    corpus' new place)."""
    tmp = tmp_path_factory.mktemp("moved")
    shutil.copytree(small_run, tmp / "moved-run")
    config = json.loads((tmp / "moved-run" / "config.json").read_text())
    (tmp / "moved-run" / "config.json").write_text(json.dumps({**config, "data": str(tmp / "old" / PTB_SAMPLE.name)}))
    (tmp / "new").mkdir()
    shutil.copy(PTB_SAMPLE, tmp / "new" / PTB_SAMPLE.name)
    return small_run, tmp / "moved-run", tmp / "new" / PTB_SAMPLE.name


def test_evaluate_reads_the_moved_corpus_from_data(runs):
    from convatt.inference.evaluation import evaluate_run

    run, moved, new_place = runs
    assert evaluate_run(moved, new_place, "dev") == evaluate_run(run, None, "dev")


@pytest.mark.slow  # inspect's statistics of a run; the moved corpus found: the evaluate test above
def test_inspect_reads_the_moved_corpus_from_data(runs, tmp_path, capsys):
    """The statistics of the moved run's dev split, read from --data, are the unmoved run's."""
    from convatt.inference.inspection import attention_statistics
    from convatt.inference.loading import load_run

    run, moved, new_place = runs
    assert main(["inspect", str(moved), "--data", str(new_place), "--out", str(tmp_path)]) == 0
    assert "convatt: error" not in capsys.readouterr().err
    statistics = pd.read_csv(tmp_path / "attention_statistics.csv")
    before = attention_statistics(load_run(run))
    assert statistics.n_rows.sum() > 0
    pd.testing.assert_frame_equal(statistics, before, check_dtype=False, rtol=1e-5)  # the csv keeps 6 digits
