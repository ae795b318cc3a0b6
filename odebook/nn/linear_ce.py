"""The LM head and its cross-entropy in one pass over slices of the tokens, so the full logits are never held.

At a GPT-2 vocabulary's t4 shape the logits of one batch (2,048 tokens × 50,304 columns) are 412 MB in fp32 and their
gradient as much again. ``linear_cross_entropy`` computes, slice by slice of ``chunk_rows`` tokens, the logits h @ W,
their softmax, the loss, and — in the same pass, while the slice's logits are at hand — the gradients of the mean loss
with respect to h and W (softmax − one-hot; the 1 / number-of-counted-tokens scale goes onto the small factors). The
backward pass only scales those by the incoming gradient. Peak memory is one slice's logits, which their softmax
overwrites, instead of the whole matrix and its gradient, and no matmul is recomputed: the FLOPs equal the plain path's.
Evaluation (no grad) takes the same slices and the same softmax.
``linear_cross_entropy_reference`` is the plain path; tests/nn/test_linear_ce.py holds the two together.

Speed (``make bench`` prints the sliced against the plain head): the three matmuls go through odebook.nn.gemm
(oneDNN's fp32 inner product on the CPU); one softmax pass instead of a log-softmax and an exp, in place; the padded
width for every matmul; equal slices of 1,024 tokens at this shape (4 slices of 512 held three matrices at once and
came out slower, with more peak memory).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from odebook.nn import gemm

__all__ = ["linear_cross_entropy", "linear_cross_entropy_reference", "IGNORE_INDEX", "SLICE_ELEMENTS"]

IGNORE_INDEX = -100  # targets equal to this are padding: they count neither in the loss nor in the mean
SLICE_ELEMENTS = 2**26  # most logits a slice (256 MB in fp32): 2,048 tokens of GPT-2 × 50,304 columns: 2 slices of 1024
UNDERFLOW = 1e-30  # target probabilities below this get their loss from a log-sum-exp (see _token_loss)


def linear_cross_entropy_reference(h: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor, *,
                                   vocab_size: int, ignore_index: int = IGNORE_INDEX) -> torch.Tensor:
    """Mean cross-entropy of the logits (h @ weight)[:, :vocab_size] against ``targets`` — all logits at once.
    h: [N, d]; weight: [d, V_padded]; targets: [N]."""
    logits = (h @ weight)[:, :vocab_size]
    return F.cross_entropy(logits.to(torch.promote_types(logits.dtype, torch.float32)), targets,
                           ignore_index=ignore_index)


def _probabilities(hc: torch.Tensor, weight: torch.Tensor, vocab_size: int, acc: torch.dtype) -> torch.Tensor:
    """The softmax of one slice's logits hc @ weight over the first ``vocab_size`` columns, as [n, V_padded] in
    ``acc``: the matmul runs over the padded width (a multiple of HEAD_MULTIPLE, the GEMM's fast shape, faster
    than 50,257 columns), the spare columns' logits are set to −inf (probability 0), and the softmax overwrites the
    logits (one pass; one matrix)."""
    logits = gemm.mm(hc, weight).to(acc)
    logits[:, vocab_size:] = -torch.inf
    return torch.softmax(logits, -1, out=logits)


def _token_loss(p_target: torch.Tensor, h: torch.Tensor, w: torch.Tensor, targets: torch.Tensor,
                acc: torch.dtype) -> torch.Tensor:
    """−log p(target) of each row from the softmax's target probabilities; rows where that probability is below
    UNDERFLOW (a loss above ~69, where it has lost precision or is exactly 0) are recomputed from their logits with a
    log-sum-exp, so the loss stays exact however wrong the model is."""
    loss = -torch.log(p_target)
    low = p_target < UNDERFLOW
    if bool(low.any()):
        logits = (h[low] @ w).to(acc)
        loss[low] = torch.logsumexp(logits, -1) - logits.gather(1, targets[low, None]).squeeze(1)
    return loss


def _sliced(h: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor, vocab_size: int, chunk_rows: int, *,
            gradients: bool) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor] | None]:
    """The mean loss over the rows of h, all of which count, slice by slice of ``chunk_rows``; with ``gradients``, also
    its gradients with respect to h and weight, formed in the same pass (no rows: loss 0, gradients 0)."""
    acc = torch.promote_types(h.dtype, torch.float32)  # the softmax and the sums in at least fp32
    n = max(h.shape[0], 1)
    w = weight[:, :vocab_size]
    loss = torch.zeros((), dtype=acc, device=h.device)
    if gradients:
        grad_h = torch.empty_like(h)
        # summed over the slices, the first of which writes it whole (beta 0 below: no zero-fill); with no slice, 0
        grad_w = (torch.empty_like if h.shape[0] else torch.zeros_like)(weight, dtype=acc)
        # Under fp16 autocast the matmul for grad_h rounds softmax − one-hot to fp16, whose subnormals (< 6e-5) would
        # swallow most of a 50k-way softmax; lifted by 2^10 first and scaled back after (exact in binary floating
        # point).
        half = h.dtype == torch.float16 or (torch.is_autocast_enabled(h.device.type)
                                            and torch.get_autocast_dtype(h.device.type) == torch.float16)
        lift = 1024.0 if half else 1.0
        # The mean's 1/n goes onto the small factors, as a Python float and in ``acc``: a 0-dim tensor would be cast
        # to the fp16 operand's dtype on CUDA, where 1/(n·1024) is subnormal (1,755 tokens: 9.34 units of 2^-24
        # rounded to 9, every gradient below the head 3.6 % too small; seen on an H100).
        scale = 1.0 / n
    for start in range(0, h.shape[0], chunk_rows):
        rows = slice(start, start + chunk_rows)
        hc, tc = h[rows], targets[rows]
        picked = torch.arange(len(tc), device=h.device), tc
        g = _probabilities(hc, weight, vocab_size, acc)  # [n, V_padded]; the spare columns' gradient is 0
        loss += _token_loss(g[picked], hc, w, tc, acc).sum()
        if gradients:
            g[picked] -= 1.0  # d(token loss)/d logits = softmax − one-hot
            g = g.to(hc.dtype)  # under autocast the matmuls below run in its dtype, like the plain backward
            grad_h[rows] = (gemm.mm(g * lift if half else g, weight.t()).to(acc) * (scale / lift)).to(h.dtype)
            # the sum over slices happens inside the matmul
            grad_w = gemm.addmm_(grad_w, (hc.to(acc) * scale).to(g.dtype).t(), g, beta=0.0 if start == 0 else 1.0)
        del g  # before the next slice's logits
    return loss / n, (grad_h, grad_w.to(weight.dtype)) if gradients else None


class _LinearCrossEntropy(torch.autograd.Function):
    @staticmethod
    @torch.amp.custom_fwd(device_type="cuda")
    def forward(ctx, h, weight, targets, vocab_size: int, chunk_rows: int):
        loss, ctx.gradients = _sliced(h, weight, targets, vocab_size, chunk_rows, gradients=True)
        return loss  # the gradients are handed over in backward, not kept (see there)

    @staticmethod
    @torch.amp.custom_bwd(device_type="cuda")
    def backward(ctx, grad_out):
        # The gradients leave ctx, so autograd can take them as the leaves' .grad without a copy (it copies a tensor
        # something else still holds), and the usual incoming gradient, exactly 1, multiplies nothing: at the GPT-2
        # vocabulary's t4 shape that saves two passes over the head's 51 MB gradient.
        if ctx.gradients is None:
            raise RuntimeError("linear_cross_entropy: a second backward pass through the same graph "
                               "(retain_graph=True) is not supported; its gradients were handed over in the first")
        (grad_h, grad_w), ctx.gradients = ctx.gradients, None
        if grad_out.item() != 1.0:
            grad_h, grad_w = grad_h * grad_out, grad_w * grad_out
        return grad_h, grad_w, None, None, None


def linear_cross_entropy(h: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor, *, vocab_size: int,
                         ignore_index: int = IGNORE_INDEX, chunk_rows: int | None = None) -> torch.Tensor:
    """The same mean cross-entropy as ``linear_cross_entropy_reference``, computed over slices of ``chunk_rows``
    tokens (default: equal slices of at most SLICE_ELEMENTS logits) with its gradients formed in the same pass; rows
    whose target is ``ignore_index`` are dropped first (their gradient is zero). Without grad mode it only evaluates
    the loss, over the same slices."""
    valid = targets != ignore_index
    if not bool(valid.all()):  # padding rows count nowhere: drop them before the head (retrieval: one row a prompt)
        h, targets = h[valid], targets[valid]
    if chunk_rows is None:  # as few slices as SLICE_ELEMENTS allows, of equal size (no small ragged last one)
        n_slices = max(1, -(-h.shape[0] * weight.shape[1] // SLICE_ELEMENTS))
        chunk_rows = max(1, -(-h.shape[0] // n_slices))
    if not (torch.is_grad_enabled() and (h.requires_grad or weight.requires_grad)):
        with torch.no_grad():
            return _sliced(h, weight, targets, vocab_size, chunk_rows, gradients=False)[0]
    return _LinearCrossEntropy.apply(h, weight, targets, vocab_size, chunk_rows)
