"""The private Keras internals convatt reads, in one place (Keras 3; checked against 3.15).

Keras keeps each layer call of a functional model in a node: the layer, the call's
arguments as given (`Node.arguments`) and its outputs. `convert_model` reads a layer's
causality from there and compares the layers' outputs of two models; KerasHub's blocks
read a tensor's Keras mask as KerasHub does. Nothing else in convatt touches these, so a
change of Keras' internals is met here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import keras
from keras.src.backend import get_keras_mask, set_keras_mask


@dataclass(frozen=True)
class LayerCall:
    """One call of a layer in a functional graph: the arguments as given, the outputs (flat)."""

    layer: keras.layers.Layer
    args: tuple
    kwargs: dict[str, Any]
    outputs: tuple


def _graph(model: keras.Model):
    """The functional model holding `model`'s graph: itself, or a built Sequential's (`_functional`)."""
    return getattr(model, "_functional", None) if isinstance(model, keras.Sequential) else model


def graph_input(model: keras.Model):
    """The input tensors of `model`'s graph, in the structure its call takes (a Sequential's too)."""
    return _graph(model).input


def graph_calls(model: keras.Model) -> list[LayerCall] | None:
    """Every layer call of `model`'s functional graph (`Function._nodes_by_depth`), inputs
    first, input layers left out; None where `model` has no graph (a subclassed model, an
    unbuilt Sequential)."""
    by_depth = getattr(_graph(model), "_nodes_by_depth", None)
    if by_depth is None:
        return None
    calls = []
    for depth in sorted(by_depth, reverse=True):  # Keras runs the graph in this order
        for node in by_depth[depth]:
            if not isinstance(node.operation, keras.layers.InputLayer):
                arguments, outputs = node.arguments, tuple(node.outputs)
                calls.append(LayerCall(node.operation, tuple(arguments.args), dict(arguments.kwargs), outputs))
    return calls


def keras_mask(x):
    """`x`'s Keras mask, or None (a tensor attribute under TensorFlow, a side table under JAX)."""
    return get_keras_mask(x)


def drop_keras_masks(*tensors) -> None:
    """Take the Keras masks off `tensors` in place, as Keras' `MultiHeadAttention.call` does with its
    inputs: a mask-aware layer after it that reads the same tensors (`Add` of a residual) sees them
    unmasked, and a drop-in must leave them so too."""
    for x in tensors:
        if x is not None:
            set_keras_mask(x, None)


def sublayers(layer: keras.layers.Layer) -> list[keras.layers.Layer]:
    """Every layer tracked inside `layer`, at any depth, `layer` left out (`Layer._flatten_layers`)."""
    return list(layer._flatten_layers(include_self=False))
