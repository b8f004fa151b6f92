"""`ModifiedAttention`: the one implementation of the modification table (a mixin).

`convatt.layers.core.modifications` holds the table (`MODIFICATIONS`: what each modification is,
makes and does at which stage); this mixin runs it for a multi-head attention layer:
`SelfAttention` (the tagger's layer) and `MultiHeadAttention` (the drop-in for Keras') both
inherit it, so both compute the same attention from the same code.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from keras import ops

from convatt.layers._options import check_max_len
from convatt.layers._utils import check_length, query_tap_offsets, require_length
from convatt.layers.core.modifications import MODIFICATION_OPTIONS, MODIFICATIONS, Modification, check_conv_options
from convatt.layers.core.rows import AttentionContext, QueryRows, attention_context
from convatt.layers.core.softmax import attention_softmax
from convatt.layers.forms import AttentionForms, published_forms


class ModifiedAttention:
    """The modifications of `MODIFICATIONS`, for a multi-head attention layer (a mixin).

    The host layer sets `num_heads` and `modification_dims` (`(key_dim, value_dim)` of a
    head), calls `_init_modifications` in its constructor and `_build_modifications` in
    `build`; a call runs `projected` on its projections, makes its context
    (`_modification_context`), computes its attention maps with `attention_maps` and
    adds `value_terms` to the product with the values. What the host adds around that
    (Keras' projections, dropout, the output projection) is its own.
    """

    choose_forms = staticmethod(published_forms)
    """The layer's forms (`convatt.layers.forms`): a function that resolves them while a
    call is traced. The tagger's `SelfAttention` keeps the published ones (the operations its
    results came from, bit for bit: tests/test_layers_tagger_computation.py);
    `MultiHeadAttention` takes `drop_in_forms`, those for its backend, device and compilation."""

    def attention_forms(self) -> AttentionForms:
        """The forms of the call being traced (`choose_forms`)."""
        return self.choose_forms()

    def _init_modifications(self, options: dict[str, Any], max_len: int | None) -> None:
        """Set `max_len` and the modification options (checked) as attributes, check them
        together, make the sublayers."""
        self.max_len = check_max_len(max_len)
        for name, (default, check) in MODIFICATION_OPTIONS.items():
            setattr(self, name, check(name, options.get(name, default)))
        check_conv_options(self.attention_conv, self.conv_kernel_size, self.conv_before_softmax, self.conv_causal)
        needs_len = self.per_position_modifications()
        if needs_len and self.max_len is None:
            raise ValueError(
                f"{type(self).__name__} needs `max_len` for {', '.join(needs_len)} (weights per position); "
                "the other modifications take any length."
            )
        for row in MODIFICATIONS:  # in table order: the order their weights are listed
            made = row.make is not None and row.is_on(self)
            setattr(self, row.attr, row.make(self, row.name, self.dtype_policy) if made else None)

    @property
    def modified(self) -> bool:
        """Whether any modification is on."""
        return any(row.is_on(self) for row in MODIFICATIONS)

    def island_recomputes(self) -> bool:
        """Whether the XLA island's backward computes the forward again: unless every modification
        on keeps only what its forward writes anyway (`Modification.island_keeps`)."""
        return not all(row.island_keeps for row in MODIFICATIONS if row.is_on(self))

    def query_taps(self) -> int:
        """How many query rows (its own and its neighbours') one output row reads: the largest
        `query_taps` of the modifications that are on (1 where none reads other rows)."""
        return max([row.query_taps(self) for row in MODIFICATIONS if row.query_taps and row.is_on(self)], default=1)

    def reads_other_rows(self) -> bool:
        """Whether a modification that is on reads other query rows than each output row's own
        (a row with `query_taps`: the cache then keeps the queries)."""
        return any(row.query_taps is not None and row.is_on(self) for row in MODIFICATIONS)

    def halo(self, causal: bool) -> tuple[int, int]:
        """`(before, after)`: how many query rows before and after its own an output row reads
        (`query_taps` laid out by `query_tap_offsets`; `(0, 0)` where none is read)."""
        offsets = query_tap_offsets(self.query_taps(), causal)
        return -offsets[0], max(offsets[-1], 0)

    def positional_options(self) -> list[str]:
        """The options that are on whose terms depend on the query's position
        (`Modification.reads_positions`: a cached call needs the rows' positions for them)."""
        return [row.flag for row in MODIFICATIONS if row.is_on(self) and row.reads_positions(self)]

    def per_position_modifications(self) -> list[str]:
        """The options that are on and have weights per position (they need `max_len`)."""
        return [row.flag for row in MODIFICATIONS if row.is_on(self) and row.needs_max_len(self)]

    def _active(self, stage: str | None = None) -> Iterator[tuple[Modification, Any]]:
        """(row, sublayer or weight) of the modifications that are on (and built), in table
        order; of one stage if given."""
        for row in MODIFICATIONS:
            sublayer = getattr(self, row.attr)
            if sublayer is not None and (stage is None or stage in row.acts_of(self)):
                yield row, sublayer

    @property
    def modifications(self) -> dict:
        """The modification sublayers this layer has, by name (`MODIFICATIONS`' names):
        `position_interaction`, `relative_bias`, `relative_position_representation`,
        `alibi`, `attention_conv`, `talking_heads_logits`, `talking_heads_weights`
        (the temperature is a weight of the layer, `temperature_weight`)."""
        return {row.name: sublayer for row, sublayer in self._active() if row.make is not None}

    def _modification_variables(self) -> list:
        """The modifications' weights, in table order (the temperature, then the sublayers')."""
        own = [sublayer for row, sublayer in self._active() if row.make is None]
        return own + [w for sublayer in self.modifications.values() for w in sublayer.variables]

    def _length_message(self, name: str, needs_len: list[str]) -> str:
        return (
            f"{self.name} was built with max_len={self.max_len} for {', '.join(needs_len)} "
            f"(weights per position); received a {name} length of {{length}}."
        )

    def check_lengths(self, query_len, key_len) -> None:
        """A clear error for a sequence longer than `max_len` where weights are per position."""
        needs_len = self.per_position_modifications()
        for name, size in (("query", query_len), ("key", key_len)):
            if needs_len:
                check_length(size, self.max_len, self._length_message(name, needs_len))

    def checked_lengths(self, query, key):
        """`query`, `key` `(b, t, h, d)`, checked to be at most `max_len` long where weights are per
        position: at trace time where the length is known, else in the graph (`require_length`)."""
        needs_len = self.per_position_modifications()
        if not needs_len:
            return query, key
        query = require_length(query, 1, self.max_len, self._length_message("query", needs_len))
        return query, require_length(key, 1, self.max_len, self._length_message("key", needs_len))

    def _build_modifications(self, scores_shape, query_shape) -> None:
        """Build the sublayers and make the layer's own modification weights (the temperature)."""
        self.check_lengths(scores_shape[2], scores_shape[3])
        for row in MODIFICATIONS:
            if row.is_on(self):
                row.build(self, getattr(self, row.attr), scores_shape, query_shape)

    def start_as_identity(self, causal: bool = False) -> None:
        """Set the modifications' weights where they change nothing (each row's `identity`):
        the layer then computes what it computes without them (`causal`: it is called with
        `use_causal_mask=True`). A ValueError for a modification with no such start."""
        for row, sublayer in self._active():
            if row.identity is None:
                raise ValueError(f"{self.name}: {row.flag} has no weights to start from nothing.")
            row.identity(self, sublayer, causal)

    def _modification_config(self) -> dict:
        return {"max_len": self.max_len, **{name: getattr(self, name) for name in MODIFICATION_OPTIONS}}

    def _apply(self, stage: str, x, context: AttentionContext | None):
        """`x` through the modifications of `stage`, in table order."""
        for row, sublayer in self._active(stage):
            x = row.acts_of(self)[stage](self, sublayer, x, context)
        return x

    def projected(self, query, key, value=None):
        """The `projections` stage: `(query, key, value)` `(b, t, h, d)` as the modifications
        change them (the temperature); `value` None where the caller needs no values."""
        return self._apply("projections", (query, key, value), None)

    def _modification_context(self, query, rows: QueryRows, causal: bool, pads=None) -> AttentionContext:
        """The context of a whole call's `rows` (`call_rows`) on the (projected) `query`: the
        convolutions' query taps on the past when `causal` (the call's mask is causal), the
        rows are cut causally (`use_causal_mask`) or `conv_causal`."""
        causal = causal or rows.causal or self.conv_causal
        return attention_context(query, rows, causal, pads, forms=self.attention_forms())

    def attention_maps(self, query, key, context: AttentionContext):
        """(softmax attention, attention after the convolution), each `(b, h, q, k)`, float32.

        Float32 whatever the compute dtype: position terms can be large next to
        the scores (ALiBi, the masks' large negative scores), and the softmax
        and the convolution's sums would lose digits in 8 (bfloat16) or 11
        (float16) bits."""
        query, key = self.checked_lengths(query, key)
        scores = self._scaled_scores(query, key, context.forms)
        return self._attention_after_scores(self._apply("scores", scores, context), context)

    def _scaled_scores(self, query, key, forms: AttentionForms):
        """`Q K^T / sqrt(key_dim)` `(b, h, q, k)` in float32 from `(b, t, h, d)` projections, in the
        form `forms.scores`: the product scaled, or the queries scaled first."""
        scale = 1.0 / math.sqrt(self.modification_dims[0])
        if forms.scores == "scale_queries":
            return ops.cast(ops.einsum("bqhd,bkhd->bhqk", query * ops.cast(scale, query.dtype), key), "float32")
        return ops.cast(ops.einsum("bqhd,bkhd->bhqk", query, key), "float32") * scale

    def _attention_after_scores(self, scores, context: AttentionContext):
        """`attention_maps` from the output of the `scores` stage on (cached decoding adds
        that stage's terms itself, for query rows at other positions)."""
        scores = self._apply("logits", scores, context)
        softmax = attention_softmax(context.forms.softmax, context.rematerialized)
        attention = softmax(scores, context.keep, context.pads)  # float32 in, float32 out
        weights = self._apply("weights", attention, context)
        return attention, self._apply("attention", weights, context)

    def value_terms(self, output, weights, context: AttentionContext):
        """The `values` stage: `output` `(b, q, h, d_v)` plus the modifications' terms (Shaw's),
        given the attention `weights` that multiplied the values."""
        return self._apply("values", output, replace(context, weights=weights))
