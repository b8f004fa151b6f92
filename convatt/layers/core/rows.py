"""The facts of one call, frozen and made once per call (no layer state): what `MultiHeadAttention`'s
`call` tells its core (`AttentionCall`, the padded rows) and what the modifications read besides
the tensor they transform (`AttentionContext`), with how a whole call makes them."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

from keras import ops

from convatt.layers import _keras_compat as keras_compat
from convatt.layers._utils import causal_keep, fully_masked_rows, padded_key_rows
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


def attention_context(query, keep, causal: bool, pads=None, forms: AttentionForms = PUBLISHED) -> AttentionContext:
    """The context of one call: `keep` `(b, 1, q, k)` or None, `causal` as the caller says,
    the padded rows `pads` or None, the call's `forms`."""
    if keep is None or causal:
        return AttentionContext(query, keep, causal, None, pads=pads, forms=forms)
    sees_later = sees_later_keys(keep, pads, ops.arange(ops.shape(keep)[-2]))
    return AttentionContext(query, keep, False, ops.cast(sees_later, "float32"), pads=pads, forms=forms)


def sees_later_keys(keep, pads, positions):
    """Boolean `(b or 1, 1, 1, 1)`: whether a real row (not among `pads`) of `keep`
    `(b, 1 or h, rows, k)`, the query rows at `positions` (int `(rows,)`), attends a key after its
    own position. The whole call's rows and a block's (or-ed over the blocks) alike."""
    later = ops.logical_not(causal_keep(positions, ops.shape(keep)[-1]))[None, None]
    real = keep if pads is None else ops.logical_and(keep, ops.logical_not(pads))  # the real rows' keys
    return ops.any(ops.logical_and(real, later), axis=(1, 2, 3), keepdims=True)


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
        blocks: the call's masks as given, where the attention is computed in blocks of
            queries (`query_block`; `convatt.layers.core.blocked_attention`); None: the whole matrix.
        block_size: the queries per block where `blocks` is given.
    """

    causal: bool = False
    self_attention: bool = False
    masked: bool = False
    blocks: Any = None  # a `blocked_attention.BlockMasks` (not imported: the blocks import this module)
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


def padded_rows(keep, call: AttentionCall, keras_fused: bool):
    """The padded query rows `(b, 1 or h, q, 1)` (None: none known), which attend as Keras' layer
    makes them attend and which the convolutions read as zero rows: in self-attention, the
    positions of padded keys; a row with no key left is uniform over every key in Keras' fused
    attention (`keras_fused`: no dropout, no attention asked for) and, from Keras 3.10, 0 in its
    other path (then not a pad here: a zero row already; uniform there too before 3.10)."""
    if keep is None or not call.masked:
        return None
    return row_pads(keep, padded_key_rows(keep) if call.self_attention else None, keras_fused)


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
