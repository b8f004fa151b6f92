"""Values and gradients of a function of keras tensors, on the backend the tests run under
(the kernels' equality tests compare the new kernels' gradients with the earlier formulas')."""

from __future__ import annotations

from collections.abc import Callable

import keras
import numpy as np


def value_and_gradients(function: Callable, *arrays: np.ndarray, xla: bool = False) -> list[np.ndarray]:
    """`[function(*arrays), d sum(function * weights) / d array for each array]`, as NumPy; the
    weights a fixed random pattern (so that every output entry counts differently). With `xla`,
    under TensorFlow in a `tf.function(jit_compile=True)` (JAX: always one XLA program)."""
    tensors = [keras.ops.convert_to_tensor(a.astype("float32")) for a in arrays]
    if keras.backend.backend() == "jax":
        import jax

        def loss(*xs):
            out = function(*xs)
            return keras.ops.sum(out * _pattern(out.shape)), out

        step = jax.jit(jax.value_and_grad(loss, argnums=tuple(range(len(tensors))), has_aux=True))
        (_, out), grads = step(*tensors)  # one compiled program (op by op, JAX compiles every op)
    else:
        import tensorflow as tf

        def step(*xs):
            with tf.GradientTape() as tape:
                tape.watch(xs)
                out = function(*xs)
                total = keras.ops.sum(out * _pattern(out.shape))
            return out, tape.gradient(total, xs)

        out, grads = (tf.function(step, jit_compile=True) if xla else step)(*tensors)
    return [keras.ops.convert_to_numpy(t) for t in (out, *grads)]


def _pattern(shape) -> np.ndarray:
    return np.random.default_rng(123).uniform(-1, 1, size=tuple(shape)).astype("float32")
