"""RMSprop as Keras 2.2.4 computed it, the optimizer of the paper's code."""

from __future__ import annotations

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="convatt")
class RMSpropKeras2(keras.optimizers.RMSprop):
    """RMSprop with Keras 2.2.4's update rule (`keras/optimizers.py`, `RMSprop.get_updates`).

    Per weight `p` with gradient `g` and running average `a` (zeros at the start):

        a <- rho * a + (1 - rho) * g^2
        p <- p - lr * g / (sqrt(a) + epsilon)

    Keras 3's `RMSprop` divides by `sqrt(a + epsilon)` instead, which for weights
    whose `a` is below about `epsilon` (1e-7) is a much smaller step: in the tagger,
    the first layer's query and key kernels moved 30-170x less per step. The
    defaults are Keras 2.2.4's (lr 0.001, rho 0.9, epsilon 1e-7), as the paper's
    code used them. A sparse gradient (an embedding's, under TensorFlow: one slice per
    occurrence of a row id) is made dense first, repeated rows summed, and then
    squared, as Keras 2.2.4 did (`K.square` converted the `IndexedSlices`); squaring
    each slice on its own would let a row that occurs n times in a batch take up to
    about sqrt(n) times the step (the PAD row 16x in a UD batch). `a` decays for every
    row at every step, as in Keras 2.2.4. Under JAX gradients are dense already.
    The arithmetic runs in the variable's dtype (float32 under mixed precision).

    Args:
        learning_rate: float. Defaults to 0.001.
        rho: float. Decay of the squared-gradient average. Defaults to 0.9.
        epsilon: float. Added to `sqrt(a)`. Defaults to 1e-7.
        **kwargs: other arguments of `keras.optimizers.Optimizer` (no momentum,
            not centered: Keras 2.2.4 had neither).

    Example:
    ```python
    model.compile(optimizer=convatt.protocol.optimizers.RMSpropKeras2(), loss="mse")
    ```
    """

    def __init__(
        self, learning_rate=0.001, rho: float = 0.9, epsilon: float = 1e-7, name: str = "rmsprop_keras2", **kwargs
    ):
        if kwargs.get("momentum") or kwargs.get("centered"):
            raise ValueError("RMSpropKeras2 has no momentum and is not centered (Keras 2.2.4 had neither)")
        kwargs.pop("momentum", None)
        kwargs.pop("centered", None)
        super().__init__(learning_rate=learning_rate, rho=rho, epsilon=epsilon, name=name, **kwargs)

    def update_step(self, gradient, variable, learning_rate):
        lr = ops.cast(learning_rate, variable.dtype)
        gradient = ops.cast(dense_gradient(gradient), variable.dtype)
        velocity = self._velocities[self._get_variable_index(variable)]
        self.assign(
            velocity, ops.add(ops.multiply(self.rho, velocity), ops.multiply(1 - self.rho, ops.square(gradient)))
        )
        step = ops.divide(ops.multiply(lr, gradient), ops.add(ops.sqrt(velocity), self.epsilon))
        self.assign_sub(variable, step)


def dense_gradient(gradient):
    """`gradient` as a dense tensor, a TensorFlow `IndexedSlices` with its repeated rows summed.

    The one piece of one backend's semantics here: TensorFlow gives an embedding's
    gradient as `IndexedSlices`, which Keras 3's sparse-aware ops would square slice by
    slice; `tf.convert_to_tensor` sums the slices of a row first, as Keras 2.2.4 did.
    Other backends' gradients are dense already and pass through.
    """
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        if isinstance(gradient, tf.IndexedSlices):
            return tf.convert_to_tensor(gradient)
    return ops.convert_to_tensor(gradient)
