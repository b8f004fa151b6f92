"""2-d convolution over an attention matrix (Dufter et al., 2020, §2.5)."""

from __future__ import annotations

from typing import Any

import keras
from keras import ops

from convatt.layers._utils import check_scores_shape, per_head_initializer, query_tap_offsets


def kernel_pair(kernel_size) -> tuple[int, int]:
    """`(rows, cols)` of a filter given as an int (square) or a pair `(query_taps, key_taps)`."""
    if isinstance(kernel_size, (list, tuple)):
        if len(kernel_size) != 2:
            raise ValueError(f"kernel_size must be an int or a pair (query_taps, key_taps); received {kernel_size!r}.")
        return int(kernel_size[0]), int(kernel_size[1])
    return int(kernel_size), int(kernel_size)


@keras.saving.register_keras_serializable(package="convatt")
class AttentionConv2D(keras.layers.Layer):
    """Per-head single-filter Conv2D over an attention matrix ("+Conv2d").

    Each head's `(query_len, key_len)` matrix is filtered by its own
    `kernel_size x kernel_size` filter (or `query_taps x key_taps` for a pair,
    e.g. `(2, 9)` as Multi-Token Attention's key-query convolution) plus a scalar bias, with 'same' padding
    and `activation`, exactly as `keras.layers.Conv2D(1, kernel_size,
    padding="same")` on a one-channel image would (a cross-correlation). It
    smooths the attention pattern over neighbouring query and key positions;
    the result is not renormalised. Any query / key length works.

    Args:
        num_heads: int. The number of attention heads.
        kernel_size: int, filter height and width, or a pair `(query_taps,
            key_taps)`. Defaults to 3.
        activation: Defaults to `"relu"`.
        kernel_initializer: initializer of each head's filter, applied as to a
            Keras Conv2D kernel `(kernel_size, kernel_size, 1, 1)` per head.
            Defaults to `"glorot_uniform"`.
        bias_initializer: Defaults to `"zeros"`.
        **kwargs: other keyword arguments passed to `keras.layers.Layer`.

    Call arguments:
        attention: tensor of shape `(batch_size, num_heads, query_len, key_len)`.

    Returns:
        The convolved attention, same shape, in the layer's compute dtype.

    Causal models: `convolve_float32(attention, causal=True)` puts the filter's
    rows on query rows `i - query_taps + 1 .. i` (as Multi-Token Attention's
    causal key-query convolution), so row `i` of the output reads no later query;
    the key axis stays centred (masked entries are 0, so later keys add nothing).

    Mixed precision: the convolution runs in float32 with the float32
    weights, and only the result is cast to the compute dtype;
    `convolve_float32` returns it in float32 (used by `SelfAttention`).

    Weights (in this order):
        `kernel` `(num_heads, query_taps, key_taps)` indexed
        `[head, row_tap, col_tap]`; `bias` `(num_heads,)`.

    Example:
    ```python
    attention = keras.ops.softmax(np.random.rand(2, 4, 60, 60), axis=-1)
    layer = convatt.layers.AttentionConv2D(num_heads=4)
    out = layer(attention)  # (2, 4, 60, 60); 40 parameters
    ```

    References:
     - [Dufter, Schmitt & Schütze, 2020](https://aclanthology.org/2020.coling-main.324/)
    """

    def __init__(
        self,
        num_heads: int,
        kernel_size: int = 3,
        activation: Any = "relu",
        kernel_initializer: Any = "glorot_uniform",
        bias_initializer: Any = "zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.num_heads = int(num_heads)
        self.kernel_size = kernel_pair(kernel_size) if isinstance(kernel_size, (list, tuple)) else int(kernel_size)
        if min(kernel_pair(self.kernel_size)) < 1:
            raise ValueError(f"kernel_size must be >= 1; received {kernel_size}.")
        self.activation = keras.activations.get(activation)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)

    def build(self, input_shape=None):
        if input_shape is not None:
            check_scores_shape(self.name, input_shape, self.num_heads)
        rows, cols = kernel_pair(self.kernel_size)
        shape = (self.num_heads, rows, cols)
        self.kernel = self.add_weight(
            name="kernel",
            shape=shape,
            initializer=per_head_initializer(self.kernel_initializer, shape, (rows, cols, 1, 1)),
            autocast=False,  # the convolution runs in float32 (convolve_float32)
        )
        self.bias = self.add_weight(
            name="bias", shape=(self.num_heads,), initializer=self.bias_initializer, autocast=False
        )

    def call(self, attention):
        return ops.cast(self.convolve_float32(attention), self.compute_dtype)

    def convolve_float32(self, attention, causal: bool = False, future_open=None):
        """The convolution of `attention`, computed and returned in float32.

        Args:
            attention: `(batch, num_heads, query_len, key_len)`.
            causal: put the filter's rows on query rows `i - rows + 1 .. i` (a causal
                model) instead of centring them on row `i` ('same' padding).
            future_open: optional float `(batch, 1, 1, 1)` multiplying the filter rows
                that read later query rows (0 drops them: a causal mask).
        """
        check_scores_shape(self.name, attention.shape, self.num_heads)
        rows, cols = kernel_pair(self.kernel_size)
        # One filter per head = a depthwise convolution with the heads as channels
        # (channels-last). (Much faster than stacking the shifted windows: 7 vs 150 ms on CPU.)
        images = ops.transpose(ops.cast(attention, "float32"), (0, 2, 3, 1))
        kernel = ops.cast(self.kernel, "float32")
        if causal:  # all rows on the past: pad the query axis before only, the key axis as 'same'
            left = (cols - 1) // 2
            images = ops.pad(images, [[0, 0], [rows - 1, 0], [left, cols - 1 - left], [0, 0]])
            outputs = self._depthwise(images, kernel, "valid")
        elif future_open is None:
            outputs = self._depthwise(images, kernel, "same")
        else:  # the rows reading later queries apart, weighted by future_open
            later = ops.reshape(ops.cast(ops.greater(query_tap_offsets(rows, False), 0), "float32"), (1, rows, 1))
            outputs = self._depthwise(images, kernel * (1.0 - later), "same")
            outputs = outputs + self._depthwise(images, kernel * later, "same") * future_open
        bias = ops.reshape(ops.cast(self.bias, "float32"), (1, self.num_heads, 1, 1))
        return self.activation(ops.transpose(outputs, (0, 3, 1, 2)) + bias)

    @staticmethod
    def _depthwise(images, kernel, padding: str):
        """`images` `(b, q, k, heads)` filtered by `kernel` `(heads, rows, cols)`; as `(b, q, k, heads)`."""
        return ops.depthwise_conv(images, ops.expand_dims(ops.transpose(kernel, (1, 2, 0)), -1), padding=padding)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)

    def get_config(self) -> dict:
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "kernel_size": self.kernel_size,
                "activation": keras.activations.serialize(self.activation),
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            }
        )
        return config
