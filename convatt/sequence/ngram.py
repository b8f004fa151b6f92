"""n-gram baselines of the character language model: interpolated Kneser-Ney (Chen & Goodman 1999).

The events are the character LM's own: every scored (context, next character) of the encoded
splits (`convatt.sequence.data`), in the LM's vocabulary (a character never seen in training is
the OOV id, as the LM reads it). An n-gram model predicts from the up to n - 1 characters before
the target in its chunk; near a chunk's start, where fewer are there, it uses the lower orders
it has context for (as the LM sees only its chunk). It is fitted on the training split's events.

    KneserNey.fit(split, order, n_symbols)   counts of the training split's events
    KneserNey.log_probs(split)               ln p(target | context) of each scored event
    KneserNey.distribution(context)          p over the vocabulary after one context
    ngram_baselines(train, dev, test, ...)   bits per character on dev and test per order
    corpus_baselines(corpus)                 the same from a character text

The model: p_m(w | h) = max(c_m(h w) - D_m, 0) / c_m(h) + D_m N_m(h) / c_m(h) p_{m-1}(w | h'),
h' the context without its first character, c at the top order the training counts, below it
the continuation counts (distinct characters seen before h w), N_m(h) the characters seen after
h, D_m = n1 / (n1 + 2 n2) (n1, n2: m-grams counted once, twice), p_0 uniform over the
vocabulary but PAD (OOV included, so an unseen character has a probability). A context never
seen falls back to p_{m-1}. The unigram model (order 1) is absolute discounting against uniform.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from convatt.data.corpus import Corpus
from convatt.errors import ConvattError
from convatt.sequence.data import LN2, SequenceSplit, encode_sequences, symbol_vocabulary

FALLBACK_DISCOUNT = 0.75  # where n1 / (n1 + 2 n2) is undefined or 0 (tiny texts)
ORDER_NAMES = {1: "unigram", 2: "bigram", 3: "trigram"}


def order_name(order: int) -> str:
    return ORDER_NAMES.get(order, f"{order}-gram")


@dataclass(frozen=True)
class _Events:
    """A split's scored events: each target, its position in its chunk, and the chunk's inputs."""

    inputs: np.ndarray  # (events, max context) the characters before the target, latest last
    targets: np.ndarray  # (events,)
    available: np.ndarray  # (events,) how many of them lie in the chunk

    @classmethod
    def of(cls, split: SequenceSplit, max_context: int) -> _Events:
        rows, cols = np.nonzero(split.weights)
        offsets = np.arange(-max_context + 1, 1)  # the last max_context inputs up to the target's
        where = cols[:, None] + offsets[None, :]
        inputs = np.where(where >= 0, split.inputs[rows[:, None], np.maximum(where, 0)], 0).astype(np.int64)
        return cls(inputs, split.targets[rows, cols].astype(np.int64), cols + 1)

    def context_keys(self, length: int, base: int) -> np.ndarray:
        """The last `length` inputs as one base-`base` number per event (-1: fewer in the chunk)."""
        keys = np.zeros(len(self.targets), dtype=np.int64)
        for column in range(self.inputs.shape[1] - length, self.inputs.shape[1]):
            keys = keys * base + self.inputs[:, column]
        return np.where(self.available >= length, keys, -1)


@dataclass(frozen=True)
class _Order:
    """One order's counts, keyed by base-n_symbols numbers of (context, character)."""

    gram_keys: np.ndarray  # sorted
    gram_counts: np.ndarray
    context_keys: np.ndarray  # sorted
    context_totals: np.ndarray  # c_m(h)
    context_followers: np.ndarray  # N_m(h)
    discount: float

    @classmethod
    def of(cls, keys: np.ndarray, counts: np.ndarray, base: int, discount: float | None) -> _Order:
        contexts, inverse = np.unique(keys // base, return_inverse=True)
        totals = np.bincount(inverse, weights=counts).astype(np.int64)
        if discount is None:
            n1, n2 = int((counts == 1).sum()), int((counts == 2).sum())
            discount = n1 / (n1 + 2 * n2) if n1 else FALLBACK_DISCOUNT
        return cls(keys, counts, contexts, totals, np.bincount(inverse), float(discount))


class KneserNey:
    """An interpolated Kneser-Ney model of `order` over ids 1 ... n_symbols - 1 (0 is PAD)."""

    def __init__(self, orders: list[_Order], n_symbols: int):
        self.orders, self.n_symbols = orders, n_symbols

    @property
    def order(self) -> int:
        return len(self.orders)

    @property
    def stored_counts(self) -> int:
        """How many counts the model keeps (its distinct m-grams over all orders)."""
        return sum(len(o.gram_keys) for o in self.orders)

    @classmethod
    def fit(cls, split: SequenceSplit, order: int, n_symbols: int, discount: float | None = None) -> KneserNey:
        """Counts of `split`'s scored events; `discount`: one D for every order (default: estimated)."""
        if order < 1 or n_symbols**order >= 2**62:
            raise ConvattError(f"n-gram order {order} must be >= 1 and n_symbols ** order fit 62 bits")
        events = _Events.of(split, order - 1)
        grams = [events.context_keys(m - 1, n_symbols) * n_symbols + events.targets for m in range(1, order + 1)]
        grams = [g[events.available >= m - 1] for m, g in zip(range(1, order + 1), grams)]
        keys, counts = np.unique(grams[-1], return_counts=True)
        orders = [_Order.of(keys, counts, n_symbols, discount)]
        for m in range(order - 1, 0, -1):  # continuation counts: distinct characters before each m-gram
            keys, counts = np.unique(np.unique(grams[m]) % n_symbols**m, return_counts=True)
            orders.insert(0, _Order.of(keys, counts, n_symbols, discount))
        return cls(orders, n_symbols)

    def _probs(self, events: _Events) -> np.ndarray:
        p = np.full(len(events.targets), 1.0 / (self.n_symbols - 1))
        for m, counts in enumerate(self.orders, start=1):
            context = events.context_keys(m - 1, self.n_symbols)
            seen, at = _lookup(context, counts.context_keys)
            has_gram, gram = _lookup(np.where(seen, context * self.n_symbols + events.targets, -1), counts.gram_keys)
            count = np.where(has_gram, counts.gram_counts[gram], 0)
            total = np.where(seen, counts.context_totals[at], 1)
            d = counts.discount
            mixed = np.maximum(count - d, 0) / total + d * counts.context_followers[at] / total * p
            p = np.where(seen, mixed, p)
        return np.where(events.targets > 0, p, 0.0)

    def log_probs(self, split: SequenceSplit) -> np.ndarray:
        """ln p(target | context) of each scored event of `split` (row-major order)."""
        return np.log(self._probs(_Events.of(split, self.order - 1)))

    def distribution(self, context: list[int]) -> np.ndarray:
        """p(w | context) for every id w (p[0] = 0: PAD); `context`: the ids before, latest last."""
        context = list(context)[-(self.order - 1) :] if self.order > 1 else []
        width = max(self.order - 1, 1)
        padded = np.array([0] * (width - len(context)) + context, dtype=np.int64)
        events = _Events(
            np.tile(padded, (self.n_symbols, 1)), np.arange(self.n_symbols), np.full(self.n_symbols, len(context))
        )
        return self._probs(events)


def _lookup(keys: np.ndarray, table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(found, index into the sorted `table`) of each key; a key < 0 is never found."""
    if not len(table):
        return np.zeros(len(keys), dtype=bool), np.zeros(len(keys), dtype=np.int64)
    index = np.minimum(np.searchsorted(table, keys), len(table) - 1)
    return (keys >= 0) & (table[index] == keys), index


def bits_per_character(model: KneserNey, split: SequenceSplit) -> float:
    log_p = model.log_probs(split)
    return float(-log_p.sum() / len(log_p) / LN2)


NGRAM_COLUMNS = ["order", "model", "smoothing", "stored_counts", "dev_bpc", "test_bpc", "test_characters"]
ORDERS = (1, 2, 3, 5)


def ngram_baselines(
    train: SequenceSplit, dev: SequenceSplit, test: SequenceSplit, n_symbols: int, orders: tuple[int, ...] = ORDERS
) -> pd.DataFrame:
    """Bits per character on dev and test of interpolated Kneser-Ney models of each order fitted on
    `train`: the encoded splits of a character LM run (NGRAM_COLUMNS)."""
    rows = []
    for order in orders:
        model = KneserNey.fit(train, order, n_symbols)
        rows.append(
            dict(order=order, model=f"{order_name(order)} (Kneser-Ney)", smoothing="interpolated Kneser-Ney",
                 stored_counts=model.stored_counts, dev_bpc=bits_per_character(model, dev),
                 test_bpc=bits_per_character(model, test), test_characters=int(test.weights.sum()))
        )  # fmt: skip
    return pd.DataFrame(rows, columns=NGRAM_COLUMNS)


def corpus_baselines(corpus: Corpus, orders: tuple[int, ...] = ORDERS) -> pd.DataFrame:
    """`ngram_baselines` of a character text (`convatt.data.char_text`), encoded as the LM encodes it."""
    symbols = symbol_vocabulary(corpus)
    max_len = max(len(s) for s in corpus.all_sentences())
    splits = [encode_sequences(getattr(corpus, n), symbols, max_len, False) for n in ("train", "dev", "test")]
    return ngram_baselines(*splits, len(symbols), orders)
