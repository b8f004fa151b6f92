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
(`convatt.speed.cross_backend`): the steps against the fastest on the machine, which
the ratios above, each against its own backend's Keras layer, do not show.

`dtype_policy` builds every layer (and casts the core's inputs) in a Keras dtype policy,
e.g. "mixed_bfloat16"; the attention matrix is then counted in the compute dtype. Where
Keras' flash path can run (JAX on a GPU or TPU, a 16-bit compute dtype: cuDNN's fused
attention takes no float32), Keras' layer with `flash_attention=True` is a third
reference row; the ratios stay over Keras' default layer (which takes the flash path by
itself where it can).
"""

from __future__ import annotations

import csv
import math
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import keras
import numpy as np
from keras import ops

KERAS = "Keras' layer"
KERAS_FLASH = "Keras' layer, flash attention"
CORE = "attention core"
DTYPE_POLICIES = ("float32", "mixed_bfloat16", "mixed_float16", "bfloat16", "float16")
COMPUTE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}  # bytes of one number of each compute dtype
MASKS = {"causal": True, "bidirectional": False}  # `use_causal_mask` of each mask's name
XLA, NO_XLA = "XLA", "no XLA"  # how a step is compiled: one XLA program (JAX, `jit_compile=True`), or TF's graph


@dataclass(frozen=True)
class AttentionCase:
    """One row of the benchmark: its key (`--cases`), its name in the tables, and the
    modification options of `convatt.layers.MultiHeadAttention`."""

    key: str
    name: str
    options: dict[str, Any] = field(default_factory=dict)


ATTENTION_CASES: tuple[AttentionCase, ...] = (
    AttentionCase("none", "none"),
    AttentionCase("p-r", "+P+R", {"position_interaction": True, "relative_bias": True}),
    AttentionCase("temp", "+Temp", {"temperature": True}),
    AttentionCase("shaw", "Shaw k=16", {"relative_position_representation": 16}),
    AttentionCase("alibi", "ALiBi", {"alibi": True}),
    AttentionCase("conv", "+Conv (1d)", {"attention_conv": "1d"}),
    AttentionCase("conv2d", "+Conv2d", {"attention_conv": "2d"}),
    AttentionCase(
        "mta",
        "Conv2d (2, 9) before softmax",
        {"attention_conv": "2d", "conv_kernel_size": (2, 9), "conv_before_softmax": True},
    ),
    AttentionCase("talking-heads", "talking heads", {"talking_heads": True}),
)
"""The modifications timed, each alone; "none" is convatt's layer with none on (= Keras');
"mta" is Multi-Token Attention's key-query convolution."""
CASE_KEYS = tuple(case.key for case in ATTENTION_CASES)


@dataclass(frozen=True)
class AttentionSettings:
    """What is measured: the lengths, the batch and head shapes, the repeats."""

    lengths: tuple[int, ...] = (64, 128, 256, 512, 1024)
    masks: tuple[str, ...] = tuple(MASKS)
    cases: tuple[str, ...] = CASE_KEYS
    batch_size: int = 2
    num_heads: int = 4
    key_dim: int = 32
    repeats: int = 5
    warmup: int = 1
    seed: int = 0
    dtype_policy: str = "float32"
    jit_compile: tuple[bool, ...] = (True, False)  # TensorFlow's `fit` steps timed; JAX always compiles with XLA
    cross_backend: bool = True  # also Keras' layer under each backend, each in a process of its own

    def compilers(self, backend: str) -> tuple[str, ...]:
        """`XLA` and / or `NO_XLA`: the compilations timed under `backend` (JAX: XLA only)."""
        return (XLA,) if backend != "tensorflow" else tuple(XLA if jit else NO_XLA for jit in self.jit_compile)

    def selected_cases(self) -> list[AttentionCase]:
        """The `ATTENTION_CASES` of `cases`, in the table's order."""
        return [case for case in ATTENTION_CASES if case.key in self.cases]

    @property
    def compute_dtype(self) -> str:
        """The layers' compute dtype under `dtype_policy` (float32, or the 16-bit one of a mixed policy)."""
        return keras.DTypePolicy(self.dtype_policy).compute_dtype

    def attention_matrix_bytes(self, length: int) -> int:
        """Bytes of one attention matrix `(batch, heads, length, length)` in the compute dtype."""
        return self.batch_size * self.num_heads * length * length * COMPUTE_BYTES[self.compute_dtype]


