import math

import pytest

from odebook.stats import Interval, at_most, mean_ci


def test_mean_ci_matches_the_t_table():
    ci = mean_ci([1.0, 2.0, 3.0])
    half = 4.302652729911275 * 1.0 / math.sqrt(3)  # t_{0.975, 2} · s / √n, s = 1
    assert ci.mean == 2.0 and ci.low == pytest.approx(2 - half) and ci.high == pytest.approx(2 + half)


def test_one_value_has_no_interval():
    ci = mean_ci([1.5])
    assert ci.mean == 1.5 and math.isnan(ci.low) and "no interval" in str(ci)


def test_at_most_verdicts():
    assert at_most(Interval(1.0, 0.9, 1.05, 3), 1.1) == "held"
    assert at_most(Interval(1.3, 1.2, 1.4, 3), 1.1) == "not held"
    assert at_most(Interval(1.1, 1.0, 1.2, 3), 1.1) == "inconclusive"
    assert at_most(Interval(1.2, math.nan, math.nan, 1), 1.1) == "not held"
