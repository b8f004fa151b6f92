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

Cross-attention (a decoder's queries, an encoder's keys): the cache is KerasHub's
`(batch, 2, encoder_length, num_heads, key_dim)` (`empty_cache(..., cross=True)`), written at
`cache_update_index` (0: the encoder's keys and values) or reused as it is (None). Its axis is
the encoder's, so the queries' positions come from `query_position`, the decoder position of
the first new query: the rows' positions are `query_position + t` and the keys'
`0 .. encoder_length - 1`, as in the whole-sequence cross-attention (a modification with
`max_len` takes no decoder position past it). With a convolution the earlier decoder queries
live in a `query_cache` `(batch, max_length, num_heads, key_dim)` on the decoder's axis
(`empty_query_cache`), written at `query_position` and returned updated after the cache.
KerasHub's decoder keeps it as one more slot of its self-attention cache, the cache every
step threads through (KerasHub's seq2seq models drop the cross-attention cache a step
returns). The earlier rows attend the keys the first new row attends (the cross-attention's
mask is assumed the same for every query row, as KerasHub's decoder makes it: the encoder's
padding); rows before decoder position 0 are the convolution's zero padding.

A cached call computes what the whole-sequence causal call computes at the same positions
(`use_causal_mask=True`, or KerasHub's causal mask with `conv_causal=True`; in cross-attention,
`conv_causal=True`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from keras import ops

from convatt.layers import _keras_compat as keras_compat
from convatt.layers._utils import keep_mask
from convatt.layers.core.modifications import MODIFICATIONS
from convatt.layers.core.modified_attention import ModifiedAttention
from convatt.layers.core.rows import AttentionContext, CallMasks, QueryRows, slab_positions

KEYS, VALUES, QUERIES = 0, 1, 2


def cache_slots(layer, cross: bool = False) -> int:
    """2 (keys, values), or 3 (and queries) where a modification reads other queries' rows
    (`ModifiedAttention.reads_other_rows`: the convolutions) in self-attention (a
    cross-attention keeps its queries in a `query_cache`)."""
    return 3 if modified(layer) and layer.reads_other_rows() and not cross else 2


def query_taps(layer) -> int:
    """How many query rows (this one and earlier ones) one output row reads
    (`ModifiedAttention.query_taps`: the table's rows say); 1 for a layer without modifications."""
    return layer.query_taps() if modified(layer) else 1


def needs_query_position(layer) -> list[str]:
    """The options of `layer` that read the query position (a cross-attention cache needs
    `query_position` for them): those whose terms depend on it and those that read other rows."""
    if not modified(layer):
        return []
    readers = [row.flag for row in MODIFICATIONS if row.query_taps is not None and row.is_on(layer)]
    return layer.positional_options() + [flag for flag in readers if flag not in layer.positional_options()]


def modified(layer) -> bool:
    """Whether `layer` runs the modification table (a convatt attention layer, not Keras' own)."""
    return isinstance(layer, ModifiedAttention)


def cache_shape(layer, batch_size: int, max_length: int, cross: bool = False) -> tuple[int, ...]:
    """The shape of the cache `layer` takes for sequences of up to `max_length` tokens (with
    `cross`: a cross-attention's, for encoder sequences of `max_length`)."""
    return (batch_size, cache_slots(layer, cross), max_length, layer.num_heads, layer.key_dim)


def empty_cache(layer, batch_size: int, max_length: int, dtype=None, cross: bool = False):
    """A zero cache for `layer` (the caller owns it; each cached call returns it updated)."""
    return ops.zeros(cache_shape(layer, batch_size, max_length, cross), dtype=dtype or layer.compute_dtype)


def query_cache_shape(layer, batch_size: int, max_length: int) -> tuple[int, ...]:
    """The shape of a cross-attention's `query_cache` for decoder sequences of `max_length`."""
    return (batch_size, max_length, layer.num_heads, layer.key_dim)


def empty_query_cache(layer, batch_size: int, max_length: int, dtype=None):
    """A zero `query_cache` (a cross-attention with a convolution: its queries by decoder position)."""
    return ops.zeros(query_cache_shape(layer, batch_size, max_length), dtype=dtype or layer.compute_dtype)


def _check(layer, cache, cache_update_index, query_position, query_cache) -> None:
    if cache is None:
        given = {"cache_update_index": cache_update_index, "query_position": query_position, "query_cache": query_cache}
        names = " and ".join(f"`{name}`" for name, value in given.items() if value is not None)
        raise ValueError(
            f"{layer.name}: {names} needs a `cache`; received cache=None, "
            f"cache_update_index={cache_update_index}, query_position={query_position}."
        )
    if layer.value_dim != layer.key_dim:
        raise ValueError(
            f"{layer.name}: a cache needs value_dim == key_dim (as KerasHub's); "
            f"received value_dim={layer.value_dim}, key_dim={layer.key_dim}."
        )
    cross = query_position is not None
    slots = cache_slots(layer, cross)
    if len(cache.shape) != 5 or cache.shape[1] != slots:
        length = "encoder_length" if cross else "max_length"
        raise ValueError(
            f"{layer.name}: the {'cross-attention ' if cross else ''}cache must be (batch, {slots}, {length}, "
            f"num_heads, key_dim) ({'keys, values, queries' if slots == 3 else 'keys, values'}); received shape "
            f"{tuple(cache.shape)}. Make it with convatt.layers.core.attention_cache.empty_cache(layer, batch_size, "
            f"{length}{', cross=True' if cross else ''})."
        )
    if cross:
        _check_query_cache(layer, query_cache)
    elif query_cache is not None:
        raise ValueError(f"{layer.name}: `query_cache` is for a cross-attention cache (with `query_position`).")
    elif cache_update_index is None and (slots == 3 or _positional(layer)):
        raise ValueError(
            f"{layer.name}: a cache without `cache_update_index` (a cross-attention's reused keys) gives no "
            f"query position, which {', '.join(_positional(layer)) or 'attention_conv'} needs: pass "
            "`query_position` (the decoder position of the first query)."
        )


def _positional(layer) -> list[str]:
    """The options on in `layer` whose terms depend on the query's position (`Modification.reads_positions`)."""
    return layer.positional_options() if modified(layer) else []


def _check_query_cache(layer, query_cache) -> None:
    """A cross-attention with a convolution needs the earlier decoder queries (`query_cache`)."""
    expected = f"(batch, max_length, {layer.num_heads}, {layer.key_dim})"
    if not layer.reads_other_rows():
        if query_cache is not None:
            raise ValueError(f"{layer.name}: `query_cache` keeps a convolution's earlier queries; this layer has none.")
        return
    if query_cache is None:
        raise ValueError(
            f"{layer.name}: a cross-attention cache with attention_conv needs `query_cache` {expected}: its "
            "queries at the decoder positions (empty_query_cache(layer, batch_size, max_length))."
        )
    if len(query_cache.shape) != 4 or tuple(query_cache.shape[2:]) != (layer.num_heads, layer.key_dim):
        raise ValueError(f"{layer.name}: `query_cache` must be {expected}; received shape {tuple(query_cache.shape)}.")
    if not layer.conv_causal:  # centred taps read later decoder queries, which a step does not have
        raise ValueError(
            f"{layer.name}: a cached cross-attention's convolution reads earlier decoder queries only; "
            "build the layer with conv_causal=True (as KerasHub's TransformerDecoder does)."
        )


def _known_int(x) -> int | None:
    """`x` as a Python int where its value is known now (an int, an eager tensor or a concrete
    array); None where it is traced (a TensorFlow graph's or a JAX program's input)."""
    if x is None or isinstance(x, int):
        return x
    try:
        return int(ops.convert_to_numpy(x))
    except Exception:  # a symbolic tensor or a tracer: its value is not known until it runs
        return None


def _within(layer, what: str, index, new_rows, length):
    """None where `index .. index + new_rows - 1` is known to lie in `0 .. length - 1` (a
    ValueError naming both where it is known not to); a boolean scalar tensor where the index is
    traced (the caller turns the output into NaN where it is False: a traced program cannot raise)."""
    if index is None:
        return None
    known = _known_int(index)
    if known is None or not isinstance(new_rows, int) or not isinstance(length, int):
        end = ops.cast(index, "int32") + ops.cast(new_rows, "int32")
        return ops.logical_and(ops.greater_equal(index, 0), ops.less_equal(end, ops.cast(length, "int32")))
    if known < 0 or known + new_rows > length:
        raise ValueError(
            f"{layer.name}: {what}={known} with {new_rows} new token(s) is past the end of the cache, which "
            f"holds {length} positions (0 .. {length - 1}): make a longer one, e.g. "
            f"layer.empty_cache(batch_size, max_length={known + new_rows})."
        )
    return None


def _bounds(layer, query, cache, cache_update_index, query_position, query_cache):
    """Where a traced index may lie past a cache's end: a boolean scalar (None: checked now)."""
    length = lambda x, axis: x.shape[axis] if x.shape[axis] is not None else ops.shape(x)[axis]
    new_rows = query.shape[1]
    flags = [_within(layer, "cache_update_index", cache_update_index, new_rows, length(cache, 2))]
    if query_cache is not None:
        flags.append(_within(layer, "query_position", query_position, new_rows, length(query_cache, 1)))
    flags = [flag for flag in flags if flag is not None]
    return None if not flags else flags[0] if len(flags) == 1 else ops.logical_and(*flags)


def _updated(cache, index, projections):
    """The cache with `projections` (keys, values[, queries]: one per slot) written at `index`."""
    slots = []
    for slot, update in enumerate(projections):
        old = cache[:, slot, ...]
        slots.append(ops.slice_update(old, [0, index, 0, 0], ops.cast(update, old.dtype)))
    return ops.stack(slots, axis=1)


@dataclass(frozen=True)
class _Rows:
    """Where the query rows of one cached call are.

    Attributes:
        start: the position of the first new query (int or int tensor).
        history: `(b, max_length, h, d)`: the projected queries by position, which a
            convolution reads its earlier rows from; None without a convolution.
        cross: the keys are not the queries' sequence (a cross-attention cache): the
            earlier rows attend the keys the first new row attends, not causally cut.
    """

    start: Any
    history: Any = None
    cross: bool = False


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
    query_position=None,
    query_cache=None,
):
    """`layer`'s output for the new tokens `query`, and the updated cache (module docstring).

    Returns `(output, cache)` or `(output, attention, cache)` (KerasHub's order), and the
    updated `query_cache` last where one was given."""
    _check(layer, cache, cache_update_index, query_position, query_cache)
    in_bounds = _bounds(layer, query, cache, cache_update_index, query_position, query_cache)
    query_proj = layer.query_dense(query)
    cache, query_cache = _written(
        layer, query_proj, value if key is None else key, value, cache, cache_update_index, query_position, query_cache
    )
    rows = _rows(layer, cache, cache_update_index, query_position, query_cache, in_bounds)
    if layer.modified:
        _check_query_positions(layer, rows, ops.shape(query_proj)[1])
        masks = CallMasks(attention_mask=attention_mask, first=rows.start, cross=rows.cross)
        output, attention = _modified_attention(layer, query_proj, cache, rows, masks, use_causal_mask, training)
    else:  # Keras' attention on the mask given here (never its fused causal kernel: the cache is longer)
        mask = _keras_mask(query_proj, cache, rows.start, attention_mask, use_causal_mask)
        output, attention = layer._compute_attention(
            query_proj, cache[:, KEYS, ...], cache[:, VALUES, ...], mask, training, return_attention_scores
        )
    output = layer.output_dense(output)
    if in_bounds is not None:  # a traced index past the end: NaN, not the last slot overwritten in silence
        output = ops.where(in_bounds, output, ops.cast(float("nan"), output.dtype))
    result = (output, attention, cache) if return_attention_scores else (output, cache)
    return result if query_cache is None else (*result, query_cache)


def _written(layer, query_proj, key, value, cache, cache_update_index, query_position, query_cache):
    """`(cache, query_cache)` with this call's projections written at their indices."""
    if cache_update_index is not None:  # None: reuse the cache as it is (KerasHub's cross-attention)
        slots = cache_slots(layer, query_position is not None)
        new = [layer.key_dense(key), layer.value_dense(value)] + [query_proj][: slots - 2]
        cache = _updated(cache, cache_update_index, new)
    if query_cache is not None:
        query_cache = ops.slice_update(query_cache, [0, query_position, 0, 0], ops.cast(query_proj, query_cache.dtype))
    return cache, query_cache


def _rows(layer, cache, cache_update_index, query_position, query_cache, in_bounds=None) -> _Rows:
    """The new rows' place; where a traced index may lie past the end (`in_bounds`), at 0 there
    instead, so that no table is read past its end (a raw gather error): the output is NaN then."""
    if query_position is not None:
        rows = _Rows(query_position, query_cache, cross=True)
    else:
        start = 0 if cache_update_index is None else cache_update_index
        rows = _Rows(start, cache[:, QUERIES, ...] if cache_slots(layer) == 3 else None)
    return rows if in_bounds is None else dataclasses.replace(rows, start=ops.where(in_bounds, rows.start, 0))


def _check_query_positions(layer, rows: _Rows, new_rows) -> None:
    """A cross-attention's query positions are not bounded by its keys: at most `max_len`, where
    known when tracing (a Python int position, or the query cache's length)."""
    if not rows.cross:
        return  # the keys' length (checked in `_attention_rows`) bounds the positions
    if isinstance(rows.start, int) and isinstance(new_rows, int):
        layer.check_lengths(rows.start + new_rows, None)
    elif rows.history is not None:
        layer.check_lengths(rows.history.shape[1], None)


def _keras_mask(query_proj, cache, start, attention_mask, use_causal_mask):
    """The new rows' mask for Keras' `_compute_attention`: their `QueryRows.keep` as Keras takes
    it, `(b, t, key_len)` (a per-head mask: `(b, h, t, key_len)`), or None."""
    positions = slab_positions(start, ops.shape(query_proj)[1], 0)
    given = None if attention_mask is None else keep_mask(attention_mask)
    keep = QueryRows(positions, ops.shape(cache)[2], given, bool(use_causal_mask)).keep
    per_head = attention_mask is not None and len(attention_mask.shape) == 4
    return keep if keep is None or per_head else keep[:, 0]


def _earlier_rows(layer, start) -> int:
    """How many earlier queries' rows a step recomputes (fewer at a known start near 0)."""
    earlier = query_taps(layer) - 1
    return min(earlier, start) if isinstance(start, int) else earlier


def _modified_attention(layer, query_proj, cache, rows: _Rows, masks: CallMasks, use_causal_mask, training):
    """The modified attention of the new rows: `(output (b, t, h, d), attention (b, h, t, k))`,
    the table's computation (`ModifiedAttention`) for query rows at their positions: the new
    rows and the earlier ones the convolution reads (which attend as `masks`' first row says:
    `CallMasks.first`)."""
    earlier = _earlier_rows(layer, rows.start)
    positions = slab_positions(rows.start, ops.shape(query_proj)[1], earlier)
    queries = query_proj
    if earlier:  # the earlier queries' rows (positions < 0: zero rows, the convolution's padding)
        past = ops.take(rows.history, ops.maximum(positions[:earlier], 0), axis=1)
        queries = ops.concatenate([ops.cast(past, query_proj.dtype), query_proj], axis=1)
    queries, keys, values = layer.projected(queries, cache[:, KEYS, ...], cache[:, VALUES, ...])
    key_len = ops.shape(keys)[1]
    step = QueryRows(positions, key_len, masks.on(positions, key_len), bool(use_causal_mask))
    context = AttentionContext(queries, step.keep, causal=True, positions=positions, forms=layer.attention_forms())
    attention = layer.attention_maps(queries, keys, context)[1][:, :, earlier:, :]
    dropped = keras_compat.dropout_layer(layer)(ops.cast(attention, layer.compute_dtype), training=training)
    output = ops.einsum(keras_compat.combine_equation(layer), dropped, values)
    new = dataclasses.replace(context, query=query_proj, positions=positions[earlier:])
    return layer.value_terms(output, dropped, new), ops.cast(attention, layer.compute_dtype)
