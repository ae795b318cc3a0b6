"""The sliding-window layer of a GDN + SWA hybrid that also reads a Gated DeltaNet layer's state.

y = m · swa(x) + σ(W_g x) ⊙ W_r r,   r_t = S_tᵀ k̂(x_t),
where S_t is the state of the GDN layer ``source`` after position t and k̂ is *that layer's* key projection (with
its short convolution, SiLU and L2 norm): write keys and read keys live in one space. The read-out is the gated
delta rule run again with these queries over the source's own writes (k, v, g, β), so it is causal.

The local multiplier m: ``local_scale`` always (a static bottleneck), times a per-sequence Bernoulli keep mask with
drop probability ``local_drop_prob`` in training (stochastic local drop; at inference nothing is dropped).
``ablate_state`` zeroes r, like the GDN layers' own switch.
"""

from __future__ import annotations

import torch
from torch import nn

from odebook.nn.attention import SlidingWindowAttention
from odebook.nn.delta_rule import gated_delta_rule
from odebook.nn.gdn import GatedDeltaNet

__all__ = ["StateReadAttention"]


class StateReadAttention(nn.Module):
    def __init__(self, source: GatedDeltaNet, *, d_model: int, n_head: int, window: int, local_scale: float = 1.0,
                 local_drop_prob: float = 0.0):
        super().__init__()
        self._source = (source,)  # not a submodule: its parameters belong to its own block
        self.local = SlidingWindowAttention(d_model=d_model, n_head=n_head, window=window)
        self.read_proj = nn.Linear(source.n_head * source.head_dim, d_model, bias=False)
        self.gate = nn.Linear(d_model, d_model)
        self.local_scale, self.local_drop_prob = local_scale, local_drop_prob
        self.ablate_state = False
        self.last: dict[str, torch.Tensor] = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        source = self._source[0]
        if not source.writes:
            raise RuntimeError("StateReadAttention must run after its source GDN layer in the same forward pass")
        B, T, _ = x.shape
        local = self.local(x) * self.local_scale
        if self.training and self.local_drop_prob > 0:
            local = local * (torch.rand(B, 1, 1, device=x.device) >= self.local_drop_prob)
        k, v, g, beta = source.writes
        read, _ = gated_delta_rule(source.keys(x), k, v, g, beta, chunk_size=source.chunk_size)
        if self.ablate_state:
            read = torch.zeros_like(read)
        retrieval = self.read_proj(read.reshape(B, T, -1))
        gate = torch.sigmoid(self.gate(x))
        self.last = {"gate_mean": gate.detach().mean(), "local_norm": local.detach().norm(dim=-1).mean(),
                     "retrieval_norm": retrieval.detach().norm(dim=-1).mean()}
        return local + gate * retrieval
