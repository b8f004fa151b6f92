"""The sublayers' fast kernels against their earlier keras.ops formulas (tests/layer_references.py):
same values and gradients, on the backend the tests run under (run them under both)."""

import keras
import layer_references as ref
import numpy as np
import pytest
from kernel_gradients import value_and_gradients

from convatt.layers import AttentionConv2D
from convatt.layers.attention_conv2d import convolve_heads

ATOL = 2e-5


def _close(new: list[np.ndarray], old: list[np.ndarray]) -> None:
    for a, b in zip(new, old, strict=True):
        np.testing.assert_allclose(a, b, atol=ATOL * max(1.0, np.abs(b).max()), rtol=1e-4)


@pytest.mark.parametrize("kernel_size", [(3, 3), (5, 5), (2, 9)])
@pytest.mark.parametrize("causal, future_open", [(False, None), (True, None), (False, (1.0, 0.0))])
def test_conv2d_stencil_equals_the_depthwise_convolution(kernel_size, causal, future_open):
    activation = None if kernel_size == (2, 9) else "relu"  # before the softmax (MTA) / after it (the paper)
    rng = np.random.default_rng(sum(kernel_size))
    heads, q, k = 3, 7, 11
    layer = AttentionConv2D(heads, kernel_size=kernel_size, activation=activation)
    layer.build((None, heads, q, k))
    kernel = rng.normal(size=(heads, *kernel_size))
    bias = rng.normal(size=heads)
    attention = rng.uniform(-1, 1, size=(2, heads, q, k))
    opens = None if future_open is None else np.reshape(future_open, (2, 1, 1, 1)).astype("float32")
    act = keras.activations.get(activation)

    def new(attention, kernel, bias):
        return convolve_heads(attention, kernel, bias, layer.activation, causal, opens)

    def old(attention, kernel, bias):
        return ref.conv2d_depthwise(attention, kernel, bias, causal, opens, activation=act)

    _close(value_and_gradients(new, attention, kernel, bias), value_and_gradients(old, attention, kernel, bias))
    layer.set_weights([kernel.astype("float32"), bias.astype("float32")])  # the layer's own call: the same
    by_layer = layer.convolve_float32(attention.astype("float32"), causal=causal, future_open=opens)
    _close([keras.ops.convert_to_numpy(by_layer)], value_and_gradients(old, attention, kernel, bias)[:1])
