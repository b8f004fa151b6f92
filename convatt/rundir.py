"""A run directory: atomic writes and a lock, so an interrupted run loses nothing.

Every file is written to a temporary name in the same directory and moved into
place with `os.replace`, so a reader (or a killed writer) never sees half a file.
`result.json` is written last: its presence means the run is complete.
"""
from __future__ import annotations

import contextlib
import csv
import json
import os
import socket
from pathlib import Path
from typing import Iterator

from convatt.errors import ConvattError


def atomic_path(path: Path) -> Path:
    """A temporary sibling of `path` keeping its suffixes (Keras checks them)."""
    return path.with_name(f".tmp-{os.getpid()}-{path.name}")


def commit(tmp: Path, path: Path) -> None:
    os.replace(tmp, path)


def write_json(path: Path, data: dict) -> None:
    tmp = atomic_path(path)
    tmp.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n")
    commit(tmp, path)


def write_csv(path: Path, rows: list[dict], columns: list[str]) -> None:
    tmp = atomic_path(path)
    with tmp.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    commit(tmp, path)


def read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ConvattError(f"not valid JSON ({e.msg})", path, e.lineno) from None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def run_lock(out: Path) -> Iterator[None]:
    """Hold `out/.lock` while training; a stale lock (dead process) is taken over."""
    lock = out / ".lock"
    me = f"{socket.gethostname()} {os.getpid()}"
    for _ in range(2):
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            host, _, pid = lock.read_text().strip().partition(" ")
            if host == socket.gethostname() and pid.isdigit() and not _pid_alive(int(pid)):
                lock.unlink(missing_ok=True)
                continue
            raise ConvattError(f"another process ({host} pid {pid}) is training into this directory; "
                               f"if it is gone, delete {lock}", out) from None
        with os.fdopen(fd, "w") as f:
            f.write(me)
        break
    try:
        yield
    finally:
        lock.unlink(missing_ok=True)
