"""Fixed sinusoidal position encodings (Vaswani et al., 2017)."""

from __future__ import annotations

import keras
import numpy as np
from keras import ops


@keras.saving.register_keras_serializable(package="convatt")
class SinusoidalPositionEncoding(keras.layers.Layer):
    """Adds the Transformer's sinusoidal position encodings to its input.

    `PE[pos, 2i] = sin(pos / max_wavelength^(2i / d))` and
    `PE[pos, 2i + 1] = cos(pos / max_wavelength^(2i / d))` for a model width `d`
    (an odd `d` ends with a sine column). No weights; any sequence length works.
    Masks are passed through.

    Args:
        max_wavelength: float. The longest wavelength, 10000 in the Transformer.
        **kwargs: other keyword arguments passed to `keras.layers.Layer`.

    Call arguments:
        inputs: tensor of shape `(batch_size, t, d)`.

    Returns:
        `inputs + PE[:t]`, same shape.

    Example:
    ```python
    x = np.zeros((2, 60, 300), "float32")
    y = convatt.layers.SinusoidalPositionEncoding()(x)  # y[0] == PE[:60]
    ```

    References:
     - [Vaswani et al., 2017](https://arxiv.org/abs/1706.03762), §3.5
    """

    def __init__(self, max_wavelength: float = 10000.0, **kwargs):
        super().__init__(**kwargs)
        self.max_wavelength = float(max_wavelength)
        self.supports_masking = True

    def build(self, input_shape):
        if len(input_shape) != 3 or input_shape[-1] is None:
            raise ValueError(
                f"{self.name} expects inputs of shape (batch, t, d) with a known d; received {input_shape}."
            )

    def encoding(self, length, dim: int):
        """`PE[:length]`, shape `(length, dim)`, in the layer's compute dtype."""
        i = np.arange(dim)
        # Column 2i and 2i+1 share the frequency 1 / max_wavelength^(2i/d).
        inverse_freq = ops.convert_to_tensor(self.max_wavelength ** (-(2 * (i // 2)) / dim), dtype="float32")
        positions = ops.cast(ops.arange(length), "float32")
        angles = ops.expand_dims(positions, 1) * ops.expand_dims(inverse_freq, 0)
        is_even = ops.convert_to_tensor(i % 2 == 0)
        return ops.cast(ops.where(is_even, ops.sin(angles), ops.cos(angles)), self.compute_dtype)

    def call(self, inputs):
        length = ops.shape(inputs)[1]
        return inputs + ops.expand_dims(self.encoding(length, int(inputs.shape[-1])), 0)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)

    def get_config(self) -> dict:
        config = super().get_config()
        config.update({"max_wavelength": self.max_wavelength})
        return config
