"""AttentionConv2D (+Conv2d): the harness, Keras' Conv2D per head and a NumPy reference, init, errors."""

import keras
import layer_references as ref
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from layer_harness import check_clone_computes_the_same, randomize, run_layer_test

from convatt.layers import AttentionConv2D

ATOL = 1e-5
FAST = settings(max_examples=6, deadline=None, derandomize=True)


@pytest.mark.tf_only
def test_layer_harness(tmp_path):
    attention = np.random.default_rng(0).uniform(size=(2, 3, 5, 6)).astype("float32")
    run_layer_test(
        AttentionConv2D,
        dict(num_heads=3, kernel_size=2, kernel_initializer="zeros"),
        attention,
        (2, 3, 5, 6),
        tmp_path,
        expected_num_weights=2,
    )


@pytest.mark.tf_only
def test_parameter_count_and_shape():
    layer = AttentionConv2D(4)
    out = layer(np.zeros((2, 4, 60, 60), "float32"))
    assert layer.count_params() == 40
    assert tuple(out.shape) == tuple(layer.compute_output_shape((2, 4, 60, 60))) == (2, 4, 60, 60)


@FAST
@given(kernel_size=st.integers(1, 4), q=st.integers(1, 6), k=st.integers(1, 6))
def test_equals_keras_conv2d_and_numpy(kernel_size, q, k):
    rng = np.random.default_rng(kernel_size * 100 + q * 10 + k)
    heads = 3
    layer = AttentionConv2D(heads, kernel_size=kernel_size, kernel_initializer="zeros")
    layer.build((None, heads, q, k))
    kernel, bias = randomize(layer, seed=kernel_size * 100 + q * 10 + k)
    x = rng.uniform(0, 1, size=(2, heads, q, k))
    out = keras.ops.convert_to_numpy(layer(x.astype("float32")))
    expected = np.stack(
        [np.stack([ref.conv2d_same(x[n, h], kernel[h], bias[h]) for h in range(heads)]) for n in range(2)]
    )
    np.testing.assert_allclose(out, expected, atol=ATOL)
    for h in range(heads):
        np.testing.assert_allclose(
            out[:, h], ref.keras_conv2d_one_head(x[:, h], kernel[h], bias[h], kernel_size), atol=ATOL
        )


def test_float32_convolution_under_mixed_policy():
    rng = np.random.default_rng(7)
    layer = AttentionConv2D(2, kernel_initializer="zeros", dtype="mixed_float16")
    layer.build((None, 2, 6, 6))
    kernel, bias = randomize(layer, seed=7)
    x = rng.uniform(0, 1, size=(1, 2, 6, 6)).astype("float32")
    convolved = keras.ops.convert_to_numpy(layer.convolve_float32(x))
    assert convolved.dtype == np.float32
    expected = np.stack([ref.conv2d_same(x[0, h], kernel[h], bias[h]) for h in range(2)])
    np.testing.assert_allclose(convolved[0], expected, atol=ATOL)
    assert keras.backend.standardize_dtype(layer(x).dtype) == "float16"


def test_initialisation_is_glorot_of_a_conv2d_kernel():
    keras.utils.set_random_seed(3)
    c2 = AttentionConv2D(4)
    c2.build((None, 4, 60, 60))
    assert np.abs(c2.get_weights()[0]).max() <= np.sqrt(6 / 18)  # Conv2D kernel (3, 3, 1, 1)


def test_checks_heads_and_kernel_size():
    with pytest.raises(ValueError, match="num_heads=2"):
        AttentionConv2D(2)(np.zeros((1, 3, 4, 4), "float32"))
    with pytest.raises(ValueError, match="kernel_size"):
        AttentionConv2D(2, kernel_size=0)


def test_from_config_round_trip():
    layer = AttentionConv2D(2, kernel_size=2, activation=None, kernel_initializer="zeros")
    x = np.random.default_rng(2).uniform(size=(2, 2, 8, 8)).astype("float32")
    layer(x)
    randomize(layer, low=0.1, high=0.6)
    check_clone_computes_the_same(layer, x)
