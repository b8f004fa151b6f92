"""The modified attention computed block by block of queries: memory linear in the length.

Every modification reads a bounded neighbourhood of a query row: the scores' terms, the softmax
and the talking heads act on the row itself, the convolutions on the rows of their query taps
(`query_tap_offsets`: up to `k_q - 1` rows before, and for a centred kernel after). So the rows
`s .. s + b - 1` of the output are the table's computation (`ModifiedAttention`) on the slab of
query rows `s - before .. s + b - 1 + after` at their positions (`AttentionContext.positions`,
as cached decoding computes rows at given positions), its halo rows dropped after the
convolution. Every slab has as many rows, so that the blocks are one loop (`keras.ops.map`):
its rows past the sequence's ends attend no key, which makes them the zero rows of the
convolution's padding, as in the whole matrix.

Each block's scores, softmax, convolution and product with the values are made and discarded
in turn, and the backward pass recomputes them (`keras.remat`: `jax.checkpoint` or
`tf.recompute_grad`): one block's `(b, heads, block + halo, keys)` matrices at a time instead of
the whole `(b, heads, queries, keys)` ones. The attention dropout drops entries by a hash of
their positions (`position_dropout`), so that a recomputed block drops what it dropped. Masks
given as vectors (the query and key padding, the causal mask) are made per block; an
`attention_mask` is read per block. What the whole path reads from the whole mask (the padded
keys of self-attention, whether a mask lets a row see later keys) is reduced block by block
first.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import keras
import numpy as np
from keras import ops

from convatt.layers import _keras_compat as keras_compat
from convatt.layers._options import is_int
from convatt.layers.core.rows import AttentionCall, AttentionContext, QueryRows, slab_positions
from convatt.layers.forms import AttentionForms

AUTO = "auto"
AUTO_ABOVE_BYTES = 2**28
"""`query_block="auto"` computes blocks where one example's float32 attention matrix passes this."""
AUTO_BLOCK_BYTES = 2**26
"""... in blocks whose matrix is at most this (a power of two of queries, 16 to 1,024)."""


