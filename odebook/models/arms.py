"""The ODE hybrid's models from one configuration: the baseline GPT, the hybrid (consecutive layers replaced by one
ODE flow block), the baseline without the replaced layers (``null``) and one weight-shared discrete block applied as
many times as the ODE evaluates its field (``shared``)."""

from __future__ import annotations

import dataclasses
from odebook.models.lm import LM, gpt, ode_hybrid
from odebook.nn import Block
from odebook.nn.depth import Repeated
from odebook.nn.ode import evaluations_per_forward, ode_layers_problem, solver_problem

__all__ = ["HybridConfig"]


@dataclasses.dataclass(frozen=True)
class HybridConfig:
    """Everything that builds the ODE hybrid's models; made by ``ODEHybridParams.model_config``, which holds
    every default (this class has none of its own). No dropout anywhere (the ODE field must be deterministic, so the
    discrete layers go without it too). Made or ``replace``d, it is held to the rules the ODE block is built under
    (odebook.nn.ode: ``solver_problem``, ``ode_layers_problem``)."""

    vocab_size: int
    d_model: int
    n_layer: int
    n_head: int
    max_seq_len: int
    ode_layers: tuple[int, ...]
    solver: str
    steps: int
    sensitivity: str
    rtol: float
    atol: float
    control_dim: int
    alpha_init: float

    def __post_init__(self):
        problem = solver_problem(self.solver, self.sensitivity)
        if problem:
            raise ValueError(f"sensitivity {self.sensitivity!r}, solver {self.solver!r}: {problem}")
        problem = ode_layers_problem(list(self.ode_layers), self.n_layer)
        if problem:
            raise ValueError(f"ode_layers = {list(self.ode_layers)}: {problem}")

    @property
    def shape(self) -> dict:
        return dict(vocab_size=self.vocab_size, d_model=self.d_model, n_layer=self.n_layer, n_head=self.n_head,
                    max_seq_len=self.max_seq_len)

    def replace(self, **changes) -> "HybridConfig":
        return dataclasses.replace(self, **changes)

    def baseline(self) -> LM:
        return gpt(**self.shape)

    def hybrid(self, *, attention: bool = True) -> LM:
        return ode_hybrid(**self.shape, ode_layers=self.ode_layers, solver=self.solver, steps=self.steps,
                          sensitivity=self.sensitivity, rtol=self.rtol, atol=self.atol, control_dim=self.control_dim,
                          alpha_init=self.alpha_init, attention=attention)

    def tokenwise(self) -> LM:
        """The hybrid whose vector field has no attention: its flow cannot move information between tokens."""
        return self.hybrid(attention=False)

    def null(self) -> LM:
        """The baseline with the replaced layers removed."""
        return gpt(**{**self.shape, "n_layer": self.n_layer - len(self.ode_layers)})

    def shared(self) -> LM:
        """The replaced layers as one discrete Block applied as many times as the ODE evaluates its field (x ← x +
        f(x) each time, weights shared)."""
        times = evaluations_per_forward(self.solver, self.steps)
        if times is None:
            raise ValueError(f"the weight-shared arm needs a fixed-grid solver to count evaluations, not "
                             f"{self.solver!r}")
        first, last = self.ode_layers[0], self.ode_layers[-1]
        block = lambda: Block(d_model=self.d_model, n_head=self.n_head)  # noqa: E731
        blocks = [block() for _ in range(first)] + [Repeated(block(), times=times)] + \
                 [block() for _ in range(last + 1, self.n_layer)]
        return LM(vocab_size=self.vocab_size, d_model=self.d_model, max_seq_len=self.max_seq_len, blocks=blocks)

    def replaced_blocks(self, arm: str) -> range:
        """Indices in ``arm``'s ``blocks`` that stand where the baseline has ``ode_layers`` (empty for null)."""
        first = self.ode_layers[0]
        span = {"baseline": len(self.ode_layers), "null": 0}.get(arm, 1)
        return range(first, first + span)
