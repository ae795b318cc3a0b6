"""Study 02's analysis: study 02's claims follow its arms, its rate rule, the SSM-off control and the equal-time
reading."""

import math

import numpy as np
import pandas as pd
import pytest
import torch

from odebook import studies
from odebook.study.claims import Claim, Settled
from odebook.study.experiment import Run
from odebook.training.runtime import precision_for
from odebook.training.train import History, evaluate

ti = studies.load("02_time_indexed").analysis
TimeIndexedParams = studies.schema("02_time_indexed")


ALL = ["standard", "tong", "ti_mlp", "ti_mlp_full", "ti_ssm", "ti_mlp_constant", "ti_mlp_dt", "ode_shared",
       "ti_mlp_twin"]
CPU = ["standard", "tong", "ti_mlp", "ti_mlp_constant", "ti_ssm", "ti_mlp_twin"]


def test_every_primary_stands_beside_its_negative_control_and_claims_follow_the_arms_trained():
    claims = ti.declared_claims(ALL, 0.02)
    primaries = [c for c in claims if c.primary]
    assert len(claims) == 14 and len(primaries) == 3
    assert [c.controls for c in claims if c.controls] == [c.name for c in primaries]
    assert all(c.margin == 0.02 for c in primaries)
    cpu = ti.declared_claims(CPU, 0.02)
    assert len(cpu) == 11 and not any("ti_mlp_full" in part or "ode_shared" in part or "ti_mlp_dt" in part
                                      for c in cpu for part in c.comparisons)
    assert ti.declared_claims(["standard", "tong"], 0.02) == []
    assert all(set(ti.PAIRS[part]) <= set(ALL) for c in claims for part in c.comparisons)


def test_the_design_simulates_the_primaries_and_each_twin_control_at_the_pilots_sd():
    claims = ti.declared_claims(CPU, 0.02)
    table = ti.design(claims, [4, 8], margin=0.02, alpha=0.05)
    primaries = table[table["decides for it"] != "—"]
    assert list(primaries.comparison) == ["ti_mlp − standard", "ti_mlp − tong", "ti_mlp − ti_mlp_constant",
                                          "ti_ssm − ti_mlp"]
    assert list(primaries["pilot sd"]) == [ti.PILOT_SD[c] for c in primaries.comparison]
    controls = table[table["decides for it"] == "—"]
    assert list(controls.comparison) == ["ti_mlp − ti_mlp_twin"] * 2  # the SSM-off control has no pilot
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


def test_the_ssm_off_control_zeroes_every_ssm_branch_and_restores_the_model():
    p = TimeIndexedParams(d_model=16, n_head=2, n_layer=2, seq_len=8, max_seq_len=8, n_freq=2, d_emb=4, gate_width=4,
                          d_state=2, models=["ti_ssm", "ti_mlp"])
    torch.manual_seed(0)
    arms = {name: build() for name, build in p.arms(32).items()}
    x = torch.randint(0, 32, (2, 9))
    batches, prec = [(x[:, :-1], x[:, 1:])], precision_for(torch.device("cpu"))
    on = evaluate(arms["ti_ssm"], batches, prec)
    runs = [_run(name, seed, [1], [2.0], module, test_loss=2.0 + seed) for name, module in arms.items()
            for seed in (0,)]
    off = ti.ssm_off_loss(runs[0], batches, prec)
    assert off != pytest.approx(on) and evaluate(arms["ti_ssm"], batches, prec) == pytest.approx(on)
    values = ti.seed_differences(["ti_ssm", "ti_mlp"], batches, prec, runs)
    assert np.allclose(values[ti.SSM_OFF], [off - 2.0]) and np.allclose(values["ti_ssm − ti_mlp"], [0.0])


def test_compression_is_a_count_held_at_its_target():
    table = pd.DataFrame({"block_params": [600, 200, 100]}, index=["standard", "ti_mlp", "ti_mlp_full"])
    table["compression_vs_standard"] = table.loc["standard", "block_params"] / table.block_params
    held = {v.claim: v.outcome for v in ti.compression_verdicts(table, 3.0, "tiny")}
    assert held == {"ti_mlp has at least 3× fewer block parameters than the standard transformer": "held",
                    "ti_mlp_full has at least 3× fewer block parameters than the standard transformer": "held"}
    assert [v.outcome for v in ti.compression_verdicts(table, 4.0, "tiny")] == ["not held", "held"]
