"""Learning curves: Table 2a (dev accuracy per epoch) and Figure 2 (every 100 batches).

One line per model (variant, marked with its setting, e.g. [mask] when pads were
masked): the mean over seeds, with a band over seeds: by default ("ci") the 95%
t-interval of the mean over seeds (`convatt.results.stats.t_interval`), or min to max,
or mean ± std. Below three seeds a t-interval says nothing (for two it is 12.7 times
their half-distance wide), so a figure with a line of fewer seeds draws min to max
instead and its caption says so (`band_for`). A band never leaves 0-100%. For UD the
curves are first taken per treebank, then averaged over treebanks ("for UD we report
the average across languages"), the band too.

Each line goes as far as its runs go. Where every seed (and, for UD means, every
treebank) of a line has a value, the line is solid with its band; beyond, where
early stopping or a shorter treebank has left some runs behind, it goes on thin and
faded, as the mean of the runs that are left, so the mean never silently changes
which runs it covers. A damaged run (`convatt.rundir.reading`) is left out, with a
warning, never drawn in part. Runs still training (`--include-running`) are lines
of their own, dashed, "(running)" in the legend.

Beside each line, at the right edge, a triangle marks the paper's final test
accuracy of that variant (Table 2b; for UD Table 2d, averaged over the treebanks of
the panel): the paper publishes no curves, only these end points (and they are test,
not dev, accuracies). Each mark is in the panel of its variant, at its value: the
y-axis grows to show it while the curves keep a third of the panel's height; beyond
(curves far below the paper's numbers), it is a triangle on the edge pointing off the
scale, with the paper's number beside it.

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

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from convatt.data.formats import FORMATS, PTB, UD, has_treebanks, is_sequence_preset, preset_label
from convatt.errors import ConvattError
from convatt.results import style
from convatt.results.frames import label_of, load_records_to_report, model_order
from convatt.results.output import Written, save
from convatt.results.paper import paper_table, paper_table2d
from convatt.results.stats import t_interval
from convatt.results.style import COLORS  # noqa: F401 (the palette, where it used to be)

BANDS = ("minmax", "std", "ci")
DEFAULT_BAND = "ci"  # the 95% confidence interval of the mean over seeds
CONFIDENCE = 0.95
MIN_SEEDS_FOR_CI = 3  # with two seeds the 95% t-interval is 12.7 times their half-distance: min-max instead
PERCENT = (0.0, 100.0)
EXTEND_AT_MOST = 3.0  # the y-axis grows to show the paper's marks if the curves keep a third of its height
SEQUENCE_CURVES = {"find-block": "dev exact match of the answer block", "char-lm": "dev next-character accuracy"}
AGG_COLUMNS = ["series", "variant", "setting", "running", "mean", "lo", "hi", "n_runs", "n_corpora", "complete"]


def _series(frame: pd.DataFrame) -> pd.Series:
    """The line a row belongs to: its model, plus the corpus when one preset has several
    corpora that are not averaged (PTB and the PTB sample side by side), plus "(running)"
    for runs still training (never averaged with finished ones)."""
    series = frame["model"]
    if not has_treebanks(frame["preset"].iloc[0]) and frame["corpus"].nunique() > 1:
        series = series + " (" + frame["corpus"] + ")"
    running = frame["running"].fillna(False).astype(bool) if "running" in frame else False
    return series.where(~running, series + style.RUNNING)


def ci_halfwidth(values) -> float:
    """Half the width of the 95% t-interval of the mean of `values` over seeds (NaN below two)."""
    low, high = t_interval(values, CONFIDENCE)
    return (high - low) / 2


def aggregate(frame: pd.DataFrame, x: str, y: str = "dev_accuracy", band: str = DEFAULT_BAND) -> pd.DataFrame:
    """Curves of one preset -> per (series, x): mean, lo, hi in percent, n_runs, n_corpora, complete.

    Per corpus and x: mean over the seeds that reached x, band lo/hi = min/max over them
    ("minmax"), mean ∓ std (ddof=0, "std") or mean ∓ the 95% t-interval's half width ("ci",
    NaN below two seeds). Then, per series and x, the mean over the
    corpora that reached x of mean, lo and hi. `complete`: every run of the series reached x.
    """
    if band not in BANDS:
        raise ConvattError(f"unknown band {band!r}: use one of {', '.join(BANDS)}")
    if frame.empty:
        return pd.DataFrame(columns=AGG_COLUMNS[:4] + [x] + AGG_COLUMNS[4:])
    running = frame["running"].fillna(False).astype(bool) if "running" in frame else False
    frame = frame.assign(series=_series(frame), running=running, value=100 * frame[y].astype(float))
    keys = ["series", "variant", "setting", "running"]
    per_corpus = (
        frame.groupby([*keys, "corpus", x])["value"]
        .agg(
            mean="mean",
            lo="min",
            hi="max",
            std=lambda v: float(np.std(v, ddof=0)),
            ci=ci_halfwidth,
            n_runs="size",
        )
        .reset_index()
    )
    if band in ("std", "ci"):
        per_corpus["lo"] = per_corpus["mean"] - per_corpus[band]
        per_corpus["hi"] = per_corpus["mean"] + per_corpus[band]
    per_corpus[["lo", "hi"]] = per_corpus[["lo", "hi"]].clip(*PERCENT)  # an accuracy is in 0-100%, its band too
    out = (
        per_corpus.groupby([*keys, x])
        .agg(mean=("mean", "mean"), lo=("lo", "mean"), hi=("hi", "mean"), n_runs=("n_runs", "sum"))
        .reset_index()
    )
    out["n_corpora"] = per_corpus.groupby([*keys, x])["corpus"].nunique().to_numpy()
    out["complete"] = out["n_runs"].to_numpy() == out["series"].map(frame.groupby("series")["run_dir"].nunique())
    return out[AGG_COLUMNS[:4] + [x] + AGG_COLUMNS[4:]].sort_values(["series", x]).reset_index(drop=True)


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


def _paper_marks(frame: pd.DataFrame, preset: str) -> list[PaperMark]:
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


def _draw_marks(ax: Axes, marks: list[PaperMark]) -> list[PaperMark]:
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


def _legend(ax: Axes, on_scale: bool, off_scale: bool) -> None:
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
    marks = _paper_marks(frame, preset)
    off = _draw_marks(ax, marks)
    if legend:
        _legend(ax, len(off) < len(marks), bool(off))


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


BAND_CAPTIONS = {
    "minmax": "band: min to max over seeds",
    "std": "band: ± std over seeds",
    "ci": f"band: {CONFIDENCE:.0%} t-interval of the mean over seeds",
}


@dataclass(frozen=True)
class Band:
    """The band a figure draws (one of `BANDS`) and what its caption says of it."""

    kind: str
    caption: str


def _fewest_seeds(frame: pd.DataFrame) -> int:
    """The fewest runs (seeds) of any line on any corpus in `frame`; 0 for none."""
    if frame.empty:
        return 0
    return int(frame.assign(series=_series(frame)).groupby(["series", "corpus"])["run_dir"].nunique().min())


def band_for(frame: pd.DataFrame, asked: str) -> Band:
    """The band `asked` for, except a t-interval over fewer than `MIN_SEEDS_FOR_CI` seeds (the
    fewest of any line and corpus in `frame`): min to max then, and the caption says why."""
    if asked not in BANDS:
        raise ConvattError(f"unknown band {asked!r}: use one of {', '.join(BANDS)}")
    seeds = _fewest_seeds(frame)
    if asked == "ci" and 0 < seeds < MIN_SEEDS_FOR_CI:
        why = f"{seeds} seed{'s' if seeds > 1 else ''}: too few for a {CONFIDENCE:.0%} t-interval"
        return Band("minmax", f"{BAND_CAPTIONS['minmax']} ({why})")
    return Band(asked, BAND_CAPTIONS[asked])


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
