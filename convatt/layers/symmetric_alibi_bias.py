"""Symmetric ALiBi attention biases (Press, Smith & Lewis, 2022)."""

from __future__ import annotations

import keras
import numpy as np
from keras import ops

from convatt.layers._score_bias import ScoreBias, query_key_offsets


@keras.saving.register_keras_serializable(package="convatt")
class SymmetricAlibiBias(ScoreBias):
    """Adds the fixed, symmetric linear distance penalty `-m_h * |i - j|` to attention scores.

    Head `h = 1 .. n` of `n` heads has slope `m_h = 2^(-8h / n)` (for 4 heads:
    1/4, 1/16, 1/64, 1/256). The bias is the bidirectional (symmetric) form of
    ALiBi, as fits an encoder: `bias[h, i, j] = -m_h * |i - j|`. No weights; any
    sequence length works. (For a number of heads that is not a power of two,
    Press et al. interleave two geometric sequences; this layer always uses
    `2^(-8h / n)`.)

    Args:
        num_heads: int. The number of attention heads.
        **kwargs: other keyword arguments passed to `keras.layers.Layer`.

    Call arguments:
        attention_scores: tensor of shape
            `(batch_size, num_heads, query_len, key_len)`.

    Returns:
        `attention_scores + bias`, same shape, in the layer's compute dtype.

    Mixed precision: the bias (up to `-m_1 * (t - 1)`, large next to the
    scores) and the sum are computed in float32; `add_float32` returns the
    sum in float32 (used by `SelfAttention`).

    Example:
    ```python
    scores = np.zeros((2, 4, 10, 10), "float32")
    biased = convatt.layers.SymmetricAlibiBias(num_heads=4)(scores)
    # biased[0, 0, 0, 3] == -3 / 4
    ```

    References:
     - [Press, Smith & Lewis, 2022](https://arxiv.org/abs/2108.12409)
    """

    def __init__(self, num_heads: int, **kwargs):
        super().__init__(**kwargs)
        self.num_heads = int(num_heads)

    @property
    def slopes(self) -> np.ndarray:
        """The per-head slopes `2^(-8h / n)`, `h = 1 .. n`."""
        return 2.0 ** (-8.0 * np.arange(1, self.num_heads + 1) / self.num_heads)

    def bias_for_offsets(self, offsets):
        """The bias `-m_h * |i - j|` in float32 for query-minus-key offsets `i - j` (an int
        tensor `(q, k)`): shape `(num_heads, q, k)`."""
        slopes = ops.convert_to_tensor(self.slopes.reshape(-1, 1, 1), dtype="float32")
        return -slopes * ops.cast(ops.expand_dims(ops.abs(offsets), 0), "float32")

    def bias_float32(self, query_len, key_len):
        """The bias `(num_heads, query_len, key_len)`, in float32."""
        return self.bias_for_offsets(query_key_offsets(ops.arange(query_len), key_len))

    def get_config(self) -> dict:
        config = super().get_config()
        config.update({"num_heads": self.num_heads})
        return config


# Files saved by 0.1.0 name the layer "convatt>AlibiBias": they load as they are.
keras.saving.get_custom_objects()["convatt>AlibiBias"] = SymmetricAlibiBias
