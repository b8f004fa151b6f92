"""The base of the layers that add a per-head bias to attention scores."""

from __future__ import annotations

import keras
from keras import ops

from convatt.layers._utils import check_scores_shape, compiled_by_xla, on_accelerator, upstream_gradient


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


def batch_sum_form(scores):
    """The batch sum of a bias's gradient that pays for `scores`' gradient, or None for autodiff's.
    On a CPU: under JAX `batch_sum_by_product` (XLA's reduction over the leading axis of the
    `(2, 4, 1024, 1024)` score gradient took 120-240 ms on the 2-core CPU, the product 3-8 ms;
    a Keras layer's whole step is 260 ms); under TensorFlow with XLA and the batch size known,
    `batch_sum_by_additions`, which XLA fuses into the optimizer's update of the bias (its
    reduction wrote the sum out first: the step of +P+R 1.32-1.39x Keras' layer's, 1.19-1.30x
    with the additions, length 1,024). On a GPU or TPU, and TensorFlow without XLA (its own
    sum as fast), autodiff's."""
    if on_accelerator():
        return None
    if keras.backend.backend() == "jax":
        return batch_sum_by_product
    if compiled_by_xla() and scores.shape[0] is not None:  # TensorFlow's XLA (JAX returned above)
        return batch_sum_by_additions
    return None


def add_with_fast_batch_sum(scores, bias):
    """`scores + bias` (`(b, h, q, k)` plus `(h, q, k)`), its gradient for `bias` (the upstream
    summed over the batch) in the form that pays here (`batch_sum_form`), else autodiff's."""
    batch_sum = batch_sum_form(scores)
    if batch_sum is None:
        return scores + bias

    @ops.custom_gradient
    def add(scores, bias):
        def grad(*args, upstream=None):
            upstream = upstream_gradient(args, upstream)
            return upstream, batch_sum(upstream)

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

    def add_float32(self, attention_scores, fast_batch_sum: bool = False):
        """`attention_scores + bias`, computed and returned in float32; with `fast_batch_sum`,
        the bias's gradient summed over the batch in the form that pays (on a CPU:
        `add_with_fast_batch_sum`; `MultiHeadAttention`'s; the same values, the sum in
        another order)."""
        check_scores_shape(self.name, attention_scores.shape, self.num_heads, self.max_len)
        shape = ops.shape(attention_scores)
        bias = self.bias_float32(shape[-2], shape[-1])
        if fast_batch_sum:
            return add_with_fast_batch_sum(ops.cast(attention_scores, "float32"), bias)
        return ops.cast(attention_scores, "float32") + bias

    def bias_at(self, query_positions, key_len):
        """The bias `(heads, rows, key_len)` in float32 of query rows at `query_positions` (int
        `(rows,)`, each >= 0) and the keys `0 .. key_len - 1` (a cached call's rows; `bias_float32`:
        a whole call's). Here by the offsets `i - j` (`bias_for_offsets`)."""
        return self.bias_for_offsets(query_key_offsets(query_positions, key_len))

    def call(self, attention_scores):
        return ops.cast(self.add_float32(attention_scores), self.compute_dtype)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)
