"""`run_attention_benchmark`: every modification's step, Keras' layer's and the attention core's
at each compilation, length and mask, timed in this process; then, with `cross_backend`, Keras'
layer under each backend, each in a process of its own."""

from __future__ import annotations

import time
from collections.abc import Callable

import keras

from convatt.speed.attention_bench.cross_backend import measure_backends
from convatt.speed.attention_bench.measurements import AttentionBenchmark, Measurement
from convatt.speed.attention_bench.settings import KERAS, MASKS, AttentionSettings, check_settings
from convatt.speed.attention_bench.steps import all_steps, median_times


def _device() -> str:
    if keras.backend.backend() == "jax":
        import jax

        device = jax.devices()[0]
        return f"{device.platform} ({device.device_kind})"
    import tensorflow as tf

    return "GPU" if tf.config.list_physical_devices("GPU") else "CPU"


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
        steps = all_steps(settings, length, MASKS[mask], compiler)
        compiled = time.perf_counter() - start
        medians = median_times(steps, settings.repeats, settings.warmup)
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
        result.backends = measure_backends(settings, log)
        if measured is not None:
            measured(result)
    return result


def _grid(result: AttentionBenchmark) -> list[tuple[str, int, str]]:
    """(compiler, length, mask) in the order measured."""
    settings = result.settings
    return [(c, n, mask) for c in result.compilers for n in settings.lengths for mask in settings.masks]
