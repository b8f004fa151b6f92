"""Cached decoding for `MultiHeadAttention`: one token at a time, every causal modification.

The cache follows KerasHub's convention (`keras_hub.layers.CachedMultiHeadAttention`): one
float tensor the caller creates (zeros) and the layer returns updated at
`cache_update_index`, shaped

    (batch, slots, max_length, num_heads, key_dim)

slot 0 the keys, slot 1 the values (KerasHub's two), and with a convolution (`attention_conv`)
slot 2 the queries. The convolutions mix the attention rows of the last `query_taps` queries
(before the softmax: their scores); a key/value cache does not keep these rows, but the
queries they come from are enough: a step recomputes the rows of the `query_taps - 1` earlier
queries beside its own (`query_taps` rows of the keys so far: linear in the length, as Multi-
Token Attention's own generator does). Every other modification acts on each query's own row
and only needs its position: `cache_update_index + t` for the `t`-th new query. Temperature
scales the cached projections at use, so the cache holds the plain projections.

A cached call computes what the whole-sequence causal call computes at the same positions
(`use_causal_mask=True`, or KerasHub's causal mask with `conv_causal=True`).
"""

from __future__ import annotations

import math

from keras import ops

from convatt.layers._score_bias import query_key_offsets
from convatt.layers._utils import causal_keep
from convatt.layers.attention_conv2d import kernel_pair
from convatt.layers.modifications import AttentionContext

KEYS, VALUES, QUERIES = 0, 1, 2
POSITIONAL = ("position_interaction", "relative_bias", "relative_position_representation", "alibi")


def cache_slots(layer) -> int:
    """2 (keys, values), or 3 (and queries) when a convolution reads earlier queries' rows."""
    return 3 if getattr(layer, "attention_conv", None) else 2


def query_taps(layer) -> int:
    """How many query rows (this one and earlier ones) one output row reads: the convolution's
    taps along the queries; 1 without a convolution."""
    if not getattr(layer, "attention_conv", None):
        return 1
    if layer.attention_conv == "1d":
        return int(layer.conv_kernel_size)
    return kernel_pair(layer.conv_kernel_size)[0]


def cache_shape(layer, batch_size: int, max_length: int) -> tuple[int, ...]:
    """The shape of the cache `layer` takes for sequences of up to `max_length` tokens."""
    return (batch_size, cache_slots(layer), max_length, layer.num_heads, layer.key_dim)


def empty_cache(layer, batch_size: int, max_length: int, dtype=None):
    """A zero cache for `layer` (the caller owns it; each cached call returns it updated)."""
    return ops.zeros(cache_shape(layer, batch_size, max_length), dtype=dtype or layer.compute_dtype)


def _check(layer, cache, cache_update_index) -> None:
    if cache is None:
        raise ValueError(
            f"{layer.name}: `cache_update_index` needs a `cache`; received cache=None, "
            f"cache_update_index={cache_update_index}."
        )
    if layer._value_dim != layer._key_dim:
        raise ValueError(
            f"{layer.name}: a cache needs value_dim == key_dim (as KerasHub's); "
            f"received value_dim={layer._value_dim}, key_dim={layer._key_dim}."
        )
    slots = cache_slots(layer)
    if len(cache.shape) != 5 or cache.shape[1] != slots:
        raise ValueError(
            f"{layer.name}: the cache must be (batch, {slots}, max_length, num_heads, key_dim) "
            f"({'keys, values, queries' if slots == 3 else 'keys, values'}); received shape {tuple(cache.shape)}. "
            "Make it with convatt.layers.attention_cache.empty_cache(layer, batch_size, max_length)."
        )
    positional = [name for name in POSITIONAL if layer.modifications.get(name) is not None]
    if cache_update_index is None and (slots == 3 or positional):
        raise ValueError(
            f"{layer.name}: a cache without `cache_update_index` (a cross-attention's reused keys) "
            f"gives no query position, which {', '.join(positional) or 'attention_conv'} needs."
        )


