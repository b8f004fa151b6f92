"""Damaged run directories: `tables` and `plot` leave the run out with a warning naming the
file and what is wrong, and go on; nothing partial is drawn or averaged (convatt.rundir.reading)."""

from __future__ import annotations

import json
import tempfile
import warnings
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from synthetic_runs import write_run

from convatt import cli
from convatt.results import frames as run_table
from convatt.rundir.reading import RunWarning

HISTORY, CURVE = [0.5, 0.8, 0.9], [0.4, 0.6, 0.82, 0.9, 0.91, 0.92]


def good_and_damaged(root: Path) -> Path:
    """Two whole runs; the second (seed 2) is the one a test damages. Returns its directory."""
    write_run(root, "san-pe-add", 1, HISTORY, CURVE)
    return write_run(root, "san-pe-add", 2, HISTORY, CURVE)


def _set(path: Path, field: str, value) -> dict:
    data = json.loads(path.read_text())
    where = data
    *parents, last = field.split(".")
    for part in parents:
        where = where[part]
    where[last] = value
    return data


def set_json(field: str, value):
    return lambda path: path.write_text(json.dumps(_set(path, field, value)))


def cut(n_bytes: int):
    return lambda path: path.write_bytes(path.read_bytes()[:-n_bytes])


def cut_lines(n_lines: int):
    return lambda path: path.write_text("".join(path.read_text().splitlines(keepends=True)[:-n_lines]))


def replace(old: str, new: str, count: int = 1):
    return lambda path: path.write_text(path.read_text().replace(old, new, count))


def bad_byte(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[:20] + b"\xff" + data[21:])


DAMAGE = {  # class of damage: (file, how, what the warning says)
    "result: not UTF-8": ("result.json", bad_byte, "not UTF-8"),
    "result: truncated": ("result.json", cut(30), "not valid JSON"),
    "result: wrong type": ("result.json", set_json("seed", "two"), "seed is 'two', expected int"),
    "result: accuracy not a number": (
        "result.json",
        set_json("test.all", "0.9"),
        "test.all is '0.9', expected a fraction in [0, 1] or null",
    ),
    "result: accuracy out of range": (
        "result.json",
        set_json("test.oov", 7),
        "test.oov is 7, expected a fraction in [0, 1] or null",
    ),
    "result: no test accuracy": ("result.json", set_json("test", {}), "test.all is missing"),
    "result: not an object": ("result.json", lambda p: p.write_text("[1, 2]"), "not a JSON object"),
    "config: truncated beside a good result": ("config.json", cut(40), "not valid JSON"),
    "config: wrong type": ("config.json", set_json("epochs", "100"), "epochs is '100', expected int"),
    "config: protocol not an object": ("config.json", set_json("protocol", 5), "protocol is 5, expected an object"),
    "config: unknown protocol item": ("config.json", set_json("protocol.optimizer", "sgd"), "protocol item"),
    "history: missing": ("history.csv", Path.unlink, "missing"),
    "history: not UTF-8": ("history.csv", bad_byte, "not UTF-8"),
    "history: cut in a line": ("history.csv", cut(3), "cut short"),
    "history: cut at a line end": ("history.csv", cut_lines(1), "epochs should be 1 to 3"),
    "history: header only": (
        "history.csv",
        cut_lines(3),
        "epochs should be 1 to 3 (result.json's epochs_run), found none",
    ),
    "history: empty": ("history.csv", lambda p: p.write_text(""), "cut short"),
    "history: ragged row": ("history.csv", replace("\n2,", "\n2,9,"), "7 cells where the header has 6"),
    "history: wrong type": ("history.csv", replace("0.8,0.8", "abc,0.8"), "is not a number: 'abc'"),
    "history: epochs not consecutive": ("history.csv", replace("\n2,", "\n4,"), "epochs should be 1 to 3"),
    "history: accuracy out of range": ("history.csv", replace("0.9,0.9", "1.9,0.9"), "not a fraction"),
    "history: wrong header": ("history.csv", replace("dev_accuracy", "dev_acc"), "header should name"),
    "curve: missing": ("curve.csv", Path.unlink, "missing"),
    "curve: cut in a line": ("curve.csv", cut(2), "cut short"),
    "curve: cut at a line end": ("curve.csv", cut_lines(4), "cut short: ends at step 200"),
    "curve: steps out of order": ("curve.csv", replace("\n200,", "\n300,"), "steps should be 100, 200"),
    "curve: wrong type": ("curve.csv", replace("0.6", "x"), "is not a number: 'x'"),
    "curve: ragged row": ("curve.csv", replace("\n300,", "\n300,2,"), "cells where the header has"),
}


@pytest.mark.parametrize("damage", DAMAGE, ids=list(DAMAGE))
def test_a_damaged_run_is_left_out_with_a_warning_naming_the_file(tmp_path, damage):
    name, how, what = DAMAGE[damage]
    run_dir = good_and_damaged(tmp_path)
    how(run_dir / name)
    with pytest.warns(RunWarning) as caught:
        runs = run_table.load_runs(tmp_path)
        histories = run_table.load_histories(tmp_path, runs)
        curves = run_table.load_curves(tmp_path, runs)
    (message,) = [str(w.message) for w in caught]
    assert str(run_dir / name) in message and what in message
    assert list(runs["seed"]) == [1]  # the whole run is left out, the other one stays
    assert list(histories["seed"]) == [1] * len(HISTORY) and list(curves["seed"]) == [1] * len(CURVE)


