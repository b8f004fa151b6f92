"""Keras' own `MultiHeadAttention` under each backend and compilation, against the fastest.

`convatt bench --attention` times each modification against Keras' layer on the session's
backend; which backend a user should pick is another question: Keras' layer is one program
under JAX and under TensorFlow with XLA, and TensorFlow's graph op by op without it. Each
backend runs in a process of its own (a process has one Keras backend) on the same settings
(`python -m convatt.speed.cross_backend SETTINGS_JSON` prints its measurements as JSON), one
after the other, so these steps compare across processes, not interleaved in one.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from collections.abc import Callable

BACKENDS = ("jax", "tensorflow")


def _settings_json(settings) -> str:
    return json.dumps({**dataclasses.asdict(settings), "cross_backend": False})


def keras_layer_times(settings) -> list:
    """Keras' layer's median step at each compilation, length and mask, in this process's backend;
    each a `Measurement` whose case names the backend and the compilation."""
    import keras

    from convatt.speed import attention_bench as bench

    measurements = []
    backend = keras.backend.backend()
    for compiler in settings.compilers(backend):
        for length in settings.lengths:
            for mask in settings.masks:
                steps = bench.keras_steps(settings, length, bench.MASKS[mask], compiler)
                median = bench._median_times(steps, settings.repeats, settings.warmup)[bench.KERAS]
                case = bench.compilation(backend, compiler)
                measurements.append(bench.Measurement(case, length, mask, median, None, None, compiler))
    return measurements


def measure_backends(settings, log: Callable[[str], None] = print) -> list:
    """`keras_layer_times` under each of `BACKENDS`, each in a fresh process (the same Python);
    a backend that cannot run here is said in `log` and left out."""
    from convatt.speed.attention_bench import Measurement

    measurements = []
    for backend in BACKENDS:
        env = {**os.environ, "KERAS_BACKEND": backend}
        command = [sys.executable, "-m", "convatt.speed.cross_backend", _settings_json(settings)]
        done = subprocess.run(command, capture_output=True, text=True, env=env)
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            log(f"  Keras' layer under {backend}: not measured ({last})")
            continue
        rows = [Measurement(**row) for row in json.loads(done.stdout.strip().splitlines()[-1])]
        log(f"  Keras' layer under {backend}: measured in a process of its own")
        measurements += rows
    return measurements


def render_backends(result) -> str:
    """Per mask, a row per backend and compilation: Keras' layer's step and its ratio over the
    fastest of them at each length."""
    settings, parts = result.settings, []
    for mask in settings.masks:
        names = list(dict.fromkeys(m.case for m in result.backends if m.mask == mask))
        rows = []
        for name in names:
            cells = []
            for length in settings.lengths:
                mine = [m for m in result.backends if (m.case, m.length, m.mask) == (name, length, mask)]
                cells += [f"{1e3 * m.step_s:.1f} ms / {result.over_fastest(m):.2f}x" for m in mine] or ["-"]
            rows.append([name, *cells])
        header = ["", *map(str, settings.lengths)]
        table = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        title = f"Keras' layer by backend, {mask} (cells: its step / over the fastest backend's; a process each):"
        parts.append("\n".join([title, "", *table, *["| " + " | ".join(r) + " |" for r in rows]]))
    return "\n\n".join(parts)


def main(argv: list[str]) -> None:
    from convatt.speed.attention_bench import AttentionSettings

    given = json.loads(argv[0])
    settings = AttentionSettings(**{k: tuple(v) if isinstance(v, list) else v for k, v in given.items()})
    print(json.dumps([dataclasses.asdict(m) for m in keras_layer_times(settings)]))


if __name__ == "__main__":
    main(sys.argv[1:])
