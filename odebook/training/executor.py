"""The executor of a study's independent runs — its (arm, seed) runs, its learning-rate grid — here or on a cluster.

A job is ``job(precision) -> result``: it trains on ``precision.device`` and returns what it made. An executor runs a
list of jobs and returns their results in order (``run(jobs, precision)``):

- ``Local`` runs them in this process: one after another, or one per GPU at a time on a machine with several
  (odebook.training.spread).
- ``Workers`` runs them side by side on this machine's CPU cores: a pool of worker processes of one thread each (by
  default), one job per worker at a time. The studies' steps are small and half element-wise, so two one-thread
  runs finish more work per minute than one run on two threads (``make bench`` measures it per study); each worker's
  arithmetic is single-threaded and so the same on every re-run.
- ``Submitit`` submits them as one job array through submitit: on SLURM where ``sbatch`` is found, else (or with
  ``cluster="local"``) as subprocesses of this machine, all at once, their OpenMP threads waiting passively. It
  waits with a progress bar, gathers the results, and raises ``JobsFailed`` with each failed job's own error once
  every job has ended (the others' results are kept by their checkpoints). Each job resolves ``device`` on the
  node it runs on and trains with that device's precision policy. A job that offers ``finished(precision)`` — a
  run already finished in its checkpoint — is asked first, here: a finished run is not resubmitted. Jobs and
  results travel as pickles (cloudpickle) through ``folder``, which every node must see; the pickles of jobs that
  succeeded are deleted, their logs kept.

torchrun is for one data-parallel job (odebook.training.distributed); this is for many independent ones.
"""

from __future__ import annotations

import atexit
import dataclasses
import multiprocessing
import os
import signal
import sys
import tempfile
import uuid
from collections.abc import Callable, Sequence
from dataclasses import KW_ONLY, dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

import torch

from odebook.training.runtime import Precision, precision_for, resolve_device
from odebook.training.spread import spread

__all__ = ["Executor", "Local", "Workers", "Submitit", "JobsFailed", "usable_cores"]

T = TypeVar("T")
Job = Callable[[Precision], T]


class JobsFailed(RuntimeError):
    """Jobs of an array failed; the message holds each one's own error (its traceback, as the job raised it)."""


class Executor(Protocol):
    def run(self, jobs: Sequence[Job], precision: Precision) -> list: ...


@dataclass(frozen=True)
class Local:
    """In this process: one job after another, or one per GPU (``devices``, default: every GPU when there are
    several; odebook.training.spread)."""

    devices: Sequence[torch.device] | None = None

    def run(self, jobs: Sequence[Job], precision: Precision) -> list:
        return spread(jobs, precision, self.devices)


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity, which SLURM and containers narrow)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _finished_first(jobs: Sequence[Job], precision: Precision) -> tuple[list, list[int]]:
    """The results of the jobs already finished (a job's ``finished(precision)``, asked here), and the indices of
    the others, which must run."""
    results: list[Any] = [None] * len(jobs)
    todo = []
    for i, job in enumerate(jobs):
        finished = getattr(job, "finished", None)
        done = finished(precision) if finished else None
        if done is None:
            todo.append(i)
        else:
            results[i] = done
    return results, todo


def _worker_start(threads: int, parent: int) -> None:
    """A worker's first acts: on Linux, ask for SIGTERM when the process that started it dies (a kernel killed outright
    runs no atexit, and its workers would train on to the end of their jobs), and stop at once if it already has;
    then its thread count, before any parallel work."""
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG
        if os.getppid() != parent:
            os._exit(1)
    torch.set_num_threads(threads)


_LOADED: dict[str, list] = {}  # in a worker: the jobs of the call it serves (by the call's id), read once


def _in_a_worker(path: str, call: str, index: int, device: str, dtype: torch.dtype | None) -> bytes:
    """What a worker runs: job ``index`` of the jobs in ``path`` (read once per call: what the jobs share, such as
    a task's token tensors, is stored and read once, not once per job), with the policy of ``device`` as set up in
    this process (its CPU flags) and the caller's dtype; the result cloudpickled back."""
    import cloudpickle

    if call not in _LOADED:  # keyed by the call, not the path: a later call's file may reuse a name
        _LOADED.clear()
        _LOADED[call] = cloudpickle.loads(Path(path).read_bytes())
    job = _LOADED[call][index]
    return cloudpickle.dumps(job(dataclasses.replace(precision_for(torch.device(device)), dtype=dtype)))


_POOLS: dict[tuple[int, int], Any] = {}  # the worker pools started in this process, kept for its later calls


def _pool(processes: int, threads: int):
    """This process's pool of ``processes`` workers of ``threads`` threads, started (spawned: no thread state is
    inherited) at its first use and kept: a study calls its executor once per look and per grid, and each start
    costs seconds of imports."""
    key = (processes, threads)
    if key not in _POOLS:
        context = multiprocessing.get_context("spawn")
        _POOLS[key] = context.Pool(processes, initializer=_worker_start, initargs=(threads, os.getpid()))
        atexit.register(_stop, key)
    return _POOLS[key]


