"""Needle-in-a-haystack retrieval tasks, their batches and their scoring.

The source's task: "<Name> has a <color> <object>." followed by n distractor sentences and "What does <Name>
have?", answered by the colour. A variant puts the fact at a random position and asks "What color is <Name>'s
<object>?". Eight names, objects and colours: 512 combinations, of which a fixed fifth is held out of training so
that a split of never-seen combinations can be scored. The answer is one token: the colour with its leading space
under GPT-2 (each is a single token), or its first byte under the byte tokenizer (the eight first letters differ).
Scoring: top-1 and top-5 accuracy of the answer token at the last prompt position, with Wilson 95 % intervals.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch
from scipy import stats

from odebook.data import Tokenizer

__all__ = ["NAMES", "OBJECTS", "COLORS", "Example", "make_example", "make_examples", "evaluation_sets", "third",
           "combinations", "encode", "batch", "equal_stages", "curriculum_batches", "max_prompt_tokens", "Score",
           "score"]

NAMES = ("Alice", "Bob", "Carol", "David", "Emma", "Frank", "Grace", "Henry")
OBJECTS = ("ball", "book", "car", "hat", "lamp", "cup", "box", "bag")
COLORS = ("red", "blue", "green", "yellow", "violet", "orange", "white", "cyan")
_NOUNS = ("river", "market", "train", "garden", "window", "teacher", "storm", "road", "village", "clock", "letter",
          "bridge")
_STATES = ("quiet", "busy", "late", "calm", "cold", "old", "new", "small", "empty", "crowded", "wet", "far away")
_TIMES = ("that morning", "in the evening", "on Monday", "all day", "at noon", "after the rain", "last week")
HELD_OUT_FRACTION = 0.2
IGNORE = -100


@dataclass(frozen=True)
class Example:
    prompt: str  # ends just before the answer
    color: str
    position: float  # where the fact stands among the sentences, 0 = first, 1 = last


def combinations(split: str) -> list[tuple[str, str, str]]:
    """(name, object, colour) triples: 'seen' (used in training) or 'unseen' (a fixed fifth, never trained on)."""
    every = [(n, o, c) for n in NAMES for o in OBJECTS for c in COLORS]
    random.Random(2024).shuffle(every)
    cut = int(len(every) * HELD_OUT_FRACTION)
    return every[cut:] if split == "seen" else every[:cut]


def make_example(rng: random.Random, n_distractors: int, variant: str = "fixed",
                 combos: Sequence[tuple[str, str, str]] | None = None) -> Example:
    """One example; ``variant`` 'fixed' puts the fact first, 'random' anywhere among the distractors."""
    name, obj, color = rng.choice(combos or combinations("seen"))
    fact = f"{name} has a {color} {obj}."
    filler = [f"The {rng.choice(_NOUNS)} was {rng.choice(_STATES)} {rng.choice(_TIMES)}." for _ in range(n_distractors)]
    at = 0 if variant == "fixed" else rng.randint(0, n_distractors)
    sentences = filler[:at] + [fact] + filler[at:]
    question = f"What does {name} have?" if variant == "fixed" else f"What color is {name}'s {obj}?"
    return Example(" ".join(sentences + [question]), color, at / max(n_distractors, 1))


def make_examples(n: int, seed: int, n_distractors: int, variant: str = "fixed",
                  split: str = "seen") -> list[Example]:
    """``n`` examples drawn with their own ``seed`` (keep evaluation seeds apart from training seeds)."""
    rng, combos = random.Random(seed), combinations(split)
    return [make_example(rng, n_distractors, variant, combos) for _ in range(n)]


def evaluation_sets(n: int, seed: int, n_distractors: int) -> dict[str, list[Example]]:
    """The three evaluation sets of the retrieval studies, each of ``n`` examples with a seed of its own: the
    fixed-position task, the random-position task, and the fixed-position task on unseen combinations."""
    return {"fixed": make_examples(n, seed, n_distractors, "fixed", "seen"),
            "random position": make_examples(n, seed + 1, n_distractors, "random", "seen"),
            "unseen combinations": make_examples(n, seed + 2, n_distractors, "fixed", "unseen")}


def third(ex: Example) -> str:
    """Where the fact stands in the haystack: 'early', 'middle' or 'late' (thirds)."""
    return "early" if ex.position < 1 / 3 else "middle" if ex.position < 2 / 3 else "late"


def max_prompt_tokens(n_distractors: int, tok: Tokenizer) -> int:
    """An upper bound on the tokens of any prompt with ``n_distractors`` distractors (longest sentence of each
    kind), so a model's max_seq_len can be checked before training."""
    fact = max(len(tok.encode(f" {n} has a {c} {o}.")) for n in NAMES for o in OBJECTS for c in COLORS)
    filler = max(len(tok.encode(f" The {a} was {b} {c}.")) for a in _NOUNS for b in _STATES for c in _TIMES)
    question = max(len(tok.encode(f" What color is {n}'s {o}? ")) for n in NAMES for o in OBJECTS)
    return fact + n_distractors * filler + question + 2


