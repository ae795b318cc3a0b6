"""Declared claims settle to verdicts: each kind's test against statsmodels / scipy, Holm over the primaries only,
gates outside every family, compound claims as intersection–union tests, and the seeds an inconclusive claim needs."""

import math

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import TTestPower
from statsmodels.stats.weightstats import DescrStatsW, ttost_paired

from odebook.study import power as pw
from odebook.study.claims import Claim, declaration, paired, part_test, settle
from odebook.study.stats import outcome_word

RNG = np.random.default_rng(29)
A, B = RNG.normal(2.0, 0.05, 6), RNG.normal(2.0, 0.05, 6)  # six paired seeds


def test_equivalence_is_statsmodels_tost():
    d = paired(A, B)
    for margin in (0.01, 0.05, 0.2):
        t = part_test(Claim("eq", "equivalence", margin=margin), d)
        assert t.p_hold == pytest.approx(ttost_paired(A, B, -margin, margin)[0], rel=1e-10)


def test_superiority_and_non_inferiority_are_the_paired_t_tests_of_scipy_and_statsmodels():
    d = paired(A, B)
    lower = part_test(Claim("s", "superiority", margin=0.1), d)
    assert lower.p_hold == pytest.approx(stats.ttest_rel(A, B, alternative="less").pvalue, rel=1e-10)
    assert lower.p_fail == pytest.approx(DescrStatsW(d).ttest_mean(-0.1, alternative="larger")[1], rel=1e-10)
    higher = part_test(Claim("s", "superiority", margin=0.1, direction="higher"), d)
    assert higher.p_hold == pytest.approx(stats.ttest_rel(A, B, alternative="greater").pvalue, rel=1e-10)
    both = part_test(Claim("s", "superiority", margin=0.1, direction="two-sided"), d)
    assert both.p_hold == pytest.approx(stats.ttest_rel(A, B).pvalue, rel=1e-10)
    assert both.p_fail == pytest.approx(ttost_paired(A, B, -0.1, 0.1)[0], rel=1e-10)  # ruled out: equivalent to 0
    ni = part_test(Claim("n", "non-inferiority", margin=0.03), d)  # lower is better: a may be worse by < 0.03
    assert ni.p_hold == pytest.approx(DescrStatsW(d).ttest_mean(0.03, alternative="smaller")[1], rel=1e-10)
    log = paired(A, B, log=True)
    assert log == pytest.approx(np.log(A / B))


def test_a_two_sided_claim_that_holds_says_which_side_and_one_within_the_margin_is_not_held():
    claim = Claim("differs", "superiority", margin=0.05, direction="two-sided")
    below, above, within = ([-0.2, -0.25, -0.22, -0.18], [0.2, 0.25, 0.22, 0.18], [0.001, -0.002, 0.0, 0.002])
    assert [s.outcome for s in settle([claim], {"differs": below})] == ["held"]
    assert settle([claim], {"differs": below})[0].evidence().split("; ")[2] == "a below b"
    assert settle([claim], {"differs": above})[0].evidence().split("; ")[2] == "a above b"
    inside = settle([claim], {"differs": within})[0]
    assert inside.outcome == "not held" and not {"a below b", "a above b"} & set(inside.evidence().split("; "))


def test_a_held_superiority_whose_margin_is_also_ruled_out_says_the_effect_is_real_but_smaller():
    claim = Claim("beats", "superiority", margin=0.05)
    small = settle([claim], {"beats": [-0.010, -0.012, -0.009, -0.011, -0.010]})[0]
    assert small.outcome == "held" and small.evidence().endswith("an effect of the margin is ruled out too: real, "
                                                                 "but smaller")
    large = settle([claim], {"beats": [-0.10, -0.12, -0.09, -0.11, -0.10]})[0]
    assert large.outcome == "held" and "smaller" not in large.evidence()


def test_holm_runs_over_the_primaries_only_and_secondaries_have_their_own():
    values = {"p1": [-0.30, -0.25, -0.35, -0.28], "p2": [-0.1, 0.05, -0.2, -0.02], "s1": [-1.0, -1.1, -0.9, -1.05]}
    primaries = [Claim("p1", "superiority", margin=0.1), Claim("p2", "superiority", margin=0.1)]
    secondary = Claim("s1", "superiority", margin=0.1, primary=False)
    with_secondary = settle([*primaries, secondary], values)
    alone = settle(primaries, values)
    raw = [stats.ttest_1samp(values[n], 0.0, alternative="less").pvalue for n in ("p1", "p2")]
    expected = multipletests(raw, method="holm")[1]
    for s, a, q in zip(with_secondary, alone, expected):
        assert s.p_adjusted == pytest.approx(q) and a.p_adjusted == pytest.approx(q)  # the secondary is not counted
        assert s.family == "primary, Holm over 2"
    assert with_secondary[2].family == "secondary, Holm over 1" and with_secondary[2].outcome == "held"
    assert with_secondary[0].verdict().role == "primary, Holm over 2"