QUICK_SETTINGS = AttentionSettings(
    lengths=(16,), batch_size=1, num_heads=2, key_dim=4, repeats=1, warmup=0, cross_backend=False
)
"""A run of seconds (tests, a first look)."""


@dataclass(frozen=True)
class Measurement:
    """One layer's training step at one length and mask.

    Attributes:
        case: an `ATTENTION_CASES` name, `KERAS` or `CORE`.
        step_s: median seconds of one forward + backward step.
        temp_bytes, total_bytes: the compiled step's temporary bytes and its
            temp + argument + output bytes (JAX); None under TensorFlow.
        compiler: `XLA` or `NO_XLA` (TensorFlow's `jit_compile=False`).
    """

    case: str
    length: int
    mask: str
    step_s: float
    temp_bytes: int | None
    total_bytes: int | None
    compiler: str = XLA


@dataclass(frozen=True)
class Comparison:
    """A modification's measurement against Keras' layer and the attention core at its length and mask.

    Attributes:
        step_ms, memory_mib, temp_mib: its step time, its memory (temp + argument +
            output) and its temporary memory (None without a memory analysis).
        time_ratio, memory_ratio: its step time and memory over Keras' layer's.
        extra_temp_matrices: its temporary bytes minus Keras' layer's, in attention
            matrices of the compute dtype; None without a memory analysis.
        extra_time_cores: its step time minus Keras' layer's, in attention-core step times.
    """

    case: str
    length: int
    mask: str
    step_ms: float
    time_ratio: float
    memory_mib: float | None
    temp_mib: float | None
    memory_ratio: float | None
    attention_matrix_mib: float
    extra_temp_matrices: float | None
    extra_time_cores: float
    compiler: str = XLA

    @property
    def memory_above_matrix(self) -> bool:
        return self.extra_temp_matrices is not None and self.extra_temp_matrices > 1

    @property
    def time_above_core(self) -> bool:
        return self.extra_time_cores > 1


@dataclass
class AttentionBenchmark:
    """Every measurement of a run, and what it ran on."""

    settings: AttentionSettings
    backend: str
    device: str
    measurements: list[Measurement] = field(default_factory=list)
    backends: list[Measurement] = field(default_factory=list)  # Keras' layer by backend: "backend, compiler" its case

    @property
    def compilers(self) -> tuple[str, ...]:
        return self.settings.compilers(self.backend)

    def over_fastest(self, m: Measurement) -> float:
        """A `backends` step over the fastest of them at its length and mask."""
        same = [other.step_s for other in self.backends if (other.length, other.mask) == (m.length, m.mask)]
        return m.step_s / min(same)

    def get(self, case: str, length: int, mask: str, compiler: str = XLA) -> Measurement:
        key = (case, length, mask, compiler)
        return next(m for m in self.measurements if (m.case, m.length, m.mask, m.compiler) == key)

    def compare(self, case: str, length: int, mask: str, compiler: str = XLA) -> Comparison:
        mine, keras_layer, core = (self.get(name, length, mask, compiler) for name in (case, KERAS, CORE))
        matrix = self.settings.attention_matrix_bytes(length)
        has_memory = mine.total_bytes is not None
        return Comparison(
            case=case,
            length=length,
            mask=mask,
            step_ms=1e3 * mine.step_s,
            time_ratio=mine.step_s / keras_layer.step_s,
            memory_mib=mine.total_bytes / 2**20 if has_memory else None,
            temp_mib=mine.temp_bytes / 2**20 if has_memory else None,
            memory_ratio=mine.total_bytes / keras_layer.total_bytes if has_memory else None,
            attention_matrix_mib=matrix / 2**20,
            extra_temp_matrices=(mine.temp_bytes - keras_layer.temp_bytes) / matrix if has_memory else None,
            extra_time_cores=(mine.step_s - keras_layer.step_s) / core.step_s,
            compiler=compiler,
        )

    def comparisons(self) -> list[Comparison]:
        """Every measurement against Keras' layer (Keras' layer and the core included), for the
        lengths and masks measured so far."""
        settings, measured = self.settings, {(m.length, m.mask, m.compiler) for m in self.measurements}
        return [
            self.compare(name, n, mask, compiler)
            for compiler in self.compilers
            for mask in settings.masks
            for n in settings.lengths
            if (n, mask, compiler) in measured
            for name in self.reference_names(n, mask, compiler) + [case.name for case in settings.selected_cases()]
        ]

    def reference_names(self, length: int, mask: str, compiler: str = XLA) -> list[str]:
        """Keras' layer, its flash path where it was measured, the core."""
        key = (length, mask, compiler)
        measured = {m.case for m in self.measurements if (m.length, m.mask, m.compiler) == key}
        return [name for name in (KERAS, KERAS_FLASH, CORE) if name in measured]


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


