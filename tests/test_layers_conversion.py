"""convatt.layers.conversion: a trained Keras model with convatt's attention, the same outputs."""

from __future__ import annotations

import keras
import numpy as np
import pytest
from layer_harness import randomize

from convatt.layers import MultiHeadAttention
from convatt.layers.conversion import convert_model

B, T, D = 2, 10, 8
CONVERSIONS = {
    "Conv2d": dict(attention_conv="2d"),
    "Conv": dict(attention_conv="1d", max_len=T),
    "MTA-kq": dict(attention_conv="2d", conv_before_softmax=True, conv_kernel_size=(2, 9)),
    "everything else": dict(
        attention_conv="2d",
        conv_kernel_size=(4, 3),
        temperature=True,
        talking_heads=True,
        position_interaction=True,
        relative_bias=True,
        relative_position_representation=2,
        max_len=T,
    ),
}


def keras_model(causal: bool) -> keras.Model:
    x = keras.Input((T, D))
    y = x + keras.layers.MultiHeadAttention(2, 4, name="first")(x, x, use_causal_mask=causal)
    y = y + keras.layers.MultiHeadAttention(2, 4, use_bias=False, name="second")(y, y, use_causal_mask=causal)
    model = keras.Model(x, keras.layers.Dense(3)(y))
    randomize(model, 1)
    return model


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("name", CONVERSIONS)
@pytest.mark.tf_only
def test_the_converted_model_computes_the_originals_outputs(name, causal):
    original = keras_model(causal)
    converted = convert_model(original, causal=causal, **CONVERSIONS[name])
    assert all(isinstance(converted.get_layer(n), MultiHeadAttention) for n in ("first", "second"))
    assert len(converted.weights) > len(original.weights)
    x = np.random.default_rng(2).normal(size=(B, T, D)).astype("float32")
    want = keras.ops.convert_to_numpy(original(x))
    np.testing.assert_allclose(keras.ops.convert_to_numpy(converted(x)), want, atol=1e-5)


ONE_EACH = {
    "Temp": dict(temperature=True),
    "Talking": dict(talking_heads=True),
    "P": dict(position_interaction=True, max_len=T),
    "R": dict(relative_bias=True, max_len=T),
    "Shaw": dict(relative_position_representation=2),
    **CONVERSIONS,
}


def padded_model(causal: bool, dropout: float) -> keras.Model:
    """Embedding(mask_zero) -> attention -> LayerNormalization(e + a) -> the mean over every position
    (Keras' `+` drops the mask: the pads' rows reach the output), and the attention's own outputs."""
    tokens = keras.Input((T,), dtype="int32")
    embedded = keras.layers.Embedding(20, D, mask_zero=True)(tokens)
    attended = keras.layers.MultiHeadAttention(2, 4, dropout=dropout, name="first")(
        embedded, embedded, use_causal_mask=causal
    )
    pooled = keras.layers.GlobalAveragePooling1D()(keras.layers.LayerNormalization()(embedded + attended))
    model = keras.Model(tokens, [keras.layers.Dense(1)(pooled), attended])
    randomize(model, 4)
    return model


# `make test` takes the combination of every modification; each alone is in the slow tier.
PADDED_CASES = [pytest.param(n, marks=() if n == "everything else" else pytest.mark.slow) for n in ONE_EACH]


@pytest.mark.parametrize("dropout", [0.0, 0.1])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("name", PADDED_CASES)
def test_a_converted_model_with_padding_equals_the_original_at_every_position_pads_included(name, causal, dropout):
    """Padded query rows attend as in Keras' layer (uniform over every key in its fused attention,
    0 where dropout takes its other path), each modification at its identity start on them too."""
    original = padded_model(causal, dropout)
    converted = convert_model(original, causal=causal, **ONE_EACH[name])
    ids = np.array([[3, 5, 7, 2, 9, 1, 0, 0, 0, 0], [4, 4, 1, 8, 6, 2, 5, 3, 1, 0]])
    for got, want in zip(converted(ids), original(ids)):
        np.testing.assert_allclose(keras.ops.convert_to_numpy(got), keras.ops.convert_to_numpy(want), atol=1e-5)


@pytest.mark.tf_only
def test_fine_tuning_moves_the_modifications_and_alibi_is_refused():
    original = keras_model(False)
    converted = convert_model(original, attention_conv="2d")
    converted.compile(keras.optimizers.Adam(1e-2), "mse")
    rng = np.random.default_rng(3)
    x, y = rng.normal(size=(16, T, D)).astype("float32"), rng.normal(size=(16, T, 3)).astype("float32")
    kernel = keras.ops.convert_to_numpy(converted.get_layer("first").modifications["attention_conv"].kernel)
    converted.fit(x, y, epochs=2, verbose=0)
    trained = keras.ops.convert_to_numpy(converted.get_layer("first").modifications["attention_conv"].kernel)
    assert np.abs(trained - kernel).max() > 1e-3
    with pytest.raises(ValueError, match="alibi"):
        convert_model(original, alibi=True)


@pytest.mark.tf_only
def test_a_kerashub_encoder_and_decoder_convert():
    keras_hub = pytest.importorskip("keras_hub")
    source, target = keras.Input((7, D)), keras.Input((T, D))
    memory = keras_hub.layers.TransformerEncoder(16, num_heads=2, name="encoder")(source)
    out = keras_hub.layers.TransformerDecoder(16, num_heads=2, name="decoder")(target, memory)
    original = keras.Model([source, target], out)
    randomize(original, 4)
    converted = convert_model(original, attention_conv="2d", temperature=True)
    from convatt.layers.keras_hub_blocks import TransformerDecoder

    assert isinstance(converted.get_layer("decoder"), TransformerDecoder)
    rng = np.random.default_rng(5)
    x = [rng.normal(size=(B, 7, D)).astype("float32"), rng.normal(size=(B, T, D)).astype("float32")]
    want = keras.ops.convert_to_numpy(original(x))
    np.testing.assert_allclose(keras.ops.convert_to_numpy(converted(x)), want, atol=1e-5)
