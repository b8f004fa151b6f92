"""Keras' private attributes and methods that convatt reads or overrides: the one place.

convatt supports Keras 3.8 to the newest (setup.cfg; CI runs the floor). Keras'
`MultiHeadAttention` changed inside that range, so each private name convatt touches is read
here, feature-tested on the installed Keras (never by version number), with what it means on
every supported version. Public names (`query_dense`, `key_dim`, `dropout`, ...) are used
directly elsewhere; they exist on every supported version.

Read:
- `_compute_attention(query, key, value, attention_mask, training, ...)`: Keras' documented
  override point on every version; its extra arguments differ (`keras_attention`).
- `_compute_attention_mask(query, value, query_mask, value_mask, key_mask, attention_mask,
  use_causal_mask)`: the same on every version (`attention_mask_of_call`).
- `_combine_equation`, `_dropout_layer`: the attention-values product's einsum and the dropout
  layer, made by `_build_attention` on every version.
- `_flash_attention` (3.7+), `_use_gate` / `_gate_dense` (3.14.1+), `_sliding_window` (3.15+):
  features of the newer layers; before them the layer has none of these (`flash_attention`,
  `gate_dense`, `sliding_window` answer False / None there, as that version's layer behaves).
- `keras.src.backend.get_keras_mask` / `set_keras_mask`: a tensor's Keras mask (an attribute
  under TensorFlow, a side table under JAX), the same functions on every supported version.
- A functional model's graph (`convert_model`): `Function._nodes_by_depth`, each node's
  `operation`, `arguments` (the call's arguments as given) and `outputs`; a Sequential's
  graph `Sequential._functional`; `Layer._flatten_layers`. The same on every supported version.
- `MultiHeadAttention._kernel_initializer` / `_bias_initializer` and a layer's tracker list
  `Layer._layers` (KerasHub's blocks with convatt's attention in place of Keras'): on every version.
- `keras.src.backend.common`'s `in_stateless_scope` / `in_symbolic_scope`: whether a call traces
  shapes only (`compute_output_spec`) or reads variables from a `StatelessScope`; on every version.
- `keras.remat` (public, Keras 3.9+): before it, the backend's function that Keras' wraps (`remat`).
Overridden: `_compute_attention` (the modifications) and `_compute_causal_mask` (convatt's one
causal helper; the same `(1, q, k)` lower triangle on every version).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

import keras
from keras.src.backend import get_keras_mask, set_keras_mask
from keras.src.backend.common.stateless_scope import in_stateless_scope
from keras.src.backend.common.symbolic_scope import in_symbolic_scope
from packaging.version import Version

from convatt.layers.forms import backend_remat

_KERAS_ATTENTION = keras.layers.MultiHeadAttention._compute_attention
_ATTENTION_ARGUMENTS = inspect.signature(_KERAS_ATTENTION).parameters

FUSED_CAUSAL = "use_causal_mask" in _ATTENTION_ARGUMENTS
"""Keras 3.15+: `call` passes no mask for a causal-only call and `_compute_attention(...,
use_causal_mask=True)` takes the backend's fused causal kernel. Before: `call` always builds the
causal mask (`_compute_causal_mask`) and passes it as `attention_mask`."""

SCORES_ARGUMENT = "return_attention_scores" in _ATTENTION_ARGUMENTS
"""Keras 3.10+: `_compute_attention` takes `return_attention_scores`. Before: it reads
`self._return_attention_scores`, which Keras' `call` sets first."""


SOFTMAX_ZEROES_EMPTY_ROWS = Version(keras.version()) >= Version("3.10")
"""Keras 3.10+: a masked `Softmax` sets a fully masked row to 0, so Keras' layer gives a query with
no key left no attention on its path without the fused kernel (dropout, the attention asked for).
Before: the row is uniform over every key, as on the fused path (a version number: Keras' source
says it in `Softmax.call`, which runs only on tensors)."""


def keras_attention(layer, query, key, value, attention_mask, training, return_attention_scores: bool, causal: bool):
    """Keras' own `_compute_attention` of the installed version on projected `(b, t, h, d)` tensors.

    `causal` with no `attention_mask` asks for the fused causal kernel, which only Keras 3.15+
    has: callers pass the causal mask itself elsewhere (`FUSED_CAUSAL`)."""
    if causal and not FUSED_CAUSAL:
        raise ValueError("this Keras has no fused causal attention: pass the causal mask as attention_mask")
    extra = {"use_causal_mask": True} if causal else {}
    if SCORES_ARGUMENT:
        extra["return_attention_scores"] = return_attention_scores
    else:
        layer._return_attention_scores = return_attention_scores
    return _KERAS_ATTENTION(layer, query, key, value, attention_mask, training, **extra)


def attention_mask_of_call(layer, query, value, masks: tuple, causal: bool):
    """Keras' mask of a call (`_compute_attention_mask`): `masks` is `(query_mask, value_mask,
    key_mask, attention_mask)`, and-ed with the causal mask where `causal`."""
    query_mask, value_mask, key_mask, attention_mask = masks
    return layer._compute_attention_mask(
        query, value, query_mask, value_mask, key_mask, attention_mask, use_causal_mask=causal
    )  # fmt: skip


def combine_equation(layer) -> str:
    """The einsum of the attention weights with the values (`_build_attention`'s)."""
    return layer._combine_equation


def dropout_layer(layer):
    """The attention-weights dropout (`_build_attention`'s `Dropout`)."""
    return layer._dropout_layer


def flash_attention(layer) -> bool:
    """Whether the layer was asked for flash attention (Keras 3.7+; before: never)."""
    return bool(getattr(layer, "_flash_attention", False))


def gate_dense(layer):
    """The gate's projection of a gated layer (`use_gate=True`, Keras 3.14.1+), else None."""
    return layer._gate_dense if getattr(layer, "_use_gate", False) else None


def sliding_window(layer) -> int | None:
    """The layer's sliding window (Keras 3.15+; before: none)."""
    return getattr(layer, "_sliding_window", None)


def in_symbolic_or_stateless_scope() -> bool:
    """Whether the code traced now computes shapes only (Keras' `compute_output_spec`) or reads
    the variables' values from a `StatelessScope` (`stateless_call`): tensors of the caller's trace."""
    return in_symbolic_scope() or in_stateless_scope()


def remat(function):
    """`keras.remat(function)` (Keras 3.9+): recomputed in the backward pass. Before 3.9, what it
    wraps, the backend's own (`convatt.layers.forms.backend_remat`; tests/test_layers_keras_compat.py
    runs it under both backends)."""
    if hasattr(keras, "remat"):
        return keras.remat(function)
    return backend_remat(function)


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


def attention_initializers(layer) -> dict[str, Any]:
    """A Keras `MultiHeadAttention`'s initialisers, as its constructor's arguments."""
    return {"kernel_initializer": layer._kernel_initializer, "bias_initializer": layer._bias_initializer}


def untrack(layer: keras.layers.Layer, sublayer: keras.layers.Layer) -> None:
    """Take `sublayer` out of `layer`'s tracked sublayers (and so its weights): a replaced attribute
    keeps it in Keras' tracker list `_layers` otherwise."""
    layer._layers[:] = [tracked for tracked in layer._layers if tracked is not sublayer]
