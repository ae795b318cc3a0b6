"""ODE solvers for a flow block trained in a language model: study 05's tables and its step-time claim.

Each integrator trains its own hybrid at the same budget of field evaluations (``nfe_budget``; dopri5 chooses its
own). ``integrators_table`` puts each arm's evaluations per forward beside ``experiment.summarize``; ``resolved``
re-solves each seed's trained weights of one integrator with every integrator at the budget and with rk4 at 4× it (the
reference): the gap in held-out loss is the flow's curvature in nats. ``work_precision_tables`` runs
``curvature.work_precision`` on each trained flow at every curvature; ``timed_pair`` times rk4 against dopri5
training steps on the same trained weights (``measure.solver_timing``), and ``step_time_verdict`` reads the ratio
beside the evaluation counts; ``memory_growth`` reads a sensitivity sweep's peak memory from its fewest to its most
steps.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import pandas as pd
import torch

from odebook.models.lm import ode_blocks
from odebook.study.experiment import Run, loss_with_solver, summarize
from . import curvature
from .measure import SolverTiming, nfe_per_forward, solver_timing
from odebook.study.stats import Verdict
from odebook.training.runtime import Precision

__all__ = ["integrators_table", "resolved", "work_precision_tables", "timed_pair", "step_time_verdict",
           "memory_growth"]


def integrators_table(runs: Sequence[Run], steps: Mapping[str, int | None], x: torch.Tensor,
                      precision: Precision) -> pd.DataFrame:
    """``summarize`` with each arm's steps at the budget and its field evaluations per forward on ``x`` (mean over
    its seeds; none for the baseline)."""
    table = summarize(runs)
    table.insert(1, "steps", [steps.get(m) for m in table.index])
    table.insert(2, "nfe_per_forward", [None if m == "baseline" else
                                        sum(nfe_per_forward(r.module, x, precision) for r in runs if r.model == m)
                                        / sum(r.model == m for r in runs) for m in table.index])
    return table


def resolved(runs: Sequence[Run], solver: str, steps: Mapping[str, int | None], batches: Sequence,
             precision: Precision, *, reference_steps: int) -> pd.DataFrame:
    """Per seed of ``solver``'s trained hybrids: its learned α, each integrator's held-out loss at its ``steps``
    minus the reference's (rk4 at ``reference_steps``), and the reference."""
    rows = []
    for run in sorted((r for r in runs if r.model == solver), key=lambda r: r.seed):
        ref = loss_with_solver(run.module, "rk4", reference_steps, batches, precision)
        rows.append({"seed": run.seed, "alpha": ode_blocks(run.module)[0].field.alpha.item(),
                     **{f"{s} − reference": loss_with_solver(run.module, s, n or 1, batches, precision) - ref
                        for s, n in steps.items()}, "reference": ref})
    return pd.DataFrame(rows).set_index("seed")


def work_precision_tables(runs: Sequence[Run], solver: str, batch: tuple, *, curvatures: Sequence[float],
                          steps: Sequence[int], tolerances: Sequence[float]) -> dict[str, pd.DataFrame]:
    """``curvature.work_precision`` of each seed's ``solver``-trained hybrid ("rk4-trained, seed 0") at every one of
    ``curvatures``, on ``batch``: midpoint and rk4 at ``steps``, dopri5 at ``tolerances``, against rk4 at 4× the most
    steps."""
    fixed = {s: steps for s in ("midpoint", "rk4")}
    return {f"{r.model}-trained, seed {r.seed}": pd.concat(
                [curvature.work_precision(r.module, batch, curvature=c, steps=fixed, tolerances=tolerances,
                                          reference_steps=4 * max(steps)) for c in curvatures], ignore_index=True)
            for r in sorted(runs, key=lambda r: r.seed) if r.model == solver}


def timed_pair(config, weights: Mapping[str, torch.Tensor], steps: Mapping[str, int | None], batch: tuple,
               precision: Precision, *, reps: int) -> SolverTiming:
    """rk4 against dopri5 training steps on the same trained ``weights`` (``config``'s hybrid with each solver at its
    budget steps), timed interleaved."""
    pair = {s: config.replace(solver=s, steps=steps[s] or 1).hybrid() for s in ("rk4", "dopri5")}
    for model in pair.values():
        model.load_state_dict(weights)
    return solver_timing(pair["rk4"], pair["dopri5"], batch, precision, reps=reps)


def step_time_verdict(timing: SolverTiming, table: pd.DataFrame, scale: str) -> Verdict:
    """RK4 trains faster than dopri5 (time per step), the evaluations per forward on held-out data beside it."""
    rk4, dopri5 = (table.loc[m, "nfe_per_forward"] if m in table.index else float("nan") for m in ("rk4", "dopri5"))
    return dataclasses.replace(
        timing.timing.verdict("RK4 trains faster than dopri5 (time per step)", threshold=1.0, side="below",
                              scale=scale),
        evidence=f"rk4 / dopri5: {timing}; per forward on held-out data rk4 {rk4:.0f}, dopri5 {dopri5:.0f} "
                 "evaluations — the time ratio is the evaluation ratio unless the time per evaluation differs from 1")


def memory_growth(sweep: pd.DataFrame, sensitivities: Sequence[str], steps: Sequence[int]) -> dict[str, float]:
    """Each sensitivity's peak memory at the most steps of the sweep over that at the fewest."""
    def at(sensitivity, n):
        return sweep[(sweep.sensitivity == sensitivity) & (sweep.steps == n)]["peak_memory_mb"].item()

    return {m: at(m, max(steps)) / at(m, min(steps)) for m in sensitivities}
