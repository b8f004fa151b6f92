"""Keras models with `keras.layers.MultiHeadAttention` (or KerasHub blocks) turned into convatt's.

`convert_model` clones a model with every Keras attention layer (and every KerasHub
`TransformerEncoder` / `TransformerDecoder`, where keras-hub is installed) replaced by
convatt's with the modifications given, copies every weight by its path, and starts the
modifications where they change nothing: identity convolution kernels (one tap 1 on the
tap that reads the entry itself, zero bias), unit temperature, identity talking heads,
zero position biases and relative position vectors. Which tap reads the entry itself
depends on the call (a causal call aligns the query taps on past rows), so each layer's
causality is read from the call the model makes (its functional graph). Before any
training the converted model computes the original's outputs at every position, pads
included (see docs/layers.md, "Converting a trained Keras model"); `check=inputs` (or
`check_conversion`) verifies it on data, and fine-tuning starts from there.
"""

from __future__ import annotations

import inspect
import warnings
from typing import Any

import keras
import numpy as np

from convatt.layers._keras_compat import LayerCall, graph_calls, graph_input, sublayers
from convatt.layers.core.modifications import MODIFICATIONS
from convatt.layers.core.multi_head_attention import MultiHeadAttention

Causality = dict[int, tuple[keras.layers.Layer, "bool | None"]]
"""`id(layer) -> (layer, its calls' causality)`; None: not one bool, and the start does not depend on it."""

NO_IDENTITY = tuple(row.flag for row in MODIFICATIONS if row.identity is None)
"""Options with no weights to start from nothing (ALiBi's biases are fixed): each row's `identity`."""

CHECK_RTOL = 1e-5
CHECK_ATOL = 1e-5
"""`check_conversion`'s tolerance: an output entry differs where |converted - original| >
CHECK_ATOL + CHECK_RTOL * |original| (float32 rounding of the modifications at identity is ~1e-7)."""


class ConversionMismatch(ValueError):
    """The converted model does not compute what the original computes; `layer`: the first
    layer (by name, in the order Keras runs the graph) whose outputs differ."""

    def __init__(self, message: str, layer: str):
        super().__init__(message)
        self.layer = layer


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


def _convertible(layer) -> bool:
    """A layer `convert_model` replaces: Keras' own attention, or a KerasHub block."""
    return type(layer) is keras.layers.MultiHeadAttention or type(layer) in _hub_blocks()


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


def _model_calls(model: keras.Model) -> list[LayerCall]:
    """Every layer call of `model`'s graph and of the functional models it calls; a ValueError
    naming `model` where it has no graph to read."""
    calls = graph_calls(model)
    if calls is None:
        raise ValueError(
            f"{model.name}: convert_model reads each attention layer's call (use_causal_mask) from a functional "
            f"or Sequential model's graph, and this {type(model).__name__} has none (a subclassed model, or a "
            "Sequential not built yet): build the model functionally (keras.Model(inputs, outputs))."
        )
    nested = [call for c in calls if isinstance(c.layer, keras.Model) and graph_calls(c.layer) is not None
              for call in _model_calls(c.layer)]  # fmt: skip
    return calls + nested


def _call_causal(call: LayerCall) -> bool | None:
    """The call's `use_causal_mask` as the layer's `call` binds it (its default where not given;
    False for a block without one, KerasHub's encoder); None where it cannot be read."""
    try:
        bound = inspect.signature(call.layer.call).bind(*call.args, **call.kwargs)
    except TypeError:
        return None
    parameter = bound.signature.parameters.get("use_causal_mask")
    if parameter is None:
        return False
    value = bound.arguments.get("use_causal_mask", parameter.default)
    return bool(value) if isinstance(value, (bool, np.bool_)) else None


def _depends_on_causality(options: dict[str, Any]) -> bool:
    """Whether the identity start differs for causal calls: a convolution not aligned on the past anyway."""
    return bool(options.get("attention_conv")) and not options.get("conv_causal")


