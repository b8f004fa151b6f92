"""A causal sequence task's data: its corpus (pairs of symbol and next symbol, "" for none),
encoded as arrays, and how a split is scored.

    symbols    the vocabulary: PAD (id 0), OOV (id 1), then the training inputs' and targets'
               symbols by frequency (ties alphabetically)
    split      inputs and targets (n, max_len), weights 1 where a target is scored
    score      find-block: exact match (a sample is right when every answer symbol is the
               model's argmax given the true symbols before it: exactly when greedy decoding
               writes the answer); char-lm: next-character accuracy and bits per character
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

import keras
import numpy as np

from convatt.data.corpus import Corpus, Sentence
from convatt.data.vocab import OOV, OOV_ID, PAD

LN2 = math.log(2.0)


def symbol_vocabulary(corpus: Corpus) -> list[str]:
    """PAD, OOV, then the training symbols (inputs and targets) by falling frequency."""
    counts = Counter(s for sentence in corpus.train for pair in sentence for s in pair if s)
    return [PAD, OOV] + sorted(counts, key=lambda s: (-counts[s], s))


@dataclass(frozen=True)
class SplitScores:
    """What a split's predictions measure: per sequence (its scored symbols, how many are
    right, its summed cross-entropy in nats) and the task's accuracy."""

    symbols: np.ndarray  # (n,) scored symbols per sequence
    correct: np.ndarray  # (n,) right ones
    nats: np.ndarray  # (n,) summed -log p(target)
    exact_match: bool  # the task's accuracy: sequences all right (find-block) or symbols right

    @property
    def accuracy(self) -> float:
        if self.exact_match:
            return float((self.correct == self.symbols).mean())
        return float(self.correct.sum() / max(self.symbols.sum(), 1))

    @property
    def bits_per_symbol(self) -> float:
        return float(self.nats.sum() / max(self.symbols.sum(), 1) / LN2)

    def to_json(self) -> dict:
        """result.json's split scores: "all" is the task's accuracy (a fraction), as the tagger's."""
        n = len(self.symbols) if self.exact_match else int(self.symbols.sum())
        return {
            "all": self.accuracy,
            "n_all": n,
            "oov": None,
            "n_oov": 0,
            "ambiguous": None,
            "n_ambiguous": 0,
            "symbol_accuracy": float(self.correct.sum() / max(self.symbols.sum(), 1)),
            "bits_per_symbol": self.bits_per_symbol,
            "scored_symbols": int(self.symbols.sum()),
        }

    def sentence_rows(self) -> list[dict]:
        """test_sentences.csv's rows: a sample counts as one token (find-block), a chunk as its characters."""
        tokens = np.ones_like(self.symbols) if self.exact_match else self.symbols
        right = (self.correct == self.symbols).astype(int) if self.exact_match else self.correct
        return [
            dict(sentence=i, tokens=int(t), correct=int(c), oov_tokens=0, oov_correct=0,
                 ambiguous_tokens=0, ambiguous_correct=0)
            for i, (t, c) in enumerate(zip(tokens, right))
        ]  # fmt: skip


@dataclass(frozen=True)
class SequenceSplit:
    """One split as arrays (n, max_len): symbol ids, next-symbol ids, weights (1: scored)."""

    inputs: np.ndarray
    targets: np.ndarray
    weights: np.ndarray
    exact_match: bool

    def __len__(self) -> int:
        return len(self.inputs)

    def scores(self, model: keras.Model, batch_size: int) -> SplitScores:
        """The model's scores on this split (teacher forcing: the true symbols as context)."""
        correct, nats = np.zeros(len(self)), np.zeros(len(self))
        for start in range(0, len(self), batch_size):
            rows = slice(start, start + batch_size)
            logits = np.asarray(keras.ops.convert_to_numpy(model(self.inputs[rows], training=False)), dtype=np.float64)
            log_p = logits - logits.max(-1, keepdims=True)
            log_p -= np.log(np.exp(log_p).sum(-1, keepdims=True))
            target_log_p = np.take_along_axis(log_p, self.targets[rows][..., None], axis=-1)[..., 0]
            weights = self.weights[rows]
            correct[rows] = ((logits.argmax(-1) == self.targets[rows]) * weights).sum(-1)
            nats[rows] = -(target_log_p * weights).sum(-1)
        return SplitScores(self.weights.sum(-1), correct, nats, self.exact_match)


def encode_sequences(sentences: list[Sentence], symbols: list[str], max_len: int, exact_match: bool) -> SequenceSplit:
    """Pad (or cut) each sentence of (symbol, next symbol or "") pairs to `max_len`."""
    ids = {s: i for i, s in enumerate(symbols)}
    shape = (len(sentences), max_len)
    inputs, targets, weights = np.zeros(shape, "int32"), np.zeros(shape, "int32"), np.zeros(shape, "float32")
    for row, sentence in enumerate(sentences):
        for col, (symbol, target) in enumerate(sentence[:max_len]):
            inputs[row, col] = ids.get(symbol, OOV_ID)
            if target:
                targets[row, col], weights[row, col] = ids.get(target, OOV_ID), 1.0
    return SequenceSplit(inputs, targets, weights, exact_match)
