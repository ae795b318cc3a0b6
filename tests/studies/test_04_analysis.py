"""study.mixed_training: study 04's claims follow its arms and regimes, and each part's per-seed values are the
differences its name says."""

import math

import numpy as np
import pandas as pd
import pytest

from odebook import studies
from odebook.study.experiment import Run
from odebook.study.retrieval import SHORTCUTS
from odebook.training.train import History

mt = studies.load("04_mixed_training").analysis
MixedTrainingParams = studies.schema("04_mixed_training")


SMALL = dict(pattern="GS", d_model=16, n_head=2, window=8, max_seq_len=64, chunk_size=8)


def _design(regimes, **kw):
    p = MixedTrainingParams(bottlenecks=["static_0.3", "drop_0.7"], regimes=regimes, **SMALL, **kw)
    return mt.Design.of(p.arms(), regimes, control=p.control, ppl_target=5.0), p


def test_the_design_names_the_hybrids_the_static_ones_and_the_sources_arm_and_regime():
    d, _ = _design(["lm", "mixed"])
    assert (d.hybrids, d.static, d.drop, d.source) == (("static_0.3", "drop_0.7"), ("static_0.3",), "drop_0.7",
                                                       ("drop_0.7", "mixed"))
    assert d.task_matters and d.fluency and d.fluent() == [(a, r) for a in d.hybrids for r in ("lm", "mixed")]
    one, _ = _design(["mixed"])
    assert not one.task_matters and not one.fluency and one.fluent() == [("static_0.3", "mixed"), ("drop_0.7", "mixed")]
    assert _design(["retrieval"])[0].fluent() == []


def test_claims_declare_gates_primaries_with_their_negative_control_and_the_target_as_descriptive():
    d, _ = _design(["mixed"])
    claims = mt.declared_claims(d, delta=0.15, ppl_margin=0.1, tokens="tokens")
    kinds = [c.kind for c in claims]
    # gates; the mechanism, the control and its negative control; static_0.3's read and Delta, drop_0.7's Delta (its
    # read is the mechanism); stochastic drop against static; the target beside each hybrid's perplexity
    assert kinds == ["gate"] * 3 + ["superiority", "exceeds", "exceeds"] + ["superiority", "exceeds", "exceeds",
                                                                             "superiority"] + ["descriptive"] * 2
    primaries = [c for c in claims if c.primary]
    controls = [c for c in claims if c.controls]
    assert len(primaries) == 2 and [c.controls for c in controls] == [primaries[1].name]
    assert primaries[0].rests_on == (claims[1].name,)  # drop_0.7 · mixed's local gate
    assert primaries[1].rests_on == (claims[2].name,)  # the control's learned gate
    assert all(c.parts[0].startswith("held-out log PPL − log 5") for c in claims[-2:])
    both = mt.declared_claims(_design(["lm", "mixed"])[0], delta=0.15, ppl_margin=0.1, tokens="tokens")
    assert sum(c.kind == "non-inferiority" for c in both) == 1 and sum(c.kind == "descriptive" for c in both) == 4
    assert any(c.parts == ("far drop with the state resampled: range across regimes − range across arms",)
               for c in both)
    names = {p for c in both for p in c.comparisons}
    values = mt.seed_differences(_design(["lm", "mixed"])[0], _runs(["lm", "mixed"]))
    assert names <= set(values)  # every declared part has its values


HIT = {("drop_0.7", "normal"): 0.9, ("drop_0.7", "state resampled"): 0.3, ("drop_0.7", "state read resampled"): 0.5,
       ("static_0.3", "normal"): 0.8, ("static_0.3", "state resampled"): 0.6,
       ("static_0.3", "state read resampled"): 0.7, ("control", "normal"): 0.2}


def _rows(arm, regime, seed):
    """Ten examples per set and ablation; a hit rate by arm and ablation (local zeroed: 0.1 lower), the seed adding
    0.1 at seed 1; shortcuts at 0.25 (the first) and 0."""
    rows = []
    ablations = ("normal", "state resampled", "state read resampled", "local zeroed") if arm != "control" else (
        "normal", "local zeroed")
    for set_ in ("far", "inside"):
        for ablation in ablations:
            rate = HIT.get((arm, ablation), HIT[arm, "normal"] - 0.1) + 0.1 * seed
            hits = [1.0] * round(rate * 10) + [0.0] * (10 - round(rate * 10))
            rows += [{"arm": arm, "regime": regime, "set": set_, "ablation": ablation, "seed": seed, "hit": h,
                      **{s: (0.25 if i == 0 else 0.0) for i, s in enumerate(SHORTCUTS)}} for h in hits]
    return pd.DataFrame(rows)


def _runs(regimes):
    ppl = {"lm": 20.0, "mixed": 22.0, "retrieval": math.nan}
    return [Run(f"{arm}_{regime}", seed, 0, History(), math.nan, None, 0, math.nan, None,
                scores=(_rows(arm, regime, seed), {"arm": arm, "regime": regime, "seed": seed,
                                                   "PPL": ppl[regime] * (1 + seed)}))
            for seed in (1, 0) for arm in ("static_0.3", "drop_0.7", "control") for regime in regimes]


def test_each_part_is_the_difference_its_name_says_in_seed_order():
    d, _ = _design(["lm", "mixed"])
    v = mt.seed_differences(d, _runs(["lm", "mixed"]))
    assert np.allclose(v[mt.drop_part("drop_0.7", "mixed", "state resampled")], [0.6, 0.6])
    assert np.allclose(v[d.reads], [0.4, 0.4]) and np.allclose(v[d.beats], [0.7, 0.7])
    assert np.allclose(v[d.stateless], [0.1, 0.1])
    assert np.allclose(v[mt.drop_part("static_0.3", "lm", "local zeroed", "inside")], [0.1, 0.1])
    assert np.allclose(v[mt.learned_part("mixed")], [0.2 - 0.25, 0.3 - 0.25])
    assert np.allclose(v[d.essential_part("lm", "static_0.3")], [0.6 - 0.2] * 2)
    assert np.allclose(v[d.fluency], [math.log(22 / 20)] * 2)
    assert np.allclose(v[d.target_part("static_0.3", "lm")], [math.log(20 / 5), math.log(40 / 5)])
    assert np.allclose(v[d.task_matters], [0.0 - 0.4] * 2)  # the drops do not vary by regime; by arm 0.6 vs 0.2


def test_a_control_that_sees_the_nearest_far_fact_is_refused_with_its_settings():
    _, p = _design(["mixed"])
    table = mt.models_table(p.arms(), window=8, nearest_far=100, control=True)
    assert list(table.index) == ["static_0.3", "drop_0.7", "control"]
    assert table.loc["drop_0.7", "sees back (tokens)"] == "all (state)"
    with pytest.raises(ValueError, match="the no-state control sees .* tokens back, as far as the nearest 'far' fact"):
        mt.models_table(p.arms(), window=8, nearest_far=table.loc["control", "sees back (tokens)"], control=True)
