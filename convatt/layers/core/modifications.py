"""The attention modifications of Dufter et al. (2020) and their neighbours, as one table.

`MODIFICATIONS` is one ordered table of the ways to modify the attention: each row names
the constructor options that turn it on, the sublayer (a layer file of its own) or
weight it makes and the stages at which it acts, how it starts where it changes nothing,
and which options turn it on. `ModifiedAttention` (`convatt.layers.core.modified_attention`) is
the one implementation of the table: a mixin that both `SelfAttention` (the tagger's
layer) and `MultiHeadAttention` (the drop-in for Keras') inherit, so both compute the same
attention from the same code; the options' checks are `convatt.layers._options`. A new
modification is a layer file, one row here and, for the tagger, one field of
`convatt.model.variants.Variant` of the same name as its flag.

Causality: only the convolutions mix the rows of different queries; every other
modification acts on each (query, key) pair or on each query's own row. So the
convolutions alone need to know about causality (`AttentionContext`): their query
taps lie on past rows under a causal call, and their taps on later rows are dropped
whenever the mask is lower-triangular.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import keras
import numpy as np
from keras import ops

from convatt.layers._options import check_flag, check_kernel_size, check_optional_count, one_of
from convatt.layers._utils import keep_rows, query_tap_offsets
from convatt.layers.attention_conv1d import AttentionConv1D
from convatt.layers.attention_conv2d import AttentionConv2D, kernel_pair
from convatt.layers.position_interaction import PositionInteraction
from convatt.layers.relative_bias import PARAMETERIZATIONS, RelativeBias
from convatt.layers.relative_position_representation import RelativePositionRepresentation
from convatt.layers.symmetric_alibi_bias import SymmetricAlibiBias
from convatt.layers.talking_heads import TalkingHeadsProjection
from convatt.layers.temperature_dense import scale_by_temperature

CONVS = (None, "1d", "2d")

STAGES = ("projections", "scores", "logits", "weights", "attention", "values")
"""Where a modification acts, in the order of the computation:
    projections  transforms the projected `(query, key, value)`, each `(b, t, h, d)` in the
               compute dtype (value None where the caller needs no values); the context
               is made from its queries, so this stage gets none
    scores     adds a term to the scaled scores `Q K^T / sqrt(d_h)` (float32)
    logits     transforms the scores just before the softmax (masked scores are set to
               a large negative number after this stage)
    weights    transforms the softmax's weights
    attention  transforms the weights into the matrix multiplied with the values
               (masked pairs are set to 0 again after it)
    values     adds to the product `attention V` `(b, q, h, d_v)` (compute dtype), given
               the attention that multiplied the values (`AttentionContext.weights`)
