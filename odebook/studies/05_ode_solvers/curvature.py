"""Study 05's work–precision reading across curvature: how many vector-field evaluations each integrator needs to
reach an accuracy, on trained flows made more curved by scaling their output gain α, and which accuracy the held-out
loss can feel.

A trained flow dH/dt = α·F(H, t) re-solved with α × c (c ≥ 1, ``curvature``) moves the state further and bends more:
a family of flows of growing curvature that needs no training. For each c and each setting (a fixed-grid integrator
at a number of steps, dopri5 at a tolerance), one float64 forward of the whole model gives the flow's end state H(1)
and the loss; the setting's error is ‖H(1) − H_ref(1)‖ / ‖H_ref(1) − H(0)‖ against rk4 at ``reference_steps`` (the
share of the flow's displacement it gets wrong), and its loss change is its loss minus the reference's.

Three readings of one table (``reading``):
- the **loss-relevant error**: the error at which the loss moves by ``loss_tolerance`` nats, from a least-squares line
  through log |loss change| against log error (the slope is shown: 1 where the loss is smooth in H(1));
- each integrator's **evaluations to reach** an error, interpolated on the log–log line between the two settings
  around it on its Pareto front (an error looser than its cheapest setting costs that setting; one tighter than its
  finest, infinity);
- the **crossover**: the loosest error, on a grid of ``CROSSOVER_POINTS`` per decade, at which dopri5 needs fewer
  evaluations than rk4.

The finest rk4 setting tried (4× coarser than the reference, so about 4⁴ times less accurate) bounds the errors the
table can place: ``resolved``.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import torch
from torch import nn

from odebook.models.lm import lm_loss, ode_blocks
from odebook.nn.ode import count_evaluations
from odebook.study.stats import Verdict

__all__ = ["work_precision", "evaluations_to_reach", "loss_relevant_error", "crossover", "reading", "counted",
           "verdicts", "CROSSOVER_POINTS"]

CROSSOVER_POINTS = 8  # errors per decade at which the crossover is looked for


@torch.no_grad()
def work_precision(model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor], *, curvature: float,
                   steps: Mapping[str, Sequence[int]], tolerances: Sequence[float], reference_steps: int
                   ) -> pd.DataFrame:
    """One trained model's table at ``curvature`` (its first flow's α × curvature), on ``batch`` (inputs, targets):
    per setting — each fixed-grid solver at each of its ``steps``, dopri5 at each of ``tolerances`` (rtol = tol,
    atol = tol / 10) — its evaluations, the relative error of H(1) and the loss change against rk4 at
    ``reference_steps``. Works on a float64 copy; ``model`` is left as it was."""
    exact = copy.deepcopy(model).double().eval()
    block = ode_blocks(exact)[0]
    block.field.alpha.mul_(curvature)
    x, y = (t.to(block.field.alpha.device) for t in batch)
    seen = {}
    hooks = [block.register_forward_pre_hook(lambda m, args: seen.__setitem__("h0", args[0])),
             block.register_forward_hook(lambda m, args, out: seen.__setitem__("h1", out))]

    def solve(solver: str, n: int, tol: float | None) -> tuple[torch.Tensor, float, int]:
        block.set_solver(solver, n)
        if tol is not None:
            block.rtol, block.atol = tol, tol / 10
        with count_evaluations(block) as evaluations:
            loss = lm_loss(exact, (x, y)).item()
        return seen["h1"], loss, evaluations.count

    try:
        ref, ref_loss, _ = solve("rk4", reference_steps, None)
        scale = (ref - seen["h0"]).norm()
        settings = [(s, n, None) for s, ns in steps.items() for n in ns] + [("dopri5", 1, t) for t in tolerances]
        rows = []
        for solver, n, tol in settings:
            out, loss, nfe = solve(solver, n, tol)
            rows.append({"curvature": curvature, "solver": solver, "steps": n if tol is None else None,
                         "tolerance": tol, "evaluations": nfe, "error": ((out - ref).norm() / scale).item(),
                         "loss_change": loss - ref_loss})
    finally:
        for h in hooks:
            h.remove()
    return pd.DataFrame(rows)


def _front(table: pd.DataFrame, solver: str) -> tuple[np.ndarray, np.ndarray]:
    """``solver``'s Pareto front: its settings by evaluations, each kept only when more accurate than every cheaper
    one (dopri5's error is not monotone in its tolerance)."""
    rows = table[table.solver == solver].sort_values(["evaluations", "error"])
    nfe, err = rows.evaluations.to_numpy(float), rows.error.to_numpy(float)
    keep = err < np.minimum.accumulate(np.r_[np.inf, err[:-1]])
    return nfe[keep], err[keep]


def evaluations_to_reach(table: pd.DataFrame, solver: str, error: float) -> float:
    """The evaluations ``solver`` needs for a relative error of ``error`` (module docstring): its cheapest setting's
    when that is accurate enough, log–log interpolated between the two settings of its front around ``error``,
    infinity when its finest setting misses it, NaN when the table has none of its settings."""
    nfe, err = _front(table, solver)
    if not len(nfe):
        return math.nan
    if error >= err[0]:
        return float(nfe[0])
    reached = np.flatnonzero(err <= error)
    if not len(reached):
        return math.inf
    i = int(reached[0])
    f = (math.log(error) - math.log(err[i - 1])) / (math.log(err[i]) - math.log(err[i - 1]))
    return float(math.exp(math.log(nfe[i - 1]) + f * (math.log(nfe[i]) - math.log(nfe[i - 1]))))


def loss_relevant_error(table: pd.DataFrame, tolerance: float) -> tuple[float, float]:
    """(The error at which the loss moves by ``tolerance`` nats, the slope of log |loss change| on log error), from a
    least-squares line through every setting whose loss change is above float64's noise (1e-12) and whose error is
    at most 1; (NaN, NaN) with fewer than three such settings."""
    rows = table[(table.loss_change.abs() > 1e-12) & (table.error > 0) & (table.error <= 1)]
    if len(rows) < 3:
        return math.nan, math.nan
    slope, intercept = np.polyfit(np.log(rows.error), np.log(rows.loss_change.abs()), 1)
    return float(math.exp((math.log(tolerance) - intercept) / slope)), float(slope)


def crossover(table: pd.DataFrame, loosest: float, tightest: float) -> float:
    """The loosest error between ``loosest`` and ``tightest`` (on a grid of CROSSOVER_POINTS a decade) at which
    dopri5 needs fewer evaluations than rk4; NaN when rk4 needs no more than dopri5 over the whole range, or when
    the range is empty (``tightest`` not below ``loosest``: the table resolves none of it)."""
    if not tightest < loosest:
        return math.nan
    decades = math.log10(loosest / tightest)
    for e in np.logspace(math.log10(loosest), math.log10(tightest), round(decades * CROSSOVER_POINTS) + 1):
        if evaluations_to_reach(table, "dopri5", e) < evaluations_to_reach(table, "rk4", e):
            return float(e)
    return math.nan


def reading(tables: Mapping[str, pd.DataFrame], *, loss_tolerance: float, error_range: Sequence[float],
            compared: Sequence[str] = ("rk4", "midpoint", "dopri5")) -> pd.DataFrame:
    """Per flow and curvature (``tables``: flow name → its ``work_precision`` rows at every curvature): the
    loss-relevant error and its slope, the smallest error the table resolves, the evaluations each of ``compared``
    needs at the loss-relevant error, and the crossover over ``error_range`` (loosest, tightest) down to the resolved
    error."""
    rows = []
    for flow, table in tables.items():
        for c, t in table.groupby("curvature"):
            e_loss, slope = loss_relevant_error(t, loss_tolerance)
            finest = t[t.solver == "rk4"].sort_values("steps").error.iloc[-1]
            rows.append({"flow": flow, "curvature": c, "loss-relevant error": e_loss, "slope": slope,
                         "resolved": finest,
                         **{f"{s} evaluations": evaluations_to_reach(t, s, e_loss) for s in compared},
                         "crossover error": crossover(t, max(error_range), max(min(error_range), finest)),
                         **{f"cheapest {s} error": _front(t, s)[1][0] for s in compared}})
    return pd.DataFrame(rows)


def counted(read: pd.DataFrame, solver: str) -> pd.Series:
    """Per row of a ``reading``, why its flow and curvature cannot test "``solver`` needs fewer evaluations than
    dopri5", or '' when it can: the reference must resolve the loss-relevant error (the finest rk4 setting, 4×
    coarser than the reference, at least ten times finer), and the loss must feel ``solver``'s cheapest setting —
    else ``solver`` is charged its minimum (4 evaluations for rk4, 2 for midpoint), below dopri5's (14), and wins
    by construction."""
    e = read["loss-relevant error"]
    return pd.Series(np.where(~(read["resolved"] * 10 <= e), "the reference does not resolve it",
                              np.where(e < read[f"cheapest {solver} error"], "",
                                       f"the loss does not feel {solver}'s cheapest setting")), index=read.index)


def verdicts(read: pd.DataFrame, *, loss_tolerance: float, scale: str = "") -> list[Verdict]:
    """The claim "at the accuracy the loss can feel, RK4 needs fewer evaluations than dopri5", over the curvatures
    that can test it (``counted`` on every flow), its negative control (the same for midpoint, second order, on the
    same grid) and the gate they rest on: at least one curvature can test the claim. At a curvature an integrator
    wins when it needs fewer evaluations than dopri5 on every flow, loses when on none. Held when it wins at every
    tested curvature; not held when it loses at one; else inconclusive."""
    curvatures = list(read.groupby("curvature"))
    why = {s: counted(read, s) for s in ("rk4", "midpoint")}
    tested = {s: [c for c, g in curvatures if (why[s][g.index] == "").all()] for s in why}

    def at(c: float, g: pd.DataFrame, solver: str) -> str:
        head = f"×{c:g} (loss-relevant error {g['loss-relevant error'].median():.2g})"
        if c not in tested[solver]:
            return f"{head}: not tested — {'; '.join(sorted(set(why[solver][g.index]) - {''}))}"
        return (f"{head}: {solver} {g[f'{solver} evaluations'].median():.3g}, dopri5 "
                f"{g['dopri5 evaluations'].median():.3g} evaluations")

    kind = (f"evaluations to reach the error of H(1) at which the held-out loss moves by {loss_tolerance:g} nats, "
            "read off the work–precision tables (median over flows shown; the test is on every flow)")
    out = [Verdict("gate: the loss feels rk4's cheapest setting at a curvature the reference resolves",
                   "held" if tested["rk4"] else "not held", "; ".join(at(c, g, "rk4") for c, g in curvatures),
                   scale, "gate: single measurement per flow", "gate")]
    for solver, claim in (("rk4", "at the accuracy the loss can feel, RK4 needs fewer evaluations than dopri5"),
                          ("midpoint", "negative control: at the accuracy the loss can feel, midpoint (second order) "
                                       "needs fewer evaluations than dopri5")):
        wins = {c: (g[f"{solver} evaluations"] < g["dopri5 evaluations"]) for c, g in curvatures
                if c in tested[solver]}
        outcome = ("not testable at this scale" if not wins or not tested["rk4"]
                   else "held" if all(w.all() for w in wins.values())
                   else "not held" if any(not w.any() for w in wins.values()) else "inconclusive")
        role = "primary, every trained flow at every tested curvature" if solver == "rk4" else "negative control"
        out.append(Verdict(claim, outcome, "; ".join(at(c, g, solver) for c, g in curvatures), scale, kind, role))
    return out
