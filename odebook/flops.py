"""FLOPs counted by torch (torch.utils.flop_counter): matmuls, attention and convolutions, not element-wise ops."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.utils.flop_counter import FlopCounterMode

__all__ = ["count_flops", "forward_flops"]


def count_flops(fn: Callable[[], object]) -> int:
    """FLOPs executed by ``fn()``."""
    with FlopCounterMode(display=False) as counter:
        fn()
    return int(counter.get_total_flops())


@torch.no_grad()
def forward_flops(model: torch.nn.Module, x: torch.Tensor) -> int:
    """FLOPs of one forward pass of ``model`` on ``x``."""
    return count_flops(lambda: model(x))
