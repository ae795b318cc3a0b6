"""Seeds in looks: a group-sequential test with Lan–DeMets alpha spending of O'Brien–Fleming shape.

A study looks at n_1 < n_2 < … < n_K seeds (n_K the cap its profile sets), information fraction t_k = n_k / n_K.
Lan & DeMets (1983) spend α(t) = 2 − 2Φ(z_{1−α/2} / √t) of the one-sided level α by fraction t (α(1) = α, almost
nothing early: O'Brien & Fleming's shape). The boundary c_k on the Z scale solves
P₀(Z_1 < c_1, …, Z_{k−1} < c_{k−1}, Z_k ≥ c_k) = α(t_k) − α(t_{k−1}) under the canonical joint distribution
corr(Z_i, Z_j) = √(t_i / t_j) (integrated numerically, Armitage, McPherson & Rowe 1969; checked against scipy's
multivariate normal). A look at n seeds has a t statistic with n − 1 degrees of freedom rather than a Z, so it is
compared at a nominal level 1 − Φ(c_k) (the "significance level approach" for small samples). At the few seeds a
study affords that approach exceeds α (t statistics at 2–5 seeds are not jointly normal: P(held | null) was 0.057
for looks (2, 3) at α = 0.05), so the boundaries are those of a smaller one-sided α' chosen by simulation
(``calibrated``): the largest α' ≤ α whose nominal levels, met by the t-tests at the design's own seed counts, hold
P(efficacy | null) at α. Under the null's edge the t statistics are pivotal (their law does not depend on the
spread), so one simulation of CALIBRATION_STUDIES standard normal studies per design serves every claim.

At each look the claim's own tests run on the seeds so far (study.claims.p_values): its hold test below the nominal
level stops for efficacy (held, or equivalent); its fail test below it stops for futility (the effect of interest,
or the equivalence, ruled out). Futility is non-binding: it only ever stops a study, so it cannot raise the chance
of a false "held". Each seed's run is cached by its caller, so a look costs only its new seeds; ``decide`` takes all
the differences so far and replays the looks they cover, so the same seeds always give the same decision.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np
from scipy import integrate, optimize, stats

from odebook.study.claims import TESTED, Claim, p_values

__all__ = ["spent", "boundaries", "calibrated", "CALIBRATION_STUDIES", "Look", "Decision", "decide", "decide_claim",
           "decide_all", "Operating", "operating"]


def spent(t: float, alpha: float) -> float:
    """Lan–DeMets O'Brien–Fleming-type spending: the one-sided α spent by information fraction ``t``."""
    if t <= 0:
        return 0.0
    return float(2 - 2 * stats.norm.cdf(stats.norm.isf(alpha / 2) / math.sqrt(min(t, 1.0))))


GRID = 801  # points of the numerical integration over the continuation region


@lru_cache(maxsize=256)
def _boundaries(fractions: tuple[float, ...], alpha: float) -> tuple[float, ...]:
    """Boundaries by the recursive integration of Armitage, McPherson & Rowe (1969): carry the sub-density of Z_k on
    the paths that have not crossed, and solve each look's crossing probability for c_k (brentq). Checked against
    scipy's multivariate normal and the published constants in tests/study/test_sequential.py."""
    out: list[float] = []
    z = dens = None  # the grid over (−10, c_{k−1}) and the sub-density of Z_{k−1} on it
    for k, t in enumerate(fractions):
        step = spent(t, alpha) - spent(fractions[k - 1], alpha) if k else spent(t, alpha)
        if k == 0:
            out.append(float(stats.norm.isf(step)))
            z = np.linspace(-10.0, out[0], GRID)
            dens = stats.norm.pdf(z)
            continue
        r, sd = math.sqrt(fractions[k - 1] / t), math.sqrt(1 - fractions[k - 1] / t)  # Z_k = r·Z_{k−1} + sd·N(0, 1)

        def crossing(c: float, z=z, dens=dens, r=r, sd=sd) -> float:
            return float(integrate.trapezoid(dens * stats.norm.sf((c - r * z) / sd), z))

        out.append(float(optimize.brentq(lambda c: crossing(c) - step, -10.0, 40.0, xtol=1e-7)))
        new = np.linspace(-10.0, out[-1], GRID)
        kernel = stats.norm.pdf((new[:, None] - r * z[None, :]) / sd) / sd
        z, dens = new, integrate.trapezoid(kernel * dens[None, :], z, axis=1)
    return tuple(out)


def boundaries(looks: Sequence[int], alpha: float) -> tuple[float, ...]:
    """The one-sided efficacy boundaries c_k (Z scale) at looks of ``looks`` observations (seeds, or any measure of
    information), the last being the cap."""
    looks = _checked(looks, least=1)
    return _boundaries(tuple(n / looks[-1] for n in looks), float(alpha))