def _updated(layer, cache, index, projections):
    """The cache with `projections` (keys, values[, queries]) written at `index`."""
    slots = []
    for slot, update in enumerate(projections):
        old = cache[:, slot, ...]
        slots.append(ops.slice_update(old, [0, index, 0, 0], ops.cast(update, old.dtype)))
    return ops.stack(slots, axis=1)


def cached_call(
    layer,
    query,
    value,
    key=None,
    cache=None,
    cache_update_index=None,
    attention_mask=None,
    use_causal_mask=False,
    return_attention_scores=False,
    training=None,
):
    """`layer`'s output for the new tokens `query` at `cache_update_index`, and the updated cache.

    Returns `(output, cache)` or `(output, attention, cache)` (KerasHub's order)."""
    _check(layer, cache, cache_update_index)
    key = value if key is None else key
    query_proj = layer._query_dense(query)
    if cache_update_index is None:  # reuse the cache as it is (KerasHub's cross-attention)
        key_proj, value_proj = cache[:, KEYS, ...], cache[:, VALUES, ...]
    else:
        new = [layer._key_dense(key), layer._value_dense(value)] + [query_proj][: cache_slots(layer) - 2]
        cache = _updated(layer, cache, cache_update_index, new)
        key_proj, value_proj = cache[:, KEYS, ...], cache[:, VALUES, ...]
    start = 0 if cache_update_index is None else cache_update_index
    mask = _new_rows_mask(query_proj, key_proj, start, attention_mask, use_causal_mask)
    if layer._modified:
        output, attention = _modified_attention(layer, query_proj, cache, start, mask, training)
    else:  # Keras' attention on the mask given here (never its fused causal kernel: the cache is longer)
        layer._causal_call = False
        output, attention = layer._compute_attention(
            query_proj, key_proj, value_proj, mask, training, return_attention_scores
        )
    output = layer._output_dense(output)
    return (output, attention, cache) if return_attention_scores else (output, cache)


def _new_rows_mask(query_proj, key_proj, start, attention_mask, use_causal_mask):
    """The new rows' mask `(b, t, key_len)` or None: the caller's, and the causal one if asked."""
    mask = None if attention_mask is None else ops.cast(attention_mask, "bool")
    if use_causal_mask:
        positions = ops.cast(start, "int32") + ops.arange(ops.shape(query_proj)[1], dtype="int32")
        causal = ops.expand_dims(causal_keep(positions, ops.shape(key_proj)[1]), 0)
        mask = causal if mask is None else ops.logical_and(mask, causal)
    return mask


def _earlier_rows(layer, start) -> int:
    """How many earlier queries' rows a step recomputes (fewer at a known start near 0)."""
    earlier = query_taps(layer) - 1
    return min(earlier, start) if isinstance(start, int) else earlier


def _modified_attention(layer, query_proj, cache, start, mask, training):
    """The modified attention of the new rows: `(output (b, t, h, d), attention (b, h, t, k))`."""
    earlier = _earlier_rows(layer, start)
    new_rows = ops.shape(query_proj)[1]
    positions = ops.cast(start, "int32") - earlier + ops.arange(earlier + new_rows, dtype="int32")
    queries = query_proj
    if earlier:  # the earlier queries' rows (positions < 0: zero rows, the convolution's padding)
        past = ops.take(cache[:, QUERIES, ...], ops.maximum(positions[:earlier], 0), axis=1)
        queries = ops.concatenate([ops.cast(past, query_proj.dtype), query_proj], axis=1)
    queries, keys, values = layer._projected(queries, cache[:, KEYS, ...], cache[:, VALUES, ...])
    keep = _rows_keep(positions, ops.shape(keys)[1], mask, earlier)
    attention = _attention_rows(layer, queries, keys, AttentionContext(queries, keep, True, None), positions)
    attention = attention[:, :, earlier:, :]
    dropped = layer._dropout_layer(ops.cast(attention, layer.compute_dtype), training=training)
    output = ops.einsum(layer._combine_equation, dropped, values)
    for row, sublayer in layer._active("values"):
        term = VALUE_TERMS[row.name](sublayer, dropped, positions[earlier:])
        output = ops.cast(ops.cast(output, "float32") + term, layer.compute_dtype)
    return output, ops.cast(attention, layer.compute_dtype)


