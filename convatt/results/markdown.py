"""The tables' rendering: percent cells, Markdown tables and notes, and `Table`.

Numbers are computed first, as data frames (`convatt.results.table_frames`, `convatt.results.efficiency`);
this module only turns them into text.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd


@dataclass
class Table:
    """One table: `frame` is what goes to CSV, `markdown` the readable page, `notes` its caveats."""

    name: str
    title: str
    frame: pd.DataFrame
    markdown: str
    notes: list[str] = field(default_factory=list)


def fmt(value, std=None, signed: bool = False) -> str:
    """Percent with two decimals, "–" when missing; "94.62 ± 0.15" with a std."""
    if value is None or pd.isna(value):
        return "–"
    text = f"{value:+.2f}" if signed else f"{value:.2f}"
    if std is not None and not pd.isna(std):
        text += f" ± {std:.2f}"
    return text


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] * len(header)) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def note_block(notes: list[str]) -> str:
    return "\n\n".join(f"> **Note:** {n}" for n in notes)


def page(title: str, intro: str, notes: list[str], *sections: str) -> str:
    """A Markdown page: the title, an introduction, the notes, then the sections."""
    return "\n\n".join(x for x in [f"# {title}", intro, note_block(notes), *sections] if x) + "\n"
