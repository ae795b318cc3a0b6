import pytest
import torch

from odebook.models import lm as models
import math

from odebook import studies
from odebook.training.runtime import precision_for, seed_everything

measure = studies.load("05_ode_solvers").measure

CPU = precision_for(torch.device("cpu"))
SHAPE = dict(vocab_size=40, d_model=16, n_layer=3, n_head=2, max_seq_len=48)


def test_cpu_peak_memory_counts_what_the_function_holds_at_once():
    def two_at_once():
        a = torch.ones(1000, 1000)  # 4,000,000 bytes
        b = torch.ones(500, 1000)  # 2,000,000 bytes
        return a.sum() + b.sum()

    def one_after_another():
        for _ in range(3):
            torch.ones(1000, 1000).sum()

    assert measure.peak_memory(two_at_once, torch.device("cpu")) == pytest.approx(6_000_000, rel=0.01)
    assert measure.peak_memory(one_after_another, torch.device("cpu")) == pytest.approx(4_000_000, rel=0.01)


def test_cpu_peak_memory_counts_what_an_operation_frees_inside_itself():
    """A temporary that a custom autograd Function allocates and frees before it returns (as the sliced head, the
    adjoint and the reversible backward do) counts at its peak, in the forward and in the backward pass."""
    class Temporary(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x + torch.ones(1000, 1000).sum()  # 4,000,000 bytes, freed before forward returns

        @staticmethod
        def backward(ctx, grad):
            return grad * torch.ones(1000, 1500).mean()  # 6,000,000 bytes, freed before backward returns

    x = torch.zeros(10, requires_grad=True)
    assert measure.peak_memory(lambda: Temporary.apply(x), torch.device("cpu")) == pytest.approx(4_000_000, rel=0.01)
    assert measure.peak_memory(lambda: Temporary.apply(x).sum().backward(),
                       torch.device("cpu")) == pytest.approx(6_000_000, rel=0.01)


def build(sensitivity, steps):
    seed_everything(0)
    return models.ode_hybrid(**SHAPE, ode_layers=[1], solver="midpoint", steps=steps, sensitivity=sensitivity)


def config(**changes):
    """The hybrid of ``build`` as a configuration (odebook.models.arms.HybridConfig)."""
    from odebook.models.arms import HybridConfig

    return HybridConfig(**SHAPE, ode_layers=(1,), solver="midpoint", steps=2, sensitivity="direct", rtol=1e-3,
                        atol=1e-4, control_dim=4, alpha_init=0.1).replace(**changes)


@pytest.mark.slow
def test_sensitivity_sweep_measures_memory_evaluations_and_gradient_error():
    x = torch.randint(0, 40, (2, 24), generator=torch.Generator().manual_seed(0))
    weights = build("direct", 2).state_dict()
    sweep = measure.sensitivity_sweep(config(), weights, (x, x.roll(-1, 1)), CPU,
                              sensitivities=["reversible", "adjoint", "direct"], steps=[2, 8],
                              repeats=1).set_index(["steps", "sensitivity"])
    for n in (2, 8):
        assert sweep.loc[(n, "direct"), "grad_rel_error"] == 0
        assert 0 < sweep.loc[(n, "adjoint"), "grad_rel_error"] < 1e-2
        assert 0 < sweep.loc[(n, "reversible"), "grad_rel_error"] < 1e-2
        assert (sweep.loc[n, "nfe_forward"] == 2 * n).all()  # midpoint: 2 evaluations per step
        assert sweep.loc[(n, "direct"), "nfe_backward"] == 0
        assert sweep.loc[(n, "reversible"), "nfe_backward"] == 2 * 2 * n  # one step back, one step forward
    memory = sweep.peak_memory_mb.unstack()
    assert memory.loc[8, "direct"] > 1.5 * memory.loc[2, "direct"]
    assert memory.loc[8, "adjoint"] < 1.2 * memory.loc[2, "adjoint"]
    assert memory.loc[8, "reversible"] < 1.2 * memory.loc[2, "reversible"]


def test_dopri5_evaluations_are_counted_and_generation_speed_compares_identical_tokens():
    seed_everything(0)
    adaptive = models.ode_hybrid(**SHAPE, ode_layers=[1], solver="dopri5")
    assert measure.nfe_per_forward(adaptive, torch.zeros(1, 8, dtype=torch.long), CPU) >= 6  # at least one dopri5 step
    result = measure.generation_speed(build("direct", 2), torch.zeros(1, 4, dtype=torch.long), 12)
    assert result["identical_tokens"] and result["new_tokens"] == 12
    assert result["speedup"] == pytest.approx(result["recomputed_s"] / result["cached_s"])


def test_loss_with_solver_re_solves_the_flow_and_restores_it():
    from odebook.data.corpus import fixed_batches
    from odebook.study.experiment import loss_with_solver
    from odebook.training.train import evaluate

    model = build("direct", 2)
    with torch.no_grad():
        for p in model.parameters():  # a flow far from the identity, so the integrators disagree
            p.add_(0.3 * torch.randn_like(p))
    batches = fixed_batches(torch.randint(0, 40, (500,), generator=torch.Generator().manual_seed(0)), 2, 2, 16)
    trained = evaluate(model, batches, CPU)
    assert loss_with_solver(model, "midpoint", 2, batches, CPU) == trained
    assert loss_with_solver(model, "euler", 1, batches, CPU) != trained
    block = model.blocks[1]
    assert (block.solver, block.steps) == ("midpoint", 2) and evaluate(model, batches, CPU) == trained


def test_loss_with_solver_refuses_a_solver_the_block_s_sensitivity_rules_out_and_leaves_the_model_as_it_was():
    from odebook.data.corpus import fixed_batches
    from odebook.study.experiment import loss_with_solver

    model = build("reversible", 2)
    batches = fixed_batches(torch.randint(0, 40, (500,), generator=torch.Generator().manual_seed(0)), 1, 2, 16)
    with pytest.raises(ValueError, match="adaptive"):
        loss_with_solver(model, "dopri5", 1, batches, CPU)
    assert (model.blocks[1].solver, model.blocks[1].steps) == ("midpoint", 2)


def test_crossover_interpolates_the_log_log_curve_where_it_first_passes_the_target():
    # speed-up ∝ length on a log–log line through (100, 5) and (400, 20): 10× at 200 tokens
    c = measure.crossover([100, 400, 1600], [5.0, 20.0, 80.0], 10.0)
    assert c.reached and not c.below and c.length == pytest.approx(200.0) and "from 200 tokens" in str(c)
    # the first upward passage counts, not a later one after a dip
    assert measure.crossover([64, 128, 256, 512], [4.0, 12.0, 8.0, 16.0], 10.0).length == pytest.approx(
        64 * 2 ** (math.log(10 / 4) / math.log(12 / 4)))
    # exactly at a measured length
    assert measure.crossover([64, 256], [2.0, 10.0], 10.0).length == pytest.approx(256.0)


def test_crossover_says_when_the_target_is_not_reached_or_already_passed():
    c = measure.crossover([64, 256, 1024], [2.0, 6.0, 9.9], 10.0)
    assert not c.reached and c.length is None and str(c) == "10× not reached up to 1024 tokens"
    first = measure.crossover([64, 256], [12.0, 30.0], 10.0)
    assert first.reached and first.below and first.length == 64 and "at or below 64" in str(first)
    with pytest.raises(ValueError):
        measure.crossover([256, 64], [2.0, 12.0], 10.0)
    with pytest.raises(ValueError):
        measure.crossover([64, 256], [2.0], 10.0)


def test_training_step_counts_evaluations_and_leaves_gradients():
    x = torch.randint(0, 40, (2, 16), generator=torch.Generator().manual_seed(0))
    model = build("direct", 3)
    assert measure.evaluated_step(model, (x, x.roll(-1, 1)), CPU)() == (6, 0)  # midpoint: 2 per step, none backward
    assert all(p.grad is not None for p in model.blocks[1].parameters())


def test_solver_timing_interleaves_two_integrators_and_divides_the_time_by_the_evaluations():
    x = torch.randint(0, 40, (2, 16), generator=torch.Generator().manual_seed(0))
    weights = build("direct", 2).state_dict()
    a, b = (config(solver=s, steps=n).hybrid() for s, n in (("rk4", 4), ("euler", 2)))
    for m in (a, b):
        m.load_state_dict(weights)
    t = measure.solver_timing(a, b, (x, x.roll(-1, 1)), CPU, reps=20, warmup=1)
    assert (t.nfe_a, t.nfe_b) == (16, 2) and t.nfe_ratio == 8
    assert t.timing.ratio.n == 20 and t.timing.ratio.mean > 1  # 8× the evaluations takes longer
    assert t.per_evaluation == pytest.approx(t.timing.ratio.mean / 8)
    assert "evaluations per step 16 / 2" in str(t) and "interleaved pairs" in str(t)


def _sweep(direct, adjoint, reversible, error=1e-7):
    """A synthetic sensitivity sweep at 4 and 32 steps: peak memory (MiB) of each sensitivity at the two points."""
    import pandas as pd

    rows = [{"steps": n, "sensitivity": s, "peak_memory_mb": mb[i], "grad_rel_error": 0.0 if s == "direct" else error}
            for i, n in enumerate((4, 32)) for s, mb in (("direct", direct), ("adjoint", adjoint),
                                                         ("reversible", reversible))]
    return pd.DataFrame(rows)


def test_memory_verdicts_hold_fail_and_are_not_testable_without_the_calibration():
    from odebook import studies
    measure = studies.load("05_ode_solvers").measure

    def outcomes(sweep, tolerance=1e-3):
        return [v.outcome for v in measure.memory_verdicts(sweep, growth_limit=1.2, grad_tolerance=tolerance)]

    assert outcomes(_sweep((1, 7), (1, 1), (1, 1))) == ["held", "held"]
    assert outcomes(_sweep((1, 7), (7, 7), (1, 2))) == ["not held", "not held"]  # no saving; reversible grows
    assert outcomes(_sweep((1, 7), (1, 1), (1, 1), error=0.1)) == ["held", "not held"]  # a wrong gradient
    # direct backpropagation does not grow: the measurement cannot see growth, so neither claim can be tested
    assert outcomes(_sweep((1, 1.1), (0.5, 0.5), (1, 1))) == ["not testable at this scale"] * 2
    only_direct = _sweep((1, 7), (1, 1), (1, 1))
    assert measure.memory_verdicts(only_direct[only_direct.sensitivity == "direct"], growth_limit=1.2,
                           grad_tolerance=1e-3) == []
