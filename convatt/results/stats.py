"""Means and standard deviations over seeds and treebanks, as the paper reports them.

Over seeds: the mean and the standard deviation (numpy's default, ddof=0, the spread
of the seeds themselves; NaN below two seeds). Missing values (a metric over no
tokens) are left out of a mean.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
import pandas as pd

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
