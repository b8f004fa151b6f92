"""The attention modifications of Dufter et al. (2020) and their neighbours, as one table.

`MODIFICATIONS` is one ordered table of the ways to modify the attention: each row names
the constructor options that turn it on, the sublayer it makes (a layer file of its
own) and the stage at which that sublayer acts on the attention. `ModifiedAttention`
is the one implementation of the table: a mixin that both `SelfAttention` (the
tagger's layer) and `MultiHeadAttention` (the drop-in for Keras') inherit, so both
compute the same attention from the same code. A new modification is a layer file,
one row here and, for the tagger, one field of `convatt.model.variants.Variant` of the
same name as its flag.

Causality: only the convolutions mix the rows of different queries; every other
modification acts on each (query, key) pair or on each query's own row. So the
convolutions alone need to know about causality (`AttentionContext`): their query
taps lie on past rows under a causal call, and their taps on later rows are dropped
whenever the mask is lower-triangular.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import keras
import numpy as np
from keras import ops

from convatt.layers._utils import large_negative, require_length
from convatt.layers.alibi_bias import AlibiBias
from convatt.layers.attention_conv1d import AttentionConv1D
from convatt.layers.attention_conv2d import AttentionConv2D, kernel_pair
from convatt.layers.position_interaction import PositionInteraction
from convatt.layers.relative_bias import RelativeBias
from convatt.layers.relative_position_representation import RelativePositionRepresentation
from convatt.layers.talking_heads import TalkingHeadsProjection

CONVS = (None, "1d", "2d")

STAGES = ("scores", "logits", "weights", "attention")
"""Where a modification acts, in the order of the computation:
    scores     adds a term to the scaled scores `Q K^T / sqrt(d_h)` (float32)
    logits     transforms the scores just before the softmax (masked scores are set to
               a large negative number after this stage)
    weights    transforms the softmax's weights
    attention  transforms the weights into the matrix multiplied with the values
               (masked pairs are set to 0 again after it)
