"""Word, character and tag vocabularies (index 0 = <PAD>, 1 = <OOV>) and ambiguous words."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from convatt.data.corpus import Sentence

PAD, OOV = "<PAD>", "<OOV>"
PAD_ID, OOV_ID = 0, 1
SPECIAL_TOKENS = (PAD, OOV, "<S>", "</S>")
"""The original code's special token strings: their characters are in its char vocabulary."""


@dataclass(frozen=True)
class Vocab:
    """An ordered vocabulary: `tokens[0]` is <PAD>, `tokens[1]` is <OOV>.

    The two specials are reserved positions, not strings: `encode("<PAD>")` gives
    OOV, so no real token is ever encoded as padding.
    """

    tokens: tuple[str, ...]
    _index: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        tokens = tuple(self.tokens)
        if tokens[:2] != (PAD, OOV):
            raise ValueError(f"a Vocab starts with {PAD!r}, {OOV!r}; got {tokens[:2]!r}")
        if len(set(tokens)) != len(tokens):
            raise ValueError("a Vocab holds each token once")
        object.__setattr__(self, "tokens", tokens)
        object.__setattr__(self, "_index", {t: i for i, t in enumerate(tokens) if i > OOV_ID})

    def __len__(self) -> int:
        return len(self.tokens)

    def __contains__(self, token: object) -> bool:
        return token in self._index

    def encode(self, token: str) -> int:
        """Index of `token`, or 1 (OOV) when it is not in the vocabulary."""
        return self._index.get(token, OOV_ID)

    @classmethod
    def from_items(cls, items: Iterable[str]) -> Vocab:
        """<PAD>, <OOV>, then `items` in the given order (duplicates dropped)."""
        return cls((PAD, OOV) + tuple(dict.fromkeys(items)))


def build_word_vocab(
    sentences: Iterable[Sentence], max_size: int | None = None, fraction: float | None = None
) -> Vocab:
    """The most frequent word forms of `sentences` (the caller passes train+dev+test).

    Keeps the `max_size` most frequent forms (PTB: 20,000), or `floor(fraction x
    number of distinct forms)` of them (UD: 0.5); neither given: all forms. Order:
    count descending, ties by first occurrence in `sentences` (Counter.most_common).
    """
    if max_size is not None and fraction is not None:
        raise ValueError("give max_size or fraction, not both")
    counts = Counter(word for sentence in sentences for word, _ in sentence)
    size = len(counts)
    if max_size is not None:
        if max_size < 0:
            raise ValueError(f"max_size must be >= 0, got {max_size}")
        size = min(max_size, size)
    elif fraction is not None:
        if not 0.0 <= fraction <= 1.0:
            raise ValueError(f"fraction must be in [0, 1], got {fraction}")
        size = math.floor(fraction * len(counts) + 1e-9)
    return Vocab.from_items(word for word, _ in counts.most_common(size))


def build_char_vocab(train_sentences: Iterable[Sentence], extra_words: Iterable[str] = ()) -> Vocab:
    """The characters of the training words (and of `extra_words`), in code-point order.

    The original code adds the characters of its special tokens (`SPECIAL_TOKENS`),
    so that a PAD position can be spelt "<PAD>".
    """
    words = [word for s in train_sentences for word, _ in s] + list(extra_words)
    return Vocab.from_items(sorted({ch for word in words for ch in word}))


def build_tag_vocab(sentences: Iterable[Sentence]) -> Vocab:
    """The tags of `sentences`, sorted (45 PTB tags -> 47 labels with PAD and OOV).

    The original code counts them over train+dev+test, so a tag seen only in test
    has an output unit (never a training target); over train alone it maps to OOV.
    """
    return Vocab.from_items(sorted({tag for s in sentences for _, tag in s}))


def ambiguous_words(train_sentences: Iterable[Sentence]) -> frozenset[str]:
    """Word forms seen with more than one tag in the training data."""
    tags: dict[str, set[str]] = {}
    for sentence in train_sentences:
        for word, tag in sentence:
            tags.setdefault(word, set()).add(tag)
    return frozenset(word for word, seen in tags.items() if len(seen) > 1)
