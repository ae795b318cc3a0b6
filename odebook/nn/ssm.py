"""A selective diagonal state-space mixer (Mamba style) whose parameters are modulated by depth.

Per channel c and state index n, for inputs u_t (t = 1 … T):
    h_t = exp(Δ_t A) ⊙ h_{t−1} + Δ_t B_t u_t,    y_t = C_t · h_t + D ⊙ u_t,
with Δ_t = softplus(W_Δ u_t + b_Δ) ∈ R^d, B_t = W_B u_t ∈ R^N, C_t = W_C u_t ∈ R^N (selective: they depend on the
input), A = −exp(A_log) ∈ R^{d×N} and D ∈ R^d. ``selective_scan`` is the plain loop over time, causal by
construction. ``ModulatedSSM`` scales A, Δ, B, C and D by gates σ(MLP(e(t))) at depth t:
A ⊙ g_A (per channel), Δ ⊙ g_Δ (per channel), B ⊙ g_B and C ⊙ g_C (per state index), D ⊙ g_D (per channel).
``ModulatedSSM(state=False)`` is the same mixer without its state: h_{t−1} is dropped (the decay is 0), so
y_t = Δ_t u_t (B_t · C_t) + D ⊙ u_t reads the current token only (``memoryless_scan``; the scan at A = −∞) — the same
parameters, projections and gates, no memory of earlier tokens.

The sources of the time-indexed comparison disagree on the published time-indexed SSM: seed 001 calls it "Mamba-style
selective", while seed 002's pseudocode and the fork's code (zaphrode/qkvflow, scripts/test_time_indexed_ssm.py, whose
``_get_params`` reads A, B, C, Δ off the depth embedding alone) make it input-independent — a time-invariant convolution
along the sequence. This one is selective, as Mamba is.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from odebook.nn.depth import TimeMLP
from odebook.nn.gemm import Linear

__all__ = ["selective_scan", "memoryless_scan", "ModulatedSSM"]


def selective_scan(u: torch.Tensor, delta: torch.Tensor, A: torch.Tensor, B: torch.Tensor, C: torch.Tensor,
                   D: torch.Tensor) -> torch.Tensor:
    """u, Δ: [b, T, d]; A: [d, N]; B, C: [b, T, N]; D: [d] → y [b, T, d]."""
    b, _, d = u.shape
    h = u.new_zeros(b, d, A.shape[1])
    decay = torch.exp(delta[..., None] * A)  # [b, T, d, N]
    write = (delta * u)[..., None] * B[:, :, None, :]  # [b, T, d, N]
    ys = []
    for decay_t, write_t, C_t in zip(decay.unbind(1), write.unbind(1), C.unbind(1)):  # unbind: one backward copy
        h = decay_t * h + write_t
        ys.append((h * C_t[:, None, :]).sum(-1))
    return torch.stack(ys, 1) + D * u


def memoryless_scan(u: torch.Tensor, delta: torch.Tensor, B: torch.Tensor, C: torch.Tensor,
                    D: torch.Tensor) -> torch.Tensor:
    """``selective_scan`` with its state dropped at every step (decay 0): y_t = Δ_t u_t (B_t · C_t) + D u_t."""
    return delta * u * (B * C).sum(-1, keepdim=True) + D * u


class ModulatedSSM(nn.Module):
    def __init__(self, *, d_model: int, d_state: int = 16, n_freq: int = 16, gate_width: int = 32,
                 state: bool = True):
        super().__init__()
        d, N, self.state = d_model, d_state, state
        self.delta = Linear(d, d)
        self.B, self.C = Linear(d, N, bias=False), Linear(d, N, bias=False)
        self.A_log = nn.Parameter(torch.log(torch.arange(1, N + 1, dtype=torch.float32)).repeat(d, 1))
        self.D = nn.Parameter(torch.ones(d))
        self.out = Linear(d, d)
        self.sizes = [d, d, N, N, d]  # gates of A, Δ, B, C, D
        self.gate = TimeMLP(n_freq=n_freq, width=gate_width, out=sum(self.sizes))

    def gates(self, t: float) -> list[torch.Tensor]:
        return list(torch.sigmoid(self.gate(t)).split(self.sizes))

    def forward(self, u: torch.Tensor, t: float) -> torch.Tensor:
        g_A, g_delta, g_B, g_C, g_D = self.gates(t)
        A = -torch.exp(self.A_log) * g_A[:, None]
        delta = F.softplus(self.delta(u)) * g_delta
        B, C, D = self.B(u) * g_B, self.C(u) * g_C, self.D * g_D
        y = selective_scan(u, delta, A, B, C, D) if self.state else memoryless_scan(u, delta, B, C, D)
        return self.out(y)
