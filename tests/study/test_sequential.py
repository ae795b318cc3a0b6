"""Seeds in looks: the Lan–DeMets O'Brien–Fleming-type boundaries against published constants and scipy's
multivariate normal, and Monte-Carlo checks (thousands of simulated studies) of the procedure's type-I error and
power."""

import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from odebook.study.claims import Claim
from odebook.study.sequential import _replay, boundaries, calibrated, decide, decide_all, operating, spent

LOOKS = (4, 8, 12, 16)


@pytest.mark.parametrize("k, alpha, published", [
    # Lan–DeMets O'Brien–Fleming-type spending α₁(t) = 2 − 2Φ(z_{α/2}/√t), K equally spaced looks, one-sided α.
    # K = 3 at α = 0.025: rpact's getDesignGroupSequential(kMax = 3, alpha = 0.025, typeOfDesign = "asOF") prints
    # critical values 3.710, 2.511, 1.993. K = 4 at α = 0.05: the SeqBounds.jl package's table for the
    # O'Brien–Fleming-type spending function, 3.74955, 2.53993, 2.01604, 1.72014.
    (3, 0.025, (3.710, 2.511, 1.993)),
    (4, 0.05, (3.74955, 2.53993, 2.01604, 1.72014)),
])
def test_spending_boundaries_match_the_published_constants(k, alpha, published):
    assert boundaries(range(1, k + 1), alpha) == pytest.approx(published, abs=1e-3)


def test_spending_boundaries_meet_their_spending_under_scipys_multivariate_normal():
    looks = (3, 7, 12)  # unequal looks: the correlation √(t_i / t_j) is not the equally spaced one
    c, t = boundaries(looks, 0.05), np.array(looks) / looks[-1]
    for k in range(1, 4):
        corr = np.sqrt(np.minimum.outer(t[:k], t[:k]) / np.maximum.outer(t[:k], t[:k]))
        stay = stats.multivariate_normal(np.zeros(k), corr, abseps=1e-8, releps=0, seed=0).cdf(np.array(c[:k]))
        assert 1 - stay == pytest.approx(spent(t[k - 1], 0.05), abs=2e-5)
    assert spent(1.0, 0.05) == pytest.approx(0.05) and spent(0.0, 0.05) == 0.0


def _mc_error(p: float, n: int) -> float:
    return 3 * math.sqrt(p * (1 - p) / n)  # three Monte-Carlo standard errors


@pytest.mark.parametrize("claim, null_edge", [
    (Claim("better", "superiority", margin=0.75), 0.0),
    (Claim("better either way", "superiority", margin=0.75, direction="two-sided"), 0.0),
    (Claim("as good", "equivalence", margin=0.75), 0.75),
    (Claim("not worse", "non-inferiority", margin=0.5), 0.5),
])
def test_the_sequential_type_one_error_stays_at_alpha(claim, null_edge):
    """At the edge of the null (the true difference where a false 'held' is likeliest), 20,000 simulated studies of
    looks at 4, 8, 12, 16 seeds (t statistics at the boundaries' nominal levels) hold the claim at most α of the
    time, within Monte-Carlo error."""
    o = operating(claim, LOOKS, mean=null_edge, sd=1.0, alpha=0.05, studies=20_000, seed=1)
    assert o.efficacy <= 0.05 + _mc_error(0.05, o.studies)


def _declared_designs() -> list[tuple[tuple[int, ...], float]]:
    """Every looks design the profiles declare (the looks and the cap, n_seeds) with the study's α."""
    from odebook.studies import validate_values

    root = Path(__file__).resolve().parents[2] / "params"
    designs = set()
    for path in sorted(root.glob("*/*.yaml")):
        params = validate_values(path.stem, path)[0]
        if params.looks:
            designs.add(((*params.looks, params.n_seeds), params.alpha))
    return sorted(designs)


