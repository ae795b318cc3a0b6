"""Data-parallel training on torch.distributed: the helpers the one training loop calls, and a launcher.

Launched by ``torchrun`` (one node or several) or from a notebook through ``launch`` (torch's elastic launcher, the
function behind torchrun), every process runs the same training loop. Each reads the same global batch from the same
seeded stream and keeps its own contiguous rows of it (``shard``); DistributedDataParallel averages the gradients,
so with equal rows per rank the step equals a single-process step on the global batch (up to the order of the
floating-point sums). Rank 0 evaluates and writes logs and checkpoints (``on_main``, ``is_main``); the checkpoint
format is the single-process one. gloo on CPU, NCCL on CUDA. Without an initialised process group every helper is
the identity, so single-process runs pay nothing.

Dropout draws different masks on each rank than one process would on the global batch, so data-parallel runs with
dropout match a single-process run in distribution, not bit for bit.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

__all__ = ["active", "rank", "world_size", "is_main", "init", "shard", "wrap", "mean", "on_main", "launch"]


def active() -> bool:
    return dist.is_available() and dist.is_initialized()


def rank() -> int:
    return dist.get_rank() if active() else 0


def world_size() -> int:
    return dist.get_world_size() if active() else 1


def is_main() -> bool:
    return rank() == 0


def init() -> torch.device:
    """Join the process group torchrun (or ``launch``) set up in the environment; returns this rank's device."""
    cuda = torch.cuda.is_available()
    if not active():
        dist.init_process_group("nccl" if cuda else "gloo")
    if cuda:
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
        torch.cuda.set_device(device)
        return device
    return torch.device("cpu")


def shard(batch: Any) -> Any:
    """This rank's contiguous rows of every tensor in ``batch`` (the global batch); the whole batch alone."""
    if not active():
        return batch
    if isinstance(batch, torch.Tensor):
        n, r = batch.shape[0], rank()
        if n % world_size():
            raise ValueError(f"global batch of {n} rows does not split evenly over {world_size()} processes")
        rows = n // world_size()
        return batch[r * rows:(r + 1) * rows]
    return type(batch)(shard(b) for b in batch)


def wrap(model: nn.Module) -> nn.Module:
    """``model`` in DistributedDataParallel when a process group is active, else ``model`` itself."""
    if not active():
        return model
    device_ids = [model_device.index] if (model_device := next(model.parameters()).device).type == "cuda" else None
    return nn.parallel.DistributedDataParallel(model, device_ids=device_ids)


def mean(x: torch.Tensor) -> torch.Tensor:
    """The mean of ``x`` over the ranks (a detached copy)."""
    if not active():
        return x
    y = x.detach().to(_comm_device(), copy=True)
    dist.all_reduce(y, op=dist.ReduceOp.SUM)
    return (y / world_size()).to(x.device)


def on_main(fn: Callable[[], float]) -> float:
    """Run ``fn`` on rank 0 only and hand its number to every rank."""
    if not active():
        return fn()
    value = torch.tensor([fn() if is_main() else 0.0], dtype=torch.float64, device=_comm_device())
    dist.broadcast(value, src=0)
    return float(value.item())


def _comm_device() -> torch.device:
    """Where a tensor must live to be sent: NCCL moves only CUDA tensors (this rank's GPU), gloo CPU ones."""
    return torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu")


def _joined(fn: Callable[..., Any], *args: Any) -> Any:
    """What each launched process runs: join the process group, then ``fn(*args)``."""
    init()
    return fn(*args)


def launch(fn: Callable[..., Any], *args: Any, nprocs: int | None = None) -> dict[int, Any]:
    """Run ``fn(*args)`` in ``nprocs`` processes on this machine (default: one per GPU, else 2) through torch's
    elastic launcher, each process in the group (``init`` is called for it); ``fn`` must be importable (a
    module-level function). Returns each rank's return value."""
    from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    nprocs = nprocs or torch.cuda.device_count() or 2
    with tempfile.TemporaryDirectory(prefix="odebook-launch-") as logs:  # the launcher's per-rank files, removed after
        config = LaunchConfig(min_nodes=1, max_nodes=1, nproc_per_node=nprocs, rdzv_backend="c10d",
                              rdzv_endpoint="localhost:0", run_id=f"odebook-{os.getpid()}", max_restarts=0,
                              monitor_interval=0.1, logs_specs=DefaultLogsSpecs(log_dir=logs))
        return elastic_launch(config, _joined)(fn, *args)
