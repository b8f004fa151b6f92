"""The modified attention core as one XLA program where TensorFlow would run it op by op.

Keras compiles a TensorFlow model with XLA only where it is asked to (`jit_compile=True`;
its default, "auto", leaves XLA off on a CPU): every op then runs alone, and the
modifications' many small ops (a convolution's shifted rows, Shaw's skews, the heads' mix)
each write and read a whole attention matrix. `MultiHeadAttention` then runs its modified
core, from the projections to the product with the values, as a `tf.function(jit_compile=True)`
of its own: an XLA island inside TensorFlow's graph, with the forms XLA runs fast (an eager
call runs op by op, as before: it would compile a program for each new layer and shape).
Keras' own attention, JAX (always XLA) and a step XLA already compiles are left as they are.

The island's gradient is a second XLA program that computes the forward again and
differentiates it: TensorFlow's own gradient of a compiled function would have the forward
return every intermediate its backward reads (for a convolution's or Shaw's forms a dozen
attention matrices), each written out and read back. The attention dropout's seed is set to
the same value in both, so the recomputation drops what the forward dropped. Where every
modification on keeps no more than the matrices the forward writes anyway (the talking heads'
mixings: `Modification.island_keeps`), TensorFlow's own gradient is taken: no second forward.

Whether the core is an island is `convatt.layers.forms.compile_core`, beside the other
checks of the backend and the compilation; this module only builds and runs it (TensorFlow's
`tf.function` and `tf.custom_gradient`, reached only where `compile_core` said so).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable

import keras

from convatt.layers.forms import tracing_island

_ISLANDS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
"""layer -> {(flags, which inputs are given): its island}; not an attribute of the layer (Keras
tracks a layer's attributes, and an island holding the layer would keep it alive)."""


def run_as_island(core: Callable, flags: tuple, tensors: tuple, seed_state=None, recompute: bool = True):
    """`core(*tensors, *flags)` -> `(output, attention)` as one XLA program, made once per
    `flags` (Python values) and per which `tensors` are None (no mask); the attention comes
    back only where `flags[1]` (`return_attention_scores`) asks for it, else None.
    `seed_state`: the dropout's seed variable where the call drops entries, else None.
    `recompute`: the backward computes the forward again (else TensorFlow's gradient of the
    compiled forward, which keeps what the backward reads: `ModifiedAttention.island_recomputes`)."""
    given = tuple(x is not None for x in tensors)
    islands = _ISLANDS.setdefault(core.__self__, {})
    if (flags, given) not in islands:
        islands[flags, given] = _island(weakref.WeakMethod(core), flags, given, seed_state, recompute)
    inputs = [x for x in tensors if x is not None]
    if seed_state is not None:
        inputs.append(keras.ops.convert_to_tensor(seed_state.value))  # its value before the forward
    outputs = islands[flags, given](*inputs)
    return outputs[0], (outputs[1] if len(outputs) > 1 else None)


def _island(core: weakref.WeakMethod, flags: tuple, given: tuple[bool, ...], seed_state, recompute: bool):
    """The island of one `(flags, given)`: the forward and, as its gradient, the recomputing
    backward, each one XLA program; or, without `recompute`, the forward alone (TensorFlow
    differentiates it: the forward then returns what its backward reads)."""
    import tensorflow as tf  # the backend's XLA; only reached under TensorFlow (`compile_core`)

    def forward(*inputs):
        if seed_state is not None:  # the dropout draws from the seed it had before the forward
            seed_state.assign(inputs[-1])
            inputs = inputs[:-1]
        given_inputs = iter(inputs)
        with tracing_island():  # the island's forms (`drop_in_forms`)
            output, attention = core()(*(next(given_inputs) if g else None for g in given), *flags)
        return (output, attention) if flags[1] else (output,)

    compiled = tf.function(forward, jit_compile=True)
    if not recompute:
        return compiled

    @tf.function(jit_compile=True)
    def backward(inputs, variables, upstream):
        floats = [x for x in inputs if x.dtype.is_floating]
        with tf.GradientTape() as tape:
            tape.watch(floats)
            outputs = forward(*inputs)
        return tape.gradient(outputs, [*floats, *variables], output_gradients=list(upstream))

    @tf.custom_gradient
    def island(*inputs):
        outputs = compiled(*inputs)

        def gradient(*upstream, variables=None):
            upstream = [tf.zeros_like(y) if g is None else g for y, g in zip(outputs, upstream)]
            grads = iter(backward(list(inputs), list(variables or ()), upstream))
            return [next(grads) if x.dtype.is_floating else None for x in inputs], list(grads)

        return outputs, gradient

    return island
