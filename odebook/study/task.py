"""What a run trains on and how it is scored — the one argument that lets ``experiment.run_seeds`` run any study's
seed loop: a language model on token splits (``lm_task``), a retrieval curriculum, a mix of both."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from odebook.data.corpus import TokenSplits, fixed_batches, random_batches
from odebook.models.lm import lm_loss
from odebook.training.train import LossFn

__all__ = ["Task", "lm_task"]


@dataclasses.dataclass(frozen=True)
class Task:
    """``batches(seed)``: the seed's training stream (every model of a seed sees the same one, so seeds pair);
    ``valid``: fixed batches evaluated during training with ``eval_loss_fn`` (default ``loss_fn``); ``test``: fixed
    batches scored once at the end (None: none — a tuning run, or a task scored by ``score`` alone); ``score(run)``:
    anything else a trained run is scored on, kept as ``run.scores``; ``key``: what names the data in a run's
    checkpoint fingerprint; ``tokens_per_step``: for throughput, when a step has a fixed number of tokens."""

    batches: Callable[[int], Iterator]
    valid: Sequence
    test: Sequence | None = None
    loss_fn: LossFn = lm_loss
    eval_loss_fn: LossFn | None = None
    score: Callable[[Any], Any] | None = None
    key: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    tokens_per_step: int | None = None


def lm_task(splits: TokenSplits, *, batch_size: int, seq_len: int, eval_batches: int) -> Task:
    """Language modelling on ``splits``: random training windows from the seed, ``eval_batches`` fixed windows of the
    validation split evaluated during training and of the test split scored once."""
    return Task(batches=lambda seed: random_batches(splits.train, batch_size, seq_len, seed=seed),
                valid=fixed_batches(splits.valid, eval_batches, batch_size, seq_len),
                test=fixed_batches(splits.test, eval_batches, batch_size, seq_len),
                key={"data": splits.description, "batch": (batch_size, seq_len, eval_batches)},
                tokens_per_step=batch_size * seq_len)
