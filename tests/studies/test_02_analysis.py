"""Study 02's analysis: its claims follow its arms and rest on their learned gates, one tuning rule for every arm with
the one-standard-error rule beside it, what the looks read, and the equal-time reading."""

import math

import numpy as np
import pandas as pd
import pytest
import torch

from odebook import studies
from odebook.study.claims import Claim, Settled
from odebook.study.experiment import Run
from odebook.training.runtime import precision_for
from odebook.training.train import History

ti = studies.load("02_time_indexed").analysis
TimeIndexedParams = studies.schema("02_time_indexed")


ALL = ["standard", "tong", "ti_mlp", "ti_mlp_full", "ti_ssm", "ti_ssm_memoryless", "ti_mlp_constant", "ti_mlp_dt",
       "ode_shared", "ti_mlp_twin"]
CPU = ["standard", "tong", "ti_mlp", "ti_mlp_constant", "ti_ssm", "ti_ssm_memoryless", "ti_mlp_twin"]


def test_every_primary_stands_beside_its_trained_negative_control_and_rests_on_its_arms_learned_gates():
    claims = ti.declared_claims(ALL, 0.02)
    primaries = [c for c in claims if c.primary]
    assert len(primaries) == 3 and all(c.margin == 0.02 for c in primaries)
    controls = [c for c in claims if c.controls]
    assert [c.controls for c in controls] == [c.name for c in primaries]
    assert [c.comparisons for c in controls] == [("ti_mlp − ti_mlp_twin",)] * 2 + [("ti_ssm_memoryless − ti_mlp",)]
    gates = {c.name: c for c in claims if c.kind == "learned"}
    for c in primaries + controls:  # each arm it compares has a learned gate it rests on, and only those
        arms = {m for part in c.comparisons for m in ti.PAIRS[part]}
        assert {gates[g].comparisons[0] for g in c.rests_on} == {ti.learned(a) for a in arms}, c.name
    assert all(g.margin == -ti.LEARNED_MARGIN and g.direction == "lower" for g in gates.values())
    assert not any("off" in part for c in claims for part in c.comparisons)  # no branch cut out at test time
    sources = [c for c in claims if "source's" in c.name or "fork's" in c.name]
    assert len(sources) == 3 and all(c.kind == "descriptive" for c in sources)
    cpu = ti.declared_claims(CPU, 0.02)
    assert not any("ti_mlp_full" in part or "ode_shared" in part or "ti_mlp_dt" in part
                   for c in cpu for part in c.comparisons)
    assert ti.declared_claims(["standard", "tong"], 0.02) == []  # no claim, and so no gate
    without = ti.declared_claims([m for m in CPU if m != "ti_ssm_memoryless"], 0.02)
    assert not any("memoryless" in c.name for c in without)
    assert all(set(ti.PAIRS[part]) <= set(ALL) for c in claims if c.kind != "learned" for part in c.comparisons)


def test_the_design_simulates_the_primaries_and_each_twin_control_at_the_pilots_sd():
    claims = ti.declared_claims(CPU, 0.02)
    table = ti.design(claims, [4, 8], margin=0.02, alpha=0.05)
    primaries = table[table["decides for it"] != "—"]
    assert list(primaries.comparison) == ["ti_mlp − standard", "ti_mlp − tong", "ti_mlp − ti_mlp_constant",
                                          "ti_ssm − ti_mlp"]
    assert list(primaries["pilot sd"]) == [ti.PILOT_SD[c] for c in primaries.comparison]
    controls = table[table["decides for it"] == "—"]
    assert list(controls.comparison) == ["ti_mlp − ti_mlp_twin"] * 2  # the memoryless SSM's control has no pilot
    assert all(s.endswith("at [4, 8] seeds (d = 0)") for s in controls["decides against it"])


def test_the_one_standard_error_rule_takes_the_smallest_rate_within_it_of_the_lowest():
    losses = pd.Series({1e-3: 2.000, 2e-3: 1.995, 4e-3: 1.980, 8e-3: math.nan})
    assert ti.one_se(losses, 0.012) == 4e-3
    assert ti.one_se(losses, 0.02) == 1e-3
    assert ti.one_se(losses, 0.0) == 4e-3
    assert ti.SE == pytest.approx(0.0165 / math.sqrt(2))


def test_a_claim_resting_on_an_untuned_arm_says_so_and_keeps_its_own_note():
    claim = Claim("beats", "superiority", margin=0.02, parts=("ti_mlp − tong",))
    flagged = ti.flag_untuned(Settled(claim, "held", note="void"), {"tong": "at the grid's lower edge"})
    assert flagged.note == "void; rests on untuned learning rates: tong (at the grid's lower edge)"
    other = Settled(Claim("ssm", "superiority", margin=0.02, parts=("ti_ssm − ti_mlp",)), "held")
    assert ti.flag_untuned(other, {"tong": "edge"}).note == ""


def _run(model, seed, steps, losses, module=None, test_loss=2.0):
    return Run(model, seed, 0, History(eval_step=steps, eval_loss=losses), test_loss, module, 0, float("nan"), None)


