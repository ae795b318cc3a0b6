"""Study 03's capacity module on synthetic accuracy curves whose capacity is known, and its claims on synthetic
scores."""

import numpy as np
import pytest

from odebook import studies
from odebook.study.experiment import Run
from odebook.study.recall import first_name
from odebook.training.train import History

cap = studies.load("03_gdn_scaling").capacity
capacity = cap.capacity

KS = [1, 2, 4, 8, 16, 32]


def _curve(crossing, seeds=5, sd=0.01, seed=0):
    """Accuracy 0.97 up to ``crossing`` and 0.5 beyond it, plus noise: its capacity is the largest k ≤ crossing."""
    clean = np.where(np.asarray(KS) <= crossing, 0.97, 0.5)
    return np.clip(clean + np.random.default_rng(seed).normal(0, sd, (seeds, len(KS))), 0, 1)


def test_a_clean_curve_gives_its_known_capacity_with_a_tight_interval():
    c = capacity(KS, _curve(8))
    assert (c.estimate, c.low, c.high) == (8, 8, 8) and not c.lower_bound
    assert "capacity at ≥ 90% accuracy: 8" in str(c)
    assert "capacity at binding ≥ 0.5: 8" in str(capacity(KS, _curve(8) - 0.4, threshold=0.5, measure="binding"))


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


# Study 03's claims on synthetic MQAR scores: each arm's first-query accuracy as drawn and re-bound per seed and k.

ARMS = cap.Arms((4, 1), 16, (2, 8), 0.1)
DRAWN = {"gdn h4": {2: 0.6, 8: 0.3}, "gdn h1": {2: 0.95, 8: 0.5}, "attention": {2: 0.98, 8: 0.98},
         "no state h4": {2: 0.4, 8: 0.2}, "no state h1": {2: 0.4, 8: 0.2}}
REBOUND = {"gdn h4": {2: 0.4, 8: 0.25}, "gdn h1": {2: 0.1, 8: 0.3}, "attention": {2: 0.06, 8: 0.07},
           "no state h4": {2: 0.4, 8: 0.2}, "no state h1": {2: 0.39, 8: 0.2}}
NON_BINDER, CHANCE = {2: 0.5, 8: 0.3}, 0.1


def _runs(seeds=(1, 0)):
    """Every arm on ``seeds`` (given out of order); seed s adds 0.01·s to each accuracy as drawn."""
    def scores(arm, seed):
        out = {}
        for k in ARMS.ks:
            out[first_name(k)] = DRAWN[arm][k] + 0.01 * seed
            out[first_name(k, rebound=True)] = REBOUND[arm][k]
            out[f"k={k}"] = 0.7 - 0.5 * seed
        return out | {"unseen pairs": 0.5}
    return [Run(arm, s, 0, History(), 1.0, None, 0, float("nan"), None, scores=scores(arm, s))
            for s in seeds for arm in DRAWN]


def test_every_arm_has_a_learned_gate_and_two_primaries_rest_on_them_each_beside_its_negative_control():
    claims = cap.binding_claims(ARMS)
    gates, tested = claims[:5], claims[5:]
    assert all(c.kind == "learned" and not c.primary for c in gates)
    assert [c.parts for c in gates] == [(ARMS.learned(a),) for a in ARMS.learners]
    assert ARMS.learned("no state h1") == "k=2: no state h1, all queries − chance"
    assert ARMS.learned("gdn h4") == "k=2: gdn h4, first query − best non-binder"
    assert [c.primary for c in tested] == [True, False, True, False, False, False]  # binds: a secondary
    assert [c.controls for c in tested[1::2]] == [c.name for c in tested[::2]]
    assert all(c.kind == "exceeds" and c.margin == 0.1 for c in tested)
    assert [c.parts for c in tested[::2]] == [(ARMS.fills,), (ARMS.more,), (ARMS.binds,)]
    assert [c.parts for c in tested[1::2]] == [(ARMS.no_state_fills,), (ARMS.no_state_more,), (ARMS.no_state,)]
    gate = {a: g.name for a, g in zip(ARMS.learners, gates)}
    assert [c.rests_on for c in tested] == [  # a claim rests on its arms' gates and its control's arms' too
        (gate["gdn h4"], gate["no state h4"]), (gate["no state h4"],),
        (gate["gdn h1"], gate["gdn h4"], gate["no state h1"], gate["no state h4"]),
        (gate["no state h1"], gate["no state h4"]), (gate["gdn h1"], gate["no state h1"]), (gate["no state h1"],)]
    assert ARMS.binds == "k=2: gdn h1, as drawn − re-bound" and ARMS.more == "k=8: binding, gdn h1 − gdn h4"


