"""Learned absolute position embeddings (the paper's PE[add] / PE[con])."""

from __future__ import annotations

from typing import Any

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="convatt")
class PositionEmbedding(keras.layers.Layer):
    """A learned `(max_len, dim)` table of position vectors.

    Returns the embeddings of positions `0 .. t-1`, broadcast over the batch; the
    caller adds them to the word embeddings (PE[add]) or concatenates them
    (PE[con]). Only the first two input dimensions are read, so the input can be
    the embedded sequence `(batch, t, dim)` or the token ids `(batch, t)` (then
    `output_dim` is required). Masks are passed through.

    Args:
        max_len: int. The longest sequence; the number of table rows.
        output_dim: int or None. Width of the embeddings. `None` (default) uses
            the input's last dimension (for adding).
        initializer: initializer of the table. Defaults to `"uniform"`, the
            `keras.layers.Embedding` default (uniform in [-0.05, 0.05]).
        **kwargs: other keyword arguments passed to `keras.layers.Layer`.

    Call arguments:
        inputs: tensor of shape `(batch_size, t, ...)` with `t <= max_len`; a
            longer `t` raises a `ValueError` when `t` is known at call time
            (eager calls, and compiled calls traced with the batch's shape; a
            function retraced for any length fails inside the backend instead).

    Returns:
        Tensor of shape `(batch_size, t, dim)`: row `i` is the embedding of
        position `i`, in the layer's compute dtype.

    Weights:
        `embeddings` `(max_len, dim)`.

    Example:
    ```python
    words = keras.Input((60, 300))
    x = keras.layers.Add()([words, convatt.layers.PositionEmbedding(60)(words)])
    pe = convatt.layers.PositionEmbedding(60, output_dim=64)(words)  # PE[con]
    ```

    References:
     - [Dufter, Schmitt & Schütze, 2020](https://aclanthology.org/2020.coling-main.324/), §2.1, §2.3
     - [Gehring et al., 2017](https://arxiv.org/abs/1705.03122) (learned position embeddings)
    """

    def __init__(self, max_len: int, output_dim: int | None = None, initializer: Any = "uniform", **kwargs):
        super().__init__(**kwargs)
        self.max_len = int(max_len)
        self.output_dim = None if output_dim is None else int(output_dim)
        self.initializer = keras.initializers.get(initializer)
        self.supports_masking = True

    def _dim(self, input_shape) -> int:
        dim = self.output_dim if self.output_dim is not None else (input_shape[-1] if len(input_shape) >= 3 else None)
        if dim is None:
            raise ValueError(
                f"{self.name}: give `output_dim` or an input of shape (batch, t, dim) with a known dim; "
                f"received shape {input_shape}."
            )
        return int(dim)

    def _check_length(self, shape) -> None:
        if len(shape) < 2:
            raise ValueError(f"{self.name} expects inputs of shape (batch, t, ...); received {shape}.")
        if shape[1] is not None and shape[1] > self.max_len:
            raise ValueError(
                f"{self.name} was built for max_len={self.max_len} positions; received a sequence of "
                f"t={shape[1]} (input shape {tuple(shape)}). Truncate the inputs or use a larger max_len."
            )

    def build(self, input_shape):
        self._check_length(input_shape)
        self.embeddings = self.add_weight(
            name="embeddings", shape=(self.max_len, self._dim(input_shape)), initializer=self.initializer
        )

    def call(self, inputs):
        self._check_length(inputs.shape)  # built for unknown t, called with a longer one
        shape = ops.shape(inputs)
        positions = self.embeddings[: shape[1]]
        return ops.broadcast_to(ops.expand_dims(positions, 0), (shape[0], shape[1], self.embeddings.shape[-1]))

    def compute_output_shape(self, input_shape):
        return (input_shape[0], input_shape[1], self._dim(input_shape))

    def get_config(self) -> dict:
        config = super().get_config()
        config.update(
            {
                "max_len": self.max_len,
                "output_dim": self.output_dim,
                "initializer": keras.initializers.serialize(self.initializer),
            }
        )
        return config
