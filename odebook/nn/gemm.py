"""fp32 matrix products on the CPU through oneDNN, where torch's own GEMM leaves much of the CPU unused.

torch sends its CPU fp32 matmuls to MKL. On the AMD processors of these machines MKL takes a path that leaves much
of the CPU's rate unused, where oneDNN's fp32 inner product does not (``make bench`` prints both rates on the
machine at hand). oneDNN's inner product is the kernel torch's own compiler calls for linear layers on the CPU
(odebook.nn.torch_private.onednn_linear: a private entry point); it takes ordinary strided tensors, returns an
ordinary tensor, and computes in fp32 throughout (no reduced-precision mode is set), so its results differ from
MKL's only in the order of the sums. Its weight operand must be row- or column-major without gaps, or it runs
orders of magnitude slower (``make bench``'s weight-layout row); ``_plain`` copies any other view first. It has no
autograd formula of its own:
- ``linear`` is F.linear with one: its backward pass is two more oneDNN products (the models' projections and MLPs,
  odebook.nn.attention; ``Linear`` is nn.Linear through it);
- ``mm`` and ``addmm_`` are for code that forms its own gradients (the sliced head, odebook.nn.linear_ce).

All three fall back to torch off the CPU, for products under MIN_MACS multiply-adds (``linear`` without autograd:
only if the weight also has under MIN_WEIGHT elements), for other dtypes, under
autocast, under torch.func's transforms (jacrev in odebook.study.dynamics), without oneDNN (or where
odebook.nn.torch_private finds its entry point changed), or inside ``with backend("torch"):`` (the bench's
side-by-side row); ``mm`` and ``addmm_`` also where autograd would record them. tests/nn/test_gemm.py
holds all three to fp64 products and F.linear.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import nn

from odebook.nn import torch_private

__all__ = ["Linear", "linear", "mm", "addmm_", "onednn_available", "BACKENDS", "backend", "current_backend"]

BACKENDS = ("onednn", "torch")  # oneDNN where it applies (the default), or torch's own GEMM for every product
_BACKEND = contextvars.ContextVar("odebook_gemm_backend", default="onednn")
# Smaller products (multiply-adds n·k·m) go to torch, whose call costs less: through ``linear``, a forward + backward
# broke even with F.linear near 4 Mi multiply-adds (1,024 rows × 64 × 64, or 64 rows × 256 × 256), slower below,
# faster above (``make bench --only gemm`` prints both sides of it).
MIN_MACS = 2**22
# Without autograd, a weight of MIN_WEIGHT elements or more also goes to oneDNN, whatever the rows. A product of few
# rows (decoding's one) is bound by reading its weight from memory, which oneDNN spreads over both cores and torch's
# GEMM does not; oneDNN's call costs more, so smaller weights stay with torch (``make bench --only gemm`` prints a
# one-row product by a 256 × 768 and a 256 × 256 weight both ways). With a backward pass the rule of MIN_MACS alone
# holds: there a few-row product came out either way.
MIN_WEIGHT = 2**17


def onednn_available() -> bool:
    """Whether this torch has oneDNN's inner product, as tested (x86 and most Linux builds do; some macOS builds do
    not)."""
    return torch_private.usable("onednn_linear")


@contextlib.contextmanager
def backend(name: str) -> Iterator[None]:
    """Products inside the block use ``name`` (one of BACKENDS); the previous backend returns on leaving."""
    if name not in BACKENDS:
        raise ValueError(f"gemm.backend: {name!r} is not one of {', '.join(BACKENDS)}")
    token = _BACKEND.set(name)
    try:
        yield
    finally:
        _BACKEND.reset(token)


def current_backend() -> str:
    """The backend products use here: "onednn" outside any ``backend`` block."""
    return _BACKEND.get()


def _onednn_applies(large: bool, *tensors: torch.Tensor | None) -> bool:
    """Whether a product that is ``large`` by the size rules above goes to oneDNN."""
    return (large and _BACKEND.get() == "onednn" and onednn_available() and not torch.is_autocast_enabled("cpu")
            and not torch_private.functorch_transforms_active()
            and all(t.device.type == "cpu" and t.dtype == torch.float32 for t in tensors if t is not None))


def _recorded(*tensors: torch.Tensor | None) -> bool:
    """Whether autograd would record an operation on these tensors."""
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)


def _by_hand(a: torch.Tensor, b: torch.Tensor, *others: torch.Tensor) -> bool:
    """Whether mm / addmm_ send a @ b (+ others) to oneDNN: MIN_MACS, and no autograd to record it."""
    tensors = (a, b, *others)
    return _onednn_applies(a.numel() * b.shape[1] >= MIN_MACS, *tensors) and not _recorded(*tensors)


def _plain(weight: torch.Tensor) -> torch.Tensor:
    """The weight operand of a oneDNN product, row- or column-major without gaps: a plain one as it is, any other
    view (a column slice of a wider matrix, every other row, an expanded tensor) copied. On such a view oneDNN's
    inner product takes orders of magnitude longer (``make bench`` prints the two) — as the weight gradient of a
    linear layer whose input is a slice of a wider tensor would. x needs no copy (a strided x runs as fast)."""
    return weight if weight.is_contiguous() or weight.t().is_contiguous() else weight.contiguous()


def _inner_product(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """x @ weight.t() (+ bias) by oneDNN: x [n, k], weight [m, k], either of them may be a transposed view."""
    return torch_private.onednn_linear(x, _plain(weight), bias)


def _linear_forward(x: torch.Tensor, weight: torch.Tensor,
                    bias: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """F.linear's forward by oneDNN, for x [..., in]: (x's rows [n, in], the output [..., out])."""
    rows = x.reshape(-1, x.shape[-1])
    return rows, _inner_product(rows, weight, bias).view(*x.shape[:-1], weight.shape[0])


def _weight_gradient(grad_rows: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """grad_yᵀ @ x: [out, in], from grad_rows [n, out] and rows [n, in]. oneDNN's inner product runs faster with the
    narrower side as its rows: a wider ``out`` is computed as (xᵀ @ grad_y)ᵀ and copied into [out, in], copy
    included faster than the direct product, which is not so for a wider ``in`` (``make bench --only gemm`` prints
    both orientations)."""
    if grad_rows.shape[1] <= rows.shape[1]:
        return _inner_product(grad_rows.t(), rows.t())
    return _inner_product(rows.t(), grad_rows.t()).t().contiguous()


class _Linear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias):
        rows, out = _linear_forward(x, weight, bias)
        ctx.save_for_backward(rows, weight)
        ctx.x_shape = x.shape
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_y):
        rows, weight = ctx.saved_tensors
        grad_rows = grad_y.reshape(-1, grad_y.shape[-1])  # [n, out]
        need_x, need_w, need_b = ctx.needs_input_grad
        grad_x = _inner_product(grad_rows, weight.t()).view(ctx.x_shape) if need_x else None  # grad_y @ W
        grad_w = _weight_gradient(grad_rows, rows) if need_w else None
        grad_b = grad_rows.sum(0) if need_b else None  # need_b is False when bias is None
        return grad_x, grad_w, grad_b


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """F.linear(x, weight, bias): x [..., in], weight [out, in], bias [out]; differentiable in all three."""
    recorded = _recorded(x, weight, bias)
    large = x.numel() * weight.shape[0] >= MIN_MACS or (not recorded and weight.numel() >= MIN_WEIGHT)
    if not _onednn_applies(large, x, weight, bias):
        return F.linear(x, weight, bias)
    return _Linear.apply(x, weight, bias) if recorded else _linear_forward(x, weight, bias)[1]


class Linear(nn.Linear):
    """nn.Linear whose product goes through ``linear``: the same parameters, initialisation and state dict."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear(x, self.weight, self.bias)


def mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a @ b for 2-d a [n, k] and b [k, m]."""
    if _by_hand(a, b):
        return _inner_product(a, b.t())
    return a @ b


def addmm_(c: torch.Tensor, a: torch.Tensor, b: torch.Tensor, *, beta: float = 1.0) -> torch.Tensor:
    """beta · c + a @ b with beta 1 or 0 (0: c's contents are ignored): a sum of products over slices. Returns the
    result: c itself on torch's path (accumulated in place, no temporary), a new tensor on oneDNN's, whose inner
    product cannot write into an existing one — rebind the name: ``c = addmm_(c, a, b)``."""
    if beta not in (0.0, 1.0):
        raise ValueError(f"gemm.addmm_: beta must be 0 or 1, got {beta}")
    if _by_hand(a, b, c):
        if beta == 0.0:
            return _inner_product(a, b.t())
        return torch_private.onednn_linear_add(a, c, _plain(b.t()))
    return c.addmm_(a, b, beta=beta)