def test_a_whole_run_gives_no_warning(tmp_path):
    good_and_damaged(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        runs = run_table.load_runs(tmp_path)
        curves = run_table.load_curves(tmp_path, runs)
    assert list(runs["seed"]) == [1, 2] and len(curves) == 2 * len(CURVE)


def test_a_header_only_curve_is_a_run_without_curve_points(tmp_path):
    run_dir = good_and_damaged(tmp_path)
    cut_lines(len(CURVE))(run_dir / "curve.csv")
    runs = run_table.load_runs(tmp_path)
    assert list(runs["seed"]) == [1, 2] and set(run_table.load_curves(tmp_path, runs)["seed"]) == {1}


@pytest.mark.parametrize("command", ["tables", "plot"])
def test_tables_and_plot_go_on_past_a_damaged_run(tmp_path, capsys, command):
    run_dir = good_and_damaged(tmp_path / "runs")
    bad_byte(run_dir / "history.csv")
    assert cli.main([command, "--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "out")]) == 0
    out, err = capsys.readouterr()
    assert f"convatt: warning: left out a damaged run: {run_dir / 'history.csv'}: not UTF-8" in err
    assert "Traceback" not in err and "wrote" in out


# ---------------------------------------------------------------- any corruption (Hypothesis)

FILES = ["result.json", "config.json", "history.csv", "curve.csv"]
JSON_VALUES = (
    st.none()
    | st.booleans()
    | st.integers(-(10**12), 10**12)
    | st.floats()
    | st.text(max_size=5)
    | st.lists(st.integers(), max_size=2)
    | st.dictionaries(st.text(max_size=3), st.integers(), max_size=2)
)


@st.composite
def corruptions(draw):
    """(file, kind, corrupt): a truncation, a byte flipped, or (JSON) a field set to another type."""
    name = draw(st.sampled_from(FILES))
    kind = draw(st.sampled_from(["truncate", "flip"] + (["retype"] if name.endswith(".json") else [])))
    if kind == "truncate":
        fraction = draw(st.floats(0, 1))
        return name, kind, lambda data: data[: int(len(data) * fraction)]
    if kind == "flip":
        where, byte = draw(st.floats(0, 1, exclude_max=True)), draw(st.integers(0, 255))
        return (
            name,
            kind,
            lambda data: data[: int(len(data) * where)] + bytes([byte]) + data[int(len(data) * where) + 1 :],
        )
    field, value = (
        draw(
            st.sampled_from(
                [
                    "seed",
                    "preset",
                    "test",
                    "epochs_run",
                    "dev",
                    "corpus",
                    "epochs",
                    "limit",
                    "curve_every",
                    "curve_until",
                    "mask_padding",
                    "protocol",
                ]
            )
        ),
        draw(JSON_VALUES),
    )
    return name, kind, lambda data: json.dumps({**json.loads(data), field: value}).encode()


def assert_whole(runs: pd.DataFrame, histories: pd.DataFrame, curves: pd.DataFrame) -> None:
    """What the tables and plots got is a run's whole record, never part of one."""
    for _, run in runs.iterrows():
        history = histories[histories["run_dir"] == run["run_dir"]]
        assert list(history["epoch"]) == list(range(1, run["epochs_run"] + 1))
        assert history["dev_accuracy"].between(0, 1).all()
        curve = curves[curves["run_dir"] == run["run_dir"]]
        assert (curve["step"].diff().dropna() > 0).all() and curve["dev_accuracy"].between(0, 1).all()
        assert 0 <= run["test_all"] <= 1  # OOV, ambiguous: NaN where the split had no such token
        assert all(pd.isna(run[f"test_{m}"]) or 0 <= run[f"test_{m}"] <= 1 for m in ("oov", "ambiguous"))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(corruption=corruptions())
def test_any_corruption_gives_the_warning_or_a_whole_record(corruption):
    name, kind, corrupt = corruption
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        run_dir = good_and_damaged(root)
        original = pd.read_csv(run_dir / "curve.csv")
        path = run_dir / name
        path.write_bytes(corrupt(path.read_bytes()))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            runs = run_table.load_runs(root)
            histories, curves = run_table.load_histories(root, runs), run_table.load_curves(root, runs)
        messages = [str(w.message) for w in caught if issubclass(w.category, RunWarning)]
        assert [str(w.message) for w in caught if not issubclass(w.category, RunWarning)] == []
        assert_whole(runs, histories, curves)
        if messages:
            (message,) = messages
            assert str(run_dir) in message and list(runs["seed"]) == [1]
        else:
            assert len(runs) == 2
            if kind == "truncate":  # what was accepted is the whole file, or a curve cut where nothing tells
                mine = curves[curves["run_dir"] == str(run_dir)]
                assert list(mine["step"]) == list(original["step"][: len(mine)])
