"""Tagging accuracy as the paper reports it (REFERENCE.md, "Metrics").

- all:       over non-PAD tokens;
- oov:       over tokens whose word maps to the OOV id;
- ambiguous: over in-vocabulary tokens whose word has more than one tag in training.
A group with no tokens has accuracy None (not 0, not NaN).
"""

from __future__ import annotations

import numpy as np


def _accuracy(correct: np.ndarray, where: np.ndarray) -> float | None:
    n = int(where.sum())
    return None if n == 0 else float(correct[where].sum() / n)


def accuracy_report(
    predicted: np.ndarray,
    gold: np.ndarray,
    oov: np.ndarray,
    ambiguous: np.ndarray,
    tag_names: list[str] | tuple[str, ...] | None = None,
) -> dict:
    """Accuracies of `predicted` tag ids against `gold` ids (0 = PAD, ignored).

    Args:
        predicted, gold: int arrays of the same shape.
        oov, ambiguous: bool arrays of that shape marking OOV / ambiguous tokens.
        tag_names: names of the tag ids, for the per-tag accuracies (by gold tag).
    """
    if predicted.shape != gold.shape:
        raise ValueError(f"predicted {predicted.shape} and gold {gold.shape} differ in shape")
    valid = gold != 0
    correct = (predicted == gold) & valid
    report = {
        "all": _accuracy(correct, valid),
        "oov": _accuracy(correct, valid & oov),
        "ambiguous": _accuracy(correct, valid & ambiguous),
        "n_all": int(valid.sum()),
        "n_oov": int((valid & oov).sum()),
        "n_ambiguous": int((valid & ambiguous).sum()),
    }
    if tag_names is not None:
        report["per_tag"] = {tag_names[i]: _accuracy(correct, gold == i) for i in np.unique(gold[valid]).tolist()}
    return report


def token_accuracy(predicted: np.ndarray, gold: np.ndarray) -> float:
    """Accuracy over non-PAD tokens (the early-stopping criterion)."""
    valid = gold != 0
    return float(((predicted == gold) & valid).sum() / max(int(valid.sum()), 1))


def batch_mean_accuracy(predicted: np.ndarray, gold: np.ndarray, batch_size: int = 32) -> float:
    """The original code's early-stopping metric `val_true_acc`.

    Keras 2.2.4 evaluated the dev split in batches of `batch_size` sequences (in
    order), computed each batch's accuracy over its non-PAD tokens, and averaged
    the batches weighted by their number of sequences: a batch of short sentences
    counts as much as one of long sentences, unlike `token_accuracy`.
    """
    n = len(gold)
    total = 0.0
    for start in range(0, n, batch_size):
        p, g = predicted[start : start + batch_size], gold[start : start + batch_size]
        total += token_accuracy(p, g) * len(g)
    return total / max(n, 1)
