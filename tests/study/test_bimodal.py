"""Bimodal outcomes: the proportion of seeds that learn with an exact interval, and the metric among learners."""

import pytest
from statsmodels.stats.proportion import proportion_confint

from odebook.study.bimodal import learners
from odebook.study.stats import mean_ci


def test_the_proportion_has_the_clopper_pearson_interval_and_the_metric_is_taken_among_learners():
    acc = [0.99, 0.38, 1.0, 0.97, 0.36, 0.98, 0.37, 1.0]
    out = learners(acc, threshold=0.9)
    low, high = proportion_confint(5, 8, alpha=0.05, method="beta")  # Clopper–Pearson
    assert (out.k, out.n) == (5, 8) and out.proportion.mean == 5 / 8
    assert out.proportion.low == pytest.approx(low) and out.proportion.high == pytest.approx(high)
    assert out.among == mean_ci([0.99, 1.0, 0.97, 0.98, 1.0])
    assert "5 of 8 seeds learn" in str(out)


def test_no_learner_and_all_learners():
    none = learners([0.3, 0.4, 0.35], threshold=0.9)
    assert none.among is None and none.proportion.low == 0.0 and "none learned" in str(none)
    every = learners([0.95, 0.99, 0.97], threshold=0.9)
    assert every.proportion.high == 1.0 and every.proportion.low == pytest.approx(proportion_confint(
        3, 3, alpha=0.05, method="beta")[0])


def test_bad_values_say_what():
    with pytest.raises(ValueError, match="finite per-seed values"):
        learners([0.9, float("nan")], threshold=0.5)
