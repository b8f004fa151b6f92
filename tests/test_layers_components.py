"""The paper's building blocks against plain NumPy (and Keras Conv1D/Conv2D) references.

PositionInteraction, RelativeBias, TemperatureDense, AttentionConv1D, AttentionConv2D,
PositionEmbedding: parameter counts, shapes, values, initialisation, errors.
"""
import numpy as np
import pytest
import keras
from hypothesis import given, settings, strategies as st

from convatt.layers import (
    AttentionConv1D,
    AttentionConv2D,
    PositionEmbedding,
    PositionInteraction,
    RelativeBias,
    TemperatureDense,
)

ATOL = 1e-5
FAST = settings(max_examples=6, deadline=None, derandomize=True)


def relu(x):
    return np.maximum(x, 0.0)


def random_weights(layer, rng, scale=0.5):
    """Give every weight of a built layer random values; returns them (float64)."""
    values = [rng.uniform(-scale, scale, w.shape) for w in layer.weights]
    layer.set_weights([v.astype("float32") for v in values])
    return values


def np_conv1d_same(x, kernel, bias, activation=relu):
    """Keras 'same' Conv1D with loops. x (steps, cin), kernel (taps, cin, cout)."""
    steps, taps = x.shape[0], kernel.shape[0]
    before = (taps - 1) // 2
    out = np.zeros((steps, kernel.shape[2]))
    for i in range(steps):
        for tap in range(taps):
            src = i + tap - before
            if 0 <= src < steps:
                for c in range(kernel.shape[1]):
                    out[i] += x[src, c] * kernel[tap, c]
    return activation(out + bias)


def np_conv2d_same(x, kernel, bias, activation=relu):
    """Keras 'same' single-filter Conv2D with loops. x (rows, cols), kernel (k, k)."""
    rows, cols = x.shape
    k = kernel.shape[0]
    before = (k - 1) // 2
    out = np.full((rows, cols), float(bias))
    for i in range(rows):
        for j in range(cols):
            for u in range(k):
                for v in range(k):
                    r, c = i + u - before, j + v - before
                    if 0 <= r < rows and 0 <= c < cols:
                        out[i, j] += kernel[u, v] * x[r, c]
    return activation(out)


# ---------------------------------------------------------------- parameter counts


@pytest.mark.parametrize(
    "layer, input_shape, expected",
    [
        (lambda: PositionInteraction(60, 4), (2, 4, 60, 60), 14_400),
        (lambda: RelativeBias(60, 4), (2, 4, 60, 60), 480),
        (lambda: AttentionConv1D(60, 4), (2, 4, 60, 60), 43_440),
        (lambda: AttentionConv2D(4), (2, 4, 60, 60), 40),
        (lambda: TemperatureDense(91), (2, 60, 364), 33_125),
        (lambda: PositionEmbedding(60), (2, 60, 300), 18_000),
    ],
    ids=["P", "R", "conv1d", "conv2d", "temp", "pe"],
)
def test_parameter_counts_and_shapes(layer, input_shape, expected):
    layer = layer()
    out = layer(np.zeros(input_shape, "float32"))
    assert layer.count_params() == expected
    assert tuple(out.shape) == tuple(layer.compute_output_shape(input_shape))
    assert tuple(out.shape) == (input_shape[:-1] + (91,) if isinstance(layer, TemperatureDense) else input_shape)


def test_conv1d_parameters_per_head():
    layer = AttentionConv1D(60, 1, kernel_initializer="zeros")
    layer.build((None, 1, 60, 60))
    assert layer.count_params() == 10_860 == 60 * 60 * 3 + 60
    layer = AttentionConv1D(60, 4)
    layer.build((None, 4, 60, 60))
    assert [w.name for w in layer.weights] == ["kernel", "bias"]
    assert [tuple(w.shape) for w in layer.weights] == [(4, 3, 60, 60), (4, 60)]


# ---------------------------------------------------------------- position interactions / biases


@pytest.mark.parametrize("q, k", [(8, 8), (3, 5), (8, 2)])
def test_position_interaction_matches_numpy(q, k):
    rng = np.random.default_rng(0)
    layer = PositionInteraction(max_len=8, num_heads=2)
    layer.build((None, 2, 8, 8))
    (ap,) = random_weights(layer, rng)
    scores = rng.normal(size=(2, 2, q, k))
    expected = np.empty_like(scores)
    for b in range(2):
        for h in range(2):
            for i in range(q):
                for j in range(k):
                    expected[b, h, i, j] = scores[b, h, i, j] + ap[h, i, j]
    out = keras.ops.convert_to_numpy(layer(scores.astype("float32")))
    np.testing.assert_allclose(out, expected, atol=ATOL)


