"""`load_corpus`: the reader of a preset ("ptb" or "ud") on a path."""

from __future__ import annotations

import os
from pathlib import Path

from convatt.data.corpus import PRESETS, Corpus
from convatt.data.ptb import _directory_files, read_ptb
from convatt.data.ud import SPLITS, find_split_file, read_ud
from convatt.errors import ConvattError


def load_corpus(preset: str, path: str | os.PathLike) -> Corpus:
    """Read a corpus: "ptb" -> `read_ptb(path)` (a directory or tar archive of .mrg files),
    "ud" -> `read_ud(path)` (one UD_* treebank directory)."""
    if preset not in PRESETS:
        raise ConvattError(f"unknown preset {preset!r}: expected one of {', '.join(PRESETS)}")
    path = Path(path)
    if not path.exists():
        raise ConvattError(f"{preset} corpus path not found", path)
    return read_ptb(path) if preset == "ptb" else read_ud(path)


def corpus_files(preset: str, path: str | os.PathLike) -> list[Path]:
    """The files `load_corpus(preset, path)` reads (after it succeeded): a PTB archive
    itself, or its .mrg files; a treebank's three .conllu files."""
    path = Path(path)
    if preset == "ptb":
        return [path] if path.is_file() else [where for where, _ in _directory_files(path).values()]
    return [find_split_file(path, split) for split in SPLITS]
