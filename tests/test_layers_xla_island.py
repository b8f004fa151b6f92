"""The modified attention as an XLA island where TensorFlow runs without XLA (Keras' default on a
CPU): the same outputs and gradients as op by op and as under XLA (to float rounding), for every
table row, causal and bidirectional, padded; the island taken exactly where it should be; the
dropout's mask the same in the backward (recomputed or kept); a `stateless_call` and an unknown length.
The island is made in a traced graph only, so each test traces one (`tf.function`)."""

from __future__ import annotations

import keras
import numpy as np
import pytest
from keras import ops

from convatt.layers import MultiHeadAttention
from convatt.layers.core import multi_head_attention as drop_in
from convatt.layers.core import xla_island
from convatt.layers.core.modifications import MODIFICATIONS

TENSORFLOW = keras.backend.backend() == "tensorflow"
B, T, D, H, K = 2, 12, 8, 2, 4
RNG = np.random.default_rng(0)
X = RNG.normal(size=(B, T, D)).astype("float32")
LENGTHS = np.array([[T], [T - 4]])
PADDING = np.arange(T)[None] < LENGTHS
WEIGHTS = RNG.normal(size=(B, T, D)).astype("float32")  # the loss's weights of the output


def _layer(**options) -> MultiHeadAttention:
    layer = MultiHeadAttention(H, K, max_len=T, **options)
    layer.build(X.shape, X.shape)  # not called: no island made yet
    layer.set_weights([RNG.normal(scale=0.5, size=w.shape).astype("float32") for w in layer.get_weights()])
    return layer