@pytest.mark.parametrize("q, k", [(8, 8), (2, 5), (5, 3)])
def test_relative_bias_matches_numpy(q, k):
    rng = np.random.default_rng(1)
    max_len = 8
    layer = RelativeBias(max_len=max_len, num_heads=2)
    layer.build((None, 2, max_len, max_len))
    (ar,) = random_weights(layer, rng)
    assert ar.shape == (2, 2 * max_len)
    scores = rng.normal(size=(3, 2, q, k))
    expected = scores.copy()
    for h in range(2):
        for i in range(q):
            for j in range(k):
                expected[:, h, i, j] += ar[h, i - j + max_len]
    out = keras.ops.convert_to_numpy(layer(scores.astype("float32")))
    np.testing.assert_allclose(out, expected, atol=ATOL)


def test_relative_bias_is_a_function_of_the_offset_only():
    layer = RelativeBias(max_len=8, num_heads=2)
    layer.build((None, 2, 8, 8))
    layer.set_weights([np.stack([np.arange(16), -np.arange(16)]).astype("float32")])
    ar = keras.ops.convert_to_numpy(layer(np.zeros((1, 2, 8, 8), "float32")))[0]
    i, j = np.indices((8, 8))
    np.testing.assert_array_equal(ar[0], i - j + 8)  # a Toeplitz matrix, entries 1 .. 15; 0 unused
    np.testing.assert_array_equal(ar[1], -(i - j + 8))
    assert ar[0].min() == 1 and ar[0].max() == 15


def test_position_layers_reject_long_sequences_and_wrong_heads():
    with pytest.raises(ValueError, match="max_len=4"):
        PositionInteraction(4, 2)(np.zeros((1, 2, 5, 5), "float32"))
    with pytest.raises(ValueError, match="max_len=4"):
        RelativeBias(4, 2)(np.zeros((1, 2, 4, 5), "float32"))
    with pytest.raises(ValueError, match="num_heads=2"):
        PositionInteraction(4, 2)(np.zeros((1, 3, 4, 4), "float32"))
    with pytest.raises(ValueError, match="shape"):
        RelativeBias(4, 2)(np.zeros((2, 4, 4), "float32"))


def test_initialisation_is_per_head_glorot():
    """Each head's weights are drawn as if they were the paper's own per-head variable."""
    keras.utils.set_random_seed(3)
    t, heads = 60, 4
    p = PositionInteraction(t, heads)
    p.build((None, heads, t, t))
    # glorot-normal of a (t, t) matrix: std sqrt(2 / (t + t)).
    assert np.std(p.get_weights()[0]) == pytest.approx(np.sqrt(1 / t), rel=0.05)
    r = RelativeBias(t, heads)
    r.build((None, heads, t, t))
    # glorot-normal of a (2t,) vector: std sqrt(2 / (2t + 2t)).
    assert np.std(r.get_weights()[0]) == pytest.approx(np.sqrt(1 / (2 * t)), rel=0.15)
    c = AttentionConv1D(t, heads)
    c.build((None, heads, t, t))
    kernel, bias = c.get_weights()
    limit = np.sqrt(6 / (2 * 3 * t))  # glorot-uniform of a Keras Conv1D kernel (3, t, t)
    assert np.abs(kernel).max() <= limit
    assert np.abs(kernel).max() > 0.99 * limit
    assert not bias.any()
    c2 = AttentionConv2D(heads)
    c2.build((None, heads, t, t))
    assert np.abs(c2.get_weights()[0]).max() <= np.sqrt(6 / 18)  # Conv2D kernel (3, 3, 1, 1)
    # The heads are different draws.
    assert not np.allclose(p.get_weights()[0][0], p.get_weights()[0][1])


# ---------------------------------------------------------------- temperature


