"""Independent runs (models × seeds, a learning-rate grid) spread over the GPUs of one machine, one run per GPU at a
time: the alternative to data-parallel training when each run fits on one GPU.

A run is a job ``job(precision)`` that trains on ``precision.device``. The jobs run in threads, one per GPU (CUDA
kernels release the GIL, so the GPUs work at once). Each job seeds its own GPU's generator alone and builds its model
under ``BUILD`` (the CPU's generators are shared by every thread), so its numbers are those of the same run on one
GPU. Results come back in the jobs' order; an exception in a job is raised by ``spread``.
"""

from __future__ import annotations

import dataclasses
import queue
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import torch

from odebook.training.runtime import Precision, precision_for

__all__ = ["BUILD", "available", "spread"]

T = TypeVar("T")
BUILD = threading.Lock()  # hold while seeding the CPU's generators and building a model from them


def available(precision: Precision) -> list[torch.device]:
    """Every GPU of this machine when the runs are on CUDA and there are several, else none (runs go in turn)."""
    n = torch.cuda.device_count() if precision.device.type == "cuda" else 0
    return [torch.device("cuda", i) for i in range(n)] if n > 1 else []


def spread(jobs: Sequence[Callable[[Precision], T]], precision: Precision,
           devices: Sequence[torch.device] | None = None) -> list[T]:
    """Each job's result, in order. With fewer than two ``devices`` (default: ``available(precision)``) the jobs are
    called with ``precision`` one after another; else each on the first free device, with ``precision``'s dtype."""
    devices = available(precision) if devices is None else list(devices)
    if len(devices) < 2:
        return [job(precision) for job in jobs]
    free: queue.Queue[torch.device] = queue.Queue()
    for device in devices:
        free.put(device)

    def on_a_free_device(job: Callable[[Precision], T]) -> T:
        device = free.get()
        try:  # precision_for also sets this thread's CPU flags (denormals), as the main thread's were set
            return job(dataclasses.replace(precision_for(device), dtype=precision.dtype))
        finally:
            free.put(device)

    with ThreadPoolExecutor(max_workers=len(devices), thread_name_prefix="odebook-run") as pool:
        return list(pool.map(on_a_free_device, jobs))
