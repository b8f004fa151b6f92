"""File helpers shared by the readers: existence checks and strict UTF-8 text."""

from __future__ import annotations

import gzip
import os
import zlib
from pathlib import Path

from convatt.errors import ConvattError


def existing_file(path: str | os.PathLike) -> Path:
    """Return `path` as a Path, or raise ConvattError if it is not a readable file."""
    path = Path(path)
    if not path.exists():
        raise ConvattError("file not found", path)
    if not path.is_file():
        raise ConvattError("expected a file, found a directory or special file", path)
    return path


def existing_dir(path: str | os.PathLike, what: str = "directory") -> Path:
    """Return `path` as a Path, or raise ConvattError if it is not a directory."""
    path = Path(path)
    if not path.exists():
        raise ConvattError(f"{what} not found", path)
    if not path.is_dir():
        raise ConvattError(f"expected a {what}, found a file", path)
    return path


def line_of(text: str, offset: int) -> int:
    """1-based line number of character `offset` in `text`."""
    return text.count("\n", 0, offset) + 1


def read_text(path: str | os.PathLike) -> str:
    """Read a UTF-8 text file, gzip-compressed if its name ends in `.gz`.

    Newlines are normalised to "\\n" (as Python's universal newlines do) and a
    leading byte-order mark is dropped, so line numbers match what an editor shows.
    """
    path = existing_file(path)
    try:
        if path.name.endswith(".gz"):
            with gzip.open(path, "rb") as f:
                raw = f.read()
        else:
            raw = path.read_bytes()
    except (OSError, EOFError, zlib.error) as e:  # BadGzipFile is an OSError
        raise ConvattError(f"cannot read file: {e}", path) from e
    return decode_text(raw, path)


def decode_text(raw: bytes, path: str | os.PathLike) -> str:
    """`raw` as `read_text` returns a file's text; errors name `path` (e.g. "<stdin>")."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise ConvattError(
            f"not valid UTF-8 (byte 0x{raw[e.start]:02x}); expected a UTF-8 text file", path, line
        ) from e
    if text.startswith("\ufeff"):
        text = text[1:]
    return text.replace("\r\n", "\n").replace("\r", "\n")
