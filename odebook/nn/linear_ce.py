"""The LM head and its cross-entropy in one pass over slices of the tokens, so the full logits are never held.

At study 01's t4 shape the logits of one batch (2,048 tokens × 50,304 columns) are 412 MB in fp32 and their gradient
as much again. ``linear_cross_entropy`` computes, slice by slice of ``chunk_rows`` tokens, the logits h @ W, their
log-softmax, the loss, and — in the same pass, while the slice's logits are at hand — the gradients of the mean loss
with respect to h and W (softmax − one-hot; the 1 / number-of-counted-tokens scale goes onto the small factors). The backward pass only scales
those by the incoming gradient. Peak memory is one slice of logits instead of the whole matrix and its gradient, and
no matmul is recomputed: the FLOPs equal the plain path's. ``linear_cross_entropy_reference`` is the plain path.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = ["linear_cross_entropy", "linear_cross_entropy_reference", "IGNORE_INDEX", "SLICE_ELEMENTS"]

IGNORE_INDEX = -100  # targets equal to this are padding: they count neither in the loss nor in the mean
SLICE_ELEMENTS = 2**24  # logits per slice (64 MB in fp32): 333 tokens of GPT-2's 50,304 columns; bytes: one slice


def linear_cross_entropy_reference(h: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor, *,
                                   vocab_size: int, ignore_index: int = IGNORE_INDEX) -> torch.Tensor:
    """Mean cross-entropy of the logits (h @ weight)[:, :vocab_size] against ``targets`` — all logits at once.
    h: [N, d]; weight: [d, V_padded]; targets: [N]."""
    logits = (h @ weight)[:, :vocab_size]
    return F.cross_entropy(logits.to(torch.promote_types(logits.dtype, torch.float32)), targets,
                           ignore_index=ignore_index)


class _LinearCrossEntropy(torch.autograd.Function):
    @staticmethod
    @torch.amp.custom_fwd(device_type="cuda")
    def forward(ctx, h, weight, targets, vocab_size: int, ignore_index: int, chunk_rows: int):
        w = weight[:, :vocab_size]
        valid = targets != ignore_index
        acc = torch.promote_types(h.dtype, torch.float32)  # the softmax and the sums in at least fp32
        n_valid = valid.sum().clamp(min=1).to(acc)
        loss = torch.zeros((), dtype=acc, device=h.device)
        grad_h = torch.empty_like(h)
        grad_w = torch.zeros(weight.shape, dtype=acc, device=weight.device)
        grad_wv = grad_w[:, :vocab_size]
        # Under fp16 autocast the matmul for grad_h rounds softmax − one-hot to fp16, whose subnormals (< 6e-5) would
        # swallow most of a 50k-way softmax; lifted by 2^10 first and scaled back after (exact in binary floating point).
        half = h.dtype == torch.float16 or (torch.is_autocast_enabled(h.device.type)
                                            and torch.get_autocast_dtype(h.device.type) == torch.float16)
        lift = 1024.0 if half else 1.0
        for start in range(0, h.shape[0], chunk_rows):
            rows = slice(start, start + chunk_rows)
            hc, tc, vc = h[rows], targets[rows], valid[rows]
            logp = torch.log_softmax((hc @ w).to(acc), dim=-1)  # [n, V]
            safe = tc.masked_fill(~vc, 0)
            scale = (vc / n_valid)[:, None]  # d(mean loss)/d(token loss): 1/n_valid, 0 on padding
            loss -= (logp.gather(1, safe[:, None]).squeeze(1) * vc).sum()
            # d(token loss)/d logits = softmax − one-hot; the row scale is applied to the small factors, not to it
            g = logp.exp_()
            g[torch.arange(len(tc), device=g.device), safe] -= 1.0
            g = g.to(hc.dtype)  # under autocast the matmuls below run in its dtype, like the plain backward
            grad_h[rows] = (((g * lift if half else g) @ w.t()) * (scale / lift)).to(h.dtype)
            grad_wv.addmm_((hc * scale).t().to(g.dtype), g)  # accumulates inside the matmul: no [d, V] temporary
        ctx.save_for_backward(grad_h, grad_w.to(weight.dtype))
        return loss / n_valid

    @staticmethod
    @torch.amp.custom_bwd(device_type="cuda")
    def backward(ctx, grad_out):
        grad_h, grad_w = ctx.saved_tensors
        return grad_h * grad_out, grad_w * grad_out, None, None, None, None


def linear_cross_entropy(h: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor, *, vocab_size: int,
                         ignore_index: int = IGNORE_INDEX, chunk_rows: int | None = None) -> torch.Tensor:
    """The same mean cross-entropy as ``linear_cross_entropy_reference``, computed over slices of ``chunk_rows``
    tokens (default: SLICE_ELEMENTS logits a slice) with its gradients formed in the same pass; rows whose target is
    ``ignore_index`` are dropped first (their gradient is zero). Without grad mode it only evaluates the loss (still
    sliced)."""
    chunk_rows = chunk_rows or max(1, SLICE_ELEMENTS // vocab_size)
    valid = targets != ignore_index
    if not bool(valid.all()):  # padding rows count nowhere: drop them before the head (retrieval: one row a prompt)
        h, targets = h[valid], targets[valid]
    if not (torch.is_grad_enabled() and (h.requires_grad or weight.requires_grad)):
        with torch.no_grad():
            valid = targets != ignore_index
            total = sum(linear_cross_entropy_reference(h[s], weight, targets[s], vocab_size=vocab_size,
                                                       ignore_index=ignore_index) * valid[s].sum()
                        for s in (slice(i, i + chunk_rows) for i in range(0, h.shape[0], chunk_rows)) if valid[s].any())
            return total / valid.sum().clamp(min=1)
    return _LinearCrossEntropy.apply(h, weight, targets, vocab_size, ignore_index, chunk_rows)
