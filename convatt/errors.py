"""The project's own error type: every expected failure is a `ConvattError`."""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable


class ConvattError(Exception):
    """A problem with the user's input, reported without a traceback by the CLI.

    Args:
        message: what is wrong and what was expected.
        path: the file (or directory) concerned, if any.
        line: the 1-based line number in `path`, if known.
    """

    def __init__(self, message: str, path: str | os.PathLike | None = None, line: int | None = None):
        self.message = message
        self.path = None if path is None else os.fspath(path)
        self.line = line
        where = ""
        if self.path is not None:
            where = self.path if line is None else f"{self.path}:{line}"
            where += ": "
        super().__init__(where + message)


def check_known(kind: str, name: str, known: Iterable[str]) -> None:
    """A ConvattError naming the `known` names (and the closest to `name`) unless `name` is one:
    `kind` says what is named ("preset", "variant")."""
    known = list(known)
    if name not in known:
        close = difflib.get_close_matches(str(name).lower(), known, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ConvattError(f"unknown {kind} {name!r}.{hint} Known: {', '.join(known)}")
