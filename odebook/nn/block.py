"""The one pre-LN block, around a pluggable sequence mixer: x + mixer(LN₁ x), then x + mlp(LN₂ x).

The mixer is full causal attention by default (the transformer block), or sliding-window attention, a Gated
DeltaNet, or the hybrid's state-reading attention. ``step`` returns what later layers need: the writes of a GDN mixer
(passed on by the LM to a state-reading layer) and the mixer's diagnostics. Ablations arrive as an argument.
"""

from __future__ import annotations

import torch
from torch import nn

from odebook.nn.attention import MLP, CausalSelfAttention
from odebook.nn.gdn import NO_ABLATION, Ablation, GatedDeltaNet, Writes, replaced
from odebook.nn.state_read import StateReadAttention
from odebook.nn.kv_cache import KVCache

__all__ = ["Block"]


class Block(nn.Module):
    def __init__(self, *, d_model: int, n_head: int | None = None, dropout: float = 0.0,
                 mixer: nn.Module | None = None):
        super().__init__()
        if mixer is None and n_head is None:
            raise ValueError("Block needs n_head for its default attention mixer, or a mixer")
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = mixer if mixer is not None else CausalSelfAttention(d_model=d_model, n_head=n_head, dropout=dropout)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = MLP(d_model=d_model, dropout=dropout)

    def cache_problem(self) -> str | None:
        """Why this block cannot decode with a KV cache, or None."""
        ask = getattr(self.attn, "cache_problem", None)
        return ask() if ask is not None else f"its mixer is a {type(self.attn).__name__}, which has no KV cache"

    def step(self, x: torch.Tensor, *, cache: KVCache | None = None, writes: Writes | None = None,
             ablation: Ablation = NO_ABLATION) -> tuple[torch.Tensor, Writes | None, dict[str, float]]:
        """x [B, T, d] and the latest GDN layer's writes → (x [B, T, d], the writes a later layer should read, this
        mixer's diagnostics)."""
        h, mixer, diagnostics = self.ln1(x), self.attn, {}
        if isinstance(mixer, GatedDeltaNet):
            out = mixer(h, ablate=ablation.gdn_state)
            y, writes, diagnostics = out.y, out.writes, out.diagnostics
        elif isinstance(mixer, StateReadAttention):
            y, diagnostics = mixer(h, writes=writes, ablation=ablation)
        else:
            y = mixer(h, cache=cache)
            if getattr(mixer, "window", None) is not None:
                y = replaced(y, ablation.local)
        x = x + y
        return x + self.mlp(self.ln2(x)), writes, diagnostics

    def forward(self, x: torch.Tensor, control: torch.Tensor | None = None,
                cache: KVCache | None = None) -> torch.Tensor:
        """``control`` is accepted so every block shares one signature; a discrete block ignores it."""
        return self.step(x, cache=cache)[0]