def _read_causality(calls: list[LayerCall], options: dict[str, Any]) -> Causality:
    """`id(layer) -> (layer, its calls' causality)` for each layer to convert; a ValueError naming
    a layer whose causality matters and is not one bool (called several ways, or not readable);
    None where it is not one bool but does not matter."""
    read: dict[int, tuple[keras.layers.Layer, set]] = {}
    for call in calls:
        if _convertible(call.layer):
            read.setdefault(id(call.layer), (call.layer, set()))[1].add(_call_causal(call))
    decided = {}
    for key, (layer, values) in read.items():
        if len(values) == 1 and None not in values:
            decided[key] = (layer, values.pop())
        elif _depends_on_causality(options):
            how = "called both with use_causal_mask=True and False" if len(values) > 1 else "its call cannot be read"
            raise ValueError(
                f"{layer.name}: {how}, and the identity start of a convolution is another tap for a causal "
                "call: no one start computes what it computes. Give it a call of its own per causality."
            )
        else:  # the start is the same either way: none to decide (None)
            decided[key] = (layer, None)
    return decided


def _check_stated(decided: Causality, causal) -> None:
    """A ValueError where `causal` (a bool for every attention layer, or {name: bool}) says
    other than the model's calls do."""
    if causal is None:
        return
    names = {layer.name: value for layer, value in decided.values()}
    stated = dict.fromkeys(names, causal) if isinstance(causal, bool) else dict(causal)
    unknown = sorted(set(stated) - set(names))
    if unknown:
        raise ValueError(f"causal names {unknown}, not attention layers of the model (those: {sorted(names)}).")
    for name, value in stated.items():
        if names[name] is not None and bool(value) != names[name]:
            raise ValueError(
                f"{name}: causal={value} was given, but the model calls it with use_causal_mask={names[name]} "
                "(KerasHub's decoders: their self-attention causal, their cross-attention not; encoders not). "
                "convert_model reads each layer's causality from the model: leave `causal` out."
            )


def _warn_unreached(calls: list[LayerCall]) -> None:
    """Warn of attention layers inside other layers: `convert_model` replaces the layers the graph calls."""
    for call in calls:
        if not isinstance(call.layer, keras.layers.Layer) or _convertible(call.layer):
            continue  # (an operation, e.g. `x + y`, is no layer)
        if isinstance(call.layer, keras.Model) and graph_calls(call.layer) is not None:
            continue
        inner = [layer.name for layer in sublayers(call.layer) if _convertible(layer)]
        if inner:
            warnings.warn(
                f"{call.layer.name}: its attention layers {inner} stay Keras' (convert_model replaces the attention "
                "layers a functional graph calls, not those inside another layer).",
                stacklevel=3,
            )


def convert_model(
    model: keras.Model, causal: bool | dict[str, bool] | None = None, check=None, **options
) -> keras.Model:
    """`model` with convatt's attention and the modification `options`, computing what it computes.

    Each attention layer starts as the identity for the call the model makes: Keras'
    `MultiHeadAttention` as its graph calls it (`use_causal_mask`; an explicit
    lower-triangular `attention_mask` is not a causal call), KerasHub's blocks as they call
    their attention (a decoder's self-attention causal, its cross-attention and an
    encoder's not). Functional models the graph calls are converted too.

    Args:
        model: a built functional or Sequential Keras model (a subclassed one has no graph to
            read: a ValueError naming it).
        causal: None (the default: read from the model), or a statement checked against the
            model: a bool for every attention layer, or `{layer_name: bool}`; a ValueError
            naming a layer where the model calls it otherwise.
        check: None, or inputs of `model`: both models run on them, and a `ConversionMismatch`
            (a ValueError) names the first layer whose outputs differ (`check_conversion`).
        **options: the modification options of `convatt.layers.MultiHeadAttention`
            (e.g. `attention_conv="2d"`); `alibi` is refused (no weights to start from nothing).

    Returns:
        A new, uncompiled model with the original's weights.
    """
    _check_options(options)
    calls = _model_calls(model)
    decided = _read_causality(calls, options)
    _check_stated(decided, causal)
    _warn_unreached(calls)
    converted, pairs = _converted_clone(model, options, decided)
    _copy_weights(pairs)
    if check is not None:
        check_conversion(model, converted, check)
    return converted


def _converted_clone(model: keras.Model, options: dict[str, Any], decided: Causality) -> tuple[keras.Model, list]:
    """`model` cloned with its attention layers converted (nested functional models too), each
    started as the identity for its calls' causality (`decided`: `_read_causality`); and the
    pairs (original layer, its clone)."""
    pairs = []

    def convert(layer):
        pairs.append((layer, _converted_layer(layer, options)))
        return pairs[-1][1]

    converted = keras.models.clone_model(model, clone_function=convert, recursive=True)
    for layer, new in pairs:
        if id(layer) in decided:
            for attention, causal in _attention_of(new, bool(decided[id(layer)][1])):
                start_as_identity(attention, causal=causal)
    return converted, pairs


