"""A study's plan: what its runs do, counted for its budget (odebook.book.budget). Each group of training runs is the
work one run does — training steps on batches of the shapes its loader gives, and forward passes of evaluation and
scoring — built from the work of the tasks the studies share (a language model on token windows, the retrieval
curriculum and its scoring, MQAR). Each study declares its runs beside its parameters (``runs``, a method of its
parameters class); the cost model reads them and names no study.

Seeds are counted to ``n_seeds`` (where looks stop a study early, it takes less) and a learning-rate grid with every
extension it may take. Generation, the dynamics probes, tables and figures are not counted (the budget's start-up
allowance holds them).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

from odebook.data import mqar, tasks
from odebook.data.corpus import Tokenizer
from odebook.models.lm import lm_loss

__all__ = ["Work", "Runs", "SEEDED", "EXECUTED", "evaluations", "token_windows", "lm_work", "tuned", "prompts",
           "curriculum_work", "scoring_work", "mqar_batch"]

SEEDED = ("seeds", "MQAR", "retrieval", "re-solving", "sensitivity")  # the parts whose runs come once per seed
# the parts run as an executor's jobs (experiment.run_seeds)
EXECUTED = ("seeds", "lr grid", "MQAR", "retrieval", "WikiText")


@dataclasses.dataclass(frozen=True)
class Work:
    """``n`` passes on ``batch()`` (CPU tensors, as the study's loader gives them): training steps (forward and
    backward of ``loss``) when ``train``, else forward passes only (evaluation, scoring)."""
    n: int
    batch: Callable[[], Any]
    loss: Callable[[nn.Module, Any], torch.Tensor] = lm_loss
    train: bool = True


@dataclasses.dataclass(frozen=True)
class Runs:
    """``count`` training runs of the model ``build()`` makes, each doing ``work``; ``setup``: each is a run of the
    seed loop, which builds its model and counts a forward pass's FLOPs before its first step."""
    family: str
    build: Callable[[], nn.Module]
    count: int
    work: tuple[Work, ...]
    setup: bool = True
    part: str = "seeds"  # what these runs are for, in a run's breakdown: seeds, lr grid, timing, …

    @property
    def per_seed(self) -> bool:
        """One more seed adds one more of these runs (``count`` follows ``n_seeds``)."""
        return self.part in SEEDED

    @property
    def steps(self) -> int:
        return sum(w.n for w in self.work if w.train)


def evaluations(steps: int, interval: int) -> int:
    """How often the training loop evaluates: every ``interval`` steps and at the end (odebook.training.train)."""
    return steps // interval + (steps % interval != 0)


def token_windows(vocab: int, batch_size: int, seq_len: int) -> Callable[[], tuple[torch.Tensor, torch.Tensor]]:
    """A batch of ``batch_size`` windows of ``seq_len`` tokens and their next tokens (odebook.data.corpus's shape)."""
    def batch() -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.randint(0, vocab, (batch_size, seq_len + 1), generator=torch.Generator().manual_seed(0))
        return x[:, :-1], x[:, 1:]
    return batch


def lm_work(p: Any, tok: Tokenizer) -> tuple[Work, Work]:
    """A language-model run (odebook.study.task.lm_task): its training steps, its evaluations and the test split."""
    windows = token_windows(tok.vocab_size, p.batch_size, p.seq_len)
    forwards = (evaluations(p.steps, p.eval_interval) + 1) * p.eval_batches
    return Work(p.steps, windows), Work(forwards, windows, train=False)


def tuned(p: Any, tok: Tokenizer, family: str, build: Callable[[], nn.Module], extensions: int = 0) -> list[Runs]:
    """A language model's grid on each tuning seed (validation only), with every ``extensions`` it may take, then
    every seed at the chosen rate (odebook.study.experiment.tune_then_run: no tuning run is a confirmatory run)."""
    steps, forwards = lm_work(p, tok)
    tried = (len(p.lr_grid) + extensions) * p.tuning_seeds
    grid = Runs(family, build, tried, (steps, dataclasses.replace(forwards, n=forwards.n - p.eval_batches)),
                part="lr grid")
    return [grid, Runs(family, build, p.n_seeds, (steps, forwards))]


def prompts(tok: Tokenizer, batch_size: int, ks: Sequence[int], n_filler: int) -> Callable[[], tuple]:
    """A training batch of the retrieval curriculum at ``n_filler`` filler sentences (every question answered)."""
    return lambda: next(tasks.curriculum_batches(tok, batch_size, 0, [(1, n_filler)], ks))


def curriculum_work(p: Any, steps: int, batch: Callable[[int], Callable[[], Any]], loss=lm_loss) -> tuple[Work, ...]:
    """Training steps stage by stage (tasks.equal_stages), each stage on ``batch(n_filler)``: its own prompts."""
    work, done = [], 0
    for until, n_filler in tasks.equal_stages(p.curriculum, steps):
        if min(until, steps) > done:
            work.append(Work(min(until, steps) - done, batch(n_filler), loss))
            done = min(until, steps)
    return tuple(work)


def scoring_work(p: Any, tok: Tokenizer, ablations: int) -> tuple[Work, ...]:
    """odebook.study.retrieval.score_rows: every evaluation set under each ablation, SCORE_BATCH prompts a pass."""
    sets = tasks.evaluation_sets(p.retrieval_eval_examples, p.eval_seed, ks=p.ks, n_filler=max(p.curriculum))
    return tuple(Work(ablations * math.ceil(len(examples) / tasks.SCORE_BATCH),
                      functools.partial(lambda ex: tasks.batch(ex, tok)[:2], examples[:tasks.SCORE_BATCH]),
                      train=False)
                 for examples in sets.values())


def mqar_batch(vocab: mqar.Vocab, batch_size: int, k: int, seq_len: int, power_a: float = 0.1) -> Callable[[], tuple]:
    """A training batch of MQAR sequences (odebook.data.mqar.make_batch): inputs and targets."""
    def batch() -> tuple[torch.Tensor, torch.Tensor]:
        b = mqar.make_batch(batch_size, vocab=vocab, k=k, seq_len=seq_len, generator=torch.Generator().manual_seed(0),
                            power_a=power_a)
        return b.x, b.y
    return batch
