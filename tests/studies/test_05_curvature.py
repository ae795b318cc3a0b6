"""Study 05's work–precision reading across curvature (its curvature module)."""

import math

import pandas as pd
import pytest
import torch

from odebook import studies
from odebook.models import lm as models
from odebook.training.runtime import seed_everything

curvature = studies.load("05_ode_solvers").curvature


def hybrid(alpha: float = 0.5):
    seed_everything(0)
    return models.ode_hybrid(vocab_size=40, d_model=16, n_layer=3, n_head=2, max_seq_len=48, ode_layers=[1],
                             solver="rk4", steps=2, sensitivity="direct", alpha_init=alpha)


def test_work_precision_converges_at_each_order_grows_with_curvature_and_leaves_the_model_as_it_was():
    model = hybrid()
    batch = (torch.randint(0, 40, (2, 12)), torch.randint(0, 40, (2, 12)))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    tables = {c: curvature.work_precision(model, batch, curvature=c, steps={"midpoint": [4, 8], "rk4": [2, 4, 8]},
                                          tolerances=[1e-3, 1e-7], reference_steps=64) for c in (1.0, 4.0)}
    err = {(c, r.solver, r.steps): r.error for c, t in tables.items() for r in t.itertuples() if r.steps == r.steps}
    assert 3 < err[1.0, "midpoint", 4] / err[1.0, "midpoint", 8] < 5.5  # second order: halving the step → a quarter
    assert err[1.0, "rk4", 2] / err[1.0, "rk4", 4] > 8  # fourth order (16 in the limit)
    assert all(err[4.0, s, n] > err[1.0, s, n] for s, n in [("midpoint", 4), ("rk4", 2), ("rk4", 4)])  # more curved
    t = tables[1.0]
    assert list(t[t.solver == "rk4"].evaluations) == [8, 16, 32]
    # the loss follows the state: the coarse settings move it more than the fine ones
    change = t.set_index(["solver", "steps"]).loss_change.abs()
    assert change["midpoint", 4] > change["rk4", 8] and change["rk4", 8] < 1e-6
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    block = models.ode_blocks(model)[0]
    assert (block.solver, block.steps, model.head.weight.dtype) == ("rk4", 2, torch.float32)


def _table(solver_rows, loss_per_error=0.1):
    """A synthetic table: ``solver_rows`` = {solver: [(evaluations, error), …]}, loss change proportional to error."""
    return pd.DataFrame([{"curvature": 1.0, "solver": s, "steps": i + 1, "evaluations": n, "error": e,
                          "loss_change": loss_per_error * e} for s, rows in solver_rows.items()
                         for i, (n, e) in enumerate(rows)])


def test_evaluations_to_reach_interpolates_on_the_front_and_says_when_a_solver_never_gets_there():
    t = _table({"rk4": [(4, 1e-2), (8, 1e-4), (16, 1e-6)], "dopri5": [(14, 1e-3), (20, 1e-2), (26, 1e-6)]})
    assert curvature.evaluations_to_reach(t, "rk4", 1e-2) == 4
    assert curvature.evaluations_to_reach(t, "rk4", 1e-1) == 4  # looser than the cheapest: the cheapest suffices
    assert curvature.evaluations_to_reach(t, "rk4", 1e-3) == pytest.approx(math.sqrt(4 * 8))  # log–log midway
    assert curvature.evaluations_to_reach(t, "rk4", 1e-7) == math.inf
    # dopri5's (20, 1e-2) is dominated by (14, 1e-3): the front runs 14 → 26
    assert curvature.evaluations_to_reach(t, "dopri5", 1e-4) == pytest.approx(14 * (26 / 14) ** (1 / 3))
    assert math.isnan(curvature.evaluations_to_reach(t, "euler", 1e-3))


def test_loss_relevant_error_and_the_crossover():
    t = _table({"rk4": [(4, 1e-2), (8, 1e-4), (32, 1e-6)], "dopri5": [(14, 1e-2), (17, 1e-5), (18, 1e-8)]})
    e, slope = curvature.loss_relevant_error(t, 1e-3)  # loss change = 0.1 × error
    assert e == pytest.approx(1e-2) and slope == pytest.approx(1.0)
    # rk4 is cheaper down to 1e-5 (16 against 17 there: no tie on the grid, which rounding would decide); dopri5's
    # flatter line passes below rk4's just under it (≈ 8e-6)
    cross = curvature.crossover(t, 1e-2, 1e-6)
    assert 1e-6 < cross < 1e-5
    assert curvature.evaluations_to_reach(t, "dopri5", cross) < curvature.evaluations_to_reach(t, "rk4", cross)
    assert math.isnan(curvature.crossover(t, 1e-2, 3e-5))
    assert math.isnan(curvature.crossover(t, 1e-2, 2e-2))  # nothing of the range resolved


def _read(rk4, dopri5, midpoint=None, *, e_loss=1e-3, felt=(True, True)):
    """A reading of two flows at two curvatures: evaluations per curvature as given (the same on both flows)."""
    rows = []
    for flow in ("seed 0", "seed 1"):
        for c, (r, d) in enumerate(zip(rk4, dopri5), start=1):
            rows.append({"flow": flow, "curvature": float(c), "loss-relevant error": e_loss, "slope": 1.0,
                         "resolved": 1e-8, "rk4 evaluations": r, "dopri5 evaluations": d,
                         "midpoint evaluations": (midpoint or [99, 99])[c - 1], "crossover error": math.nan,
                         "cheapest rk4 error": 1e-2 if felt[c - 1] else 1e-4, "cheapest midpoint error": 1e-1,
                         "cheapest dopri5 error": 1e-4})
    return pd.DataFrame(rows)


def test_verdicts_hold_fail_and_read_only_the_curvatures_that_can_test_them():
    def outcomes(read):
        return [v.outcome for v in curvature.verdicts(read, loss_tolerance=1e-3)]

    assert outcomes(_read([8, 12], [14, 20])) == ["held", "held", "not held"]
    assert outcomes(_read([8, 30], [14, 20])) == ["held", "not held", "not held"]
    # a control that can hold: midpoint cheaper than dopri5 at both curvatures
    assert outcomes(_read([8, 12], [14, 20], [10, 16]))[2] == "held"
    split = _read([8, 12], [14, 20])
    split.loc[(split.flow == "seed 1") & (split.curvature == 2.0), "rk4 evaluations"] = 25
    assert outcomes(split)[1] == "inconclusive"
    # at ×1 the loss does not feel rk4's cheapest setting: rk4 would win at its minimum, so only ×2 is read
    partly = _read([8, 30], [14, 20], felt=(False, True))
    assert outcomes(partly) == ["held", "not held", "not held"]
    gate, rk4, _ = curvature.verdicts(partly, loss_tolerance=1e-3)
    assert "×1 (loss-relevant error 0.001): not tested — the loss does not feel rk4's cheapest" in gate.evidence
    assert "×2 (loss-relevant error 0.001): rk4 30, dopri5 20 evaluations" in rk4.evidence
    assert outcomes(_read([8, 12], [14, 20], felt=(False, False))) == ["not held"] + ["not testable at this scale"] * 2
    # the reference cannot resolve the error the loss feels
    assert outcomes(_read([8, 12], [14, 20], e_loss=1e-8)) == ["not held"] + ["not testable at this scale"] * 2
