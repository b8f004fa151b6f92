"""Talking-heads mixing of attention maps across heads (Shazeer et al., 2020)."""

from __future__ import annotations

from typing import Any

import keras
from keras import ops

from convatt.layers._utils import check_scores_shape, serialized, upstream_gradient
from convatt.layers.forms import AttentionForms, drop_in_forms


def mix_heads(maps, kernel, gradient: str = "autodiff"):
    """`out[b, g, q, k] = sum_h maps[b, h, q, k] * kernel[h, g]` as one batched matrix product
    per example, `kernel^T (heads, heads) @ maps (heads, q * k)`: every operand and the result
    in their own layout (the einsum `bhqk,hg->bgqk` made XLA move the heads last and back, a
    copy of the maps each way, in both passes). With `gradient="per_example"`
    (`AttentionForms.talking_heads_gradient`: TensorFlow's XLA on a CPU) and the batch size known
    when traced, the kernel's gradient is a sum of plain matrix products, one per example and
    chunk of (query, key) pairs (`per_example_kernel_gradient`); else autodiff's.

    Args:
        maps: `(batch, heads, query_len, key_len)`.
        kernel: `(heads, heads)` indexed `[input_head, output_head]`, in `maps`' dtype.
        gradient: "autodiff" or "per_example".
    """
    if maps.shape[0] is None or gradient != "per_example":
        return _batched_mix(maps, kernel)

    @ops.custom_gradient
    def mix(maps, kernel):
        def gradient(*args, upstream=None):
            upstream = upstream_gradient(args, upstream)
            return _batched_mix(upstream, ops.transpose(kernel)), per_example_kernel_gradient(maps, upstream)

        return _batched_mix(maps, kernel), gradient

    return mix(maps, kernel)


def _batched_mix(maps, kernel):
    """`mix_heads`' product, whose gradient autodiff takes."""
    shape = ops.shape(maps)
    flat = ops.reshape(maps, (shape[0], shape[1], -1))
    mixing = ops.broadcast_to(ops.transpose(kernel), (shape[0], kernel.shape[1], kernel.shape[0]))
    return ops.reshape(ops.matmul(mixing, flat), shape)


KERNEL_GRADIENT_CHUNK = 1 << 18
"""`per_example_kernel_gradient`'s columns per product: XLA's CPU product of `(heads, n) @ (n,
heads)` slows with `n`, so long maps are taken in chunks of this many (query, key) pairs."""


def per_example_kernel_gradient(maps, upstream):
    """`d[h, g] = sum_{b, q, k} maps[b, h, q, k] * upstream[b, g, q, k]` as a sum of plain matrix
    products `(heads, n) @ (n, heads)`, one per example and chunk of `KERNEL_GRADIENT_CHUNK`
    (query, key) pairs. XLA's CPU code ran the batched product (autodiff's) or a fused
    multiply-and-sum slower: a product of two whole attention matrices into `heads^2` numbers.
    `maps`' batch size must be known when traced."""
    batch, heads = maps.shape[0], maps.shape[1]
    flat_maps, flat_upstream = ops.reshape(maps, (batch, heads, -1)), ops.reshape(upstream, (batch, heads, -1))
    pairs, chunk = flat_maps.shape[-1], KERNEL_GRADIENT_CHUNK
    chunks = [slice(None)] if pairs is None else [slice(s, s + chunk) for s in range(0, pairs, chunk)]
    products = [
        ops.matmul(flat_maps[b, :, part], ops.transpose(flat_upstream[b, :, part]))
        for b in range(batch)
        for part in chunks
    ]
    return sum(products[1:], products[0])


@keras.saving.register_keras_serializable(package="convatt")
class TalkingHeadsProjection(keras.layers.Layer):
    """A learned `num_heads x num_heads` mixing of attention maps across heads.

    `out[b, g, q, k] = sum_h x[b, h, q, k] * kernel[h, g]`: every output head is a
    weighted sum of all input heads' maps, the same weights at every (query, key)
    pair. Talking-heads attention (Shazeer et al., 2020) applies one such
    projection to the scores before the softmax and a second one to the weights
    after it (`SelfAttention(talking_heads=True)`); this layer is one of them.
    There is no bias, as in the paper.

    The kernel starts as the identity by default (our choice; the paper does not
    fix one): the layer then starts as plain multi-head attention and learns how
    much the heads should talk, which suits small taggers trained from scratch.
    Pass e.g. `kernel_initializer="glorot_uniform"` to start mixed.

    Args:
        num_heads: int. Heads in and out (the paper allows different numbers;
            here they are equal, so the layer keeps the attention's shape).
        kernel_initializer: initializer of the `(num_heads, num_heads)` kernel.
            Defaults to `"identity"`.
        **kwargs: other keyword arguments passed to `keras.layers.Layer`.

    Call arguments:
        attention: tensor `(batch_size, num_heads, query_len, key_len)`: scores
            (logits) or weights.
        forms: `AttentionForms` or None (`convatt.layers.forms`). Mix by the einsum
            `bhqk,hg->bgqk` (`talking_heads="einsum"`: the operations of the tagger's
            results, which `SelfAttention` keeps) or by one batched matrix product per
            example (`"batched"`, `mix_heads`: faster under XLA). The same values to float
            rounding. None: `drop_in_forms()`, those for the trace (the batched product).

    Returns:
        The mixed maps, same shape.

    Weights:
        `kernel` `(num_heads, num_heads)` indexed `[input_head, output_head]`.

    Example:
    ```python
    scores = keras.random.normal((2, 4, 60, 60))
    layer = convatt.layers.TalkingHeadsProjection(num_heads=4)
    mixed = layer(scores)  # (2, 4, 60, 60); 16 parameters; equal to scores at the start
    ```

    References:
     - [Shazeer, Lan, Cheng, Ding & Hou, 2020](https://arxiv.org/abs/2003.02436)
    """

    def __init__(self, num_heads: int, kernel_initializer: Any = "identity", **kwargs):
        super().__init__(**kwargs)
        self.num_heads = int(num_heads)
        if self.num_heads < 1:
            raise ValueError(f"num_heads must be >= 1; received {num_heads}.")
        self.kernel_initializer = keras.initializers.get(kernel_initializer)

    def build(self, input_shape=None):
        if input_shape is not None:
            check_scores_shape(self.name, input_shape, self.num_heads)
        self.kernel = self.add_weight(
            name="kernel", shape=(self.num_heads, self.num_heads), initializer=self.kernel_initializer
        )

    def call(self, attention, forms: AttentionForms | None = None):
        check_scores_shape(self.name, attention.shape, self.num_heads)
        forms = forms or drop_in_forms()
        kernel = ops.cast(self.kernel, attention.dtype)
        if forms.talking_heads == "einsum":
            return ops.einsum("bhqk,hg->bgqk", attention, kernel)
        return mix_heads(attention, kernel, forms.talking_heads_gradient)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)

    def get_config(self) -> dict:
        return {**super().get_config(), "num_heads": self.num_heads, **serialized(self, "kernel_initializer")}