def _layer_step(layer: keras.layers.MultiHeadAttention, x, causal: bool, jit_compile: bool = True) -> CompiledStep:
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
    """Keras' layer's step alone (`{KERAS: step}`), as `_steps` makes it."""
    _, x, shape = _inputs(settings, length)
    return {KERAS: _layer_step(keras.layers.MultiHeadAttention(**shape), x, causal, compiler == XLA)}


def _steps(settings: AttentionSettings, length: int, causal: bool, compiler: str = XLA) -> dict[str, CompiledStep]:
    """Keras' layer, the attention core and each case's layer at one length and mask, compiled."""
    from convatt.layers import MultiHeadAttention

    rng, x, shape = _inputs(settings, length)
    jit = compiler == XLA
    steps = {KERAS: _layer_step(keras.layers.MultiHeadAttention(**shape), x, causal, jit)}
    if flash_possible(settings):
        steps.update(_flash_step(shape, x, causal))
    steps[CORE] = _core_step(settings, length, causal, rng, jit)
    for case in settings.selected_cases():
        layer = MultiHeadAttention(**shape, max_len=length, **case.options)
        steps[case.name] = _unless_out_of_memory(lambda layer=layer: _layer_step(layer, x, causal, jit))
    return steps


def _unless_out_of_memory(make: Callable[[], CompiledStep]) -> CompiledStep:
    """`make()`, or where compiling it ran out of memory (TensorFlow runs a step to compile it),
    a step that raises that error when run (`_median_times` makes it NaN)."""
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
    from convatt.layers.core.forms import on_accelerator

    return keras.backend.backend() == "jax" and settings.compute_dtype != "float32" and on_accelerator()


def _flash_step(shape: dict, x, causal: bool) -> dict[str, CompiledStep]:
    """Keras' layer with `flash_attention=True`, or nothing (said on stderr) where Keras refuses it here."""
    try:
        layer = keras.layers.MultiHeadAttention(**shape, flash_attention=True)
        return {KERAS_FLASH: _layer_step(layer, x, causal)}
    except Exception as e:  # Keras' checks or the fused kernel's refusal: the row is left out, not the run
        print(f"Keras' flash attention unavailable: {str(e).strip().splitlines()[-1].strip()}", file=sys.stderr)
        return {}


def _median_times(steps: dict[str, CompiledStep], repeats: int, warmup: int) -> dict[str, float]:
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


def _device() -> str:
    if keras.backend.backend() == "jax":
        import jax

        device = jax.devices()[0]
        return f"{device.platform} ({device.device_kind})"
    import tensorflow as tf

    return "GPU" if tf.config.list_physical_devices("GPU") else "CPU"


def check_settings(settings: AttentionSettings) -> None:
    """ValueErrors for settings that cannot run, one line naming the setting."""
    positive = dict(batch_size=settings.batch_size, num_heads=settings.num_heads, key_dim=settings.key_dim)
    positive.update(repeats=settings.repeats, lengths=min(settings.lengths, default=0))
    for name, value in positive.items():
        if value < 1:
            raise ValueError(f"{name} must be at least 1; received {getattr(settings, name)}")
    if settings.dtype_policy not in DTYPE_POLICIES:
        raise ValueError(f"dtype_policy must be one of {', '.join(DTYPE_POLICIES)}; received {settings.dtype_policy}")
    if not settings.jit_compile or not set(settings.jit_compile) <= {True, False}:
        raise ValueError(f"jit_compile must be some of True, False; received {settings.jit_compile}")
    if settings.warmup < 0:
        raise ValueError(f"warmup must be at least 0; received {settings.warmup}")
    for name, allowed in (("masks", tuple(MASKS)), ("cases", CASE_KEYS)):
        given = getattr(settings, name)
        if not given or not set(given) <= set(allowed):
            raise ValueError(f"{name} must be some of {', '.join(allowed)}; received {', '.join(given) or 'none'}")


