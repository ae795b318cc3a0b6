"""Statistics over seeds (means with t-intervals, tests, fits; scipy) and the one rule that turns an interval into a
verdict."""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

__all__ = ["Interval", "mean_ci", "t_test_p", "bounded_mean_ci", "proportion_ci", "OUTCOMES", "NEEDS", "outcome_word",
           "decide", "Verdict", "PowerLaw", "power_law_fit", "PairedTest", "paired_test", "holm"]


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


def t_test_p(s: np.ndarray, value: float, side: str, *, limit: bool = False) -> np.ndarray:
    """One-sided p of the one-sample t-test that the mean of s (last axis) is ``side`` ("less" or "greater") ``value``;
    NaN with fewer than two values. Where nothing varies (up to rounding): NaN, or with ``limit`` the limit as the
    spread goes to 0 — 0 when every value lies strictly on ``side`` of ``value``, 1 on the other side, NaN at it.
    study.claims' ``p_values`` takes the limit for the tests that fail a claim only: identical differences (an
    ablation that changed no answer of any seed) rule an effect out but never hold one (seeds that sampled no
    variance prove nothing)."""
    n = s.shape[-1]
    if n < 2:
        return np.full(s.shape[:-1], math.nan)
    sd = s.std(ddof=1, axis=-1)
    varies = sd > 1e-12 * np.maximum(1.0, np.abs(s).max(axis=-1))
    t = (s.mean(axis=-1) - value) / np.where(varies, sd, 1.0) * math.sqrt(n)
    p = stats.t.cdf(t, n - 1) if side == "less" else stats.t.sf(t, n - 1)
    if not limit:
        return np.where(varies, p, math.nan)
    gap = (s.mean(axis=-1) - value) * (1 if side == "greater" else -1)  # > 0: the values lie on ``side``
    return np.where(varies, p, np.where(gap > 0, 0.0, np.where(gap < 0, 1.0, math.nan)))


def bounded_mean_ci(values: Sequence[float], *, low: float = 0.0, high: float = 1.0, level: float = 0.95) -> Interval:
    """Mean of values that lie in [low, high] (an accuracy per seed, a proportion) with the Student-t interval of
    ``mean_ci`` cut to that range: the mean lies in the range, so the cut keeps the interval's coverage and drops
    only values it cannot take ([−0.62, 1.65] over three accuracies reads [0, 1]: three seeds pin down nothing).
    A logit transform cannot take a seed at 0 or 1, common where seeds learn or do not, and a bootstrap over three
    seeds gives little more than their range."""
    x = np.asarray(values, dtype=float)
    if len(x) and (x.min() < low or x.max() > high):
        raise ValueError(f"bounded_mean_ci: values must lie in [{low}, {high}], got {x.min():.4g} to {x.max():.4g}")
    ci = mean_ci(x, level)
    if ci.n < 2:
        return ci
    return Interval(ci.mean, max(ci.low, low), min(ci.high, high), ci.n)


def proportion_ci(successes: int, n: int, *, level: float = 0.95, method: str = "wilson") -> Interval:
    """A proportion ``successes / n`` with its Wilson interval, or Clopper–Pearson's exact one (``method="exact"``),
    which lie in [0, 1] by construction (scipy.stats.binomtest)."""
    if n < 1 or not 0 <= successes <= n:
        raise ValueError(f"proportion_ci: need 0 <= successes <= n and n >= 1, got {successes} of {n}")
    ci = stats.binomtest(int(successes), int(n)).proportion_ci(confidence_level=level, method=method)
    return Interval(successes / n, float(ci.low), float(ci.high), n)