def test_a_failed_gate_makes_its_claims_not_testable_and_takes_them_out_of_the_family():
    gate = Claim("calibration", "gate", margin=0.15, direction="higher")  # the ablation must cost ≥ 0.15
    claims = [gate, Claim("rests", "superiority", margin=0.1, rests_on=("calibration",)),
              Claim("free", "superiority", margin=0.1)]
    strong = {"rests": [-0.5, -0.6, -0.55, -0.52], "free": [-0.3, -0.2, -0.25, -0.35]}
    failed = settle(claims, {**strong, "calibration": [0.01, -0.02, 0.0, 0.02]})
    assert failed[0].outcome == "not held"
    assert failed[1].outcome == "not testable at this scale" and "calibration" in failed[1].evidence()
    assert failed[2].family == "primary, Holm over 1"  # the untestable claim left the family
    passed = settle(claims, {**strong, "calibration": [0.4, 0.5, 0.45, 0.42]})
    assert [s.outcome for s in passed] == ["held", "held", "held"] and passed[2].family == "primary, Holm over 2"
    unclear = settle(claims, {**strong, "calibration": [0.3, 0.0, 0.2, 0.1]})
    assert unclear[0].outcome == "inconclusive" and unclear[1].outcome == "not testable at this scale"


def test_a_learned_gate_is_read_seed_by_seed_and_a_claim_resting_on_it_says_which_arm_learned_in_how_many():
    learned = Claim("learned: the baseline answers above the shortcut by more than 0.5", "learned", margin=0.5,
                    direction="higher")
    claims = [learned, Claim("rests", "superiority", margin=0.1, rests_on=(learned.name,))]
    rests = {"rests": [-0.5, -0.6, -0.55, -0.52]}
    every = settle(claims, {**rests, learned.name: [0.9, 0.8, 0.95, 0.7]})
    assert [s.outcome for s in every] == ["held", "held"]
    assert every[0].verdict().role == "gate, seed by seed" and "learned in 4 of 4 seeds" in every[0].evidence()
    # one seed short of the margin: a mean far above it does not hold a seed-by-seed gate
    one_short = settle(claims, {**rests, learned.name: [0.9, 0.9, 0.95, 0.45]})
    assert one_short[0].outcome == "not held" and one_short[1].outcome == "not testable at this scale"
    assert "learned in 3 of 4 seeds" in one_short[1].evidence() and "0.45" in one_short[1].evidence()
    assert learned.describe() == "learned: a − b above 0.5 in every seed"
    assert "| gate |" in declaration(claims).splitlines()[2]
    with pytest.raises(ValueError, match="begins 'learned:'"):
        Claim("the baseline learned", "learned", margin=0.5, direction="higher")
    with pytest.raises(ValueError, match="begins 'learned:'"):
        Claim("learned: a gate of another kind", "gate", margin=0.5)


def test_a_compound_claim_is_an_intersection_union_test():
    values = {"vs tong": [-0.20, -0.25, -0.22, -0.18], "vs standard": [-0.05, -0.08, -0.02, -0.06]}
    both = Claim("beats both", "superiority", margin=0.05, parts=("vs tong", "vs standard"))
    [s] = settle([both], values)
    parts = [stats.ttest_1samp(values[k], 0.0, alternative="less").pvalue for k in both.parts]
    assert s.p_hold == pytest.approx(max(parts)) and s.outcome == "held"  # no adjustment between the parts
    [s] = settle([both], {**values, "vs standard": [0.05, 0.08, 0.02, 0.06]})
    assert s.outcome == "not held"  # one part ruled out fails the whole


def test_equivalence_not_held_and_not_run():
    eq = Claim("same", "equivalence", margin=0.02, units="nats")
    [s] = settle([eq], {"same": [0.001, -0.002, 0.0015, -0.001, 0.0005]})
    assert s.outcome == "equivalent" and s.verdict().kind == "equivalence at ±0.02 nats"
    [s] = settle([eq], {"same": [0.10, 0.12, 0.09, 0.11]})
    assert s.outcome == "not held"
    [s] = settle([eq], {})
    assert s.outcome == "not run"


