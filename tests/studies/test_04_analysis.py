"""Study 04's analysis: study 04's claims follow its arms and regimes, and each part's per-seed values are the
differences its name says."""

import math

import numpy as np
import pandas as pd
import pytest

from odebook import studies
from odebook.study.claims import settle
from odebook.study.experiment import Run
from odebook.study.retrieval import SHORTCUTS
from odebook.training.train import History

mt = studies.load("04_mixed_training").analysis
MixedTrainingParams = studies.schema("04_mixed_training")


SMALL = dict(pattern="GS", d_model=16, n_head=2, window=8, max_seq_len=64, chunk_size=8)


def _design(regimes, **kw):
    p = MixedTrainingParams(bottlenecks=["static_0.3", "drop_0.7"], regimes=regimes, **SMALL, **kw)
    return mt.Design.of(p.arms(), regimes, ppl_target=5.0), p


OUT = "drop_0.7+out_0.7"


def test_the_design_names_the_hybrids_the_static_ones_the_sources_arm_and_the_dropped_output_arm():
    d, _ = _design(["lm", "mixed"])
    assert (d.hybrids, d.static, d.drop, d.output_drop, d.source) == (
        ("static_0.3", "drop_0.7", OUT), ("static_0.3",), "drop_0.7", OUT, ("drop_0.7", "mixed"))
    assert d.control and d.attention
    assert d.learners[("control", "lm")] == "inside" and d.learners[("attention", "mixed")] == "far"
    assert d.task_matters and d.fluency and d.fluent() == [(a, r) for a in d.hybrids for r in ("lm", "mixed")]
    one, _ = _design(["mixed"], output_drop=0.0, comparator=False)
    assert one.output_drop is None and not one.attention and not one.task_matters and not one.fluency
    assert one.read_gains == [("mixed", "drop_0.7", "static_0.3")]
    assert _design(["retrieval"])[0].fluent() == []


def test_claims_declare_learned_gates_three_primaries_and_a_trained_negative_control():
    d, _ = _design(["mixed"])
    claims = mt.declared_claims(d, delta=0.15, ppl_margin=0.1, tokens="tokens")
    gates = [c for c in claims if c.kind == "learned"]
    assert len(gates) == 5 and all(c.name.startswith("learned:") for c in gates)  # 3 hybrids, attention, control
    primaries = [c for c in claims if c.primary]
    assert [c.kind for c in primaries] == ["superiority", "superiority", "non-inferiority"]
    assert primaries[0].parts == (mt.drop_part("drop_0.7", "mixed", mt.READ),)
    assert primaries[1].parts == (mt.drop_part(OUT, "mixed", mt.READ),)
    assert primaries[2].parts == (mt.reaches_part("drop_0.7", "mixed"),)
    by_name = {c.name: c for c in claims}
    assert all(by_name[g].kind == "learned" for c in primaries for g in c.rests_on)
    assert {by_name[g].parts[0] for g in primaries[2].rests_on} == {mt.learned_part("drop_0.7", "mixed"),
                                                                    mt.learned_part("attention", "mixed")}
    control, = [c for c in claims if c.controls]
    # the negative control is a trained arm (the no-state control) in the hybrid's place, never an ablation at test
    assert control.controls == primaries[2].name and control.parts == (mt.reaches_part("control", "mixed"),)
    assert mt.learned_part("control", "mixed", "inside") in {by_name[g].parts[0] for g in control.rests_on}
    assert not any("resampled" in part for part in control.parts)
    both = mt.declared_claims(_design(["lm", "mixed"])[0], delta=0.15, ppl_margin=0.1, tokens="tokens")
    assert sum(c.kind == "non-inferiority" for c in both) == 3  # the comparator, its negative control, fluency
    assert any(c.parts == ("far drop with the state resampled: range across regimes − range across arms",)
               for c in both)
    names = {p for c in both for p in c.comparisons}
    values = mt.seed_differences(_design(["lm", "mixed"])[0], _runs(["lm", "mixed"]))
    assert names <= set(values)  # every declared part has its values