Within a stage, modifications act in table order."""


@dataclass(frozen=True)
class Modification:
    """One row of `MODIFICATIONS`.

    Attributes:
        name: the sublayer's name (its weights' path and its key in `layer.modifications`),
            or the name of the layer's own weight.
        attr: the layer attribute holding the sublayer or weight (its path in `.keras`
            files: never rename it, or saved models stop loading).
        flag: the constructor option that turns it on (truthy, or not None for an int option).
        options: the constructor options it adds, with their defaults and checks
            (`(name, value) -> value`, a ValueError naming the option for a value it does
            not take; `flag` among them); they are attributes of the layer and part of its config.
        make: `(layer, name, dtype_policy) -> sublayer`, or None for a weight of the layer
            itself (made by `build`).
        acts: `{stage: apply}` (stages of `STAGES`), or `layer -> {stage: apply}` when an
            option moves it; `apply` is `(layer, sublayer, tensor, context) -> tensor`
            (float32 in and out from `scores` to `attention`).
        build: `(layer, sublayer, scores_shape, query_shape) -> None`; default
            `sublayer.build(scores_shape)`.
        per_position: whether it has weights per absolute position or offset (then the
            layer needs `max_len` and takes no longer input); `layer -> bool` when an
            option decides.
        example: options that turn it on (empty: `{flag: True}`); the tests build each row
            from it, so a new row is tested (identity start, cached decoding) by itself.
        identity: `(layer, sublayer or weight, causal) -> None`: sets its weights where it
            changes nothing (`convatt.layers.conversion` starts converted models there;
            `causal`: the layer is called causally); None where no weights can (ALiBi's
            fixed slopes).
        query_taps: `layer -> int`, how many query rows one output row reads (its own and its
            neighbours': the halo that blocks of queries and cached decoding recompute, laid
            out by `query_tap_offsets`); None for a modification that reads each query's own
            row only (then its rows need no other queries).
        island_keeps: whether the backward of TensorFlow's XLA island (`xla_island`) takes
            TensorFlow's gradient of the compiled forward, which keeps what the backward reads,
            rather than computing the forward again: where those are the matrices the forward
            writes anyway (the talking heads' mixed maps); the convolution's and Shaw's forms
            would keep many more, so a layer with any such row on recomputes.
    """

    name: str
    attr: str
    flag: str
    options: dict[str, tuple[Any, Callable[[Any], Any]]]
    make: Callable[..., keras.layers.Layer] | None
    acts: dict[str, Callable[..., Any]] | Callable[[Any], dict[str, Callable[..., Any]]]
    build: Callable[..., None] = field(
        default=lambda layer, sublayer, scores_shape, query_shape: sublayer.build(scores_shape)
    )
    per_position: bool | Callable[[Any], bool] = False
    identity: Callable[..., None] | None = field(default=lambda layer, sublayer, causal: _assign_zeros(sublayer))
    example: dict[str, Any] = field(default_factory=dict)
    query_taps: Callable[[Any], int] | None = None
    island_keeps: bool = False

    def example_options(self) -> dict[str, Any]:
        """Options that turn this row on (`example`, or `{flag: True}`)."""
        return dict(self.example) or {self.flag: True}

    def is_on(self, layer) -> bool:
        value = getattr(layer, self.flag)
        return value is not None and value is not False

    def acts_of(self, layer) -> dict[str, Callable[..., Any]]:
        return self.acts(layer) if callable(self.acts) else self.acts

    def reads_positions(self, layer) -> bool:
        """Whether its terms depend on the query's position: those of the `scores` and
        `values` stages are per (query, key) pair (a cached call gives the rows' positions)."""
        return bool({"scores", "values"} & set(self.acts_of(layer)))

    def needs_max_len(self, layer) -> bool:
        return self.per_position(layer) if callable(self.per_position) else self.per_position


def _switch(name: str, make, acts, attr: str = "", flag: str = "", owns_flag: bool = True, **fields) -> Modification:
    """A row turned on by one True / False option (named as the row unless `flag` says; declared
    by the first of the rows it turns on), held in `_<name>` unless `attr` says."""
    flag = flag or name
    options = {flag: (False, check_flag)} if owns_flag else {}
    return Modification(name, attr or f"_{name}", flag, options, make, acts, **fields)


def _assign_zeros(sublayer) -> None:
    for variable in sublayer.weights:
        variable.assign(np.zeros(variable.shape, variable.dtype))


def _unit_temperature(layer, weight, causal: bool) -> None:
    weight.assign(np.ones(weight.shape, "float32"))


def _identity_heads(layer, sublayer, causal: bool) -> None:
    _assign_zeros(sublayer)
    sublayer.kernel.assign(np.eye(layer.num_heads, dtype="float32"))


def _identity_conv(layer, sublayer, causal: bool) -> None:
    """A kernel whose only 1 is on the tap reading the entry itself (row offset 0, centre column;
    the row offset 0 is another tap under a causal call), zero bias."""
    _assign_zeros(sublayer)
    shape = sublayer.kernel.shape
    kernel = np.zeros(shape, "float32")
    row = query_tap_offsets(shape[1], causal or layer.conv_causal).index(0)
    if layer.attention_conv == "1d":  # (head, tap, in, out): the key column itself
        kernel[:, row] = np.eye(shape[2], dtype="float32")
    else:  # (head, row_tap, col_tap), the key axis centred
        kernel[:, row, (kernel_pair((shape[1], shape[2]))[1] - 1) // 2] = 1.0
    sublayer.kernel.assign(kernel)


def _add(layer, sublayer, scores, context):
    if context.positions is not None:
        return scores + sublayer.bias_at(_at_least_0(context.positions), ops.shape(scores)[-1])
    return sublayer.add_float32(scores, forms=context.forms)


def _add_with_query(layer, sublayer, scores, context):
    if context.positions is not None:
        return scores + sublayer.key_term_at(context.query, _at_least_0(context.positions), ops.shape(scores)[-1])
    return sublayer.add_float32(scores, context.query, forms=context.forms)


def _add_value_term(layer, sublayer, output, context):
    """Shaw et al.'s value term, added to the product with the values in float32."""
    if context.positions is not None:
        term = sublayer.value_term_at(context.weights, _at_least_0(context.positions))
    else:
        term = sublayer.value_term(context.weights, forms=context.forms)
    return ops.cast(ops.cast(output, "float32") + term, layer.compute_dtype)


def _at_least_0(positions):
    """Rows before the sequence (a convolution's zero padding, position < 0) read position 0's
    terms: they attend no key, so the terms are never used, only kept inside the tables."""
    return ops.maximum(positions, 0)


def _scale_projections(layer, temperature, projections, context):
    """Each head's queries, keys and values times its own temperature (rows q, k, v of the
    `(3, num_heads)` weight), in the queries' dtype."""
    gamma = ops.cast(temperature, projections[0].dtype)
    return tuple(
        None if x is None else scale_by_temperature(x, gamma[row][:, None]) for row, x in enumerate(projections)
    )


def _build_temperature(layer, weight, scores_shape, query_shape) -> None:
    layer.temperature_weight = layer.add_weight(name="temperature", shape=(3, layer.num_heads), initializer="ones")


def _mix_heads(layer, sublayer, x, context):
    return ops.cast(sublayer(x, forms=context.forms), "float32")


def _convolve(layer, sublayer, x, context):
    """Before the softmax: the scores, masked ones set to 0 first (no leak into their
    neighbours); after it: the weights, masked pairs set to 0 again after the convolution
    (the padded rows' whole rows kept, `context.pads`)."""
    keep = context.keep
    if layer.conv_before_softmax and keep is not None:
        x = ops.where(keep, x, ops.zeros_like(x))
    convolved = _convolve_rows(layer, sublayer, x, context)
    if layer.conv_before_softmax or keep is None:
        return convolved
    return convolved * ops.cast(keep_rows(keep, context.pads), "float32")


def _convolve_rows(layer, sublayer, x, context):
    """The convolution of `x` where the real rows read the padded ones as zero rows and each
    padded row reads its neighbours as they are (two convolutions where rows are padded)."""
    form = {"forms": context.forms} if layer.attention_conv == "2d" else {}  # +Conv has one form
    convolve = lambda rows: sublayer.convolve_float32(
        rows, causal=context.causal, future_open=context.future_open, **form
    )  # fmt: skip
    if context.pads is None:
        return convolve(x)
    real = convolve(ops.where(context.pads, ops.zeros_like(x), x))
    return ops.where(context.pads, convolve(x), real)


def _conv_query_taps(layer) -> int:
    """The convolution's taps along the queries (a 2-d kernel's rows)."""
    if layer.attention_conv == "1d":
        return int(layer.conv_kernel_size)
    return kernel_pair(layer.conv_kernel_size)[0]


def _make_conv(layer, name, policy):
    activation = None if layer.conv_before_softmax else "relu"
    if layer.attention_conv == "1d":
        return AttentionConv1D(
            layer.max_len,
            layer.num_heads,
            kernel_size=layer.conv_kernel_size,
            activation=activation,
            name=name,
            dtype=policy,
        )
    return AttentionConv2D(
        layer.num_heads, kernel_size=layer.conv_kernel_size, activation=activation, name=name, dtype=policy
    )


def _make_relative_position(layer, name, policy):
    key_dim, value_dim = layer.modification_dims
    return RelativePositionRepresentation(
        layer.relative_position_representation,
        key_dim,
        value_dim=None if value_dim == key_dim else value_dim,
        name=name,
        dtype=policy,
    )


def _make_relative_bias(layer, name, policy):
    parameterization = layer.relative_bias_parameterization
    return RelativeBias(layer.max_len, layer.num_heads, parameterization=parameterization, name=name, dtype=policy)


MODIFICATIONS: tuple[Modification, ...] = (
    _switch(
        "temperature",
        None,
        {"projections": _scale_projections},
        attr="temperature_weight",
        build=_build_temperature,
        identity=_unit_temperature,
    ),
    _switch(
        "position_interaction",
        lambda layer, name, policy: PositionInteraction(layer.max_len, layer.num_heads, name=name, dtype=policy),
        {"scores": _add},
        per_position=True,
    ),
    Modification(
        "relative_bias",
        "_relative_bias",
        "relative_bias",
        {
            "relative_bias": (False, check_flag),
            "relative_bias_parameterization": ("lookup", one_of(*PARAMETERIZATIONS)),
        },
        _make_relative_bias,
        {"scores": _add},
        per_position=True,
    ),
    Modification(
        "relative_position_representation",
        "_relative_position",
        "relative_position_representation",
        {"relative_position_representation": (None, check_optional_count)},
        _make_relative_position,
        {"scores": _add_with_query, "values": _add_value_term},
        example={"relative_position_representation": 2},
        build=lambda layer, sublayer, scores_shape, query_shape: sublayer.build(scores_shape, query_shape),
    ),
    _switch(
        "alibi",
        lambda layer, name, policy: SymmetricAlibiBias(layer.num_heads, name=name, dtype=policy),
        {"scores": _add},
        identity=None,
    ),
    Modification(
        "attention_conv",
        "_conv",
        "attention_conv",
        {
            "attention_conv": (None, one_of(*CONVS)),
            "conv_kernel_size": (3, check_kernel_size),
            "conv_before_softmax": (False, check_flag),
            "conv_causal": (False, check_flag),
        },
        _make_conv,
        lambda layer: {"logits" if layer.conv_before_softmax else "attention": _convolve},
        per_position=lambda layer: layer.attention_conv == "1d",
        identity=_identity_conv,
        example={"attention_conv": "2d"},
        query_taps=_conv_query_taps,
    ),
    *(
        _switch(
            f"talking_heads_{stage}",
            lambda layer, name, policy: TalkingHeadsProjection(layer.num_heads, name=name, dtype=policy),
            {stage: _mix_heads},
            attr=f"_talking_{stage}",
            flag="talking_heads",
            owns_flag=stage == "logits",
            identity=_identity_heads,
            island_keeps=True,
        )
        for stage in ("logits", "weights")
    ),
)
"""The modifications, in the order their sublayers (and weights) are made and listed."""

MODIFICATION_OPTIONS: dict[str, tuple[Any, Callable[[Any], Any]]] = {
    option: spec for row in MODIFICATIONS for option, spec in row.options.items()
}
"""Every modification's constructor options: name -> (default, check)."""


def check_conv_options(attention_conv, conv_kernel_size, conv_before_softmax, conv_causal) -> None:
    """The convolution options a layer cannot build, or would ignore, as ValueErrors that say why."""
    if attention_conv not in CONVS:
        raise ValueError(f"attention_conv takes one of {CONVS}; received {attention_conv!r}.")
    default_size = MODIFICATION_OPTIONS["conv_kernel_size"][0]
    given = {"conv_before_softmax": conv_before_softmax, "conv_causal": conv_causal}
    given["conv_kernel_size"] = conv_kernel_size != default_size
    for option, is_given in given.items():
        if attention_conv is None and is_given:
            value = conv_kernel_size if option == "conv_kernel_size" else True
            raise ValueError(f"{option}={value!r} needs an attention_conv ('1d' or '2d'); without one it does nothing.")
    if attention_conv == "1d" and not isinstance(conv_kernel_size, int):
        raise ValueError(
            f'attention_conv="1d" takes an int conv_kernel_size (its taps are along the queries); '
            f"received {conv_kernel_size!r}. A pair (query_taps, key_taps) is for attention_conv=\"2d\"."
        )
