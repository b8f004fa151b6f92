"""`convatt bench --attention`: convatt's `MultiHeadAttention` against Keras' own layer.

For each sequence length and each mask (causal: `use_causal_mask=True`; bidirectional:
none), one compiled training step per layer: the loss `mean(output**2)` of self-attention
on a random batch and its gradient with respect to the layer's trainable weights. Under
JAX `stateless_call` under `jax.jit` / `jax.value_and_grad` (what `fit` compiles, less the
optimizer); under TensorFlow what a user of `fit` runs: the layer in a Keras model,
`model.train_on_batch` (gradient and an SGD update) compiled with `jit_compile=True` (XLA)
and with `jit_compile=False` (TensorFlow's graph, op by op), each `jit_compile` of
`jit_compile` a table of its own, each against Keras' layer compiled the same way; the
attention core as a layer whose weights are Q, K and V. Timed: the median of `repeats` steps
after `warmup` untimed ones, the layers' steps interleaved (reversed every other
repeat) so that a change in the machine's load hits all alike. Memory (JAX only): the
compiled program's memory analysis, `temp + argument + output` bytes: the buffers XLA
plans for the program, deterministic (a GPU's plan differs in its fusions). `seed` draws
the inputs; the weights are the layers' own initial ones.

Two references, built and timed in the same process: Keras' `MultiHeadAttention`
with the same `num_heads` and `key_dim` (the ratios' denominator), and the attention
core alone, `softmax(Q K^T / sqrt(d)) V` on given Q, K, V (gradient with respect to
them): what the attention matrix itself costs in time and working memory. A
modification "costs more than the attention matrix" where its extra temporary bytes
over Keras' layer exceed one attention matrix (`batch * heads * length**2` numbers of
the compute dtype), or where its extra step time over Keras' layer exceeds the core's step time.
The modifications with weights per position are built with `max_len` = the length.

With `cross_backend`, Keras' layer is also timed under each backend and compiler (JAX,
TensorFlow with and without XLA), each backend in a process of its own
(`cross_backend.py`): the steps against the fastest on the machine, which
the ratios above, each against its own backend's Keras layer, do not show.

`dtype_policy` builds every layer (and casts the core's inputs) in a Keras dtype policy,
e.g. "mixed_bfloat16"; the attention matrix is then counted in the compute dtype. Where
Keras' flash path can run (JAX on a GPU or TPU, a 16-bit compute dtype: cuDNN's fused
attention takes no float32), Keras' layer with `flash_attention=True` is a third
reference row; the ratios stay over Keras' default layer (which takes the flash path by
itself where it can).
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import keras
import numpy as np
from keras import ops

from convatt.speed.attention_bench.settings import CORE, KERAS, KERAS_FLASH, XLA, AttentionSettings


@dataclass(frozen=True)
class CompiledStep:
    """A compiled training step: `run()` runs it to completion; its memory analysis (JAX) or None."""

    run: Callable[[], None]
    temp_bytes: int | None = None
    total_bytes: int | None = None


def _compile_jax(loss: Callable, params: list, x) -> CompiledStep:
    import jax

    compiled = jax.jit(jax.value_and_grad(loss)).lower(params, x).compile()
    memory = compiled.memory_analysis()
    temp = int(memory.temp_size_in_bytes)
    total = temp + int(memory.argument_size_in_bytes) + int(memory.output_size_in_bytes)
    return CompiledStep(lambda: jax.block_until_ready(compiled(params, x)), temp, total)


def _fit_step(outputs_of: Callable, x, jit_compile: bool) -> CompiledStep:
    """TensorFlow: `model.train_on_batch` of a Keras model `x -> outputs_of(x)` (the loss
    `mean(output**2)`, an SGD update), its step compiled as `fit` compiles it, with or without XLA."""
    inputs = keras.Input(batch_shape=tuple(x.shape))
    model = keras.Model(inputs, outputs_of(inputs))
    model.compile(optimizer=keras.optimizers.SGD(1e-3), loss="mean_squared_error", jit_compile=jit_compile)
    target = np.zeros(model.output.shape, "float32")

    def run() -> None:  # its loss returned as a NumPy number: the step has finished, on any device
        model.train_on_batch(x, target)

    import tensorflow as tf

    logger = tf.get_logger()
    level = logger.level
    logger.setLevel("ERROR")  # not its warning that each model's new step is traced
    try:
        run()  # traced and compiled here, not in the first timed run
    finally:
        logger.setLevel(level)
    return CompiledStep(run)


def layer_step(layer: keras.layers.MultiHeadAttention, x, causal: bool, jit_compile: bool = True) -> CompiledStep:
    """The training step of self-attention `layer(x, x)`: gradient with respect to its trainable weights."""
    if keras.backend.backend() == "tensorflow":
        return _fit_step(lambda inputs: layer(inputs, inputs, use_causal_mask=causal), x, jit_compile)
    layer.build(tuple(x.shape), tuple(x.shape))
    non_trainable = [v.value for v in layer.non_trainable_variables]

    def loss(trainable, x):
        output, _ = layer.stateless_call(trainable, non_trainable, x, x, use_causal_mask=causal)
        return ops.mean(ops.square(ops.cast(output, "float32")))  # a mixed policy's loss in float32

    return _compile_jax(loss, [ops.convert_to_tensor(v.value) for v in layer.trainable_variables], x)


def core_attention(query, key, value, causal: bool):
    """`softmax(Q K^T / sqrt(d)) V` of `(batch, length, heads, d)` tensors, causal or not."""
    scores = ops.einsum("bqhd,bkhd->bhqk", query, key) * (1.0 / math.sqrt(query.shape[-1]))
    if causal:
        length = query.shape[1]
        rows, cols = ops.arange(length)[:, None], ops.arange(length)[None, :]
        scores = ops.where(ops.greater_equal(rows, cols), scores, -1e9)
    return ops.einsum("bhqk,bkhd->bqhd", ops.softmax(scores, axis=-1), value)


class _CoreLayer(keras.layers.Layer):
    """The attention core as a layer (TensorFlow's `fit` step): Q, K and V its weights, the
    input (zeros) added to the queries, as a model needs an input."""

    def __init__(self, qkv: list, causal: bool, **kwargs):
        super().__init__(**kwargs)
        self.qkv = [self.add_weight(shape=tuple(t.shape), initializer="zeros") for t in qkv]
        for weight, value in zip(self.qkv, qkv):
            weight.assign(value)
        self.causal = causal

    def call(self, zeros):
        query, key, value = (ops.cast(w, self.compute_dtype) for w in self.qkv)
        return core_attention(query + ops.cast(zeros, query.dtype), key, value, self.causal)


def _core_step(
    settings: AttentionSettings, length: int, causal: bool, rng: np.random.Generator, jit_compile: bool = True
) -> CompiledStep:
    """The training step of `softmax(Q K^T / sqrt(d)) V` alone: gradient with respect to Q, K, V."""
    shape = (settings.batch_size, length, settings.num_heads, settings.key_dim)
    qkv = [rng.normal(size=shape).astype("float32") for _ in range(3)]
    if keras.backend.backend() == "tensorflow":
        layer = _CoreLayer(qkv, causal, dtype=settings.dtype_policy)
        return _fit_step(layer, ops.zeros(shape), jit_compile)

    def loss(qkv, x):
        output = core_attention(*qkv, causal)
        return ops.mean(ops.square(ops.cast(output, "float32")))

    return _compile_jax(loss, [ops.cast(t, settings.compute_dtype) for t in qkv], ops.zeros(()))


def _inputs(settings: AttentionSettings, length: int):
    """The random generator (`seed`), the batch `x` drawn from it and the layers' shape options."""
    rng = np.random.default_rng(settings.seed)
    features = settings.num_heads * settings.key_dim
    x = ops.convert_to_tensor(rng.normal(size=(settings.batch_size, length, features)).astype("float32"))
    return rng, x, dict(num_heads=settings.num_heads, key_dim=settings.key_dim, dtype=settings.dtype_policy)


def keras_steps(settings: AttentionSettings, length: int, causal: bool, compiler: str = XLA) -> dict:
    """Keras' layer's step alone (`{KERAS: step}`), as `all_steps` makes it."""
    _, x, shape = _inputs(settings, length)
    return {KERAS: layer_step(keras.layers.MultiHeadAttention(**shape), x, causal, compiler == XLA)}


def all_steps(settings: AttentionSettings, length: int, causal: bool, compiler: str = XLA) -> dict[str, CompiledStep]:
    """Keras' layer, the attention core and each case's layer at one length and mask, compiled."""
    from convatt.layers import MultiHeadAttention

    rng, x, shape = _inputs(settings, length)
    jit = compiler == XLA
    steps = {KERAS: layer_step(keras.layers.MultiHeadAttention(**shape), x, causal, jit)}
    if flash_possible(settings):
        steps.update(_flash_step(shape, x, causal))
    steps[CORE] = _core_step(settings, length, causal, rng, jit)
    for case in settings.selected_cases():
        layer = MultiHeadAttention(**shape, max_len=length, **case.options)
        steps[case.name] = unless_out_of_memory(lambda layer=layer: layer_step(layer, x, causal, jit))
    return steps


def unless_out_of_memory(make: Callable[[], CompiledStep]) -> CompiledStep:
    """`make()`, or where compiling it ran out of memory (TensorFlow runs a step to compile it),
    a step that raises that error when run (`median_times` makes it NaN)."""
    try:
        return make()
    except Exception as error:
        if not out_of_memory(error):
            raise
        lacking = error  # `error` is unbound after the `except` block

        def run() -> None:
            raise lacking

        return CompiledStep(run)


def flash_possible(settings: AttentionSettings) -> bool:
    """Whether Keras' flash path may run: JAX on a GPU or TPU with a 16-bit compute dtype."""
    from convatt.layers.forms import on_accelerator

    return keras.backend.backend() == "jax" and settings.compute_dtype != "float32" and on_accelerator()


def _flash_step(shape: dict, x, causal: bool) -> dict[str, CompiledStep]:
    """Keras' layer with `flash_attention=True`, or nothing (said on stderr) where Keras refuses it here."""
    try:
        layer = keras.layers.MultiHeadAttention(**shape, flash_attention=True)
        return {KERAS_FLASH: layer_step(layer, x, causal)}
    except Exception as e:  # Keras' checks or the fused kernel's refusal: the row is left out, not the run
        print(f"Keras' flash attention unavailable: {str(e).strip().splitlines()[-1].strip()}", file=sys.stderr)
        return {}


def median_times(steps: dict[str, CompiledStep], repeats: int, warmup: int) -> dict[str, float]:
    """Median seconds of each step over `repeats`, after `warmup` untimed runs; interleaved. A
    step that runs out of memory is NaN ("out of memory" in the tables), said on stderr."""
    medians = {}
    for name, step in steps.items():
        try:
            for _ in range(max(warmup, 1) if repeats else warmup):  # a first run finds a lack of memory
                step.run()
        except Exception as error:  # the backend's own error type; anything but a lack of memory is raised
            if not out_of_memory(error):
                raise
            print(f"  {name}: out of memory ({str(error).strip().splitlines()[0][:120]})", file=sys.stderr)
            medians[name] = math.nan
    fitting = [name for name in steps if name not in medians]
    times: dict[str, list[float]] = {name: [] for name in fitting}
    for repeat in range(repeats):
        for name in sorted(fitting, reverse=repeat % 2 == 1):
            start = time.perf_counter()
            steps[name].run()
            times[name].append(time.perf_counter() - start)
    return medians | {name: float(np.median(t)) for name, t in times.items()}


def out_of_memory(error: Exception) -> bool:
    """Whether `error` is a backend's (or Python's) lack of memory: TensorFlow's
    `ResourceExhaustedError`, XLA's `RESOURCE_EXHAUSTED`, `MemoryError`."""
    text = f"{type(error).__name__}: {error}"
    return isinstance(error, MemoryError) or any(
        mark in text for mark in ("ResourceExhausted", "RESOURCE_EXHAUSTED", "Out of memory")
    )
