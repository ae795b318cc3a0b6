"""Multi-query associative recall (odebook.data.mqar) as a study's task: a seeded training stream, evaluation sets
at each number of pairs k, and the accuracy at the query positions — the curve a capacity study reads, and a task that
needs a second layer.

Training draws each batch's k from ``train_ks`` in turn (every model of a seed sees the same stream, so seeds pair);
validation (the loss a learning-rate grid chooses on) is every evaluated k's sets together; evaluation holds
``eval_batches`` fixed batches per k from a generator no training seed uses, and a set of held-out pairs (each key
bound to the one value training never binds it to). A run's ``scores`` are its accuracies: one per k, and the
held-out pairs' at the largest k; given ``first`` sets (``scoring_sets``), the accuracy at each sequence's first
query per k too, on the sequences as drawn and re-bound, and under each ablation named.

*The first query* is where a model that binds nothing has nothing given away (later queries can be answered by
elimination: the values not yet given): its best there is the context's most frequent value other than the one the
queried key is never bound to (``non_binder``). A *re-bound* batch (``rebound``) rotates the pairs' values among the
pairs' keys and keeps the answers: its context holds the same values, so a model that binds nothing answers it as
before, while binding now points to a wrong value.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

import torch
from torch import nn

from odebook.data import mqar
from odebook.nn.gdn import Ablation
from odebook.nn.linear_ce import IGNORE_INDEX
from odebook.study.task import Task

__all__ = ["EVAL_SEED", "SCORING_BATCHES", "stream", "eval_sets", "scoring_sets", "rebound", "non_binder", "accuracy",
           "first_accuracy", "first_name", "mqar_task"]

EVAL_SEED = 2**31 - 1  # the evaluation sets' generator; training streams use the run's seed
SCORING_BATCHES = mqar.SCORING_BATCHES  # first-query scoring batches per k (scoring_sets)


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


def scoring_sets(*, vocab: mqar.Vocab, ks: Sequence[int], batch_size: int, seq_len: int, power_a: float,
                 seed: int, batches: int = SCORING_BATCHES) -> dict[int, list[mqar.Batch]]:
    """``batches`` batches per k from the generator ``seed``: sets of their own for the first-query scores, apart
    from the validation sets a learning rate is chosen on (``eval_sets``) and from every training stream."""
    g = torch.Generator().manual_seed(seed)
    return {k: [mqar.make_batch(batch_size, vocab=vocab, k=k, seq_len=seq_len, generator=g, power_a=power_a)
                for _ in range(batches)] for k in ks}


def rebound(batch: mqar.Batch) -> mqar.Batch:
    """``batch`` with each pair's value moved to the next pair (the last to the first) in the context, the queries
    and their answers (``y``, ``keys``, ``values``: as first bound) unchanged."""
    x, k = batch.x.clone(), batch.keys.shape[1]
    x[:, 1:2 * k:2] = x[:, 1:2 * k:2].roll(1, dims=1)
    return mqar.Batch(x, batch.y, batch.queries, batch.keys, batch.values)


def non_binder(batch: mqar.Batch, vocab: mqar.Vocab) -> float:
    """The best accuracy at each sequence's first query without binding: the context's most frequent value (ties:
    the smallest token) other than the value the queried key is never bound to (``mqar.Vocab.held_out``)."""
    rows, first, k = torch.arange(len(batch.x)), batch.queries[:, 0], batch.keys.shape[1]
    counts = torch.nn.functional.one_hot(batch.x[:, 1:2 * k:2], vocab.size).sum(1)
    counts[rows, vocab.value(vocab.held_out(batch.x[rows, first] - 1))] = -1
    return float((counts.argmax(1) == batch.y[rows, first]).float().mean())


@torch.no_grad()
def accuracy(model: nn.Module, batches: Sequence[tuple[torch.Tensor, torch.Tensor]], device: torch.device) -> float:
    """Top-1 accuracy of ``model``'s next-token logits at the labelled (query) positions of ``batches``."""
    was, hits, total = model.training, 0, 0
    model.eval()
    for x, y in batches:
        labelled = y.to(device) != IGNORE_INDEX
        hits += int((model(x.to(device)).argmax(-1)[labelled] == y.to(device)[labelled]).sum())
        total += int(labelled.sum())
    model.train(was)
    return hits / total


