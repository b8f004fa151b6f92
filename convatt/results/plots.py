"""Learning curves: Table 2a (dev accuracy per epoch) and Figure 2 (every 100 batches).

One line per model (variant, marked with its setting, e.g. [mask] when pads were
masked): the mean over seeds, with a band over seeds (min to max by default, or
mean ± std). For UD the curves are first taken per treebank, then averaged over
treebanks ("for UD we report the average across languages"), the band too. Only
the x values (epochs, steps) that every seed of every corpus of a line reached
are drawn, so a mean never changes which runs it covers along the line: runs stop
at different epochs (early stopping), and a line ends where its first run stopped.
A damaged run (`convatt.run.reading`) is left out, with a warning, never drawn in part.

Figures are `matplotlib.figure.Figure`s made without pyplot (no global state, no
display needed): `write_plots` renders them with the Agg canvas to PNG and PDF; a
notebook shows them inline.

    plot_epochs(histories, preset)   Table 2a (PTB), or its UD counterpart
    plot_steps(curves, preset)       one panel of Figure 2
    figure2(curves)                  Figure 2: PTB left, UD right
    write_plots(root, out)           the PNG and PDF files (`make plots`)
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from convatt.data.formats import FORMATS, PTB, UD, has_treebanks, preset_label
from convatt.errors import ConvattError
from convatt.model.variants import VARIANTS
from convatt.results.frames import load_curves, load_histories, load_runs_to_report, model_order
from convatt.results.tables import Written
from convatt.run.storage import write_atomically

BANDS = ("minmax", "std")
# One fixed colour per variant, the same in every figure (tab10, two more, then five of tab20b
# for the attention variants beyond the paper).
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
]
COLORS = {v: _PALETTE[i % len(_PALETTE)] for i, v in enumerate(VARIANTS)}


def _series(frame: pd.DataFrame) -> pd.Series:
    """The line a row belongs to: its model, plus the corpus when one preset has several
    corpora that are not averaged (PTB and the PTB sample side by side)."""
    if not has_treebanks(frame["preset"].iloc[0]) and frame["corpus"].nunique() > 1:
        return frame["model"] + " (" + frame["corpus"] + ")"
    return frame["model"]


def aggregate(frame: pd.DataFrame, x: str, y: str = "dev_accuracy", band: str = "minmax") -> pd.DataFrame:
    """Curves of one preset -> per (series, x): mean, lo, hi in percent, n_runs, n_corpora.

    Per corpus: mean over seeds, band lo/hi = min/max over seeds ("minmax") or
    mean ∓ std (ddof=0, "std"), at the x values that all of the corpus' runs reached.
    Then, per series, the mean over corpora of mean, lo and hi at the x values that all
    of the series' corpora have.
    """
    if band not in BANDS:
        raise ConvattError(f"unknown band {band!r}: use one of {', '.join(BANDS)}")
    columns = ["series", "variant", "setting", x, "mean", "lo", "hi", "n_runs", "n_corpora"]
    if frame.empty:
        return pd.DataFrame(columns=columns)
    frame = frame.assign(series=_series(frame), value=100 * frame[y].astype(float))
    per_corpus = (
        frame.groupby(["series", "variant", "setting", "corpus", x])["value"]
        .agg(mean="mean", lo="min", hi="max", std=lambda v: float(np.std(v, ddof=0)), n_runs="size")
        .reset_index()
    )
    runs_per_corpus = frame.groupby(["series", "corpus"])["run_dir"].nunique()
    every_run = (
        per_corpus["n_runs"].to_numpy()
        == runs_per_corpus.loc[list(zip(per_corpus["series"], per_corpus["corpus"]))].to_numpy()
    )
    per_corpus = per_corpus[every_run]
    if band == "std":
        per_corpus["lo"] = per_corpus["mean"] - per_corpus["std"]
        per_corpus["hi"] = per_corpus["mean"] + per_corpus["std"]
    n_corpora = per_corpus.groupby("series")["corpus"].transform("nunique")
    per_x = per_corpus.groupby(["series", x])["corpus"].transform("nunique")
    common = per_corpus[per_x == n_corpora]
    out = (
        common.groupby(["series", "variant", "setting", x])
        .agg(
            mean=("mean", "mean"),
            lo=("lo", "mean"),
            hi=("hi", "mean"),
            n_runs=("n_runs", "sum"),
            n_corpora=("corpus", "nunique"),
        )
        .reset_index()
    )
    return out[columns].sort_values(["series", x]).reset_index(drop=True)


def _draw(ax: Axes, agg: pd.DataFrame, x: str) -> None:
    """One line per series (mean) and its band; nothing else is drawn as a line."""
    keys = agg[["series", "variant", "setting"]].drop_duplicates()
    keys = sorted(keys.itertuples(index=False), key=lambda k: (*model_order((k.setting, k.variant)), k.series))
    for key in keys:
        rows = agg[agg["series"] == key.series]
        color = COLORS.get(key.variant, "#555555")
        style = "--" if key.setting else "-"
        ax.plot(
            rows[x],
            rows["mean"],
            style,
            color=color,
            label=key.series,
            linewidth=1.5,
            marker="o" if len(rows) < 12 else None,
            markersize=3,
        )
        ax.fill_between(rows[x], rows["lo"], rows["hi"], color=color, alpha=0.15, linewidth=0)


def _panel(ax: Axes, frame: pd.DataFrame, preset: str, x: str, band: str, what: str, missing: str = "") -> None:
    name = preset_label(preset)
    frame = frame[frame["preset"] == preset] if not frame.empty else frame
    if frame.empty:
        ax.text(0.5, 0.5, missing or f"no finished {name} runs", ha="center", va="center", transform=ax.transAxes)
        ax.set_title(name)
        ax.set_xticks([])
        ax.set_yticks([])
        return
    _draw(ax, aggregate(frame, x, band=band), x)
    corpora = sorted(frame["corpus"].unique())
    if has_treebanks(preset):
        title = f"{name}, mean over {len(corpora)} treebank{'s' if len(corpora) > 1 else ''}"
    else:
        title = ", ".join(corpora)
    ax.set_title(title)
    ax.set_xlabel(what)
    ax.set_ylabel("dev accuracy (%)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small", loc="lower right")


def _figure(width: float = 6.4, ncols: int = 1) -> tuple[Figure, list[Axes]]:
    fig = Figure(figsize=(width, 4.4), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, ncols, squeeze=False)[0]
    return fig, list(axes)


def _band_text(band: str) -> str:
    return "band: min-max over seeds" if band == "minmax" else "band: ± std over seeds"


def plot_epochs(histories: pd.DataFrame, preset: str = PTB.name, band: str = "minmax") -> Figure:
    """Table 2a: dev accuracy after each epoch, one line per model with a band over seeds."""
    fig, (ax,) = _figure()
    _panel(ax, histories, preset, "epoch", band, "epoch")
    epochs = sorted({x for line in ax.get_lines() for x in line.get_xdata()})
    if 0 < len(epochs) <= 10:
        ax.set_xticks(epochs)  # whole epochs only, also for a single one
        ax.set_xlim(min(epochs) - 0.5, max(epochs) + 0.5)
    elif epochs:
        ax.xaxis.get_major_locator().set_params(integer=True)
    which = "Table 2a" if preset == PTB.name else "As Table 2a"
    fig.suptitle(f"{which}: development accuracy during training ({_band_text(band)})", fontsize="medium")
    return fig


def plot_steps(
    curves: pd.DataFrame,
    preset: str = PTB.name,
    band: str = "minmax",
    ax: Axes | None = None,
    runs: pd.DataFrame | None = None,
):
    """One panel of Figure 2: dev accuracy every 100 training batches (the first ones).

    `runs` (`load_runs`), if given, lets an empty panel tell "no finished runs" from
    "runs too short for a dev curve"."""
    fig = None
    if ax is None:
        fig, (ax,) = _figure()
    name = preset_label(preset)
    missing = ""
    if runs is not None and (runs["preset"] == preset).any():
        missing = (
            f"no {name} run has a dev curve\n(curve.csv gets a point every --curve-every batches;\n"
            "shorter runs have none)"
        )
    _panel(ax, curves, preset, "step", band, "training batches", missing)
    return fig if fig is not None else ax.figure


def figure2(curves: pd.DataFrame, band: str = "minmax", runs: pd.DataFrame | None = None) -> Figure:
    """Figure 2: dev accuracy during the first training steps, PTB (left) and UD (right)."""
    fig, (left, right) = _figure(width=12, ncols=2)
    plot_steps(curves, PTB.name, band, ax=left, runs=runs)
    plot_steps(curves, UD.name, band, ax=right, runs=runs)
    fig.suptitle(f"Figure 2: development accuracy during training ({_band_text(band)})", fontsize="medium")
    return fig


def save(fig: Figure, stem: Path) -> list[Path]:
    """`stem`.png and `stem`.pdf, each written to a temporary name and moved into place."""
    paths = []
    for fmt in ("png", "pdf"):
        path = stem.with_name(f"{stem.name}.{fmt}")
        write_atomically(path, lambda tmp, fmt=fmt: fig.savefig(tmp, format=fmt, dpi=150))
        paths.append(path)
    return paths


def write_plots(runs: Path, out: Path, band: str = "minmax", settings: list[str] | None = None) -> Written:
    """Table 2a (PTB; and the same for UD when there are UD runs) and Figure 2 as PNG and PDF
    in `out`, from the finished runs under `runs`: the files written, and notes for the user.
    `settings`: draw only the runs of these settings (`Setting.label()`s, "paper" for the
    paper's own), e.g. ["paper", "keras3"] to leave ablations out; None: all."""
    frame = load_runs_to_report(runs, settings)
    histories = load_histories(Path(runs), frame)
    curves = load_curves(Path(runs), frame)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written = Written([], [])
    for preset in FORMATS:
        if not histories.empty and (histories["preset"] == preset).any():
            written.paths += save(plot_epochs(histories, preset, band), out / f"table2a_{preset}_dev_by_epoch")
    if not curves.empty:
        written.paths += save(figure2(curves, band, frame), out / "figure2_dev_by_step")
    else:
        written.notes.append(
            "no finished run has a dev curve (curve.csv gets a point every --curve-every = 100 "
            "batches by default; shorter runs have none), so Figure 2 was not drawn"
        )
    return written