def _stop(key: tuple[int, int]) -> None:
    pool = _POOLS.pop(key, None)
    if pool is not None:
        pool.terminate()
        pool.join()


@dataclass(frozen=True)
class Workers:
    """Side by side on this machine's CPU: a pool of ``processes`` worker processes of ``threads`` threads each
    (kept for this process's later calls); one job per worker at a time, the results in the jobs' order. A job
    finished in its checkpoint is taken here first. A job's error is raised here, with its own traceback as its
    cause, once the jobs before it have come back; then, as on an interrupt (Ctrl-C, SIGTERM), the workers stop. On
    Linux they stop too when this process is killed outright (SIGKILL), which runs no cleanup here."""

    processes: int
    threads: int = 1

    def describe(self) -> str:
        return f"{self.processes} worker processes × {self.threads} thread{'s' * (self.threads > 1)}"

    def run(self, jobs: Sequence[Job], precision: Precision) -> list:
        import cloudpickle

        results, todo = _finished_first(jobs, precision)
        if not todo:
            return results
        pool = _pool(self.processes, self.threads)
        # the jobs in one pickle (cloudpickle: a notebook's closures travel by value), each shared object once
        with tempfile.NamedTemporaryFile(prefix="odebook-jobs-", suffix=".pkl") as file:
            file.write(cloudpickle.dumps([jobs[i] for i in todo]))
            file.flush()
            try:
                call = uuid.uuid4().hex
                pending = [(i, pool.apply_async(_in_a_worker, (file.name, call, n, precision.device.type,
                                                               precision.dtype))) for n, i in enumerate(todo)]
                for i, result in pending:
                    results[i] = cloudpickle.loads(result.get())
            except BaseException:  # a job failed or the caller was interrupted: no worker goes on with the others
                _stop((self.processes, self.threads))
                raise
        return results


def _on_the_node(job: Job, device: str) -> Any:
    """What a submitted job runs on its node: the job, on ``device`` as resolved there, with that device's policy."""
    return job(precision_for(resolve_device(device)))


@dataclass(frozen=True)
class Submitit:
    """One job array through submitit (module docstring). ``cluster``: None lets submitit choose (SLURM where
    ``sbatch`` is found, else subprocesses here), or "slurm", "local". SLURM's options carry the study parameters'
    names and have no default here — the parameters' are the only ones (``odebook.params``, ``slurm_*``):
    ``slurm_partition`` ('' = the cluster's default), ``slurm_time_min`` per job, ``slurm_gpus_per_job`` (0: none
    asked; a CPU partition refuses a GPU request), ``slurm_array_parallelism`` (jobs running at once)."""

    folder: Path
    _: KW_ONLY
    slurm_partition: str
    slurm_time_min: int
    slurm_gpus_per_job: int
    slurm_array_parallelism: int
    device: str = "auto"
    cluster: str | None = None
    poll_s: float = 2.0
    progress: bool = True

    def _executor(self):
        import submitit

        ex = submitit.AutoExecutor(folder=self.folder / "%j", cluster=self.cluster)
        gpus = ex.cluster == "slurm" and self.slurm_gpus_per_job
        ex.update_parameters(timeout_min=self.slurm_time_min, slurm_array_parallelism=self.slurm_array_parallelism,
                             **({"gpus_per_node": self.slurm_gpus_per_job} if gpus else {}),
                             **({"slurm_partition": self.slurm_partition} if self.slurm_partition else {}))
        if ex.cluster == "local":  # every job starts at once on this machine: threads spinning while they wait for
            # a descheduled partner would starve the others (odebook.book.wait_policy), so they wait passively
            ex.update_parameters(local_setup=["export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}"])
        return ex

    def run(self, jobs: Sequence[Job], precision: Precision) -> list:
        import submitit
        from tqdm.auto import tqdm

        results, todo = _finished_first(jobs, precision)
        if not todo:
            return results
        self.folder.mkdir(parents=True, exist_ok=True)
        ex = self._executor()
        with ex.batch():
            submitted = [ex.submit(_on_the_node, jobs[i], self.device) for i in todo]
        index = {id(s): i for s, i in zip(submitted, todo)}
        failures = []
        bar = tqdm(total=len(submitted), desc=f"{len(submitted)} jobs ({ex.cluster}, {self.folder})",
                   disable=not self.progress)
        for job in submitit.helpers.as_completed(submitted, poll_frequency=self.poll_s):
            error = job.exception()
            if error is None:
                results[index[id(job)]] = job.result()
                for pickle in job.paths.folder.glob(f"{job.job_id}_*.pkl"):
                    pickle.unlink(missing_ok=True)
            else:
                failures.append(f"job {job.job_id} (run {index[id(job)]} of this array): {error}")
            bar.update()
        bar.close()
        if failures:
            raise JobsFailed(f"{len(failures)} of {len(submitted)} jobs failed (logs in {self.folder}):\n\n"
                             + "\n\n".join(failures))
        return results
