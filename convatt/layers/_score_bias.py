"""The base of the layers that add a per-head bias to attention scores."""

from __future__ import annotations

import keras
from keras import ops

from convatt.layers._utils import check_scores_shape, upstream_gradient
from convatt.layers.forms import AttentionForms


def query_key_offsets(query_positions, key_len):
    """`(rows, key_len)`: each row's query position minus the key positions `0 .. key_len - 1`."""
    keys = ops.arange(key_len, dtype=query_positions.dtype)
    return ops.expand_dims(query_positions, 1) - ops.expand_dims(keys, 0)


def batch_sum_by_product(upstream):
    """`upstream` `(b, h, q, k)` summed over the batch as a matrix product `ones(b) @ upstream`."""
    return ops.einsum("b,bhqk->hqk", ops.ones_like(upstream[:, 0, 0, 0]), upstream)


def batch_sum_by_additions(upstream):
    """`upstream` `(b, h, q, k)` summed over the batch one example after another (the batch size
    known when traced)."""
    return sum((upstream[b] for b in range(1, upstream.shape[0])), upstream[0])


BATCH_SUMS = {"product": batch_sum_by_product, "additions": batch_sum_by_additions}
"""`AttentionForms.bias_batch_sum`'s sums (autodiff's is the broadcast add's own gradient)."""


def add_with_fast_batch_sum(scores, bias, batch_sum: str = "autodiff"):
    """`scores + bias` (`(b, h, q, k)` plus `(h, q, k)`), its gradient for `bias` (the upstream
    summed over the batch) in the form `batch_sum` (`AttentionForms.bias_batch_sum`; "additions"
    needs the batch size when traced, autodiff's without it)."""
    if batch_sum == "additions" and scores.shape[0] is None:
        batch_sum = "autodiff"
    if batch_sum == "autodiff":
        return scores + bias
    summed = BATCH_SUMS[batch_sum]

    @ops.custom_gradient
    def add(scores, bias):
        def grad(*args, upstream=None):
            upstream = upstream_gradient(args, upstream)
            return upstream, summed(upstream)

        return scores + bias, grad

    return add(scores, bias)


class ScoreBias(keras.layers.Layer):
    """Adds a bias `(num_heads, query_len, key_len)` to attention scores, in float32.

    Subclasses set `num_heads` and `max_len` (None: any length) and give
    `bias_float32(query_len, key_len)`. The sum is formed in float32 because a bias
    can be large next to the scores; `add_float32` returns it in float32 (for
    `SelfAttention`, which takes the softmax there), `call` in the compute dtype.
    """

    max_len: int | None = None

    def bias_float32(self, query_len, key_len):
        raise NotImplementedError(f"{type(self).__name__} must define bias_float32")

    def build(self, input_shape=None):
        if input_shape is not None:
            check_scores_shape(self.name, input_shape, self.num_heads, self.max_len)

    def add_float32(self, attention_scores, forms: AttentionForms | None = None):
        """`attention_scores + bias`, computed and returned in float32; the bias's gradient summed
        over the batch in the form of `forms.bias_batch_sum` (`add_with_fast_batch_sum`; None:
        autodiff's; the same values, the sum in another order)."""
        check_scores_shape(self.name, attention_scores.shape, self.num_heads, self.max_len)
        shape = ops.shape(attention_scores)
        bias = self.bias_float32(shape[-2], shape[-1])
        batch_sum = "autodiff" if forms is None else forms.bias_batch_sum
        return add_with_fast_batch_sum(ops.cast(attention_scores, "float32"), bias, batch_sum)

    def bias_at(self, query_positions, key_len):
        """The bias `(heads, rows, key_len)` in float32 of query rows at `query_positions` (int
        `(rows,)`, each >= 0) and the keys `0 .. key_len - 1` (a cached call's rows; `bias_float32`:
        a whole call's). Here by the offsets `i - j` (`bias_for_offsets`)."""
        return self.bias_for_offsets(query_key_offsets(query_positions, key_len))

    def call(self, attention_scores):
        return ops.cast(self.add_float32(attention_scores), self.compute_dtype)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)
