"""The GPU estimate's counts and its cost model (odebook.book.passes): kernels counted as a GPU launches them, and
each training step the book has measured on a GPU estimated within 2× of what it took."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from odebook import studies
from odebook.book import passes
from odebook.models.lm import lm_loss
from odebook.study.flops import count_flops

GPUS = {"H100": passes.H100, "H200": passes.H200}
# Training steps measured on GPUs under a T4's policy (fp16 autocast and a GradScaler): the median step (seconds, after
# the first; the median over 3 seeds of each seed's median) of each arm, its model (study 05's hybrid configuration:
# the solver and steps of its ODE block, or None for the baseline transformer) and shapes (6 layers, d 256, 4 heads,
# GPT-2's vocabulary). Study 01's t4 report at 5b64201 (an NVIDIA H100, seq 64, batch 32; its host a Xeon, family 6
# model 207) and study 05's at 60730b4 (an NVIDIA H200, seq 128, batch 32). passes.LAUNCH is the geometric mean of
# each one's (measured − arithmetic) / launches, as this test prints them: 31, 25, 44, 25 and 26 µs.
RECORDED = (
    ("H100", "baseline", None, 0, 64, 32, 0.01542),
    ("H100", "euler × 4", "euler", 4, 64, 32, 0.02395),
    ("H200", "baseline", None, 0, 128, 32, 0.02225),
    ("H200", "rk4 × 2", "rk4", 2, 128, 32, 0.04167),
    ("H200", "dopri5", "dopri5", 1, 128, 32, 0.08846),
)


def test_the_counter_counts_kernels_not_views_allocations_or_reads_back():
    x, linear = torch.randn(2, 4), nn.Linear(4, 3)
    assert passes.count_launches(lambda: x.view(4, 2).transpose(0, 1).unsqueeze(0)) == 0
    assert passes.count_launches(lambda: torch.empty(5)) == 0
    assert passes.count_launches(lambda: (x + 1).sum().item()) == 2  # add, sum; .item() waits, launches nothing
    assert passes.count_launches(lambda: linear(x)) == 1  # one addmm (the transpose of the weight is a view)


def test_the_optimizer_is_counted_at_its_second_step_and_leaves_no_gradient():
    """Clipping and a fused AdamW step: counted after the step that allocates the optimizer's state (zeros_like for
    its moments is no GPU step's work), more for more tensors (the CPU's foreach ops run one op per tensor)."""
    small, large = nn.Linear(4, 4), nn.Sequential(*(nn.Linear(4, 4) for _ in range(20)))
    assert 0 < passes.optimizer_launches(small) < passes.optimizer_launches(large)
    assert all(p.grad is None for p in large.parameters())  # the count leaves no gradient behind


def test_seconds_add_arithmetic_and_launches_and_say_which_bound():
    arithmetic = passes.FRACTION * passes.T4.flops  # a second of it
    assert passes.seconds(arithmetic, 0) == pytest.approx(1.0)
    assert passes.seconds(arithmetic, 1000) == pytest.approx(1.0 + 1000 * passes.LAUNCH)
    assert passes.bound(arithmetic, 10) == "arithmetic-bound"
    assert passes.bound(0.0, 10) == "launch-bound"


@pytest.mark.parametrize("record", RECORDED, ids=lambda r: f"{r[0]} {r[1]}")
def test_each_recorded_gpu_step_is_estimated_within_two_times(record):
    """The book's training steps measured on GPUs (RECORDED) against the estimate from their FLOPs and
    launches counted here: the model rebuilt at the recorded shapes, counted on one sequence (FLOPs scale with the
    batch, launches do not)."""
    gpu, _, solver, steps, seq_len, batch_size, measured = record
    cfg = studies.schema("05_ode_solvers")(seq_len=seq_len, max_seq_len=1088).model_config(50257)
    torch.manual_seed(0)
    model = (cfg.baseline if solver is None else cfg.replace(solver=solver, steps=steps).hybrid)()
    x = torch.randint(0, 50257, (1, seq_len + 1))

    def step() -> None:
        model.zero_grad(set_to_none=True)
        lm_loss(model, (x[:, :-1], x[:, 1:])).backward()

    with passes.Launches() as launched:
        flops = batch_size * count_flops(step)
    launches = launched.n + passes.optimizer_launches(model)
    estimated = passes.seconds(flops, launches, GPUS[gpu])
    print(f"{record[:2]}: {launches} launches, measured {measured * 1e3:.1f} ms, estimated {estimated * 1e3:.1f} ms; "
          f"{(measured - flops / (passes.FRACTION * GPUS[gpu].flops)) / launches * 1e6:.0f} µs a launch")
    assert abs(math.log(estimated / measured)) < math.log(2)


def test_each_kind_of_pass_is_counted_once_however_often_a_plan_builds_its_model_and_batches():
    """A plan builds each run's model and batches afresh (an lr grid's runs, a seed's): counted by what decides the
    work — the model's modules, settings and shapes, the batch's shapes — the same pass is counted once, and a model
    that differs only in a setting (an ODE solver's steps) is counted apart."""
    from odebook.models.arms import HybridConfig
    from odebook.study.plan import Runs, Work
    from odebook.training.runtime import Precision

    cfg = HybridConfig(vocab_size=32, d_model=16, n_layer=2, n_head=2, max_seq_len=8, ode_layers=(1,),
                       solver="euler", steps=2, sensitivity="direct", rtol=1e-3, atol=1e-4, control_dim=2,
                       alpha_init=1.0)
    built = []

    def builder(c):
        def build():
            built.append(c.steps)
            return c.hybrid()
        return build

    def work():  # a new batch callable each time, of the same shapes
        return (Work(3, lambda: (torch.randint(0, 32, (2, 8)), torch.randint(0, 32, (2, 8)))),)

    plan = [Runs("hybrid", builder(cfg), 4, work(), part="lr grid"), Runs("hybrid", builder(cfg), 2, work()),
            Runs("hybrid", builder(cfg.replace(steps=4)), 2, work())]
    precision = Precision(torch.device("cpu"), None)
    raw = passes.counted(plan, precision, train_only=True, kernels=False)
    assert raw[0][2] == raw[1][2] and raw[2][2][0] > raw[0][2][0]  # 4 steps: more FLOPs than 2
    assert built == [2, 2, 4]  # each model built once, for its signature; counted on that model where new
    assert passes.signature(cfg.hybrid()) != passes.signature(cfg.replace(steps=4).hybrid())
    assert passes.signature(cfg.hybrid()) == passes.signature(cfg.replace(alpha_init=0.1).hybrid())  # values: same


def test_rough_flops_are_six_per_parameter_and_token_of_a_step_and_two_of_a_forward_pass():
    from odebook.study.plan import Runs, Work

    def batch():
        return torch.zeros(2, 8, dtype=torch.long), torch.zeros(2, 8, dtype=torch.long)
    model = nn.Linear(4, 4)  # 20 parameters
    plan = [Runs("x", lambda: model, 3, (Work(5, batch), Work(7, batch, train=False)))]
    assert passes.rough_flops(plan) == 3 * (5 * 6 + 7 * 2) * 20 * 16
    assert passes.rough_flops(plan * 10, stop=1.0) == 3 * 5 * 6 * 20 * 16  # it stops at the first work past ``stop``


def test_a_tiny_plan_is_timed_pass_by_pass_with_its_optimizer_step():
    from odebook.study.plan import Runs, Work
    from odebook.training.runtime import Precision

    def batch():
        return torch.randint(0, 32, (2, 8)), torch.randint(0, 32, (2, 8))
    from odebook.models.arms import HybridConfig
    cfg = HybridConfig(vocab_size=32, d_model=16, n_layer=2, n_head=2, max_seq_len=8, ode_layers=(1,),
                       solver="euler", steps=2, sensitivity="direct", rtol=1e-3, atol=1e-4, control_dim=2,
                       alpha_init=1.0)
    plan = [Runs("baseline", cfg.baseline, 2, (Work(4, batch), Work(3, batch, train=False)))]
    (_, train, step), (_, _, forward) = passes.timed(plan, Precision(torch.device("cpu"), None))
    assert train.train and 0 < forward < step  # a step is a forward, a backward and an optimizer step
