"""The executor of a study's independent runs — its (arm, seed) runs, its learning-rate grid — here or on a cluster.

A job is ``job(precision) -> result``: it trains on ``precision.device`` and returns what it made. An executor runs a
list of jobs and returns their results in order (``run(jobs, precision)``):

- ``Local`` runs them in this process: one after another, or one per GPU at a time on a machine with several
  (odebook.training.spread).
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

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

import torch

from odebook.training.runtime import Precision, precision_for, resolve_device
from odebook.training.spread import spread

__all__ = ["Executor", "Local", "Submitit", "JobsFailed"]

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


def _on_the_node(job: Job, device: str) -> Any:
    """What a submitted job runs on its node: the job, on ``device`` as resolved there, with that device's policy."""
    return job(precision_for(resolve_device(device)))


@dataclass(frozen=True)
class Submitit:
    """One job array through submitit (module docstring). ``cluster``: None lets submitit choose (SLURM where
    ``sbatch`` is found, else subprocesses here), or "slurm", "local". SLURM's options: ``partition`` ('' = the
    cluster's default), ``time_min`` per job, ``gpus_per_job``, ``array_parallelism`` (jobs running at once)."""

    folder: Path
    device: str = "auto"
    cluster: str | None = None
    partition: str = ""
    time_min: int = 60
    gpus_per_job: int = 0  # none asked unless the profile says so: a CPU partition refuses a GPU request
    array_parallelism: int = 16
    poll_s: float = 2.0
    progress: bool = True

    def _executor(self):
        import submitit

        ex = submitit.AutoExecutor(folder=self.folder / "%j", cluster=self.cluster)
        ex.update_parameters(timeout_min=self.time_min, slurm_array_parallelism=self.array_parallelism,
                             **({"gpus_per_node": self.gpus_per_job} if ex.cluster == "slurm" and self.gpus_per_job
                                else {}),
                             **({"slurm_partition": self.partition} if self.partition else {}))
        if ex.cluster == "local":  # every job starts at once on this machine: threads spinning while they wait for
            # a descheduled partner would starve the others (odebook.book.wait_policy), so they wait passively
            ex.update_parameters(local_setup=["export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}"])
        return ex

    def run(self, jobs: Sequence[Job], precision: Precision) -> list:
        import submitit
        from tqdm.auto import tqdm

        results: list[Any] = [None] * len(jobs)
        todo = []
        for i, job in enumerate(jobs):
            finished = getattr(job, "finished", None)
            done = finished(precision) if finished else None
            if done is None:
                todo.append(i)
            else:
                results[i] = done
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
