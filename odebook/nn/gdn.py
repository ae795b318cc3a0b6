"""The Gated DeltaNet mixer (Yang, Kautz & Hatamizadeh, 2024) on odebook's gated delta rule.

x → q, k, v projections (H heads of width K) → optional short causal depthwise convolution → SiLU →
L2-normalised q and k; β_t = β_floor + (1 − β_floor)·σ(W_β x_t) (β_floor = 1 always writes); the log decay
g_t = −exp(A_log)·softplus(W_a x_t + dt_bias) per head, initialised as fla-core's GatedDeltaNet initialises it
(Mamba-2's parameterisation: A ~ U(0, 16), dt log-uniform in [0.001, 0.1], so heads start with memories from a few
tokens to thousands — a single fixed decay, e.g. σ(2) ≈ 0.88 a step, forgets a fact 50 tokens back by a factor 10⁻³ and
left the retrieval studies at chance); the gated delta rule; RMSNorm of each head's read-out times a SiLU output gate;
output projection.

The layer stores nothing: ``forward`` returns a GDNOutput with the output, the final state, its ``Writes`` (what a
later layer needs to read this state causally, position by position) and its diagnostics. ``ablate`` replaces the
read-out o_t = Sᵀq_t (the state ablation: zero, batch mean or another prompt's; ``replaced``), passed as an
argument, never set on the module.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from odebook.nn.delta_rule import gated_delta_rule
from odebook.nn.gemm import Linear

__all__ = ["GatedDeltaNet", "GDNOutput", "Writes", "Ablation", "REPLACEMENTS", "replaced", "ShortConv"]


@dataclass(frozen=True)
class Ablation:
    """What a forward pass replaces, and by what. ``gdn_state``: every GDN layer's read-out of its own state;
    ``state_read``: the state-reading layer's read of a GDN state (odebook.nn.state_read); ``local``: every
    sliding-window attention output (the hybrid's local path and plain S layers). Each is False (kept) or one of
    ``REPLACEMENTS`` (True means "zero"), and replaces exactly what it names (``replaced``)."""

    gdn_state: bool | str = False
    state_read: bool | str = False
    local: bool | str = False

    def __post_init__(self):
        for name in ("gdn_state", "state_read", "local"):
            mode = getattr(self, name)
            if not isinstance(mode, bool) and mode not in REPLACEMENTS:
                raise ValueError(f"Ablation.{name} must be True/False or one of {REPLACEMENTS}, got {mode!r}")


REPLACEMENTS = ("zero", "mean", "resample")
NO_ABLATION = Ablation()


def replaced(t: torch.Tensor, mode: bool | str) -> torch.Tensor:
    """``t`` [B, T, …] replaced as ``mode`` says: False keeps it; True or "zero" zeroes it (below any real value, so a
    drop under it may fall below chance); "mean" puts the batch mean at each position (what the component gives on
    average, with nothing of this prompt's); "resample" puts the next prompt's value at the same position (a real
    value from another prompt — the batch rolled by one, so it needs two prompts or more)."""
    if mode is False:
        return t
    if mode is True or mode == "zero":
        return torch.zeros_like(t)
    if mode == "mean":
        return t.mean(dim=0, keepdim=True).expand_as(t)
    if t.shape[0] < 2:
        raise ValueError("a resampled ablation takes each prompt's value from another prompt: it needs a batch of two "
                         f"or more, got {t.shape[0]}")
    return t.roll(1, dims=0)


@dataclass(frozen=True)
class Writes:
    """What a GDN layer wrote (keys, values, log gates, write strengths [B, T, H, ·]) and its key projection, with
    which a later layer forms read queries in the same key space."""

    k: torch.Tensor
    v: torch.Tensor
    g: torch.Tensor
    beta: torch.Tensor
    read_keys: Callable[[torch.Tensor], torch.Tensor]
    chunk_size: int

    def read(self, x: torch.Tensor) -> torch.Tensor:
        """r_t = S_tᵀ k̂(x_t) for every position t: the gated delta rule re-run over these writes with queries made
        from ``x`` [B, T, d] by the writer's key projection. Causal: position t reads the state after t."""
        out, _ = gated_delta_rule(self.read_keys(x), self.k, self.v, self.g, self.beta, chunk_size=self.chunk_size)
        return out  # [B, T, H, V]


@dataclass
class GDNOutput:
    y: torch.Tensor  # [B, T, d]
    state: torch.Tensor  # [B, H, K, V], after the last position
    writes: Writes
    diagnostics: dict[str, float] = field(default_factory=dict)


class ShortConv(nn.Module):
    """Causal depthwise 1-D convolution over time: y_t depends on x_{t−w+1} … x_t."""

    def __init__(self, channels: int, width: int = 4):
        super().__init__()
        self.width = width
        self.conv = nn.Conv1d(channels, channels, width, groups=channels, padding=width - 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # [B, T, C]
        return self.conv(x.transpose(1, 2))[..., : x.shape[1]].transpose(1, 2)


class GatedDeltaNet(nn.Module):
    def __init__(self, *, d_model: int, n_head: int, head_dim: int | None = None, conv_width: int = 4,
                 beta_floor: float = 0.0, chunk_size: int = 64):
        super().__init__()
        K = head_dim or d_model // n_head
        self.n_head, self.head_dim, self.beta_floor, self.chunk_size = n_head, K, beta_floor, chunk_size
        self.q, self.k, self.v = (Linear(d_model, n_head * K, bias=False) for _ in range(3))
        self.convs = nn.ModuleList(ShortConv(n_head * K, conv_width) for _ in range(3)) if conv_width else None
        self.beta = Linear(d_model, n_head)
        self.gate = Linear(d_model, n_head, bias=False)
        self.A_log = nn.Parameter(torch.empty(n_head).uniform_(0, 16).log())
        dt = torch.exp(torch.empty(n_head).uniform_(math.log(1e-3), math.log(0.1))).clamp(min=1e-4)
        self.dt_bias = nn.Parameter(dt + torch.log(-torch.expm1(-dt)))  # softplus⁻¹(dt)
        self.out_gate = Linear(d_model, n_head * K, bias=False)
        self.norm = nn.RMSNorm(K)
        self.out = Linear(n_head * K, d_model, bias=False)

    def _project(self, x: torch.Tensor, i: int) -> torch.Tensor:
        """Projection i (0 = q, 1 = k, 2 = v) → short convolution → SiLU, as [B, T, H, K]."""
        z = (self.q, self.k, self.v)[i](x)
        if self.convs is not None:
            z = self.convs[i](z)
        return F.silu(z).view(*x.shape[:2], self.n_head, self.head_dim)

    def keys(self, x: torch.Tensor) -> torch.Tensor:
        """L2-normalised keys of ``x`` [B, T, H, K]: the space this layer writes its state in."""
        return F.normalize(self._project(x, 1), dim=-1)

    def forward(self, x: torch.Tensor, *, initial_state: torch.Tensor | None = None,
                ablate: bool | str = False) -> GDNOutput:
        B, T, _ = x.shape
        H, K = self.n_head, self.head_dim
        q, k, v = (self._project(x, i) for i in range(3))
        q, k = F.normalize(q, dim=-1), F.normalize(k, dim=-1)
        beta = self.beta_floor + (1 - self.beta_floor) * torch.sigmoid(self.beta(x))  # [B, T, H]
        g = -self.A_log.exp() * F.softplus(self.gate(x) + self.dt_bias)  # [B, T, H] log decay, ≤ 0
        o, state = gated_delta_rule(q, k, v, g, beta, initial_state=initial_state, chunk_size=self.chunk_size)
        o = replaced(o, ablate)
        diagnostics = {"state_norm": float(state.detach().norm(dim=(-2, -1)).mean()),
                       "beta_mean": float(beta.detach().mean()), "gate_mean": float(g.detach().exp().mean())}
        y = self.out(self.norm(o).reshape(B, T, H * K) * F.silu(self.out_gate(x)))
        return GDNOutput(y, state, Writes(k, v, g, beta, self.keys, self.chunk_size), diagnostics)
