"""FLOPs counted by torch (torch.utils.flop_counter): matmuls, attention and convolutions, not element-wise ops.

torch's counter knows aten's out-of-place matmuls. Two more products are taught to it here, 2·n·k·m like aten.mm, so
that a count does not depend on which GEMM ran: the oneDNN inner product that odebook.nn.gemm calls on the CPU, and
the in-place aten.addmm_ of gemm's fallback."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch.utils.flop_counter import FlopCounterMode

from odebook.nn import gemm, torch_private

__all__ = ["count_flops", "forward_flops"]


def _inner_product_flops(x_shape, weight_shape) -> int:
    """x [..., k] @ weight[m, k]ᵀ: 2·n·k·m. A bias or an added tensor is element-wise: uncounted, as in aten.addmm."""
    return 2 * math.prod(x_shape) * weight_shape[0]


def _in_place_addmm(c, a, b, *args, out_shape=None, **kwargs) -> int:
    return 2 * a[0] * a[1] * b[1]


def _onednn_inner_product(*args, out_shape=None, **kwargs) -> int:
    # the default overload's (x, w, b, attr, scalars, algorithm) or .binary's (x, other, w, b, attr)
    x, w = (args[0], args[1]) if len(args) == 6 else (args[0], args[2])
    return _inner_product_flops(x, w)


# keyed by op, not overload: the counter looks them up so
_CUSTOM_FLOPS = {torch.ops.aten.addmm_: _in_place_addmm} | (
    {torch_private.onednn_linear_op(): _onednn_inner_product} if gemm.onednn_available() else {})


def count_flops(fn: Callable[[], object]) -> int:
    """FLOPs executed by ``fn()``."""
    with FlopCounterMode(display=False, custom_mapping=_CUSTOM_FLOPS) as counter:
        fn()
    return int(counter.get_total_flops())


@torch.no_grad()
def forward_flops(model: torch.nn.Module, x: torch.Tensor) -> int:
    """FLOPs of one forward pass of ``model`` on ``x``."""
    return count_flops(lambda: model(x))
