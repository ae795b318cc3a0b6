"""Data-parallel training on torch.distributed: the helpers the one training loop calls, and a launcher.

Launched by ``torchrun`` (one node or several) or from a notebook through ``launch`` (torch's elastic launcher, the
function behind torchrun), every process runs the same training loop. Each reads the same global batch from the same
seeded stream and keeps its own contiguous rows of it (``shard``); DistributedDataParallel averages the gradients,
so with equal rows per rank the step equals a single-process step on the global batch (up to the order of the
floating-point sums). Rank 0 evaluates and writes logs and checkpoints (``on_main``, ``is_main``); the checkpoint
format is the single-process one. gloo on CPU, NCCL on CUDA. Without an initialised process group every helper is
the identity, so single-process runs pay nothing.

A rank that freezes (stopped, swapped out, stuck in a driver) cannot hang the job: every collective times out after
``ODEBOOK_COLLECTIVE_TIMEOUT_S`` seconds (default 300; ``collective_timeout``), and ``watched`` turns that timeout
into ``RankFrozen``, whose message names the ranks whose heartbeat (a thread that counts in the rendezvous store
every second) stopped, with their pid and host; a frozen rank on this host is ended with SIGKILL, one elsewhere by
its torchrun, whose monitor ends the job when a rank fails. A killed rank ends the job at once, as torchrun does.

Dropout draws different masks on each rank than one process would on the global batch, so data-parallel runs with
dropout match a single-process run in distribution, not bit for bit.
"""

from __future__ import annotations

import atexit
import contextlib
import datetime as dt
import itertools
import os
import signal
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

__all__ = ["active", "rank", "world_size", "is_main", "init", "shard", "wrap", "mean", "on_main", "barrier", "launch",
           "RankFrozen", "collective_timeout", "watched", "TIMEOUT_ENV"]

TIMEOUT_ENV = "ODEBOOK_COLLECTIVE_TIMEOUT_S"
DEFAULT_TIMEOUT_S = 300.0  # a step, an evaluation on rank 0 or a checkpoint write must finish within it
HEARTBEAT_S = 1.0


class RankFrozen(RuntimeError):
    """A collective timed out; the message names the ranks that stopped answering."""


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
        dist.init_process_group("nccl" if cuda else "gloo", timeout=dt.timedelta(seconds=collective_timeout()))
        _start_heartbeat()
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


def barrier() -> None:
    if active():
        dist.barrier()


def collective_timeout() -> float:
    """Seconds a collective waits for the other ranks: ``$ODEBOOK_COLLECTIVE_TIMEOUT_S``, default 300."""
    value = os.environ.get(TIMEOUT_ENV, "")
    try:
        seconds = float(value) if value else DEFAULT_TIMEOUT_S
    except ValueError:
        raise ValueError(f"{TIMEOUT_ENV}={value!r}: must be a number of seconds") from None
    if not seconds > 0:
        raise ValueError(f"{TIMEOUT_ENV}={value!r}: must be > 0")
    return seconds


_HEARTBEATS: list = []  # this process's client of the rendezvous store, once the heartbeat runs
_BEATING: list = []  # (stop event, thread) of this process's heartbeat


def _start_heartbeat() -> None:
    """A daemon thread that counts up in the rendezvous store (MASTER_ADDR:MASTER_PORT, which torchrun and ``launch``
    set) every HEARTBEAT_S: a stopped process stops counting. Without that store, no heartbeat (ranks go unnamed).
    It is stopped and joined at exit (``_stop_heartbeat``): a thread left inside the store's C++ client while the
    interpreter shuts down aborts the process ("terminate called without an active exception")."""
    if "MASTER_ADDR" not in os.environ or "MASTER_PORT" not in os.environ:
        return
    client = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False,
                           timeout=dt.timedelta(seconds=60))
    store = dist.PrefixStore("odebook/heartbeat/", client)
    me, where = str(rank()), f"{os.getpid()} {socket.gethostname()}"
    stop = threading.Event()

    def beat() -> None:
        with contextlib.suppress(Exception):  # the store goes away at the end of the job
            for n in itertools.count():
                store.set(me, f"{n} {where}")
                if stop.wait(HEARTBEAT_S):
                    return

    thread = threading.Thread(target=beat, name="odebook-heartbeat", daemon=True)
    _HEARTBEATS[:], _BEATING[:] = [store], [(stop, thread)]
    thread.start()
    atexit.register(_stop_heartbeat)


def _stop_heartbeat() -> None:
    """Stop this process's heartbeat and wait for its thread to leave the store (at most one beat)."""
    for stop, thread in _BEATING:
        stop.set()
        thread.join(timeout=5 * HEARTBEAT_S)
    _BEATING.clear()


def _silent_ranks() -> dict[int, tuple[int, str]]:
    """{rank: (pid, host)} of the ranks whose heartbeat did not advance over three beats."""
    if not _HEARTBEATS:
        return {}
    store, others = _HEARTBEATS[0], [r for r in range(world_size()) if r != rank()]

    def read() -> dict[int, list[str]]:
        return {r: store.get(str(r)).decode().split() for r in others}

    before = read()
    time.sleep(3 * HEARTBEAT_S)
    after = read()
    return {r: (int(after[r][1]), after[r][2]) for r in others if after[r][0] == before[r][0]}


@contextlib.contextmanager
def watched() -> Iterator[None]:
    """Around a data-parallel run: a collective's timeout becomes RankFrozen naming the silent ranks (module
    docstring), its message printed on stderr first; then a frozen rank on this host is ended so the job ends now
    (torchrun may stop this process as soon as it sees that)."""
    try:
        yield
    except RuntimeError as err:
        if not active() or "timed out" not in str(err).lower() and "timeout" not in str(err).lower():
            raise
        silent, host = _silent_ranks(), socket.gethostname()
        named = ", ".join(f"rank {r} (pid {pid} on {where})" for r, (pid, where) in silent.items()) or \
            "no rank named (every heartbeat advanced: a rank is slow rather than frozen)"
        message = (f"rank {rank()}: a collective waited {collective_timeout():g} s ({TIMEOUT_ENV}) for the other "
                   f"ranks and timed out; stopped answering: {named}; ending the job")
        print(message, file=sys.stderr, flush=True)
        for pid, where in silent.values():
            if where == host:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
        raise RankFrozen(message) from err


def _comm_device() -> torch.device:
    """Where a tensor must live to be sent: NCCL moves only CUDA tensors (this rank's GPU), gloo CPU ones."""
    return torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu")


def _joined(fn: Callable[..., Any], *args: Any) -> Any:
    """What each launched process runs: join the process group, then ``fn(*args)``."""
    init()
    try:
        with watched():
            return fn(*args)
    finally:
        _stop_heartbeat()


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
