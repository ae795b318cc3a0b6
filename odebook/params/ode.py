"""Studies 01 (gradient flow) and 05 (ODE solvers): the ODE hybrid's parameters and its model configuration."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, ClassVar

from odebook.nn.ode import FIXED_GRID, SENSITIVITIES, SOLVERS, STAGES, ode_layers_problem, solver_problem
from odebook.params.lm import TextCorpusParams
from odebook.params.schema import spec

__all__ = ["ODEHybridParams", "GradientFlowParams", "ODESolverParams"]


@dataclasses.dataclass
class ODEHybridParams(TextCorpusParams):
    """Fields and checks of the studies that train the ODE hybrid (a GPT whose consecutive layers ``ode_layers``
    are replaced by one ODE flow block); studies add their solver fields and override defaults. No dropout anywhere:
    the vector field must be a deterministic function of (t, H) for the adjoint, adaptive and reversible solves,
    so the discrete layers go without it too (parity)."""

    groups: ClassVar = {"architecture": ("n_layer", "d_model", "ode_layers", "sensitivity", "rtol", "atol",
                                         "control_dim", "alpha_init")}

    n_layer: int = spec(6, ge=1, le=48)
    d_model: int = spec(256, ge=8)
    ode_layers: list[int] = spec([2, 3], ge=0, help="consecutive 0-based layers replaced by one ODE flow block")
    sensitivity: str = spec("direct", choices=SENSITIVITIES,
                            help="gradients: backpropagation through the solver, torchdiffeq's adjoint, or reversible "
                                 "(fixed-grid solvers only)")
    rtol: float = spec(1e-3, gt=0.0, help="dopri5 tolerances")
    atol: float = spec(1e-4, gt=0.0)
    control_dim: int = spec(4, ge=1)
    alpha_init: float = spec(0.1, help="initial value of the learned output scale of the vector field")

    def cross_checks(self) -> list[str]:
        errors = super().cross_checks()
        problem = ode_layers_problem(self.ode_layers, self.n_layer)
        return errors + ([f"key 'ode_layers' = {self.ode_layers}: {problem}"] if problem else [])

    def solver_errors(self, solvers: list[str]) -> list[str]:
        """The fixed-grid rule of ``self.sensitivity`` (odebook.nn.ode.solver_problem) for each of ``solvers``."""
        problems = [solver_problem(s, self.sensitivity) for s in solvers]
        return [f"key 'sensitivity' = {self.sensitivity!r}: {pr}" for pr in dict.fromkeys(problems) if pr]

    def model_config(self, vocab_size: int, *, solver: str, steps: int):
        """The hybrid these parameters describe (odebook.models.arms.HybridConfig), for ``vocab_size`` tokens,
        solved by ``solver`` in ``steps`` steps (each study names its own solver field)."""
        from odebook.models.arms import HybridConfig

        return HybridConfig(vocab_size=vocab_size, d_model=self.d_model, n_layer=self.n_layer, n_head=self.n_head,
                            max_seq_len=self.max_seq_len, ode_layers=tuple(self.ode_layers), solver=solver,
                            steps=steps, sensitivity=self.sensitivity, rtol=self.rtol, atol=self.atol,
                            control_dim=self.control_dim, alpha_init=self.alpha_init)


@dataclasses.dataclass
class GradientFlowParams(ODEHybridParams):
    """Study 01: a GPT baseline against the same GPT with a block of layers replaced by a neural-ODE flow, asked on
    MQAR (where removing the layer costs something) and described on WikiText.

    Defaults are the t4 profile: the source's width and block, 2 layers with layer 1 replaced (the notebook says
    why)."""

    study: ClassVar[str] = "01_gradient_flow"
    defaults: ClassVar[Mapping[str, Any]] = {"n_seeds": 12, "looks": [3, 6, 9], "n_layer": 2, "ode_layers": [1]}
    groups: ClassVar = {"architecture": ("solver", "ode_steps"),
                        "recall_task": ("mqar_keys", "mqar_pairs", "task_steps", "task_batch_size", "lr_grid")}

    solver: str = spec("euler", choices=SOLVERS)
    ode_steps: int = spec(4, ge=1, le=256, help="fixed-grid steps over t in [0, 1] (ignored by dopri5)")
    mqar_keys: int = spec(16, ge=4, help="the primaries' task, multi-query associative recall (odebook.data.mqar): "
                                         "keys (and as many values)")
    mqar_pairs: int = spec(4, ge=1, help="key-value pairs per sequence, each asked once (on seq_len tokens)")
    task_steps: int = spec(1000, ge=1, help="training steps of every arm on the task")
    task_batch_size: int = spec(32, ge=1)
    lr_grid: list[float] = spec([5e-4, 1e-3, 2e-3], gt=0.0, le=1.0,
                                help="learning rates tried per arm on the task, on a tuning seed apart from the "
                                     "confirmatory ones (lr is the WikiText section's)")
    lm_seeds: int = spec(3, ge=0, help="seeds of the WikiText section (descriptive); 0 = none")
    margin: float = spec(0.05, gt=0.0, help="non-inferiority margin, nats of test loss on the task's answers: the "
                                            "hybrid may be worse than the baseline by less than this; the gate asks "
                                            "the null arm to be worse by more (odebook.study.calibrated)")
    design_sd: float = spec(0.0, ge=0.0, help="seed SD of the paired test-loss differences the design assumes (a "
                                              "pilot's); the notebook shows the looks' power at the margin from it "
                                              "(0 = not shown)")
    dynamics_sequences: int = spec(2, ge=1, help="held-out sequences of the dynamics analysis")
    dynamics_tokens: int = spec(8, ge=1, help="tokens per sequence of the dynamics analysis (Jacobian (T·d)²)")

    def cross_checks(self) -> list[str]:
        errors = super().cross_checks() + self.solver_errors([self.solver])
        if self.mqar_pairs > self.mqar_keys or 4 * self.mqar_pairs > self.seq_len + 1:
            errors.append(f"key 'mqar_pairs' = {self.mqar_pairs}: needs at most mqar_keys = {self.mqar_keys} keys and "
                          f"4 tokens a pair within seq_len + 1 = {self.seq_len + 1}")
        if self.eval_interval > self.task_steps:
            errors.append(f"key 'eval_interval' = {self.eval_interval}: must be <= task_steps = {self.task_steps}")
        if self.lm_seeds > self.n_seeds:
            errors.append(f"key 'lm_seeds' = {self.lm_seeds}: must be <= n_seeds = {self.n_seeds} (the WikiText "
                          "section runs the first confirmatory seeds, never the tuning seed)")
        return errors

    def model_config(self, vocab_size: int, **override):
        """Study 01's hybrid: ``solver`` with ``ode_steps`` steps (keyword overrides pass through)."""
        return super().model_config(vocab_size, **{"solver": self.solver, "steps": self.ode_steps, **override})

    def runs(self, tok) -> list:
        """What the study runs (odebook.params.plan, for its budget): on MQAR, each arm's learning-rate grid on the
        tuning seed, then every seed, each hybrid's test batches once more with its flow switched off; then every
        arm of the WikiText section on ``lm_seeds`` seeds."""
        from odebook.data import mqar
        from odebook.models.arms import gradient_flow_arms
        from odebook.params.plan import Runs, Work, evaluations, lm_work, mqar_batch

        vocab = mqar.Vocab(self.mqar_keys)
        batch = mqar_batch(vocab, self.task_batch_size, self.mqar_pairs, self.seq_len)
        valid = evaluations(self.task_steps, self.eval_interval) * self.eval_batches
        scored = 3 * self.eval_batches  # the test set, the accuracy at k and on unseen pairs
        out = []
        for name, build in gradient_flow_arms(self.model_config(vocab.size), ("baseline", "hybrid", "null")).items():
            off = self.eval_batches if name == "hybrid" else 0
            train = Work(self.task_steps, batch)
            out += [Runs(name, build, len(self.lr_grid), (train, Work(valid, batch, train=False)), part="lr grid"),
                    Runs(name, build, self.n_seeds, (train, Work(valid + scored + off, batch, train=False)),
                         part="MQAR")]
        text = gradient_flow_arms(self.model_config(tok.vocab_size))
        return out + [Runs(name, build, self.lm_seeds, lm_work(self, tok), part="WikiText")
                      for name, build in text.items() if self.lm_seeds]