def _checked(looks: Sequence[int], *, least: int = 2) -> tuple[int, ...]:
    out = tuple(int(n) for n in looks)
    whole = all(n == x for n, x in zip(out, looks))
    if not out or out[0] < least or any(b <= a for a, b in zip(out, out[1:])) or not whole:
        raise ValueError(f"looks must be increasing whole numbers of seeds, the first at least {least}, "
                         f"got {list(looks)}")
    return out


CALIBRATION_STUDIES = 200_000  # Monte-Carlo standard error of P(held | null) ≈ 0.0005 at α = 0.05
CALIBRATION_SEED = 43


@lru_cache(maxsize=128)
def calibrated(looks: tuple[int, ...], alpha: float) -> float:
    """The one-sided α' ≤ ``alpha`` whose boundaries, met by one-sample t-tests at ``looks`` seeds (each look's p
    against the nominal level 1 − Φ(c_k)), give P(efficacy | null) = ``alpha`` over CALIBRATION_STUDIES simulated
    studies; ``alpha`` itself where that design does not exceed it (one look: the t-test is exact)."""
    looks = _checked(looks)
    if len(looks) == 1:
        return float(alpha)
    d = np.random.default_rng(CALIBRATION_SEED).standard_normal((CALIBRATION_STUDIES, looks[-1]))
    # the smallest p over the looks is what a study's efficacy stop compares, look by look
    ps = np.stack([stats.t.cdf(d[:, :n].mean(1) / d[:, :n].std(1, ddof=1) * math.sqrt(n), n - 1) for n in looks], 1)

    def type_one(a: float) -> float:
        levels = stats.norm.sf(np.array(boundaries(looks, a)))
        return float(np.mean((ps < levels).any(axis=1)))

    if type_one(alpha) <= alpha:
        return float(alpha)
    return float(optimize.brentq(lambda a: type_one(a) - alpha, alpha / 4, alpha, xtol=alpha * 1e-4))


def _level(looks: tuple[int, ...], k: int, alpha: float, sides: int) -> float:
    """The nominal level of look k for a p that doubles a one-sided one (``sides`` = 2) or not: the boundary of the
    calibrated one-sided level (``calibrated``)."""
    return sides * float(stats.norm.sf(_boundary(looks, k, alpha / sides)))


def _boundary(looks: tuple[int, ...], k: int, alpha: float) -> float:
    """c_k on the Z scale at one-sided ``alpha``, calibrated for t-tests at ``looks`` seeds."""
    return boundaries(looks, calibrated(tuple(looks), alpha))[k]


@dataclass(frozen=True)
class Look:
    """One look: n seeds, the mean difference, the p of holding and of failing, and the nominal levels they meet."""

    n: int
    mean: float
    p_hold: float
    p_fail: float
    level_hold: float
    level_fail: float
    boundary: float  # c_k on the Z scale (one-sided α, calibrated for the t-tests at these seed counts)


@dataclass(frozen=True)
class Decision:
    """``action``: "efficacy" (stop: held or equivalent), "futility" (stop: ruled out), "cap" (the last look came
    and went: inconclusive) or "continue" (run seeds up to ``next_n``)."""

    action: str
    n: int
    next_n: int | None
    looks: tuple[Look, ...]
    parts: tuple[tuple[str, "Decision"], ...] = ()  # a compound claim's parts, each decided on its own

    def markdown(self) -> str:
        if self.parts:
            return "\n\n".join(f"*{name}*\n\n{d.markdown()}" for name, d in self.parts) + "\n\n" + self._tail()
        rows = ["| seeds | mean a − b | p (holds) | p (fails) | nominal level | boundary z |",
                "|---|---|---|---|---|---|"]
        rows += [f"| {k.n} | {k.mean:.4g} | {k.p_hold:.3g} | {k.p_fail:.3g} | {k.level_hold:.3g} | {k.boundary:.3f} |"
                 for k in self.looks]
        return "\n".join(rows) + "\n\n" + self._tail()

    def _tail(self) -> str:
        tail = f"continue to {self.next_n} seeds" if self.action == "continue" else f"stopped at {self.n} seeds"
        return f"**{self.action}** — {tail}"


def _claim_checked(claim: Claim) -> Claim:
    if claim.kind not in TESTED or len(claim.comparisons) != 1:
        raise ValueError(f"claim {claim.name!r}: looks need a tested claim of one comparison, got a {claim.kind} "
                         f"of {len(claim.comparisons)}")
    return claim


def _joined(parts: dict[str, Decision]) -> Decision:
    """An intersection–union claim's decision from its parts' (each at the claim's level): futility once any part
    stops for futility, efficacy once every part has stopped for efficacy, else the next look or the cap."""
    by = {a: [d for d in parts.values() if d.action == a] for a in ("futility", "continue", "efficacy", "cap")}
    named = tuple(parts.items())
    if by["futility"]:
        return Decision("futility", min(d.n for d in by["futility"]), None, (), named)
    if by["continue"]:
        return Decision("continue", max(d.n for d in parts.values()), min(d.next_n for d in by["continue"]), (), named)
    action = "efficacy" if len(by["efficacy"]) == len(parts) else "cap"
    return Decision(action, max(d.n for d in parts.values()), None, (), named)