@pytest.mark.parametrize("use_bias", [False, True])
def test_temperature_dense_matches_numpy(use_bias):
    rng = np.random.default_rng(2)
    layer = TemperatureDense(4, use_bias=use_bias, kernel_initializer="zeros")
    layer.build((None, 3, 6))
    assert [w.name for w in layer.weights] == ["kernel", "gamma"] + (["bias"] if use_bias else [])
    assert layer.count_params() == 6 * 4 + 1 + (4 if use_bias else 0)
    np.testing.assert_array_equal(layer.get_weights()[1], 1.0)
    weights = random_weights(layer, rng)
    weights[1] = np.array(2.5)
    layer.set_weights([w.astype("float32") for w in weights])
    x = rng.normal(size=(2, 3, 6))
    expected = np.zeros((2, 3, 4))
    for b in range(2):
        for t in range(3):
            for u in range(4):
                expected[b, t, u] = 2.5 * sum(x[b, t, i] * weights[0][i, u] for i in range(6))
                if use_bias:
                    expected[b, t, u] += weights[2][u]
    out = keras.ops.convert_to_numpy(layer(x.astype("float32")))
    np.testing.assert_allclose(out, expected, atol=ATOL)


def test_temperature_gamma_is_trainable_and_learns():
    """With W frozen, fitting y = 3 x W moves gamma from 1 to 3."""
    keras.utils.set_random_seed(0)
    layer = TemperatureDense(2)
    x = np.random.default_rng(0).normal(size=(64, 3)).astype("float32")
    layer.build((None, 3))
    target = 3.0 * x @ layer.get_weights()[0]
    layer.kernel.trainable = False
    model = keras.Sequential([keras.Input((3,)), layer])
    model.compile(keras.optimizers.SGD(0.1), "mse")
    model.fit(x, target, epochs=60, batch_size=64, verbose=0)
    assert float(layer.get_weights()[1]) == pytest.approx(3.0, abs=0.05)


# ---------------------------------------------------------------- convolutions


def _keras_conv1d_per_head(x, kernel, bias, kernel_size, activation):
    """Run the per-head keras.layers.Conv1D the paper's code used, with copied weights."""
    b, heads, q, k = x.shape
    outs = []
    for h in range(heads):
        conv = keras.layers.Conv1D(k, kernel_size, padding="same", activation=activation, kernel_initializer="zeros")
        conv.build((None, q, k))
        conv.set_weights([kernel[h, :, :k, :k].astype("float32"), bias[h, :k].astype("float32")])
        outs.append(keras.ops.convert_to_numpy(conv(x[:, h].astype("float32"))))
    return np.stack(outs, axis=1)


@FAST
@given(
    kernel_size=st.integers(1, 5),
    q=st.integers(1, 6),
    k=st.integers(1, 6),
    activation=st.sampled_from(["relu", "linear"]),
)
def test_attention_conv1d_equals_keras_conv1d_and_numpy(kernel_size, q, k, activation):
    rng = np.random.default_rng(kernel_size * 100 + q * 10 + k)
    max_len, heads = 6, 2
    # Zero initialisers: the weights are overwritten, and random init compiles slowly under JAX.
    layer = AttentionConv1D(max_len, heads, kernel_size=kernel_size, activation=activation, kernel_initializer="zeros")
    layer.build((None, heads, max_len, max_len))
    kernel, bias = random_weights(layer, rng)
    x = rng.uniform(0, 1, size=(2, heads, q, k))
    out = keras.ops.convert_to_numpy(layer(x.astype("float32")))
    assert out.shape == x.shape
    act = relu if activation == "relu" else (lambda v: v)
    expected = np.stack(
        [
            np.stack([np_conv1d_same(x[n, h], kernel[h, :, :k, :k], bias[h, :k], act) for h in range(heads)])
            for n in range(2)
        ]
    )
    np.testing.assert_allclose(out, expected, atol=ATOL)
    np.testing.assert_allclose(out, _keras_conv1d_per_head(x, kernel, bias, kernel_size, activation), atol=ATOL)


def test_attention_conv1d_full_length_equals_keras_conv1d():
    """The paper's setting: t = max_len, width 3, ReLU, key columns as channels."""
    rng = np.random.default_rng(5)
    layer = AttentionConv1D(12, 3, kernel_initializer="zeros")
    layer.build((None, 3, 12, 12))
    kernel, bias = random_weights(layer, rng)
    x = keras.ops.convert_to_numpy(keras.ops.softmax(rng.normal(size=(2, 3, 12, 12)), axis=-1))
    out = keras.ops.convert_to_numpy(layer(x.astype("float32")))
    np.testing.assert_allclose(out, _keras_conv1d_per_head(x, kernel, bias, 3, "relu"), atol=ATOL)
    # 'same' padding, cross-correlation: row 0 sees rows 0 and 1 through taps 1 and 2 only.
    row0 = relu(x[0, 0, 0] @ kernel[0, 1] + x[0, 0, 1] @ kernel[0, 2] + bias[0])
    np.testing.assert_allclose(out[0, 0, 0], row0, atol=ATOL)


