"""Measurements of ODE-block variants: peak memory and time of a training step, gradient error against direct
backpropagation, function evaluations, and the speed of cached against recomputed generation.

Peak memory on CUDA is torch's allocator peak; on the CPU, where torch keeps no such counter, it is the running
sum of every allocation and free the profiler records (``profile_memory``), in the order they happened — also those
inside an operation, such as a custom autograd Function's temporaries. Both count only what the measured function
allocates beyond what was already allocated (weights, optimizer state).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence

import pandas as pd
import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile

from odebook.models.arms import HybridConfig
from odebook.models.lm import LM, generate, lm_loss
from odebook.nn import torch_private
from odebook.nn.ode import count_evaluations
from odebook.training.runtime import Precision, synchronize

__all__ = ["peak_memory", "gradient", "relative_error", "nfe_per_forward", "sensitivity_sweep", "generation_speed"]


def peak_memory(fn: Callable[[], object], device: torch.device) -> int:
    """Bytes allocated at the peak of ``fn()`` beyond what was allocated before it."""
    if device.type == "cuda":
        synchronize(device)
        before = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        fn()
        synchronize(device)
        return torch.cuda.max_memory_allocated(device) - before
    with torch_private.quiet_stderr(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    # Every allocation and free, in time order, also those inside an operation (the per-operator totals of
    # prof.events() net out a temporary that an operation frees before it returns).
    changes = torch_private.cpu_allocations(prof)
    current = peak = 0
    for _, size in sorted(changes, key=lambda change: change[0]):
        current += size
        peak = max(peak, current)
    return peak


def gradient(model: nn.Module) -> torch.Tensor:
    """Every parameter's gradient, flattened into one vector (zeros where there is none)."""
    return torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).flatten().double()
                      for p in model.parameters()])


def relative_error(a: torch.Tensor, reference: torch.Tensor) -> float:
    """‖a − reference‖ / ‖reference‖."""
    return ((a - reference).norm() / reference.norm()).item()


@torch.no_grad()
def nfe_per_forward(model: nn.Module, x: torch.Tensor, precision: Precision) -> int:
    """Vector-field evaluations of one forward pass of ``model`` on ``x`` (what dopri5 chose for this input)."""
    was_training = model.training
    model.eval()
    with count_evaluations(model) as evaluations, precision.autocast():
        model(x)
    model.train(was_training)
    return evaluations.count


def sensitivity_sweep(config: HybridConfig, weights: Mapping[str, torch.Tensor],
                      batch: tuple[torch.Tensor, torch.Tensor], precision: Precision, *, sensitivities: Sequence[str],
                      steps: Sequence[int], repeats: int = 3) -> pd.DataFrame:
    """For every number of steps and every sensitivity: peak memory of one training step (forward + backward) of
    ``config``'s hybrid with ``weights``, its median time over ``repeats`` (after one warm-up), the vector-field
    evaluations of its forward and backward passes, and the relative error of its gradient against the "direct"
    sensitivity's at the same number of steps. Each model is ``config.replace(steps=…, sensitivity=…)``, so the
    rule that validates a configuration validates every point of the sweep."""
    x, y = (t.to(precision.device) for t in batch)
    rows = []
    for n in steps:
        reference = None
        for sensitivity in sorted(sensitivities, key=lambda s: s != "direct"):  # direct first: it is the reference
            model = config.replace(steps=n, sensitivity=sensitivity).hybrid()
            model.load_state_dict(weights)
            model.to(precision.device).train()

            def step() -> tuple[int, int]:
                """One training step; returns the vector-field evaluations of its forward and backward pass."""
                model.zero_grad(set_to_none=True)
                with count_evaluations(model) as evaluations:
                    with precision.autocast():
                        loss = lm_loss(model, (x, y))
                    forward = evaluations.count
                    loss.backward()
                return forward, evaluations.count - forward

            nfe_forward, nfe_backward = step()  # also the warm-up
            grad = gradient(model)
            reference = grad if sensitivity == "direct" else reference
            times = []
            for _ in range(repeats):
                synchronize(precision.device)
                t0 = time.perf_counter()
                step()
                synchronize(precision.device)
                times.append(time.perf_counter() - t0)
            rows.append({"steps": n, "sensitivity": sensitivity,
                         "peak_memory_mb": peak_memory(step, precision.device) / 2**20,
                         "ms_per_step": 1000 * statistics.median(times), "nfe_forward": nfe_forward,
                         "nfe_backward": nfe_backward,
                         "grad_rel_error": relative_error(grad, reference) if reference is not None else float("nan")})
    return pd.DataFrame(rows)


def generation_speed(model: LM, prompt: torch.Tensor, n_new: int) -> dict:
    """Greedy generation of ``n_new`` tokens after ``prompt`` [B, T], with the KV cache and by recomputation:
    seconds of each (after a warm-up of a few tokens), the speed-up, and whether the tokens are identical."""
    out, seconds = {}, {}
    for cache in (True, False):
        generate(model, prompt, 4, temperature=0, cache=cache)  # warm-up: first-call allocations and caches
        synchronize(prompt.device)
        t0 = time.perf_counter()
        out[cache] = generate(model, prompt, n_new, temperature=0, cache=cache)
        synchronize(prompt.device)
        seconds[cache] = time.perf_counter() - t0
    return {"new_tokens": n_new, "cached_s": seconds[True], "recomputed_s": seconds[False],
            "speedup": seconds[False] / seconds[True], "identical_tokens": bool(torch.equal(out[True], out[False]))}
