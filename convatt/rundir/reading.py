"""A finished run's files, read back and checked before anything is drawn or averaged.

    read_run(result_path)   a `FinishedRun`: result.json, config.json (if any),
                            history.csv and curve.csv, each checked
    read_running(run_dir)   a `RunningRun`: config.json and what history.csv and
                            curve.csv hold so far (a run still training)
    DamagedRunError         what is wrong, naming the file (a `ConvattError`)
    RunWarning              the warning of a run left out of the tables and plots

A run is damaged when a file cannot be read as the trainer wrote it: not UTF-8, not
JSON, a field of the wrong type (`RunResult`/`RunConfig` say which), a CSV row
with too many or too few cells or a value that is not a number, an accuracy
outside [0, 1], a file cut short (no final newline, epochs that are not 1..n with
n = result.json's `epochs_run`, a curve that stops while the run went on), or
history.csv / curve.csv missing (the trainer writes both before result.json; a
curve with no point, only its header, is whole). config.json may be missing (then
the setting comes from result.json). Readers of the tables skip a damaged run
with a `RunWarning` and go on, so a partial record is never averaged as if whole.
A curve.csv cut exactly at a line end, after the last point the epochs allow us to
expect, reads as a shorter curve: nothing in the files tells it apart.
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from convatt.data.formats import FORMATS
from convatt.errors import ConvattError
from convatt.rundir.run_config import DeparturesFromPaper, RunConfig
from convatt.rundir.run_result import RunResult
from convatt.rundir.schema import CONFIG_FILE, CURVE_FILE, DEV_BITS_COLUMN, HISTORY_FILE

# What the tables and plots read; older runs lack the batch-mean column.
HISTORY_NUMBERS = ("epoch", "loss", "train_accuracy", "dev_accuracy", "seconds")
CURVE_NUMBERS = ("step", "epoch", "dev_accuracy")
OPTIONAL_NUMBERS = ("dev_batch_mean_accuracy", DEV_BITS_COLUMN)
ACCURACIES = ("train_accuracy", "dev_accuracy", "dev_batch_mean_accuracy")


class DamagedRunError(ConvattError):
    """A file of a finished run that cannot be read as the trainer wrote it."""


class RunWarning(UserWarning):
    """A run left out of the tables and plots: damaged, or a repeat of another run."""


@dataclass(frozen=True)
class FinishedRun:
    """One finished run, every file read and checked."""

    run_dir: Path
    result: RunResult
    config: RunConfig | None
    setting: DeparturesFromPaper
    history: pd.DataFrame  # HISTORY_NUMBERS (+ the batch-mean column if recorded), epochs 1..epochs_run
    curve: pd.DataFrame  # CURVE_NUMBERS (+ ...), no rows when the run had no curve point


@dataclass(frozen=True)
class RunningRun:
    """A run still training (no result.json): its configuration and the epochs and curve points so far."""

    run_dir: Path
    config: RunConfig
    history: pd.DataFrame  # epochs 1..n written so far
    curve: pd.DataFrame


def read_running(run_dir: Path) -> RunningRun:
    """The run in `run_dir` that has config.json but no result.json yet. The trainer rewrites
    history.csv and curve.csv whole after each epoch, so each is checked as a finished run's,
    with the number of epochs it holds; a missing one reads as empty."""
    config = read_config(run_dir / CONFIG_FILE)
    history_path, curve_path = run_dir / HISTORY_FILE, run_dir / CURVE_FILE
    history = _numbers(history_path, HISTORY_NUMBERS) if history_path.exists() else pd.DataFrame()
    if not history.empty:
        _check_history(history, history_path, len(history))
    curve = _numbers(curve_path, CURVE_NUMBERS) if curve_path.exists() else pd.DataFrame()
    if not curve.empty:  # no end to check yet: the run goes on
        _check_curve(curve, curve_path, max(len(history), int(curve["epoch"].max())), None)
    return RunningRun(run_dir, config, history, curve)


def read_run(result_path: Path) -> FinishedRun:
    """The run whose result.json is `result_path`; `DamagedRunError` names the first bad file."""
    result = read_result(result_path)
    run_dir = result_path.parent
    config_path = run_dir / CONFIG_FILE
    config = read_config(config_path) if config_path.exists() else None
    if config is not None:
        setting = config.setting
    else:
        continued = bool(result.started_from)
        setting = DeparturesFromPaper(protocol=result.protocol, mask_padding=result.mask_padding, continued=continued)
    history = read_history(run_dir / HISTORY_FILE, result.epochs_run)
    curve = read_curve(run_dir / CURVE_FILE, result.epochs_run, config)
    return FinishedRun(run_dir, result, config, setting, history, curve)


# ---------------------------------------------------------------- JSON files


def _text(path: Path) -> str:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise DamagedRunError("missing (a finished run has it)", path) from None
    except OSError as e:
        raise DamagedRunError(f"unreadable ({e.strerror})", path) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DamagedRunError(f"not UTF-8 text (byte {e.start})", path) from None


def _json_object(path: Path) -> dict:
    try:
        data = json.loads(_text(path))
    except json.JSONDecodeError as e:
        raise DamagedRunError(f"not valid JSON ({e.msg})", path, e.lineno) from None
    if not isinstance(data, dict):
        raise DamagedRunError("not a JSON object", path)
    return data


def read_result(path: Path) -> RunResult:
    """result.json, typed and its scores checked by `RunResult.from_json`, plus what the tables need."""
    try:
        result = RunResult.from_json(_json_object(path), path)
    except DamagedRunError:
        raise
    except ConvattError as e:
        raise DamagedRunError(e.message, path) from None
    if result.preset not in FORMATS:
        raise DamagedRunError(f"unknown preset {result.preset!r}", path)
    if result.epochs_run < 1:
        raise DamagedRunError(f"epochs_run should be at least 1, not {result.epochs_run}", path)
    if result.test.get("all") is None:  # every test split has tokens
        raise DamagedRunError("test.all is missing", path)
    return result


def read_config(path: Path) -> RunConfig:
    """config.json, every field typed by `RunConfig.from_json`."""
    try:
        return RunConfig.from_json(_json_object(path), path)
    except DamagedRunError:
        raise
    except ConvattError as e:
        raise DamagedRunError(e.message, path) from None


# ---------------------------------------------------------------- CSV files


def _csv_rows(path: Path) -> tuple[list[str], list[list[str]]]:
    """Header and rows, every row as long as the header; the file must end with a newline."""
    text = _text(path)
    if not text.endswith("\n"):
        raise DamagedRunError("cut short: the last line has no newline", path)
    try:
        header, *rows = list(csv.reader(text.splitlines()))
    except (csv.Error, ValueError) as e:  # ValueError: no header line at all
        raise DamagedRunError(f"not a CSV file ({e})", path) from None
    for number, row in enumerate(rows, start=2):
        if len(row) != len(header):
            raise DamagedRunError(f"{len(row)} cells where the header has {len(header)}", path, number)
    return header, rows


def _numbers(path: Path, required: tuple[str, ...]) -> pd.DataFrame:
    """The columns `required` (and OPTIONAL_NUMBERS if present) as floats, checked."""
    header, rows = _csv_rows(path)
    missing = [c for c in required if c not in header]
    if missing or len(set(header)) != len(header):
        raise DamagedRunError(f"header should name {', '.join(required)}; it is {','.join(header)!r}", path)
    columns = [c for c in header if c in required or c in OPTIONAL_NUMBERS]
    values = {c: [] for c in columns}
    for number, row in enumerate(rows, start=2):
        for column, cell in zip(header, row):
            if column in values:
                values[column].append(_number(cell, column, path, number))
    return pd.DataFrame(values, columns=columns)


def _number(cell: str, column: str, path: Path, line: int) -> float:
    try:
        value = float(cell)
    except ValueError:
        raise DamagedRunError(f"{column} is not a number: {cell!r}", path, line) from None
    if column != "loss" and not math.isfinite(value):  # a diverged run's loss is nan, not its accuracy
        raise DamagedRunError(f"{column} is not a finite number: {cell!r}", path, line)
    if column in ACCURACIES and not 0 <= value <= 1:
        raise DamagedRunError(f"{column} is not a fraction in [0, 1]: {cell!r}", path, line)
    return value


def _whole_numbers(frame: pd.DataFrame, column: str, path: Path) -> None:
    values = frame[column]
    if not (values == values.round()).all() or (values < 1).any() or (values > 1e9).any():
        raise DamagedRunError(f"{column} should hold whole numbers from 1", path)
    frame[column] = values.astype(int)


def read_history(path: Path, epochs_run: int) -> pd.DataFrame:
    """history.csv: one row per epoch 1..`epochs_run` (result.json's), in order."""
    frame = _numbers(path, HISTORY_NUMBERS)
    _check_history(frame, path, epochs_run)
    return frame


def _check_history(frame: pd.DataFrame, path: Path, epochs_run: int) -> None:
    _whole_numbers(frame, "epoch", path)
    if list(frame["epoch"]) != list(range(1, len(frame) + 1)) or len(frame) != epochs_run:
        found = ", ".join(map(str, frame["epoch"][:12])) or "none"
        raise DamagedRunError(f"epochs should be 1 to {epochs_run} (result.json's epochs_run), found {found}", path)


def read_curve(path: Path, epochs_run: int, config: RunConfig | None) -> pd.DataFrame:
    """curve.csv: a point every `curve_every` batches, in order, up to where the run stopped."""
    frame = _numbers(path, CURVE_NUMBERS)
    if not frame.empty:
        _check_curve(frame, path, epochs_run, config)
    return frame


def _check_curve(frame: pd.DataFrame, path: Path, epochs_run: int, config: RunConfig | None) -> None:
    _whole_numbers(frame, "step", path)
    _whole_numbers(frame, "epoch", path)
    steps, epochs = frame["step"].to_numpy(), frame["epoch"].to_numpy()
    every = config.curve_every if config is not None else int(steps[0])
    if every < 1 or list(steps) != [every * i for i in range(1, len(steps) + 1)]:
        raise DamagedRunError(f"steps should be {every}, {2 * every}, ... in order", path)
    if (epochs[1:] < epochs[:-1]).any() or epochs[-1] > epochs_run:
        raise DamagedRunError(f"epochs should rise from 1 to at most {epochs_run} (epochs_run)", path)
    if _stops_early(int(steps[-1]), int(epochs[-1]), epochs_run, every, config):
        raise DamagedRunError(
            f"cut short: ends at step {steps[-1]} in epoch {epochs[-1]} of the run's {epochs_run}", path
        )


def _stops_early(step: int, epoch: int, epochs_run: int, every: int, config: RunConfig | None) -> bool:
    """Whether the run surely trained `every` more batches, within the curve's range, after
    its last point: an epoch has at least ceil(step / epoch) batches."""
    if config is None:  # where the curve was meant to end is unknown
        return False
    until = config.curve_until
    if epoch >= epochs_run or (until >= 0 and step + every > until):
        return False
    at_least = epochs_run * -(-step // epoch)
    return step + every <= at_least