@FAST
@given(kernel_size=st.integers(1, 4), q=st.integers(1, 6), k=st.integers(1, 6))
def test_attention_conv2d_equals_keras_conv2d_and_numpy(kernel_size, q, k):
    rng = np.random.default_rng(kernel_size * 100 + q * 10 + k)
    heads = 3
    layer = AttentionConv2D(heads, kernel_size=kernel_size, kernel_initializer="zeros")
    layer.build((None, heads, q, k))
    kernel, bias = random_weights(layer, rng)
    x = rng.uniform(0, 1, size=(2, heads, q, k))
    out = keras.ops.convert_to_numpy(layer(x.astype("float32")))
    expected = np.stack(
        [np.stack([np_conv2d_same(x[n, h], kernel[h], bias[h]) for h in range(heads)]) for n in range(2)]
    )
    np.testing.assert_allclose(out, expected, atol=ATOL)
    for h in range(heads):
        conv = keras.layers.Conv2D(1, kernel_size, padding="same", activation="relu", kernel_initializer="zeros")
        conv.build((None, q, k, 1))
        conv.set_weights([kernel[h][:, :, None, None].astype("float32"), bias[h : h + 1].astype("float32")])
        ref = keras.ops.convert_to_numpy(conv(x[:, h, :, :, None].astype("float32")))[..., 0]
        np.testing.assert_allclose(out[:, h], ref, atol=ATOL)


def test_conv_layers_check_heads_and_length():
    with pytest.raises(ValueError, match="max_len=4"):
        AttentionConv1D(4, 2)(np.zeros((1, 2, 5, 4), "float32"))
    with pytest.raises(ValueError, match="num_heads=2"):
        AttentionConv2D(2)(np.zeros((1, 3, 4, 4), "float32"))
    with pytest.raises(ValueError, match="kernel_size"):
        AttentionConv2D(2, kernel_size=0)


# ---------------------------------------------------------------- position embedding


def test_position_embedding_returns_the_first_rows():
    rng = np.random.default_rng(7)
    layer = PositionEmbedding(8, initializer="zeros")
    layer.build((None, 5, 4))
    (table,) = random_weights(layer, rng)
    out = keras.ops.convert_to_numpy(layer(rng.normal(size=(3, 5, 4)).astype("float32")))
    for b in range(3):
        np.testing.assert_allclose(out[b], table[:5], atol=1e-6)
    # Concatenation width and token-id inputs.
    con = PositionEmbedding(8, output_dim=2, initializer="zeros")
    assert tuple(con(np.zeros((3, 6, 4), "float32")).shape) == (3, 6, 2)
    assert tuple(con(np.zeros((3, 6), "int32")).shape) == (3, 6, 2)
    assert con.count_params() == 16
    with pytest.raises(ValueError, match="max_len=8"):
        PositionEmbedding(8)(np.zeros((1, 9, 4), "float32"))
    with pytest.raises(ValueError, match="output_dim"):
        PositionEmbedding(8)(np.zeros((1, 6), "int32"))


def test_position_embedding_default_init_is_keras_embedding_uniform():
    keras.utils.set_random_seed(0)
    layer = PositionEmbedding(60)
    layer.build((None, 60, 300))
    table = layer.get_weights()[0]
    assert np.abs(table).max() <= 0.05 and np.abs(table).max() > 0.049


def test_position_embedding_in_functional_model_passes_mask():
    """The Keras mask flows through: masked average pooling sees only the real positions."""
    ids = keras.Input((5,), dtype="int32")
    x = keras.layers.Embedding(10, 4, mask_zero=True, embeddings_initializer="zeros")(ids)
    pe = PositionEmbedding(5, initializer="zeros")
    pooled = keras.layers.GlobalAveragePooling1D()(pe(x))
    model = keras.Model(ids, pooled)
    table = np.arange(20, dtype="float32").reshape(5, 4)
    pe.set_weights([table])
    out = keras.ops.convert_to_numpy(model(np.array([[1, 2, 3, 0, 0], [4, 0, 0, 0, 0]])))
    np.testing.assert_allclose(out, [table[:3].mean(0), table[0]], atol=1e-6)
