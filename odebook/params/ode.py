"""The ODE hybrid's parameters and its model configuration: the floor of the studies that train it."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from odebook.nn.ode import SENSITIVITIES, ode_layers_problem, solver_problem
from odebook.params.lm import TextCorpusParams
from odebook.params.schema import spec

__all__ = ["ODEHybridParams"]


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
