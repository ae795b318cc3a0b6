"""Study 03's no-state control: a Gated DeltaNet stack with its state emptied before every write, so that it differs
from the GDN arm in one thing — memory across tokens — and keeps everything else: the projections, the short
convolutions (so it sees ``conv_width`` − 1 tokens back per layer, as the GDN does outside its state), the write
strength β, the normalised read-out and its output gate, and the same initial weights for the same seed.

With the state forgotten before each write (the decay exp(g_t) = 0), the delta rule's step leaves S_t = β_t k_t v_tᵀ,
so o_t = S_tᵀ(scale·q_t) = scale·β_t·(q_t·k_t)·v_t: a function of token t's own (convolved) projections. The
reference is the rule itself (odebook.nn.delta_rule) run with that decay; tests/studies hold the two together."""

from __future__ import annotations

import dataclasses

import torch
import torch.nn.functional as F
from torch import nn

from odebook.models.configs import PatternConfig
from odebook.models.lm import LM
from odebook.nn.gdn import GatedDeltaNet

__all__ = ["forgetful_read", "NoStateGDN", "NoStateConfig"]


def forgetful_read(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, beta: torch.Tensor,
                   scale: float | None = None) -> torch.Tensor:
    """The gated delta rule's read-out when the state is emptied before every write: scale·β_t·(q_t·k_t)·v_t.
    q, k [B, T, H, K]; v [B, T, H, V]; β [B, T, H]; scale 1/√K by default, as the rule's."""
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    return (scale * beta * (q * k).sum(-1))[..., None] * v


class NoStateGDN(nn.Module):
    """``gdn``'s layer with no state: its own projections, convolutions, β, read-out norm and gates, and
    ``forgetful_read`` in place of the gated delta rule (its decay parameters go unused). Returns the output y."""

    def __init__(self, gdn: GatedDeltaNet):
        super().__init__()
        self.gdn = gdn

    def forward(self, x: torch.Tensor, *, cache=None) -> torch.Tensor:
        if cache is not None:
            raise ValueError("the no-state GDN control has no cache to decode with")
        m = self.gdn
        q, k, v = (m._project(x, i) for i in range(3))
        beta = m.beta_floor + (1 - m.beta_floor) * torch.sigmoid(m.beta(x))
        o = forgetful_read(F.normalize(q, dim=-1), F.normalize(k, dim=-1), v, beta)
        return m.out(m.norm(o).flatten(2) * F.silu(m.out_gate(x)))


@dataclasses.dataclass(frozen=True)
class NoStateConfig(PatternConfig):
    """A ``PatternConfig`` whose G layers keep no state (``NoStateGDN``), built from the same weights the GDN stack
    of this config starts from."""

    @classmethod
    def of(cls, config: PatternConfig) -> NoStateConfig:
        """The no-state control of the GDN stack ``config``."""
        return cls(**{f.name: getattr(config, f.name) for f in dataclasses.fields(config)})

    def build(self) -> LM:
        model = super().build()
        for block in model.blocks:
            if isinstance(block.attn, GatedDeltaNet):
                block.attn = NoStateGDN(block.attn)
        return model
