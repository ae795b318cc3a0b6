"""Study 01's parameters: the ODE hybrid's (odebook.params.ode) with its solver, the primaries' MQAR task, the margin
and the WikiText section's seeds."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, ClassVar

from odebook.nn.ode import SOLVERS
from odebook.params.ode import ODEHybridParams
from odebook.params.schema import spec

__all__ = ["GradientFlowParams"]


@dataclasses.dataclass
class GradientFlowParams(ODEHybridParams):
    """Study 01: a GPT baseline against the same GPT with a block of layers replaced by a neural-ODE flow, asked on
    MQAR (where removing the layer costs something) and described on WikiText.

    Defaults are the t4 profile: the source's width and block, 2 layers with layer 1 replaced (the notebook says
    why)."""

    defaults: ClassVar[Mapping[str, Any]] = {"n_seeds": 12, "looks": [3, 6, 9], "tuning_seeds": 2, "n_layer": 2,
                                             "ode_layers": [1], "alpha_init": 1.0}
    groups: ClassVar = {"architecture": ("solver", "ode_steps"),
                        "recall_task": ("mqar_keys", "mqar_pairs", "task_steps", "task_batch_size", "lr_grid",
                                        "lr_extensions", "lr_tie")}

    # settings that move only the WikiText section, which is descriptive (the runner says so when SET changes one)
    descriptive_only: ClassVar[Mapping[str, str]] = dict.fromkeys(
        ("steps", "batch_size", "lr", "lm_seeds"), "the WikiText section, which is descriptive: the verdicts rest on "
        "the MQAR task's task_steps, task_batch_size and lr_grid")

    solver: str = spec("euler", choices=SOLVERS)
    ode_steps: int = spec(4, ge=1, le=256, help="fixed-grid steps over t in [0, 1] (ignored by dopri5)")
    mqar_keys: int = spec(16, ge=4, help="the primaries' task, multi-query associative recall (odebook.data.mqar): "
                                         "keys (and as many values)")
    mqar_pairs: int = spec(4, ge=1, help="key-value pairs per sequence, each asked once (on seq_len tokens)")
    task_steps: int = spec(2000, ge=1, help="training steps of every arm on the task")
    task_batch_size: int = spec(32, ge=1)
    lr_grid: list[float] = spec([5e-4, 1e-3, 2e-3], gt=0.0, le=1.0,
                                help="learning rates tried per arm on the task, on a tuning seed apart from the "
                                     "confirmatory ones (lr is the WikiText section's)")
    lr_extensions: int = spec(2, ge=0, help="times an arm whose chosen rate lies at an edge of what it tried trains "
                                            "one grid step beyond it (study.lr_grid), so that the grid brackets "
                                            "each arm's choice")
    lr_tie: float = spec(1e-3, ge=0.0, help="nats of mean final validation loss within which rates tie the lowest; "
                                            "the middle one of them is chosen (study.lr_grid.choose)")
    lm_seeds: int = spec(3, ge=0, help="seeds of the WikiText section (descriptive); 0 = none")
    margin: float = spec(0.05, gt=0.0, help="non-inferiority margin, nats of test loss on the task's answers: the "
                                            "hybrid may be worse than the baseline by less than this; the gate asks "
                                            "the null arm to be worse by more (this study's analysis)")
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
