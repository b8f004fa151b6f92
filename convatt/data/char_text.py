"""A UD treebank's text for a character-level causal language model.

Each split's sentences (their word forms joined by spaces; the treebank's own train, dev and
test) are joined by newlines into one text, cut into consecutive chunks of `CHUNK_LEN + 1`
characters overlapping by one: chunk k predicts characters k * CHUNK_LEN + 1 ... (k + 1) *
CHUNK_LEN of the text, each from the characters before it in its chunk, so every character
but the first is predicted exactly once. As a `Corpus`, a chunk is a causal tagging: (character
i, character i + 1).
"""

from __future__ import annotations

import os

from convatt.data.corpus import Corpus, Sentence
from convatt.data.ud import read_ud

CHUNK_LEN = 128  # characters of context at most, and the model's sequence length


def split_text(sentences: list[Sentence]) -> str:
    """The text of a split: each sentence's forms joined by spaces, the sentences by newlines."""
    return "\n".join(" ".join(form for form, _ in sentence) for sentence in sentences)


def text_chunks(text: str, chunk_len: int = CHUNK_LEN) -> list[Sentence]:
    """(character, next character) pairs of consecutive chunks (the last may be shorter)."""
    return [
        [(text[i], text[i + 1]) for i in range(start, min(start + chunk_len, len(text) - 1))]
        for start in range(0, len(text) - 1, chunk_len)
    ]


def read_char_text(treebank_dir: str | os.PathLike) -> Corpus:
    """A UD treebank directory's text as chunks of (character, next character)."""
    corpus = read_ud(treebank_dir)
    chunks = {split: text_chunks(split_text(getattr(corpus, split))) for split in ("train", "dev", "test")}
    return Corpus(corpus.name, **chunks)
