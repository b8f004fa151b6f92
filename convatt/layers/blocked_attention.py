"""The modified attention computed block by block of queries: memory linear in the length.

Every modification reads a bounded neighbourhood of a query row: the scores' terms, the softmax
and the talking heads act on the row itself, the convolutions on the rows of their query taps
(`query_tap_offsets`: up to `k_q - 1` rows before, and for a centred kernel after). So the rows
`s .. s + b - 1` of the output are the table's computation (`ModifiedAttention`) on the slab of
query rows `s - before .. s + b - 1 + after` at their positions (`AttentionContext.positions`,
as cached decoding computes rows at given positions), its halo rows dropped after the
convolution. A slab is cut at the sequence's ends, where the convolution's zero padding is the
whole matrix's own.

Each block's scores, softmax, convolution and product with the values are made and discarded
in turn, and the backward pass recomputes them (`keras.remat`: `jax.checkpoint` or
`tf.recompute_grad`): one block's `(b, heads, block + halo, keys)` matrices at a time instead of
the whole `(b, heads, queries, keys)` ones. Masks given as vectors (the query and key padding,
the causal mask) are made per block; an `attention_mask` is sliced per block. What the whole
path reads from the whole mask (the padded keys of self-attention, whether a mask lets a row see
later keys) is reduced block by block first.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import keras
from keras import ops

from convatt.layers._utils import causal_keep, fully_masked_rows, keep_mask, query_tap_offsets
from convatt.layers.attention_cache import query_taps
from convatt.layers.modifications import AttentionContext


@dataclass(frozen=True)
class BlockMasks:
    """The masks of one call, as the caller gave them (none of them a whole matrix made here).

    Attributes:
        query_mask: boolean `(b, q)` or None: the real queries.
        key_mask: boolean `(b, k)` or None: the real keys (`value_mask` and `key_mask` and-ed).
        attention_mask: `(b, q, k)` or `(b, h, q, k)` or None: the caller's, sliced per block.
        causal: the causal mask (query `i` attends keys `<= i`).
        masked: a padding or attention mask was given (`AttentionCall.masked`).
        self_attention: the queries and the keys are one sequence (a padded key's query is a pad).
    """

    query_mask: Any = None
    key_mask: Any = None
    attention_mask: Any = None
    causal: bool = False
    masked: bool = False
    self_attention: bool = False

    def keep(self, start: int, stop: int, key_len):
        """Boolean `(b or 1, 1 or h, stop - start, key_len)`: the pairs rows `start .. stop - 1`
        may attend; None where nothing is masked."""
        parts = []
        if self.attention_mask is not None:
            parts.append(keep_mask(self.attention_mask)[:, :, start:stop, :])
        if self.query_mask is not None:
            parts.append(ops.cast(self.query_mask, "bool")[:, None, start:stop, None])
        if self.key_mask is not None:
            parts.append(ops.cast(self.key_mask, "bool")[:, None, None, :])
        if self.causal:
            parts.append(causal_keep(ops.arange(start, stop, dtype="int32"), key_len)[None, None])
        if not parts:
            return None
        keep = ops.ones((1, 1, stop - start, key_len), dtype="bool")  # every part broadcast to the slab
        for part in parts:
            keep = ops.logical_and(keep, part)
        return keep


def key_masks(
    query_mask=None, value_mask=None, key_mask=None, attention_mask=None, causal: bool = False, **facts
) -> BlockMasks:
    """The `BlockMasks` of a call's masks (`value_mask` and `key_mask` and-ed into one)."""
    keys = value_mask
    if key_mask is not None:
        keys = key_mask if keys is None else ops.logical_and(ops.cast(keys, "bool"), ops.cast(key_mask, "bool"))
    return BlockMasks(query_mask, keys, attention_mask, causal, **facts)


def halo(layer, causal: bool) -> tuple[int, int]:
    """`(before, after)`: how many query rows before and after its own a row of the output reads
    (the convolution's query taps; `(0, 0)` without one)."""
    offsets = query_tap_offsets(query_taps(layer), causal)
    return -offsets[0], max(offsets[-1], 0)


def block_starts(query_len: int, block: int) -> list[int]:
    """The first row of each block of `block` queries (the last one may be shorter)."""
    return list(range(0, query_len, block))


def blocked_attention(layer, query, key, value, masks: BlockMasks, training=None):
    """The modified attention's output `(b, q, h, d_v)` of `layer` (a `MultiHeadAttention`) on
    its projected (and `projections`-stage) `query`, `key`, `value`, in blocks of
    `layer.query_block` queries (module docstring)."""
    query, key = layer._checked_lengths(query, key)
    query_len, key_len = query.shape[1], ops.shape(key)[1]
    causal = masks.causal or layer.conv_causal
    pads = _padded_keys(masks, query_len, key_len, layer.query_block) if masks.masked else None
    facts = _CallFacts(masks, pads, causal, None)
    facts = replace(facts, future_open=None if causal else _future_open(layer, facts, query_len, key_len))
    before, after = halo(layer, causal)
    outputs = []
    for start in block_starts(query_len, layer.query_block):
        stop = min(start + layer.query_block, query_len)
        rows = Slab(start, stop, max(start - before, 0), min(stop + after, query_len))
        slab = query[:, rows.first : rows.last]
        if outputs:  # after the block before, in both passes: one block's matrices at a time
            slab = slab + ops.cast(0.0, slab.dtype) * ops.cast(outputs[-1][:1, :1, :1, :1], slab.dtype)
        # the block's masks are made inside: kept for the backward pass, they would add up to a whole matrix
        compute = lambda q, k, v, rows=rows: _block(layer, q, k, v, rows, facts, training)  # noqa: E731
        outputs.append(rematerialized(layer, compute, (slab, key, value)))
    return outputs[0] if len(outputs) == 1 else ops.concatenate(outputs, axis=1)


def rematerialized(layer, compute, args: tuple):
    """`compute(*args)` (a function of tensors and `layer`'s weights), its intermediates not kept:
    recomputed in the backward pass. `keras.remat`, but under JAX the recomputation is made to
    wait for the output's gradient: XLA drops `jax.checkpoint`'s optimisation barriers on a CPU,
    and common-subexpression elimination then merged the recomputation with the forward pass
    (every block's matrices kept: the whole matrix's memory)."""
    if keras.backend.backend() != "jax":
        return keras.remat(compute)(*args)
    import jax

    variables = layer.variables

    def pure(args, values):
        with keras.StatelessScope(state_mapping=list(zip(variables, values))):
            return compute(*args)

    @jax.custom_vjp
    def run(args, values):
        return pure(args, values)

    def backward(saved, upstream):
        args, values = saved
        anchor = upstream[:1, :1, :1, :1]
        args = tuple(x + ops.cast(0.0 * anchor, x.dtype) for x in args)  # made after the gradient is
        return jax.vjp(pure, args, values)[1](upstream)

    run.defvjp(lambda args, values: (pure(args, values), (args, values)), backward)
    return run(tuple(args), [v.value for v in variables])


@dataclass(frozen=True)
class Slab:
    """Output rows `start .. stop - 1`, computed from query rows `first .. last - 1` (the halo)."""

    start: int
    stop: int
    first: int
    last: int


@dataclass(frozen=True)
class _CallFacts:
    """What every block of a call reads: its masks, the padded rows `(b, 1, q, 1)` of
    self-attention (None: none), the convolutions' causality, `AttentionContext.future_open`."""

    masks: BlockMasks
    pads: Any
    causal: bool
    future_open: Any


def _block(layer, query, key, value, rows: Slab, facts: _CallFacts, training):
    """The output rows `rows.start .. rows.stop - 1` `(b, rows, h, d_v)` from the slab's queries."""
    keep, pads = _slab_keep_and_pads(layer, facts, rows, ops.shape(key)[1])
    positions = ops.arange(rows.first, rows.last, dtype="int32")
    context = AttentionContext(
        query, keep, facts.causal, facts.future_open, pads=pads, positions=positions, rematerialized=True
    )
    _, attention = layer._attention_maps(query, key, context)
    own = slice(rows.start - rows.first, rows.stop - rows.first)
    attention = attention[:, :, own, :]
    dropped = layer._dropout_layer(ops.cast(attention, layer.compute_dtype), training=training)
    output = ops.einsum(layer._combine_equation, dropped, value)
    own_context = replace(context, query=query[:, own], positions=positions[own])
    return layer._value_terms(output, dropped, own_context)


def _slab_keep_and_pads(layer, facts: _CallFacts, rows: Slab, key_len) -> tuple:
    """`(keep, pads)` of the slab's rows, as `MultiHeadAttention._padded_rows` makes the pads."""
    keep = facts.masks.keep(rows.first, rows.last, key_len)
    if keep is None or not facts.masks.masked:
        return keep, None
    slab_pads = None if facts.pads is None else facts.pads[:, :, rows.first : rows.last, :]
    empty = fully_masked_rows(keep)
    if layer._dropout == 0:
        return keep, empty if slab_pads is None else ops.logical_or(slab_pads, empty)
    return keep, None if slab_pads is None else ops.logical_and(slab_pads, ops.logical_not(empty))


def _padded_keys(masks: BlockMasks, query_len: int, key_len, block: int):
    """Self-attention's padded queries `(b, 1, q, 1)` (`padded_key_rows`: a key no query attends),
    reduced block by block; None in cross-attention."""
    if not masks.self_attention:
        return None
    seen = None
    for start in block_starts(query_len, block):
        keep = masks.keep(start, min(start + block, query_len), key_len)
        if keep is None:
            return None
        rows_seen = ops.any(keep, axis=(1, 2))  # (b or 1, k)
        seen = rows_seen if seen is None else ops.logical_or(seen, rows_seen)
    return ops.logical_not(seen)[:, None, :, None]


def _future_open(layer, facts: _CallFacts, query_len: int, key_len):
    """`AttentionContext.future_open` of a non-causal call: 1 for the batch entries whose real
    rows attend a later key, reduced block by block; None without a mask."""
    sees_later = None
    for start in block_starts(query_len, layer.query_block):
        stop = min(start + layer.query_block, query_len)
        keep, slab_pads = _slab_keep_and_pads(layer, facts, Slab(start, stop, start, stop), key_len)
        if keep is None:
            return None
        later = ops.logical_not(causal_keep(ops.arange(start, stop, dtype="int32"), key_len))[None, None]
        real = keep if slab_pads is None else ops.logical_and(keep, ops.logical_not(slab_pads))
        block_sees = ops.any(ops.logical_and(real, later), axis=(1, 2, 3), keepdims=True)
        sees_later = block_sees if sees_later is None else ops.logical_or(sees_later, block_sees)
    return ops.cast(sees_later, "float32")
