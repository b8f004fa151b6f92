"""DenserSelfAttention against a NumPy reference of Kim's eq. (2), segment pair by segment pair."""

import math

import keras
import numpy as np
import pytest
from layer_references import softmax

from convatt.layers import DenserSelfAttention

B, T, D = 2, 5, 7
ATOL = 2e-5


def reference(x, weights, segments, keep=None):
    """Z^i = (1/w) sum_j softmax(q^i (k^j)^T / sqrt(s)) V per head; heads and segments
    concatenated (head-major), then the Dense layer."""
    wq, wk, wv, dense_kernel, dense_bias = weights
    heads, width = wq.shape[1], wq.shape[2] // segments
    parts = []
    for h in range(heads):
        q, k, v = x @ wq[:, h], x @ wk[:, h], x @ wv[:, h]  # (b, t, .)
        for i in range(segments):
            z = np.zeros_like(v)
            for j in range(segments):
                qi, kj = q[..., i * width : (i + 1) * width], k[..., j * width : (j + 1) * width]
                scores = qi @ np.swapaxes(kj, 1, 2) / math.sqrt(width)
                if keep is not None:
                    scores = np.where(keep, scores, -1e9)
                probs = softmax(scores) * (1.0 if keep is None else keep)
                z += probs @ v / segments
            parts.append(z)
    return np.concatenate(parts, axis=-1) @ dense_kernel + dense_bias


def build(layer, rng):
    layer.build((B, T, D))
    weights = [rng.normal(0, 0.5, w.shape) for w in layer.weights]
    layer.set_weights([w.astype("float32") for w in weights])
    return weights


@pytest.mark.parametrize("heads, head_dim, segments", [(2, 4, 2), (1, 6, 3), (3, 3, 1)])
def test_matches_numpy(heads, head_dim, segments):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(B, T, D)).astype("float32")
    layer = DenserSelfAttention(heads, head_dim, segments=segments)
    weights = build(layer, rng)
    expected = reference(x.astype(float), weights, segments)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(layer(x)), expected, atol=ATOL)


def test_masking_zeroes_padded_keys_and_queries():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(B, T, D)).astype("float32")
    layer = DenserSelfAttention(2, 4)
    weights = build(layer, rng)
    real = np.arange(T)[None] < np.array([[3], [5]])
    keep = real[:, :, None] & real[:, None, :]
    expected = reference(x.astype(float), weights, 2, keep)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(layer(x, mask=real)), expected, atol=ATOL)
    keys_only = reference(x.astype(float), weights, 2, np.broadcast_to(real[:, None, :], (B, T, T)))
    np.testing.assert_allclose(keras.ops.convert_to_numpy(layer(x, attention_mask=real)), keys_only, atol=ATOL)


def test_odd_head_widths_round_the_keys_up():
    """PTB's heads of 91: queries and keys of 92 (two segments of 46), values of 91."""
    layer = DenserSelfAttention(4, 91, segments=2)
    assert layer.key_dim == 92
    layer.build((None, 60, 364))
    shapes = {w.path.split("/", 1)[1]: tuple(w.shape) for w in layer.weights}
    assert shapes == {
        "query_kernel": (364, 4, 92),
        "key_kernel": (364, 4, 92),
        "value_kernel": (364, 4, 91),
        "output_dense/kernel": (728, 364),
        "output_dense/bias": (364,),
    }
    assert layer.compute_output_shape((None, 60, 364)) == (None, 60, 364)
    with pytest.raises(ValueError, match="multiple of segments"):
        DenserSelfAttention(4, 8, segments=2, key_dim=7)


def test_attention_probabilities_rows_sum_to_one():
    rng = np.random.default_rng(2)
    layer = DenserSelfAttention(2, 4, segments=2)
    build(layer, rng)
    maps = keras.ops.convert_to_numpy(layer.attention_probabilities(rng.normal(size=(B, T, D)).astype("float32")))
    assert maps.shape == (B, 2, 2, T, T)
    np.testing.assert_allclose(maps.sum(-1), 1.0, atol=1e-5)


@pytest.mark.tf_only
def test_round_trips(tmp_path):
    layer = DenserSelfAttention(2, 4, segments=2, output_dim=5, use_bias=False, kernel_initializer="he_normal")
    assert DenserSelfAttention.from_config(layer.get_config()).get_config() == layer.get_config()
    inputs = keras.Input((T, D))
    model = keras.Model(inputs, layer(inputs))
    rng = np.random.default_rng(3)
    model.set_weights([rng.normal(0, 0.5, w.shape).astype("float32") for w in model.weights])
    x = rng.normal(size=(B, T, D)).astype("float32")
    model.save(tmp_path / "denser.keras")
    loaded = keras.models.load_model(tmp_path / "denser.keras")
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(loaded(x)), keras.ops.convert_to_numpy(model(x)))
    assert model(x).shape == (B, T, 5)


@pytest.mark.tf_only
def test_layer_harness(tmp_path):
    from layer_harness import run_layer_test

    x = np.random.default_rng(0).normal(size=(2, 5, 6)).astype("float32")
    run_layer_test(
        DenserSelfAttention, {"num_heads": 2, "head_dim": 3, "segments": 2, "output_dim": 6}, x, (2, 5, 6), tmp_path
    )
