"""Means and standard deviations over seeds and treebanks, as the paper reports them, and
t-intervals over seeds (`t_interval`, `seed_bands`: confidence bands for the figures).

Over seeds: the mean and the standard deviation (numpy's default, ddof=0, the spread
of the seeds themselves; NaN below two seeds). Missing values (a metric over no
tokens) are left out of a mean.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
import pandas as pd
from scipy import stats

STD_DDOF = 0


def seed_stats(values: Iterable) -> tuple[float, float, int]:
    """(mean, std, n) over seeds of the non-missing values; std is NaN below two values."""
    a = np.asarray([v for v in values if v is not None and not pd.isna(v)], dtype=float)
    if a.size == 0:
        return math.nan, math.nan, 0
    std = float(np.std(a, ddof=STD_DDOF)) if a.size >= 2 else math.nan
    return float(np.mean(a)), std, int(a.size)


def nanmean(values: Iterable) -> float:
    """The mean of the values that are numbers, NaN if none is."""
    a = pd.to_numeric(pd.Series(list(values), dtype=object), errors="coerce").dropna()
    return float(a.mean()) if len(a) else math.nan


def range_text(values: Iterable) -> str:
    """ "3" when all values are 3, "2-3" otherwise (e.g. seeds per treebank)."""
    values = [int(v) for v in values]
    lo, hi = min(values), max(values)
    return str(lo) if lo == hi else f"{lo}-{hi}"


def t_interval(values: Iterable, confidence: float = 0.95) -> tuple[float, float]:
    """The Student-t confidence interval of the mean of the non-missing `values` (seeds):
    mean ± t(1 − (1 − confidence)/2, n − 1) · s / √n with s the sample std (ddof=1).
    NaNs below two values; (mean, mean) when they are all equal."""
    a = np.asarray([v for v in values if v is not None and not pd.isna(v)], dtype=float)
    if a.size < 2:
        return math.nan, math.nan
    half = float(stats.t.ppf(0.5 + confidence / 2, a.size - 1) * stats.sem(a))
    return float(a.mean()) - half, float(a.mean()) + half


def seed_bands(frame: pd.DataFrame, by: list[str], value: str, confidence: float = 0.95) -> pd.DataFrame:
    """Per group of `by` (e.g. variant and step of a learning curve): the mean of `value` over
    the group's rows (seeds), the `t_interval` band (low, high) and n, for confidence bands
    over seeds in place of min-max. Columns: by + [mean, low, high, n]."""
    rows = []
    for key, group in frame.groupby(by, sort=True, dropna=False):
        values = group[value].dropna()
        low, high = t_interval(values, confidence)
        rows.append({**dict(zip(by, key)), "mean": nanmean(values), "low": low, "high": high, "n": len(values)})
    return pd.DataFrame(rows, columns=[*by, "mean", "low", "high", "n"])
