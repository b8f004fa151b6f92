"""Private helpers shared by the layers of `convatt.layers`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import keras

from convatt.layers.forms import lengths_known_when_traced


def _fans(shape: Sequence[int]) -> tuple[int, int]:
    """Fan-in and fan-out of a weight shape, the way Keras initializers count them."""
    shape = tuple(int(s) for s in shape)
    if len(shape) == 0:
        return 1, 1
    if len(shape) == 1:
        return shape[0], shape[0]
    if len(shape) == 2:
        return shape[0], shape[1]
    receptive = math.prod(shape[:-2])
    return shape[-2] * receptive, shape[-1] * receptive


def per_head_initializer(
    initializer: Any,
    shape: Sequence[int],
    per_head_shape: Sequence[int],
    seed_offset: int = 0,
) -> keras.initializers.Initializer:
    """Initializer for a stacked weight that draws it as separate per-head weights.

    The layers store the weights of all heads in one variable of `shape`, but the
    paper's model has one variable per head of `per_head_shape`. A variance-scaling
    initializer (glorot, he, lecun, ...) would see larger fans on the stacked shape;
    this rescales it so every entry has the variance it would have in its own
    per-head variable. Other initializers are copied unchanged.

    The result is always a new object (see `distinct_initializer`), so weights
    built from one initializer never start out equal.
    """
    init = keras.initializers.get(initializer)
    explicit_axes = getattr(init, "input_axes", None) is not None or getattr(init, "output_axes", None) is not None
    if not isinstance(init, keras.initializers.VarianceScaling) or explicit_axes:
        return distinct_initializer(init, seed_offset)  # nothing to rescale, or the user chose the fan axes
    full_in, full_out = _fans(shape)
    head_in, head_out = _fans(per_head_shape)
    if init.mode == "fan_in":
        ratio = max(1.0, full_in) / max(1.0, head_in)
    elif init.mode == "fan_out":
        ratio = max(1.0, full_out) / max(1.0, head_out)
    else:
        ratio = max(1.0, (full_in + full_out) / 2) / max(1.0, (head_in + head_out) / 2)
    seed = init.get_config().get("seed")
    if isinstance(seed, int):
        seed += seed_offset
    return keras.initializers.VarianceScaling(
        scale=init.scale * ratio, mode=init.mode, distribution=init.distribution, seed=seed
    )


def distinct_initializer(initializer: Any, seed_offset: int = 0) -> keras.initializers.Initializer:
    """A new initializer of the same kind, so that several weights drawn with it differ.

    A Keras 3 random initializer returns the same values at every call, so one
    object shared by W_q, W_k and W_v would start them equal. The copy gets the
    integer seed plus `seed_offset` (still reproducible), or, when unseeded, a
    fresh seed of its own.
    """
    init = keras.initializers.get(initializer)
    config = init.get_config()
    if isinstance(config.get("seed"), int):
        config["seed"] += seed_offset
    return type(init).from_config(config)


def check_scores_shape(
    layer: str, shape: Sequence[int | None], num_heads: int | None = None, max_len: int | None = None
) -> None:
    """Validate the static part of an attention-scores shape `(b, heads, q, k)`."""
    shape = tuple(shape)
    if len(shape) != 4:
        raise ValueError(
            f"{layer} expects attention scores of shape (batch, num_heads, query_len, key_len); received shape {shape}."
        )
    if num_heads is not None and shape[1] is not None and shape[1] != num_heads:
        raise ValueError(f"{layer} was built for num_heads={num_heads}; received scores of shape {shape}.")
    for name, size in (("query_len", shape[2]), ("key_len", shape[3])):
        check_length(
            size,
            max_len,
            f"{layer} was built for max_len={max_len}; received {name}={{length}} (scores shape {shape}).",
        )


def check_length(length: int | None, max_len: int | None, message: str) -> None:
    """The one `max_len` check: a ValueError with `message` (`{length}` filled in) where a known
    `length` exceeds a `max_len` (None: any length)."""
    if max_len is not None and length is not None and length > max_len:
        raise ValueError(message.replace("{length}", str(length)))


def large_negative(dtype: str) -> float:
    """A finite score that vanishes under softmax in `dtype` (no inf, so no NaN rows)."""
    return -3e4 if keras.backend.standardize_dtype(dtype) == "float16" else -1e9


def combine_attention_masks(mask, attention_mask):
    """A Keras mask `(b, t)` (queries and keys) and an `attention_mask` `(b, t)` (keys)
    or `(b, t, t)` (query-key pairs) as one boolean `(b, 1, q, k)` tensor, or None."""
    combined = None
    if mask is not None:
        mask = keras.ops.cast(mask, "bool")
        combined = keras.ops.logical_and(mask[:, None, :, None], mask[:, None, None, :])
    if attention_mask is not None:
        attention_mask = keras.ops.cast(attention_mask, "bool")
        rank = len(attention_mask.shape)
        if rank not in (2, 3):
            raise ValueError(
                f"attention_mask must have shape (batch, t) or (batch, t, t); received {attention_mask.shape}."
            )
        attention_mask = attention_mask[:, None, None, :] if rank == 2 else attention_mask[:, None, :, :]
        combined = attention_mask if combined is None else keras.ops.logical_and(combined, attention_mask)
    return combined


def softmax_float32(scores, axis: int = -1):
    """Softmax computed in float32 (stable under float16/bfloat16 policies), cast back."""
    return keras.ops.cast(keras.ops.softmax(keras.ops.cast(scores, "float32"), axis=axis), scores.dtype)


def masked_softmax(scores, keep=None, pads=None):
    """The softmax over the last axis of the pairs `keep` allows (boolean, broadcast to
    `scores`; None: every pair), in float32, returned in `scores`' dtype: masked scores get
    a large negative number (finite: no NaN rows) and masked weights are 0 after it, so a
    fully masked row is 0; except the rows `pads` (boolean `(b, 1 or h, q, 1)`, padded
    queries), kept whole: a fully masked one is uniform, as in Keras' fused attention."""
    if keep is None:
        return softmax_float32(scores)
    scores = keras.ops.where(keep, scores, keras.ops.cast(large_negative(scores.dtype), scores.dtype))
    weights = softmax_float32(scores)
    return weights * keras.ops.cast(keep_rows(keep, pads), weights.dtype)


