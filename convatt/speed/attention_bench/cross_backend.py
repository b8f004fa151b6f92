"""Keras' own `MultiHeadAttention` under each backend and compilation, against the fastest.

`convatt bench --attention` times each modification against Keras' layer on the session's
backend; which backend a user should pick is another question: Keras' layer is one program
under JAX and under TensorFlow with XLA, and TensorFlow's graph op by op without it. Each
backend runs in a process of its own (a process has one Keras backend) on the same settings
(`main`, given the settings as JSON, prints its measurements as JSON), one after the other, so
these steps compare across processes, not interleaved in one.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from collections.abc import Callable

import keras

from convatt.speed.attention_bench.measurements import Measurement
from convatt.speed.attention_bench.settings import KERAS, MASKS, AttentionSettings, compilation
from convatt.speed.attention_bench.steps import keras_steps, median_times

BACKENDS = ("jax", "tensorflow")
_MAIN = "import sys; from convatt.speed.attention_bench.cross_backend import main; main(sys.argv[1:])"


def _settings_json(settings: AttentionSettings) -> str:
    return json.dumps({**dataclasses.asdict(settings), "cross_backend": False})


def keras_layer_times(settings: AttentionSettings) -> list[Measurement]:
    """Keras' layer's median step at each compilation, length and mask, in this process's backend;
    each a `Measurement` whose case names the backend and the compilation."""
    measurements = []
    backend = keras.backend.backend()
    for compiler in settings.compilers(backend):
        for length in settings.lengths:
            for mask in settings.masks:
                steps = keras_steps(settings, length, MASKS[mask], compiler)
                median = median_times(steps, settings.repeats, settings.warmup)[KERAS]
                case = compilation(backend, compiler)
                measurements.append(Measurement(case, length, mask, median, None, None, compiler))
    return measurements


def measure_backends(settings: AttentionSettings, log: Callable[[str], None] = print) -> list[Measurement]:
    """`keras_layer_times` under each of `BACKENDS`, each in a fresh process (the same Python);
    a backend that cannot run here is said in `log` and left out."""
    measurements = []
    for backend in BACKENDS:
        env = {**os.environ, "KERAS_BACKEND": backend}
        command = [sys.executable, "-c", _MAIN, _settings_json(settings)]
        done = subprocess.run(command, capture_output=True, text=True, env=env)
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            log(f"  Keras' layer under {backend}: not measured ({last})")
            continue
        rows = [Measurement(**row) for row in json.loads(done.stdout.strip().splitlines()[-1])]
        log(f"  Keras' layer under {backend}: measured in a process of its own")
        measurements += rows
    return measurements


def main(argv: list[str]) -> None:
    """Print `keras_layer_times` of the settings `argv[0]` (JSON) as JSON, on one line."""
    given = json.loads(argv[0])
    settings = AttentionSettings(**{k: tuple(v) if isinstance(v, list) else v for k, v in given.items()})
    print(json.dumps([dataclasses.asdict(m) for m in keras_layer_times(settings)]))
