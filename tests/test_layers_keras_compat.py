"""convatt on the installed Keras, whichever setup.cfg admits (`make test-compat` runs this file
in a venv at the floor, CI too): the plain layer against *that* Keras' own layer, every
modification on a causal call, `fit` and a `.keras` round trip, the compatibility module's
answers, and a one-epoch tagger and character LM run."""

from __future__ import annotations

import inspect

import keras
import numpy as np
import pytest
from layer_harness import to_numpy

from convatt.layers import MultiHeadAttention
from convatt.layers import _keras_compat as keras_compat
from convatt.layers.core.modifications import MODIFICATIONS

B, T, S, D, H, K = 2, 10, 7, 8, 2, 4
RNG = np.random.default_rng(0)
X = RNG.normal(size=(B, T, D)).astype("float32")
Y = RNG.normal(size=(B, S, D)).astype("float32")  # the other sequence of cross-attention


def _pair(**kwargs) -> tuple:
    """Keras' layer and convatt's, built on `X` (and `Y`), with the same weights."""
    theirs, ours = keras.layers.MultiHeadAttention(H, K, **kwargs), MultiHeadAttention(H, K, **kwargs)
    for layer in (theirs, ours):
        layer(X, Y)
    ours.set_weights([RNG.normal(scale=0.5, size=w.shape).astype("float32") for w in ours.get_weights()])
    theirs.set_weights(ours.get_weights())
    return theirs, ours


CALLS = {
    "self": lambda layer: layer(X, X, return_attention_scores=True),
    "causal": lambda layer: layer(X, X, use_causal_mask=True),
    "attention_mask": lambda layer: layer(X, X, attention_mask=np.tril(np.ones((B, T, T), bool), 2)),
    "cross": lambda layer: layer(X, Y, return_attention_scores=True),
    "cross-masked": lambda layer: layer(X, Y, value_mask=np.arange(S)[None] < np.array([[S], [S - 3]])),
}


def _outputs(result) -> list:
    return to_numpy(result)


@pytest.mark.parametrize("call", CALLS)
def test_the_plain_layer_computes_what_this_keras_layer_computes(call):
    theirs, ours = _pair()
    expected = _outputs(CALLS[call](theirs))
    for want, have in zip(expected, _outputs(CALLS[call](ours)), strict=True):
        np.testing.assert_allclose(have, want, atol=1e-5)
    other = _pair()[1]  # other weights: other outputs (the comparison can fail)
    assert not np.allclose(_outputs(CALLS[call](other))[0], expected[0], atol=1e-3)


def test_with_dropout_in_training_too():
    """Keras' own path with dropout (its einsum and masked softmax, not the fused kernel) at inference."""
    theirs, ours = _pair(dropout=0.3)
    np.testing.assert_allclose(
        to_numpy(ours(X, X, use_causal_mask=True)), to_numpy(theirs(X, X, use_causal_mask=True)), atol=1e-5
    )


@pytest.mark.parametrize("row", [row for row in MODIFICATIONS], ids=lambda row: row.name)
def test_every_modification_runs_causally(row):
    """A causal call with the row's modification: no output moves when later tokens change."""
    layer = MultiHeadAttention(H, K, max_len=T, **row.example_options())
    [out] = to_numpy(layer(X, X, use_causal_mask=True))
    changed = X.copy()
    changed[:, T // 2 :] += 1.0
    [again] = to_numpy(layer(changed, changed, use_causal_mask=True))
    np.testing.assert_allclose(again[:, : T // 2], out[:, : T // 2], atol=1e-5)
    assert not np.allclose(again[:, T // 2 :], out[:, T // 2 :], atol=1e-3)


def test_fit_with_conv2d_and_a_keras_round_trip(tmp_path):
    inputs = keras.Input((T, D))
    outputs = keras.layers.Dense(3)(MultiHeadAttention(H, K, attention_conv="2d")(inputs, inputs, use_causal_mask=True))
    model = keras.Model(inputs, outputs)
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    targets = RNG.integers(0, 3, size=(B, T))
    losses = model.fit(np.repeat(X, 4, 0), np.repeat(targets, 4, 0), epochs=8, batch_size=4, verbose=0).history["loss"]
    assert losses[-1] < losses[0]
    model.save(tmp_path / "model.keras")
    loaded = keras.models.load_model(tmp_path / "model.keras")
    np.testing.assert_allclose(to_numpy(loaded(X))[0], to_numpy(model(X))[0], atol=1e-6)


def test_the_compatibility_answers_follow_keras_own_signature():
    """The module's feature tests read the installed Keras (never a version number)."""
    arguments = inspect.signature(keras.layers.MultiHeadAttention._compute_attention).parameters
    assert keras_compat.FUSED_CAUSAL == ("use_causal_mask" in arguments)
    assert keras_compat.SCORES_ARGUMENT == ("return_attention_scores" in arguments)
    plain = keras.layers.MultiHeadAttention(H, K)
    assert keras_compat.sliding_window(plain) is None and keras_compat.gate_dense(plain) is None
    assert keras_compat.flash_attention(plain) in (False, True)
    with pytest.raises(ValueError, match="flash_attention"):
        MultiHeadAttention(H, K, flash_attention=True, attention_conv="2d")


def test_remat_recomputes_the_same_values_and_gradients():
    """`keras.remat`, or before Keras 3.9 the backend's own, under either backend."""

    def f(x):
        return keras.ops.sum(keras.ops.tanh(x) ** 2)

    x = keras.ops.convert_to_tensor(X)
    # recomputed under another compilation: the same to float rounding, not bit for bit
    np.testing.assert_allclose(to_numpy(keras_compat.remat(f)(x)), to_numpy(f(x)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(_gradient(keras_compat.remat(f), x), _gradient(f, x), rtol=1e-5, atol=1e-6)


def _gradient(f, x):
    if keras.backend.backend() == "jax":
        import jax

        return np.asarray(jax.grad(f)(x))
    import tensorflow as tf

    with tf.GradientTape() as tape:
        tape.watch(x)
        value = f(x)
    return tape.gradient(value, x).numpy()


@pytest.mark.slow
@pytest.mark.parametrize("preset", ["ud", "charlm"])
def test_one_epoch_of_the_tagger_and_the_char_lm(tmp_path, preset):
    import convatt

    variant = "san-pe-add-conv2d"
    result = convatt.train(
        preset=preset, variant=variant, out=str(tmp_path / preset), limit=48, epochs=1, log=lambda line: None
    )
    scores = [value for value in result.test.values() if isinstance(value, float)]
    assert result.epochs_run == 1 and scores and all(np.isfinite(scores))
