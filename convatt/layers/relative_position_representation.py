"""Relative position representations (Shaw, Uszkoreit & Vaswani, 2018)."""

from __future__ import annotations

import math
from typing import Any

import keras
from keras import ops

from convatt.layers._score_bias import query_key_offsets
from convatt.layers._utils import chunk_sums, distinct_initializer, upstream_gradient
from convatt.layers.forms import AttentionForms, drop_in_forms


def _skewed(matrices, forms: AttentionForms) -> bool:
    """Whether to use the skews (`forms.shaw`), else the gathered `(q, k, d)` tables: the skews
    also need the lengths known when traced."""
    known = matrices.shape[-2] is not None and matrices.shape[-1] is not None
    return known and forms.shaw == "skewed"


def _distances(query_len: int, key_len: int):
    """`j - i`, shape `(query_len, key_len)`."""
    return ops.expand_dims(ops.arange(key_len), 0) - ops.expand_dims(ops.arange(query_len), 1)


def _transposes_gradient(forward, transpose, x, forms: AttentionForms):
    """`forward(x)` for a linear `forward`, its gradient in the form `forms.shaw_gradient`:
    "transposed", `transpose` of the upstream gradient (on a CPU, where autodiff of the skews'
    pads, reshapes and `where`s made XLA keep more attention matrices), or "autodiff" (on a GPU
    or TPU: the same memory there, and faster than the explicit transposes)."""
    if forms.shaw_gradient == "autodiff":
        return forward(x)

    @ops.custom_gradient
    def linear(x):
        def grad(*args, upstream=None):
            return transpose(upstream_gradient(args, upstream))

        return forward(x), grad

    return linear(x)


def spread_by_distance(per_distance, query_len: int, key_len: int, max_distance: int, forms: AttentionForms):
    """`out[..., i, j] = per_distance[..., i, clip(j - i, k) + k]`: `(b, h, q, 2k + 1)` -> `(b, h, q, key_len)`;
    its gradient `sum_by_distance` (its transpose) where `forms.shaw_gradient` says ("transposed")."""
    return _transposes_gradient(
        lambda x: _spread_by_distance(x, query_len, key_len, max_distance),
        lambda upstream: _sum_by_distance(upstream, max_distance, forms.chunked_sums),
        per_distance,
        forms,
    )


def sum_by_distance(weights, max_distance: int, forms: AttentionForms):
    """`out[..., i, r]`: the sum of `weights[..., i, j]` over the keys with `clip(j - i, k) + k == r`;
    `(b, h, q, key_len)` -> `(b, h, q, 2k + 1)`; its gradient `spread_by_distance` (its transpose)
    where `forms.shaw_gradient` says ("transposed")."""
    query_len, key_len = weights.shape[-2:]
    return _transposes_gradient(
        lambda x: _sum_by_distance(x, max_distance, forms.chunked_sums),
        lambda upstream: _spread_by_distance(upstream, query_len, key_len, max_distance),
        weights,
        forms,
    )


def _spread_by_distance(per_distance, query_len: int, key_len: int, max_distance: int):
    """`out[..., i, j] = per_distance[..., i, clip(j - i, k) + k]`: `(b, h, q, 2k + 1)` -> `(b, h, q, key_len)`.

    Without a gather: the band `|j - i| <= k` by the skew of Huang et al. (2019, Music
    Transformer): rows padded to `width = max(key_len, 2k) + 1`, flattened and read from
    `k` with a stride one shorter (`P[i, j - i + k]` sits at `k + i * (width - 1) + j`), a
    table one attention matrix wide; the clipped ends are each row's first and last entry.
    """
    k = max_distance
    lead, width = (-1, per_distance.shape[1]), max(key_len, 2 * k) + 1  # any batch size
    rows = ops.pad(per_distance, [[0, 0], [0, 0], [0, 0], [0, width - (2 * k + 1)]])
    flat = ops.reshape(rows, (*lead, query_len * width))
    if k > query_len:  # the last row's read runs past the end
        flat = ops.pad(flat, [[0, 0], [0, 0], [0, k - query_len]])
    band = ops.reshape(flat[..., k : k + query_len * (width - 1)], (*lead, query_len, width - 1))[..., :key_len]
    distance = _distances(query_len, key_len)  # outside the band the skew read a neighbouring row
    return ops.where(distance < -k, per_distance[..., :1], ops.where(distance > k, per_distance[..., 2 * k :], band))


