"""A study's plan: the runs its notebook executes, declared once in its package (``plan(p, data)``, beside
``data(p)``), and costed before the first step by its budget (odebook.book.budget) on the same tasks' batches.

A ``Stage`` is arms trained on one task: each arm on its learning-rate grid on the tuning seeds first, where the stage
has one, then on up to ``seeds`` seeds. The notebook passes its arms, task and config to the study's seed loop
(odebook.study.experiment, odebook.study.looks); the budget reads its cost, ``Stage.runs()``, off the task itself:
training steps on the batches its stream gives (drawn at ``POINTS`` points of a run, so a curriculum's later, longer
prompts count), a validation pass of every batch as often as the training loop evaluates, the test split, and the
forward passes the study declares its scoring makes (``scored``: on the scoring sets' own batches). What else a study
runs — timing pairs, a trained model re-solved — it declares as ``Runs`` on its tasks' batches (``Plan.passes``).

Seeds are counted to ``seeds`` (where looks stop a study early, it takes less), a grid with every extension it may take.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch import nn

from odebook.data import tasks
from odebook.models.lm import lm_loss
from odebook.study.task import Task
from odebook.training.train import TrainConfig

__all__ = ["Work", "Runs", "Stage", "Plan", "evaluations", "retrieval_scoring", "POINTS"]

POINTS = 4  # batches drawn from a run's stream to cost its steps: at its start and each quarter after


@dataclasses.dataclass(frozen=True)
class Work:
    """``n`` passes on ``batch()`` (CPU tensors, as the study's task gives them): training steps (forward and backward
    of ``loss``) when ``train``, else forward passes only (evaluation, scoring)."""
    n: int
    batch: Callable[[], Any]
    loss: Callable[[nn.Module, Any], torch.Tensor] = lm_loss
    train: bool = True


@dataclasses.dataclass(frozen=True)
class Runs:
    """``count`` runs of the model ``build()`` makes, each doing ``work``. ``setup``: each builds its model and counts
    a forward pass's FLOPs before its first step (a run of the seed loop); ``executed``: the runs are the executor's
    jobs, side by side on a CPU with workers; ``per_seed``: one more seed adds one more of them; ``part``: what they
    are for, in the estimate's breakdown (seeds, lr grid, timing, …)."""
    family: str
    build: Callable[[], nn.Module]
    count: int
    work: tuple[Work, ...]
    part: str = "seeds"
    setup: bool = True
    executed: bool = True
    per_seed: bool = True

    @property
    def steps(self) -> int:
        return sum(w.n for w in self.work if w.train)


def evaluations(steps: int, interval: int) -> int:
    """How often the training loop evaluates: every ``interval`` steps and at the end (odebook.training.train)."""
    return steps // interval + (steps % interval != 0)


def _constant(batch: Any) -> Callable[[], Any]:
    return lambda: batch


def retrieval_scoring(sets: Mapping[Any, Sequence[tasks.Example]], tok, ablations: int = 1) -> tuple[Work, ...]:
    """The forward passes of scoring a model on retrieval ``sets`` under ``ablations`` ablations
    (odebook.study.retrieval.score_rows): a pass per ``tasks.SCORE_BATCH`` prompts, on each set's own first prompts."""
    return tuple(Work(ablations * math.ceil(len(examples) / tasks.SCORE_BATCH),
                      _constant(tasks.batch(examples[:tasks.SCORE_BATCH], tok)[:2]), train=False)
                 for examples in sets.values())


def _stream(task: Task, steps: int) -> tuple[Work, ...]:
    """A run's training steps: the batch of seed 0's stream at each of ``POINTS`` evenly spaced steps, for its share."""
    at = [steps * i // POINTS for i in range(POINTS)]
    drawn = dict(zip(at, (b for i, b in enumerate(itertools.islice(task.batches(0), at[-1] + 1)) if i in at)))
    return tuple(Work(until - start, _constant(drawn[start]), task.loss_fn)
                 for start, until in zip(at, [*at[1:], steps]) if until > start)


@dataclasses.dataclass(frozen=True)
class Stage:
    """``arms`` (name → build) trained on ``task`` (or one per arm) with ``config`` (its lr the grid's, then each
    arm's chosen one): the grid ``lrs``, with at most ``extensions`` more rates, on ``tuning_seeds`` seeds, then up to
    ``seeds`` seeds (``per_seed``: as many as the study's seeds, so that one more seed adds one more of each).
    ``scored``: the forward passes a trained run's scoring makes (``task.score``), as ``Work`` on
    its own batches, the same for every arm or one tuple per arm; ``family``: an arm's family in the estimate (the
    arm's name where it has none)."""
    arms: Mapping[str, Callable[[], nn.Module]]
    task: Task | Mapping[str, Task]
    config: TrainConfig
    seeds: int
    lrs: Sequence[float] = ()
    extensions: int = 0
    tuning_seeds: int = 0
    part: str = "seeds"
    per_seed: bool = True
    scored: tuple[Work, ...] | Mapping[str, tuple[Work, ...]] = ()
    family: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def task_of(self, arm: str) -> Task:
        return self.task[arm] if isinstance(self.task, Mapping) else self.task

    def runs(self) -> list[Runs]:
        """What the stage costs: each arm's grid runs (validation only: no tuning run is scored) and its seeds."""
        out, streams = [], {}
        steps, tried = self.config.steps, (len(self.lrs) + self.extensions) * self.tuning_seeds
        for name, build in self.arms.items():
            task = self.task_of(name)
            if id(task) not in streams:
                streams[id(task)] = _stream(task, steps)
            valid = Work(evaluations(steps, self.config.eval_interval) * len(task.valid), _constant(task.valid[0]),
                         task.eval_loss_fn or task.loss_fn, train=False)
            test = (Work(len(task.test), _constant(task.test[0]), task.loss_fn, train=False),) if task.test else ()
            scored = self.scored[name] if isinstance(self.scored, Mapping) else self.scored
            family = self.family.get(name, name)
            grid = "lr grid" if self.part == "seeds" else f"{self.part} lr grid"
            out += [Runs(family, build, tried, (*streams[id(task)], valid), part=grid, per_seed=False)] * bool(tried)
            out.append(Runs(family, build, self.seeds, (*streams[id(task)], valid, *test, *scored), part=self.part,
                            per_seed=self.per_seed))
        return out


@dataclasses.dataclass(frozen=True)
class Plan:
    """A study's stages by name and the passes it makes beyond them (``Runs``: timing, re-solving)."""
    stages: Mapping[str, Stage]
    passes: tuple[Runs, ...] = ()

    def __getitem__(self, name: str) -> Stage:
        return self.stages[name]

    def runs(self) -> list[Runs]:
        return [r for stage in self.stages.values() for r in stage.runs()] + list(self.passes)
