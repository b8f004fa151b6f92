"""`load_corpus`: the reader of a preset's data format (`convatt.data.formats`) on a path."""

from __future__ import annotations

import os
from pathlib import Path

from convatt.data.corpus import Corpus
from convatt.data.formats import data_format
from convatt.errors import ConvattError


def load_corpus(preset: str, path: str | os.PathLike) -> Corpus:
    """Read a corpus with the reader of `preset`'s format, e.g. "ptb" -> `read_ptb(path)`
    (a directory or tar archive of .mrg files), "ud" -> `read_ud(path)` (one UD_* treebank directory)."""
    reader = data_format(preset).read
    path = Path(path)
    if not path.exists():
        raise ConvattError(f"{preset} corpus path not found", path)
    return reader(path)


def corpus_files(preset: str, path: str | os.PathLike) -> list[Path]:
    """The files `load_corpus(preset, path)` reads (after it succeeded)."""
    return data_format(preset).files(Path(path))