Within a stage, modifications act in table order."""


@dataclass(frozen=True)
class AttentionContext:
    """What one call tells the modifications besides the tensor they transform.

    Attributes:
        query: the projected queries `(b, q, h, d)` (Shaw et al.'s key term reads them).
        keep: boolean `(b, 1, q, k)`, True where a query may attend a key; None: no mask.
        causal: the convolutions' query taps lie on rows `i - k + 1 .. i` (a causal
            call), instead of being centred on row `i` (the paper's).
        future_open: float `(b, 1, 1, 1)`, 0 for the batch entries whose mask is
            lower-triangular (a causal mask, however built) and 1 for the others; the
            centred convolutions multiply their taps on later rows with it. None when
            there is no mask (every tap is open) or `causal` (no tap on a later row).
    """

    query: Any
    keep: Any = None
    causal: bool = False
    future_open: Any = None


def lower_triangular_keep(query_len, key_len):
    """Boolean `(1, 1, q, k)`: True where key `j <= ` query `i` (Keras' causal mask)."""
    rows = ops.expand_dims(ops.arange(query_len), 1)
    cols = ops.expand_dims(ops.arange(key_len), 0)
    return ops.expand_dims(ops.expand_dims(ops.greater_equal(rows, cols), 0), 0)


def attention_context(query, keep, causal: bool) -> AttentionContext:
    """The context of one call: `keep` `(b, 1, q, k)` or None, `causal` as the caller says."""
    if keep is None or causal:
        return AttentionContext(query, keep, causal, None)
    shape = ops.shape(keep)
    later = ops.logical_not(lower_triangular_keep(shape[-2], shape[-1]))
    sees_later = ops.any(ops.logical_and(keep, later), axis=(1, 2, 3), keepdims=True)
    return AttentionContext(query, keep, False, ops.cast(sees_later, "float32"))


def _is_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def check_flag(name: str, value) -> bool:
    """A switch: True or False (a NumPy bool too), nothing else."""
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} takes True or False; received {value!r}.")
    return bool(value)


def _optional_count(name: str, value) -> int | None:
    """None or an int >= 0 (a clipping distance); not a bool, not a float."""
    if value is None:
        return None
    if not _is_int(value) or value < 0:
        raise ValueError(f"{name} takes None or an int >= 0 (the clipping distance k); received {value!r}.")
    return int(value)


def _one_of(*allowed):
    def check(name: str, value):
        if not any(value == option and type(value) is type(option) for option in allowed):
            raise ValueError(f"{name} takes one of {', '.join(map(repr, allowed))}; received {value!r}.")
        return value

    return check


def _kernel_size(name: str, value) -> int | tuple[int, int]:
    """An int >= 1, or a pair `(query_taps, key_taps)` of them (for `attention_conv="2d"`)."""
    pair = isinstance(value, (list, tuple))
    taps = tuple(value) if pair else (value,)
    if len(taps) != (2 if pair else 1) or not all(_is_int(tap) and tap >= 1 for tap in taps):
        raise ValueError(
            f'{name} takes an int >= 1, or for attention_conv="2d" a pair (query_taps, key_taps) of them; '
            f"received {value!r}."
        )
    return kernel_pair(taps) if pair else int(value)


def check_max_len(max_len) -> int | None:
    """`max_len` as an int, or None; a ValueError naming it for anything else."""
    if max_len is None:
        return None
    if not _is_int(max_len) or max_len < 1:
        raise ValueError(f"max_len takes None or an int >= 1 (the longest query / key); received {max_len!r}.")
    return int(max_len)


@dataclass(frozen=True)
class Modification:
    """One row of `MODIFICATIONS`.

    Attributes:
        name: the sublayer's name: its weights' path and its key in `layer.modifications`.
        attr: the layer attribute holding the sublayer (its path in `.keras` files:
            never rename it, or saved models stop loading).
        flag: the constructor option that turns it on (truthy, or not None for an int option).
        options: the constructor options it adds, with their defaults and checks
            (`(name, value) -> value`, a ValueError naming the option for a value it does
            not take; `flag` among them); they are attributes of the layer and part of its config.
        make: `(layer, name, dtype_policy) -> sublayer`.
        stage: one of `STAGES`, or `layer -> stage` when an option moves it.
        apply: `(layer, sublayer, tensor, context) -> tensor`, float32 in and out.
        build: `(sublayer, scores_shape, query_shape) -> None`; default `sublayer.build(scores_shape)`.
        per_position: whether it has weights per absolute position or offset (then the
            layer needs `max_len` and takes no longer input); `layer -> bool` when an
            option decides.
    """

    name: str
    attr: str
    flag: str
    options: dict[str, tuple[Any, Callable[[Any], Any]]]
    make: Callable[..., keras.layers.Layer]
    stage: str | Callable[[Any], str]
    apply: Callable[..., Any]
    build: Callable[..., None] = field(default=lambda sublayer, scores_shape, query_shape: sublayer.build(scores_shape))
    per_position: bool | Callable[[Any], bool] = False

    def is_on(self, layer) -> bool:
        value = getattr(layer, self.flag)
        return value is not None and value is not False

    def stage_of(self, layer) -> str:
        return self.stage(layer) if callable(self.stage) else self.stage

    def needs_max_len(self, layer) -> bool:
        return self.per_position(layer) if callable(self.per_position) else self.per_position


def _add(layer, sublayer, scores, context):
    return sublayer.add_float32(scores)


def _add_with_query(layer, sublayer, scores, context):
    return sublayer.add_float32(scores, context.query)


def _mix_heads(layer, sublayer, x, context):
    return ops.cast(sublayer(x), "float32")


def _convolve(layer, sublayer, x, context):
    """Before the softmax: the scores, masked ones set to 0 first (no leak into their
    neighbours); after it: the weights, masked pairs set to 0 again after the convolution."""
    keep = context.keep
    if layer.conv_before_softmax and keep is not None:
        x = ops.where(keep, x, ops.zeros_like(x))
    convolved = sublayer.convolve_float32(x, causal=context.causal, future_open=context.future_open)
    if layer.conv_before_softmax or keep is None:
        return convolved
    return convolved * ops.cast(keep, "float32")


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


MODIFICATIONS: tuple[Modification, ...] = (
    Modification(
        "position_interaction",
        "_position_interaction",
        "position_interaction",
        {"position_interaction": (False, check_flag)},
        lambda layer, name, policy: PositionInteraction(layer.max_len, layer.num_heads, name=name, dtype=policy),
        "scores",
        _add,
        per_position=True,
    ),
    Modification(
        "relative_bias",
        "_relative_bias",
        "relative_bias",
        {
            "relative_bias": (False, check_flag),
            "relative_bias_parameterization": ("lookup", _one_of("lookup", "circulant")),
        },
        lambda layer, name, policy: RelativeBias(
            layer.max_len,
            layer.num_heads,
            parameterization=layer.relative_bias_parameterization,
            name=name,
            dtype=policy,
        ),
        "scores",
        _add,
        per_position=True,
    ),
    Modification(
        "relative_position_representation",
        "_relative_position",
        "relative_position_representation",
        {"relative_position_representation": (None, _optional_count)},
        _make_relative_position,
        "scores",  # and its value term (`value_term`), added to the attention's output
        _add_with_query,
        build=lambda sublayer, scores_shape, query_shape: sublayer.build(scores_shape, query_shape),
    ),
    Modification(
        "alibi",
        "_alibi",
        "alibi",
        {"alibi": (False, check_flag)},
        lambda layer, name, policy: AlibiBias(layer.num_heads, name=name, dtype=policy),
        "scores",
        _add,
    ),
    Modification(
        "attention_conv",
        "_conv",
        "attention_conv",
        {
            "attention_conv": (None, _one_of(*CONVS)),
            "conv_kernel_size": (3, _kernel_size),
            "conv_before_softmax": (False, check_flag),
            "conv_causal": (False, check_flag),
        },
        _make_conv,
        lambda layer: "logits" if layer.conv_before_softmax else "attention",
        _convolve,
        per_position=lambda layer: layer.attention_conv == "1d",
    ),
    Modification(
        "talking_heads_logits",
        "_talking_logits",
        "talking_heads",
        {"talking_heads": (False, check_flag)},
        lambda layer, name, policy: TalkingHeadsProjection(layer.num_heads, name=name, dtype=policy),
        "logits",
        _mix_heads,
    ),
    Modification(
        "talking_heads_weights",
        "_talking_weights",
        "talking_heads",
        {},
        lambda layer, name, policy: TalkingHeadsProjection(layer.num_heads, name=name, dtype=policy),
        "weights",
        _mix_heads,
    ),
)
"""The modifications, in the order their sublayers are made and their weights listed."""

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


class ModifiedAttention:
    """The modifications of `MODIFICATIONS`, for a multi-head attention layer (a mixin).

    The host layer sets `num_heads`, `max_len` and `modification_dims`
    (`(key_dim, value_dim)` of a head), calls `_init_modifications` in its
    constructor, `_build_modifications` in `build`, and computes its attention maps
    with `_attention_maps`.
    """

    def _init_modifications(self, options: dict[str, Any]) -> None:
        """Set the modification options (checked) as attributes, check them together, make the sublayers."""
        for name, (default, check) in MODIFICATION_OPTIONS.items():
            setattr(self, name, check(name, options.get(name, default)))
        check_max_len(self.max_len)
        check_conv_options(self.attention_conv, self.conv_kernel_size, self.conv_before_softmax, self.conv_causal)
        needs_len = self.per_position_modifications()
        if needs_len and self.max_len is None:
            raise ValueError(
                f"{type(self).__name__} needs `max_len` for {', '.join(needs_len)} (weights per position); "
                "the other modifications take any length."
            )
        for row in MODIFICATIONS:  # in table order: the order their weights are listed
            setattr(self, row.attr, row.make(self, row.name, self.dtype_policy) if row.is_on(self) else None)

    def per_position_modifications(self) -> list[str]:
        """The options that are on and have weights per position (they need `max_len`)."""
        return [row.flag for row in MODIFICATIONS if row.is_on(self) and row.needs_max_len(self)]

    def _active(self, stage: str | None = None) -> Iterator[tuple[Modification, keras.layers.Layer]]:
        """(row, sublayer) of the modifications that are on, in table order; of one stage if given."""
        for row in MODIFICATIONS:
            sublayer = getattr(self, row.attr)
            if sublayer is not None and (stage is None or row.stage_of(self) == stage):
                yield row, sublayer

    @property
    def modifications(self) -> dict:
        """The modification sublayers this layer has, by name (`MODIFICATIONS`' names):
        `position_interaction`, `relative_bias`, `relative_position_representation`,
        `alibi`, `attention_conv`, `talking_heads_logits`, `talking_heads_weights`."""
        return {row.name: sublayer for row, sublayer in self._active()}

    def _length_message(self, name: str, needs_len: list[str]) -> str:
        return (
            f"{self.name} was built with max_len={self.max_len} for {', '.join(needs_len)} "
            f"(weights per position); received a {name} length of {{length}}."
        )

    def _check_length(self, query_len, key_len) -> None:
        """A clear error for a sequence longer than `max_len` where weights are per position."""
        needs_len = self.per_position_modifications()
        for name, size in (("query", query_len), ("key", key_len)):
            if needs_len and size is not None and size > self.max_len:
                raise ValueError(self._length_message(name, needs_len).replace("{length}", str(size)))

    def _checked_lengths(self, query, key):
        """`query`, `key` `(b, t, h, d)`, checked to be at most `max_len` long where weights are per
        position: at trace time where the length is known, else in the graph (`require_length`)."""
        needs_len = self.per_position_modifications()
        if not needs_len:
            return query, key
        query = require_length(query, 1, self.max_len, self._length_message("query", needs_len))
        return query, require_length(key, 1, self.max_len, self._length_message("key", needs_len))

    def _build_modifications(self, scores_shape, query_shape) -> None:
        self._check_length(scores_shape[2], scores_shape[3])
        for row, sublayer in self._active():
            row.build(sublayer, scores_shape, query_shape)

    def _modification_config(self) -> dict:
        return {name: getattr(self, name) for name in MODIFICATION_OPTIONS}

    def _apply(self, stage: str, x, context: AttentionContext):
        """`x` through the modifications of `stage`, in table order."""
        for row, sublayer in self._active(stage):
            x = row.apply(self, sublayer, x, context)
        return x

    def _attention_maps(self, query, key, context: AttentionContext):
        """(softmax attention, attention after the convolution), each `(b, h, q, k)`, float32.

        Float32 whatever the compute dtype: position terms can be large next to
        the scores (ALiBi, the masks' large negative scores), and the softmax
        and the convolution's sums would lose digits in 8 (bfloat16) or 11
        (float16) bits."""
        query, key = self._checked_lengths(query, key)
        scale = 1.0 / math.sqrt(self.modification_dims[0])
        scores = ops.cast(ops.einsum("bqhd,bkhd->bhqk", query, key), "float32") * scale
        scores = self._apply("scores", scores, context)
        scores = self._apply("logits", scores, context)
        keep = context.keep
        if keep is not None:
            scores = ops.where(keep, scores, large_negative("float32"))
        attention = ops.softmax(scores, axis=-1)
        if keep is not None:  # also zeroes fully masked rows (uniform after the softmax)
            attention = attention * ops.cast(keep, "float32")
        weights = self._apply("weights", attention, context)
        return attention, self._apply("attention", weights, context)