def test_equal_time_reads_the_ssm_curve_at_the_mlps_training_time():
    runs = [_run("ti_ssm", 1, [50, 100, 150, 200], [3.0, 2.8, 2.6, 2.4]),
            _run("ti_mlp", 1, [50, 100, 150, 200], [2.9, 2.7, 2.5, 2.5]),
            _run("ti_ssm", 0, [50, 100, 150, 200], [3.0, 2.8, 2.6, 2.4]),
            _run("ti_mlp", 0, [50, 100, 150, 200], [2.9, 2.7, 2.5, 2.5])]
    table, gaps = ti.equal_time(runs, 2.0)  # 200 MLP steps take as long as 100 SSM steps
    assert list(table.index) == [0, 1] and np.allclose(gaps, [2.8 - 2.5] * 2)
    assert np.allclose(table["ti_ssm val loss at ti_mlp's time"], 2.8)
    assert table["ti_ssm steps in that time"].tolist() == [100.0, 100.0]
    _, before_first = ti.equal_time(runs, 8.0)  # 25 SSM steps: before its first evaluation
    assert all(math.isnan(g) for g in before_first)


def test_the_looks_read_each_pair_and_each_arms_loss_above_the_unigram_model_and_the_sensitivity_swaps_in_reruns():
    losses = {"ti_mlp": [2.0, 2.1], "standard": [2.2, 2.4], "tong": [2.05, 2.0], "ti_ssm_memoryless": [1.9, 2.2]}
    runs = [_run(m, seed, [1], [2.0], test_loss=x) for m, xs in losses.items() for seed, x in zip((5, 6), xs)]
    values = ti.seed_differences(list(losses), runs, unigram=3.0)
    assert np.allclose(values["ti_mlp − standard"], [-0.2, -0.3]) and np.allclose(values["ti_mlp − tong"], [-0.05, 0.1])
    assert np.allclose(values["ti_ssm_memoryless − ti_mlp"], [-0.1, 0.1])
    assert np.allclose(values[ti.learned("tong")], [-0.95, -1.0]) and ti.learned("tong") == "tong − unigram"
    assert not any(k.startswith(ti.OLD_RULE) or k == ti.EQUAL_TIME for k in values)
    rerun = [_run("ti_mlp", seed, [1], [2.0], test_loss=x) for seed, x in ((6, 2.3), (5, 2.25))]
    old = ti.old_rule_differences(runs, rerun)
    assert np.allclose(old[ti.OLD_RULE + "ti_mlp − standard"], [0.05, -0.1])
    assert np.allclose(old[ti.OLD_RULE + "ti_mlp − tong"], [0.2, 0.3])
    assert np.allclose(ti.old_rule_differences(runs, [])[ti.OLD_RULE + "ti_mlp − tong"], values["ti_mlp − tong"])


def test_one_tuning_rule_for_every_arm_the_family_on_its_mean_and_the_one_se_rule_beside_it():
    """Every arm's rate is the lowest mean validation loss over the tuning seeds (the family's, on the family's mean);
    the one-standard-error rates come from the same table, and the arms they move are the sensitivity's re-runs."""
    from families import time_indexed
    from odebook.data.corpus import TokenSplits
    from odebook.study.task import lm_task
    from odebook.training.train import TrainConfig

    periodic = torch.arange(3000) % 7
    task = lm_task(TokenSplits(periodic[:2000], periodic[2000:2500], periodic[2500:], 16, "periodic"),
                   batch_size=4, seq_len=8, eval_batches=2)
    shape = dict(vocab_size=16, d_model=8, n_head=2, n_layer=2, max_seq_len=8, n_freq=2, d_emb=4, gate_width=4,
                 d_state=2)
    builders = {n: (lambda n=n: time_indexed(n, **shape)) for n in ("standard", "ti_mlp", "ti_mlp_twin")}
    config = TrainConfig(steps=4, lr=1.0, eval_interval=4, weight_decay=0.0)
    rates = ti.tune_rates(builders, task, config, precision_for(torch.device("cpu")), lrs=[1e-3, 1e-2],
                          seeds=[7, 8], max_extensions=1, progress=False)
    table = rates.table[[c for c in rates.table.columns if isinstance(c, float)]]
    assert rates.chosen["standard"] == float(table.loc["standard"].idxmin())
    assert rates.family == ("ti_mlp", "ti_mlp_twin") and rates.chosen["ti_mlp"] == rates.chosen["ti_mlp_twin"]
    assert rates.chosen["ti_mlp"] == float(rates.family_means.idxmin())
    assert rates.old_rule["standard"] == ti.one_se(table.loc["standard"])
    assert rates.old_rule["ti_mlp"] == ti.one_se(rates.family_means)
    assert rates.moved == [n for n in ("ti_mlp", "standard") if rates.old_rule[n] != rates.chosen[n]]
    assert set(rates.status) == set(builders)


def test_compression_is_a_count_held_at_its_target():
    table = pd.DataFrame({"block_params": [600, 200, 100]}, index=["standard", "ti_mlp", "ti_mlp_full"])
    table["compression_vs_standard"] = table.loc["standard", "block_params"] / table.block_params
    held = {v.claim: v.outcome for v in ti.compression_verdicts(table, 3.0, "tiny")}
    assert held == {"ti_mlp has at least 3× fewer block parameters than the standard transformer": "held",
                    "ti_mlp_full has at least 3× fewer block parameters than the standard transformer": "held"}
    assert [v.outcome for v in ti.compression_verdicts(table, 4.0, "tiny")] == ["not held", "held"]