def _attention_of(layer: keras.layers.Layer, causal: bool) -> list[tuple[MultiHeadAttention, bool]]:
    """The attention layers of a converted layer, each with its calls' causality (a block's
    self-attention that of the block's call; a decoder's cross-attention is not causal)."""
    if isinstance(layer, MultiHeadAttention):
        return [(layer, causal)]
    cross = getattr(layer, "_cross_attention_layer", None)
    return [(layer._self_attention_layer, causal)] + ([(cross, False)] if cross is not None else [])


def _within(variable, layer: keras.layers.Layer) -> str:
    """`variable`'s path from `layer` down (the path above it depends on how the model was built:
    a Sequential's layers get its name, their clones may not)."""
    parts = variable.path.split("/")
    return "/".join(parts[parts.index(layer.name) + 1 :]) if layer.name in parts else variable.path


def _copy_weights(pairs: list[tuple[keras.layers.Layer, keras.layers.Layer]]) -> None:
    """Each original layer's weights into its clone's, matched by path within the layer; a
    ValueError naming any that finds no place (the modifications' are the clone's only new ones)."""
    for layer, new in pairs:
        if not getattr(layer, "weights", None):  # (an operation, e.g. `x + y`, has none)
            continue
        ours = {_within(variable, new): variable for variable in new.weights}
        lost = []
        for variable in layer.weights:
            target = ours.get(_within(variable, layer))
            if target is None or tuple(target.shape) != tuple(variable.shape):
                lost.append(variable.path)
            else:
                target.assign(keras.ops.convert_to_numpy(variable))
        if lost:
            raise ValueError(f"{layer.name}: the converted layer has no place for the weights {lost}.")


def start_as_identity(layer: MultiHeadAttention, causal: bool = False) -> None:
    """Set `layer`'s modification weights so that it computes what it computes without them
    (`MultiHeadAttention.start_as_identity`: each modification's own start, from its row)."""
    layer.start_as_identity(causal=causal)


def check_conversion(
    original: keras.Model, converted: keras.Model, inputs, rtol: float = CHECK_RTOL, atol: float = CHECK_ATOL
) -> None:
    """Run both models on `inputs` (inference) and raise `ConversionMismatch` naming the first
    layer, in the order Keras runs the graph, whose outputs differ: |converted - original| >
    atol + rtol * |original| at some entry, pads included."""
    theirs, ours = _layer_outputs(original, inputs), _layer_outputs(converted, inputs)
    for (name, index), want in theirs.items():
        got = ours.get((name, index))
        if got is None or len(got) != len(want):
            raise ConversionMismatch(f"{name}: the converted model has no such layer call (call {index}).", name)
        for ours_out, theirs_out in zip(got, want):
            largest = _largest_difference(ours_out, theirs_out, rtol, atol)
            if largest is not None:
                raise ConversionMismatch(
                    f"{name}: the converted model's outputs differ from the original's by up to {largest:.3g} "
                    f"(call {index}; tolerance |converted - original| <= {atol} + {rtol} * |original|).",
                    name,
                )


def _largest_difference(ours: np.ndarray, theirs: np.ndarray, rtol: float, atol: float) -> float | None:
    """None where every entry is within the tolerance (NaN where both are NaN), else the largest
    difference (inf for another shape)."""
    if ours.shape != theirs.shape:
        return np.inf
    if np.isclose(ours, theirs, rtol=rtol, atol=atol, equal_nan=True).all():
        return None
    return float(np.nanmax(np.abs(ours - theirs)))


def _layer_outputs(model: keras.Model, inputs) -> dict[tuple[str, int], list[np.ndarray]]:
    """`(layer name, call index) -> its outputs` (float64) for each layer call of `model`'s graph."""
    calls = graph_calls(model)
    if calls is None:
        raise ValueError(f"{model.name}: check_conversion compares functional graphs; this model has none.")
    probe = keras.Model(graph_input(model), [output for call in calls for output in call.outputs])
    values = iter(keras.tree.flatten(probe(inputs, training=False)))
    outputs, seen = {}, {}
    for call in calls:
        index = seen[call.layer.name] = seen.get(call.layer.name, -1) + 1
        arrays = [keras.ops.convert_to_numpy(next(values)) for _ in call.outputs]
        outputs[(call.layer.name, index)] = [np.asarray(a, dtype=np.float64) for a in arrays]
    return outputs