@dataclasses.dataclass
class ODESolverParams(ODEHybridParams):
    """Study 05: what adjoint sensitivities, integrator choice, reversibility and KV caching buy in memory, speed
    and accuracy, on the study-01 hybrid (a GPT with consecutive layers replaced by one ODE flow block).

    Defaults are the t4 profile: study 01's model with a context long enough for 1024 generated tokens."""

    study: ClassVar[str] = "05_ode_solvers"
    defaults: ClassVar[Mapping[str, Any]] = {"n_seeds": 3, "seq_len": 128, "max_seq_len": 1088}
    groups: ClassVar = {
        "integration": ("integrators", "nfe_budget", "precision_error", "wp_steps", "wp_tolerances", "timing_pairs"),
        "memory": ("sweep_solver", "sweep_steps", "sensitivities", "timing_repeats", "memory_growth_limit",
                   "reversible_grad_tolerance"),
        "kv_cache": ("generation_solver", "generation_lengths", "crossover_limit", "prompt_tokens", "speedup_target"),
        "sampling": ("n_samples", "sample_tokens", "temperature", "top_k")}

    integrators: list[str] = spec(["rk4", "dopri5"], choices=SOLVERS,
                                  help="the trained hybrids (every integrator re-solves the trained weights)")
    nfe_budget: int = spec(8, ge=4, help="vector-field evaluations per forward of every fixed-grid integrator: "
                                         "euler takes nfe_budget steps, midpoint nfe_budget/2, rk4 nfe_budget/4")
    precision_error: float = spec(1e-3, gt=0.0, le=1.0,
                                  help="relative error of H(1) at which the work-precision claim reads each "
                                       "integrator's evaluations; euler at nfe_budget must miss it (the gate)")
    wp_steps: list[int] = spec([1, 2, 4, 8, 16, 32], ge=1, help="steps of each fixed-grid integrator in the "
                                                                 "work-precision table")
    wp_tolerances: list[float] = spec([1e-2, 1e-3, 1e-4, 1e-5, 1e-6], gt=0.0, le=1.0,
                                      help="dopri5's tolerances in the work-precision table (rtol; atol a tenth)")
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

    def runs(self, tok) -> list:
        """What the study runs (odebook.params.plan, for its budget): the baseline and every integrator on every
        seed; each seed's trained rk4 re-solved; the interleaved rk4 / dopri5 timing; the sensitivity sweep."""
        from odebook.nn.ode import SOLVERS
        from odebook.params.plan import Runs, Work, lm_work, token_windows

        cfg = self.model_config(tok.vocab_size)

        def hybrid(solver: str, steps: int, sensitivity: str = self.sensitivity):
            return lambda: cfg.replace(solver=solver, steps=steps, sensitivity=sensitivity).hybrid()

        steps = {s: self.budget_steps(s) or 1 for s in SOLVERS}
        runs = [Runs(name, build, self.n_seeds, lm_work(self, tok))
                for name, build in self.arms(tok.vocab_size).items()]
        windows = token_windows(tok.vocab_size, self.batch_size, self.seq_len)
        # each seed's trained rk4 re-solved by every integrator at the budget and by rk4 at 4x its steps, on validation
        valid = (Work(self.eval_batches, windows, train=False),)
        runs += [Runs(s, hybrid(s, n), self.n_seeds, valid, setup=False, part="re-solving")
                 for s, n in [*steps.items(), ("rk4", 4 * self.nfe_budget)]]
        # rk4 against dopri5, interleaved: a first step counting evaluations, three warm-up pairs, the timed pairs
        runs += [Runs(s, hybrid(s, steps[s]), 1, (Work(self.timing_pairs + 4, windows),), setup=False, part="timing")
                 for s in ("rk4", "dopri5")]
        sweep = Work(self.timing_repeats + 2, windows)  # warm-up, timed, memory
        return runs + [Runs(f"sweep {m}", hybrid(self.sweep_solver, n, m), 1, (sweep,), setup=False,
                            part="memory sweep") for n in self.sweep_steps for m in self.sensitivities]