@pytest.mark.parametrize("design, alpha", _declared_designs(), ids=str)
@pytest.mark.parametrize("claim, null_edge", [
    (Claim("better", "superiority", margin=0.75), 0.0),
    (Claim("as good", "equivalence", margin=0.75), 0.75),
])
def test_alpha_is_kept_at_the_seed_counts_the_profiles_declare(design, alpha, claim, null_edge):
    """The significance-level approach alone held claims 0.057 of the time under the null for looks (2, 3) at
    α = 0.05: t statistics at 2–5 seeds are far from normal. With the calibrated boundaries, every design a profile
    declares keeps P(held | null) within α at each level a study uses (α / m for m = 1 … 4 primary claims), within
    Monte-Carlo error, on studies simulated apart from the calibration's."""
    assert _declared_designs(), "no profile declares looks"
    for m in (1, 2, 3, 4):
        o = operating(claim, design, mean=null_edge, sd=1.0, alpha=alpha / m, studies=40_000, seed=100 + m)
        assert o.efficacy <= alpha / m + _mc_error(alpha / m, o.studies), (design, m, o.efficacy)


def test_the_calibration_lowers_the_level_only_where_small_samples_exceed_it():
    assert calibrated((5,), 0.05) == 0.05  # one look: the t-test is exact
    assert 0.04 < calibrated((2, 3), 0.05) < 0.05  # two looks at 2 and 3 seeds: the uncalibrated design exceeds α
    assert calibrated((2, 3), 0.05) < calibrated((4, 8, 12, 16), 0.05) < 0.05  # more seeds, nearer normal


def test_the_sequential_power_reaches_its_target_and_stops_early():
    """Stated alternative: a true difference of −0.75 sd (the margin) with looks at 4, 8, 12, 16 seeds; target 80 %
    power. The design should also stop before the cap on average, under the alternative and under the null."""
    claim = Claim("better", "superiority", margin=0.75)
    alt = operating(claim, LOOKS, mean=-0.75, sd=1.0, studies=10_000, seed=2)
    assert alt.efficacy >= 0.8 - _mc_error(0.8, alt.studies) and alt.seeds < 14
    null = operating(claim, LOOKS, mean=0.0, sd=1.0, studies=10_000, seed=3)
    assert null.futility > 0.5 and null.seeds < 14  # ruled out early: the effect of interest is not there


def test_decide_replays_the_looks_the_seeds_cover():
    claim = Claim("better", "superiority", margin=0.75)
    d = np.random.default_rng(4).normal(-0.75, 1.0, size=(200, LOOKS[-1]))
    action, seeds = _replay(claim, d, LOOKS, 0.05)
    for row, a, n in zip(d, action, seeds):
        out = decide(claim, row, LOOKS)
        assert (out.action, out.n) == (a, n) and out.looks[-1].n == n
    partial = decide(claim, [0.1, -0.2, 0.3, 0.0, -0.1, 0.2], LOOKS)
    assert partial.action == "continue" and partial.next_n == 8 and [k.n for k in partial.looks] == [4]
    assert "continue to 8 seeds" in partial.markdown() and "| 4 |" in partial.markdown()


def test_a_study_stops_when_every_primary_claim_has_stopped():
    clear = Claim("clear", "superiority", margin=0.5)
    unclear = Claim("unclear", "equivalence", margin=0.5)
    secondary = Claim("aside", "superiority", margin=0.5, primary=False)
    strong = [-3.0, -3.02, -2.99, -3.01, -3.0, -2.98, -3.03, -3.005]
    noisy = [0.9, -1.1, 0.4, -0.2, 1.3, -0.8, 0.1, 0.6]
    action, next_n, decisions = decide_all([clear, unclear, secondary], {"clear": strong[:4], "unclear": noisy[:4]},
                                           LOOKS)
    assert action == "continue" and next_n == 8 and set(decisions) == {"clear", "unclear"}  # no secondary looks
    assert decisions["clear"].action == "efficacy" and decisions["clear"].n == 4
    level = stats.norm.sf(boundaries(LOOKS, calibrated(LOOKS, 0.025))[0])  # the calibrated boundary at α/2
    assert decisions["clear"].looks[0].level_hold == pytest.approx(level)
    rng = np.random.default_rng(5)
    action, _, decisions = decide_all([clear, unclear], {"clear": strong * 2, "unclear": rng.normal(0, 2, 16)}, LOOKS)
    assert action == "stop" and decisions["clear"].n == 4 and decisions["unclear"].action in ("cap", "futility")


def test_bad_looks_and_claims_say_what():
    with pytest.raises(ValueError, match="increasing whole numbers"):
        decide(Claim("x", "superiority", margin=0.1), [0.0] * 8, (4, 4, 8))
    with pytest.raises(ValueError, match="looks need a tested claim"):
        decide(Claim("x", "gate", margin=0.1), [0.0] * 8, (4, 8))
