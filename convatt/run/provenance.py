"""Where a run was trained: the code's git commit and the machine, for result.json.

source_commit()   "c44886e", "c44886e+changes" (uncommitted changes to tracked files),
                  or "" outside a git checkout (an installed wheel) or without git
machine()         "x86_64, 2 CPUs, cpu:0" / "x86_64, 16 CPUs, gpu:0": the architecture,
                  the machine's CPU count and the first device Keras computes on
"""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path

import keras

PACKAGE_DIR = Path(__file__).resolve().parent


def _git(*args: str) -> str | None:
    try:
        proc = subprocess.run(["git", "-C", str(PACKAGE_DIR), *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def source_commit() -> str:
    """The short commit of the checkout convatt is imported from, "+changes" if tracked files differ."""
    commit = _git("rev-parse", "--short", "HEAD")
    if not commit:
        return ""
    changed = _git("status", "--porcelain", "--untracked-files=no", "--", ".")
    return commit + ("+changes" if changed else "")


def machine() -> str:
    """The architecture, the machine's CPU count and the first device Keras computes on."""
    devices = keras.distribution.list_devices()
    return f"{platform.machine()}, {os.cpu_count()} CPUs, {devices[0] if devices else 'cpu'}"
