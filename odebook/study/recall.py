"""Multi-query associative recall (odebook.data.mqar) as a study's task: a seeded training stream, evaluation sets
at each number of pairs k, and the accuracy at the query positions — the curve study.capacity reads (study 03), and
study 01's task that needs a second layer.

Training draws each batch's k from ``train_ks`` in turn (every model of a seed sees the same stream, so seeds pair);
validation (the loss a learning-rate grid chooses on) is every evaluated k's sets together; evaluation holds
``eval_batches`` fixed batches per k from a generator no training seed uses, and a set of held-out pairs (each key
bound to the one value training never binds it to). A run's ``scores`` are its accuracies: one per k, and the
held-out pairs' at the largest k.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

import torch
from torch import nn

from odebook.data import mqar
from odebook.nn.gdn import Ablation
from odebook.nn.linear_ce import IGNORE_INDEX
from odebook.study.task import Task

__all__ = ["EVAL_SEED", "stream", "eval_sets", "accuracy", "shortcut", "mqar_task"]

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
              power_a: float, test: bool = False) -> dict[str, list[tuple[torch.Tensor, torch.Tensor]]]:
    """Fixed evaluation batches: "k=<k>" for each k, and "unseen pairs" at the largest k; with ``test``, a "test"
    set at the largest k drawn after them (so the other sets are the same with or without it)."""
    g = torch.Generator().manual_seed(EVAL_SEED)

    def some(k: int, unseen: bool = False) -> list[tuple[torch.Tensor, torch.Tensor]]:
        made = (mqar.make_batch(batch_size, vocab=vocab, k=k, seq_len=seq_len, generator=g, power_a=power_a,
                                unseen_pairs=unseen) for _ in range(batches))
        return [(b.x, b.y) for b in made]

    sets = {**{f"k={k}": some(k) for k in ks}, "unseen pairs": some(max(ks), unseen=True)}
    return {**sets, "test": some(max(ks))} if test else sets


@torch.no_grad()
def accuracy(model: nn.Module, batches: Sequence[tuple[torch.Tensor, torch.Tensor]], device: torch.device, *,
             ablation: Ablation | None = None) -> float:
    """Top-1 accuracy of ``model``'s next-token logits at the labelled (query) positions of ``batches``; with
    ``ablation``, of the forward pass that replaces what it names (odebook.nn.gdn.Ablation)."""
    was, hits, total = model.training, 0, 0
    model.eval()
    for x, y in batches:
        logits = model(x.to(device)) if ablation is None else model(x.to(device), ablation=ablation)
        labelled = y.to(device) != IGNORE_INDEX
        hits += int((logits.argmax(-1)[labelled] == y.to(device)[labelled]).sum())
        total += int(labelled.sum())
    model.train(was)
    return hits / total


def shortcut(sets: Mapping[str, Sequence[tuple[torch.Tensor, torch.Tensor]]]) -> dict[str, float]:
    """The best shortcut's accuracy on each of ``eval_sets``' sets, the very sequences a model is scored on: every
    query answered with its context's most frequent value (odebook.data.mqar.shortcut_accuracy), read off the pairs
    that open each sequence (key, value, key, value, …: the values at the odd places before the first query)."""
    out = {}
    for name, batches in sets.items():
        hits = total = 0
        for x, y in batches:
            k = int((y[0] != IGNORE_INDEX).sum())  # every key is asked once
            values = x[:, 1:2 * k:2]
            guess = torch.nn.functional.one_hot(values, int(values.max()) + 1).sum(1).argmax(1)  # ties: the smallest
            hits, total = hits + int((values == guess[:, None]).sum()), total + values.numel()
        out[name] = hits / total
    return out


def mqar_task(*, vocab: mqar.Vocab, train_ks: Sequence[int], eval_ks: Sequence[int], batch_size: int, seq_len: int,
              eval_batches: int, power_a: float, device: torch.device, test: bool = False,
              ablations: Mapping[str, Ablation] | None = None) -> Task:
    """MQAR for ``experiment.run_seeds``: validation loss on every k's set during training (what a learning-rate
    grid chooses on); ``run.scores`` maps each evaluation set's name to the trained model's accuracy on it, and, for
    each of ``ablations`` (name → odebook.nn.gdn.Ablation), "<name>: <set>" to its accuracy under that ablation. With
    ``test``, a test set at the largest k (``eval_sets``) is scored once for ``run.test_loss`` (the loss at the
    answers) and is not among the scores."""
    sets = eval_sets(vocab=vocab, ks=eval_ks, batch_size=batch_size, seq_len=seq_len, batches=eval_batches,
                     power_a=power_a, test=test)
    held_out = sets.pop("test", None)

    def score(run) -> dict[str, float]:
        return {f"{how}: {name}" if ablation else name: accuracy(run.module, b, device, ablation=ablation)
                for how, ablation in {"": None, **(ablations or {})}.items() for name, b in sets.items()}

    return Task(batches=lambda seed: stream(seed, vocab=vocab, ks=train_ks, batch_size=batch_size, seq_len=seq_len,
                                            power_a=power_a),
                valid=[b for k in eval_ks for b in sets[f"k={k}"]], test=held_out, score=score,
                key={"data": f"MQAR, {vocab.n_keys} keys, train k {list(train_ks)}, power {power_a}",
                     "batch": (batch_size, seq_len, eval_batches), "valid": f"k {list(eval_ks)}"},
                tokens_per_step=batch_size * seq_len)