def test_an_inconclusive_claim_says_how_many_seeds_it_needs():
    d = [-0.02, 0.03, -0.05, 0.01]
    claims = [Claim("x", "superiority", margin=0.05), Claim("y", "superiority", margin=0.05)]
    s = settle(claims, {"x": d, "y": d})[0]
    sd = float(np.std(d, ddof=1))
    n = TTestPower().solve_power(effect_size=0.05 / sd, alpha=0.05 / 2, power=0.8, alternative="larger")
    assert s.needs[0] == math.ceil(n) and s.outcome == f"inconclusive — needs ≈ {math.ceil(n)} seeds"
    assert outcome_word(s.outcome) == "inconclusive"
    assert s.needs[1] is not None and s.needs[1] > s.needs[0]  # observed effect −0.0075: smaller than the margin
    wrong_side = settle([claims[0]], {"x": [0.05, -0.08, 0.09, -0.03]})[0]  # mean +0.0075: the wrong side
    assert wrong_side.needs[1] is None and "more than 10,000 at the observed effect" in wrong_side.evidence()


def test_tost_power_bounds_the_simulated_power():
    n, sd, margin, alpha = 10, 1.0, 0.8, 0.05
    d = np.random.default_rng(0).normal(0.0, sd, (4000, n))
    t = stats.t.isf(alpha, n - 1)
    se = d.std(ddof=1, axis=1) / math.sqrt(n)
    simulated = np.mean(((d.mean(1) + margin) / se > t) & ((d.mean(1) - margin) / se < -t))
    bound = pw.tost_power(true=0.0, margin=margin, sd=sd, n=n, alpha=alpha)
    assert simulated >= bound - 3 * math.sqrt(bound * (1 - bound) / 4000) and simulated - bound < 0.05


def test_bad_declarations_say_what_and_where():
    with pytest.raises(ValueError, match="claim 'x': kind"):
        Claim("x", "better")
    with pytest.raises(ValueError, match="claim 'x': margin"):
        Claim("x", "equivalence", margin=0.0)
    with pytest.raises(ValueError, match="has a side"):
        Claim("x", "non-inferiority", margin=0.1, direction="two-sided")
    with pytest.raises(ValueError, match="not declared gates"):
        settle([Claim("x", "superiority", margin=0.1, rests_on=("y",))], {"x": [1.0, 2.0]})
    with pytest.raises(ValueError, match="equal lengths"):
        paired([1.0, 2.0], [1.0])


def test_the_declaration_table_lists_kind_margin_role_and_gates():
    table = declaration([Claim("g", "gate", margin=0.15, direction="higher"),
                         Claim("x", "non-inferiority", margin=0.02, units="nats", primary=False, rests_on=("g",))])
    assert "| g | gate: a − b above 0.15 | gate | — |" in table
    assert "| x | non-inferiority (a − b < 0.02), margin 0.02 nats | secondary | g |" in table


def test_identical_differences_can_rule_an_effect_out_but_never_hold_one():
    """An ablation that changed no answer of any seed (every difference exactly 0) rules out a drop of the margin:
    the fail test takes its limit as the spread goes to 0. Identical differences on the claimed side hold nothing
    (seeds that sampled no variance are no certainty), and a difference exactly at a threshold decides nothing."""
    drop = Claim("read carries facts", "superiority", margin=0.15, direction="higher")
    (unused,) = settle([drop], {"read carries facts": [0.0] * 5})
    assert unused.outcome == "not held" and unused.p_fail == 0.0 and np.isnan(unused.p_hold)
    (same_big,) = settle([drop], {"read carries facts": [0.4] * 5})
    assert same_big.outcome == "inconclusive" and np.isnan(same_big.p_hold)
    lower = Claim("beats", "superiority", margin=0.1)
    assert settle([lower], {"beats": [0.0] * 4})[0].outcome == "not held"  # no gain: the margin's gain ruled out
    ni = Claim("keeps fluency", "non-inferiority", margin=0.03)
    assert settle([ni], {"keeps fluency": [0.5] * 4})[0].outcome == "not held"  # worse by more than the margin
    assert settle([ni], {"keeps fluency": [0.0] * 4})[0].outcome == "inconclusive"  # within it: never held so
    assert settle([ni], {"keeps fluency": [0.03] * 4})[0].outcome == "inconclusive"  # at the margin itself
    eq = Claim("same", "equivalence", margin=0.1)
    assert settle([eq], {"same": [0.3] * 4})[0].outcome == "not held"
    assert settle([eq], {"same": [0.0] * 4})[0].outcome == "inconclusive"


