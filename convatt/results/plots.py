"""Learning curves: Table 2a (dev accuracy per epoch) and Figure 2 (every 100 batches).

One line per model (variant, marked with its setting, e.g. [mask] when pads were
masked): the mean over seeds, with a band over seeds (`convatt.results.curves`: the
numbers and the band), and at the right edge the paper's final test accuracy of each
variant (`convatt.results.paper_marks`).

Each line goes as far as its runs go. Where every seed (and, for UD means, every
treebank) of a line has a value, the line is solid with its band; beyond, where
early stopping or a shorter treebank has left some runs behind, it goes on thin and
faded, as the mean of the runs that are left, so the mean never silently changes
which runs it covers. A damaged run (`convatt.rundir.reading`) is left out, with a
warning, never drawn in part. Runs still training (`--include-running`) are lines
of their own, dashed, "(running)" in the legend.

Grouped figures: PTB one panel per family of variants (`convatt.results.style`:
position, the paper's attention, other attention), SAN+PE[add] in each for
reference; UD the mean over treebanks, then one small panel per treebank. Colours
and line styles come from `convatt.results.style`, the same in every figure.

Figures are `matplotlib.figure.Figure`s made without pyplot (no global state, no
display needed): `write_plots` renders them with the Agg canvas to PNG and PDF; a
notebook shows them inline.

    plot_epochs(histories, preset)   Table 2a: grouped panels (PTB families, UD treebanks)
    plot_steps(curves, preset)       Figure 2 of one preset, grouped the same way
    figure2(curves)                  Figure 2 as the paper lays it out: PTB left, UD mean right
    write_plots(root, out)           the PNG and PDF files (`make plots`)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from convatt.data.formats import FORMATS, PTB, UD, has_treebanks, is_sequence_preset, preset_label
from convatt.results import style
from convatt.results.curves import DEFAULT_BAND, PERCENT, aggregate, band_for
from convatt.results.frames import load_records_to_report, model_order
from convatt.results.output import Written, save
from convatt.results.paper_marks import draw_legend, draw_marks, panel_marks
from convatt.results.style import COLORS  # noqa: F401 (the palette, where it used to be)

SEQUENCE_CURVES = {"find-block": "dev exact match of the answer block", "char-lm": "dev next-character accuracy"}


def _draw(ax: Axes, agg: pd.DataFrame, x: str) -> None:
    """Per series: the mean where every run reached (solid, gid "mean") with its band, then on,
    thin and faded, where only some runs did (gid "partial")."""
    few = agg[x].nunique() < 12  # points marked on every line of the panel, or on none
    keys = agg[["series", "variant", "setting", "running"]].drop_duplicates()
    keys = sorted(keys.itertuples(index=False), key=lambda k: (*model_order((k.setting, k.variant)), k.series))
    for key in keys:
        rows = agg[agg["series"] == key.series]
        whole = rows[rows["complete"]]
        color, dashes = style.color(key.variant), style.line_style(key.setting, bool(key.running))
        marker = dict(marker="o", markersize=3) if few and not key.running else {}
        ax.plot(whole[x], whole["mean"], dashes, color=color, label=key.series, lw=1.6, gid="mean", **marker)
        ax.fill_between(whole[x], whole["lo"], whole["hi"], color=color, alpha=0.15, linewidth=0)
        tail = rows[rows[x] >= (whole[x].max() if not whole.empty else -math.inf)]
        if len(tail) > 1 or whole.empty:
            ax.plot(tail[x], tail["mean"], dashes, color=color, lw=0.9, alpha=0.45, gid="partial", label="_partial")


@dataclass
class Panel:
    """One panel of a grouped figure: its title and the rows it draws."""

    title: str
    frame: pd.DataFrame


def _panels(frame: pd.DataFrame, preset: str) -> list[Panel]:
    """PTB: one panel per family of variants (`style.family_panels`); UD: the mean over treebanks,
    then one panel per treebank (just the one when there is one)."""
    name = preset_label(preset)
    if has_treebanks(preset):
        corpora = sorted(frame["corpus"].unique())
        mean = Panel(f"UD, mean over {len(corpora)} treebank{'s' if len(corpora) > 1 else ''}", frame)
        if len(corpora) == 1:
            return [Panel(f"UD {corpora[0]}", frame)]
        return [mean] + [Panel(c.replace("_", " "), frame[frame["corpus"] == c]) for c in corpora]
    corpora = ", ".join(sorted(frame["corpus"].unique()))
    return [
        Panel(f"{corpora}: {title}" if title else corpora or name, frame[frame["variant"].isin(members)])
        for title, members in style.family_panels(set(frame["variant"]))
    ]


def _empty(ax: Axes, text: str, title: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes)
    ax.set_title(title)
    ax.set_xticks([])
    ax.set_yticks([])


def _panel(
    ax: Axes, frame: pd.DataFrame, preset: str, x: str, band: str, what: str, title: str, legend: bool = True
) -> None:
    """One panel: the lines of `frame`, the paper's marks, labels and (if `legend`) the legends."""
    _draw(ax, aggregate(frame, x, band=band), x)
    if x == "epoch":
        _whole_epochs(ax)
    ax.set_title(title, fontsize="medium")
    ax.set_xlabel(what)
    ax.set_ylabel("dev accuracy (%)")
    ax.grid(True, alpha=0.3)
    low, high = ax.get_ylim()
    ax.set_ylim(max(low, PERCENT[0] - 0.5), min(high, PERCENT[1] + 0.5))
    marks = panel_marks(frame, preset)
    off = draw_marks(ax, marks)
    if legend:
        draw_legend(ax, len(off) < len(marks), bool(off))


