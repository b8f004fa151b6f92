"""1-d convolution over an attention matrix (Dufter et al., 2020, §2.5)."""

from __future__ import annotations

from typing import Any

import keras
from keras import ops

from convatt.layers._options import check_kernel_size
from convatt.layers._utils import check_scores_shape, per_head_initializer, query_tap_offsets, serialized


@keras.saving.register_keras_serializable(package="convatt")
class AttentionConv1D(keras.layers.Layer):
    """Per-head Conv1D over the query axis of an attention matrix ("+Conv").

    For each head `h` the `(query_len, key_len)` matrix `sigma(A)` is treated as a
    sequence of `query_len` steps whose `key_len` key columns are the channels,
    and convolved with `max_len` filters of width `kernel_size` ('same' padding,
    bias, `activation`), exactly as `keras.layers.Conv1D(max_len, kernel_size,
    padding="same")` would (a cross-correlation: for width 3,
    `out[i] = sum_t K[t] x[i + t - 1]`). For `key_len < max_len` the input and
    output channel dimensions of the kernel (and the bias) are cut to `key_len`,
    so the output has the input's shape. The paper applies it to the
    post-softmax attention and does not renormalise the result.

    All heads are computed at once: the `kernel_size` shifted copies of the
    padded input are laid side by side and multiplied with the
    `(head, tap, in, out)` kernel in one batched matmul.

    Args:
        max_len: int. The longest query / key length (= number of filters).
        num_heads: int. The number of attention heads.
        kernel_size: int. Filter width. Defaults to 3.
        activation: activation applied after the bias. Defaults to `"relu"`.
        kernel_initializer: initializer of each head's kernel, applied as to a
            Keras Conv1D kernel `(kernel_size, max_len, max_len)` per head.
            Defaults to `"glorot_uniform"` (the Conv1D default).
        bias_initializer: Defaults to `"zeros"`.
        **kwargs: other keyword arguments passed to `keras.layers.Layer`.

    Call arguments:
        attention: tensor of shape `(batch_size, num_heads, query_len, key_len)`
            with `query_len, key_len <= max_len`.

    Causal models: `convolve_float32(attention, causal=True)` puts the taps on
    rows `i - kernel_size + 1 .. i`, so row `i` of the output reads no later query
    (the attention layers do this under `use_causal_mask`).

    Returns:
        The convolved attention, same shape, in the layer's compute dtype.

    Mixed precision: the convolution (a sum over `kernel_size * key_len`
    terms) runs in float32 with the float32 weights, and only the result is
    cast to the compute dtype; `convolve_float32` returns it in float32 (used
    by `SelfAttention`, whose attention is float32 until it meets the values).

    Weights (in this order):
        `kernel` `(num_heads, kernel_size, max_len, max_len)` indexed
        `[head, tap, in, out]`; `bias` `(num_heads, max_len)`.
        `num_heads * (kernel_size * max_len**2 + max_len)` parameters.

    Example:
    ```python
    attention = keras.ops.softmax(np.random.rand(2, 4, 60, 60), axis=-1)
    layer = convatt.layers.AttentionConv1D(max_len=60, num_heads=4)
    out = layer(attention)  # (2, 4, 60, 60); 43,440 parameters
    ```

    References:
     - [Dufter, Schmitt & Schütze, 2020](https://aclanthology.org/2020.coling-main.324/)
    """

    def __init__(
        self,
        max_len: int,
        num_heads: int,
        kernel_size: int = 3,
        activation: Any = "relu",
        kernel_initializer: Any = "glorot_uniform",
        bias_initializer: Any = "zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.max_len = int(max_len)
        self.num_heads = int(num_heads)
        self.kernel_size = check_kernel_size("kernel_size", kernel_size, pair_allowed=False)
        self.activation = keras.activations.get(activation)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)

    def build(self, input_shape=None):
        if input_shape is not None:
            check_scores_shape(self.name, input_shape, self.num_heads, self.max_len)
        shape = (self.num_heads, self.kernel_size, self.max_len, self.max_len)
        self.kernel = self.add_weight(
            name="kernel",
            shape=shape,
            initializer=per_head_initializer(self.kernel_initializer, shape, shape[1:]),
            autocast=False,  # the convolution runs in float32 (convolve_float32)
        )
        self.bias = self.add_weight(
            name="bias", shape=(self.num_heads, self.max_len), initializer=self.bias_initializer, autocast=False
        )

    def call(self, attention):
        return ops.cast(self.convolve_float32(attention), self.compute_dtype)

    def convolve_float32(self, attention, causal: bool = False, future_open=None):
        """The convolution of `attention`, computed and returned in float32.

        Args:
            attention: `(batch, num_heads, query_len, key_len)`.
            causal: put the query taps on rows `i - kernel_size + 1 .. i` (a causal
                model) instead of centring them on row `i` ('same' padding).
            future_open: optional float `(batch, 1, 1, 1)` multiplying the taps on
                later rows (0 drops them: a causal mask).
        """
        check_scores_shape(self.name, attention.shape, self.num_heads, self.max_len)
        attention = ops.cast(attention, "float32")
        shape = ops.shape(attention)
        query_len, key_len = shape[-2], shape[-1]
        offsets = query_tap_offsets(self.kernel_size, causal)
        padded = ops.pad(attention, [[0, 0], [0, 0], [-offsets[0], max(offsets[-1], 0)], [0, 0]])
        # Row i of `windows` holds input rows i + offsets side by side (tap-major), so
        # one batched matmul with the (head, tap * in, out) kernel does all heads and
        # taps (faster on CPU than an einsum over stacked taps).
        taps = []
        for tap, offset in enumerate(offsets):
            rows = padded[:, :, tap : tap + query_len, :]
            taps.append(rows * future_open if offset > 0 and future_open is not None else rows)
        windows = ops.concatenate(taps, axis=-1)  # (batch, head, query, tap * key)
        kernel = ops.cast(self.kernel[:, :, :key_len, :key_len], "float32")
        kernel = ops.reshape(kernel, (self.num_heads, -1, key_len))
        outputs = ops.matmul(windows, ops.expand_dims(kernel, 0))
        outputs = outputs + ops.expand_dims(ops.cast(self.bias[:, :key_len], "float32"), 1)
        return self.activation(outputs)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "max_len": self.max_len,
            "num_heads": self.num_heads,
            "kernel_size": self.kernel_size,
            **serialized(self, "activation", "kernel_initializer", "bias_initializer"),
        }
