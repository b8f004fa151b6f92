"""Denser attention (Kim, §3.1): every query segment attends with every key segment."""

from __future__ import annotations

import math
from typing import Any

import keras
from keras import ops

from convatt.layers._utils import combine_attention_masks, masked_softmax, per_head_initializer


@keras.saving.register_keras_serializable(package="convatt")
class DenserSelfAttention(keras.layers.Layer):
    """Multi-head self-attention in which query and key segments all interact.

    Per head, the query `q` and key `k` (each `key_dim` wide) are cut into
    `segments` = `w` equal segments `q^i`, `k^j` of width `s = key_dim / w`.
    Output segment `i` is

        `Z^i = (1/w) sum_j softmax(q^i (k^j)^T / sqrt(s)) V`,

    so each head has `w * w` attention maps (one softmax each, over the keys).
    The `w` outputs of every head are concatenated (`num_heads * w * head_dim`
    wide) and a Dense layer (with bias) maps them to `output_dim`. No output
    projection beyond that Dense and no residual (the caller adds it).

    Choices where Kim's §3.1 leaves them open (documented in docs/layers.md too):
    - **The segments of v.** Eq. (2) writes `v^i`, but the text says the output
      is `w` times as wide as plain attention and needs a Dense layer to get
      back; both hold only if every output segment uses the whole `V` (with
      `v^i` a `1/w` slice the output would already have the input's width).
      So `V` is not cut: `Z^i` is `head_dim` wide.
    - **d_k.** The scale is `1/sqrt(s)`, the width of the segment dot product
      `q^i (k^j)^T`, as in Vaswani et al.'s reason for the scale (the variance
      of a dot product of `s` terms), not `1/sqrt(key_dim)`.
    - **Widths that do not split.** Segments must be equally wide for `q^i (k^j)^T`.
      `key_dim` defaults to `head_dim` rounded up to a multiple of `w` (PTB's
      heads of 91 get queries and keys of 92, two segments of 46), so no input
      information is dropped; the values keep `head_dim`.

    Args:
        num_heads: int. Number of heads.
        head_dim: int. Width of each head's values (and of each output segment).
        segments: int. `w`, the number of query / key segments. Defaults to 2 (the
            study's).
        key_dim: int or None. Width of each head's queries and keys, a multiple
            of `segments`. Defaults to `head_dim` rounded up to one.
        output_dim: int or None. Width of the output. Defaults to
            `num_heads * head_dim` (the width plain attention would have).
        use_bias: bool. Bias of the output Dense layer. Defaults to True (the
            study's `nn.Linear`).
        kernel_initializer: initializer of `W_q, W_k, W_v`, applied as to each
            head's own matrix, and of the output Dense kernel. Defaults to
            `"glorot_uniform"`.
        **kwargs: other keyword arguments passed to `keras.layers.Layer`.

    Call arguments:
        inputs: tensor `(batch_size, t, input_dim)`.
        mask: optional boolean Keras mask `(batch_size, t)`: masks queries and keys.
        attention_mask: optional `(batch_size, t)` key mask or `(batch_size, t, t)`
            query-key mask; 1 = attend. Masked pairs get weight 0 in every map.

    Returns:
        `(batch_size, t, output_dim)`.

    Weights (in this order):
        `query_kernel`, `key_kernel` `(input_dim, num_heads, key_dim)`;
        `value_kernel` `(input_dim, num_heads, head_dim)`; `output_dense/kernel`
        `(num_heads * segments * head_dim, output_dim)` (rows ordered head,
        segment, value column) and `output_dense/bias`.

    Example:
    ```python
    x = keras.Input((60, 192))
    z = convatt.layers.DenserSelfAttention(num_heads=4, head_dim=48, segments=2)(x)  # (None, 60, 192)
    y = keras.layers.Add()([x, z])
    ```

    References:
     - Kim, *Exploration of Position Embedding Methods and Attention Mechanism on
       Small Transformer Classifiers* (Johns Hopkins University), §3.1
     - [Vaswani et al., 2017](https://arxiv.org/abs/1706.03762)
    """

    def __init__(
        self,
        num_heads: int,
        head_dim: int,
        segments: int = 2,
        key_dim: int | None = None,
        output_dim: int | None = None,
        use_bias: bool = True,
        kernel_initializer: Any = "glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.num_heads, self.head_dim, self.segments = int(num_heads), int(head_dim), int(segments)
        if self.segments < 1:
            raise ValueError(f"segments must be >= 1; received {segments}.")
        self.key_dim = int(key_dim) if key_dim is not None else self.segments * math.ceil(self.head_dim / self.segments)
        if self.key_dim % self.segments:
            raise ValueError(f"key_dim ({self.key_dim}) must be a multiple of segments ({self.segments}).")
        self.output_dim = int(output_dim) if output_dim is not None else self.num_heads * self.head_dim
        self.use_bias = bool(use_bias)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.supports_masking = True
        self._output_dense = keras.layers.Dense(
            self.output_dim,
            use_bias=self.use_bias,
            kernel_initializer=self.kernel_initializer,
            dtype=self.dtype_policy,
            name="output_dense",
        )

    def build(self, input_shape):
        if len(input_shape) != 3 or input_shape[-1] is None:
            raise ValueError(
                f"{self.name} expects inputs of shape (batch, t, input_dim) with a known input_dim; "
                f"received {input_shape}."
            )
        input_dim = int(input_shape[-1])
        widths = {"query_kernel": self.key_dim, "key_kernel": self.key_dim, "value_kernel": self.head_dim}
        for offset, (name, width) in enumerate(widths.items()):
            shape = (input_dim, self.num_heads, width)
            init = per_head_initializer(self.kernel_initializer, shape, (input_dim, width), seed_offset=offset)
            setattr(self, name, self.add_weight(name=name, shape=shape, initializer=init))
        self._output_dense.build((input_shape[0], input_shape[1], self.num_heads * self.segments * self.head_dim))

    def _segments(self, inputs, kernel):
        """(b, t, d) -> (b, t, heads, segments, key_dim / segments)."""
        projected = ops.einsum("btd,dhk->bthk", inputs, ops.cast(kernel, inputs.dtype))
        shape = ops.shape(projected)
        return ops.reshape(projected, (shape[0], shape[1], self.num_heads, self.segments, -1))

    def attention_probabilities(self, inputs, mask=None, attention_mask=None):
        """The maps `call` multiplies with the values: `(1/w) sum_j softmax(q^i (k^j)^T / sqrt(s))`,
        `(batch_size, num_heads, segments, t, t)` indexed `[b, head, i, query, key]`."""
        query, key = self._segments(inputs, self.query_kernel), self._segments(inputs, self.key_kernel)
        scores = ops.einsum("bqhis,bkhjs->bhijqk", query, key)
        scores = scores * ops.cast(1.0 / math.sqrt(self.key_dim // self.segments), scores.dtype)
        keep = combine_attention_masks(mask, attention_mask)  # (b, 1, q, k): every map's
        # TensorFlow's softmax takes at most rank 5: one (q, k) map per row of a rank-4 tensor.
        shape = ops.shape(scores)
        probs = masked_softmax(ops.reshape(scores, (shape[0], -1, shape[4], shape[5])), keep)
        return ops.mean(ops.reshape(probs, shape), axis=3)  # the 1/w sum over the key segments j

    def call(self, inputs, mask=None, attention_mask=None):
        maps = self.attention_probabilities(inputs, mask, attention_mask)
        value = ops.einsum("btd,dhk->bthk", inputs, ops.cast(self.value_kernel, inputs.dtype))
        outputs = ops.einsum("bhiqk,bkhd->bqhid", maps, value)  # (b, t, heads, segments, head_dim)
        shape = ops.shape(outputs)
        outputs = ops.reshape(outputs, (shape[0], shape[1], self.num_heads * self.segments * self.head_dim))
        return self._output_dense(outputs)

    def compute_mask(self, inputs, mask=None):
        return mask

    def compute_output_shape(self, input_shape):
        return (input_shape[0], input_shape[1], self.output_dim)

    def get_config(self) -> dict:
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "head_dim": self.head_dim,
                "segments": self.segments,
                "key_dim": self.key_dim,
                "output_dim": self.output_dim,
                "use_bias": self.use_bias,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            }
        )
        return config