def test_binding_values_are_the_differences_the_claims_and_gates_name_in_seed_order():
    v = cap.binding_values(ARMS, _runs(), non_binder=NON_BINDER, chance=CHANCE)
    assert np.allclose(v[ARMS.binds], [0.85, 0.86]) and np.allclose(v[ARMS.no_state], [0.01, 0.02])
    assert np.allclose(v[ARMS.fills], [0.2 - 0.05] * 2) and np.allclose(v[ARMS.no_state_fills], [0.0] * 2)
    assert np.allclose(v[ARMS.more], [0.2 - 0.05] * 2)  # at the most pairs
    assert np.allclose(v[ARMS.no_state_more], [0.0] * 2)
    assert np.allclose(v[ARMS.learned("gdn h1")], [0.45, 0.46])  # first query − best non-binder, seeds 0 and 1
    assert np.allclose(v[ARMS.learned("no state h4")], [0.6, 0.1])  # all queries − chance


def test_a_primary_whose_arm_did_not_learn_in_every_seed_is_not_testable():
    from odebook.study.claims import settle

    v = cap.binding_values(ARMS, _runs(), non_binder=NON_BINDER, chance=CHANCE)
    v[ARMS.learned("gdn h4")] = np.array([0.3, 0.05])  # seed 1 below the margin
    settled = {s.claim.name: s for s in settle(cap.binding_claims(ARMS), v)}
    gate = next(s for n, s in settled.items() if n.startswith("learned: gdn h4"))
    assert gate.outcome == "not held" and "learned in 1 of 2 seeds" in gate.note
    fills = next(s for n, s in settled.items() if "fills up" in n and not n.startswith("negative"))
    assert fills.outcome.startswith("not testable")


def test_the_tables_and_the_positive_control_read_the_same_scores():
    runs = _runs()
    table = cap.binding_table(runs, list(DRAWN), ARMS.ks, non_binder=NON_BINDER, chance=CHANCE,
                              lrs=dict.fromkeys(DRAWN, 1e-3))
    assert table.loc[("gdn h1", 2), "binding"] == pytest.approx(0.855) and table.loc[("gdn h1", 2), "n"] == 2
    assert table.loc[("gdn h4", 8), "unseen pairs (all queries)"] == 0.5
    capacities, sizes = cap.capacity_table(runs, [4, 1], ARMS.ks, layers=2, width=16)
    assert capacities[1].estimate == 2 and capacities[4].estimate == 0
    assert sizes.loc["gdn h1", "state (numbers)"] == 512 and sizes.loc["gdn h4", "state (numbers)"] == 128
    held = cap.positive_control(runs, ARMS.ks, non_binder=NON_BINDER, margin=0.1, queries=100)
    assert held.outcome == "held" and "200 first queries pooled" in held.evidence
    assert cap.positive_control(runs, ARMS.ks, non_binder={2: 0.95, 8: 0.95}, margin=0.1,
                                queries=100).outcome == "not held"


def test_the_delta_rule_stores_and_retrieves_in_every_implementation_here():
    import torch

    mse = cap.store_and_retrieve(16, seed=0, device=torch.device("cpu"))
    assert set(mse) >= {"reference", "chunked"} and max(mse.values()) < 1e-6
    assert cap.mechanism_verdict(mse).outcome == "held"
    assert cap.mechanism_verdict({"broken": 0.5}).outcome == "not held"
