"""study.ode_solvers and study.generation: study 05's tables and claims from trained (here: freshly built) hybrids and
synthetic measurements."""

import math

import pandas as pd
import pytest
import torch

from odebook.models.arms import HybridConfig
from odebook.models.lm import gpt
from odebook import studies
from odebook.study.experiment import Run, loss_with_solver
from odebook.training.runtime import precision_for
from odebook.training.train import History

generation = studies.load("05_ode_solvers").generation
ode_solvers = studies.load("05_ode_solvers").analysis

CPU = precision_for(torch.device("cpu"))
CONFIG = HybridConfig(vocab_size=40, d_model=16, n_layer=2, n_head=2, max_seq_len=32, ode_layers=(1,), solver="rk4",
                      steps=2, sensitivity="direct", rtol=1e-3, atol=1e-4, control_dim=4, alpha_init=0.1)
X = torch.randint(0, 40, (2, 17), generator=torch.Generator().manual_seed(0))
BATCHES = [(X[:, :-1], X[:, 1:])]


def _runs():
    torch.manual_seed(0)
    hybrids = {s: CONFIG.hybrid() for s in (1, 0)}
    history = History(eval_step=[4], eval_loss=[2.0], step_time=[0.01])
    return [Run("rk4", s, 0, history, 2.0, m, 0, math.nan, None) for s, m in hybrids.items()] + \
        [Run("baseline", s, 0, history, 2.5, gpt(vocab_size=40, d_model=16, n_layer=2, n_head=2, max_seq_len=32), 0,
             math.nan, None) for s in (0, 1)]


def test_resolved_puts_each_integrator_against_the_reference_on_the_same_weights_by_seed():
    runs, steps = _runs(), {"euler": 8, "rk4": 2, "dopri5": None}
    table = ode_solvers.resolved(runs, "rk4", steps, BATCHES, CPU, reference_steps=8)
    first = next(r.module for r in runs if r.model == "rk4" and r.seed == 0)
    ref = loss_with_solver(first, "rk4", 8, BATCHES, CPU)
    assert list(table.index) == [0, 1] and table.loc[0, "reference"] == pytest.approx(ref)
    assert table.loc[0, "euler − reference"] == pytest.approx(loss_with_solver(first, "euler", 8, BATCHES, CPU) - ref)
    assert list(table.columns) == ["alpha", "euler − reference", "rk4 − reference", "dopri5 − reference", "reference"]
    assert table.alpha.tolist() == pytest.approx([0.1, 0.1])


def test_the_integrators_table_counts_evaluations_per_forward_and_none_for_the_baseline():
    table = ode_solvers.integrators_table(_runs(), {"rk4": 2}, X, CPU)
    assert table.loc["rk4", "steps"] == 2 and table.loc["rk4", "nfe_per_forward"] == 8  # rk4: 4 per step
    assert math.isnan(table.loc["baseline", "nfe_per_forward"])  # the column is numeric: None reads NaN


def test_memory_growth_reads_the_most_steps_over_the_fewest():
    sweep = pd.DataFrame([{"steps": n, "sensitivity": s, "peak_memory_mb": mb}
                          for s, mbs in (("direct", (10, 80)), ("adjoint", (5, 5.5))) for n, mb in zip((4, 32), mbs)])
    assert ode_solvers.memory_growth(sweep, ["direct", "adjoint"], [4, 32]) == {"direct": 8.0, "adjoint": 1.1}


def test_the_kv_claim_needs_every_crossover_by_the_limit_and_identical_tokens():
    speed = pd.DataFrame([{"model": m, "new_tokens": n, "speedup": s, "identical_tokens": True}
                          for m, curve in (("a", (2.0, 12.0)), ("b", (1.0, 11.0))) for n, s in zip((64, 128), curve)])
    crossings = generation.crossovers(speed, 10.0)
    assert crossings["a"].reached and crossings["a"].length < crossings["b"].length <= 128
    held = generation.kv_verdict(speed, crossings, target=10.0, limit=128, scale="tiny")
    assert held.outcome == "held" and "64: 2.0×" in held.evidence and held.scale == "tiny"
    assert generation.kv_verdict(speed, crossings, target=10.0, limit=100, scale="").outcome == "not held"
    speed.loc[0, "identical_tokens"] = False
    differ = generation.kv_verdict(speed, crossings, target=10.0, limit=128, scale="")
    assert differ.outcome == "not held" and "tokens differ" in differ.evidence


def test_samples_draw_each_prompt_from_its_own_generator_the_same_for_every_model():
    from odebook.data.corpus import get_tokenizer

    torch.manual_seed(0)
    model = gpt(vocab_size=256, d_model=16, n_layer=1, n_head=2, max_seq_len=32)
    starts = torch.randint(0, 256, (2, 4), generator=torch.Generator().manual_seed(1))
    out = generation.samples({"a": model, "b": model}, starts, get_tokenizer("bytes"), tokens=5, temperature=1.0,
                             top_k=10, seed=3)
    assert [(s["prompt"], s["model"]) for s in out] == [(0, "a"), (0, "b"), (1, "a"), (1, "b")]
    assert out[0]["continuation"] == out[1]["continuation"] and out[0]["prompt text"] == out[1]["prompt text"]
