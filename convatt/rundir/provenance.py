"""Where a run was trained: the code's git commit, the backend and the machine, for result.json.

source_commit()   "c44886e", "c44886e+changes" (uncommitted changes to tracked files), the
                  commit a copy without .git was given (COMMIT_VARIABLE, or COMMIT_FILE as
                  `git archive` writes it), or "" where none is known
run_record()      result.json's fields on how the run was made: the backend, convatt's version,
                  the commit and the machine (`convatt.machine`: its summary and `Platform`)
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from convatt import __version__, machine

PACKAGE_DIR = Path(__file__).resolve().parent
COMMIT_VARIABLE = "CONVATT_COMMIT"  # the commit of a copy without .git, set by whoever made the copy
COMMIT_FILE = PACKAGE_DIR / "COMMIT"  # "$Format:%h$" in the repository; `git archive` writes the commit


def _git(*args: str) -> str | None:
    try:
        proc = subprocess.run(["git", "-C", str(PACKAGE_DIR), *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def source_commit() -> str:
    """The short commit of the checkout convatt is imported from, "+changes" if tracked files
    differ; outside a checkout the commit the copy was given, else ""."""
    commit = _git("rev-parse", "--short", "HEAD")
    if not commit:
        return _given_commit()
    changed = _git("status", "--porcelain", "--untracked-files=no", "--", ".")
    return commit + ("+changes" if changed else "")


def _given_commit() -> str:
    """COMMIT_VARIABLE, else COMMIT_FILE once `git archive` has put the commit in it, else ""."""
    given = os.environ.get(COMMIT_VARIABLE, "").strip()
    if given:
        return given
    try:
        written = COMMIT_FILE.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return ""
    return written if re.fullmatch(r"[0-9a-f]{4,40}", written) else ""  # not "$Format:%h$"


def run_record() -> dict:
    """result.json's fields on the code, the backend and the machine (`RunResult.backend`,
    `convatt_version`, `source_commit` .. `packages`)."""
    here = machine.platform()
    return dict(
        backend=here.backend,
        convatt_version=__version__,
        source_commit=source_commit(),
        machine=machine.summary(),
        cpu=here.cpu,
        cpu_features=here.cpu_features,
        onednn=here.onednn,
        packages=here.packages,
    )
