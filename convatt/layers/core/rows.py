"""The facts of one call, frozen and made once per call (no layer state): what `MultiHeadAttention`'s
`call` tells its core (`AttentionCall`, the padded rows), the rows a computation runs over
(`QueryRows`: which keys each keeps, which are padding, with the caller's masks on them,
`CallMasks`) and what the modifications read besides the tensor they transform
(`AttentionContext`). The whole matrix, a block of queries and a cached decoding step are one
computation on different rows."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from keras import ops

from convatt.layers import _keras_compat as keras_compat
from convatt.layers._utils import causal_keep, fully_masked_rows, keep_mask, padded_key_rows
from convatt.layers.forms import PUBLISHED, AttentionForms


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
        weights: the attention `(b, h, q, k)` that multiplied the values (the `values`
            stage reads it); None before that product.
        positions: int `(q,)`, the query rows' positions (the keys': `0 .. k - 1`); None: a
            whole call's, `0 .. q - 1`. A cached call's rows are the table's call at their
            positions (`convatt.layers.core.attention_cache`).
        pads: boolean `(b, 1 or h, q, 1)`, the padded query rows (None: none known). They
            attend as Keras' layer makes them (`masked_softmax` keeps their whole rows:
            a row with no key left is uniform), each modification applied to them; the
            convolutions read them as zero rows, so that no real row reads a pad.
        rematerialized: computed inside `keras.remat` (a block of `blocked_attention`): no
            custom gradient that closes over the context's tensors (`jax.checkpoint` traces
            the block again, and a closure would hold the first trace's values).
        forms: the form of each part (`convatt.layers.forms`), resolved when the call is
            traced: the rows of the table pass them to their sublayers.
    """

    query: Any
    keep: Any = None
    causal: bool = False
    future_open: Any = None
    weights: Any = None
    pads: Any = None
    positions: Any = None
    rematerialized: bool = False
    forms: AttentionForms = PUBLISHED


@dataclass(frozen=True)
class CallMasks:
    """A call's masks as the caller gave them, by query position: none is made a whole matrix
    here, each computation takes its own rows' part (`on`).

    Attributes:
        query_mask: boolean `(b, q)` or None: the real queries.
        key_mask: boolean `(b, k)` or None: the real keys (`value_mask` and `key_mask` and-ed).
        attention_mask: `(b, q, k)` or `(b, h, q, k)` or None: by query row.
        first: None, or the position of the masks' first row (a cached step's caller masks its
            new rows alone); a row before it (an earlier query the step recomputes for its
            convolution) reads the first row's (the caller's mask is assumed the same for every
            row but for causality: KerasHub's), none of its keys past the row's own position
            nor any before position 0.
        cross: the keys are not the queries' sequence (a cross-attention cache): a row before
            `first` keeps the first row's keys whatever its position (none before position 0).
    """

    query_mask: Any = None
    key_mask: Any = None
    attention_mask: Any = None
    first: Any = None
    cross: bool = False

    @classmethod
    def of_call(cls, query_mask=None, value_mask=None, key_mask=None, attention_mask=None) -> CallMasks:
        """The masks of a call's `(query_mask, value_mask, key_mask, attention_mask)`, the value's
        and the key's and-ed into one."""
        keys = value_mask
        if key_mask is not None:
            keys = key_mask if keys is None else ops.logical_and(ops.cast(keys, "bool"), ops.cast(key_mask, "bool"))
        return cls(query_mask, keys, attention_mask)

    def on(self, positions, key_len) -> Any:
        """Boolean `(b or 1, 1 or h, len(positions), key_len)`: the pairs the masks keep for the
        query rows at `positions` (int32 `(rows,)`, within the masks' rows where `first` is
        None); None where nothing is masked."""
        parts = []
        if self.attention_mask is not None:
            rows = self._rows(positions, ops.shape(self.attention_mask)[-2])
            parts.append(ops.take(keep_mask(self.attention_mask), rows, axis=2))
        if self.query_mask is not None:
            rows = self._rows(positions, ops.shape(self.query_mask)[1])
            parts.append(ops.take(ops.cast(self.query_mask, "bool"), rows, axis=1)[:, None, :, None])
        if self.key_mask is not None:
            parts.append(ops.cast(self.key_mask, "bool")[:, None, None, :])
        if self.first is not None:
            parts.append(self._earlier_rows(positions, key_len))
        keep = _all(parts)
        every_pair = ops.ones((1, 1, ops.shape(positions)[0], key_len), "bool")
        return None if keep is None else ops.logical_and(keep, every_pair)  # broadcast to the rows

    def _rows(self, positions, count):
        """The row of a mask of `count` rows that each position reads: its own, or (with `first`)
        its offset from the first, within the mask (a one-row mask: that row for all)."""
        if self.first is None:
            return positions
        return ops.clip(positions - ops.cast(self.first, "int32"), 0, count - 1)

    def _earlier_rows(self, positions, key_len):
        """`(1, 1, rows, 1 or key_len)`: every key of the rows from `first`; before it, the keys
        up to the row's position (`causal_keep`; `cross`: every key), none before position 0."""
        own = ops.greater_equal(positions, ops.cast(self.first, "int32"))[:, None]
        earlier = ops.greater_equal(positions, 0)[:, None] if self.cross else causal_keep(positions, key_len)
        return ops.logical_or(own, earlier)[None, None]


