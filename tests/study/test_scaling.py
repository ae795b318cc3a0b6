"""When a ladder can decide a scaling exponent: the seed bootstrap on a known power law, and the conditions."""

import numpy as np

from odebook.study import scaling


def _ladder(alpha: float, seed_sd: float, sizes: int = 6, seeds: int = 5):
    rng = np.random.default_rng(0)
    n = np.geomspace(1e5, 1e7, sizes)
    loss = 2.0 * (n / n[0]) ** (-alpha) + 3.0
    return n, [list(mean + seed_sd * rng.standard_normal(seeds)) for mean in loss]


def test_the_seed_bootstrap_covers_the_true_exponent_and_widens_with_the_seed_spread():
    n, quiet = _ladder(0.3, 0.002)
    _, noisy = _ladder(0.3, 0.05)
    a, b = scaling.seed_bootstrap(n, quiet), scaling.seed_bootstrap(n, noisy)
    assert a.low < 0.3 < a.high and abs(a.mean - 0.3) < 0.02
    assert (b.high - b.low) > 5 * (a.high - a.low)
    assert a.n == 5


def test_a_ladder_decides_only_with_residual_freedom_and_enough_tokens_per_parameter():
    assert scaling.decidable(6, [25.0, 40.0]) == ""
    assert "4 sizes leave 1 residual" in scaling.decidable(4, [25.0, 40.0])
    assert "tokens per parameter" in scaling.decidable(6, [0.14, 1.8])
    assert "; " in scaling.decidable(4, [0.14, 1.8])  # both said