HIT = {("drop_0.7", "normal"): 0.9, ("drop_0.7", "state resampled"): 0.3, ("drop_0.7", mt.READ): 0.5,
       ("drop_0.7", "gdn output resampled"): 0.6, ("static_0.3", "normal"): 0.8, ("static_0.3", "state resampled"): 0.6,
       ("static_0.3", mt.READ): 0.7, (OUT, "normal"): 0.7, (OUT, mt.READ): 0.2, ("control", "normal"): 0.2,
       ("attention", "normal"): 1.0}
ARMS = ("static_0.3", "drop_0.7", OUT, "control", "attention")


def _rows(arm, regime, seed):
    """Ten examples per set and ablation; a hit rate by arm and ablation (others: 0.1 below normal), less 0.1 at
    seed 1; shortcuts at 0.25 (the first) and 0."""
    rows = []
    ablations = ("normal", "local zeroed") if arm in ("control", "attention") else (
        "normal", "state resampled", mt.READ, "gdn output resampled", "local zeroed")
    for set_ in ("far", "inside"):
        for ablation in ablations:
            rate = HIT.get((arm, ablation), HIT[arm, "normal"] - 0.1) - 0.1 * seed
            hits = [1.0] * round(rate * 10) + [0.0] * (10 - round(rate * 10))
            rows += [{"arm": arm, "regime": regime, "set": set_, "ablation": ablation, "seed": seed, "hit": h,
                      **{s: (0.25 if i == 0 else 0.0) for i, s in enumerate(SHORTCUTS)}} for h in hits]
    return pd.DataFrame(rows)


def _runs(regimes):
    ppl = {"lm": 20.0, "mixed": 22.0, "retrieval": math.nan}
    return [Run(f"{arm}_{regime}", seed, 0, History(), math.nan, None, 0, math.nan, None,
                scores=(_rows(arm, regime, seed), {"arm": arm, "regime": regime, "seed": seed,
                                                   "PPL": ppl[regime] * (1 + seed)}))
            for seed in (1, 0) for arm in ARMS for regime in regimes]


def test_each_part_is_the_difference_its_name_says_in_seed_order():
    d, _ = _design(["lm", "mixed"])
    v = mt.seed_differences(d, _runs(["lm", "mixed"]))
    assert np.allclose(v[mt.drop_part("drop_0.7", "mixed", "state resampled")], [0.6, 0.6])
    assert np.allclose(v[mt.drop_part(OUT, "mixed", mt.READ)], [0.5, 0.5])
    assert np.allclose(v[mt.learned_part("drop_0.7", "lm")], [0.9 - 0.25, 0.8 - 0.25])
    assert np.allclose(v[mt.learned_part("control", "mixed", "inside")], [0.2 - 0.25, 0.1 - 0.25])
    assert np.allclose(v[mt.reaches_part("drop_0.7", "mixed")], [-0.1, -0.1])
    assert np.allclose(v[mt.reaches_part("control", "mixed")], [-0.8, -0.8])
    assert np.allclose(v[mt.sufficient_part("drop_0.7", "mixed")], [0.3, 0.3])
    assert np.allclose(v[mt.read_gain_part("lm", "drop_0.7", "static_0.3")], [0.4 - 0.1] * 2)
    assert np.allclose(v[mt.read_gain_part("mixed", OUT, "drop_0.7")], [0.5 - 0.4] * 2)
    assert np.allclose(v[d.fluency], [math.log(22 / 20)] * 2)
    assert np.allclose(v[d.target_part("static_0.3", "lm")], [math.log(20 / 5), math.log(40 / 5)])
    assert np.allclose(v[d.task_matters], [0.0 - 0.5] * 2)  # the drops do not vary by regime; by arm 0.2, 0.6, 0.1


