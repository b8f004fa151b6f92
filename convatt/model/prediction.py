"""A trained tagger's predictions on an encoded split, and their accuracies."""

from __future__ import annotations

import keras
import numpy as np

from convatt.data import EncodedSplit
from convatt.data.batching import iterate_batches
from convatt.data.vocab import OOV_ID
from convatt.protocol.metrics import accuracy_report


def predict_tags(
    model: keras.Model, split: EncodedSplit, batch_size: int = 256, real_tags_only: bool = False
) -> np.ndarray:
    """Predicted tag ids (n, t) for an encoded split: the most probable of all labels, or
    with `real_tags_only` the most probable real tag (never <PAD> or <OOV>, for tagging text)."""
    first = OOV_ID + 1 if real_tags_only else 0
    batches = iterate_batches(split, batch_size, few_shapes=bool(getattr(model, "jit_compile", False)))
    out = [np.argmax(np.asarray(model.predict_on_batch(x))[..., first:], axis=-1) + first for x, _, _ in batches]
    return np.concatenate(out) if out else np.zeros(split.words.shape, dtype=np.int64)


def evaluate(model: keras.Model, split: EncodedSplit, tag_names, batch_size: int = 256) -> dict:
    """`accuracy_report` of the model's predictions (all / OOV / ambiguous / per tag)."""
    return score_predictions(predict_tags(model, split, batch_size), split, tag_names)


def score_predictions(predicted: np.ndarray, split: EncodedSplit, tag_names) -> dict:
    """`accuracy_report` of tag ids already predicted on `split` (`predict_tags`): a caller
    that needs the predictions for more than the accuracies predicts once."""
    return accuracy_report(predicted, split.tags, split.oov, split.ambiguous, tag_names)
