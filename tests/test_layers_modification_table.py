"""Every row of `MODIFICATIONS`, from the table alone: its identity start and its cached decoding.

A new modification (a layer file and one row) is tested here without a line of its own: each
row's `example_options` turn it on, alone and beside the convolutions (whose rows it shares).
"""

from __future__ import annotations

import keras
import numpy as np
import pytest

from convatt.layers import MultiHeadAttention
from convatt.layers.core.modifications import MODIFICATIONS

B, T, D, H = 2, 6, 8, 2
CONV_AFTER = {"attention_conv": "2d", "conv_kernel_size": (2, 3)}
CONV_BEFORE = {"attention_conv": "1d", "conv_before_softmax": True, "conv_kernel_size": 2}


def row_options(max_len: int = T, conv_after: dict = CONV_AFTER, conv_before: dict = CONV_BEFORE) -> list:
    """`(id, options)`: each row alone, and beside each convolution (a row's terms then reach
    other rows' through the taps)."""
    cases = []
    for row in MODIFICATIONS:
        alone = {**row.example_options(), "max_len": max_len}
        cases.append(pytest.param(alone, id=row.name))
        for name, conv in (("conv-after", conv_after), ("conv-before", conv_before)):
            if row.name != "attention_conv":
                cases.append(pytest.param({**alone, **conv}, id=f"{row.name}+{name}", marks=pytest.mark.slow))
    return cases


def built(options: dict) -> MultiHeadAttention:
    layer = MultiHeadAttention(H, D // H, **options)
    layer.build((B, T, D), (B, T, D))
    return layer


@pytest.fixture(scope="module")
def inputs() -> np.ndarray:
    return np.random.default_rng(1).normal(size=(B, T, D)).astype("float32")


def numpy(x) -> np.ndarray:
    return keras.ops.convert_to_numpy(x)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("options", row_options())
def test_each_row_at_its_identity_start_computes_keras_layer(options, causal, inputs):
    """Keras' weights copied, the row's own start (`row.identity`): Keras' outputs, pads included;
    a row with no identity start (ALiBi) is refused by name."""
    plain = keras.layers.MultiHeadAttention(H, D // H)
    plain.build((B, T, D), (B, T, D))
    rng = np.random.default_rng(2)
    plain.set_weights([rng.normal(0, 0.4, w.shape).astype("float32") for w in plain.weights])
    layer = built(options)
    rows = [row for row, _ in layer._active()]
    if any(row.identity is None for row in rows):
        with pytest.raises(ValueError, match="has no weights to start from nothing"):
            layer.start_as_identity(causal)
        return
    rng = np.random.default_rng(3)  # the modifications away from identity first: the start must set them
    for weight in layer.weights:
        weight.assign(rng.normal(0, 0.4, weight.shape).astype("float32"))
    for ours, keras_weight in zip(layer.weights, plain.weights):
        ours.assign(keras_weight)
    layer.start_as_identity(causal)
    real = np.arange(T)[None] < np.array([[T - 2], [T]])  # the first sequence padded
    # Key padding in self-attention (Keras' layer reads an explicit query_mask not at all: the
    # Keras masks' case is tests/test_layers_conversion.py's)
    for masks in ({}, {"value_mask": real}):
        want = numpy(plain(inputs, inputs, use_causal_mask=causal, **masks))
        got = numpy(layer(inputs, inputs, use_causal_mask=causal, **masks))
        np.testing.assert_allclose(got, want, atol=1e-5, err_msg=str(masks.keys()))


@pytest.mark.parametrize("options", row_options())
def test_each_row_decodes_one_token_at_a_time_as_the_whole_sequence(options, inputs):
    layer = built(options)
    rng = np.random.default_rng(0)
    for weight in layer.weights:  # away from identities and zeros: every weight matters
        weight.assign(rng.normal(0.0, 0.4, weight.shape).astype("float32"))
    whole = numpy(layer(inputs, inputs, use_causal_mask=True))
    cache = layer.empty_cache(B, T)
    for i in range(T):
        token = inputs[:, i : i + 1]
        step, cache = layer(token, token, cache=cache, cache_update_index=i, use_causal_mask=True)
        np.testing.assert_allclose(numpy(step)[:, 0], whole[:, i], atol=1e-5, err_msg=f"position {i}")
