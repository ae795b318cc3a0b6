"""study.capacity on synthetic accuracy curves whose capacity is known."""

import numpy as np
import pytest

from odebook.study.capacity import capacity

KS = [1, 2, 4, 8, 16, 32]


def _curve(crossing, seeds=5, sd=0.01, seed=0):
    """Accuracy 0.97 up to ``crossing`` and 0.5 beyond it, plus noise: its capacity is the largest k ≤ crossing."""
    clean = np.where(np.asarray(KS) <= crossing, 0.97, 0.5)
    return np.clip(clean + np.random.default_rng(seed).normal(0, sd, (seeds, len(KS))), 0, 1)


def test_a_clean_curve_gives_its_known_capacity_with_a_tight_interval():
    c = capacity(KS, _curve(8))
    assert (c.estimate, c.low, c.high) == (8, 8, 8) and not c.lower_bound
    assert "capacity at ≥ 90% accuracy: 8" in str(c)


def test_a_state_never_filled_is_a_lower_bound_and_one_failing_at_once_is_zero():
    full = capacity(KS, _curve(64))
    assert full.estimate == 32 and full.lower_bound and "≥ 32" in str(full)
    none = capacity(KS, _curve(0.5))
    assert none.estimate == 0 and "< 1" in str(none)


def test_a_seed_that_did_not_learn_widens_the_interval():
    acc = _curve(16, seeds=4)
    acc[0] = 0.3  # one seed stuck at a shortcut
    c = capacity(KS, acc)
    assert c.estimate < 16 and c.low == 0 and c.high == 16


def test_a_dip_stops_the_count_even_if_larger_k_recover():
    acc = _curve(32)
    acc[:, 2] = 0.5  # k = 4 fails
    assert capacity(KS, acc).estimate == 2


def test_bad_shapes_say_what():
    with pytest.raises(ValueError, match=r"shape \(seeds, 6\)"):
        capacity(KS, np.ones((3, 5)))
