"""How many paired seeds a claim needs: the power of the one-sample (paired) t-test (statsmodels' TTestPower) for a
one-sided test, and of the two one-sided tests of an equivalence (TOST), and the smallest n that reaches a target.

Effects are in the claim's own units with the standard deviation of the per-seed differences beside them; the
one-sided ``alpha`` is the level each one-sided test runs at (a two-sided test at α is two one-sided tests at α/2).
"""

from __future__ import annotations

import math

from statsmodels.stats.power import TTestPower

__all__ = ["one_sided_power", "tost_power", "seeds_needed", "claim_seeds", "MAX_SEEDS"]

MAX_SEEDS = 10_000  # beyond this a claim cannot be settled by adding seeds: say so rather than print a number


def one_sided_power(*, effect: float, sd: float, n: int, alpha: float) -> float:
    """Power of the one-sided paired t-test at level ``alpha`` with n seeds when the true mean difference lies
    ``effect`` beyond the null on the claimed side (negative: on the other side)."""
    if n < 2 or not sd > 0:
        return math.nan
    return float(TTestPower().power(effect_size=effect / sd, nobs=n, alpha=alpha, alternative="larger"))


def tost_power(*, true: float, margin: float, sd: float, n: int, alpha: float) -> float:
    """Power of TOST at ±``margin`` (each one-sided test at ``alpha``) when the true mean difference is ``true``:
    P(both one-sided tests reject) ≥ P(lower rejects) + P(upper rejects) − 1, the usual lower bound (exact in the
    limit of small sd/margin), clipped at 0."""
    lower = one_sided_power(effect=margin + true, sd=sd, n=n, alpha=alpha)
    upper = one_sided_power(effect=margin - true, sd=sd, n=n, alpha=alpha)
    return max(0.0, lower + upper - 1.0)


def seeds_needed(power_at, *, target: float = 0.8) -> int | None:
    """The smallest n ≥ 2 with ``power_at(n)`` ≥ ``target`` (power_at increasing in n), or None when even
    MAX_SEEDS seeds would not reach it (an effect of zero or on the wrong side never does)."""
    if not power_at(MAX_SEEDS) >= target:
        return None
    if power_at(2) >= target:
        return 2
    low, high = 2, MAX_SEEDS  # power_at(low) < target <= power_at(high)
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if power_at(mid) >= target else (mid, high)
    return high


def claim_seeds(kind: str, direction: str, margin: float, mean: float, sd: float, *, alpha: float, target: float
                ) -> tuple[int | None, int | None]:
    """Seeds for ``target`` power at ``alpha`` for a claim of ``kind`` (odebook.study.claims) on ``direction``, at
    its margin and at the observed ``mean`` difference with seed SD ``sd`` (None: no number of seeds would do)."""
    if not sd > 0:
        return None, None

    def one(effect, level=alpha):
        return seeds_needed(lambda n: one_sided_power(effect=effect, sd=sd, n=n, alpha=level), target=target)

    if kind == "equivalence":
        return tuple(seeds_needed(lambda n, true=true: tost_power(true=true, margin=margin, sd=sd, n=n, alpha=alpha),
                                  target=target) for true in (0.0, mean))
    if direction == "two-sided":
        return one(margin, alpha / 2), one(abs(mean), alpha / 2)
    observed = (1.0 if direction == "higher" else -1.0) * mean  # the effect on the claimed side, or the room left
    room = {"non-inferiority": margin, "exceeds": -margin}.get(kind, 0.0)  # observed effect beyond the threshold
    return one(margin), one(observed + room)