def run_attention_benchmark(
    settings: AttentionSettings | None = None,
    log: Callable[[str], None] = print,
    measured: Callable[[AttentionBenchmark], None] | None = None,
) -> AttentionBenchmark:
    """Measure every `ATTENTION_CASES` layer, Keras' layer and the attention core at each length
    and mask; `measured(result)` after each length and mask (e.g. to keep what is done)."""
    settings = settings or AttentionSettings()
    check_settings(settings)
    result = AttentionBenchmark(settings, keras.backend.backend(), _device())
    log(
        f"convatt bench --attention: backend {result.backend}, {result.device}, batch {settings.batch_size}, "
        f"{settings.num_heads} heads x {settings.key_dim}, {settings.dtype_policy}, forward + backward, "
        f"median of {settings.repeats} after {settings.warmup} untimed"
    )
    for compiler, length, mask in _grid(result):
        start = time.perf_counter()
        steps = _steps(settings, length, MASKS[mask], compiler)
        compiled = time.perf_counter() - start
        medians = _median_times(steps, settings.repeats, settings.warmup)
        for name, step in steps.items():
            result.measurements.append(
                Measurement(name, length, mask, medians[name], step.temp_bytes, step.total_bytes, compiler)
            )
        log(
            f"  {compiler}, length {length:5d}, {mask}: compiled in {compiled:.0f} s, timed in "
            f"{time.perf_counter() - start - compiled:.0f} s; Keras' layer {1e3 * medians[KERAS]:.1f} ms"
        )
        if measured is not None:
            measured(result)
    if settings.cross_backend:
        from convatt.speed.cross_backend import measure_backends

        result.backends = measure_backends(settings, log)
        if measured is not None:
            measured(result)
    return result


def _grid(result: AttentionBenchmark) -> list[tuple[str, int, str]]:
    """(compiler, length, mask) in the order measured."""
    settings = result.settings
    return [(c, n, mask) for c in result.compilers for n in settings.lengths for mask in settings.masks]


def _cell(c: Comparison) -> str:
    if math.isnan(c.step_ms):
        return "out of memory"
    if c.memory_ratio is None:
        return f"{c.time_ratio:.2f}x"
    return f"{c.time_ratio:.2f}x / {c.memory_ratio:.2f}x / {c.extra_temp_matrices:+.1f}"


def _size(n_bytes: int) -> str:
    return f"{n_bytes / 2**20:.1f} MiB" if n_bytes >= 2**20 else f"{n_bytes / 2**10:.1f} KiB"


def _reference_rows(result: AttentionBenchmark, mask: str, compiler: str = XLA) -> list[list[str]]:
    """Keras' layer's and the core's absolute figures, and one attention matrix's size, per length."""
    lengths = result.settings.lengths
    rows = []
    measured = {length: result.reference_names(length, mask, compiler) for length in lengths}
    for name in dict.fromkeys(name for names in measured.values() for name in names):
        cells = []
        for length in lengths:
            if name not in measured[length]:
                cells.append("-")
                continue
            m = result.get(name, length, mask, compiler)
            memory = "" if m.total_bytes is None else f" / {_size(m.total_bytes)}"
            cells.append("out of memory" if math.isnan(m.step_s) else f"{1e3 * m.step_s:.1f} ms{memory}")
        rows.append([name, *cells])
    matrix = [_size(result.settings.attention_matrix_bytes(n)) for n in lengths]
    return [*rows, ["one attention matrix", *matrix]]


