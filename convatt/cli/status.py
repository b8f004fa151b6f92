"""`convatt status`: the unfinished runs under a runs root, while they train.

A run directory with config.json and no result.json is unfinished; its history.csv says
how far it is (one row per finished epoch) and its best dev accuracy so far. It is
"training" while a process holds its lock (Linux: /proc/locks, read without taking the
lock, so a trainer is never in the way of this command), else "stopped" (killed,
preempted, or waiting in a queue: rerun its command to resume).
"""

from __future__ import annotations

import csv
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from convatt.errors import ConvattError

CONFIG_FILE, RESULT_FILE, HISTORY_FILE, LOCK_FILE = "config.json", "result.json", "history.csv", ".lock"


@dataclass(frozen=True)
class RunStatus:
    """How far one unfinished run is."""

    path: str
    state: str  # "training", "stopped" or "not started"
    epochs_done: int
    max_epochs: int | None
    best_dev: float | None  # the best dev accuracy so far (exact, over tokens)
    best_epoch: int | None
    last_update: float | None  # seconds since history.csv (or config.json) was written


def _locked_inodes() -> set[tuple[int, int]] | None:
    """(device, inode) of every file an flock is held on, from /proc/locks (None: not Linux)."""
    try:
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return None
    found = set()
    for line in lines:
        parts = line.split()
        where = next((p for p in parts if p.count(":") == 2), None)
        if where:
            major, minor, inode = where.split(":")
            found.add((os.makedev(int(major, 16), int(minor, 16)), int(inode)))
    return found


def _history(path: Path) -> list[dict]:
    try:
        with path.open(newline="") as f:
            return [row for row in csv.DictReader(f) if row.get("epoch")]
    except (OSError, csv.Error, UnicodeDecodeError):
        return []


def run_status(run: Path, root: Path, locked: set | None) -> RunStatus:
    history = _history(run / HISTORY_FILE)
    try:
        max_epochs = json.loads((run / CONFIG_FILE).read_text()).get("epochs")
    except (OSError, ValueError, AttributeError):
        max_epochs = None
    lock = run / LOCK_FILE
    if lock.exists() and (locked is None or (lock.stat().st_dev, lock.stat().st_ino) in locked):
        state = "training"
    else:
        state = "stopped" if history else "not started"
    scores = [(float(r["dev_accuracy"]), int(r["epoch"])) for r in history if r.get("dev_accuracy")]
    best = max(scores, key=lambda s: (s[0], -s[1])) if scores else (None, None)
    newest = run / (HISTORY_FILE if history else CONFIG_FILE)
    age = time.time() - newest.stat().st_mtime if newest.exists() else None
    return RunStatus(str(run.relative_to(root)), state, len(history), max_epochs, *best, age)


def unfinished_runs(root: Path) -> tuple[list[RunStatus], int]:
    """The unfinished runs under `root` (sorted by path) and how many finished runs there are."""
    root = Path(root)
    if not root.is_dir():
        raise ConvattError("runs directory not found" if not root.exists() else "not a directory (--runs)", root)
    configs = sorted(root.rglob(CONFIG_FILE))
    finished = [c.parent for c in configs if (c.parent / RESULT_FILE).exists()]
    locked = _locked_inodes()
    runs = [run_status(c.parent, root, locked) for c in configs if not (c.parent / RESULT_FILE).exists()]
    return runs, len(finished)


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 120:
        return f"{seconds:.0f} s ago"
    return f"{seconds / 60:.0f} min ago" if seconds < 7200 else f"{seconds / 3600:.1f} h ago"


def format_status(runs: list[RunStatus], finished: int) -> str:
    lines = [f"{finished} finished run(s), {len(runs)} unfinished"]
    if runs:
        width = max(len(r.path) for r in runs)
        lines.append(f"{'run':<{width}}  {'state':<11}  {'epoch':>7}  {'best dev':>15}  last epoch")
    for r in runs:
        epoch = f"{r.epochs_done}/{r.max_epochs if r.max_epochs is not None else '?'}"
        best = "-" if r.best_dev is None else f"{100 * r.best_dev:.2f}% (ep {r.best_epoch})"
        lines.append(f"{r.path:<{width}}  {r.state:<11}  {epoch:>7}  {best:>15}  {_age(r.last_update)}")
    return "\n".join(lines)


def cmd_status(args) -> None:
    print(format_status(*unfinished_runs(args.runs)))


def add_command(sub) -> None:
    p = sub.add_parser("status", help="the unfinished runs under a runs root: epoch, best dev accuracy so far")
    p.add_argument("--runs", default="runs", help="runs root (default: runs)")
    p.set_defaults(func=cmd_status)
