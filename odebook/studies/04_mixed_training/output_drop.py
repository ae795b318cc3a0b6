"""Study 04's dropped-output arm: the hybrid with its GDN layers' direct output to the residual stream dropped, as the
source drops the local path — per sequence with probability p in training, scaled by 1 − p at inference — so that
in most training steps a fact beyond the window reaches the answer only through the sliding-window layer's read of
the state. The state and its writes (what that layer reads) are untouched."""

from __future__ import annotations

import dataclasses

import torch
from torch import nn

from odebook.models.configs import PatternConfig
from odebook.models.lm import LM
from odebook.nn.gdn import GatedDeltaNet, GDNOutput

__all__ = ["OutputDrop", "OutputDropConfig"]


@dataclasses.dataclass(frozen=True)
class OutputDrop:
    """A forward hook of a GatedDeltaNet: its output ``y`` times a per-sequence keep mask (kept with probability
    1 − ``p``) in training, times 1 − ``p`` at inference; ``state`` and ``writes`` pass unchanged."""

    p: float

    def __call__(self, module: nn.Module, args: tuple, out: GDNOutput) -> GDNOutput:
        if not module.training:
            return dataclasses.replace(out, y=out.y * (1 - self.p))
        keep = torch.rand(out.y.shape[0], 1, 1, device=out.y.device) >= self.p
        return dataclasses.replace(out, y=out.y * keep.to(out.y.dtype))


@dataclasses.dataclass(frozen=True)
class OutputDropConfig(PatternConfig):
    """A ``PatternConfig`` whose G layers drop their direct output with probability ``output_drop`` (``OutputDrop``)."""

    output_drop: float = 0.0

    def build(self) -> LM:
        model = super().build()
        for mixer in model.modules():
            if isinstance(mixer, GatedDeltaNet):
                mixer.register_forward_hook(OutputDrop(self.output_drop))
        return model