def test_held_means_beyond_zero_and_the_evidence_says_what_each_test_concluded():
    """The book's semantic (stats.OUTCOMES): a superiority claim is held when the effect lies on the claimed side
    of 0, not necessarily beyond the margin. An effect between 0 and the margin (0.065 against 0.15) is held, and the
    evidence names both tests with their p: the one that held it (a − b > 0) and the one that would fail it
    (a − b < 0.15), which here rejects too — the effect is real and below the smallest effect of interest."""
    claim = Claim("a beats b", "superiority", margin=0.15, direction="higher", units="accuracy")
    [s] = settle([claim], {"a beats b": [0.05, 0.08, 0.06, 0.07]})
    assert s.outcome == "held" and s.p_fail < 0.05
    assert "tested against 0, smallest effect of interest 0.15 accuracy" in claim.describe()
    assert f"p = {s.p_hold:.3g} for a − b > 0 (holds the claim)" in s.evidence()
    assert f"p = {s.p_fail:.3g} for a − b < 0.15 (fails it)" in s.evidence()


@pytest.mark.parametrize("claim, d", [
    (Claim("x", "superiority", margin=0.1), [-0.3, -0.2, -0.25]),
    (Claim("x", "superiority", margin=0.1), [0.3, 0.2, 0.25]),
    (Claim("x", "superiority", margin=0.1, direction="two-sided"), [0.01, -0.02, 0.0, 0.01]),
    (Claim("x", "equivalence", margin=0.1), [0.01, -0.02, 0.0]),
    (Claim("x", "non-inferiority", margin=0.1, direction="higher"), [0.01, -0.02, 0.0]),
    (Claim("x", "gate", margin=0.05, direction="higher"), [0.01, -0.02, 0.03]),
])
def test_the_deciding_p_and_the_other_sides_are_in_the_evidence_of_every_settled_claim(claim, d):
    [s] = settle([claim], {"x": d})
    hold, fail = claim.hypotheses()
    assert f"p = {s.p_hold:.3g} for {hold}" in s.evidence() and f"p = {s.p_fail:.3g} for {fail}" in s.evidence()
    assert s.outcome in ("held", "equivalent", "not held") or s.outcome.startswith("inconclusive")


def test_a_gate_has_its_own_level_and_a_failed_gate_says_what_it_rested_on():
    """01's gate read "not held … p = 0.951" while the test that failed it had p = 0.049 at n = 3: the claims that
    rest on it now show the gate's estimate, both p and its seeds; a gate declared at its own α = 0.01 does not
    fail on that p."""
    d = {"gate": [0.01, -0.02, 0.03], "ni": [0.01, 0.02, 0.0]}
    gate = Claim("gate", "gate", margin=0.05, direction="higher")
    ni = Claim("ni", "non-inferiority", margin=0.05, rests_on=("gate",))
    g, n = settle([gate, ni], d)
    assert g.outcome == "not held" and 0.04 < g.p_fail < 0.05
    assert n.outcome == "not testable at this scale"
    assert "gate 'gate' not held: mean a − b = 0.006667" in n.evidence() and "(n = 3)" in n.evidence()
    assert f"p = {g.p_fail:.3g} for a − b < 0.05 (fails it)" in n.evidence()
    strict, _ = settle([Claim("gate", "gate", margin=0.05, direction="higher", alpha=0.01), ni], d)
    assert strict.outcome == "inconclusive" and "at its own α = 0.01" in strict.claim.describe()
    with pytest.raises(ValueError, match="only a gate declares its own alpha"):
        Claim("x", "superiority", margin=0.1, alpha=0.01)


def test_not_held_is_the_claimed_effect_ruled_out():
    """'not held' is the claimed effect ruled out at the claim's margin: a lies well below b, so "a above b" is not
    held (stats.OUTCOMES)."""
    [s] = settle([Claim("a above b", "superiority", margin=0.01, direction="higher")],
                 {"a above b": [-0.5, -0.5, -0.35, -0.65]})
    assert s.outcome == "not held" and "fails it" in s.evidence()


