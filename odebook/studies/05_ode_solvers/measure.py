"""Study 05's measurements of ODE-block variants: peak memory and time of a training step, gradient error against direct
backpropagation, function evaluations, two integrators' training steps timed interleaved (with the time per
evaluation beside the time), the speed of cached against recomputed generation, and the generated length at which
that speed-up passes a target (the crossover, interpolated on the log–log curve). The work–precision tables are
the curvature module's.

Peak memory is odebook.study.measure's.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import pandas as pd
import torch
from torch import nn

from odebook.models.arms import HybridConfig
from odebook.models.lm import LM, generate, lm_loss
from odebook.nn.ode import count_evaluations
from odebook.study.measure import peak_memory
from odebook.study.stats import Verdict
from odebook.study.timing import MIN_REPS, Timing, interleaved
from odebook.training.runtime import Precision, synchronize

__all__ = ["gradient", "relative_error", "nfe_per_forward", "evaluated_step", "sensitivity_sweep",
           "memory_verdicts", "SolverTiming", "solver_timing", "generation_speed", "Crossover", "crossover"]


def gradient(model: nn.Module) -> torch.Tensor:
    """Every parameter's gradient, flattened into one vector (zeros where there is none)."""
    return torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).flatten().double()
                      for p in model.parameters()])


def relative_error(a: torch.Tensor, reference: torch.Tensor) -> float:
    """‖a − reference‖ / ‖reference‖."""
    return ((a - reference).norm() / reference.norm()).item()


@torch.no_grad()
def nfe_per_forward(model: nn.Module, x: torch.Tensor, precision: Precision) -> int:
    """Vector-field evaluations of one forward pass of ``model`` on ``x`` (what dopri5 chose for this input)."""
    was_training = model.training
    model.eval()
    with count_evaluations(model) as evaluations, precision.autocast():
        model(x)
    model.train(was_training)
    return evaluations.count


def evaluated_step(model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor],
                   precision: Precision) -> Callable[[], tuple[int, int]]:
    """One training step of ``model`` on ``batch`` (forward, loss, backward; no optimizer step), as a function that
    returns the vector-field evaluations of its forward and of its backward pass."""
    x, y = (t.to(precision.device) for t in batch)

    def step() -> tuple[int, int]:
        model.zero_grad(set_to_none=True)
        with count_evaluations(model) as evaluations:
            with precision.autocast():
                loss = lm_loss(model, (x, y))
            forward = evaluations.count
            loss.backward()
        return forward, evaluations.count - forward

    return step


def sensitivity_sweep(config: HybridConfig, weights: Mapping[str, torch.Tensor],
                      batch: tuple[torch.Tensor, torch.Tensor], precision: Precision, *, sensitivities: Sequence[str],
                      steps: Sequence[int], repeats: int = 3) -> pd.DataFrame:
    """For every number of steps and every sensitivity: peak memory of one training step (forward + backward) of
    ``config``'s hybrid with ``weights``, its median time over ``repeats`` (after one warm-up), the vector-field
    evaluations of its forward and backward passes, and the relative error of its gradient against the "direct"
    sensitivity's at the same number of steps. Each model is ``config.replace(steps=…, sensitivity=…)``, so the
    rule that validates a configuration validates every point of the sweep."""
    rows = []
    for n in steps:
        reference = None
        for sensitivity in sorted(sensitivities, key=lambda s: s != "direct"):  # direct first: it is the reference
            model = config.replace(steps=n, sensitivity=sensitivity).hybrid()
            model.load_state_dict(weights)
            model.to(precision.device).train()
            step = evaluated_step(model, batch, precision)
            nfe_forward, nfe_backward = step()  # also the warm-up
            grad = gradient(model)
            reference = grad if sensitivity == "direct" else reference
            times = []
            for _ in range(repeats):
                synchronize(precision.device)
                t0 = time.perf_counter()
                step()
                synchronize(precision.device)
                times.append(time.perf_counter() - t0)
            rows.append({"steps": n, "sensitivity": sensitivity,
                         "peak_memory_mb": peak_memory(step, precision.device) / 2**20,
                         "ms_per_step": 1000 * statistics.median(times), "nfe_forward": nfe_forward,
                         "nfe_backward": nfe_backward,
                         "grad_rel_error": relative_error(grad, reference) if reference is not None else float("nan")})
    return pd.DataFrame(rows)


def generation_speed(model: LM, prompt: torch.Tensor, n_new: int) -> dict:
    """Greedy generation of ``n_new`` tokens after ``prompt`` [B, T], with the KV cache and by recomputation:
    seconds of each (after a warm-up of a few tokens), the speed-up, and whether the tokens are identical."""
    out, seconds = {}, {}
    for cache in (True, False):
        generate(model, prompt, 4, temperature=0, cache=cache)  # warm-up: first-call allocations and caches
        synchronize(prompt.device)
        t0 = time.perf_counter()
        out[cache] = generate(model, prompt, n_new, temperature=0, cache=cache)
        synchronize(prompt.device)
        seconds[cache] = time.perf_counter() - t0
    return {"new_tokens": n_new, "cached_s": seconds[True], "recomputed_s": seconds[False],
            "speedup": seconds[False] / seconds[True], "identical_tokens": bool(torch.equal(out[True], out[False]))}


