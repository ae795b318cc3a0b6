"""Shared weights modulated by depth: one set of base weights used at every depth, scaled by gates σ(MLP(e(t))).

``GatedBlock`` — the time-indexed MLP: W_eff(t) = W_base ⊙ G(t) for the attention and MLP matrices, with
  granularity "full": G(t) = σ(MLP(e(t))) has one gate per weight (the published formula), or
  granularity "channel": G(t) = σ(a_out(t)) σ(a_in(t))ᵀ, a gate per output and per input channel (what the
  published code did). Sequential pre-LN: x ← x + h·attn(LN₁ x; W_eff(t)); x ← x + h·mlp(LN₂ x; W_eff(t)).
  With every gate equal to 1 it is a weight-shared transformer block.
``OutputGatedBlock`` — ODE integration with weight sharing: x ← x + h·(f_base(x) ⊙ m(t)), m(t) = σ(MLP(e(t))) ∈ R^d,
  f_base(x) = attn(LN₁ x) + mlp(LN₂ x).

Gate MLPs: TimeMLP(2S + 1 → width → n_gates); the gates start at σ(0) = 1/2 up to small N(0, 0.02) weights.

LayerNorms (``norm``): "static" (default) — ordinary LayerNorms shared across depth; "temporal" — the source's
time-indexed MLP used Tong's temporal LayerNorms: weight w + Δw(t), bias b + Δb(t), with [Δw₁, Δb₁, Δw₂, Δb₂] =
TimeMLP(t) initialised at zero (so training starts from the static block).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from odebook.nn.attention import MLP, CausalSelfAttention, causal_attention, gelu_mlp
from odebook.nn.depth import TimeMLP
from odebook.nn.ssm import ModulatedSSM

__all__ = ["GatedBlock", "OutputGatedBlock", "SSMGatedBlock", "GATED_MATRICES", "NORMS", "modulation_curves"]

NORMS = ("static", "temporal")

GATED_MATRICES = (("attn", "qkv"), ("attn", "proj"), ("mlp", "fc"), ("mlp", "proj"))


class GatedBlock(nn.Module):
    gate_names = ("qkv", "proj", "fc", "mlp out")

    def __init__(self, *, d_model: int, n_head: int, granularity: str = "channel", n_freq: int = 16,
                 gate_width: int = 32, norm: str = "static"):
        super().__init__()
        if granularity not in ("full", "channel"):
            raise ValueError(f"granularity must be 'full' or 'channel', got {granularity!r}")
        if norm not in NORMS:
            raise ValueError(f"norm must be one of {NORMS}, got {norm!r}")
        self.granularity, self.n_head = granularity, n_head
        self.ln1, self.ln2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model=d_model, n_head=n_head)
        self.mlp = MLP(d_model=d_model)
        shapes = [tuple(self.base(m, n).weight.shape) for m, n in GATED_MATRICES]
        self.sizes = [o * i if granularity == "full" else o + i for o, i in shapes]
        self.gate = TimeMLP(n_freq=n_freq, width=gate_width, out=sum(self.sizes), out_std=0.02)
        self.norm_time = TimeMLP(n_freq=n_freq, width=gate_width, out=4 * d_model, out_std=0.0) \
            if norm == "temporal" else None

    def norms(self, x: torch.Tensor, t: float) -> tuple[torch.Tensor, torch.Tensor]:
        """(LN₁ x, LN₂ x) at depth t: static, or with the temporal shifts of weight and bias."""
        if self.norm_time is None:
            return self.ln1(x), self.ln2(x)
        dw1, db1, dw2, db2 = self.norm_time(t).chunk(4)
        shape = (x.shape[-1],)
        return (F.layer_norm(x, shape, self.ln1.weight + dw1, self.ln1.bias + db1),
                F.layer_norm(x, shape, self.ln2.weight + dw2, self.ln2.bias + db2))

    def base(self, module: str, name: str) -> nn.Linear:
        return getattr(getattr(self, module), name)

    def gates(self, t: float) -> list[torch.Tensor]:
        """G(t) for each matrix of GATED_MATRICES, shaped like the matrix (or [out, 1] × [1, in] for channels)."""
        out = []
        for (m, n), chunk in zip(GATED_MATRICES, torch.sigmoid(self.gate(t)).split(self.sizes)):
            o, i = self.base(m, n).weight.shape
            out.append(chunk.view(o, i) if self.granularity == "full" else chunk[:o, None] * chunk[None, o:])
        return out

    def attention(self, x: torch.Tensor, gates: list[torch.Tensor], t: float) -> torch.Tensor:
        """attn(LN₁ x) with the gated attention matrices."""
        a = self.attn
        return causal_attention(self.norms(x, t)[0], a.qkv.weight * gates[0], a.qkv.bias, a.proj.weight * gates[1],
                                a.proj.bias, self.n_head)

    def feed_forward(self, x: torch.Tensor, gates: list[torch.Tensor], t: float) -> torch.Tensor:
        """mlp(LN₂ x) with the gated MLP matrices."""
        m = self.mlp
        return gelu_mlp(self.norms(x, t)[1], m.fc.weight * gates[2], m.fc.bias, m.proj.weight * gates[3], m.proj.bias)

    def forward(self, x: torch.Tensor, t: float, h: float) -> torch.Tensor:
        gates = self.gates(t)
        x = x + h * self.attention(x, gates, t)
        return x + h * self.feed_forward(x, gates, t)


class OutputGatedBlock(nn.Module):
    gate_names = ("m",)

    def __init__(self, *, d_model: int, n_head: int, n_freq: int = 16, gate_width: int = 32):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model=d_model, n_head=n_head)
        self.mlp = MLP(d_model=d_model)
        self.gate = TimeMLP(n_freq=n_freq, width=gate_width, out=d_model, out_std=0.02)

    def gates(self, t: float) -> list[torch.Tensor]:
        return [torch.sigmoid(self.gate(t))]

    def forward(self, x: torch.Tensor, t: float, h: float) -> torch.Tensor:
        return x + h * (self.attn(self.ln1(x)) + self.mlp(self.ln2(x))) * self.gates(t)[0]


class SSMGatedBlock(GatedBlock):
    """The time-indexed SSM: a GatedBlock with a depth-modulated selective SSM beside its attention:
    x ← x + h·[attn(LN₁ x; W_eff(t)) + ssm(LN₃ x; θ(t))];  x ← x + h·mlp(LN₂ x; W_eff(t)).
    ``state=False``: the SSM without its state (odebook.nn.ssm), the rest alike."""

    def __init__(self, *, d_model: int, n_head: int, d_state: int = 16, n_freq: int = 16, gate_width: int = 32,
                 norm: str = "static", state: bool = True):
        super().__init__(d_model=d_model, n_head=n_head, granularity="channel", n_freq=n_freq, gate_width=gate_width,
                         norm=norm)
        self.ln3 = nn.LayerNorm(d_model)
        self.ssm = ModulatedSSM(d_model=d_model, d_state=d_state, n_freq=n_freq, gate_width=gate_width, state=state)

    def forward(self, x: torch.Tensor, t: float, h: float) -> torch.Tensor:
        gates = self.gates(t)
        x = x + h * (self.attention(x, gates, t) + self.ssm(self.ln3(x), t))
        return x + h * self.feed_forward(x, gates, t)


@torch.no_grad()
def modulation_curves(module: nn.Module, ts: list[float]) -> dict[str, list[float]]:
    """The mean gate σ(·) of every gated part of ``module`` (anything with ``gates(t)`` and ``gate_names``) at
    each depth in ``ts``: {name: [mean at t for t in ts]}."""
    curves: dict[str, list[float]] = {}
    for prefix, sub in module.named_modules():
        if hasattr(sub, "gates") and hasattr(sub, "gate_names"):
            label = "ssm " if prefix.endswith("ssm") else ""
            per_t = [[g.mean().item() for g in sub.gates(t)] for t in ts]
            for i, name in enumerate(sub.gate_names):
                curves[label + name] = [row[i] for row in per_t]
    return curves
