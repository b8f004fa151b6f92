"""AttentionConv1D (+Conv): the harness, Keras' Conv1D per head and a NumPy reference, init, errors."""

import keras
import layer_references as ref
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from layer_harness import check_clone_computes_the_same, randomize, run_layer_test

from convatt.layers import AttentionConv1D

ATOL = 1e-5
FAST = settings(max_examples=6, deadline=None, derandomize=True)


@pytest.mark.tf_only
def test_layer_harness(tmp_path):
    attention = np.random.default_rng(0).uniform(size=(2, 2, 5, 6)).astype("float32")
    run_layer_test(
        AttentionConv1D,
        dict(max_len=6, num_heads=2, activation="tanh", kernel_initializer="zeros"),
        attention,
        (2, 2, 5, 6),
        tmp_path,
        expected_num_weights=2,
    )


@pytest.mark.tf_only
def test_parameter_counts_and_shapes():
    layer = AttentionConv1D(60, 4)
    out = layer(np.zeros((2, 4, 60, 60), "float32"))
    assert layer.count_params() == 43_440
    assert tuple(out.shape) == tuple(layer.compute_output_shape((2, 4, 60, 60))) == (2, 4, 60, 60)
    layer = AttentionConv1D(60, 1, kernel_initializer="zeros")
    layer.build((None, 1, 60, 60))
    assert layer.count_params() == 10_860 == 60 * 60 * 3 + 60
    layer = AttentionConv1D(60, 4)
    layer.build((None, 4, 60, 60))
    assert [w.name for w in layer.weights] == ["kernel", "bias"]
    assert [tuple(w.shape) for w in layer.weights] == [(4, 3, 60, 60), (4, 60)]


@FAST
@given(
    kernel_size=st.integers(1, 5),
    q=st.integers(1, 6),
    k=st.integers(1, 6),
    activation=st.sampled_from(["relu", "linear"]),
)
def test_equals_keras_conv1d_and_numpy(kernel_size, q, k, activation):
    rng = np.random.default_rng(kernel_size * 100 + q * 10 + k)
    max_len, heads = 6, 2
    # Zero initialisers: the weights are overwritten, and random init compiles slowly under JAX.
    layer = AttentionConv1D(max_len, heads, kernel_size=kernel_size, activation=activation, kernel_initializer="zeros")
    layer.build((None, heads, max_len, max_len))
    kernel, bias = randomize(layer, seed=kernel_size * 100 + q * 10 + k)
    x = rng.uniform(0, 1, size=(2, heads, q, k))
    out = keras.ops.convert_to_numpy(layer(x.astype("float32")))
    assert out.shape == x.shape
    act = ref.relu if activation == "relu" else ref.identity
    expected = np.stack(
        [
            np.stack([ref.conv1d_same(x[n, h], kernel[h, :, :k, :k], bias[h, :k], act) for h in range(heads)])
            for n in range(2)
        ]
    )
    np.testing.assert_allclose(out, expected, atol=ATOL)
    np.testing.assert_allclose(out, ref.keras_conv1d_per_head(x, kernel, bias, kernel_size, activation), atol=ATOL)


def test_full_length_equals_keras_conv1d():
    """The paper's setting: t = max_len, width 3, ReLU, key columns as channels."""
    rng = np.random.default_rng(5)
    layer = AttentionConv1D(12, 3, kernel_initializer="zeros")
    layer.build((None, 3, 12, 12))
    kernel, bias = randomize(layer, seed=5)
    x = keras.ops.convert_to_numpy(keras.ops.softmax(rng.normal(size=(2, 3, 12, 12)), axis=-1))
    out = keras.ops.convert_to_numpy(layer(x.astype("float32")))
    np.testing.assert_allclose(out, ref.keras_conv1d_per_head(x, kernel, bias, 3, "relu"), atol=ATOL)
    # 'same' padding, cross-correlation: row 0 sees rows 0 and 1 through taps 1 and 2 only.
    row0 = ref.relu(x[0, 0, 0] @ kernel[0, 1] + x[0, 0, 1] @ kernel[0, 2] + bias[0])
    np.testing.assert_allclose(out[0, 0, 0], row0, atol=ATOL)


def test_float32_convolution_under_mixed_policy():
    """The sum over taps and keys runs in float32 with the float32 kernel."""
    rng = np.random.default_rng(6)
    layer = AttentionConv1D(12, 2, activation="linear", kernel_initializer="zeros", dtype="mixed_bfloat16")
    layer.build((None, 2, 12, 12))
    kernel, bias = randomize(layer, seed=6)
    x = rng.uniform(0, 1, size=(1, 2, 12, 12)).astype("float32")
    expected = ref.keras_conv1d_per_head(x, kernel, bias, 3, "linear")
    convolved = keras.ops.convert_to_numpy(layer.convolve_float32(x))
    assert convolved.dtype == np.float32
    np.testing.assert_allclose(convolved, expected, atol=ATOL)
    assert keras.backend.standardize_dtype(layer(x).dtype) == "bfloat16"


def test_initialisation_is_per_head_glorot():
    keras.utils.set_random_seed(3)
    t, heads = 60, 4
    c = AttentionConv1D(t, heads)
    c.build((None, heads, t, t))
    kernel, bias = c.get_weights()
    limit = np.sqrt(6 / (2 * 3 * t))  # glorot-uniform of a Keras Conv1D kernel (3, t, t)
    assert np.abs(kernel).max() <= limit
    assert np.abs(kernel).max() > 0.99 * limit
    assert not bias.any()


def test_checks_length():
    with pytest.raises(ValueError, match="max_len=4"):
        AttentionConv1D(4, 2)(np.zeros((1, 2, 5, 4), "float32"))


@pytest.mark.tf_only
def test_from_config_round_trip():
    layer = AttentionConv1D(
        8,
        2,
        kernel_size=5,
        activation="sigmoid",
        kernel_initializer="ones",
        bias_initializer=keras.initializers.Constant(-0.1),
    )
    x = np.random.default_rng(2).uniform(size=(2, 2, 8, 8)).astype("float32")
    layer(x)
    randomize(layer, low=0.1, high=0.6)
    check_clone_computes_the_same(layer, x)
