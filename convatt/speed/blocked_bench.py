"""`convatt bench --blocked`: the attention in blocks of queries (`query_block`) at long context.

One training step of one self-attention layer (the loss `mean(output**2)`, its gradient with
respect to the layer's weights; `convatt.speed.attention_bench.steps`' step) for each modification and
length, three ways: convatt's layer in blocks of `block` queries, convatt's layer on the whole
matrix, Keras' `MultiHeadAttention`. Memory (JAX): the compiled step's memory analysis,
`temp` bytes (what XLA plans beside the arguments and outputs), known without running the
step, so it is given at every length; time: the median of `repeats` steps, run only where all
the planned bytes (temporaries, arguments and outputs: +Conv's weights grow with the length
squared) fit under `memory_limit` (the rest are "-"). The ratios are over the whole-matrix
path's time where it ran.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field

import keras
import numpy as np

from convatt.speed.attention_bench.settings import ATTENTION_CASES, CASE_KEYS
from convatt.speed.attention_bench.steps import CompiledStep, layer_step

WAYS = ("blocked", "whole", "keras")
"""The three layers of each row: convatt's in blocks, convatt's on the whole matrix, Keras'."""


@dataclass(frozen=True)
class BlockedSettings:
    """What is measured: lengths, the modifications (`attention_bench.ATTENTION_CASES` keys), shapes."""

    lengths: tuple[int, ...] = (1024, 4096, 16384, 32768)
    cases: tuple[str, ...] = ("conv2d", "mta", "conv", "shaw", "alibi", "talking-heads", "p-r")
    causal: bool = True
    block: int | str = 256  # or "auto"
    batch_size: int = 1
    num_heads: int = 4
    key_dim: int = 32
    repeats: int = 1
    memory_limit: int = 6 * 2**30
    seed: int = 0


@dataclass
class BlockedRow:
    """One modification at one length: planned temporary bytes and median seconds of each way."""

    case: str
    length: int
    temp_bytes: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)


def _layer(settings: BlockedSettings, way: str, options: dict, length: int) -> keras.layers.Layer:
    from convatt.layers import MultiHeadAttention

    if way == "keras":
        return keras.layers.MultiHeadAttention(settings.num_heads, settings.key_dim)
    per_position = options.get("position_interaction") or options.get("relative_bias") or options.get(
        "attention_conv"
    ) == "1d"  # fmt: skip
    block = {"query_block": settings.block if way == "blocked" else None}
    return MultiHeadAttention(
        settings.num_heads, settings.key_dim, **options, **block, max_len=length if per_position else None
    )


def _median_seconds(step: CompiledStep, repeats: int) -> float:
    step.run()  # the first run pays for the allocations
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        step.run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(settings: BlockedSettings, case: str, length: int) -> BlockedRow:
    """The three ways of one modification at one length (JAX: memory planned, time where it fits)."""
    options = {c.key: c.options for c in ATTENTION_CASES}[case]
    width = settings.num_heads * settings.key_dim
    x = keras.ops.convert_to_tensor(
        np.random.default_rng(settings.seed).normal(size=(settings.batch_size, length, width)).astype("float32")
    )
    row = BlockedRow(case, length)
    for way in WAYS:
        if way == "keras" and case != settings.cases[0]:
            continue  # Keras' layer is the same for every row: measured once per length
        step = layer_step(_layer(settings, way, options, length), x, settings.causal)
        if step.temp_bytes is not None:
            row.temp_bytes[way] = step.temp_bytes
        if step.total_bytes is None or step.total_bytes <= settings.memory_limit:  # the weights too (+Conv's)
            row.seconds[way] = _median_seconds(step, settings.repeats)
    return row


def run_blocked_benchmark(settings: BlockedSettings, measured=None) -> list[BlockedRow]:
    """Every case at every length; `measured(row)` after each (prints a line by default)."""
    unknown = [case for case in settings.cases if case not in CASE_KEYS]
    if unknown or not settings.cases:
        raise ValueError(f"cases must be some of {', '.join(CASE_KEYS)}; received {', '.join(unknown) or 'none'}")
    rows = []
    for length in settings.lengths:
        for case in settings.cases:
            row = measure(settings, case, length)
            rows.append(row)
            (measured or _print_row)(row)
    return rows


def _size(n_bytes: int | None) -> str:
    if n_bytes is None:
        return "-"
    return f"{n_bytes / 2**30:.2f} GiB" if n_bytes >= 2**30 else f"{n_bytes / 2**20:.0f} MiB"


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} s"


def _print_row(row: BlockedRow) -> None:
    print(" ".join([f"{row.case} L={row.length}:", *_cells(row)]), flush=True)


def _cells(row: BlockedRow) -> list[str]:
    blocked, whole = row.seconds.get("blocked"), row.seconds.get("whole")
    ratio = f"{blocked / whole:.2f}x" if blocked is not None and whole is not None else "-"
    return [
        *(_size(row.temp_bytes.get(way)) for way in WAYS),
        *(_seconds(row.seconds.get(way)) for way in WAYS),
        ratio,
    ]


def render_markdown(rows: list[BlockedRow], settings: BlockedSettings) -> str:
    """The table: temporaries and seconds of the three ways, the blocked path's time over the whole's."""
    names = {c.key: c.name for c in ATTENTION_CASES}
    head = [
        "modification",
        "length",
        *(f"temp. {way}" for way in WAYS),
        *(f"step {way}" for way in WAYS),
        "blocked / whole",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        lines.append("| " + " | ".join([names[row.case], f"{row.length:,}", *_cells(row)]) + " |")
    mask = "causal" if settings.causal else "bidirectional"
    note = (
        f"\nbatch {settings.batch_size}, {settings.num_heads} heads x {settings.key_dim}, float32, {mask}, "
        + ("query_block='auto'" if settings.block == "auto" else f"blocks of {settings.block} queries")
        + "; Keras' layer measured on the first row of each length.\n"
    )
    return "\n".join(lines) + "\n" + note
