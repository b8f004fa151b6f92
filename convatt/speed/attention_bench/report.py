"""The run as Markdown (a table per compilation and mask, the cost notes, Keras' layer by
backend) and as CSV (a row per layer, length and mask)."""

from __future__ import annotations

import csv
import math
from dataclasses import asdict
from pathlib import Path

from convatt.speed.attention_bench.measurements import AttentionBenchmark, Comparison
from convatt.speed.attention_bench.settings import XLA, AttentionSettings, compilation


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


def render_backends(result: AttentionBenchmark) -> str:
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
        title = f"Keras' layer by backend, {mask} (cells: its step / over the fastest backend's; a process each):"
        parts.append("\n".join([title, "", *_table(_header(settings), rows)]))
    return "\n\n".join(parts)
