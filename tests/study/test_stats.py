import math

import pytest

from odebook.study import stats
from odebook.study.stats import Interval, Verdict, decide, mean_ci, outcome_word


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
    assert "kind" not in v.to_dict() and v.markdown().startswith("- **x beats y**: held")  # the older form, as was


def test_a_declared_verdict_carries_its_kind_and_role_and_the_new_words():
    v = Verdict("x as good as y", "inconclusive — needs ≈ 14 seeds", "p = 0.2", "", "equivalence at ±0.02 nats",
                "primary, Holm over 2")
    assert v.to_dict()["kind"] == "equivalence at ±0.02 nats" and v.to_dict()["role"] == "primary, Holm over 2"
    assert "(primary, Holm over 2 · equivalence at ±0.02 nats): inconclusive — needs ≈ 14 seeds" in v.markdown()
    for word in ("held", "not held", "equivalent", "not testable at this scale", "descriptive"):
        assert outcome_word(Verdict("c", word).outcome) == word
    assert outcome_word("inconclusive — needs ≈ 14 seeds") == "inconclusive"
    assert outcome_word("inconclusive — needs lots") == outcome_word("inconclusive — needs ≈ many seeds") == ""


def test_power_law_fit_recovers_a_known_curve():
    from odebook.study.stats import power_law_fit

    n = [1e5, 3e5, 1e6, 3e6, 1e7]
    loss = [4.0 * x**-0.35 * 1e2 + 2.0 for x in n]  # a = 400, α = 0.35, c = 2
    fit = power_law_fit(n, loss)
    assert fit.alpha == pytest.approx(0.35, rel=1e-3) and fit.c == pytest.approx(2.0, rel=1e-3)
    assert fit(1e6) == pytest.approx(loss[2], rel=1e-6)
    assert fit.alpha_low <= 0.35 <= fit.alpha_high
    three = power_law_fit(n[:3], loss[:3])  # exactly determined: no interval
    assert math.isnan(three.alpha_low) and three.n_points == 3


def test_paired_test_matches_scipy_ttest_rel_and_its_interval_is_the_one_sample_t_interval():
    from scipy import stats as sps

    from odebook.study.stats import paired_test

    a = [2.10, 2.05, 2.20, 2.15, 2.08]
    b = [2.20, 2.12, 2.24, 2.25, 2.11]
    t = paired_test(a, b, claim="below")
    ref = sps.ttest_rel(a, b)
    assert t.t == pytest.approx(ref.statistic, rel=1e-12) and t.p == pytest.approx(ref.pvalue, rel=1e-12)
    d = [x - y for x, y in zip(a, b)]
    ci = sps.t.interval(0.95, len(d) - 1, loc=sum(d) / 5, scale=sps.sem(d))
    assert (t.interval.low, t.interval.high) == pytest.approx(ci, rel=1e-12)
    assert t.dz == pytest.approx((sum(d) / 5) / sps.tstd(d), rel=1e-12)
    # against a threshold, on the log scale: the one-sample test of log(a/b) − log(1.1)
    r = paired_test(a, b, claim="below", threshold=math.log(1.1), log=True)
    ref = sps.ttest_1samp([math.log(x / y) for x, y in zip(a, b)], math.log(1.1))
    assert r.p == pytest.approx(ref.pvalue, rel=1e-12)
    assert math.isnan(paired_test([1.0], [2.0], claim="below").p)  # one seed: no test
    assert math.isnan(paired_test([1.0, 2.0], [2.0, 3.0], claim="below").p)  # constant difference: nothing varies


def test_holm_adjusts_a_textbook_family():
    """Holm (1979) by hand: p = (0.01, 0.04, 0.03, 0.005), m = 4 → sorted 0.005·4, 0.01·3, 0.03·2, 0.04·1, made
    non-decreasing: 0.02, 0.03, 0.06, 0.06."""
    from odebook.study.stats import holm

    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])  # capped at 1
    adj = holm([0.01, math.nan, 0.02])
    assert adj[0] == pytest.approx(0.02) and math.isnan(adj[1]) and adj[2] == pytest.approx(0.02)


def test_a_paired_test_whose_differences_vary_only_by_rounding_has_no_p_value():
    """Accuracies of 0 against a shortcut of 0.38 in every seed differ by -0.38 up to float rounding: that is
    'nothing varies', not a t of 10^16 (and a p of 10^-32)."""
    import numpy as np

    from odebook.study.stats import paired_test

    shortcut = np.array([0.38, np.nextafter(0.38, 1.0), np.nextafter(0.38, 0.0)])  # 0.38 up to rounding
    t = paired_test(np.zeros(3), shortcut, claim="above")
    assert math.isnan(t.t) and math.isnan(t.p) and math.isnan(t.dz) and t.interval.mean == pytest.approx(-0.38)


def test_a_bounded_mean_keeps_its_interval_inside_the_range():
    """Three accuracies 0, 0.5, 1: the t-interval is [-0.74, 1.74]; cut to [0, 1] (its coverage is unchanged: the
    mean lies in the range). Inside the range the interval is mean_ci's own."""
    wide = stats.bounded_mean_ci([0.0, 0.5, 1.0])
    assert (wide.mean, wide.low, wide.high, wide.n) == (0.5, 0.0, 1.0, 3)
    assert stats.mean_ci([0.0, 0.5, 1.0]).low < 0
    narrow, t = stats.bounded_mean_ci([0.4, 0.5, 0.6]), stats.mean_ci([0.4, 0.5, 0.6])
    assert (narrow.low, narrow.high) == (t.low, t.high)
    ppl = stats.bounded_mean_ci([1.0, 1.1, 9.0], low=1.0, high=math.inf)
    assert ppl.low == 1.0 and ppl.high > 9
    with pytest.raises(ValueError, match=r"must lie in \[0.0, 1.0\]"):
        stats.bounded_mean_ci([0.5, 1.5])


@pytest.mark.parametrize("method", ["wilson", "exact"])
def test_a_proportion_interval_lies_in_zero_one_and_matches_the_references(method):
    """Wilson's and Clopper–Pearson's intervals against values computed by hand (Wilson: the closed form; exact: the
    beta quantiles), to 1e-12."""
    for k, n in ((0, 10), (3, 10), (10, 10), (1, 3)):
        ci = stats.proportion_ci(k, n, method=method)
        if method == "wilson":
            z, ph = 1.959963984540054, k / n
            centre, half = (ph + z * z / (2 * n)) / (1 + z * z / n), z / (1 + z * z / n) * math.sqrt(
                ph * (1 - ph) / n + z * z / (4 * n * n))
            want = (centre - half, centre + half)
        else:
            from scipy.stats import beta
            want = (beta.ppf(0.025, k, n - k + 1) if k else 0.0, beta.ppf(0.975, k + 1, n - k) if k < n else 1.0)
        assert 0.0 <= ci.low <= ci.mean <= ci.high <= 1.0 and ci.mean == k / n
        assert ci.low == pytest.approx(max(want[0], 0.0), abs=1e-12)
        assert ci.high == pytest.approx(min(want[1], 1.0), abs=1e-12)
    with pytest.raises(ValueError, match="successes"):
        stats.proportion_ci(4, 3)
