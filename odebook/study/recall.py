"""The synthetic recall tasks as a study's task: multi-query associative recall (odebook.data.mqar; study 03's
capacity curve, which study.capacity reads) and variable tracking (odebook.data.chains; study 01's task that needs
depth). Each is a seeded training stream, fixed evaluation sets, and the accuracy at the query positions.

Training draws each batch's k from ``train_ks`` in turn (every model of a seed sees the same stream, so seeds pair);
evaluation holds ``eval_batches`` fixed batches per k from a generator no training seed uses, and a set of held-out
pairs (each key bound to the one value training never binds it to). A run's ``scores`` are its accuracies: one per
k, and the held-out pairs' at the largest k.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import torch
from torch import nn

from odebook.data import chains, mqar
from odebook.nn.linear_ce import IGNORE_INDEX
from odebook.study.task import Task

__all__ = ["EVAL_SEED", "stream", "eval_sets", "accuracy", "mqar_task", "chains_task"]

EVAL_SEED = 2**31 - 1  # the evaluation sets' generator; training streams use the run's seed


def stream(seed: int, *, vocab: mqar.Vocab, ks: Sequence[int], batch_size: int, seq_len: int,
           power_a: float) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """An endless training stream: batch i has ks[i mod len(ks)] pairs."""
    g, i = torch.Generator().manual_seed(seed), 0
    while True:
        b = mqar.make_batch(batch_size, vocab=vocab, k=ks[i % len(ks)], seq_len=seq_len, generator=g, power_a=power_a)
        yield b.x, b.y
        i += 1


def eval_sets(*, vocab: mqar.Vocab, ks: Sequence[int], batch_size: int, seq_len: int, batches: int,
              power_a: float) -> dict[str, list[tuple[torch.Tensor, torch.Tensor]]]:
    """Fixed evaluation batches: "k=<k>" for each k, and "unseen pairs" at the largest k."""
    g = torch.Generator().manual_seed(EVAL_SEED)

    def some(k: int, unseen: bool = False) -> list[tuple[torch.Tensor, torch.Tensor]]:
        made = (mqar.make_batch(batch_size, vocab=vocab, k=k, seq_len=seq_len, generator=g, power_a=power_a,
                                unseen_pairs=unseen) for _ in range(batches))
        return [(b.x, b.y) for b in made]

    return {**{f"k={k}": some(k) for k in ks}, "unseen pairs": some(max(ks), unseen=True)}


@torch.no_grad()
def accuracy(model: nn.Module, batches: Sequence[tuple[torch.Tensor, torch.Tensor]], device: torch.device) -> float:
    """Top-1 accuracy of ``model``'s next-token logits at the labelled (query) positions of ``batches``."""
    was, hits, total = model.training, 0, 0
    model.eval()
    for x, y in batches:
        logits = model(x.to(device))
        labelled = y.to(device) != IGNORE_INDEX
        hits += int((logits.argmax(-1)[labelled] == y.to(device)[labelled]).sum())
        total += int(labelled.sum())
    model.train(was)
    return hits / total


def mqar_task(*, vocab: mqar.Vocab, train_ks: Sequence[int], eval_ks: Sequence[int], batch_size: int, seq_len: int,
              eval_batches: int, power_a: float, device: torch.device) -> Task:
    """MQAR for ``experiment.run_seeds``: validation loss on the largest k's set during training; ``run.scores``
    maps each evaluation set's name to the trained model's accuracy on it."""
    sets = eval_sets(vocab=vocab, ks=eval_ks, batch_size=batch_size, seq_len=seq_len, batches=eval_batches,
                     power_a=power_a)
    return Task(batches=lambda seed: stream(seed, vocab=vocab, ks=train_ks, batch_size=batch_size, seq_len=seq_len,
                                            power_a=power_a),
                valid=sets[f"k={max(eval_ks)}"],
                score=lambda run: {name: accuracy(run.module, b, device) for name, b in sets.items()},
                key={"data": f"MQAR, {vocab.n_keys} keys, train k {list(train_ks)}, power {power_a}",
                     "batch": (batch_size, seq_len, eval_batches)},
                tokens_per_step=batch_size * seq_len)


def chains_task(*, vocab: chains.Vocab, n_chains: int, hops: int, batch_size: int, seq_len: int, eval_batches: int,
                device: torch.device) -> Task:
    """Variable tracking for ``experiment.run_seeds``: training queries at depths drawn from 1 … ``hops``; the
    validation and test losses are taken on queries at the full depth ``hops`` (two fixed sets from the evaluation
    generator); ``run.scores`` maps "depth=<d>" to the trained model's accuracy on fixed queries at each depth."""
    g = torch.Generator().manual_seed(EVAL_SEED)

    def some(depth: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        made = (chains.make_batch(batch_size, vocab=vocab, chains=n_chains, hops=hops, seq_len=seq_len, generator=g,
                                  depth=depth) for _ in range(eval_batches))
        return [(b.x, b.y) for b in made]

    valid, test = some(hops), some(hops)
    sets = {f"depth={d}": some(d) for d in range(1, hops + 1)}

    def batches(seed: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        gen = torch.Generator().manual_seed(seed)
        while True:
            b = chains.make_batch(batch_size, vocab=vocab, chains=n_chains, hops=hops, seq_len=seq_len, generator=gen)
            yield b.x, b.y

    return Task(batches=batches, valid=valid, test=test,
                score=lambda run: {name: accuracy(run.module, b, device) for name, b in sets.items()},
                key={"data": f"variable tracking, {n_chains} chains of {hops} hops, {vocab.n_values} values, "
                             f"{vocab.n_vars} variables", "batch": (batch_size, seq_len, eval_batches)},
                tokens_per_step=batch_size * seq_len)
