import math

import pytest

from odebook.stats import Interval, Verdict, all_of, claim_lower, decide, lower_is_held, mean_ci, welch


def test_mean_ci_matches_the_t_table():
    ci = mean_ci([1.0, 2.0, 3.0])
    half = 4.302652729911275 * 1.0 / math.sqrt(3)  # t_{0.975, 2} · s / √n, s = 1
    assert ci.mean == 2.0 and ci.low == pytest.approx(2 - half) and ci.high == pytest.approx(2 + half)


def test_one_value_has_no_interval():
    ci = mean_ci([1.5])
    assert ci.mean == 1.5 and math.isnan(ci.low) and "no interval" in str(ci)


def test_verdict_rule_reaches_every_outcome():
    assert decide(Interval(1.0, 0.9, 1.05, 3), 1.1, claim="below") == "held"
    assert decide(Interval(1.3, 1.2, 1.4, 3), 1.1, claim="below") == "not held"
    assert decide(Interval(1.1, 1.0, 1.2, 3), 1.1, claim="below") == "inconclusive"
    assert decide(Interval(1.3, 1.2, 1.4, 3), 1.1, claim="above") == "held"
    assert decide(Interval(1.0, 0.9, 1.05, 3), 1.1, claim="above") == "not held"
    assert decide(Interval(1.1, 1.1, 1.2, 3), 1.1, claim="above") == "inconclusive"  # touching is not clearing


def test_verdict_rule_is_inconclusive_without_variation():
    assert decide(Interval(1.2, math.nan, math.nan, 1), 1.1, claim="below") == "inconclusive"  # one seed
    assert decide(mean_ci([0.25, 0.25, 0.25]), 0.5, claim="below") == "inconclusive"  # nothing varies
    with pytest.raises(ValueError, match="below"):
        decide(Interval(1.0, 0.9, 1.1, 3), 1.0, claim="at most")


def test_verdict_record():
    v = Verdict("x beats y", "held", "Δ = −0.1", "6 layers, 1M tokens")
    assert v.to_dict()["verdict"] == "held" and "measured at 6 layers" in v.markdown()
    with pytest.raises(ValueError, match="outcome"):
        Verdict("x", "maybe")


def test_welch_matches_scipy_and_cohens_d_its_definition():
    a, b = [1.0, 1.2, 0.9, 1.1], [1.5, 1.4, 1.7, 1.6]
    c = welch(a, b)
    var = 0.05 / 3  # both samples: squared deviations 0.0025 + 0.0225 + 0.0225 + 0.0025, n − 1 = 3
    assert c.diff == pytest.approx(-0.5)
    assert c.t == pytest.approx(-0.5 / math.sqrt(var / 4 + var / 4)) and c.p < 0.01
    assert c.d == pytest.approx(-0.5 / math.sqrt(var))
    assert math.isnan(welch([1.0], [2.0]).p)


def test_claim_verdicts():
    low, high = [1.0, 1.1, 0.9, 1.0], [2.0, 2.1, 1.9, 2.0]
    assert claim_lower(low, high, 0.05, "a", "b")[0] == "held"
    assert claim_lower(high, low, 0.05, "a", "b")[0] == "not held"
    assert claim_lower(low, [1.05, 0.95, 1.0, 1.02], 0.05, "a", "b")[0] == "inconclusive"
    assert claim_lower([], low, 0.05, "a", "b")[0] == "not run"
    assert lower_is_held(welch([1.0], [2.0])) == "inconclusive"  # one seed: no test
    assert all_of(("held", "x"), ("held", "y")) == ("held", "x; y")
    assert all_of(("held", "x"), ("inconclusive", "y"))[0] == "inconclusive"
    assert all_of(("inconclusive", "x"), ("not held", "y"))[0] == "not held"


def test_power_law_fit_recovers_a_known_curve():
    from odebook.stats import power_law_fit

    n = [1e5, 3e5, 1e6, 3e6, 1e7]
    loss = [4.0 * x**-0.35 * 1e2 + 2.0 for x in n]  # a = 400, α = 0.35, c = 2
    fit = power_law_fit(n, loss)
    assert fit.alpha == pytest.approx(0.35, rel=1e-3) and fit.c == pytest.approx(2.0, rel=1e-3)
    assert fit(1e6) == pytest.approx(loss[2], rel=1e-6)
    assert fit.alpha_low <= 0.35 <= fit.alpha_high
    three = power_law_fit(n[:3], loss[:3])  # exactly determined: no interval
    assert math.isnan(three.alpha_low) and three.n_points == 3


def test_paired_difference_interval():
    from odebook.stats import paired_difference

    a = [1] * 80 + [0] * 20
    b = [1] * 30 + [0] * 70
    d = paired_difference(a, b)
    assert d.mean == pytest.approx(0.5) and 0.35 < d.low < 0.5 < d.high < 0.65
    assert paired_difference([1, 1, 1], [0, 0, 0]).low == 1.0  # no variation: a degenerate interval