OUTCOMES = ("held", "not held", "equivalent", "not testable at this scale", "inconclusive", "descriptive", "not run")
# What each word means, in every verdict of the book (study.claims.settle, the looks, stats.decide):
# - held: the test of the claim rejected its null — for a superiority claim "no difference" (a − b = 0): the effect
#   lies on the claimed side of 0, not necessarily beyond the margin, which is the smallest effect of interest (it
#   sets the power and the futility test);
# - not held: the test of the claim's failure rejected — the claimed effect is ruled out: an effect as large as the
#   margin (a threshold test, which has none: any effect on the claimed side of its threshold);
# - equivalent: both one-sided tests at ±margin rejected (TOST);
# - not testable at this scale: a calibration (gate) the claim rests on came out not held, with its own error;
# - inconclusive: neither test rejected at its level.
NEEDS = "inconclusive — needs ≈ {n} seeds"  # an inconclusive verdict that says what it would take (study.claims)


def outcome_word(outcome: str) -> str:
    """The word of OUTCOMES an outcome is: itself, or 'inconclusive' for "inconclusive — needs ≈ N seeds"; '' for
    anything else."""
    if outcome in OUTCOMES:
        return outcome
    return "inconclusive" if re.fullmatch(NEEDS.format(n=r"\d[\d,]*"), outcome) else ""


def decide(interval: Interval, threshold: float, *, claim: str) -> str:
    """The book's one verdict rule on an interval across seeds. ``claim`` is "below" (the quantity is below
    ``threshold``) or "above". 'held' when the whole interval lies strictly on the claimed side, 'not held' when it
    lies strictly on the other side, 'inconclusive' when it touches or straddles the threshold — and also when there
    is no interval (fewer than two values, NaN) or nothing varies (every value equal: the seeds sampled no training
    variance, e.g. a constant guess, so a zero-width interval claims a certainty it does not have)."""
    if claim not in ("below", "above"):
        raise ValueError(f"claim must be 'below' or 'above', got {claim!r}")
    low, high = interval.low, interval.high
    if interval.n < 2 or math.isnan(low) or math.isnan(high) or low == high:
        return "inconclusive"
    if claim == "above":
        low, high, threshold = -high, -low, -threshold
    if high < threshold:
        return "held"
    return "not held" if low > threshold else "inconclusive"


@dataclass(frozen=True)
class Verdict:
    """A claim, its outcome (one of OUTCOMES, or NEEDS filled in), the numbers it rests on, and the scale it was
    measured at (model size, tokens, sequence length — beside the source's). A declared claim (study.claims) also
    carries its ``kind`` with its margin ("equivalence at ±0.02 nats") and its ``role`` ("primary, Holm over 3")."""

    claim: str
    outcome: str
    evidence: str = ""
    scale: str = ""
    kind: str = ""
    role: str = ""
    effects: tuple[tuple[str, Interval], ...] = ()  # (comparison, mean a − b with its interval): the front page's
    units: str = ""                                  # finding, in the claim's units (optional; filled by claims)

    def __post_init__(self):
        if not outcome_word(self.outcome):
            raise ValueError(f"verdict outcome must be one of {OUTCOMES} or {NEEDS!r}, got {self.outcome!r}")

    @property
    def declared(self) -> str:
        """"primary · equivalence at ±0.02 nats", or '' for a verdict of the older, undeclared form."""
        return " · ".join(x for x in (self.role, self.kind) if x)

    def markdown(self) -> str:
        tail = "".join(f" — {x}" for x in (self.evidence, self.scale and f"measured at {self.scale}") if x)
        return f"- **{self.claim}**{f' ({self.declared})' if self.declared else ''}: {self.outcome}{tail}"

    def to_dict(self) -> dict:
        extra = {k: v for k, v in (("kind", self.kind), ("role", self.role), ("units", self.units)) if v}
        if self.effects:  # structured, so the front page need not parse the evidence; None for a missing bound
            extra["effects"] = [{"comparison": name, **{k: _finite(getattr(e, k)) for k in ("mean", "low", "high")},
                                 "n": e.n} for name, e in self.effects]
        return {"claim": self.claim, "verdict": self.outcome, "evidence": self.evidence, "scale": self.scale, **extra}


