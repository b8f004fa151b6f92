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


def save(fig: Figure, stem: Path, description: str = "") -> list[Path]:
    """`stem`.png and `stem`.pdf, each written to a temporary name and moved into place; a
    `description` (what the figure shows) goes into the PNG's Description and the PDF's Subject."""
    paths = []
    for fmt, key in (("png", "Description"), ("pdf", "Subject")):
        path = stem.with_name(f"{stem.name}.{fmt}")
        metadata = {key: description} if description else None
        write_atomically(path, lambda tmp, fmt=fmt, m=metadata: fig.savefig(tmp, format=fmt, dpi=150, metadata=m))
        paths.append(path)
    return paths
