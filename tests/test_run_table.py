"""convatt.results.frames: finished run directories -> data frames (runs, histories, curves).

The tests read the real tiny runs of the `tiny_runs` fixture (conftest.py), and copies
of them (run_dirs.py).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from run_dirs import assert_same, clone_run, one_tiny_run, result_files

from convatt.errors import ConvattError
from convatt.model.variants import VARIANTS
from convatt.results import frames as run_table
from convatt.results import tables

# ---------------------------------------------------------------- loading


def test_load_runs_has_one_row_per_result_json(tiny_runs):
    runs = run_table.load_runs(tiny_runs)
    found = result_files(tiny_runs)
    assert len(runs) == len(found) == 4
    assert runs["test_all"].notna().all()
    assert set(runs["variant"]) == {"san-pe-add", "san-pe-add-conv2d"}
    assert sorted(set(runs["seed"])) == [1, 2]
    for r in found:
        row = runs[(runs["variant"] == r["variant"]) & (runs["seed"] == r["seed"])].iloc[0]
        for m in run_table.METRICS:
            assert_same(row[f"test_{m}"], r["test"][m])
            assert_same(row[f"dev_{m}"], r["dev"][m])
        assert row["label"] == r["label"] == VARIANTS[r["variant"]].label
        assert row["corpus"] == r["corpus"]
        assert row["limit"] is not None  # from config.json beside it: a smoke run


def test_load_runs_uses_the_content_not_the_path(tiny_runs, tmp_path):
    src = one_tiny_run(tiny_runs)
    clone_run(src, tmp_path / "anywhere" / "x", seed=9)
    runs = run_table.load_runs(tmp_path)
    assert list(runs["seed"]) == [9]
    assert list(runs["variant"]) == [json.loads((src / "result.json").read_text())["variant"]]


def test_histories_and_curves_come_from_the_csvs_beside(tiny_runs):
    runs = run_table.load_runs(tiny_runs)
    histories = run_table.load_histories(tiny_runs, runs)
    curves = run_table.load_curves(tiny_runs, runs)
    for _, run in runs.iterrows():
        h = pd.read_csv(Path(run["run_dir"]) / "history.csv")
        mine = histories[histories["run_dir"] == run["run_dir"]]
        assert list(mine["epoch"]) == list(h["epoch"]) == [1, 2]
        np.testing.assert_allclose(mine["dev_accuracy"], h["dev_accuracy"])
        c = pd.read_csv(Path(run["run_dir"]) / "curve.csv")
        assert len(curves[curves["run_dir"] == run["run_dir"]]) == len(c) > 0
    assert {"preset", "variant", "model", "seed", "corpus"} <= set(histories.columns)


def test_duplicate_runs_are_counted_once_with_a_warning(tiny_runs, tmp_path):
    src = one_tiny_run(tiny_runs)
    clone_run(src, tmp_path / "a")
    clone_run(src, tmp_path / "b")
    with pytest.warns(UserWarning, match="repeat another run"):
        runs = run_table.load_runs(tmp_path)
    assert len(runs) == 1 and runs["run_dir"][0].endswith("a")


def test_no_runs_is_an_error(tmp_path):
    assert run_table.load_runs(tmp_path).empty
    with pytest.raises(ConvattError, match="no finished runs"):
        tables.write_tables(tmp_path, tmp_path / "out")
    with pytest.raises(ConvattError, match="no such runs directory"):
        run_table.load_runs(tmp_path / "missing")


# ---------------------------------------------------------------- read once; runs still training

RUN_FILES = ("result.json", "config.json", "history.csv", "curve.csv")


def test_convatt_tables_opens_each_file_of_a_run_once(tiny_runs, tmp_path, monkeypatch):
    """One `convatt tables` reads every run once (frames.load_records) and hands the frames down."""
    import builtins
    import io
    import os
    from collections import Counter

    from convatt import cli

    opened, real_open = Counter(), io.open

    def counting_open(file, *args, **kwargs):
        if isinstance(file, (str, os.PathLike)) and Path(file).name in RUN_FILES:
            opened[Path(file).resolve()] += 1
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(io, "open", counting_open)  # Path.open, Path.read_bytes
    monkeypatch.setattr(builtins, "open", counting_open)  # open(), pandas
    assert cli.main(["tables", "--runs", str(tiny_runs), "--out", str(tmp_path / "out")]) == 0
    files = [p.resolve() for name in RUN_FILES for p in tiny_runs.rglob(name)]
    assert len(files) == 16
    assert dict(opened) == dict.fromkeys(files, 1)


def test_runs_still_training_are_read_only_when_asked_for(tiny_runs, tmp_path):
    src = one_tiny_run(tiny_runs)
    clone_run(src, tmp_path / "done", seed=5)
    running = clone_run(src, tmp_path / "going", {"seed": 6}, seed=6)
    (running / "result.json").unlink()
    history = pd.read_csv(running / "history.csv").iloc[:1]  # one epoch written so far
    history.to_csv(running / "history.csv", index=False)
    assert list(run_table.load_records(tmp_path).runs["seed"]) == [5]
    records = run_table.load_records(tmp_path, include_running=True)
    runs = records.runs.set_index("seed")
    assert list(runs["running"]) == [False, True]
    assert runs.loc[6, "variant"] == runs.loc[5, "variant"] and runs.loc[6, "model"] == runs.loc[5, "model"]
    assert runs.loc[6, "corpus"] == runs.loc[5, "corpus"] and math.isnan(runs.loc[6, "test_all"])
    going = records.histories[records.histories["seed"] == 6]
    assert list(going["epoch"]) == [1] and going["running"].all()
    np.testing.assert_allclose(going["dev_accuracy"], history["dev_accuracy"])
    assert len(records.curves[records.curves["seed"] == 6]) == len(pd.read_csv(running / "curve.csv"))