def _finite(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


@dataclass(frozen=True)
class PowerLaw:
    """L(N) = a·N^(−alpha) + c, with a 95 % interval on alpha (NaN when too few points for one)."""

    a: float
    alpha: float
    c: float
    alpha_low: float
    alpha_high: float
    n_points: int

    def __call__(self, n):
        return self.a * np.asarray(n, dtype=float) ** (-self.alpha) + self.c


def power_law_fit(n: Sequence[float], loss: Sequence[float]) -> PowerLaw:
    """Least-squares fit (scipy.optimize.curve_fit) of L(N) = a·N^(−α) + c; N is rescaled by its first value
    for conditioning. The interval on α is a t-interval from the fit's covariance, with len(n) − 3 degrees of
    freedom: three points determine the curve exactly and support no interval."""
    from scipy.optimize import OptimizeWarning, curve_fit

    x, y = np.asarray(n, dtype=float), np.asarray(loss, dtype=float)
    if len(x) < 3:
        raise ValueError(f"a power law with an offset needs at least 3 points, got {len(x)}")
    scale = x[0]
    f = lambda n_, a, alpha, c: a * (n_ / scale) ** (-alpha) + c  # noqa: E731
    p0 = (max(y[0] - y[-1], 1e-3), 0.3, max(y[-1] - 0.1, 0.0))
    dof = len(x) - 3
    with warnings.catch_warnings():  # with dof = 0 scipy warns that it cannot estimate the covariance: we know
        warnings.simplefilter("ignore", OptimizeWarning)
        (a, alpha, c), cov = curve_fit(f, x, y, p0=p0, maxfev=20000)
    if dof > 0 and np.isfinite(cov[1, 1]):
        half = float(stats.t.ppf(0.975, dof) * math.sqrt(cov[1, 1]))
        low, high = alpha - half, alpha + half
    else:
        low = high = math.nan
    return PowerLaw(float(a * scale**alpha), float(alpha), float(c), low, high, len(x))


# -- paired comparisons across seeds (experiment.compare_to's table), Holm's correction (study.claims' families) -------
@dataclass(frozen=True)
class PairedTest:
    """A claim about paired values (seed i of a against seed i of b, which shared the batch stream): the mean
    difference (or mean log ratio) with its t-interval, the paired t-test's two-sided p-value of "the mean equals
    ``threshold``" (scipy.stats.ttest_rel), the effect size d_z = mean(d − threshold) / sd(d), and the claimed side."""

    claim: str  # "below" or "above": the mean difference lies below / above threshold
    threshold: float
    interval: Interval
    t: float
    p: float
    dz: float
    log: bool  # values compared as log(a / b)


def paired_test(a: Sequence[float], b: Sequence[float], *, claim: str, threshold: float = 0.0,
                log: bool = False, level: float = 0.95) -> PairedTest:
    """Paired t-test of d_i = a_i − b_i (or log(a_i / b_i) with ``log``) against ``threshold``."""
    if claim not in ("below", "above"):
        raise ValueError(f"claim must be 'below' or 'above', got {claim!r}")
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.shape != y.shape:
        raise ValueError(f"paired values need equal lengths, got {len(x)} and {len(y)}")
    d = np.log(x / y) if log else x - y
    interval = mean_ci(d, level)
    sd = float(d.std(ddof=1)) if len(d) > 1 else math.nan
    if len(d) < 2 or not sd > 1e-12 * max(1.0, float(np.abs(d).max())):  # nothing varies (up to rounding)
        return PairedTest(claim, threshold, interval, math.nan, math.nan, math.nan, log)
    res = stats.ttest_rel(x if not log else d, (y if not log else np.zeros_like(d)) + threshold)
    return PairedTest(claim, threshold, interval, float(res.statistic), float(res.pvalue),
                      (float(d.mean()) - threshold) / sd, log)


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (family-wise error control): sort ascending, multiply the k-th smallest
    (k = 0 …) by m − k, keep them non-decreasing, cap at 1. NaN p-values stay NaN and do not count in m."""
    p = np.asarray(pvalues, dtype=float)
    idx = [i for i in np.argsort(p) if not math.isnan(p[i])]
    m, out, running = len(idx), [math.nan] * len(p), 0.0
    for k, i in enumerate(idx):
        running = max(running, min(1.0, (m - k) * p[i]))
        out[i] = running
    return out
