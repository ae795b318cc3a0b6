"""Variable tracking (pointer chasing) on a vocabulary of its own: a task whose answer needs several lookups in turn.

A sequence opens with ``chains`` chains of assignments, each ``hops`` long — chain j binds a value to a first
variable and every later variable to the one before it (``a1 ← c``, ``a2 ← a1``, …, ``ah ← a(h−1)``) — written as
two-token pairs (variable, what it is bound to) in a random order across all chains. Then each chain is queried
once, in a random order, as three tokens: the query mark, one of its variables, and that variable's value. The
label — the value to predict — stands only at the queried variable; every other target is ``IGNORE_INDEX``. A query
at depth d (the chain's d-th variable) needs d lookups in turn: find the pair that binds the variable, read what it
is bound to, and again, until a value comes back. A network resolves at most one lookup per attention layer along
one path, or roughly doubles its reach per layer where it composes pointers, so a stack too shallow for the depth
asked cannot answer: the task that study 01's claims need, where removing layers costs something (the RULER
benchmark's variable tracking, Hsieh et al. 2024, arXiv:2404.06654, asks the same in natural text).

The vocabulary (``Vocab``): token 0 is padding, 1 the query mark, then ``n_values`` values and ``n_vars`` variables.
Variables are distinct within a sequence, and so are the chains' values, so the answer is one value of the context.
A model that follows no chain can still guess among the values no earlier query has taken (each chain is asked
once): ``shortcut_accuracy``, (1 + 1/2 + … + 1/chains) / chains, 0.52 for 4 chains; chance is 1 / n_values. Training queries draw their depth uniformly from 1 … hops (the short ones teach the first lookup);
evaluation asks every query at one depth. Generated vectorised on the CPU, ``torch.Generator`` for reproducibility.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from odebook.nn.linear_ce import IGNORE_INDEX

__all__ = ["PAD", "QUERY", "Vocab", "Batch", "tokens_needed", "make_batch", "shortcut_accuracy", "chance"]

PAD, QUERY = 0, 1


@dataclass(frozen=True)
class Vocab:
    """``n_values`` values and ``n_vars`` variables; ``size`` tokens in all (padding and query mark included)."""

    n_values: int
    n_vars: int

    @property
    def size(self) -> int:
        return 2 + self.n_values + self.n_vars

    def value(self, j: torch.Tensor) -> torch.Tensor:
        return 2 + j

    def var(self, i: torch.Tensor) -> torch.Tensor:
        return 2 + self.n_values + i


@dataclass(frozen=True)
class Batch:
    """Inputs and targets (B, T) of a next-token model, the query positions (B, chains) in order, and each query's
    depth (B, chains), in the order the queries stand."""

    x: torch.Tensor
    y: torch.Tensor
    queries: torch.Tensor
    depths: torch.Tensor


def tokens_needed(chains: int, hops: int) -> int:
    """Tokens a sequence of ``chains`` chains of ``hops`` assignments takes, its queries included."""
    return 2 * chains * hops + 3 * chains


def _distinct(n: int, k: int, high: int, g: torch.Generator) -> torch.Tensor:
    """(n, k) distinct integers in [0, high) per row, in random order."""
    return torch.rand(n, high, generator=g).argsort(dim=1)[:, :k]


def make_batch(n: int, *, vocab: Vocab, chains: int, hops: int, seq_len: int, generator: torch.Generator,
               depth: int | None = None) -> Batch:
    """``n`` sequences of ``seq_len`` + 1 tokens (inputs and targets are the first and last ``seq_len``), padded at
    the end. Each query asks at ``depth`` lookups, or (None) at a depth drawn uniformly from 1 … ``hops``."""
    need = tokens_needed(chains, hops)
    if chains < 2 or hops < 1 or chains > vocab.n_values or chains * hops > vocab.n_vars or need > seq_len + 1:
        raise ValueError(f"variable tracking: {chains} chains of {hops} hops need chains >= 2, hops >= 1, "
                         f"{chains} <= {vocab.n_values} values, {chains * hops} <= {vocab.n_vars} variables and "
                         f"{need} <= seq_len + 1 = {seq_len + 1} tokens")
    if depth is not None and not 1 <= depth <= hops:
        raise ValueError(f"variable tracking: depth {depth} must lie in 1 … {hops}")
    g, m, rows = generator, chains * hops, torch.arange(n)[:, None]
    var = vocab.var(_distinct(n, m, vocab.n_vars, g)).view(n, chains, hops)  # var[:, j, i]: chain j's (i+1)-th
    value = vocab.value(_distinct(n, chains, vocab.n_values, g))
    bound = torch.cat([value[:, :, None], var[:, :, :-1]], dim=2)  # what each variable is bound to
    order = _distinct(n, m, m, g)  # the pairs' places
    seq = torch.full((n, seq_len + 1), PAD, dtype=torch.long)
    seq[rows, 2 * order], seq[rows, 2 * order + 1] = var.reshape(n, m), bound.reshape(n, m)
    asked = _distinct(n, chains, chains, g)  # which chain each query asks about
    if depth is None:
        depths = torch.randint(1, hops + 1, (n, chains), generator=g)
    else:
        depths = torch.full((n, chains), depth, dtype=torch.long)
    starts = 2 * m + 3 * torch.arange(chains)[None, :]
    seq[rows, starts] = QUERY
    seq[rows, starts + 1] = var[rows, asked, depths - 1]
    seq[rows, starts + 2] = value.gather(1, asked)
    x, y = seq[:, :-1], torch.full((n, seq_len), IGNORE_INDEX, dtype=torch.long)
    y[rows, starts + 1] = seq[rows, starts + 2]
    return Batch(x, y, (starts + 1).expand(n, -1), depths)


def shortcut_accuracy(chains: int) -> float:
    """What a model that follows no chain can reach: the i-th query (0-based) guesses among the chains' values that
    no earlier query has taken, 1 / (chains − i)."""
    return sum(1 / (chains - i) for i in range(chains)) / chains


def chance(vocab: Vocab) -> float:
    """A value guessed uniformly from the vocabulary."""
    return 1 / vocab.n_values
