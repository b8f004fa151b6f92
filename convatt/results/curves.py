"""Learning curves as numbers: per line (series) and step, the mean over seeds and its band.

The band over seeds: by default ("ci") the 95% t-interval of the mean over seeds
(`convatt.results.stats.t_interval`), or min to max, or mean ± std. Below three seeds a
t-interval says nothing (for two it is 12.7 times their half-distance wide), so a figure with
a line of fewer seeds draws min to max instead and its caption says so (`band_for`). A band
never leaves 0-100%. For UD the curves are first taken per treebank, then averaged over
treebanks ("for UD we report the average across languages"), the band too.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from convatt.data.formats import has_treebanks
from convatt.errors import ConvattError
from convatt.results import style
from convatt.results.stats import t_interval

BANDS = ("minmax", "std", "ci")
DEFAULT_BAND = "ci"  # the 95% confidence interval of the mean over seeds
CONFIDENCE = 0.95
MIN_SEEDS_FOR_CI = 3  # with two seeds the 95% t-interval is 12.7 times their half-distance: min-max instead
PERCENT = (0.0, 100.0)
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
