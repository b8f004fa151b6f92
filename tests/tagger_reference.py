"""The tagger's attention as commit 7af1535 computed it: the reference of
tests/test_layers_tagger_computation.py.

The tagger's published results (docs/results.md) came from these operations. The library's
layers have since gained faster kernels (`MultiHeadAttention` takes them); the tagger's
`SelfAttention` must keep computing exactly these, in this order, for every variant, so that
a variant trains the same bits as it did then. `ReferenceSelfAttention` is a `SelfAttention`
(the same constructor, weights and initial values) whose `call` is 7af1535's
`SelfAttention.call`, its `ModifiedAttention.attention_maps` and its sublayers' formulas
written out in one place, reading the layer's and the sublayers' weights. Only the tagger's
case: no mask, no causal call (a call with either is refused).
"""

from __future__ import annotations

import math

import numpy as np
from keras import ops
from layer_references import conv2d_depthwise

from convatt.layers import SelfAttention


def _projections(layer, inputs) -> list:
    """`X W` of the queries, keys and values `(b, t, h, d)`, each times its temperature (+Temp)."""
    projected = []
    for row, kernel in enumerate((layer.query_kernel, layer.key_kernel, layer.value_kernel)):
        x = ops.einsum("btd,dhk->bthk", inputs, kernel)
        if layer.temperature:
            x = x * ops.expand_dims(layer.temperature_weight[row], -1)
        projected.append(x)
    return projected


def _offsets(query_len: int, key_len: int):
    """`i - j`, `(query_len, key_len)`."""
    return ops.expand_dims(ops.arange(query_len), 1) - ops.expand_dims(ops.arange(key_len), 0)


def _relative_matrix(sublayer, query_len: int, key_len: int):
    """+R's `A^r[:, :q, :k]` (RelativeBias.relative_matrix): a lookup, or the circulant's column."""
    offsets = _offsets(query_len, key_len)
    if sublayer.parameterization == "lookup":
        return ops.take(sublayer.biases, offsets + sublayer.max_len, axis=1)
    n = 2 * sublayer.max_len
    basis = np.cos(2 * np.pi * np.outer(np.arange(n), np.arange(n)) / n) / n
    profile = ops.matmul(ops.cast(sublayer.biases, "float32"), ops.convert_to_tensor(basis, dtype="float32"))
    return ops.take(profile, offsets % n, axis=1)


def _shaw_table(sublayer, embeddings, query_len: int, key_len: int):
    """Shaw et al.'s `(q, k, d)` table: the row `clip(j - i, k) + k` of `embeddings` per pair."""
    clip = sublayer.max_distance
    distance = ops.expand_dims(ops.arange(key_len), 0) - ops.expand_dims(ops.arange(query_len), 1)
    return ops.cast(ops.take(embeddings, ops.clip(distance, -clip, clip) + clip, axis=0), "float32")


def _with_score_terms(layer, scores, query):
    """The `scores` stage in table order: +P, +R, Shaw's key term, ALiBi; float32."""
    t_q, t_k = scores.shape[-2], scores.shape[-1]
    if layer._position_interaction is not None:
        scores = scores + ops.cast(layer._position_interaction.interactions[:, :t_q, :t_k], "float32")
    if layer._relative_bias is not None:
        scores = scores + ops.cast(_relative_matrix(layer._relative_bias, t_q, t_k), "float32")
    shaw = layer._relative_position
    if shaw is not None:
        a_key = _shaw_table(shaw, shaw.key_embeddings, t_q, t_k)
        key_term = ops.einsum("bqhd,qkd->bhqk", ops.cast(query, "float32"), a_key)
        scores = scores + key_term * (1.0 / math.sqrt(shaw.head_dim))
    if layer._alibi is not None:
        slopes = ops.convert_to_tensor(layer._alibi.slopes.reshape(-1, 1, 1), dtype="float32")
        scores = scores + -slopes * ops.cast(ops.expand_dims(ops.abs(_offsets(t_q, t_k)), 0), "float32")
    return scores


def _conv1d(sublayer, attention):
    """+Conv (AttentionConv1D.convolve_float32, centred): the query taps side by side, one matmul."""
    key_len = attention.shape[-1]
    offsets = [tap - (sublayer.kernel_size - 1) // 2 for tap in range(sublayer.kernel_size)]
    padded = ops.pad(attention, [[0, 0], [0, 0], [-offsets[0], max(offsets[-1], 0)], [0, 0]])
    windows = ops.concatenate([padded[:, :, tap : tap + attention.shape[-2], :] for tap in range(len(offsets))], -1)
    kernel = ops.cast(sublayer.kernel[:, :, :key_len, :key_len], "float32")
    kernel = ops.reshape(kernel, (sublayer.num_heads, -1, key_len))
    outputs = ops.matmul(windows, ops.expand_dims(kernel, 0))
    return sublayer.activation(outputs + ops.expand_dims(ops.cast(sublayer.bias[:, :key_len], "float32"), 1))


def _convolve(layer, attention):
    """+Conv or +Conv2d of `attention` (the weights, or the scores before the softmax)."""
    conv = layer._conv
    if layer.attention_conv == "1d":
        return _conv1d(conv, attention)
    kernel, bias = ops.cast(conv.kernel, "float32"), ops.cast(conv.bias, "float32")
    return conv2d_depthwise(attention, kernel, bias, causal=False, activation=conv.activation)


def _mix(sublayer, maps):
    """Talking heads: `out[b, g] = sum_h maps[b, h] kernel[h, g]` by one einsum, in float32."""
    return ops.cast(ops.einsum("bhqk,hg->bgqk", maps, ops.cast(sublayer.kernel, maps.dtype)), "float32")


def reference_attention(layer, query, key):
    """7af1535's attention matrix (after the convolution) `(b, h, q, k)`, float32."""
    scores = ops.cast(ops.einsum("bqhd,bkhd->bhqk", query, key), "float32") * (1.0 / math.sqrt(layer.head_dim))
    scores = _with_score_terms(layer, scores, query)
    if layer.attention_conv and layer.conv_before_softmax:
        scores = _convolve(layer, scores)
    if layer.talking_heads:
        scores = _mix(layer._talking_logits, scores)
    attention = ops.softmax(scores, axis=-1)
    if layer.talking_heads:
        attention = _mix(layer._talking_weights, attention)
    if layer.attention_conv and not layer.conv_before_softmax:
        attention = _convolve(layer, attention)
    return attention


class ReferenceSelfAttention(SelfAttention):
    """`SelfAttention` computing 7af1535's operations (see the module's docstring)."""

    def call(self, inputs, mask=None, attention_mask=None, return_attention_scores=False, use_causal_mask=False):
        if mask is not None or attention_mask is not None or use_causal_mask or return_attention_scores:
            raise NotImplementedError("the reference is the tagger's call: no mask, no causal call, no scores")
        query, key, value = _projections(self, inputs)
        attention = reference_attention(self, query, key)
        outputs = ops.einsum("bhqk,bkhd->bqhd", ops.cast(attention, self.compute_dtype), value)
        shaw = self._relative_position
        if shaw is not None:
            a_value = _shaw_table(shaw, shaw.value_embeddings, attention.shape[-2], attention.shape[-1])
            value_term = ops.einsum("bhqk,qkd->bqhd", ops.cast(attention, "float32"), a_value)
            outputs = ops.cast(ops.cast(outputs, "float32") + value_term, self.compute_dtype)
        shape = ops.shape(outputs)
        return ops.reshape(outputs, (shape[0], shape[1], self.num_heads * self.head_dim))
