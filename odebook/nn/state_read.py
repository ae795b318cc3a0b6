"""The sliding-window layer of a GDN + SWA hybrid that also reads a Gated DeltaNet layer's state.

y = m · swa(x) + σ(W_g x) ⊙ W_r r,   r_t = S_tᵀ k̂(x_t),
where S_t is the state of the source GDN layer after position t and k̂ is *that layer's* key projection (with its
short convolution, SiLU and L2 norm): write keys and read keys live in one space. The source's ``Writes`` arrive as
an argument (the LM passes on what the GDN layer returned); the read re-runs the gated delta rule with these queries
over them, so it is causal — never the final state, which would show every position the whole sequence.

The local multiplier m (odebook.models.local_paths names the bottleneck arms): ``local_scale`` at inference, and in
training either the same static scale or a per-sequence Bernoulli keep mask with drop probability ``local_drop_prob``
(stochastic local drop, the source's: kept sequences see scale 1 in training, ``local_scale`` at inference); with
``inverted`` the kept sequences are scaled by 1/(1 − p) in training so the expected local path matches inference at
scale 1 (inverted dropout; not the source's).
"""

from __future__ import annotations

import torch
from torch import nn

from odebook.nn.attention import SlidingWindowAttention
from odebook.nn.gdn import NO_ABLATION, Ablation, Writes, replaced
from odebook.nn.gemm import Linear

__all__ = ["StateReadAttention"]

class StateReadAttention(nn.Module):
    def __init__(self, *, d_model: int, n_head: int, read_dim: int, window: int, local_scale: float = 1.0,
                 local_drop_prob: float = 0.0, inverted: bool = False):
        super().__init__()
        self.local = SlidingWindowAttention(d_model=d_model, n_head=n_head, window=window)
        self.read_proj = Linear(read_dim, d_model, bias=False)
        self.gate = Linear(d_model, d_model)
        self.local_scale, self.local_drop_prob, self.inverted = local_scale, local_drop_prob, inverted

    def _local_multiplier(self, B: int, device) -> torch.Tensor | float:
        if not self.training or self.local_drop_prob == 0:
            return self.local_scale
        keep = (torch.rand(B, 1, 1, device=device) >= self.local_drop_prob).float()
        return keep / (1 - self.local_drop_prob) if self.inverted else keep

    def forward(self, x: torch.Tensor, *, writes: Writes | None,
                ablation: Ablation = NO_ABLATION) -> tuple[torch.Tensor, dict[str, float]]:
        """x [B, T, d] and the source layer's writes → (output [B, T, d], diagnostics)."""
        if writes is None:
            raise ValueError("StateReadAttention needs the writes of a GDN layer before it")
        B, T, _ = x.shape
        local = replaced(self.local(x) * self._local_multiplier(B, x.device), ablation.local)
        read = replaced(writes.read(x), ablation.state_read)
        retrieval = self.read_proj(read.reshape(B, T, -1))
        gate = torch.sigmoid(self.gate(x))
        diagnostics = {"gate_mean": float(gate.detach().mean()),
                       "local_norm": float(local.detach().norm(dim=-1).mean()),
                       "retrieval_norm": float(retrieval.detach().norm(dim=-1).mean())}
        return local + gate * retrieval, diagnostics
