"""The command line as a user runs it: `python -m convatt ...` in a child process."""

from __future__ import annotations

import subprocess
import sys


def convatt(*args, **kwargs) -> subprocess.CompletedProcess:
    """Run `convatt ARGS` with this interpreter, its stdout and stderr captured, as text unless
    `text=False`; other keywords (`input=`, `cwd=`, `env=`, ...) go to `subprocess.run`."""
    kwargs.setdefault("text", True)
    return subprocess.run([sys.executable, "-m", "convatt", *map(str, args)], capture_output=True, **kwargs)
