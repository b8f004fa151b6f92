"""`convatt bench --attention`: convatt's `MultiHeadAttention` against Keras' own layer.

Its modules, in the order a run uses them:

    settings.py       what is measured: the modifications (`ATTENTION_CASES`), `AttentionSettings`
    steps.py          one compiled training step per layer, and its timing
    measurements.py   a run's measurements, each against Keras' layer and the attention core
    cross_backend.py  Keras' layer under each backend, each in a process of its own
    run.py            `run_attention_benchmark`: all of it, in order
    report.py         the run as Markdown and CSV
"""

from convatt.speed.attention_bench.measurements import AttentionBenchmark, Measurement
from convatt.speed.attention_bench.report import render_markdown, write_csv
from convatt.speed.attention_bench.run import run_attention_benchmark
from convatt.speed.attention_bench.settings import ATTENTION_CASES, QUICK_SETTINGS, AttentionSettings, check_settings
from convatt.speed.attention_bench.steps import layer_step as _layer_step  # the layers' tests' name for it

__all__ = [
    "ATTENTION_CASES",
    "QUICK_SETTINGS",
    "AttentionBenchmark",
    "AttentionSettings",
    "Measurement",
    "_layer_step",
    "check_settings",
    "render_markdown",
    "run_attention_benchmark",
    "write_csv",
]
