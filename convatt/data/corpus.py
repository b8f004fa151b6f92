"""The corpus type shared by all readers, and `load_corpus` to pick a reader by preset."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from convatt.errors import ConvattError

Sentence = list[tuple[str, str]]
"""One sentence as (word form, tag) pairs."""

EMBEDDED_DATA_DIR = Path(__file__).resolve().parents[1] / "embedded"
"""The corpora shipped inside the package (`convatt/embedded/`, package data), and the paper's tables."""

PRESETS = ("ptb", "ud")


@dataclass(frozen=True)
class Corpus:
    """A tagged corpus split into train, dev and test.

    Attributes:
        name: e.g. "PTB", "PTB-sample", "English-LinES".
        train, dev, test: the sentences of each split.
        note: a human warning about the data (empty when there is none).
    """

    name: str
    train: list[Sentence]
    dev: list[Sentence]
    test: list[Sentence]
    note: str = ""

    def all_sentences(self) -> list[Sentence]:
        """train + dev + test, in that order."""
        return self.train + self.dev + self.test


def load_corpus(preset: str, path: str | os.PathLike) -> Corpus:
    """Read a corpus: "ptb" -> `read_ptb(path)` (a directory of .mrg files),
    "ud" -> `read_ud(path)` (one UD_* treebank directory)."""
    from convatt.data.ptb import read_ptb
    from convatt.data.ud import read_ud

    if preset not in PRESETS:
        raise ConvattError(f"unknown preset {preset!r}: expected one of {', '.join(PRESETS)}")
    path = Path(path)
    if not path.exists():
        raise ConvattError(f"{preset} corpus path not found", path)
    return read_ptb(path) if preset == "ptb" else read_ud(path)


def corpus_files(preset: str, path: str | os.PathLike) -> list[Path]:
    """The files `load_corpus(preset, path)` reads (after it succeeded)."""
    from convatt.data.ptb import _wsj_files
    from convatt.data.ud import SPLITS, find_split_file

    if preset == "ptb":
        return list(_wsj_files(Path(path)).values())
    return [find_split_file(path, split) for split in SPLITS]