def _rows_keep(positions, key_len, mask, earlier: int):
    """`(b or 1, 1, rows, key_len)`: the caller's mask on the new rows (None: every key), the
    causal one on the earlier rows (a convolution's: self-attention only)."""
    new_rows = ops.shape(positions)[0] - earlier
    keep = ops.ones((1, new_rows, key_len), dtype="bool") if mask is None else ops.cast(mask, "bool")
    if earlier:
        past = ops.expand_dims(causal_keep(positions[:earlier], key_len), 0)
        past = ops.broadcast_to(past, (ops.shape(keep)[0], earlier, key_len))
        keep = ops.concatenate([past, keep], axis=1)
    return ops.expand_dims(keep, 1)


def _attention_rows(layer, queries, keys, context: AttentionContext, positions):
    """`ModifiedAttention._attention_maps` for query rows at `positions` (not `0 .. t-1`)."""
    layer._check_length(None, keys.shape[1])
    scale = 1.0 / math.sqrt(layer.modification_dims[0])
    scores = ops.cast(ops.einsum("bqhd,bkhd->bhqk", queries, keys), "float32") * scale
    key_len = ops.shape(keys)[1]
    for row, sublayer in layer._active("scores"):
        scores = scores + SCORE_TERMS[row.name](sublayer, positions, key_len, queries)
    return layer._attention_after_scores(scores, context)[1]


def _offsets(positions, key_len):
    """`(rows, key_len)`: query position minus key position (positions < 0 read as 0)."""
    return query_key_offsets(ops.maximum(positions, 0), key_len)


def _position_interaction(sublayer, positions, key_len, queries):
    table = ops.cast(sublayer.interactions, "float32")[:, :, :key_len]
    return ops.take(table, ops.maximum(positions, 0), axis=1)


def _bias_by_offset(sublayer, positions, key_len, queries):
    """`RelativeBias`' and `SymmetricAlibiBias`' bias: it depends on the offset `i - j` only."""
    return sublayer.bias_for_offsets(_offsets(positions, key_len))


def _shaw_indices(sublayer, positions, key_len):
    """`clip(j - i, k) + k` for the rows at `positions`: rows of Shaw et al.'s tables."""
    distance = -_offsets(positions, key_len)
    return ops.clip(distance, -sublayer.max_distance, sublayer.max_distance) + sublayer.max_distance


def _shaw_key_term(sublayer, positions, key_len, queries):
    a_key = ops.take(ops.cast(sublayer.key_embeddings, "float32"), _shaw_indices(sublayer, positions, key_len), axis=0)
    key_term = ops.einsum("bqhd,qkd->bhqk", ops.cast(queries, "float32"), a_key)
    return key_term * (1.0 / math.sqrt(sublayer.head_dim))


def _shaw_value_term(sublayer, attention, positions):
    indices = _shaw_indices(sublayer, positions, ops.shape(attention)[-1])
    a_value = ops.take(ops.cast(sublayer.value_embeddings, "float32"), indices, axis=0)
    return ops.einsum("bhqk,qkd->bqhd", ops.cast(attention, "float32"), a_value)


SCORE_TERMS = {
    "position_interaction": _position_interaction,
    "relative_bias": _bias_by_offset,
    "relative_position_representation": _shaw_key_term,
    "alibi": _bias_by_offset,
}
"""The terms of the `scores` stage, for query rows at given positions: `(h or b h, rows, keys)`."""

VALUE_TERMS = {"relative_position_representation": _shaw_value_term}
"""The terms of the `values` stage, for query rows at given positions: `(b, rows, h, d_v)`, float32."""
