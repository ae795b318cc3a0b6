"""The neural-ODE transformer of Tong et al. (ICLR 2025): one block whose every weight is generated from depth t.

e(t) = TimeMLP(t) ∈ R^{d_emb}. Each weight matrix together with its bias is one linear map of e(t):
[W | b] = reshape(G e(t) + g). LayerNorms are time dependent too: weight 1 + ⟨e(t), f_w⟩, bias ⟨e(t), f_b⟩, with
f_w and f_b initialised at zero. Attention and MLP read the same state in parallel:
x ← x + h · [attn(LN₁ x; W(t)) + mlp(LN₂ x; W(t))]. Run it with DepthStack(residual="dt") for explicit Euler.

Parameters (d model width, S frequencies, E = d_emb):
  TimeMLP (2S + 1)·E + E + E·E + E;  generators (E + 1)·(12d² + 9d);  LayerNorms 4·E·d.

``time_mlp``: "shared" (default) — one TimeMLP e(t) feeds every generator and the LayerNorms; "per_linear" — as
Tong et al.'s code, each time-dependent linear layer (qkv, proj, fc, out) has its own TimeMLP, and the LayerNorms a
fifth (5 TimeMLPs instead of 1).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from odebook.nn.attention import causal_attention, gelu_mlp
from odebook.nn.depth import TimeMLP
from odebook.nn.gemm import Linear

__all__ = ["HyperBlock", "TIME_MLPS"]

TIME_MLPS = ("shared", "per_linear")


class HyperBlock(nn.Module):
    def __init__(self, *, d_model: int, n_head: int, n_freq: int = 16, d_emb: int = 32, time_mlp: str = "shared"):
        super().__init__()
        if time_mlp not in TIME_MLPS:
            raise ValueError(f"time_mlp must be one of {TIME_MLPS}, got {time_mlp!r}")
        d = d_model
        self.d, self.n_head = d, n_head
        self.embed = TimeMLP(n_freq=n_freq, width=d_emb, out=d_emb)
        self.per_linear = nn.ModuleDict({k: TimeMLP(n_freq=n_freq, width=d_emb, out=d_emb)
                                         for k in ("qkv", "proj", "fc", "out")}) if time_mlp == "per_linear" else None
        # (out features, in features) of each generated matrix; each generator also emits the bias (out features)
        self.shapes = {"qkv": (3 * d, d), "proj": (d, d), "fc": (4 * d, d), "out": (d, 4 * d)}
        self.gen = nn.ModuleDict({k: Linear(d_emb, o * i + o) for k, (o, i) in self.shapes.items()})
        self.ln = nn.ParameterDict({k: nn.Parameter(torch.zeros(d_emb, d)) for k in ("w1", "b1", "w2", "b2")})
        for name, (o, i) in self.shapes.items():  # base weights ~ N(0, 0.02) as in the LM; the e(t) part small
            nn.init.normal_(self.gen[name].weight, std=0.02 / math.sqrt(d_emb))
            nn.init.zeros_(self.gen[name].bias)
            nn.init.normal_(self.gen[name].bias[: o * i], std=0.02)

    def weights(self, t: float) -> dict[str, torch.Tensor]:
        """The block's weights at depth t: {name_w: [out, in], name_b: [out]} and the LayerNorms' (ln*_w, ln*_b)."""
        e = self.embed(t)
        out = {}
        for name, (o, i) in self.shapes.items():
            flat = self.gen[name](self.per_linear[name](t) if self.per_linear is not None else e)
            out[f"{name}_w"], out[f"{name}_b"] = flat[: o * i].view(o, i), flat[o * i:]
        for k in ("1", "2"):
            out[f"ln{k}_w"] = 1 + e @ self.ln[f"w{k}"]
            out[f"ln{k}_b"] = e @ self.ln[f"b{k}"]
        return out

    def forward(self, x: torch.Tensor, t: float, h: float) -> torch.Tensor:
        w = self.weights(t)
        # Under autocast the generated LayerNorm weights come out in half precision; CUDA's layer_norm casts them to
        # the input's fp32, the CPU's refuses mixed dtypes ("expect parameter to have scalar type of Float").
        a, m = (F.layer_norm(x, (self.d,), w[f"ln{k}_w"].to(x.dtype), w[f"ln{k}_b"].to(x.dtype)) for k in "12")
        update = causal_attention(a, w["qkv_w"], w["qkv_b"], w["proj_w"], w["proj_b"], self.n_head) \
            + gelu_mlp(m, w["fc_w"], w["fc_b"], w["out_w"], w["out_b"])
        return x + h * update
