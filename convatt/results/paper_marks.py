"""The paper's marks in a learning-curve panel: its final test accuracy of each variant drawn.

Beside each line, at the right edge, a triangle marks the paper's final test accuracy of that
variant (Table 2b; for UD Table 2d, averaged over the treebanks of the panel): the paper
publishes no curves, only these end points (and they are test, not dev, accuracies). Each
mark is in the panel of its variant, at its value: the y-axis grows to show it while the
curves keep a third of the panel's height; beyond (curves far below the paper's numbers), it
is a triangle on the edge pointing off the scale, with the paper's number beside it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd
from matplotlib.axes import Axes
from matplotlib.lines import Line2D

from convatt.data.formats import has_treebanks, is_sequence_preset
from convatt.results import style
from convatt.results.curves import PERCENT
from convatt.results.frames import label_of, model_order
from convatt.results.paper import paper_table, paper_table2d

EXTEND_AT_MOST = 3.0  # the y-axis grows to show the paper's marks if the curves keep a third of its height


def _paper_accuracy(preset: str, label: str, treebanks: list[str]) -> float:
    """The paper's final test accuracy of `label`: Table 2b (PTB), Table 2d's mean over `treebanks` (UD);
    none for a causal sequence task."""
    if is_sequence_preset(preset):
        return math.nan
    if not has_treebanks(preset):
        table = paper_table("table2b_ptb").set_index("model")["all"]
        return float(table.get(label, math.nan))
    table = paper_table2d()
    there = [t for t in treebanks if t in table.index]
    return float(table.loc[there, label].mean()) if label in table.columns and there else math.nan


@dataclass(frozen=True)
class PaperMark:
    """The paper's final test accuracy (%) of a variant drawn in a panel."""

    variant: str
    accuracy: float


def panel_marks(frame: pd.DataFrame, preset: str) -> list[PaperMark]:
    """The paper's accuracy of each variant of `frame` (a panel's rows) that the paper reports."""
    treebanks = sorted(frame["treebank"].dropna().unique()) if has_treebanks(preset) else []
    marks = []
    for variant in sorted(frame["variant"].unique(), key=lambda v: model_order(("", v))):
        accuracy = _paper_accuracy(preset, label_of(variant), treebanks)
        if not math.isnan(accuracy):
            marks.append(PaperMark(variant, accuracy))
    return marks


def _fit_marks(ax: Axes, marks: list[PaperMark]) -> list[PaperMark]:
    """Grows the y-axis to show the marks when the curves keep a third of its height or more;
    returns the marks that are still off the scale."""
    if not marks:
        return []
    low, high = ax.get_ylim()
    wanted = (min(low, *(m.accuracy - 1 for m in marks)), max(high, *(m.accuracy + 1 for m in marks)))
    wanted = (max(wanted[0], PERCENT[0] - 0.5), min(wanted[1], PERCENT[1] + 0.5))
    if wanted[1] - wanted[0] <= EXTEND_AT_MOST * (high - low):
        ax.set_ylim(*wanted)
        low, high = wanted
    return [m for m in marks if not low <= m.accuracy <= high]


def draw_marks(ax: Axes, marks: list[PaperMark]) -> list[PaperMark]:
    """A triangle at the right edge, after every line, in the variant's colour, at the paper's
    accuracy (`_draw_off_scale` where the axis cannot show it); returns those off the scale."""
    left, right = ax.get_xlim()
    off = _fit_marks(ax, marks)
    for mark in marks:
        if mark not in off:
            color = style.color(mark.variant)
            ax.plot([right], [mark.accuracy], color=color, gid="paper", label="_paper", **style.PAPER_MARK)
    for i, mark in enumerate(off):
        _draw_off_scale(ax, right, mark, i)
    ax.set_xlim(left, right + 0.03 * (right - left))  # room for the marks inside the panel
    return off


def _draw_off_scale(ax: Axes, x: float, mark: PaperMark, i: int) -> None:
    """The `i`th mark off the scale: a triangle on the top (bottom) edge at `x`, pointing up (down),
    with "paper 96.8" beside it, inside the panel (the next one's a line further in)."""
    above = mark.accuracy > ax.get_ylim()[1]
    edge = ax.get_xaxis_transform()  # x in data, y in axes fractions: 1 the top edge, 0 the bottom
    y, color = (1.0 if above else 0.0), style.color(mark.variant)
    kind = {**style.PAPER_MARK, "marker": "^" if above else "v"}
    ax.plot([x], [y], transform=edge, color=color, gid="paper-off-scale", label="_paper", **kind)
    ax.annotate(
        f"paper {mark.accuracy:.1f}",
        (x, y),
        xycoords=edge,
        xytext=(-7, -(4 + 9 * i) if above else 4 + 9 * i),
        textcoords="offset points",
        ha="right",
        va="top" if above else "bottom",
        fontsize="x-small",
        color=color,
        gid="paper-off-scale",
    )


def draw_legend(ax: Axes, on_scale: bool, off_scale: bool) -> None:
    """One legend, with the paper's marks (on the scale, off it) that the panel has."""
    handles, labels = ax.get_legend_handles_labels()
    for shown, marker, label in (
        (on_scale, "<", "paper: final test accuracy"),
        (off_scale, "^", "paper: final test accuracy, off the scale"),
    ):
        if shown:
            handles.append(Line2D([], [], color="grey", **{**style.PAPER_MARK, "marker": marker, "clip_on": True}))
            labels.append(label)
    # the best place left of the marks' strip at the right edge, so that it never hides them
    ax.legend(handles, labels, fontsize="x-small", loc="best", bbox_to_anchor=(0, 0, 0.94, 1), framealpha=0.7)