def _sum_by_distance(weights, max_distance: int, chunked: bool):
    """`sum_by_distance` (the transpose of `_spread_by_distance`).

    The clipped ends (`j - i <= -k`, `j - i >= k`) are masked row sums; the distances in
    between, one key each, come from the inverse skew (`_band_by_distance`).
    """
    k = max_distance
    if k == 0:  # every key at distance 0
        return ops.sum(weights, axis=-1, keepdims=True)
    distance = _distances(*weights.shape[2:])
    # products with 0/1 masks, not `where`: XLA's CPU reductions take a product in, a select not
    sides = (distance <= -k, distance >= k)
    outer = [chunk_sums(weights * ops.cast(side, weights.dtype), chunked) for side in sides]
    outer_left, outer_right = ops.split(ops.sum(ops.stack(outer, axis=-1), axis=-2), 2, axis=-1)
    return ops.concatenate([outer_left, _band_by_distance(weights, k), outer_right], axis=-1)


def _band_by_distance(weights, k: int):
    """`out[..., i, m - 1] = weights[..., i, i + m - k]` for `m = 1 .. 2k - 1`, zero where that key
    is outside `[0, key_len)`: rows padded to `width - 1 = max(key_len, 2k)`, flattened, shifted
    right by `k` and read in rows of `width` (the inverse of `spread_by_distance`'s skew)."""
    lead, (query_len, key_len) = (-1, weights.shape[1]), tuple(weights.shape[2:])
    width = max(key_len, 2 * k) + 1
    rows = ops.pad(weights, [[0, 0], [0, 0], [0, 0], [0, width - 1 - key_len]])
    flat = ops.reshape(rows, (*lead, query_len * (width - 1)))
    flat = ops.pad(flat, [[0, 0], [0, 0], [k, max(query_len - k, 0)]])[..., : query_len * width]
    table = ops.reshape(flat, (*lead, query_len, width))[..., 1 : 2 * k]
    key = ops.expand_dims(ops.arange(query_len), 1) + ops.expand_dims(ops.arange(1 - k, k), 0)
    return ops.where((key >= 0) & (key < key_len), table, ops.zeros((), table.dtype))