def _whole_epochs(ax: Axes) -> None:
    epochs = sorted({x for line in ax.get_lines() for x in line.get_xdata()})
    if 0 < len(epochs) <= 10:
        ax.set_xticks(epochs)  # whole epochs only, also for a single one
        ax.set_xlim(min(epochs) - 0.5, max(epochs) + 0.5)
    elif epochs:
        ax.xaxis.get_major_locator().set_params(integer=True)


def _figure(n: int = 1, ncols: int = 1, width: float = 6.4, height: float = 4.4) -> tuple[Figure, list[Axes]]:
    nrows = -(-n // ncols)
    fig = Figure(figsize=(width * ncols, height * nrows), layout="constrained")
    FigureCanvasAgg(fig)
    axes = list(fig.subplots(nrows, ncols, squeeze=False).flat)
    for ax in axes[n:]:
        ax.remove()
    return fig, axes[:n]


def grouped(frame: pd.DataFrame, preset: str, x: str, band: str, what: str, missing: str = "") -> Figure:
    """A figure of `_panels`: PTB families side by side (2 a row), UD treebanks 4 a row, smaller."""
    frame = frame[frame["preset"] == preset] if not frame.empty else frame
    if frame.empty:
        fig, (ax,) = _figure()
        _empty(ax, missing or f"no finished {preset_label(preset)} runs", preset_label(preset))
        return fig
    panels = _panels(frame, preset)
    small = has_treebanks(preset) and len(panels) > 2
    ncols = min(len(panels), 4 if small else 2)
    fig, axes = _figure(len(panels), ncols, *((4.2, 3.4) if small else (6.4, 4.4)))
    for i, (ax, panel) in enumerate(zip(axes, panels)):
        _panel(ax, panel.frame, preset, x, band, what, panel.title, legend=not small or i == 0)
    return fig


def _of_preset(frame: pd.DataFrame, preset: str) -> pd.DataFrame:
    return frame[frame["preset"] == preset] if not frame.empty else frame


def plot_epochs(histories: pd.DataFrame, preset: str = PTB.name, band: str = DEFAULT_BAND) -> Figure:
    """Table 2a: dev accuracy after each epoch, one line per model with a band over seeds, grouped."""
    used = band_for(_of_preset(histories, preset), band)
    fig = grouped(histories, preset, "epoch", used.kind, "epoch")
    which = "Table 2a" if preset == PTB.name else "As Table 2a"
    fig.suptitle(f"{which}: development accuracy during training\n{used.caption}", fontsize="medium")
    return fig


def _no_curve_text(runs: pd.DataFrame | None, preset: str) -> str:
    """What an empty panel says when there are runs of `preset` but none with a dev curve."""
    if runs is None or not (runs["preset"] == preset).any():
        return ""
    return (
        f"no {preset_label(preset)} run has a dev curve\n(curve.csv gets a point every "
        "--curve-every batches;\nshorter runs have none)"
    )


def _steps_title(preset: str) -> str:
    """Figure 2's title for a tagging preset; what the curve measures for a causal sequence task."""
    if is_sequence_preset(preset):
        return f"{preset_label(preset)}: {SEQUENCE_CURVES[FORMATS[preset].task]}"
    return f"Figure 2, {preset_label(preset)}: development accuracy"


def plot_steps(
    curves: pd.DataFrame,
    preset: str = PTB.name,
    band: str = DEFAULT_BAND,
    ax: Axes | None = None,
    runs: pd.DataFrame | None = None,
):
    """Figure 2 for one preset: dev accuracy every 100 training batches (the first ones), grouped
    as `plot_epochs`; with `ax`, one panel of all its lines there (UD: the mean over treebanks).

    `runs` (`load_runs`), if given, lets an empty panel tell "no finished runs" from
    "runs too short for a dev curve"."""
    missing = _no_curve_text(runs, preset)
    frame = _of_preset(curves, preset)
    used = band_for(frame, band)
    if ax is None:
        fig = grouped(curves, preset, "step", used.kind, "training batches", missing)
        fig.suptitle(f"{_steps_title(preset)}\n{used.caption}", fontsize="medium")
        return fig
    name = preset_label(preset)
    if frame.empty:
        _empty(ax, missing or f"no finished {name} runs", name)
    else:
        title = (
            _panels(frame, preset)[0].title if has_treebanks(preset) else ", ".join(sorted(frame["corpus"].unique()))
        )
        _panel(ax, frame, preset, "step", used.kind, "training batches", title)
    return ax.figure


def figure2(curves: pd.DataFrame, band: str = DEFAULT_BAND, runs: pd.DataFrame | None = None) -> Figure:
    """Figure 2 as the paper lays it out: PTB (left, every line) and the UD mean (right)."""
    fig, (left, right) = _figure(2, 2, width=6.4)
    tagging = curves[curves["preset"].isin([PTB.name, UD.name])] if not curves.empty else curves
    used = band_for(tagging, band)  # the same band on both sides
    plot_steps(curves, PTB.name, used.kind, ax=left, runs=runs)
    plot_steps(curves, UD.name, used.kind, ax=right, runs=runs)
    fig.suptitle(f"Figure 2: development accuracy during training\n{used.caption}", fontsize="medium")
    return fig


def write_plots(
    runs: Path,
    out: Path,
    band: str = DEFAULT_BAND,
    settings: list[str] | None = None,
    include_running: bool = False,
) -> Written:
    """As PNG and PDF in `out`, from the runs under `runs` (each read once): Table 2a per preset
    that has runs (grouped), Figure 2 as the paper lays it out, and Figure 2 per preset, grouped
    (UD: per treebank beside the mean). `settings`: only the runs of these settings
    (`DeparturesFromPaper.label()`s, "paper" for the paper's own); None: all. `include_running`: runs still
    training too, dashed and marked "(running)"."""
    records = load_records_to_report(runs, settings, include_running)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written = Written(_write_epoch_plots(records.histories, band, out), [])
    if records.curves.empty:
        written.notes.append(
            "no finished run has a dev curve (curve.csv gets a point every --curve-every = 100 "
            "batches by default; shorter runs have none), so Figure 2 was not drawn"
        )
        return written
    written.paths += _write_step_plots(records.curves, band, records.runs, out)
    if records.runs["running"].any():
        written.notes.append(
            f"{int(records.runs['running'].sum())} run(s) still training are drawn dashed, marked (running)"
        )
    return written


def _write_epoch_plots(histories: pd.DataFrame, band: str, out: Path) -> list[Path]:
    """Table 2a (dev accuracy by epoch) of each tagging preset that has runs."""
    paths = []
    for preset in (PTB.name, UD.name):
        if not histories.empty and (histories["preset"] == preset).any():
            paths += save(plot_epochs(histories, preset, band), out / f"table2a_{preset}_dev_by_epoch")
    return paths


def _write_step_plots(curves: pd.DataFrame, band: str, runs: pd.DataFrame, out: Path) -> list[Path]:
    """Figure 2 (dev accuracy by step) as the paper lays it out, then per preset that has curves:
    the tagging presets', then the causal sequence tasks'."""
    paths = []
    if curves["preset"].isin([PTB.name, UD.name]).any():  # not for causal sequence tasks' runs alone
        paths += save(figure2(curves, band, runs), out / "figure2_dev_by_step")
    for preset in (PTB.name, UD.name):
        if (curves["preset"] == preset).any():
            paths += save(plot_steps(curves, preset, band), out / f"figure2_{preset}_dev_by_step")
    for preset in (name for name in FORMATS if is_sequence_preset(name)):
        if (curves["preset"] == preset).any():
            paths += save(plot_steps(curves, preset, band), out / f"{preset}_dev_by_step")
    return paths
