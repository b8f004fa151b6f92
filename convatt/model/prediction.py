"""A trained tagger's predictions on an encoded split, and their accuracies."""

from __future__ import annotations

import keras
import numpy as np

from convatt.data import EncodedSplit
from convatt.data.batching import iterate_batches
from convatt.training.metrics import accuracy_report


def predict_tags(model: keras.Model, split: EncodedSplit, batch_size: int = 256) -> np.ndarray:
    """Predicted tag ids (n, t) for an encoded split."""
    batches = iterate_batches(split, batch_size, few_shapes=bool(model.jit_compile))
    out = [np.argmax(model.predict_on_batch(x), axis=-1) for x, _, _ in batches]
    return np.concatenate(out) if out else np.zeros_like(split.tags)


def evaluate(model: keras.Model, split: EncodedSplit, tag_names, batch_size: int = 256) -> dict:
    """`accuracy_report` of the model's predictions (all / OOV / ambiguous / per tag)."""
    return accuracy_report(predict_tags(model, split, batch_size), split.tags, split.oov, split.ambiguous, tag_names)
