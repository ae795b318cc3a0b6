"""Whether a size ladder can decide a scaling exponent: the power-law fit with an interval across seeds, and the
conditions under which the source's go / no-go rule on it means anything.

L(N) = a·N^(−α) + c has three parameters, so a ladder of n sizes leaves n − 3 residual degrees of freedom; the fit's
own interval on α (``stats.power_law_fit``) ignores how the per-size losses vary from seed to seed. ``seed_bootstrap``
refits on per-size means of seeds drawn with replacement, which carries that spread into α. ``decidable`` says
whether a ladder can apply the rule at all: at least ``MIN_DOF`` residual degrees of freedom, and every size trained
on at least ``MIN_TOKENS_PER_PARAMETER`` tokens per parameter — near the compute-optimal ratio (Hoffmann et al. 2022,
"Training compute-optimal large language models", arXiv:2203.15556, about 20 tokens per parameter). Below that ratio
the loss at each size is a point on its training curve rather than the size's loss, and α measures training time.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from odebook.study.stats import Interval, power_law_fit

__all__ = ["MIN_DOF", "MIN_TOKENS_PER_PARAMETER", "seed_bootstrap", "decidable"]

MIN_DOF = 2
MIN_TOKENS_PER_PARAMETER = 20.0


def seed_bootstrap(n: Sequence[float], losses: Sequence[Sequence[float]], *, level: float = 0.95,
                   resamples: int = 500, seed: int = 0) -> Interval:
    """α fitted on the per-size mean losses, with a percentile interval from refits on means of seeds resampled with
    replacement at each size (``losses[i]``: the seeds' losses at size ``n[i]``). A refit that fails is left out."""
    rng = np.random.default_rng(seed)
    means = [float(np.mean(size)) for size in losses]
    alpha = power_law_fit(n, means).alpha
    boot = []
    for _ in range(resamples):
        resampled = [float(np.mean(rng.choice(np.asarray(size, dtype=float), size=len(size)))) for size in losses]
        try:
            boot.append(power_law_fit(n, resampled).alpha)
        except RuntimeError:  # curve_fit found no minimum for this resample
            continue
    tail = (1 - level) / 2
    low, high = (float(np.quantile(boot, q)) for q in (tail, 1 - tail)) if boot else (np.nan, np.nan)
    return Interval(alpha, low, high, min(len(size) for size in losses))


def decidable(n_sizes: int, tokens_per_parameter: Sequence[float]) -> str:
    """'' when a ladder can apply a rule on α, else what it lacks (and what it would take)."""
    lacks = []
    if n_sizes - 3 < MIN_DOF:
        lacks.append(f"{n_sizes} sizes leave {n_sizes - 3} residual degrees of freedom for a 3-parameter fit "
                     f"(needs ≥ {MIN_DOF + 3} sizes)")
    if min(tokens_per_parameter) < MIN_TOKENS_PER_PARAMETER:
        lacks.append(f"{min(tokens_per_parameter):.2g}–{max(tokens_per_parameter):.2g} tokens per parameter (needs "
                     f"≥ {MIN_TOKENS_PER_PARAMETER:g} at every size)")
    return "; ".join(lacks)
