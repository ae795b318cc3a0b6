"""A state's capacity read from an accuracy curve: the largest number of bindings k it recalls at ≥ 90 %.

Given per-seed accuracies at the tested k (seeds × ks, from MQAR, odebook.data.mqar), the estimate is the largest
tested k at which the mean accuracy over seeds, and at every smaller tested k, reaches ``threshold`` — the Zoology
reading of capacity from accuracy curves (Arora et al. 2023, arXiv:2312.04927). Its interval resamples the seeds
(a percentile bootstrap of the same statistic), so one seed that did not learn widens it instead of hiding in a
mean. The estimate is a tested k, not an interpolation: 0 means the smallest k already failed; the largest tested k
means the state was never filled (a lower bound — test larger k).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["Capacity", "capacity"]


@dataclass(frozen=True)
class Capacity:
    """The estimate and its bootstrap interval (tested ks, 0 below the smallest), the seeds, and the threshold."""

    estimate: int
    low: int
    high: int
    ks: tuple[int, ...]
    n: int
    threshold: float

    @property
    def lower_bound(self) -> bool:
        """The largest tested k still reached the threshold: the capacity may be larger."""
        return self.estimate == self.ks[-1]

    def __str__(self) -> str:
        where = (f"≥ {self.estimate} (every tested k up to {self.ks[-1]} reached it)" if self.lower_bound
                 else f"< {self.ks[0]} (the smallest k failed)" if self.estimate == 0 else str(self.estimate))
        return (f"capacity at ≥ {self.threshold:.0%} accuracy: {where}; seed bootstrap 95 % [{self.low}, {self.high}] "
                f"(n = {self.n} seeds, k tested {list(self.ks)})")


def _largest(mean: np.ndarray, ks: np.ndarray, threshold: float) -> np.ndarray:
    """Per row of mean accuracies (…, len(ks)): the largest k whose row prefix all reaches ``threshold``; 0 if none."""
    ok = np.cumprod(mean >= threshold, axis=-1).astype(bool)
    reached = ok.sum(axis=-1)
    return np.where(reached > 0, ks[np.maximum(reached - 1, 0)], 0)


def capacity(ks: Sequence[int], accuracy: np.ndarray, *, threshold: float = 0.9, level: float = 0.95,
             resamples: int = 4000, seed: int = 0) -> Capacity:
    """``accuracy``: (seeds, len(ks)) accuracies at increasing ``ks``."""
    ks_a, acc = np.asarray(ks, dtype=int), np.asarray(accuracy, dtype=float)
    if acc.ndim != 2 or acc.shape[1] != len(ks_a) or len(ks_a) == 0 or np.any(np.diff(ks_a) <= 0):
        raise ValueError(f"capacity needs accuracies of shape (seeds, {len(ks_a)}) at increasing ks, got shape "
                         f"{acc.shape} and ks {list(ks)}")
    estimate = int(_largest(acc.mean(axis=0), ks_a, threshold))
    rows = np.random.default_rng(seed).integers(0, len(acc), size=(resamples, len(acc)))
    boot = _largest(acc[rows].mean(axis=1), ks_a, threshold)
    tail = (1 - level) / 2
    low, high = (int(np.quantile(boot, q, method="inverted_cdf")) for q in (tail, 1 - tail))
    return Capacity(estimate, low, high, tuple(int(k) for k in ks_a), len(acc), threshold)
