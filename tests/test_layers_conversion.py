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