def _all(parts: list):
    """The `and` of boolean tensors (None: no part)."""
    if not parts:
        return None
    keep = parts[0]
    for part in parts[1:]:
        keep = ops.logical_and(keep, part)
    return keep


@dataclass(frozen=True)
class QueryRows:
    """The query rows one computation runs over, and the one answer to which keys each keeps
    (`keep`), which are padding (`pads`) and whether a real one sees a later key
    (`sees_later`): a whole call's rows, a block's slab (its rows and the halo its convolution
    reads: `slab_positions`) and a cached step's (its new rows and the earlier ones).

    Attributes:
        positions: int `(rows,)`, the rows' positions among the queries (the keys': `0 ..
            key_len - 1`).
        key_len: how many keys.
        given: boolean `(b or 1, 1 or h, rows, key_len)` or None: the caller's masks on these
            rows (a whole call's mask, `CallMasks.on`).
        causal: no row keeps a key after its position (the causal mask).
        inside: boolean `(rows,)` or None (all are): the rows inside the sequence; the others
            (a slab's halo past its ends) keep no key and are no pad.
    """

    positions: Any
    key_len: Any
    given: Any = None
    causal: bool = False
    inside: Any = None

    @cached_property
    def keep(self) -> Any:
        """Boolean `(b or 1, 1 or h, rows, key_len)`, True where a row may attend a key; None
        where nothing is masked."""
        keep = self.given
        if self.causal:
            cut = causal_keep(self.positions, self.key_len)[None, None]
            keep = cut if keep is None else ops.logical_and(keep, cut)
        if self.inside is not None:
            inside = self.inside[None, None, :, None]
            keep = ops.logical_and(inside, ops.ones((1, 1, 1, self.key_len), "bool") if keep is None else keep)
        return keep

    def pads(self, key_pads, keras_fused: bool) -> Any:
        """The padded rows `(b, 1 or h, rows, 1)` among these (`row_pads`; None: none):
        `key_pads`, the rows at padded keys' positions (self-attention; None: none)."""
        if self.keep is None:
            return None
        inside = None if self.inside is None else self.inside[None, None, :, None]
        return row_pads(self.keep, key_pads, keras_fused, inside)

    def sees_later(self, pads) -> Any:
        """Boolean `(b or 1, 1, 1, 1)`: whether a real row (not among `pads`) attends a key after
        its own position. The whole call's rows and a block's (or-ed over the blocks) alike."""
        later = ops.logical_not(causal_keep(self.positions, ops.shape(self.keep)[-1]))[None, None]
        real = self.keep if pads is None else ops.logical_and(self.keep, ops.logical_not(pads))  # the real rows' keys
        return ops.any(ops.logical_and(real, later), axis=(1, 2, 3), keepdims=True)


def slab_positions(first, count, before: int, after: int = 0) -> Any:
    """Int32 `(before + count + after,)`: the positions of `count` query rows from `first` (an int
    or int tensor) and of the halo a convolution reads around them (`ModifiedAttention.halo`):
    a block's slab, a cached step's new rows and the earlier ones it recomputes."""
    return ops.cast(first, "int32") + ops.arange(-before, count + after, dtype="int32")


def call_rows(query, key, keep, causal: bool) -> QueryRows:
    """A whole call's rows: the queries `(b, q, ...)` at `0 .. q - 1`, the keys of `key`, the
    call's mask `keep` `(b, 1 or h, q, k)` or None, cut causally where `causal`."""
    return QueryRows(ops.arange(ops.shape(query)[1]), ops.shape(key)[1], keep, causal)


