"""The size rules of odebook.nn.gemm, measured on the machine at hand (``python -m benchmarks.bench --only gemm``).

- MIN_MACS: a linear layer's forward + backward through oneDNN (gemm's autograd Function) against F.linear, at 1, 4,
  16 and 64 Mi multiply-adds; the rule sends products from 4 Mi on to oneDNN.
- MIN_WEIGHT: a one-row product without autograd (a decoding step) by a 256 × 768 and a 256 × 256 weight read from
  memory (cycled through enough copies to leave the cache), by oneDNN and by torch; the rule sends weights of 128 Ki
  elements and more to oneDNN.
- the weight gradient's orientation: grad_yᵀ @ x for n = 2,048 rows computed directly and as (xᵀ @ grad_y)ᵀ plus the
  copy; gemm._weight_gradient takes the second where ``out`` is the wider side.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from benchmarks.timing import median_time
from odebook.nn import gemm, torch_private

__all__ = ["bench_gemm"]


def _linear_step(linear, rows: int, d: int) -> float:
    x, w = torch.randn(rows, d, requires_grad=True), torch.randn(d, d, requires_grad=True)
    return median_time(lambda: linear(x, w).sum().backward(), 20)


@torch.no_grad()
def _one_row(product, d_in: int, d_out: int, copies: int = 64) -> float:
    x, weights = torch.randn(1, d_in), [torch.randn(d_out, d_in) for _ in range(copies)]

    def run():
        for w in weights:
            product(x, w)
    return median_time(run, 10) / copies


@torch.no_grad()
def _orientations(n: int, d_out: int, d_in: int) -> tuple[float, float]:
    grad_rows, rows = torch.randn(n, d_out), torch.randn(n, d_in)
    direct = median_time(lambda: torch_private.onednn_linear(grad_rows.t(), rows.t()), 20)  # as gemm._weight_gradient
    swapped = median_time(lambda: torch_private.onednn_linear(rows.t(), grad_rows.t()).t().contiguous(),
                          20)
    return direct, swapped


def bench_gemm() -> None:
    if not gemm.onednn_available():
        print("\nodebook.nn.gemm's rules: no usable oneDNN in this torch")
        return
    print("\nodebook.nn.gemm's size rules: linear forward + backward, oneDNN against F.linear (MIN_MACS = 4 Mi)")
    print(f"{'multiply-adds':>13s} {'rows × d × d':>14s} {'oneDNN ms':>10s} {'F.linear ms':>12s} {'ratio':>6s}",
          flush=True)
    for rows, d in ((256, 64), (1024, 64), (1024, 128), (1024, 256)):
        onednn = _linear_step(lambda x, w: gemm._Linear.apply(x, w, None), rows, d)
        torch_time = _linear_step(F.linear, rows, d)
        print(f"{rows * d * d / 2**20:10.0f} Mi {f'{rows} × {d} × {d}':>14s} {1000 * onednn:10.3f} "
              f"{1000 * torch_time:12.3f} {torch_time / onednn:5.2f}×", flush=True)
    print("one row by a weight read from memory, no autograd (MIN_WEIGHT = 128 Ki elements)")
    for d_in, d_out in ((256, 768), (256, 256)):
        onednn = _one_row(torch_private.onednn_linear, d_in, d_out)
        torch_time = _one_row(F.linear, d_in, d_out)
        print(f"  {d_in} × {d_out}: oneDNN {1e6 * onednn:.0f} µs, torch {1e6 * torch_time:.0f} µs", flush=True)
    print("weight gradient [out, in] from 2,048 rows: direct, and as (xᵀ @ grad_y)ᵀ with the copy")
    for d_out, d_in in ((768, 256), (1024, 256), (256, 768)):
        direct, swapped = _orientations(2048, d_out, d_in)
        print(f"  [{d_out}, {d_in}]: direct {1000 * direct:.2f} ms, swapped {1000 * swapped:.2f} ms "
              f"(gemm takes the {'swapped' if d_out > d_in else 'direct'})", flush=True)
