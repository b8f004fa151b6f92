"""Learnable relative position biases A^r (Dufter et al., 2020, §2.3)."""

from __future__ import annotations

import math

import keras
import numpy as np
from keras import ops

from convatt.layers._options import one_of
from convatt.layers._score_bias import ScoreBias, query_key_offsets
from convatt.layers._utils import per_head_initializer

PARAMETERIZATIONS = ("lookup", "circulant")


@keras.saving.register_keras_serializable(package="convatt")
class RelativeBias(ScoreBias):
    """Adds a learnable bias per head and relative offset to attention scores.

    This is the "+R" modification of Dufter, Schmitt & Schütze (2020), with a
    vector `a^r[h]` of `2 * max_len` learnable scalars per head (not shared across
    heads), used in one of two ways:

    - `parameterization="lookup"` (the paper's text):
      `A^r[h, i, j] = a^r[h, i - j + max_len]` (offsets `i - j` in
      `[1 - max_len, max_len - 1]` use entries `1 .. 2 * max_len - 1`; entry 0 is
      never read, kept so the parameter count is the paper's `2t`). Initialised
      glorot-normal as Keras 3 counts the fans of each head's `(2t,)` vector.
    - `parameterization="circulant"` (the paper's code, `selfattention.py`: the
      vector is the spectrum of a `LinearOperatorCirculant` whose top-left
      `t x t` block is added, cast to real):
      `A^r[h, i, j] = Re(IFFT(a^r[h]))[(i - j) mod 2t]
      = (1 / 2t) sum_m a^r[h, m] cos(2 pi m (i - j) / 2t)`, symmetric in
      `i - j` (distance, no direction). Initialised glorot-normal as Keras 2.2.4
      counted the fans of a 1-d shape (`fan_in = fan_out = sqrt(2t)`), i.e. a
      truncated normal of standard deviation `sqrt(1 / sqrt(2t)) / 0.8796`.
      The SAN+R and SAN+P+R numbers of the paper come from this one.

    Args:
        max_len: int. The longest query / key length the layer supports.
        num_heads: int. The number of attention heads.
        parameterization: `"lookup"` (default, the paper's text) or
            `"circulant"` (the paper's code).
        **kwargs: other keyword arguments passed to `keras.layers.Layer`.

    Call arguments:
        attention_scores: tensor of shape
            `(batch_size, num_heads, query_len, key_len)` with
            `query_len, key_len <= max_len`.

    Returns:
        `attention_scores + A^r`, same shape, in the layer's compute dtype.

    Mixed precision: `a^r` stays float32 and the sum is done in float32
    (`add_float32` returns it so, for `SelfAttention`).

    Weights:
        `biases`: `(num_heads, 2 * max_len)`, `a^r`.

    Example:
    ```python
    scores = np.zeros((2, 4, 10, 10), "float32")
    layer = convatt.layers.RelativeBias(max_len=60, num_heads=4)
    biased = layer(scores)  # (2, 4, 10, 10)
    ```

    References:
     - [Dufter, Schmitt & Schütze, 2020](https://aclanthology.org/2020.coling-main.324/)
    """

    def __init__(self, max_len: int, num_heads: int, parameterization: str = "lookup", **kwargs):
        super().__init__(**kwargs)
        parameterization = one_of(*PARAMETERIZATIONS)("parameterization", parameterization)
        self.max_len = int(max_len)
        self.num_heads = int(num_heads)
        self.parameterization = parameterization

    def build(self, input_shape=None):
        super().build(input_shape)
        shape = (self.num_heads, 2 * self.max_len)
        self.biases = self.add_weight(
            name="biases",
            shape=shape,
            initializer=self._initializer(shape),
            autocast=False,  # float32 even inside a mixed-precision parent
        )

    def _initializer(self, shape):
        if self.parameterization == "lookup":
            return per_head_initializer("glorot_normal", shape, shape[1:])
        keras2_fan = math.sqrt(shape[1])  # Keras 2.2.4's _compute_fans for a 1-d shape
        stddev = math.sqrt(1.0 / keras2_fan) / 0.87962566103423978  # its truncated-normal correction
        return keras.initializers.TruncatedNormal(stddev=stddev)

    def distance_profile(self):
        """`(num_heads, 2 * max_len)`: the circulant's first column `Re(IFFT(a^r))`, per head
        (`parameterization="circulant"`: the bias at offset `i - j` is column `(i - j) mod 2t`)."""
        n = 2 * self.max_len
        basis = np.cos(2 * np.pi * np.outer(np.arange(n), np.arange(n)) / n) / n  # (m, k), symmetric
        return ops.matmul(ops.cast(self.biases, "float32"), ops.convert_to_tensor(basis, dtype="float32"))

    def bias_for_offsets(self, offsets):
        """`A^r` in float32 for query-minus-key offsets `i - j` (an int tensor, each
        `|i - j| < max_len`): shape `(num_heads, *offsets.shape)`."""
        if self.parameterization == "lookup":
            return ops.take(ops.cast(self.biases, "float32"), offsets + self.max_len, axis=1)
        return ops.take(self.distance_profile(), offsets % (2 * self.max_len), axis=1)

    def relative_matrix(self, query_len, key_len):
        """`A^r[:, :query_len, :key_len]`, shape `(num_heads, query_len, key_len)`, float32."""
        return self.bias_for_offsets(query_key_offsets(ops.arange(query_len), key_len))

    def bias_float32(self, query_len, key_len):
        return self.relative_matrix(query_len, key_len)

    def get_config(self) -> dict:
        config = super().get_config()
        config.update({"max_len": self.max_len, "num_heads": self.num_heads, "parameterization": self.parameterization})
        return config
