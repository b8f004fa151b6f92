"""SelfAttention(attention_conv=..., conv_before_softmax=True): the convolution on the scores,
before the softmax, against a NumPy reference with explicit loops."""

import math

import keras
import numpy as np
import pytest
from layer_references import softmax

from convatt.layers import SelfAttention

B, T, D, H, DH = 2, 5, 6, 2, 3
ATOL = 2e-5


def conv2d_same_linear(x, kernel, bias):
    """Keras 'same' single-filter Conv2D, no activation. x (rows, cols), kernel (k, k)."""
    rows, cols = x.shape
    before = (kernel.shape[0] - 1) // 2
    out = np.full((rows, cols), float(bias))
    for i in range(rows):
        for j in range(cols):
            for u in range(kernel.shape[0]):
                for v in range(kernel.shape[1]):
                    r, c = i + u - before, j + v - before
                    if 0 <= r < rows and 0 <= c < cols:
                        out[i, j] += kernel[u, v] * x[r, c]
    return out


def conv1d_same_linear(x, kernel, bias):
    """Keras 'same' Conv1D over the query axis, key columns as channels, no activation."""
    steps, taps = x.shape[0], kernel.shape[0]
    before = (taps - 1) // 2
    out = np.tile(bias[: x.shape[1]], (steps, 1)).astype(float)
    for i in range(steps):
        for tap in range(taps):
            if 0 <= i + tap - before < steps:
                out[i] += x[i + tap - before] @ kernel[tap, : x.shape[1], : x.shape[1]]
    return out


def reference(x, weights, conv, keep=None):
    wq, wk, wv, kernel, bias = weights
    outputs, maps = [], []
    for b in range(x.shape[0]):
        heads, head_maps = [], []
        for h in range(wq.shape[1]):
            scores = (x[b] @ wq[:, h]) @ (x[b] @ wk[:, h]).T / math.sqrt(wq.shape[-1])
            if keep is not None:
                scores = np.where(keep[b], scores, 0.0)  # masked scores do not reach the neighbours
            scores = conv(scores, kernel[h], bias[h])
            if keep is not None:
                scores = np.where(keep[b], scores, -1e9)
            weights_h = softmax(scores) * (1.0 if keep is None else keep[b])
            heads.append(weights_h @ (x[b] @ wv[:, h]))
            head_maps.append(weights_h)
        outputs.append(np.concatenate(heads, -1))
        maps.append(head_maps)
    return np.array(outputs), np.array(maps)


@pytest.mark.parametrize("kind", ["2d", "1d"])
@pytest.mark.parametrize("masked", [False, True])
def test_convolution_before_the_softmax_matches_numpy(kind, masked):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(B, T, D)).astype("float32")
    layer = SelfAttention(H, DH, max_len=T, attention_conv=kind, conv_before_softmax=True)
    layer.build(x.shape)
    weights = [rng.normal(0, 0.5, w.shape) for w in layer.weights]
    layer.set_weights([w.astype("float32") for w in weights])
    lengths = np.array([3, 5])
    real = np.arange(T)[None] < lengths[:, None]
    keep = real[:, :, None] & real[:, None, :] if masked else None
    out, attention = layer(x, mask=real if masked else None, return_attention_scores=True)
    conv = conv2d_same_linear if kind == "2d" else conv1d_same_linear
    expected, maps = reference(x.astype(float), weights, conv, keep)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(out), expected, atol=ATOL)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(attention), maps, atol=ATOL)
    rows = keras.ops.convert_to_numpy(attention).sum(-1)
    expected_rows = np.ones_like(rows) if keep is None else np.broadcast_to(keep.any(-1)[:, None], rows.shape)
    np.testing.assert_allclose(rows, expected_rows, atol=1e-5)  # normalised, unlike the paper's +Conv2d


@pytest.mark.tf_only
def test_before_the_softmax_has_no_activation_and_needs_a_convolution():
    layer = SelfAttention(H, DH, attention_conv="2d", conv_before_softmax=True)
    assert layer.modifications["attention_conv"].activation is keras.activations.linear
    assert (
        SelfAttention(H, DH, attention_conv="2d").modifications["attention_conv"].activation is keras.activations.relu
    )
    with pytest.raises(ValueError, match="needs an attention_conv"):
        SelfAttention(H, DH, conv_before_softmax=True)


@pytest.mark.tf_only
def test_round_trips(tmp_path):
    layer = SelfAttention(H, DH, attention_conv="2d", conv_before_softmax=True)
    assert SelfAttention.from_config(layer.get_config()).get_config() == layer.get_config()
    inputs = keras.Input((T, D))
    model = keras.Model(inputs, layer(inputs))
    rng = np.random.default_rng(1)
    model.set_weights([rng.normal(0, 0.5, w.shape).astype("float32") for w in model.weights])
    x = rng.normal(size=(B, T, D)).astype("float32")
    model.save(tmp_path / "pre.keras")
    loaded = keras.models.load_model(tmp_path / "pre.keras")
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(loaded(x)), keras.ops.convert_to_numpy(model(x)))
    assert loaded.layers[1].conv_before_softmax
