"""The corpus type shared by all readers (`convatt.data.load.load_corpus` picks one)."""

from __future__ import annotations

import dataclasses
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

    def limited(self, limit: int | None) -> Corpus:
        """At most `limit` sentences of each split, the first ones (None: the whole corpus)."""
        if not limit:
            return self
        return dataclasses.replace(self, train=self.train[:limit], dev=self.dev[:limit], test=self.test[:limit])


def unseen_tags(train, evaluated) -> dict[str, int]:
    """Tags of `evaluated` sentences that no training sentence has, with their token counts:
    the model never learns them, so each of their tokens is counted wrong."""
    seen = {tag for sentence in train for _, tag in sentence}
    counts: dict[str, int] = {}
    for sentence in evaluated:
        for _, tag in sentence:
            if tag not in seen:
                counts[tag] = counts.get(tag, 0) + 1
    return dict(sorted(counts.items()))


def describe_unseen_tags(counts: dict[str, int], split: str = "dev/test") -> str:
    listed = ", ".join(f"{tag} ({n:,} token{'s' * (n != 1)})" for tag, n in counts.items())
    return f"{split} tag(s) never seen in training, so always counted wrong: {listed}"