def _answer(color: str, tok: Tokenizer) -> tuple[str, int]:
    """(text to append to the prompt, answer token): ' red' as one GPT-2 token, or ' ' + the byte 'r'."""
    ids = tok.encode(" " + color)
    return ("", ids[0]) if len(ids) == 1 else (" ", tok.encode(color)[0])


def encode(ex: Example, tok: Tokenizer) -> tuple[list[int], int]:
    suffix, answer = _answer(ex.color, tok)
    return tok.encode(ex.prompt + suffix), answer


def batch(examples: Sequence[Example], tok: Tokenizer) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Right-padded inputs [B, T], targets that are IGNORE except the answer at each prompt's last position, and
    those positions [B]."""
    encoded = [encode(ex, tok) for ex in examples]
    T = max(len(ids) for ids, _ in encoded)
    x = torch.zeros(len(encoded), T, dtype=torch.long)
    y = torch.full((len(encoded), T), IGNORE, dtype=torch.long)
    last = torch.tensor([len(ids) - 1 for ids, _ in encoded])
    for i, (ids, answer) in enumerate(encoded):
        x[i, : len(ids)] = torch.tensor(ids)
        y[i, len(ids) - 1] = answer
    return x, y, last


def equal_stages(curriculum: Sequence[int], steps: int) -> list[tuple[int, int]]:
    """[(until_step, n_distractors), …]: the curriculum's stages with equal numbers of steps, covering ``steps``."""
    per_stage = -(-steps // len(curriculum))
    return [((i + 1) * per_stage, n) for i, n in enumerate(curriculum)]


def curriculum_batches(tok: Tokenizer, batch_size: int, seed: int, stages: Sequence[tuple[int, int]],
                       variant: str = "fixed") -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Endless (inputs, targets) batches of seen combinations; ``stages`` = [(until_step, n_distractors), …], the
    last stage lasting for ever."""
    rng, step = random.Random(seed), 0
    while True:
        step += 1
        n = next((d for until, d in stages if step <= until), stages[-1][1])
        x, y, _ = batch([make_example(rng, n, variant) for _ in range(batch_size)], tok)
        yield x, y


@dataclass(frozen=True)
class Score:
    top1: int
    top5: int
    n: int
    hits: tuple[bool, ...] = ()  # top-1 hit of each example, in order (for paired comparisons)

    def interval(self, hits: int) -> tuple[float, float]:
        """Wilson 95 % interval of a hit count."""
        ci = stats.binomtest(hits, self.n).proportion_ci(confidence_level=0.95, method="wilson")
        return ci.low, ci.high

    @property
    def acc1(self) -> float:
        return self.top1 / self.n

    @property
    def acc5(self) -> float:
        return self.top5 / self.n


@torch.no_grad()
def score(model: torch.nn.Module, examples: Sequence[Example], tok: Tokenizer, device: torch.device,
          batch_size: int = 50) -> Score:
    """Top-1 and top-5 hits of the answer token at each example's last prompt position."""
    model.eval()
    top1 = top5 = 0
    hits: list[bool] = []
    for start in range(0, len(examples), batch_size):
        x, y, last = batch(examples[start:start + batch_size], tok)
        logits = model(x.to(device))[torch.arange(len(x)), last.to(device)]  # [B, vocab]
        answer = y[torch.arange(len(x)), last].to(device)
        ranks = (logits > logits.gather(1, answer[:, None])).sum(1)  # how many tokens score above the answer
        top1 += int((ranks == 0).sum())
        top5 += int((ranks < 5).sum())
        hits += (ranks == 0).tolist()
    return Score(top1, top5, len(examples), tuple(hits))