def keep_rows(keep, pads=None):
    """`keep` or-ed with the padded query rows `pads` (their whole rows kept; None: none)."""
    return keep if pads is None else keras.ops.logical_or(keep, pads)


def upstream_gradient(args: tuple, upstream=None):
    """The output's gradient inside a `keras.ops.custom_gradient` gradient function declared
    `grad(*args, upstream=None)`: positional on some backends, the `upstream` keyword on
    others (Keras' documented signature)."""
    return args[0] if upstream is None else upstream


SUM_CHUNK = 32
"""`chunk_sums`' chunk: XLA's CPU compiler splits a longer sum into windows of 32 first (a
`reduce-window`), which takes no fused product in: it then writes the product out whole."""


def chunk_sums(x, chunked: bool):
    """The sums of `x`'s last axis in chunks of `SUM_CHUNK` (zeros padded to a whole chunk):
    `(..., n)` -> `(..., ceil(n / SUM_CHUNK))`; `(..., 1)`, the whole sum, where the axis is
    not longer than a chunk, its length unknown when traced, or not `chunked`
    (`AttentionForms.chunked_sums`: without XLA each op runs alone). XLA fuses a product into
    these sums, where a sum of the whole axis had it write the product out and read it back (on
    a CPU); sum several products' chunk sums together (stacked) so that XLA keeps them apart:
    merged into one long sum again, each ran slower."""
    length = x.shape[-1]
    if length is None or length <= SUM_CHUNK or not chunked:
        return keras.ops.sum(x, axis=-1, keepdims=True)
    lead = keras.ops.shape(x)[:-1]
    pad = -length % SUM_CHUNK
    if pad:
        x = keras.ops.pad(x, [[0, 0]] * (len(x.shape) - 1) + [[0, pad]])
    chunks = (length + pad) // SUM_CHUNK
    return keras.ops.reshape(keras.ops.sum(keras.ops.reshape(x, (-1, chunks, SUM_CHUNK)), axis=-1), (*lead, chunks))


def depends_on_gradient(x, upstream, anchored: bool):
    """`x`, where `anchored` (`AttentionForms.anchored`: JAX) as `x + 0 * upstream[0, 0, 0, 0]`
    (equal for a finite gradient): what a backward pass computes from it then waits for the
    gradient, so XLA makes it there instead of keeping it from the forward pass
    (common-subexpression elimination would merge the two; XLA drops optimisation barriers
    before fusing on a CPU). Else `x` itself (TensorFlow runs each op as written)."""
    if not anchored:
        return x
    return x + 0.0 * upstream[:1, :1, :1, :1]


def causal_keep(query_positions, key_len):
    """The one causal mask: boolean `(rows, key_len)`, True where key `j <=` the row's query
    position (Keras' causal mask for the positions `0 .. q - 1`); a row at a position < 0
    (before the sequence: a convolution's padding in cached decoding) keeps no key."""
    positions = keras.ops.expand_dims(query_positions, 1)
    keys = keras.ops.expand_dims(keras.ops.arange(key_len, dtype=positions.dtype), 0)
    return keras.ops.logical_and(keras.ops.less_equal(keys, positions), keras.ops.greater_equal(positions, 0))


def lower_triangular_keep(query_len, key_len):
    """Boolean `(1, 1, q, k)`: True where key `j <=` query `i` (`causal_keep` of `0 .. q - 1`)."""
    return causal_keep(keras.ops.arange(query_len), key_len)[None, None]


