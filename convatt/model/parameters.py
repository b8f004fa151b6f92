"""A model's size as the paper counts it, for any model convatt trains (the tagger, the
causal sequence tasks' model): one number in a run's log and result.json, and `convatt params`."""

from __future__ import annotations

import keras
import numpy as np


def count_parameters(model: keras.Model) -> int:
    """All weights, frozen word embeddings included (as Table 1c counts them)."""
    return int(sum(np.prod(w.shape) for w in model.weights))
