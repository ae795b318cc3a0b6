"""Statistics over seeds: means with t-intervals (scipy)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

__all__ = ["Interval", "mean_ci"]


@dataclass(frozen=True)
class Interval:
    mean: float
    low: float
    high: float
    n: int

    def __str__(self) -> str:
        if self.n < 2:
            return f"{self.mean:.4g} (n = 1, no interval)"
        return f"{self.mean:.4g} [{self.low:.4g}, {self.high:.4g}] (n = {self.n})"


def mean_ci(values: Sequence[float], level: float = 0.95) -> Interval:
    """Mean and two-sided Student-t confidence interval; with one value the interval is NaN."""
    x = np.asarray(values, dtype=float)
    n = len(x)
    if n == 0:
        raise ValueError("mean_ci needs at least one value")
    mean = float(x.mean())
    if n < 2:
        return Interval(mean, math.nan, math.nan, n)
    half = float(stats.t.ppf(0.5 + level / 2, df=n - 1) * x.std(ddof=1) / math.sqrt(n))
    return Interval(mean, mean - half, mean + half, n)


def at_most(interval: Interval, limit: float) -> str:
    """Verdict on "the quantity is at most ``limit``": 'held' when the whole 95 % interval lies at or below it,
    'not held' when the whole interval lies above it, else 'inconclusive'. With one seed the mean decides."""
    if interval.n < 2:
        return "held" if interval.mean <= limit else "not held"
    if interval.high <= limit:
        return "held"
    return "not held" if interval.low > limit else "inconclusive"