def block_size(query_block, num_heads: int, query_len: int, key_len: int) -> int | None:
    """The queries per block of a call (`MultiHeadAttention`'s `query_block`: an int, "auto" or
    None), or None where the call computes the whole matrix (no more than one block)."""
    if query_block == AUTO:
        row_bytes = 4 * num_heads * key_len
        if row_bytes * query_len <= AUTO_ABOVE_BYTES:
            return None
        query_block = min(max(2 ** int(math.log2(max(AUTO_BLOCK_BYTES // row_bytes, 1))), 16), 1024)
    return query_block if query_block is not None and query_len > query_block else None


def check_query_block(query_block) -> int | str | None:
    """`query_block` as an int >= 1, "auto" or None; a ValueError naming it for anything else."""
    if query_block is None or query_block == AUTO:
        return query_block
    if not is_int(query_block) or query_block < 1:
        raise ValueError(
            f"query_block takes None (the whole attention matrix), 'auto' (blocks past "
            f"{AUTO_ABOVE_BYTES // 2**20} MiB of attention matrix per example) or an int >= 1 (queries "
            f"per block); received {query_block!r}."
        )
    return int(query_block)


def block_starts(query_len: int, block: int) -> list[int]:
    """The first row of each block of `block` queries (the last one may be shorter)."""
    return list(range(0, query_len, block))


def blocked_attention(layer, query, key, value, call: AttentionCall, training=None):
    """The modified attention's output `(b, q, h, d_v)` of `layer` (a `MultiHeadAttention`) on
    its projected (and `projections`-stage) `query`, `key`, `value`, in blocks of
    `call.block_size` queries: one loop (`keras.ops.map`) whose step computes a block from its
    slab of query rows, so the program holds one block whatever the length (module docstring)."""
    query, key = layer.checked_lengths(query, key)
    query_len, key_len, block = query.shape[1], ops.shape(key)[1], call.block_size
    causal = call.causal or layer.conv_causal
    before, after = layer.halo(causal)
    seed = _dropout_seed(layer, training)
    facts = _CallFacts(call, None, causal, None, query_len, before, block, layer.attention_forms(), seed)
    facts = replace(facts, pads=_padded_keys(facts, key_len) if call.masked else None)
    facts = replace(facts, future_open=None if causal else _future_open(layer, facts, key_len))
    outside = before > 0 or after > 0 or query_len % block > 0  # slabs reach past the sequence's ends

    def block_output(index):
        positions = slab_positions(index * block, block, before, after)
        slab = ops.take(query, ops.clip(positions, 0, query_len - 1), axis=1)
        compute = lambda q, k, v, p: _block(layer, q, k, v, p, facts, outside)  # noqa: E731
        return rematerialized(layer, compute, (slab, key, value, positions))

    count = -(-query_len // block)
    outputs = ops.map(block_output, ops.arange(count, dtype="int32"))  # (count, b, block, h, d_v)
    outputs = ops.reshape(ops.moveaxis(outputs, 0, 1), (-1, count * block, *value.shape[2:]))
    return outputs[:, :query_len]


def rematerialized(layer, compute, args: tuple):
    """`compute(*args)` (a function of tensors and `layer`'s weights), its intermediates not
    kept: recomputed in the backward pass (`keras.remat`: `jax.checkpoint`, `tf.recompute_grad`).
    The weights' values are arguments too, read through a `keras.StatelessScope`: TensorFlow's
    recomputation inside a loop cannot capture the variables themselves. Inside the loop of
    blocks the recomputation is the backward loop's, so XLA cannot merge it with the forward
    pass's (it did when the blocks were unrolled, on a CPU)."""
    variables = layer.trainable_variables

    def pure(*inputs):
        values = inputs[len(args) :]
        with keras.StatelessScope(state_mapping=list(zip(variables, values))):
            return compute(*inputs[: len(args)])

    return keras_compat.remat(pure)(*args, *(v.value for v in variables))


@dataclass(frozen=True)
class _CallFacts:
    """What every block of a call reads: the call's facts and masks, the padded rows `(b, 1, q,
    1)` of self-attention (None: none), the convolutions' causality, `AttentionContext.future_open`,
    the query length, the halo rows before a block, the block size, the call's forms and the seed
    of the call's attention dropout (None: no dropout)."""

    call: AttentionCall
    pads: Any
    causal: bool
    future_open: Any
    query_len: int
    before: int
    block: int
    forms: AttentionForms
    dropout_seed: Any = None


def _block(layer, query, key, value, positions, facts: _CallFacts, outside: bool):
    """A block's output rows `(b, block, h, d_v)` from its slab's queries at `positions` (the
    halo's included; those past the sequence's ends attend nothing: the zero rows of the
    convolution's padding, as in the whole matrix)."""
    rows = ops.clip(positions, 0, facts.query_len - 1)
    inside = ops.logical_and(ops.greater_equal(positions, 0), ops.less(positions, facts.query_len)) if outside else None
    slab = _rows(facts, rows, ops.shape(key)[1], inside)
    keep, pads = slab.keep, _pads(layer, facts, slab)
    context = AttentionContext(
        query, keep, facts.causal, facts.future_open, pads=pads, positions=rows, rematerialized=True, forms=facts.forms
    )
    _, attention = layer.attention_maps(query, key, context)
    own = slice(facts.before, facts.before + facts.block)
    attention = attention[:, :, own, :]
    dropped = ops.cast(attention, layer.compute_dtype)
    if facts.dropout_seed is not None:
        dropped = position_dropout(dropped, layer.dropout, facts.dropout_seed, rows[own])
    output = ops.einsum(keras_compat.combine_equation(layer), dropped, value)
    own_context = replace(context, query=query[:, own], positions=rows[own])
    return layer.value_terms(output, dropped, own_context)


def _rows(facts: _CallFacts, positions, key_len, inside=None) -> QueryRows:
    """The query rows at `positions` (within the sequence), with the call's masks on them; the
    rows not `inside` (boolean `(rows,)`; None: all are) keep no key and are no pad."""
    call = facts.call
    return QueryRows(positions, key_len, call.blocks.on(positions, key_len), call.causal, inside)


def _pads(layer, facts: _CallFacts, rows: QueryRows):
    """The padded rows among `rows` (`QueryRows.pads`, as a whole call's): none without a mask."""
    if not facts.call.masked:
        return None
    key_pads = None if facts.pads is None else ops.take(facts.pads, rows.positions, axis=2)
    return rows.pads(key_pads, keras_fused=layer.dropout == 0)  # no attention returned


def _block_rows(facts: _CallFacts, key_len) -> list[QueryRows]:
    """The rows of each block of queries, without their halo (what a whole call reduces over)."""
    starts = block_starts(facts.query_len, facts.block)
    return [_rows(facts, ops.arange(s, min(s + facts.block, facts.query_len), dtype="int32"), key_len) for s in starts]


def _padded_keys(facts: _CallFacts, key_len):
    """Self-attention's padded queries `(b, 1, q, 1)` (`padded_key_rows`: a key no query attends),
    reduced block by block; None in cross-attention."""
    if not facts.call.self_attention:
        return None
    seen = None
    for rows in _block_rows(facts, key_len):
        if rows.keep is None:
            return None
        rows_seen = ops.any(rows.keep, axis=(1, 2))  # (b or 1, k)
        seen = rows_seen if seen is None else ops.logical_or(seen, rows_seen)
    return ops.logical_not(seen)[:, None, :, None]


def _future_open(layer, facts: _CallFacts, key_len):
    """`AttentionContext.future_open` of a non-causal call: 1 for the batch entries whose real
    rows attend a later key, reduced block by block; None without a mask."""
    sees_later = None
    for rows in _block_rows(facts, key_len):
        if rows.keep is None:
            return None
        block_sees = rows.sees_later(_pads(layer, facts, rows))
        sees_later = block_sees if sees_later is None else ops.logical_or(sees_later, block_sees)
    return ops.cast(sees_later, "float32")


def _dropout_seed(layer, training):
    """The seed of a training call's attention dropout (int32 `()`, drawn from the dropout
    layer's seed generator outside the loop of blocks); None without dropout."""
    if not training or layer.dropout == 0:
        return None
    return keras.random.randint((), 0, 2**31 - 1, dtype="int32", seed=keras_compat.dropout_layer(layer).seed_generator)


def position_dropout(weights, rate: float, seed, query_positions):
    """Dropout of the attention `weights` `(b, h, rows, keys)` whose keep mask is a hash of the
    call's `seed` and each entry's batch index, head, query position (`query_positions` `(rows,)`)
    and key: the same entries drop however the queries are split into blocks, and the backward
    pass's recomputation of a block drops them again (a seed generator would draw anew)."""
    shape = ops.shape(weights)
    rows = _mix(ops.bitwise_xor(_mix(ops.cast(query_positions, "uint32")), ops.cast(seed, "uint32")))
    keys = _mix(ops.cast(ops.arange(shape[-1], dtype="int32"), "uint32") + _u32(0x9E3779B9))
    pairs = _mix(ops.bitwise_xor(rows[:, None], keys[None, :]))  # (rows, keys)
    entries = ops.reshape(
        ops.cast(ops.arange(shape[0] * shape[1], dtype="int32"), "uint32"), (shape[0], shape[1], 1, 1)
    )
    bits = _mix(ops.bitwise_xor(pairs[None, None], _mix(entries + _u32(0x632BE5AB))))
    keep = ops.greater_equal(ops.right_shift(bits, _u32(8)), _u32(round(rate * 2**24)))  # P = 1 - rate
    return ops.where(keep, weights / ops.cast(1.0 - rate, weights.dtype), ops.zeros_like(weights))


def _mix(x):
    """A 32-bit integer hash (Wellons' lowbias32): each output bit depends on every input bit.
    Shifts by uint32 tensors: Keras < 3.9 promotes a uint32 shifted by a Python int to int64."""
    x = ops.bitwise_xor(x, ops.right_shift(x, _u32(16)))
    x = ops.multiply(x, _u32(0x7FEB352D))
    x = ops.bitwise_xor(x, ops.right_shift(x, _u32(15)))
    x = ops.multiply(x, _u32(0x846CA68B))
    return ops.bitwise_xor(x, ops.right_shift(x, _u32(16)))


def _u32(value: int):
    """A uint32 constant (a Python int past 2**31 is no int32: JAX refuses it)."""
    return ops.convert_to_tensor(np.uint32(value))
