"""Behaviour: position information in SelfAttention is usable and necessary.

Task: random token sequences; the label at position t is the token at t - 1 (position 0
is ignored). One SelfAttention between an Embedding and a softmax Dense. With direct
position interactions (+P), relative biases (+R) or Shaw et al.'s relative positions the
layer learns to attend to the previous token (> 95% on held-out data); without
position information it cannot beat the best position-blind guess (the most frequent
other token of the sequence, ~21% here; chance is 1/32).
"""

from collections import Counter

import keras
import numpy as np
import pytest

from convatt.layers import SelfAttention

VOCAB, T, DIM = 32, 8, 16


def previous_token_data(n, seed):
    tokens = np.random.default_rng(seed).integers(0, VOCAB, size=(n, T))
    labels = np.roll(tokens, 1, axis=1)
    weights = np.ones((n, T), "float32")
    weights[:, 0] = 0.0  # position 0 has no previous token
    return tokens, labels, weights


def train_and_score(seed=0, **options):
    keras.utils.set_random_seed(seed)
    ids = keras.Input((T,), dtype="int32")
    h = keras.layers.Embedding(VOCAB, DIM)(ids)
    h = SelfAttention(1, DIM, max_len=T, **options)(h)
    model = keras.Model(ids, keras.layers.Dense(VOCAB, activation="softmax")(h))
    model.compile(keras.optimizers.Adam(0.02), "sparse_categorical_crossentropy")
    tokens, labels, weights = previous_token_data(800, seed)
    model.fit(tokens, labels, sample_weight=weights, batch_size=50, epochs=6, verbose=0)
    tokens, labels, _ = previous_token_data(500, 1000 + seed)
    predicted = model.predict(tokens, batch_size=500, verbose=0).argmax(-1)
    return float((predicted == labels)[:, 1:].mean())


def position_blind_bound(seed=0):
    """Expected accuracy of guessing the most frequent token other than x_t (ties split)."""
    tokens, labels, _ = previous_token_data(500, 1000 + seed)
    scores = []
    for seq, lab in zip(tokens, labels):
        for t in range(1, T):
            counts = Counter(seq.tolist())
            counts[seq[t]] -= 1
            top = max(counts.values())
            best = [v for v, c in counts.items() if c == top]
            scores.append((lab[t] in best) / len(best))
    return float(np.mean(scores))


@pytest.mark.parametrize(
    "options",
    [dict(position_interaction=True), dict(relative_bias=True), dict(relative_position_representation=2)],
    ids=["P", "R", "shaw"],
)
@pytest.mark.tf_only
def test_position_information_learns_previous_token(options):
    assert train_and_score(**options) > 0.95


@pytest.mark.tf_only
def test_no_position_information_stays_at_position_blind_level():
    bound = position_blind_bound()
    assert bound < 0.3
    accuracy = train_and_score()
    assert accuracy < bound + 0.05
    assert accuracy > 1.5 / VOCAB  # it does learn what it can: the sequence's tokens