@torch.no_grad()
def first_accuracy(model: nn.Module, batches: Sequence[mqar.Batch], device: torch.device, *,
                   ablation: Ablation | None = None) -> float:
    """Top-1 accuracy of ``model`` at each sequence's first query (its answer: the value first bound to the key);
    with ``ablation``, of the forward pass that replaces what it names (odebook.nn.gdn.Ablation)."""
    was, hits, total = model.training, 0, 0
    model.eval()
    for b in batches:
        rows, first = torch.arange(len(b.x)), b.queries[:, 0]
        logits = model(b.x.to(device)) if ablation is None else model(b.x.to(device), ablation=ablation)
        hits += int((logits[rows, first.to(device)].argmax(-1).cpu() == b.y[rows, first]).sum())
        total += len(b.x)
    model.train(was)
    return hits / total


def first_name(k: int, *, ablation: str = "", rebound: bool = False) -> str:
    """The name of a first-query score in ``mqar_task``'s scores: "[<ablation>: ]first k=<k>[, re-bound]"."""
    return f"{ablation}: " * bool(ablation) + f"first k={k}" + ", re-bound" * rebound


def mqar_task(*, vocab: mqar.Vocab, train_ks: Sequence[int], eval_ks: Sequence[int], batch_size: int, seq_len: int,
              eval_batches: int, power_a: float, device: torch.device, test: bool = False,
              first: Mapping[int, Sequence[mqar.Batch]] | None = None,
              ablations: Mapping[str, Ablation] | None = None) -> Task:
    """MQAR for ``experiment.run_seeds``: validation loss on every k's set during training (what a learning-rate
    grid chooses on); ``run.scores`` maps each evaluation set's name to the trained model's accuracy on it and, for
    each k of ``first`` (``scoring_sets``), ``first_name(k, ablation=…, rebound=…)`` to its first-query accuracy on
    those sequences as drawn and re-bound, normal and under each of ``ablations`` (name → odebook.nn.gdn.Ablation).
    With ``test``, a test set at the largest k (``eval_sets``) is scored once for ``run.test_loss`` (the loss at the
    answers) and is not among the scores."""
    sets = eval_sets(vocab=vocab, ks=eval_ks, batch_size=batch_size, seq_len=seq_len, batches=eval_batches,
                     power_a=power_a, test=test)
    held_out = sets.pop("test", None)
    again = {k: [rebound(b) for b in batches] for k, batches in (first or {}).items()}

    def score(run) -> dict[str, float]:
        scores = {name: accuracy(run.module, b, device) for name, b in sets.items()}
        for how, ablation in {"": None, **(ablations or {})}.items():
            for k, batches in (first or {}).items():
                scores[first_name(k, ablation=how)] = first_accuracy(run.module, batches, device, ablation=ablation)
                scores[first_name(k, ablation=how, rebound=True)] = first_accuracy(run.module, again[k], device,
                                                                                   ablation=ablation)
        return scores

    return Task(batches=lambda seed: stream(seed, vocab=vocab, ks=train_ks, batch_size=batch_size, seq_len=seq_len,
                                            power_a=power_a),
                valid=[b for k in eval_ks for b in sets[f"k={k}"]], test=held_out, score=score,
                key={"data": f"MQAR, {vocab.n_keys} keys, train k {list(train_ks)}, power {power_a}",
                     "batch": (batch_size, seq_len, eval_batches), "valid": f"k {list(eval_ks)}"},
                tokens_per_step=batch_size * seq_len)
