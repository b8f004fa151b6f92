"""Learnable temperature (Dufter et al., 2020, §2.4): `scale_by_temperature`, and the dense
projection scaled by one learnable scalar."""

from __future__ import annotations

from typing import Any

import keras
from keras import ops

from convatt.layers._utils import serialized


def scale_by_temperature(projected, gamma):
    """`projected` times its temperature `gamma` (broadcast to it), in `projected`'s dtype: the
    one place a temperature meets a projection (`TemperatureDense`, and the `temperature`
    row of `convatt.layers.core.modifications.MODIFICATIONS` for the attention layers)."""
    return projected * ops.cast(gamma, projected.dtype)


@keras.saving.register_keras_serializable(package="convatt")
class TemperatureDense(keras.layers.Layer):
    """`gamma * (x @ W)` with a learnable scalar `gamma` ("learnable temperature").

    The paper multiplies each of the attention weight matrices `W_q, W_k, W_v` by
    its own trainable scalar initialised to 1; `gamma_q * gamma_k` then acts as
    the (inverse) temperature of the attention softmax. `SelfAttention` and
    `MultiHeadAttention` (`temperature=True`) hold these scalars themselves, one
    per head and projection in one `(3, num_heads)` weight; this layer is the
    stand-alone form for one matrix (one head's projection in a per-head model,
    as the original code built it), scaled by the same `scale_by_temperature`.
    Masks are passed through.

    Args:
        units: int. Width of the output.
        use_bias: bool. Whether to add a bias after scaling (the paper's
            projections have none). Defaults to `False`.
        kernel_initializer: initializer for `W`. Defaults to `"glorot_uniform"`.
        bias_initializer: initializer for the bias. Defaults to `"zeros"`.
        gamma_initializer: initializer for `gamma`. Defaults to `"ones"`.
        **kwargs: other keyword arguments passed to `keras.layers.Layer`.

    Call arguments:
        inputs: tensor of shape `(..., input_dim)`.

    Returns:
        `gamma * (inputs @ W) (+ bias)`, shape `(..., units)`.

    Weights (in this order):
        `kernel` `(input_dim, units)`, `gamma` `()`, and `bias` `(units,)` when
        `use_bias`.

    Example:
    ```python
    x = np.random.rand(2, 60, 364).astype("float32")
    layer = convatt.layers.TemperatureDense(91)
    y = layer(x)  # (2, 60, 91); 364 * 91 + 1 = 33,125 parameters
    ```

    References:
     - [Dufter, Schmitt & Schütze, 2020](https://aclanthology.org/2020.coling-main.324/)
    """

    def __init__(
        self,
        units: int,
        use_bias: bool = False,
        kernel_initializer: Any = "glorot_uniform",
        bias_initializer: Any = "zeros",
        gamma_initializer: Any = "ones",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.units = int(units)
        self.use_bias = bool(use_bias)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.gamma_initializer = keras.initializers.get(gamma_initializer)
        self.supports_masking = True

    def build(self, input_shape):
        input_dim = input_shape[-1]
        if input_dim is None:
            raise ValueError(f"{self.name}: the last input dimension must be known; received shape {input_shape}.")
        self.kernel = self.add_weight(
            name="kernel", shape=(int(input_dim), self.units), initializer=self.kernel_initializer
        )
        self.gamma = self.add_weight(name="gamma", shape=(), initializer=self.gamma_initializer)
        self.bias = None
        if self.use_bias:
            self.bias = self.add_weight(name="bias", shape=(self.units,), initializer=self.bias_initializer)

    def call(self, inputs):
        outputs = scale_by_temperature(ops.matmul(inputs, self.kernel), self.gamma)
        if self.bias is not None:
            outputs = outputs + self.bias
        return outputs

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self.units,)

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "units": self.units,
            "use_bias": self.use_bias,
            **serialized(self, "kernel_initializer", "bias_initializer", "gamma_initializer"),
        }
