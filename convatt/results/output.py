"""What the results commands write: `Written` (the files and the notes for the user) and
`save` (a figure as PNG and PDF, atomically). Its own module so that figures (`plots`,
`inference.inspection`) and tables share it without importing each other."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from matplotlib.figure import Figure

from convatt.rundir.storage import write_atomically


@dataclass
class Written:
    """The files `write_tables` (or `plots.write_plots`) wrote, and the notes for the user, which
    the CLI prints: what is not comparable to the paper, what could not be written."""

    paths: list[Path]
    notes: list[str]


def save(fig: Figure, stem: Path) -> list[Path]:
    """`stem`.png and `stem`.pdf, each written to a temporary name and moved into place."""
    paths = []
    for fmt in ("png", "pdf"):
        path = stem.with_name(f"{stem.name}.{fmt}")
        write_atomically(path, lambda tmp, fmt=fmt: fig.savefig(tmp, format=fmt, dpi=150))
        paths.append(path)
    return paths