def query_tap_offsets(kernel_size: int, causal: bool) -> list[int]:
    """The row offsets `d` (tap reads row `i + d`) of a convolution's query taps, in
    kernel order: centred as Keras' 'same' padding (the extra tap of an even width
    after), or all on past rows `-(k - 1) .. 0` when `causal`."""
    first = -(kernel_size - 1) if causal else -((kernel_size - 1) // 2)
    return [first + tap for tap in range(kernel_size)]


def batched_attention_mask(layer: str, attention_mask, query_len, key_len):
    """`attention_mask` with a batch axis, as Keras' `MultiHeadAttention` takes it: rank 3
    `(batch, query, key)` and rank 4 `(batch, heads, query, key)` as they are, rank 2
    `(query, key)` broadcast over the batch (as `(1, query, key)`). A ValueError that says what
    to pass for any other rank, or for a rank-2 mask that is not `(query_len, key_len)` (a
    `(batch, key_len)` padding mask belongs in value_mask=)."""
    if attention_mask is None or len(attention_mask.shape) in (3, 4):
        return attention_mask
    expected = (query_len, key_len)
    known = all(isinstance(n, int) for n in (*expected, *attention_mask.shape))
    if len(attention_mask.shape) == 2 and (not known or tuple(attention_mask.shape) == expected):
        return keras.ops.expand_dims(attention_mask, 0)
    raise ValueError(
        f"{layer}: attention_mask must be (query_len, key_len) = {expected}, (batch, query_len, key_len) or "
        f"(batch, num_heads, query_len, key_len), as for keras.layers.MultiHeadAttention; received shape "
        f"{tuple(attention_mask.shape)}. For a key mask (batch, key_len) pass value_mask=..., or "
        "attention_mask=mask[:, None, :]."
    )


def with_query_mask(attention_mask, query_mask):
    """`attention_mask` (None, rank 3 or 4) and-ed with a query mask `(batch, query_len)` on its rows."""
    rows = keras.ops.cast(query_mask, "bool")[:, :, None]
    if attention_mask is None:
        return rows
    attention_mask = keras.ops.cast(attention_mask, "bool")
    if len(attention_mask.shape) == 4:
        rows = rows[:, None]
    return keras.ops.logical_and(attention_mask, rows)


def keep_mask(attention_mask):
    """A rank-3 `(b, q, k)` or rank-4 `(b, h, q, k)` attention mask as boolean rank 4 (`(b, 1, q, k)`)."""
    keep = keras.ops.cast(attention_mask, "bool")
    return keep if len(keep.shape) == 4 else keras.ops.expand_dims(keep, 1)


def padded_key_rows(mask):
    """Self-attention's padded queries from its mask `(b, q, k)` or `(b, h, q, k)` (q = k, the
    same positions): a key masked for every query (in every head) is padding, and so is that
    position's query. Boolean `(b, 1, q, 1)`."""
    mask = keras.ops.cast(mask, "bool")
    over_queries = (1,) if len(mask.shape) == 3 else (1, 2)
    keys_real = keras.ops.any(mask, axis=over_queries)  # (b, k)
    return keras.ops.logical_not(keys_real)[:, None, :, None]


def fully_masked_rows(keep):
    """The rows of `keep` `(b, 1 or h, q, k)` with no key to attend: `(b, 1 or h, q, 1)`."""
    return keras.ops.logical_not(keras.ops.any(keep, axis=-1, keepdims=True))


def require_length(x, axis: int, max_len: int, message: str):
    """`x`, checked to be at most `max_len` long along `axis`: a ValueError with `message` where
    the length is known when tracing (eager, JAX, a static shape); else (TensorFlow graphs
    of unknown length) a run-time check, and under XLA, which drops assertions, a
    compile-time error in an op named for `max_len` (no position table is read past it)."""
    length = x.shape[axis]
    if length is not None:
        check_length(length, max_len, message)
        return x
    if lengths_known_when_traced():  # JAX and PyTorch trace static shapes
        return x
    return _tensorflow_length_check(x, axis, max_len, message)


def _tensorflow_length_check(x, axis: int, max_len: int, message: str):
    import tensorflow as tf  # the only backend whose graphs have lengths unknown when traced

    length = tf.shape(x)[axis]
    check = tf.debugging.assert_less_equal(length, max_len, message=message.replace("{length}", "x, below"))
    with tf.control_dependencies([check]), tf.name_scope(f"input_longer_than_max_len_{max_len}"):
        room = tf.zeros(tf.stack([max_len - length]), x.dtype)  # a negative size: XLA refuses to compile
    return x + tf.reduce_sum(room)


def serialized(layer: keras.layers.Layer, *names: str) -> dict[str, Any]:
    """`get_config` entries for a layer's activation and initializers, as Keras serializes them."""
    module = {"activation": keras.activations}
    return {name: module.get(name, keras.initializers).serialize(getattr(layer, name)) for name in names}
