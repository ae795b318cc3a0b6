"""Peak memory of a function's run: what the budget and the seed loop report beside every training step.

On CUDA it is torch's allocator peak; on the CPU, where torch keeps no such counter, it is the running sum of every
allocation and free the profiler records (``profile_memory``), in the order they happened — also those inside an
operation, such as a custom autograd Function's temporaries. Both count only what the measured function allocates
beyond what was already allocated (weights, optimizer state).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.profiler import ProfilerActivity, profile

from odebook.nn import torch_private
from odebook.training.runtime import synchronize

__all__ = ["peak_memory"]


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
