"""Direct absolute position interactions A^p (Dufter et al., 2020, §2.3)."""

from __future__ import annotations

import keras
from keras import ops

from convatt.layers._score_bias import ScoreBias
from convatt.layers._utils import per_head_initializer


@keras.saving.register_keras_serializable(package="convatt")
class PositionInteraction(ScoreBias):
    """Adds a learnable `max_len x max_len` matrix per head to attention scores.

    This is the "+P" modification of Dufter, Schmitt & Schütze (2020): the
    position-position term of the attention scores is replaced by a free matrix
    `A^p` whose entry `A^p[h, i, j]` directly scores query position `i` against
    key position `j` in head `h`. The matrices are not shared across heads and
    are initialised glorot-normal as if each head's `(max_len, max_len)` matrix
    were its own variable. Shorter sequences use the top-left block
    `A^p[:, :query_len, :key_len]`.

    Args:
        max_len: int. The longest query / key length the layer supports.
        num_heads: int. The number of attention heads.
        **kwargs: other keyword arguments passed to `keras.layers.Layer`,
            including `name`, `dtype` and `trainable`.

    Call arguments:
        attention_scores: tensor of shape
            `(batch_size, num_heads, query_len, key_len)`, the scaled dot-product
            scores before the softmax, with `query_len, key_len <= max_len`.

    Returns:
        `attention_scores + A^p[:, :query_len, :key_len]`, same shape, in the
        layer's compute dtype.

    Mixed precision: `A^p` stays float32 (never autocast) and the sum is done
    in float32, then cast to the compute dtype; `add_float32` returns it in
    float32 (`SelfAttention` keeps its scores in float32 up to the softmax).

    Other methods:
        `add_float32(attention_scores)`: `attention_scores + A^p` in float32.

    Weights:
        `interactions`: `(num_heads, max_len, max_len)`, `A^p`.

    Example:
    ```python
    scores = np.zeros((2, 4, 10, 10), "float32")
    layer = convatt.layers.PositionInteraction(max_len=60, num_heads=4)
    biased = layer(scores)  # (2, 4, 10, 10)
    ```

    References:
     - [Dufter, Schmitt & Schütze, 2020](https://aclanthology.org/2020.coling-main.324/)
    """

    def __init__(self, max_len: int, num_heads: int, **kwargs):
        super().__init__(**kwargs)
        self.max_len = int(max_len)
        self.num_heads = int(num_heads)

    def build(self, input_shape=None):
        super().build(input_shape)
        shape = (self.num_heads, self.max_len, self.max_len)
        self.interactions = self.add_weight(
            name="interactions",
            shape=shape,
            initializer=per_head_initializer("glorot_normal", shape, shape[1:]),
            autocast=False,  # read in float32 even inside a mixed-precision parent
        )

    def bias_float32(self, query_len, key_len):
        """`A^p[:, :query_len, :key_len]` in float32."""
        return ops.cast(self.interactions[:, :query_len, :key_len], "float32")

    def bias_at(self, query_positions, key_len):
        """The rows of `A^p` at `query_positions` (`ScoreBias.bias_at`): they are per position."""
        return ops.take(self.bias_float32(self.max_len, key_len), query_positions, axis=1)

    def get_config(self) -> dict:
        config = super().get_config()
        config.update({"max_len": self.max_len, "num_heads": self.num_heads})
        return config
