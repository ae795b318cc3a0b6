"""The side-by-side section names each study that gains less than issue 47's bar, with the two measured factors its
ratio is made of and the ceiling today's threads leave it."""

import pytest

from benchmarks.side_by_side import GAIN, factors, why


def row(*, today: float, side: float, alone: float, cores: int = 2) -> dict:
    """A compare() row from three medians (seconds): today's batch of ``cores`` runs, side by side's, one alone."""
    return {"study": "01_gradient_flow", "steps": 30, **factors(today, side, alone, cores)}


def test_the_ratio_is_the_cores_over_its_two_factors():
    r = row(today=15.0, side=11.0, alone=9.0)
    assert r["ratio"] == pytest.approx(r["seed-runs"] / (r["threads"] * r["sharing"]))


def test_a_study_that_gains_enough_is_not_named():
    assert why(row(today=2 * GAIN, side=2.0, alone=2.0)) == ""  # 1.4x
    assert why(row(today=20.0, side=10.0, alone=10.0)) == ""  # 2x: threads 1, sharing 1


def test_a_short_gain_from_threads_that_already_parallelise_names_the_ceiling():
    # one thread alone 10 s a run; today's two threads 6.5 s a run (1.54x); side by side 10.5 s for both
    line = why(row(today=13.0, side=10.5, alone=10.0))
    assert line.startswith("01_gradient_flow: side by side 1.24× (< 1.4×) = 2 / (1.54 × 1.05)")
    assert "at most 1.30×" in line and "shared" in line


def test_a_short_gain_from_sharing_says_the_runs_share_the_machine():
    # today's threads barely help (1.1x), but side by side each run takes 1.4x its time alone
    line = why(row(today=18.18, side=14.0, alone=10.0))
    assert "= 2 / (1.10 × 1.40)" in line and "could gain 1.82×" in line and "what the runs share" in line
