"""The corpus type shared by all readers (`convatt.data.load.load_corpus` picks one)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

Sentence = list[tuple[str, str]]
"""One sentence as (word form, tag) pairs."""

MAX_LEN = 60  # t: tokens per encoded row, the tagger's sequence length (REFERENCE.md)
MAX_WORD_LEN = 20  # t_char: characters per word

EMBEDDED_DATA_DIR = Path(__file__).resolve().parents[1] / "embedded"
"""The corpora shipped inside the package (`convatt/embedded/`, package data), and the paper's tables."""


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
