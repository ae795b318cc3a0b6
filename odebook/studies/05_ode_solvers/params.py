"""Study 05's parameters: the ODE hybrid's (odebook.params.ode) with the integrators, the memory sweep, KV caching and
sampling."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, ClassVar

from odebook.nn.ode import FIXED_GRID, SENSITIVITIES, SOLVERS, STAGES
from odebook.params.ode import ODEHybridParams
from odebook.params.schema import spec

__all__ = ["ODESolverParams"]


@dataclasses.dataclass
class ODESolverParams(ODEHybridParams):
    """Study 05: what adjoint sensitivities, integrator choice, reversibility and KV caching buy in memory, speed
    and accuracy, on the study-01 hybrid (a GPT with consecutive layers replaced by one ODE flow block).

    Defaults are the t4 profile: study 01's model with a context long enough for 1024 generated tokens."""

    defaults: ClassVar[Mapping[str, Any]] = {"n_seeds": 3, "seq_len": 128, "max_seq_len": 1088}
    groups: ClassVar = {
        "integration": ("integrators", "nfe_budget", "timing_pairs"),
        "work_precision": ("curvatures", "wp_steps", "wp_tolerances", "loss_tolerance", "error_range"),
        "memory": ("sweep_solver", "sweep_steps", "sensitivities", "timing_repeats", "memory_growth_limit",
                   "reversible_grad_tolerance"),
        "kv_cache": ("generation_solver", "generation_lengths", "crossover_limit", "prompt_tokens", "speedup_target"),
        "sampling": ("n_samples", "sample_tokens", "temperature", "top_k")}

    integrators: list[str] = spec(["rk4", "dopri5"], choices=SOLVERS,
                                  help="the trained hybrids (every integrator re-solves the trained weights)")
    nfe_budget: int = spec(8, ge=4, help="vector-field evaluations per forward of every fixed-grid integrator: "
                                         "euler takes nfe_budget steps, midpoint nfe_budget/2, rk4 nfe_budget/4")
    curvatures: list[float] = spec([1.0, 3.0, 10.0, 30.0, 100.0, 300.0], ge=1.0,
                                   help="each trained flow re-solved with its α times each of these (1 first: the "
                                        "flow as trained): flows of growing curvature for the work–precision claim")
    wp_steps: list[int] = spec([1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64], ge=1,
                               help="steps of midpoint and rk4 in the work–precision tables (increasing; the "
                                    "reference is rk4 at 4× the last)")
    wp_tolerances: list[float] = spec([1e-1, 3e-2, 1e-2, 3e-3, 1e-3, 3e-4, 1e-4, 3e-5, 1e-5, 3e-6, 1e-6, 1e-7, 1e-8],
                                      gt=0.0, le=1.0, help="dopri5's tolerances in the work–precision tables (rtol; "
                                                           "atol a tenth)")
    loss_tolerance: float = spec(1e-3, gt=0.0, help="nats: the work–precision claim compares the evaluations each "
                                                    "integrator needs for the error of H(1) that moves the held-out "
                                                    "loss by this much")
    error_range: list[float] = spec([1e-2, 1e-6], gt=0.0, le=1.0, min_len=2,
                                    help="loosest and tightest relative error of H(1) over which the crossover (where "
                                         "dopri5 overtakes rk4) is looked for")
    timing_pairs: int = spec(20, ge=20, help="interleaved rk4 / dopri5 training-step pairs of the speed claim")
    sweep_solver: str = spec("rk4", choices=FIXED_GRID, help="integrator of the sensitivity sweep")
    sweep_steps: list[int] = spec([4, 8, 16, 32], ge=1, help="numbers of steps of the sensitivity sweep")
    sensitivities: list[str] = spec(list(SENSITIVITIES), choices=SENSITIVITIES)
    timing_repeats: int = spec(3, ge=1, help="timed training steps per sweep point (after one warm-up)")
    memory_growth_limit: float = spec(1.2, gt=1.0, help="peak-memory growth over the sweep that counts as O(1); "
                                                        "direct backpropagation must grow more (the gate)")
    reversible_grad_tolerance: float = spec(1e-3, gt=0.0, help="the reversible mode's gradient must lie this close "
                                                               "to direct backpropagation's (relative error)")
    generation_solver: str = spec("rk4", choices=FIXED_GRID, help="the hybrid that generates text")
    generation_lengths: list[int] = spec([64, 128, 256, 512, 1024], ge=1,
                                         help="new tokens of the KV-cache speed curve (increasing)")
    crossover_limit: int = spec(1024, ge=1, help="the KV-cache claim holds when every model's speed-up passes "
                                                 "speedup_target by this many generated tokens")
    prompt_tokens: int = spec(32, ge=1, help="held-out prompt length for generation")
    speedup_target: float = spec(10.0, gt=1.0, help="the source's lower bound for the KV-cache speed-up")
    n_samples: int = spec(2, ge=0)
    sample_tokens: int = spec(100, ge=1)
    temperature: float = spec(0.8, gt=0.0)
    top_k: int = spec(40, ge=1)

    def cross_checks(self) -> list[str]:
        errors = super().cross_checks()
        if any(s in self.integrators for s in FIXED_GRID) and self.nfe_budget % 4:
            errors.append(f"key 'nfe_budget' = {self.nfe_budget}: must be a multiple of 4 (rk4 has 4 stages, "
                          "midpoint 2)")
        if self.generation_solver not in self.integrators:
            errors.append(f"key 'generation_solver' = {self.generation_solver!r}: must be one of integrators = "
                          f"{self.integrators}")
        if "direct" not in self.sensitivities:
            errors.append(f"key 'sensitivities' = {self.sensitivities}: must include 'direct' (the reference)")
        if self.generation_lengths != sorted(set(self.generation_lengths)):
            errors.append(f"key 'generation_lengths' = {self.generation_lengths}: must increase")
        elif self.crossover_limit > self.generation_lengths[-1]:
            errors.append(f"key 'crossover_limit' = {self.crossover_limit}: the speed-up curve must reach it (the "
                          f"longest of generation_lengths is {self.generation_lengths[-1]})")
        if not self.curvatures or self.curvatures[0] != 1.0 or self.curvatures != sorted(set(self.curvatures)):
            errors.append(f"key 'curvatures' = {self.curvatures}: must start at 1 (the flow as trained) and increase")
        if self.wp_steps != sorted(set(self.wp_steps)) or len(self.wp_steps) < 2:
            errors.append(f"key 'wp_steps' = {self.wp_steps}: must increase, at least two")
        if len(self.error_range) != 2 or self.error_range[0] <= self.error_range[1]:
            errors.append(f"key 'error_range' = {self.error_range}: must be [loosest, tightest], loosest larger")
        if len(set(self.sweep_steps)) < 2:
            errors.append(f"key 'sweep_steps' = {self.sweep_steps}: needs at least two different step counts")
        errors += self.solver_errors(self.integrators)
        longest = self.prompt_tokens + max(self.generation_lengths + [self.sample_tokens])
        if longest > self.max_seq_len:
            errors.append(f"key 'max_seq_len' = {self.max_seq_len}: generation needs prompt_tokens + the longest "
                          f"generation = {longest} positions")
        return errors

    def model_config(self, vocab_size: int, **override):
        """Study 05's hybrid: ``generation_solver`` at the evaluation budget ``nfe_budget`` (keyword overrides pass
        through; the integrator runs and the sweep replace solver, steps and sensitivity)."""
        steps = self.budget_steps(self.generation_solver)
        return super().model_config(vocab_size, **{"solver": self.generation_solver, "steps": steps, **override})

    def budget_steps(self, solver: str) -> int | None:
        """The steps of ``solver`` at the evaluation budget: ``nfe_budget`` over its stages; None for an adaptive
        solver, which chooses its own."""
        return self.nfe_budget // STAGES[solver] if solver in STAGES else None

    def arms(self, vocab_size: int) -> dict:
        """The trained arms by name: the baseline, and the hybrid with each of ``integrators`` at the evaluation
        budget ``nfe_budget`` (an adaptive solver chooses its own steps)."""
        cfg = self.model_config(vocab_size)
        steps = {s: self.budget_steps(s) or 1 for s in self.integrators}
        return {"baseline": cfg.baseline, **{s: cfg.replace(solver=s, steps=n).hybrid for s, n in steps.items()}}
