"""Keras models with `keras.layers.MultiHeadAttention` (or KerasHub blocks) turned into convatt's.

`convert_model` clones a model with every Keras attention layer (and every KerasHub
`TransformerEncoder` / `TransformerDecoder`, where keras-hub is installed) replaced by
convatt's with the modifications given, copies every weight by its path, and starts the
modifications where they change nothing: identity convolution kernels (one tap 1 on the
tap that reads the entry itself, zero bias), unit temperature, identity talking heads,
zero position biases and relative position vectors. Before any training the converted
model computes the original's outputs (at every real position; see docs/layers.md,
"Masks and padding"), and fine-tuning starts from there.
"""

from __future__ import annotations

from typing import Any

import keras
import numpy as np

from convatt.layers._utils import query_tap_offsets
from convatt.layers.attention_conv2d import kernel_pair
from convatt.layers.multi_head_attention import MultiHeadAttention

NO_IDENTITY = ("alibi",)
"""Options with no weights to start from nothing (ALiBi's biases are fixed)."""


def _hub_blocks() -> dict[type, type]:
    """KerasHub's blocks -> convatt's, where keras-hub is installed."""
    try:
        import keras_hub  # noqa: F401

        from convatt.layers import keras_hub as ours
    except ImportError:
        return {}
    return {
        keras_hub.layers.TransformerEncoder: ours.TransformerEncoder,
        keras_hub.layers.TransformerDecoder: ours.TransformerDecoder,
    }


def _check_options(options: dict[str, Any]) -> None:
    for name in NO_IDENTITY:
        if options.get(name):
            raise ValueError(f"{name}=True has no weights to start from nothing: it cannot be converted to.")


def _converted_layer(layer: keras.layers.Layer, options: dict[str, Any]) -> keras.layers.Layer:
    """The layer of the converted model standing for `layer` (a fresh, unbuilt copy)."""
    config = layer.get_config()
    if type(layer) is keras.layers.MultiHeadAttention:
        return MultiHeadAttention(**{**config, **options})
    hub = _hub_blocks()
    if type(layer) in hub:
        config.update(attention_options=options, attention_weight_order="keras")
        if hub[type(layer)].__name__ == "TransformerDecoder":
            config["cross_attention_options"] = options
        return hub[type(layer)].from_config(config)
    return type(layer).from_config(config)


def convert_model(model: keras.Model, causal: bool = False, **options) -> keras.Model:
    """`model` with convatt's attention and the modification `options`, computing what it computes.

    Args:
        model: a built functional or sequential Keras model.
        causal: whether the attention layers are called with `use_causal_mask=True` (the
            identity convolution kernels put their 1 on the tap that reads the entry itself,
            which is another tap under a causal call). KerasHub's decoders are causal anyway.
        **options: the modification options of `convatt.layers.MultiHeadAttention`
            (e.g. `attention_conv="2d"`); `alibi` is refused (no weights to start from nothing).

    Returns:
        A new, uncompiled model with the original's weights.
    """
    _check_options(options)
    converted = keras.models.clone_model(model, clone_function=lambda layer: _converted_layer(layer, options))
    values = {variable.path: keras.ops.convert_to_numpy(variable) for variable in model.weights}
    for layer in converted._flatten_layers():
        if isinstance(layer, MultiHeadAttention):
            start_as_identity(layer, causal=causal)
    for variable in converted.weights:
        if variable.path in values:
            variable.assign(values[variable.path])
    return converted


def start_as_identity(layer: MultiHeadAttention, causal: bool = False) -> None:
    """Set `layer`'s modification weights so that it computes what it computes without them."""
    causal = causal or layer.conv_causal
    for name, sublayer in layer.modifications.items():
        for variable in sublayer.weights:
            variable.assign(np.zeros(variable.shape, variable.dtype))
        if name.startswith("talking_heads"):
            sublayer.kernel.assign(np.eye(layer.num_heads, dtype="float32"))
        elif name == "attention_conv":
            sublayer.kernel.assign(_identity_kernel(sublayer.kernel.shape, layer.attention_conv, causal))
    if layer.temperature:
        layer.temperature_weight.assign(np.ones(layer.temperature_weight.shape, "float32"))


def _identity_kernel(shape, conv: str, causal: bool) -> np.ndarray:
    """A kernel whose only 1 is on the tap reading the entry itself (row offset 0, centre column)."""
    kernel = np.zeros(shape, "float32")
    rows = shape[1]
    row = query_tap_offsets(rows, causal).index(0)
    if conv == "1d":  # (head, tap, in, out): the key column itself
        kernel[:, row] = np.eye(shape[2], dtype="float32")
    else:  # (head, row_tap, col_tap), the key axis centred
        kernel[:, row, (kernel_pair((shape[1], shape[2]))[1] - 1) // 2] = 1.0
    return kernel
