"""Self-attention of a fixed width and any number of heads: narrowing attention (Kim, §3.2)."""

from __future__ import annotations

from typing import Any

import keras
from keras import ops

from convatt.layers.core.self_attention import SelfAttention


def head_widths(width: int, num_heads: int) -> list[tuple[int, int]]:
    """`width` split over `num_heads` heads as `[(heads, head_dim), ...]`, widest first:
    heads differ by at most one column and their widths add up to `width`.

    >>> head_widths(364, 8)
    [(4, 46), (4, 45)]
    """
    if num_heads < 1 or width < num_heads:
        raise ValueError(f"cannot split width {width} over {num_heads} heads (at least one column each).")
    narrow, wider = divmod(width, num_heads)
    groups = [(wider, narrow + 1), (num_heads - wider, narrow)]
    return [(heads, dim) for heads, dim in groups if heads > 0]


def narrowing_num_heads(base_heads: int, layer_index: int) -> int:
    """Heads of layer `layer_index` (0 = first) in narrowing attention: doubling per layer."""
    return base_heads * 2**layer_index


@keras.saving.register_keras_serializable(package="convatt")
class NarrowingSelfAttention(keras.layers.Layer):
    """`SelfAttention` with `num_heads` heads that together are exactly `output_dim` wide.

    Narrowing attention (Kim, §3.2) doubles the heads and halves their width from
    one layer to the next (in the tagger 4, 8, 16, 32 heads), keeping each layer's
    width, so that the residual connections still add up. This layer is one such
    layer: give it the layer's `num_heads` (`narrowing_num_heads(4, l)`).

    Where `num_heads` does not divide `output_dim` (PTB's 364 = 4 x 91 does not
    halve), the heads differ in width by one column (`head_widths`: 8 heads of
    364 are 4 of 46 and 4 of 45; 16 heads are 12 of 23 and 4 of 22; 32 heads are
    12 of 12 and 20 of 11), computed as two `SelfAttention` sublayers on the same
    input whose outputs are concatenated. We chose this over rounding every head
    to one width because it keeps the layer's width and parameter count exactly
    those of plain attention, as the study compares models of equal parameter
    counts, with no extra projection and no dropped columns.

    Args:
        output_dim: int. Width of the output (the sum of the heads' widths).
        num_heads: int. Number of heads, at most `output_dim`.
        max_len: int or None. As in `SelfAttention`.
        attention_options: dict or None. Further `SelfAttention` arguments for
            every head (e.g. `{"temperature": True}`), JSON-serializable values.
        kernel_initializer: initializer of `W_q, W_k, W_v`, applied as to each
            head's own matrix. Defaults to `"glorot_uniform"`.
        **kwargs: other keyword arguments passed to `keras.layers.Layer`.

    Call arguments:
        inputs: tensor `(batch_size, t, input_dim)`.
        mask, attention_mask: as in `SelfAttention`.
        return_attention_scores: bool. Also return the attention,
            `(batch_size, num_heads, t, t)`, heads in output order.

    Returns:
        `(batch_size, t, output_dim)` (or the tuple with the attention).

    Weights:
        Those of the `SelfAttention` sublayers `heads_<head_dim>`, widest first.

    Example:
    ```python
    x = keras.Input((60, 364))
    h = x
    for layer in range(4):  # 4, 8, 16, 32 heads
        heads = convatt.layers.narrowing_self_attention.narrowing_num_heads(4, layer)
        h = h + convatt.layers.NarrowingSelfAttention(364, heads, max_len=60)(h)
    ```

    References:
     - Kim, *Exploration of Position Embedding Methods and Attention Mechanism on
       Small Transformer Classifiers* (Johns Hopkins University), §3.2
    """

    def __init__(
        self,
        output_dim: int,
        num_heads: int,
        max_len: int | None = None,
        attention_options: dict | None = None,
        kernel_initializer: Any = "glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.output_dim, self.num_heads = int(output_dim), int(num_heads)
        self.max_len = None if max_len is None else int(max_len)
        self.attention_options = dict(attention_options or {})
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.supports_masking = True
        self._groups = [
            SelfAttention(
                heads,
                head_dim,
                max_len=self.max_len,
                kernel_initializer=self.kernel_initializer,
                dtype=self.dtype_policy,
                name=f"heads_{head_dim}",
                **self.attention_options,
            )
            for heads, head_dim in head_widths(self.output_dim, self.num_heads)
        ]

    def build(self, input_shape):
        for group in self._groups:
            group.build(input_shape)

    def call(self, inputs, mask=None, attention_mask=None, return_attention_scores: bool = False):
        results = [
            group(inputs, mask=mask, attention_mask=attention_mask, return_attention_scores=return_attention_scores)
            for group in self._groups
        ]
        if not return_attention_scores:
            return results[0] if len(results) == 1 else ops.concatenate(results, axis=-1)
        outputs, attention = zip(*results)
        return ops.concatenate(list(outputs), axis=-1), ops.concatenate(list(attention), axis=1)

    def compute_mask(self, inputs, mask=None):
        return mask

    def compute_output_shape(self, input_shape):
        return (input_shape[0], input_shape[1], self.output_dim)

    def compute_output_spec(self, inputs, mask=None, attention_mask=None, return_attention_scores: bool = False):
        output = keras.KerasTensor(self.compute_output_shape(inputs.shape), dtype=self.compute_dtype)
        if not return_attention_scores:
            return output
        t = inputs.shape[1]
        return output, keras.KerasTensor((inputs.shape[0], self.num_heads, t, t), dtype=self.compute_dtype)

    def get_config(self) -> dict:
        config = super().get_config()
        config.update(
            {
                "output_dim": self.output_dim,
                "num_heads": self.num_heads,
                "max_len": self.max_len,
                "attention_options": dict(self.attention_options),
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            }
        )
        return config
