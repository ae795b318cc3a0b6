"""Depth as time: a sinusoidal embedding of depth t, a small MLP on it, and the loop that applies one
depth-dependent block L times.

A depth-dependent block is called as ``block(x, t, h) -> x``: it adds its update, scaled by the step h, to x.
``DepthStack`` runs it at t_k = (k + 1) / L for k = 0 … L − 1 with h = dt = 1 / L (explicit Euler, as Tong et al.,
ICLR 2025) or h = 1 (the direct residual x + f); ``time="constant"`` holds t at 1/2 for every step — the control
that keeps the adapter structure but removes the time dependence. ``steps`` can be changed after training to
re-discretise the same model (adaptive depth).
"""

from __future__ import annotations

import math

import torch
from torch import nn

__all__ = ["sinusoidal_embedding", "TimeMLP", "DepthStack", "Repeated", "CONSTANT_T"]

CONSTANT_T = 0.5


def sinusoidal_embedding(t: float, n_freq: int, device=None) -> torch.Tensor:
    """[t, sin(1000·t·w_k), cos(1000·t·w_k)] for k = 0 … S − 1, w_k = exp(−ln(10⁴)·k/S): shape [2S + 1]."""
    w = torch.exp(-math.log(1e4) * torch.arange(n_freq, device=device) / n_freq)
    arg = 1000.0 * t * w
    return torch.cat([torch.tensor([t], device=device), arg.sin(), arg.cos()])


class TimeMLP(nn.Module):
    """t ↦ Linear(SiLU(Linear(sinusoidal_embedding(t)))): [2S + 1] → width → out."""

    def __init__(self, *, n_freq: int, width: int, out: int, out_std: float | None = None):
        """``out_std``: initialise the last layer's weights N(0, out_std²) and its bias at zero (e.g. gates that
        start near σ(0) = 1/2); None keeps PyTorch's default initialisation."""
        super().__init__()
        self.n_freq = n_freq
        self.net = nn.Sequential(nn.Linear(2 * n_freq + 1, width), nn.SiLU(), nn.Linear(width, out))
        if out_std is not None:
            nn.init.normal_(self.net[-1].weight, std=out_std)
            nn.init.zeros_(self.net[-1].bias)

    def forward(self, t: float) -> torch.Tensor:
        first = self.net[0].weight
        return self.net(sinusoidal_embedding(t, self.n_freq, first.device).to(first.dtype))


class DepthStack(nn.Module):
    """x ← block(x, t_k, h) for k = 0 … steps − 1: one set of weights used at every depth."""

    def __init__(self, block: nn.Module, *, steps: int, residual: str = "dt", time: str = "depth"):
        super().__init__()
        if residual not in ("dt", "direct") or time not in ("depth", "constant"):
            raise ValueError(f"residual must be 'dt' or 'direct' and time 'depth' or 'constant', "
                             f"got {residual!r}, {time!r}")
        self.block, self.steps, self.residual, self.time = block, steps, residual, time

    def times(self) -> list[float]:
        return [(k + 1) / self.steps if self.time == "depth" else CONSTANT_T for k in range(self.steps)]

    def forward(self, x: torch.Tensor, control: torch.Tensor | None = None) -> torch.Tensor:
        h = 1.0 / self.steps if self.residual == "dt" else 1.0
        for t in self.times():
            x = self.block(x, t, h)
        return x


class Repeated(nn.Module):
    """One residual block applied ``times`` times with the same weights: x ← block(x) (the ODE hybrid's
    weight-shared control, as many applications as the ODE block evaluates its field)."""

    def __init__(self, block: nn.Module, *, times: int):
        super().__init__()
        self.block, self.times = block, times

    def forward(self, x: torch.Tensor, control: torch.Tensor | None = None) -> torch.Tensor:
        for _ in range(self.times):
            x = self.block(x)
        return x
