"""Outcomes that are bimodal: a seed either learns a task (its accuracy near 1) or stays at a shortcut. Averaging
such seeds measures which of them happened to learn; report instead the proportion of seeds that learn, with an
exact (Clopper–Pearson) binomial interval, and, apart from it, the metric among the seeds that learned. A claim
says which of the two it tests."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from odebook.study.stats import Interval, mean_ci

__all__ = ["Learners", "learners"]


@dataclass(frozen=True)
class Learners:
    """k of n seeds learned (their metric reached ``threshold``): the proportion with its exact interval, and the
    metric among the learners (None when none learned)."""

    k: int
    n: int
    threshold: float
    proportion: Interval
    among: Interval | None

    def __str__(self) -> str:
        p = self.proportion
        head = f"{self.k} of {self.n} seeds learn (≥ {self.threshold:g}): {p.mean:.2f} [{p.low:.2f}, {p.high:.2f}] " \
               "(exact 95 % interval)"
        return head + (f"; among learners {self.among}" if self.among else "; none learned")


def learners(values: Sequence[float], *, threshold: float, level: float = 0.95) -> Learners:
    """Split per-seed ``values`` (e.g. retrieval accuracy) at ``threshold`` (a seed with value ≥ threshold learned):
    the proportion of learners with its Clopper–Pearson interval (scipy.stats.binomtest) and the mean metric among
    the learners with its t-interval."""
    x = np.asarray(values, dtype=float)
    if len(x) == 0 or not np.all(np.isfinite(x)):
        raise ValueError(f"learners needs finite per-seed values, got {list(values)}")
    learned = x >= threshold
    k, n = int(learned.sum()), len(x)
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=level, method="exact")
    proportion = Interval(k / n, float(ci.low), float(ci.high), n)
    return Learners(k, n, threshold, proportion, mean_ci(x[learned], level) if k else None)