def decide_claim(claim: Claim, values: Mapping[str, Sequence[float]], looks: Sequence[int], *,
                 alpha: float = 0.05) -> Decision:
    """``decide`` for a claim of one comparison or several (intersection–union: each part decided at ``alpha``)."""
    if len(claim.comparisons) == 1:
        return decide(claim, values.get(claim.comparisons[0], ()), looks, alpha=alpha)
    return _joined({part: decide(replace(claim, name=part, parts=()), values.get(part, ()), looks, alpha=alpha)
                    for part in claim.comparisons})


def decide(claim: Claim, differences: Sequence[float], looks: Sequence[int], *, alpha: float = 0.05) -> Decision:
    """Replay the looks that ``differences`` (per-seed a − b, in seed order) cover and return the decision: stop at
    the first look whose hold (efficacy) or fail (futility) test meets the nominal level, stop at the cap, or say
    how many seeds the next look needs. For m primary claims settled together, call it at alpha / m."""
    looks, d = _checked(looks), np.asarray(differences, dtype=float)
    done: list[Look] = []
    for k, n in enumerate(looks):
        if n > len(d):
            return Decision("continue", len(d), n, tuple(done))
        p_hold, p_fail, hold_sides, fail_sides = p_values(_claim_checked(claim), d[:n])
        look = Look(n, float(d[:n].mean()), float(p_hold), float(p_fail), _level(looks, k, alpha, hold_sides),
                    _level(looks, k, alpha, fail_sides), _boundary(looks, k, alpha))
        done.append(look)
        if look.p_hold < look.level_hold:
            return Decision("efficacy", n, None, tuple(done))
        if look.p_fail < look.level_fail:
            return Decision("futility", n, None, tuple(done))
    return Decision("cap", looks[-1], None, tuple(done))


@dataclass(frozen=True)
class Operating:
    """What a sequential design does when the true mean difference is ``mean`` (sd ``sd``): the chances of each
    stop and the average number of seeds it runs, from ``studies`` simulated studies."""

    mean: float
    sd: float
    studies: int
    efficacy: float
    futility: float
    cap: float
    seeds: float


def decide_all(claims: Sequence[Claim], values: Mapping[str, Sequence[float]], looks: Sequence[int], *,
               alpha: float = 0.05) -> tuple[str, int | None, dict[str, Decision]]:
    """Looks for a study's primary claims together (a compound claim part by part), each at alpha / m (Bonferroni
    over the m primaries, the sequential stand-in for Holm): ("stop", None, decisions) once every claim has stopped
    (efficacy, futility or the cap), else ("continue", the seeds the next look needs, decisions). ``values`` as for
    ``claims.settle``."""
    primaries = [c for c in claims if c.primary and c.kind in TESTED]
    if not primaries:
        raise ValueError(f"decide_all needs at least one primary claim of a tested kind ({', '.join(TESTED)})")
    decisions = {c.name: decide_claim(c, values, looks, alpha=alpha / len(primaries)) for c in primaries}
    waiting = [d.next_n for d in decisions.values() if d.action == "continue"]
    return ("continue", max(waiting), decisions) if waiting else ("stop", None, decisions)


def _replay(claim: Claim, d: np.ndarray, looks: tuple[int, ...], alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """``decide``'s rule for many studies at once (rows of ``d``, all looks covered): each one's action and seeds."""
    action, seeds = np.full(len(d), "cap", dtype=object), np.full(len(d), looks[-1])
    for k, n in enumerate(looks):
        p_hold, p_fail, hold_sides, fail_sides = p_values(claim, d[:, :n])
        open_ = action == "cap"
        for what, hit in (("efficacy", p_hold < _level(looks, k, alpha, hold_sides)),
                          ("futility", p_fail < _level(looks, k, alpha, fail_sides))):
            stop = open_ & hit
            action[stop], seeds[stop], open_ = what, n, open_ & ~stop
    return action, seeds


def operating(claim: Claim, looks: Sequence[int], *, mean: float, sd: float, alpha: float = 0.05,
              studies: int = 4000, seed: int = 0) -> Operating:
    """Simulate ``studies`` studies of normal per-seed differences through the looks (the rule of ``decide``, all
    studies at once): the power of a design at an alternative, or its type-I error at the null's edge."""
    looks, claim = _checked(looks), _claim_checked(claim)
    d = np.random.default_rng(seed).normal(mean, sd, size=(studies, looks[-1]))
    action, seeds = _replay(claim, d, looks, alpha)
    share = {a: float(np.mean(action == a)) for a in ("efficacy", "futility", "cap")}
    return Operating(mean, sd, studies, share["efficacy"], share["futility"], share["cap"], float(seeds.mean()))
