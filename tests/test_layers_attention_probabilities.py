"""SelfAttention.attention_probabilities: the layer's own attention, before and after the convolution."""

import keras
import numpy as np
import pytest
from test_layers_self_attention import ATOL, OPTIONS, B, D, T, make_layer, reference, run


def probabilities(layer, x, **kwargs):
    softmax, convolved = layer.attention_probabilities(x.astype("float32"), **kwargs)
    return keras.ops.convert_to_numpy(softmax), keras.ops.convert_to_numpy(convolved)


@pytest.mark.parametrize("masked", [False, True], ids=["no mask", "key mask"])
@pytest.mark.parametrize("name", list(OPTIONS))
def test_matches_the_layers_call_and_a_numpy_softmax(name, masked):
    rng = np.random.default_rng(7 + list(OPTIONS).index(name))
    options = OPTIONS[name]
    layer, weights = make_layer(rng, **options)
    x = rng.normal(size=(B, T, D))
    keys = np.ones((B, T), bool)
    if masked:
        keys[0, -2:] = False
    kwargs = {"attention_mask": keys} if masked else {}
    softmax, convolved = probabilities(layer, x, **kwargs)
    _, attention = run(layer, x, **kwargs)
    np.testing.assert_allclose(convolved, attention, atol=ATOL)  # what call multiplies with the values

    # the softmax, from an independent NumPy computation without the convolution's weights
    no_conv = {**options, "attention_conv": None}
    kept = weights[:-2] if options.get("attention_conv") else weights
    keep = np.broadcast_to(keys[:, None, :], (B, T, T)) if masked else None
    _, expected = reference(x, kept, keep, **no_conv)
    np.testing.assert_allclose(softmax, expected, atol=ATOL)
    if not options.get("attention_conv"):
        np.testing.assert_array_equal(softmax, convolved)


@pytest.mark.tf_only
def test_modifications_lists_the_sublayers():
    layer, _ = make_layer(np.random.default_rng(0), position_interaction=True, attention_conv="2d")
    assert sorted(layer.modifications) == ["attention_conv", "position_interaction"]
    assert make_layer(np.random.default_rng(0))[0].modifications == {}
