"""Multi-query associative recall (MQAR) on a vocabulary of its own: the field's testbed for a state's capacity.

The form follows the Zoology work (Arora et al. 2023, "Zoology: measuring and improving recall in efficient language
models", arXiv:2312.04927): a sequence opens with ``k`` key–value pairs (keys and values drawn from disjoint halves
of the vocabulary), then the same ``k`` keys come back as queries, each followed by its value, at places whose gaps
from the pairs follow a power law (near places likelier), with filler (token 0) between them. The label — the value
to predict — stands only at the query positions; every other target is ``IGNORE_INDEX``. Accuracy against ``k`` at a
fixed model size traces how many bindings the state holds.

The vocabulary: token 0 is filler, keys are 1 … K, values K + 1 … 2K (``Vocab``). Keys are distinct within a
sequence; values are drawn independently (a value may repeat), so no value can be inferred from the others.
*Held-out pairs*: each key has one value it is never bound to in training (a Latin square: key i ↔ value
(3 i mod K)); ``unseen_pairs=True`` binds every key to exactly that value, so an evaluation on it asks for bindings
no training sequence contained. Chance is 1 / K (a value guessed uniformly); the best shortcut that needs no
binding — answering the most frequent value of the context — is scored by ``shortcut_accuracy``.

Generated vectorised on the CPU (one call per batch, ``torch.Generator`` for reproducibility).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from odebook.nn.linear_ce import IGNORE_INDEX

__all__ = ["Vocab", "Batch", "SCORING_BATCHES", "slot_weights", "make_batch", "shortcut_accuracy", "chance"]

SCORING_BATCHES = 16  # first-query scoring batches per k (odebook.study.recall.scoring_sets)


@dataclass(frozen=True)
class Vocab:
    """``n_keys`` keys and as many values; ``size`` tokens in all (filler included)."""

    n_keys: int

    def __post_init__(self):
        if self.n_keys < 4:
            raise ValueError(f"MQAR needs at least 4 keys, got {self.n_keys}")

    @property
    def size(self) -> int:
        return 1 + 2 * self.n_keys

    def key(self, i: torch.Tensor) -> torch.Tensor:
        return 1 + i

    def value(self, j: torch.Tensor) -> torch.Tensor:
        return 1 + self.n_keys + j

    def held_out(self, i: torch.Tensor) -> torch.Tensor:
        """The value index key index ``i`` is never bound to in training."""
        return (3 * i) % self.n_keys


@dataclass(frozen=True)
class Batch:
    """Inputs and targets (B, T) of a next-token model, the query positions (B, k) in order, and the bound pairs:
    key and value indices (B, k) in the order the pairs stand in the context."""

    x: torch.Tensor
    y: torch.Tensor
    queries: torch.Tensor
    keys: torch.Tensor
    values: torch.Tensor


def slot_weights(n_slots: int, power_a: float) -> torch.Tensor:
    """Weights of the query slots 0 … n_slots − 1 (slot j starts 2 j tokens after the pairs): a power law
    ∝ (j + 1)^(a − 1), normalised; a < 1 favours near slots."""
    if n_slots < 1 or not 0 < power_a <= 1:
        raise ValueError(f"need n_slots >= 1 and 0 < power_a <= 1, got {n_slots}, {power_a}")
    w = torch.arange(1, n_slots + 1, dtype=torch.float64) ** (power_a - 1)
    return w / w.sum()


def _distinct(n: int, k: int, high: int, g: torch.Generator) -> torch.Tensor:
    """(n, k) distinct integers in [0, high) per row, in random order."""
    return torch.rand(n, high, generator=g).argsort(dim=1)[:, :k]


def make_batch(n: int, *, vocab: Vocab, k: int, seq_len: int, generator: torch.Generator, power_a: float = 0.1,
               unseen_pairs: bool = False) -> Batch:
    """``n`` MQAR sequences of ``seq_len`` + 1 tokens (inputs and targets are the first and last ``seq_len``) with
    ``k`` pairs each. The query region after the pairs is cut into two-token slots; ``k`` distinct slots are drawn
    with ``slot_weights`` (Gumbel top-k, without replacement) and hold the keys in a random order, each followed by
    its value."""
    n_slots = (seq_len + 1 - 2 * k) // 2
    if not 1 <= k <= vocab.n_keys or n_slots < k:
        raise ValueError(f"MQAR: k = {k} pairs need 1 <= k <= {vocab.n_keys} keys and {4 * k} tokens "
                         f"(seq_len {seq_len} + 1 holds {n_slots} query slots)")
    g = generator
    keys = _distinct(n, k, vocab.n_keys, g)
    banned = vocab.held_out(keys)
    if unseen_pairs:
        values = banned
    else:  # uniform over the other K − 1 values: skip the held-out one
        values = torch.randint(0, vocab.n_keys - 1, (n, k), generator=g)
        values = values + (values >= banned).long()
    seq = torch.zeros(n, seq_len + 1, dtype=torch.long)
    seq[:, 0:2 * k:2], seq[:, 1:2 * k:2] = vocab.key(keys), vocab.value(values)
    gumbel = -torch.log(-torch.log(torch.rand(n, n_slots, generator=g).clamp_min(1e-12)))
    slots = (slot_weights(n_slots, power_a).log().float() + gumbel).topk(k, dim=1).indices  # distinct slots
    order = _distinct(n, k, k, g)  # which pair each chosen slot asks about
    starts = 2 * k + 2 * slots
    rows = torch.arange(n)[:, None]
    seq[rows, starts] = vocab.key(keys.gather(1, order))
    seq[rows, starts + 1] = vocab.value(values.gather(1, order))
    x, y = seq[:, :-1], torch.full((n, seq_len), IGNORE_INDEX, dtype=torch.long)
    y[rows, starts] = seq[rows, starts + 1]
    queries = starts.sort(dim=1).values
    return Batch(x, y, queries, keys, values)


def shortcut_accuracy(x: torch.Tensor, y: torch.Tensor, k: int) -> float:
    """Accuracy at the query positions of (x, y) — sequences opening with ``k`` pairs — of answering every query
    with the context's most frequent value (ties: the smallest): what a model that counts values but binds nothing
    can reach."""
    values = x[:, 1:2 * k:2]
    guess = torch.nn.functional.one_hot(values, int(values.max()) + 1).sum(1).argmax(1)
    labelled = y != IGNORE_INDEX
    return float((y == guess[:, None])[labelled].float().mean())


def chance(vocab: Vocab) -> float:
    """A value guessed uniformly."""
    return 1 / vocab.n_keys
