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

from convatt.layers.modifications import MODIFICATIONS
from convatt.layers.multi_head_attention import MultiHeadAttention

NO_IDENTITY = tuple(row.flag for row in MODIFICATIONS if row.identity is None)
"""Options with no weights to start from nothing (ALiBi's biases are fixed): each row's `identity`."""


def _hub_blocks() -> dict[type, type]:
    """KerasHub's blocks -> convatt's, where keras-hub is installed."""
    try:
        import keras_hub  # noqa: F401

        from convatt.layers import keras_hub_blocks as ours
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
    """Set `layer`'s modification weights so that it computes what it computes without them
    (`MultiHeadAttention.start_as_identity`: each modification's own start, from its row)."""
    layer.start_as_identity(causal=causal)