def compilation(backend: str, compiler: str) -> str:
    """How a step was compiled, in words: "JAX (jitted)", "TensorFlow with XLA (`jit_compile=True`)"..."""
    if backend != "tensorflow":
        return f"{BACKEND_NAMES.get(backend, backend)} (jitted)"
    return f"TensorFlow {'with' if compiler == XLA else 'without'} XLA (`jit_compile={compiler == XLA}`)"


BACKEND_NAMES = {"jax": "JAX", "tensorflow": "TensorFlow", "torch": "PyTorch"}


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header), *["| " + " | ".join(r) + " |" for r in rows]]


def render_markdown(result: AttentionBenchmark) -> str:
    """A table per compilation and mask (rows the modifications, columns the lengths), the cost
    notes, then Keras' layer by backend where measured."""
    settings = result.settings
    legend = (
        "time / memory over Keras' layer / extra temporary memory over Keras' layer, in attention matrices"
        if result.measurements[0].total_bytes is not None
        else "time over Keras' layer (memory: under JAX only)"
    )
    parts = []
    for compiler in result.compilers:
        for mask in settings.masks:
            rows = _reference_rows(result, mask, compiler)
            rows += [
                [case.name, *[_cell(result.compare(case.name, n, mask, compiler)) for n in settings.lengths]]
                for case in settings.selected_cases()
            ]
            how = compilation(result.backend, compiler)
            title = f"{mask.capitalize()} self-attention, {settings.dtype_policy}, {how}"
            parts.append("\n".join([f"{title} (cells: {legend}):", "", *_table(_header(settings), rows)]))
    parts.append("\n".join(cost_notes(result)))
    if result.backends:
        from convatt.speed.cross_backend import render_backends

        parts.append(render_backends(result))
    return "\n\n".join(parts) + "\n"


def _header(settings: AttentionSettings) -> list[str]:
    return ["", *[str(length) for length in settings.lengths]]


def _cost_note(case: str, mask: str, rows: list[Comparison]) -> str | None:
    """Where `case` costs more than the attention matrix under `mask`, or None."""
    memory = [r for r in rows if r.memory_above_matrix]
    slow = [r for r in rows if r.time_above_core]
    if not memory and not slow:
        return None
    parts = []
    if memory:
        most = max(memory, key=lambda r: r.extra_temp_matrices)
        parts.append(
            f"memory at {', '.join(str(r.length) for r in memory)} "
            f"(up to {most.extra_temp_matrices:.1f} attention matrices more than Keras' layer, at {most.length})"
        )
    if slow:
        most = max(slow, key=lambda r: r.extra_time_cores)
        parts.append(
            f"time at {', '.join(str(r.length) for r in slow)} "
            f"(up to {most.extra_time_cores:.1f} attention cores' step time more, at {most.length})"
        )
    return f"- {case}, {mask}: " + "; ".join(parts)


def cost_notes(result: AttentionBenchmark) -> list[str]:
    """Per modification and mask: the lengths where it costs more than the attention matrix itself
    ("none", Keras' own computation, only shows the timing noise in the table)."""
    notes = ["Where a modification costs more than the attention matrix itself:"]
    for compiler in result.compilers:
        for case in result.settings.selected_cases():
            for mask in result.settings.masks if case.options else ():
                rows = [result.compare(case.name, n, mask, compiler) for n in result.settings.lengths]
                note = _cost_note(case.name, mask if len(result.compilers) == 1 else f"{mask}, {compiler}", rows)
                notes += [note] if note else []
    return notes if len(notes) > 1 else [*notes, "- none"]


def write_csv(result: AttentionBenchmark, path: str | Path) -> None:
    """One row per layer, length and mask: the `Comparison` fields and the run's settings."""
    rows = [asdict(c) for c in result.comparisons()]
    rows += [
        {"case": m.case, "length": m.length, "mask": m.mask, "step_ms": 1e3 * m.step_s, "compiler": m.compiler}
        | {"time_ratio": result.over_fastest(m)}
        for m in result.backends
    ]
    settings = asdict(result.settings)
    settings.update({n: " ".join(map(str, settings[n])) for n in ("lengths", "masks", "cases", "jit_compile")})
    extra = {"backend": result.backend, "device": result.device, **settings}
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=[*rows[0], *extra], restval="")
        writer.writeheader()
        writer.writerows({**row, **extra} for row in rows)