def test_an_untuned_rate_is_named_on_every_claim_that_reads_its_run():
    d, _ = _design(["mixed"])
    claims = mt.declared_claims(d, delta=0.15, ppl_margin=0.1, tokens="tokens")
    settled = settle(claims, mt.seed_differences(d, _runs(["mixed"])))
    flagged = [mt.flag_untuned(s, {"attention_mixed": "untuned: at the top"}) for s in settled]
    named = {s.claim.name for s in flagged if "attention_mixed (untuned: at the top)" in s.note}
    assert named == {c.name for c in claims if any("attention · mixed" in part for part in c.comparisons)}
    assert len(named) == 3  # its learned gate, the comparison and its negative control


def test_a_control_that_sees_the_nearest_far_fact_is_refused_with_its_settings():
    _, p = _design(["mixed"])
    table = mt.models_table(p.arms(), window=8, nearest_far=100)
    assert list(table.index) == ["static_0.3", "drop_0.7", OUT, "control", "attention"]
    assert table.loc["drop_0.7", "sees back (tokens)"] == "all (state)"
    assert table.loc["attention", "sees back (tokens)"] == "all (attention)"
    with pytest.raises(ValueError, match="the no-state control sees .* tokens back, as far as the nearest 'far' fact"):
        mt.models_table(p.arms(), window=8, nearest_far=table.loc["control", "sees back (tokens)"])


def test_every_arm_in_every_regime_is_tuned_by_one_rule_on_the_same_grid_and_seeds(monkeypatch):
    calls = []

    def fake_tune_lr(builders, task, config, precision, *, lrs, seeds, max_extensions, tie, **options):
        calls.append((list(builders), task, tuple(lrs), tuple(seeds), max_extensions, tie))
        table = pd.DataFrame({lr: [1.0 + abs(lr - 2e-3)] * len(builders) for lr in lrs}, index=list(builders))
        return {n: 2e-3 for n in builders}, table, []

    monkeypatch.setattr(mt, "tune_lr", fake_tune_lr)
    _, p = _design(["lm", "mixed"])
    arms = p.arms()
    tasks = {f"{a}_{r}": f"task {r}" for a in arms for r in ("lm", "mixed")}
    rates = mt.tune_rates(arms, ["lm", "mixed"], tasks, None, None, lrs=[1e-3, 2e-3, 4e-3], seeds=[7, 8],
                          max_extensions=1, tie=0.02)
    assert [c[0] for c in calls] == [[f"{a}_{r}" for a in arms] for r in ("lm", "mixed")]  # every arm, each regime
    assert {c[2:] for c in calls} == {((1e-3, 2e-3, 4e-3), (7, 8), 1, 0.02)} and [c[1] for c in calls] == ["task lm",
                                                                                                    "task mixed"]
    assert rates.chosen == {n: 2e-3 for n in tasks} and rates.untuned == {}
    assert list(rates.table["tuning"].unique()) == ["tuned"]


def test_the_tuning_rule_reads_held_out_answers_in_every_regime_that_trains_retrieval():
    from odebook.models.lm import lm_loss, mixed_loss

    _, p = _design(["lm", "retrieval", "mixed"])
    windows, prompts = ["held-out window"], ["held-out prompts"]
    regime_task = mt.regime_tasks(p.arms(), ["lm", "retrieval", "mixed"], train_docs=[], valid=windows,
                                  valid_prompts=prompts, tok=None, eval_sets={}, stages=[(1, 0)], ks=[2], window=8,
                                  batch_size=2, seq_len=8, retrieval_batch_size=2, precision=None)
    for arm in p.arms():
        assert regime_task[f"{arm}_lm"].valid is windows
        assert regime_task[f"{arm}_retrieval"].valid is prompts and regime_task[f"{arm}_mixed"].valid is prompts
        assert regime_task[f"{arm}_mixed"].loss_fn is mixed_loss
        assert {regime_task[f"{arm}_{r}"].eval_loss_fn for r in ("lm", "retrieval", "mixed")} == {lm_loss}