def attention_context(
    query, rows: QueryRows, causal: bool, pads=None, forms: AttentionForms = PUBLISHED
) -> AttentionContext:
    """The context of a whole call on its `rows` (`call_rows`; positions None: the whole
    matrix's), `causal` as the caller says, the padded rows `pads` or None, the call's `forms`."""
    keep = rows.keep
    if keep is None or causal:
        return AttentionContext(query, keep, causal, None, pads=pads, forms=forms)
    return AttentionContext(query, keep, False, ops.cast(rows.sees_later(pads), "float32"), pads=pads, forms=forms)


@dataclass(frozen=True)
class AttentionCall:
    """What one call tells `_compute_attention` besides its tensors and mask.

    Attributes:
        causal: the call's `use_causal_mask` (the convolutions' query taps on past rows),
            whether or not the causal mask reached `_compute_attention` as a mask.
        self_attention: the queries and the keys are one sequence (`self_attention=True`,
            or the query and the value one tensor): a padded key's query is a pad too.
        masked: a padding or attention mask was given (`query_mask`, `value_mask`,
            `key_mask`, `attention_mask`, or the inputs' Keras masks).
        blocks: the call's masks as given (`CallMasks`), where the attention is computed in
            blocks of queries (`query_block`; `convatt.layers.core.blocked_attention`); None: the
            whole matrix.
        block_size: the queries per block where `blocks` is given.
    """

    causal: bool = False
    self_attention: bool = False
    masked: bool = False
    blocks: CallMasks | None = None
    block_size: int = 0


def call_facts(layer: str, masks: tuple, use_causal_mask, self_attention, convolves: bool) -> AttentionCall:
    """The `AttentionCall` of a call with `masks` `(query_mask, value_mask, key_mask,
    attention_mask)`; a warning where a convolution (`convolves`) may read padded queries."""
    query_mask, value_mask, key_mask, attention_mask = masks
    call = AttentionCall(bool(use_causal_mask), bool(self_attention), any(m is not None for m in masks))
    keys_padded = value_mask is not None or key_mask is not None
    if convolves and not call.self_attention and keys_padded:
        if query_mask is None and attention_mask is None:
            _warn_query_pads_unknown(layer)
    return call


def _warn_query_pads_unknown(layer: str) -> None:
    """Padded keys, queries of unknown padding, a convolution: if the queries are padded,
    their pads reach real rows through the convolution's taps. Self-attention is
    `self_attention=True`, or the query and the value one tensor; equal tensors are not."""
    warnings.warn(
        f"{layer}: a convolution over the attention rows with padded keys (value_mask, key_mask or the "
        "value's Keras mask) and no word on the queries' padding: if the queries are padded, their pads "
        "reach real rows through the convolution's taps. Pass query_mask= (all True where the queries have "
        "no padding; for self-attention, the same mask), or say self_attention=True (or call layer(x, x)).",
        stacklevel=3,
    )


def padded_rows(rows: QueryRows, call: AttentionCall, keras_fused: bool) -> Any:
    """The padded query rows `(b, 1 or h, q, 1)` of a whole call's `rows` (None: none known), which
    attend as Keras' layer makes them attend and which the convolutions read as zero rows: in
    self-attention, the positions of padded keys; a row with no key left is uniform over every
    key in Keras' fused attention (`keras_fused`: no dropout, no attention asked for) and, from
    Keras 3.10, 0 in its other path (then not a pad here: a zero row already; uniform there too
    before 3.10)."""
    if rows.keep is None or not call.masked:
        return None
    return rows.pads(padded_key_rows(rows.keep) if call.self_attention else None, keras_fused)


def row_pads(keep, key_pads, keras_fused: bool, inside=None):
    """The padded rows `(b, 1 or h, rows, 1)` (None: none) among the query rows of `keep`
    `(b, 1 or h, rows, k)`, the whole call's or a block's: `key_pads`, the rows at padded keys'
    positions (self-attention; None: none), and the rows with no key left where Keras' layer
    makes them uniform (`keras_fused`, or before Keras 3.10); where not, such a row is 0 and no
    pad. Rows not `inside` (boolean, broadcast to the rows; None: all are) are no pad."""
    empty = fully_masked_rows(keep)
    if inside is not None:
        empty = ops.logical_and(empty, inside)
        key_pads = None if key_pads is None else ops.logical_and(key_pads, inside)
    if keras_fused or not keras_compat.SOFTMAX_ZEROES_EMPTY_ROWS:  # Keras' layer: a uniform row
        return empty if key_pads is None else ops.logical_or(key_pads, empty)
    return None if key_pads is None else ops.logical_and(key_pads, ops.logical_not(empty))