@keras.saving.register_keras_serializable(package="convatt")
class RelativePositionRepresentation(keras.layers.Layer):
    """Learned key and value vectors per clipped relative distance (Shaw et al.).

    For query position `i` and key position `j` the edge vectors are
    `a^K_ij = w^K[clip(j - i, k)]` and `a^V_ij = w^V[clip(j - i, k)]` with
    `clip(x, k) = max(-k, min(k, x))` (eqs. 3-4 and §3.2); they are shared by all
    heads. The layer uses the paper's efficient split (§3.3, eq. 5): the scores
    get the second term `(x_i W^Q)(a^K_ij)^T / sqrt(d_z)` added, and the outputs
    get `sum_j alpha_ij a^V_ij` added (the second half of eq. 3), through
    `value_term`. Under JAX neither builds a `(query, key, head_dim)` tensor: the
    key term is `q_i . w^K_r` for the `2k + 1` distances `r`, placed at each pair
    by its distance (`spread_by_distance`); the value term is `sum_r s_ir w^V_r`
    with `s_ir` the attention's sum over the keys at distance `r`
    (`sum_by_distance`); so under TensorFlow with XLA (`jit_compile=True`). Under
    TensorFlow without XLA (every reshape a copy), and for lengths unknown when traced,
    they gather the tables `a^K`, `a^V` and take one batched product per query position. `SelfAttention` calls it with
    `relative_position_representation=k`.

    Args:
        max_distance: int. The clipping distance `k` (>= 0); `2k + 1` distinct
            relative positions are learned.
        head_dim: int. The width `d_z = d_a` of a head's keys and values.
        embeddings_initializer: initializer of `w^K` and `w^V`. Defaults to
            `"glorot_uniform"`.
        value_dim: int or None. The width of `w^V` when a head's values are
            wider or narrower than its keys (`MultiHeadAttention`'s `value_dim`);
            None: `head_dim`.
        **kwargs: other keyword arguments passed to `keras.layers.Layer`.

    Call arguments:
        attention_scores: tensor `(batch_size, num_heads, query_len, key_len)`,
            the scaled first term of eq. 5.
        query: tensor `(batch_size, query_len, num_heads, head_dim)`, the
            projected queries `x_i W^Q`.

    Returns:
        The scores with the relative key term added, same shape as
        `attention_scores`, in the layer's compute dtype.

    Mixed precision: `w^K`, `w^V` stay float32; the key term, its sum with the
    scores and the value term are computed in float32 (`add_float32`,
    `value_term`, used by `SelfAttention`); `call` casts to the compute dtype.

    Other methods:
        `add_float32(attention_scores, query)`: what `call` returns, in float32.
        `value_term(attention)`: `attention` `(b, h, q, k)` ->
        `sum_j attention[..., i, j] a^V_ij`, shape `(b, q, h, head_dim)`, float32.
        `relative_embeddings(query_len, key_len)`: `(a^K, a^V)`, each
        `(query_len, key_len, head_dim)`.

    Weights (in this order):
        `key_embeddings` `(2k + 1, head_dim)` (`w^K_{-k} .. w^K_k`),
        `value_embeddings` `(2k + 1, value_dim or head_dim)`.

    Example:
    ```python
    rpr = convatt.layers.RelativePositionRepresentation(max_distance=4, head_dim=8)
    query = np.random.rand(2, 10, 3, 8).astype("float32")   # (b, t, h, d)
    scores = np.zeros((2, 3, 10, 10), "float32")
    scores = rpr(scores, query)
    attention = keras.ops.softmax(scores, axis=-1)
    extra = rpr.value_term(attention)  # (2, 10, 3, 8), add to attention @ V
    ```

    References:
     - [Shaw, Uszkoreit & Vaswani, 2018](https://arxiv.org/abs/1803.02155)
    """

    def __init__(
        self,
        max_distance: int,
        head_dim: int,
        embeddings_initializer: Any = "glorot_uniform",
        value_dim: int | None = None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.value_dim = None if value_dim is None else int(value_dim)
        self.max_distance = int(max_distance)
        if self.max_distance < 0:
            raise ValueError(f"max_distance must be >= 0; received {max_distance}.")
        self.head_dim = int(head_dim)
        self.embeddings_initializer = keras.initializers.get(embeddings_initializer)

    def build(self, attention_scores_shape=None, query_shape=None):
        if query_shape is not None and query_shape[-1] is not None and query_shape[-1] != self.head_dim:
            raise ValueError(f"{self.name} was built for head_dim={self.head_dim}; received query shape {query_shape}.")
        shape = (2 * self.max_distance + 1, self.head_dim)
        self.key_embeddings = self.add_weight(
            name="key_embeddings",
            shape=shape,
            initializer=distinct_initializer(self.embeddings_initializer, 0),
            autocast=False,  # float32 even inside a mixed-precision parent
        )
        self.value_embeddings = self.add_weight(
            name="value_embeddings",
            shape=(shape[0], self.head_dim if self.value_dim is None else self.value_dim),
            initializer=distinct_initializer(self.embeddings_initializer, 1),
            autocast=False,
        )

    def relative_indices(self, query_len, key_len):
        """`clip(j - i, k) + k`, shape `(query_len, key_len)`: rows of the tables."""
        distance = ops.expand_dims(ops.arange(key_len), 0) - ops.expand_dims(ops.arange(query_len), 1)
        return ops.clip(distance, -self.max_distance, self.max_distance) + self.max_distance

    def relative_embeddings(self, query_len, key_len):
        """`(a^K, a^V)`, each `(query_len, key_len, head_dim)`."""
        return self._gathered(self.key_embeddings, query_len, key_len), self._gathered(
            self.value_embeddings, query_len, key_len
        )

    def call(self, attention_scores, query):
        return ops.cast(self.add_float32(attention_scores, query), self.compute_dtype)

    def add_float32(self, attention_scores, query, forms: AttentionForms | None = None):
        """The scores plus the relative key term, computed and returned in float32, from the
        gathered table or by the skews (`forms.shaw`; None: `drop_in_forms()`, those for the
        trace; the published forms gather, as the tagger's results did; the skews give the same
        values to float rounding)."""
        forms = forms or drop_in_forms()
        scale = 1.0 / math.sqrt(self.head_dim)
        scores, query = ops.cast(attention_scores, "float32"), ops.cast(query, "float32")
        query_len, key_len = scores.shape[-2], scores.shape[-1]
        if not _skewed(scores, forms):
            a_key = ops.cast(self._gathered(self.key_embeddings, *ops.shape(scores)[-2:]), "float32")
            return scores + ops.einsum("bqhd,qkd->bhqk", query, a_key) * scale
        # q_i . w^K_r for the 2k + 1 distances r only, then placed at each (i, j) by its distance
        logits = ops.einsum("bqhd,rd->bhqr", query, ops.cast(self.key_embeddings, "float32"))
        return scores + spread_by_distance(logits, query_len, key_len, self.max_distance, forms) * scale

    def value_term(self, attention, forms: AttentionForms | None = None):
        """`sum_j attention_ij a^V_ij`: `(b, h, q, k)` -> `(b, q, h, head_dim)`, in float32;
        `forms` as in `add_float32`."""
        forms = forms or drop_in_forms()
        attention = ops.cast(attention, "float32")
        if not _skewed(attention, forms):
            a_value = ops.cast(self._gathered(self.value_embeddings, *ops.shape(attention)[-2:]), "float32")
            return ops.einsum("bhqk,qkd->bqhd", attention, a_value)
        # sum_j attention_ij w^V[clip(j - i)] = sum_r (the attention's sum at distance r) w^V[r]
        sums = sum_by_distance(attention, self.max_distance, forms)
        return ops.einsum("bhqr,rd->bqhd", sums, ops.cast(self.value_embeddings, "float32"))

    def indices_at(self, query_positions, key_len):
        """`relative_indices` of query rows at `query_positions` (int `(rows,)`, each >= 0)."""
        distance = -query_key_offsets(query_positions, key_len)
        return ops.clip(distance, -self.max_distance, self.max_distance) + self.max_distance

    def key_term_at(self, query, query_positions, key_len):
        """The key term `(b, h, rows, key_len)` in float32 of query rows `query` `(b, rows, h, d)`
        at `query_positions` (a cached call's rows, a block's; `add_float32`: a whole call's):
        each row's product with the `2k + 1` embeddings, then picked per key, so that no
        `(rows, key_len, d)` table is made (at long context it outgrows the attention matrix)."""
        scale = 1.0 / math.sqrt(self.head_dim)
        products = ops.einsum("brhd,nd->bhrn", ops.cast(query, "float32"), ops.cast(self.key_embeddings, "float32"))
        indices = self.indices_at(query_positions, key_len)[None, None]
        return ops.take_along_axis(products * scale, indices, axis=-1)

    def value_term_at(self, attention, query_positions):
        """`value_term` of attention rows `(b, h, rows, k)` at `query_positions`: each row's
        weights summed per clipped distance (the keys within `k` of the row one by one, the two
        ends by masked sums), times the `2k + 1` embeddings; no `(rows, k, d)` table either."""
        attention = ops.cast(attention, "float32")
        key_len, k = ops.shape(attention)[-1], self.max_distance
        positions = ops.cast(query_positions, "int32")[:, None]
        near = positions + ops.arange(-k + 1, k, dtype="int32")[None]  # (rows, 2k - 1): distances -k+1 .. k-1
        inside = ops.logical_and(ops.greater_equal(near, 0), ops.less(near, key_len))
        picked = ops.take_along_axis(attention, ops.clip(near, 0, key_len - 1)[None, None], axis=-1)
        middle = ops.where(inside[None, None], picked, ops.zeros_like(picked))
        keys = ops.arange(key_len, dtype="int32")[None]
        far_before = ops.sum(ops.where(ops.less_equal(keys, positions - k)[None, None], attention, 0.0), axis=-1)
        far_after = ops.sum(ops.where(ops.greater_equal(keys, positions + k)[None, None], attention, 0.0), axis=-1)
        sums = ops.concatenate([far_before[..., None], middle, far_after[..., None]], axis=-1)  # (b, h, rows, 2k + 1)
        return ops.einsum("bhrn,nd->brhd", sums, ops.cast(self.value_embeddings, "float32"))

    def _gathered(self, embeddings, query_len, key_len):
        """`(query_len, key_len, d)`: the row of `embeddings` of each pair's clipped distance."""
        return ops.take(embeddings, self.relative_indices(query_len, key_len), axis=0)

    def compute_output_shape(self, attention_scores_shape, query_shape=None):
        return tuple(attention_scores_shape)

    def get_config(self) -> dict:
        config = super().get_config()
        config.update(
            {
                "max_distance": self.max_distance,
                "head_dim": self.head_dim,
                "value_dim": self.value_dim,
                "embeddings_initializer": keras.initializers.serialize(self.embeddings_initializer),
            }
        )
        return config