def _loss_and_gradients(layer, causal: bool, jit_compile: bool, island: bool = True) -> list[np.ndarray]:
    """The loss `sum(output * weights)` and its gradients (input, every weight), in a model compiled
    as `fit` compiles it: `jit_compile` True (XLA) or False (TensorFlow's graph)."""
    import tensorflow as tf

    weights = tf.constant(WEIGHTS)

    def step(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            output = layer(x, x, use_causal_mask=causal, query_mask=PADDING, value_mask=PADDING)
            loss = tf.reduce_sum(output * weights * PADDING[..., None])
        return [loss, *tape.gradient(loss, [x, *layer.trainable_variables])]

    wanted = drop_in.compile_core
    if not island:
        drop_in.compile_core = lambda training, symbolic_or_stateless: False
    try:
        return [tf.convert_to_tensor(g).numpy() for g in tf.function(step, jit_compile=jit_compile)(tf.constant(X))]
    finally:
        drop_in.compile_core = wanted


ROWS = {row.name: row.example_options() for row in MODIFICATIONS if row.name != "talking_heads_weights"}
ROWS["mta"] = {"attention_conv": "2d", "conv_kernel_size": (2, 9), "conv_before_softmax": True}
BOTH_WAYS = ("attention_conv", "mta", "relative_position_representation")
CASES = [(row, True) for row in ROWS] + [(row, False) for row in BOTH_WAYS]
"""Every row causal (the convolutions' taps on the past), the rows that read other rows bidirectional too."""


@pytest.mark.skipif(not TENSORFLOW, reason="the island is TensorFlow's: JAX compiles everything with XLA")
@pytest.mark.parametrize(("row", "causal"), CASES, ids=[f"{r}-{'causal' if c else 'bidirectional'}" for r, c in CASES])
def test_the_island_computes_what_the_graph_and_xla_compute(row, causal):
    layer = _layer(**ROWS[row])
    island = _loss_and_gradients(layer, causal, jit_compile=False)
    for reference in (
        _loss_and_gradients(layer, causal, jit_compile=False, island=False),
        _loss_and_gradients(layer, causal, jit_compile=True),
    ):
        for have, want in zip(island, reference, strict=True):
            np.testing.assert_allclose(have, want, rtol=1e-4, atol=1e-5 * (1 + np.abs(want).max()))
    other = _loss_and_gradients(_layer(**ROWS[row]), causal, jit_compile=False)  # other weights: it can fail
    assert not np.allclose(other[0], island[0])


@pytest.mark.skipif(not TENSORFLOW, reason="the island is TensorFlow's")
def test_the_island_is_taken_without_xla_only_and_never_for_keras_own_attention():
    import tensorflow as tf

    def islands(layer, jit_compile: bool) -> int:
        tf.function(lambda x: layer(x, x, use_causal_mask=True), jit_compile=jit_compile)(tf.constant(X))
        return len(xla_island._ISLANDS.get(layer, {}))

    assert islands(_layer(attention_conv="2d"), jit_compile=False) == 1
    assert islands(_layer(attention_conv="2d"), jit_compile=True) == 0  # XLA compiles it whole already
    assert islands(_layer(temperature=True), jit_compile=False) == 0  # Keras' own attention
    assert islands(_layer(), jit_compile=False) == 0
    eager = _layer(relative_position_representation=2)
    eager(X, X)  # an eager call compiles nothing
    assert eager not in xla_island._ISLANDS
    assert islands(eager, jit_compile=False) == 1


def test_the_island_is_never_taken_under_jax_nor_in_a_symbolic_call():
    layer = _layer(attention_conv="2d")
    keras.Model(inputs := keras.Input((None, D)), layer(inputs, inputs))  # a symbolic call
    assert layer not in xla_island._ISLANDS
    layer(X, X)  # under JAX, and an eager call under TensorFlow
    assert layer not in xla_island._ISLANDS


def test_the_island_recomputes_unless_every_modification_on_keeps_only_its_written_matrices():
    assert not _layer(talking_heads=True).island_recomputes()  # its mixed maps, written anyway
    assert not _layer().island_recomputes()
    for options in ({"attention_conv": "2d"}, {"relative_position_representation": 2}, {"alibi": True}):
        assert _layer(**options).island_recomputes()
        assert _layer(**options, talking_heads=True).island_recomputes()


@pytest.mark.skipif(not TENSORFLOW, reason="the island is TensorFlow's")
@pytest.mark.parametrize("options", [{"attention_conv": "2d"}, {"talking_heads": True}], ids=["recomputed", "kept"])
def test_the_backward_drops_what_the_forward_dropped(options):
    """With dropout in training the output is affine in `value` for the forward's mask, so the
    loss's change from `value = 0` is the gradient's product with `value` (the same mask in
    both programs, the seed set back for each call); the seed advances once per call, as Keras'.
    Both backwards: the forward recomputed (+Conv2d) and TensorFlow's gradient (talking heads)."""
    import tensorflow as tf

    layer = _layer(**options, dropout=0.5)
    seed = layer._dropout_layer.seed_generator.state
    start = seed.numpy()
    query, key = tf.constant(X), tf.constant(X[::-1].copy())
    value = tf.constant(RNG.normal(size=(B, T, D)).astype("float32"))
    weights = tf.constant(RNG.normal(size=(B, T, D)).astype("float32"))

    @tf.function
    def loss_and_gradient(value):
        with tf.GradientTape() as tape:
            tape.watch(value)
            loss = tf.reduce_sum(layer(query, value, key=key, training=True) * weights)
        return loss, tape.gradient(loss, value)

    loss, gradient = loss_and_gradient(value)
    assert not np.array_equal(seed.numpy(), start)  # it advanced
    seed.assign(start)
    at_zero, _ = loss_and_gradient(tf.zeros_like(value))
    seed.assign(start)
    again, _ = loss_and_gradient(value)
    np.testing.assert_allclose(again.numpy(), loss.numpy(), rtol=1e-6)  # the same seed, the same mask
    change = float(loss - at_zero)
    np.testing.assert_allclose(float(tf.reduce_sum(gradient * value)), change, rtol=1e-4, atol=1e-4)
    seed.assign(start + np.array([0, 7], start.dtype))  # another mask: another loss (the test can fail)
    assert not np.isclose(float(loss_and_gradient(value)[0]), float(loss), rtol=1e-4)


@pytest.mark.skipif(not TENSORFLOW, reason="the island is TensorFlow's")
def test_a_stateless_call_reads_the_given_weights_not_the_layer_s():
    import tensorflow as tf

    layer = _layer(attention_conv="2d")
    zeros = [ops.zeros_like(v) for v in layer.trainable_variables]
    non_trainable = [v.value for v in layer.non_trainable_variables]
    stateless = tf.function(lambda x: layer.stateless_call(zeros, non_trainable, x, x)[0])
    np.testing.assert_allclose(ops.convert_to_numpy(stateless(X)), 0.0, atol=1e-6)  # every projection 0
    assert np.abs(ops.convert_to_numpy(tf.function(lambda x: layer(x, x))(X))).max() > 1e-3
    assert len(xla_island._ISLANDS[layer]) == 1  # the call's island; the stateless call made none


@pytest.mark.skipif(not TENSORFLOW, reason="TensorFlow's graphs are the ones of unknown length")
def test_a_graph_of_unknown_length_still_names_max_len_for_a_longer_input():
    import tensorflow as tf

    layer = _layer(position_interaction=True)
    call = tf.function(lambda x: layer(x, x), input_signature=[tf.TensorSpec((None, None, D))])
    call(tf.constant(X))  # within max_len
    with pytest.raises(tf.errors.InvalidArgumentError, match="max_len"):
        call(tf.constant(np.zeros((1, T + 3, D), "float32")))
