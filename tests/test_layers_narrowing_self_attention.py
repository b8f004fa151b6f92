"""NarrowingSelfAttention: heads of uneven width against a NumPy reference head by head."""

import math

import keras
import numpy as np
import pytest
from layer_references import softmax

from convatt.layers import NarrowingSelfAttention
from convatt.layers.narrowing_self_attention import head_widths, narrowing_num_heads

B, T, D = 2, 5, 7
ATOL = 2e-5


def reference(x, head_kernels, keep=None):
    """Concatenation over heads of softmax(q k^T / sqrt(d_h)) v, each head with its own width."""
    outs = []
    for wq, wk, wv in head_kernels:
        scores = (x @ wq) @ np.swapaxes(x @ wk, 1, 2) / math.sqrt(wq.shape[1])
        if keep is not None:
            scores = np.where(keep, scores, -1e9)
        outs.append(softmax(scores) * (1.0 if keep is None else keep) @ (x @ wv))
    return np.concatenate(outs, -1)


@pytest.mark.parametrize(
    "width, heads, expected",
    [
        (364, 4, [(4, 91)]),
        (364, 8, [(4, 46), (4, 45)]),
        (364, 16, [(12, 23), (4, 22)]),
        (364, 32, [(12, 12), (20, 11)]),
        (192, 32, [(32, 6)]),
        (7, 3, [(1, 3), (2, 2)]),
    ],
)
@pytest.mark.tf_only
def test_head_widths(width, heads, expected):
    assert head_widths(width, heads) == expected
    assert sum(n * d for n, d in expected) == width and sum(n for n, _ in expected) == heads


@pytest.mark.tf_only
def test_heads_double_per_layer():
    assert [narrowing_num_heads(4, layer) for layer in range(4)] == [4, 8, 16, 32]
    with pytest.raises(ValueError, match="cannot split"):
        head_widths(3, 4)


@pytest.mark.parametrize("masked", [False, True])
def test_matches_numpy_with_uneven_heads(masked):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(B, T, D)).astype("float32")
    layer = NarrowingSelfAttention(D, 3, max_len=T)  # heads of 3, 2, 2
    layer.build(x.shape)
    values = [rng.normal(0, 0.5, w.shape) for w in layer.weights]
    layer.set_weights([v.astype("float32") for v in values])
    head_kernels = []
    for group in range(0, len(values), 3):  # each SelfAttention group: q, k, v (input_dim, heads, head_dim)
        wq, wk, wv = values[group : group + 3]
        head_kernels += [(wq[:, h], wk[:, h], wv[:, h]) for h in range(wq.shape[1])]
    assert [k[0].shape[1] for k in head_kernels] == [3, 2, 2]
    real = np.arange(T)[None] < np.array([[2], [5]])
    keep = np.broadcast_to(real[:, None, :], (B, T, T)) if masked else None
    out, attention = layer(x, attention_mask=real if masked else None, return_attention_scores=True)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(out), reference(x.astype(float), head_kernels, keep), atol=ATOL
    )
    assert tuple(attention.shape) == (B, 3, T, T)
    assert layer.count_params() == 3 * D * D  # as plain attention of width D


@pytest.mark.tf_only
def test_round_trips(tmp_path):
    layer = NarrowingSelfAttention(
        D, 3, max_len=T, attention_options={"temperature": True}, kernel_initializer="he_uniform"
    )
    assert NarrowingSelfAttention.from_config(layer.get_config()).get_config() == layer.get_config()
    inputs = keras.Input((T, D))
    model = keras.Model(inputs, layer(inputs))
    rng = np.random.default_rng(1)
    model.set_weights([rng.normal(0, 0.5, w.shape).astype("float32") for w in model.weights])
    x = rng.normal(size=(B, T, D)).astype("float32")
    model.save(tmp_path / "narrowing.keras")
    loaded = keras.models.load_model(tmp_path / "narrowing.keras")
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(loaded(x)), keras.ops.convert_to_numpy(model(x)))
    assert layer.compute_output_shape((None, T, D)) == (None, T, D)


@pytest.mark.tf_only
def test_layer_harness(tmp_path):
    from layer_harness import run_layer_test

    x = np.random.default_rng(0).normal(size=(2, 5, 6)).astype("float32")
    run_layer_test(NarrowingSelfAttention, {"output_dim": 6, "num_heads": 4, "max_len": 5}, x, (2, 5, 6), tmp_path)
