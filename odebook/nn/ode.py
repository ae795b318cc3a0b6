"""A neural-ODE flow block: dH/dt = α · F(H + e_t(t) + e_u(u)) integrated over t ∈ [0, 1] with torchdiffeq.

F(h) = attn(LN₁ h) + mlp(LN₂ h) evaluates attention and MLP in parallel on the same state; e_t is a small time
embedding (1 → d → SiLU → d), e_u a linear embedding of a control vector u (u = 0 when none is given), and α a
learned scalar output scale. The control reaches the vector field through a module, never through a closure: each
solve integrates ``_Controlled(field, u)``, so ``odeint_adjoint`` sees every parameter, and its backward pass — which
re-evaluates the field later — still sees this call's u, whatever other forward passes ran in between.

The vector field has no dropout: an adaptive solver and the adjoint's backward re-evaluation both need F to be a
deterministic function of (t, H).
"""

from __future__ import annotations

import torch
from torch import nn
from torchdiffeq import odeint, odeint_adjoint

from odebook.nn.attention import MLP, CausalSelfAttention

__all__ = ["VectorField", "ODEFlowBlock", "euler_reference", "SOLVERS"]

SOLVERS = ("euler", "midpoint", "rk4", "dopri5")
FIXED_GRID = ("euler", "midpoint", "rk4")


class VectorField(nn.Module):
    """f(t, H) = α · [attn(LN₁ z) + mlp(LN₂ z)],  z = H + e_t(t) + e_u(u)."""

    def __init__(self, *, d_model: int, n_head: int, control_dim: int, alpha_init: float = 0.1):
        super().__init__()
        self.time_embed = nn.Sequential(nn.Linear(1, d_model), nn.SiLU(), nn.Linear(d_model, d_model))
        self.control_embed = nn.Linear(control_dim, d_model)
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model=d_model, n_head=n_head)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = MLP(d_model=d_model)
        self.alpha = nn.Parameter(torch.tensor(float(alpha_init)))
        self.nfe = 0  # function evaluations since the last reset

    def forward(self, t: torch.Tensor, h: torch.Tensor, control: torch.Tensor | None = None) -> torch.Tensor:
        """t: scalar; h: [B, T, d]; control: [B, control_dim] or None (= zeros)."""
        self.nfe += 1
        u = control if control is not None else h.new_zeros(h.shape[0], self.control_embed.in_features)
        e_t = self.time_embed(t.reshape(1, 1).to(h.dtype))  # [1, d]
        e_u = self.control_embed(u.to(h.dtype))  # [B, d]
        z = h + e_t[:, None, :] + e_u[:, None, :]  # [B, T, d]
        return self.alpha * (self.attn(self.ln1(z)) + self.mlp(self.ln2(z)))


class _Controlled(nn.Module):
    """The vector field of one solve: the shared ``VectorField`` with that call's control bound to it."""

    def __init__(self, field: VectorField, control: torch.Tensor | None):
        super().__init__()
        self.field, self.control = field, control

    def forward(self, t: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        return self.field(t, h, self.control)


class ODEFlowBlock(nn.Module):
    """Replaces a stack of residual layers by H(1), the solution of dH/dt = f(t, H) from H(0) = x."""

    def __init__(self, *, d_model: int, n_head: int, control_dim: int = 4, alpha_init: float = 0.1,
                 solver: str = "euler", steps: int = 4, adjoint: bool = False, rtol: float = 1e-3,
                 atol: float = 1e-4):
        super().__init__()
        if solver not in SOLVERS:
            raise ValueError(f"unknown solver {solver!r}; allowed: {', '.join(SOLVERS)}")
        self.field = VectorField(d_model=d_model, n_head=n_head, control_dim=control_dim, alpha_init=alpha_init)
        self.solver, self.steps, self.adjoint, self.rtol, self.atol = solver, steps, adjoint, rtol, atol

    def grid(self, like: torch.Tensor) -> torch.Tensor:
        """Fixed-grid solvers step exactly between these times (torchdiffeq, no step_size); dopri5 adapts."""
        n = self.steps if self.solver in FIXED_GRID else 1
        return torch.linspace(0.0, 1.0, n + 1, dtype=like.dtype, device=like.device)

    def forward(self, x: torch.Tensor, control: torch.Tensor | None = None) -> torch.Tensor:
        """x: [B, T, d]; control: [B, control_dim] or None (= zeros). The adjoint gives no gradient to control."""
        func, options = _Controlled(self.field, control), dict(method=self.solver, rtol=self.rtol, atol=self.atol)
        if self.adjoint:
            hs = odeint_adjoint(func, x, self.grid(x), adjoint_params=tuple(self.field.parameters()), **options)
        else:
            hs = odeint(func, x, self.grid(x), **options)
        return hs[-1]


def euler_reference(field: VectorField, x: torch.Tensor, steps: int,
                    control: torch.Tensor | None = None) -> torch.Tensor:
    """Explicit Euler written out: H_{k+1} = H_k + dt · f(t_k, H_k), t_k = k · dt, dt = 1 / steps."""
    h, dt = x, 1.0 / steps
    for k in range(steps):
        h = h + dt * field(torch.tensor(k * dt, dtype=x.dtype), h, control)
    return h