def test_a_negative_control_is_its_claims_test_on_a_case_built_to_fail_settled_alone_outside_every_family():
    from odebook.study.claims import negative_control

    primary = Claim("hybrid non-inferior", "non-inferiority", margin=0.05, rests_on=("gate",))
    control = negative_control(primary, "off − baseline", "the flow switched off, non-inferior")
    assert control.name == "negative control: the flow switched off, non-inferior" and control.controls == primary.name
    assert (control.kind, control.margin, control.direction, control.rests_on) == ("non-inferiority", 0.05, "lower",
                                                                                   ("gate",))
    gate = Claim("gate", "gate", margin=0.05, direction="higher", parts=("null − baseline",))
    values = {"null − baseline": [0.4, 0.5, 0.45, 0.42], "hybrid non-inferior": [0.01, -0.01, 0.0, 0.005],
              "off − baseline": [0.3, 0.35, 0.2, 0.33]}
    settled = {s.claim.name: s for s in settle([gate, primary, control], values)}
    assert settled[primary.name].family == "primary, Holm over 1"  # the control is not in the family
    nc = settled[control.name]
    assert nc.outcome == "not held" and nc.family == "negative control of 'hybrid non-inferior', at α alone"
    expected = DescrStatsW(np.array(values["off − baseline"])).ttest_mean(0.05, alternative="larger")[1]
    assert nc.p_fail == pytest.approx(expected, rel=1e-10)  # the claim's own test, unadjusted
    assert nc.verdict().claim.startswith("negative control:")
    # a control that holds is shown held, at α alone (a defect of the design, which the report must show)
    assert settle([gate, primary, control], {**values, "off − baseline": [0.01, -0.01, 0.0, 0.005]})[2].outcome \
        == "held"
    failed_gate = settle([gate, primary, control], {**values, "null − baseline": [0.0, 0.01, -0.01, 0.0]})
    assert failed_gate[2].outcome == "not testable at this scale"
    with pytest.raises(ValueError, match="controls"):
        negative_control(Claim("g", "gate", margin=0.1), "x", "y")


def test_exceeds_tests_the_margin_itself_with_statsmodels_one_sample_t_tests_and_decides_in_looks():
    """'a beats b by more than the margin' (the source's own target form, Delta ≥ 0.15): held when d ≤ margin is
    rejected, not held when d ≥ margin is; a case built to fail that still beats b by less than the margin is not
    held. It belongs to a family, has negative controls and is decided in looks like the other tested kinds."""
    from odebook.study.claims import negative_control
    from odebook.study.sequential import decide_all

    claim = Claim("beats by Δ", "exceeds", margin=0.15, direction="higher", units="accuracy")
    d = np.array([0.9, 0.95, 0.85, 0.97, 0.92])
    t = part_test(claim, d)
    assert t.p_hold == pytest.approx(DescrStatsW(d).ttest_mean(0.15, alternative="larger")[1], rel=1e-10)
    assert t.p_fail == pytest.approx(DescrStatsW(d).ttest_mean(0.15, alternative="smaller")[1], rel=1e-10)
    assert claim.hypotheses() == ("a − b > 0.15", "a − b < 0.15")
    assert claim.describe() == "exceeds the margin: a − b above 0.15 accuracy"
    memoryless = negative_control(claim, "memoryless − b", "memoryless beats b by Δ")
    values = {"beats by Δ": d.tolist(), "memoryless − b": [0.10, 0.12, 0.09, 0.11, 0.10]}
    settled = {s.claim.name: s for s in settle([claim, memoryless], values)}
    assert settled["beats by Δ"].outcome == "held" and settled["beats by Δ"].family == "primary, Holm over 1"
    assert settled[memoryless.name].outcome == "not held"  # real, above 0, but short of the margin
    lower = part_test(Claim("below by Δ", "exceeds", margin=0.15), -d)
    assert lower.p_hold == pytest.approx(t.p_hold, rel=1e-10)
    action, _, decisions = decide_all([claim], values, [3, 5])
    assert action == "stop" and decisions["beats by Δ"].action == "efficacy"
    needs = pw.claim_seeds("exceeds", "higher", 0.15, 0.2, 0.1, alpha=0.05, target=0.8)
    assert needs[0] == pw.claim_seeds("superiority", "higher", 0.15, 0.05, 0.1, alpha=0.05, target=0.8)[0]
    assert needs[1] == pw.claim_seeds("superiority", "higher", 0.15, 0.05, 0.1, alpha=0.05, target=0.8)[1]