def memory_verdicts(sweep: pd.DataFrame, *, growth_limit: float, grad_tolerance: float, scale: str = ""
                    ) -> list[Verdict]:
    """The memory claims, read from a ``sensitivity_sweep`` between its fewest and most steps: "adjoint reduces
    memory" (adjoint / direct peak memory at the most steps below 1 / ``growth_limit``) and "reversible mode is O(1)
    memory" (its peak memory grows at most ``growth_limit``× and its gradient lies within ``grad_tolerance`` of
    direct backpropagation's at every point). Both rest on a calibration: direct backpropagation's memory must grow
    by more than ``growth_limit``×, else the measurement cannot see memory grow and both read "not testable at this
    scale". A claim whose sensitivity the sweep lacks is left out."""
    first, last = sweep.steps.min(), sweep.steps.max()

    def at(sensitivity: str, n: int, column: str) -> float:
        return sweep[(sweep.sensitivity == sensitivity) & (sweep.steps == n)][column].item()

    present = set(sweep.sensitivity)
    growth = {m: at(m, last, "peak_memory_mb") / at(m, first, "peak_memory_mb") for m in present}
    calibrated = growth["direct"] > growth_limit
    calibration = (f"direct backpropagation grows {growth['direct']:.2f}× from {first} to {last} steps (it must grow "
                   f"more than {growth_limit:g}× for the measurement to see growth)")
    kind, role = "single measurement against a threshold", "gated on the memory calibration"
    out = []
    if "adjoint" in present:
        ratio = at("adjoint", last, "peak_memory_mb") / at("direct", last, "peak_memory_mb")
        held = ratio < 1 / growth_limit
        out.append(Verdict("adjoint reduces memory", "not testable at this scale" if not calibrated
                           else "held" if held else "not held",
                           f"at {last} steps adjoint / direct peak memory = {ratio:.3f} (held below "
                           f"1/{growth_limit:g}); adjoint grows {growth['adjoint']:.2f}×; {calibration}",
                           scale, kind, role))
    if "reversible" in present:
        error = max(at("reversible", n, "grad_rel_error") for n in sorted(set(sweep.steps)))
        held = growth["reversible"] <= growth_limit and error <= grad_tolerance
        out.append(Verdict("reversible mode is O(1) memory", "not testable at this scale" if not calibrated
                           else "held" if held else "not held",
                           f"peak memory grows {growth['reversible']:.2f}× from {first} to {last} steps (limit "
                           f"{growth_limit:g}×); gradient error vs direct at most {error:.2g} (limit "
                           f"{grad_tolerance:g}); {calibration}", scale, kind, role))
    return out


@dataclass(frozen=True)
class SolverTiming:
    """Two models' training steps timed interleaved (``timing``: a / b), with each one's vector-field evaluations
    per step (forward + backward): the time ratio beside the evaluation ratio, and the ratio of time per evaluation
    (the time ratio over the evaluation ratio; near 1 when the evaluations are the cost)."""

    timing: Timing
    nfe_a: int
    nfe_b: int

    @property
    def nfe_ratio(self) -> float:
        return self.nfe_a / self.nfe_b

    @property
    def per_evaluation(self) -> float:
        return self.timing.ratio.mean / self.nfe_ratio

    def __str__(self) -> str:
        return (f"{self.timing}; evaluations per step {self.nfe_a} / {self.nfe_b} = {self.nfe_ratio:.3g}, so time "
                f"per evaluation a / b = {self.per_evaluation:.3g}")


def solver_timing(a: nn.Module, b: nn.Module, batch: tuple[torch.Tensor, torch.Tensor], precision: Precision, *,
                  reps: int = MIN_REPS, warmup: int = 3) -> SolverTiming:
    """A training step of ``a`` against one of ``b`` on the same ``batch``, interleaved (study.timing.interleaved),
    with the evaluations each step makes (counted on a first, untimed step)."""
    step_a, step_b = (evaluated_step(m.to(precision.device).train(), batch, precision) for m in (a, b))
    nfe_a, nfe_b = sum(step_a()), sum(step_b())
    timing = interleaved(step_a, step_b, reps=reps, warmup=warmup, sync=lambda: synchronize(precision.device))
    return SolverTiming(timing, nfe_a, nfe_b)


@dataclass(frozen=True)
class Crossover:
    """Where a speed-up curve first reaches ``target``: ``length`` interpolated on the log–log curve between the two
    measured lengths around it (the first length itself when the curve starts at or above the target, ``below``),
    or None when it is not reached up to ``longest``."""

    length: float | None
    target: float
    longest: int
    below: bool = False

    @property
    def reached(self) -> bool:
        return self.length is not None

    def __str__(self) -> str:
        if not self.reached:
            return f"{self.target:g}× not reached up to {self.longest} tokens"
        return f"{self.target:g}× {'at or below' if self.below else 'from'} {self.length:.0f} tokens"


def crossover(lengths: Sequence[int], speedups: Sequence[float], target: float) -> Crossover:
    """The generated length at which ``speedups`` (measured at increasing ``lengths``) first pass ``target``:
    linear interpolation of log speed-up against log length between the last length below the target and the
    first at or above it."""
    if len(lengths) != len(speedups) or not lengths:
        raise ValueError(f"need one speed-up per length, got {len(lengths)} lengths and {len(speedups)} speed-ups")
    if list(lengths) != sorted(set(lengths)) or min(lengths) <= 0 or min(speedups) <= 0 or target <= 0:
        raise ValueError(f"lengths must increase and lengths, speed-ups and target be positive, got {list(lengths)}, "
                         f"{list(speedups)}, {target}")
    longest = max(lengths)
    if speedups[0] >= target:
        return Crossover(float(lengths[0]), target, longest, below=True)
    for (n0, s0), (n1, s1) in zip(zip(lengths, speedups), zip(lengths[1:], speedups[1:])):
        if s0 < target <= s1:
            f = (math.log(target) - math.log(s0)) / (math.log(s1) - math.log(s0))
            return Crossover(math.exp(math.log(n0) + f * (math.log(n1) - math.log(n0))), target, longest)
    return Crossover(None, target, longest)
