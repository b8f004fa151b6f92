"""How every figure draws a variant: one colour per variant, the families of the grouped panels,
and the line styles of settings and of runs still training. `make plots`, docs/results and
the notebooks all draw through `convatt.results.plots` (and `paper_marks`), which take these from here.

    COLORS[variant]     its colour, the same in every figure
    FAMILIES            the panels of a grouped figure (PTB), each with its reference variant
    line_style(...)     solid: the paper's setting; dash-dot: another setting; dashed: running
"""

from __future__ import annotations

from dataclasses import dataclass

from convatt.model.variants import ATTENTION_VARIANTS, VARIANTS

# tab10, two more, then six of tab20b for the variants beyond the paper's attention; assigned in
# the order of VARIANTS so that the variants of one family get different colours.
_PALETTE = [
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
    "#000000",
    "#b8860b",
    "#393b79",
    "#e7ba52",
    "#637939",
    "#843c39",
    "#7b4173",
    "#ad494a",
]
COLORS = {v: _PALETTE[i % len(_PALETTE)] for i, v in enumerate(VARIANTS)}
UNKNOWN_COLOR = "#555555"
PAPER_MARK = dict(marker="<", markersize=7, linestyle="none", clip_on=False)  # the paper's final test accuracy
RUNNING = " (running)"


@dataclass(frozen=True)
class Family:
    """A panel of a grouped figure: its title, its variants, and those drawn only for reference
    (a panel with nothing but references is left out)."""

    title: str
    variants: tuple[str, ...]
    references: tuple[str, ...] = ("san-pe-add",)


FAMILIES = (
    Family("Absolute position", ("san", "san-pe-con", "san-pe-add", "san-sin-add")),
    Family("Relative position", ("san-pe-add", "san-p", "san-r", "san-p-r", "san-shaw", "san-alibi")),
    Family("Attention: the paper's", ("san-pe-add", "san-pe-add-temp", "san-pe-add-conv", "san-pe-add-conv2d")),
    Family(
        "Attention: other ways",
        (*ATTENTION_VARIANTS, "san-pe-add-conv2d-2x9"),
        references=("san-pe-add", "san-pe-add-conv2d"),
    ),
)


def color(variant: str) -> str:
    """The variant's colour in every figure."""
    return COLORS.get(variant, UNKNOWN_COLOR)


def line_style(setting: str, running: bool) -> str:
    """Dashed for a run still training, dash-dot for a setting other than the paper's, solid otherwise."""
    return "--" if running else "-." if setting else "-"


def family_panels(variants: set[str]) -> list[tuple[str, set[str]]]:
    """The panels for the variants run: each family with a variant other than its reference
    (plus the reference when run), then the variants of no family; one panel of all if
    no family applies."""
    panels, placed = [], set()
    for family in FAMILIES:
        members = variants & set(family.variants)
        if members - set(family.references):
            panels.append((family.title, members))
            placed |= members
    rest = variants - placed
    if rest or not panels:
        panels.append(("Other variants" if panels else "", rest if panels else variants))
    return panels
