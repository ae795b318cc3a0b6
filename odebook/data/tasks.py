"""Multi-key associative recall: a retrieval task that needs memory *and* binding.

A prompt holds ``k`` facts "<Name> has a <colour> <object>." (k distinct names, k distinct colours) among filler
sentences that mention names and colours too ("<Other> saw a <colour> <thing>."; filler names are never the bound
names), then the question "What color does <Name> have?" about one bound name, answered by its colour. Copying a
colour is not enough: the same body with a question about another bound name has another answer (tests/data/test_tasks).
Training prompts go on to ask about every other bound name too, each question after the previous answer, and every
answer is scored (k answers a prompt, as in multi-query associative recall); evaluation prompts ask one question.

Facts stand at random sentence positions in training and evaluation. Held-out *pairs*: each name has one colour it is
never bound to in training (a Latin-square tenth of the pairs); the 'unseen pairs' set asks about exactly those.
Evaluation sets put the queried fact anywhere ('random'), near the question ('inside': the second-to-last sentence,
followed by another fact, so neither the most recent colour nor the latest fact's colour answers it) or first
('far'). Shortcuts (answer the most recent colour, the most frequent colour, the latest fact's colour, a bound colour
at random) and chance are scored on the same examples (odebook.study.retrieval). The answer is one token: the colour
with its leading space under GPT-2, or its first byte under the byte tokenizer (the eight first letters differ).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch

from odebook.data.corpus import Tokenizer
from odebook.nn.linear_ce import IGNORE_INDEX

__all__ = ["NAMES", "OBJECTS", "COLORS", "HELD_OUT", "IGNORE_INDEX", "PLACEMENTS", "Example", "make_example",
           "make_examples", "evaluation_sets", "encode", "batch", "distance", "equal_stages", "curriculum_batches",
           "max_prompt_tokens", "shortcuts", "CHANCE", "SCORE_BATCH"]

NAMES = ("Alice", "Bob", "Carol", "David", "Emma", "Frank", "Grace", "Henry", "Iris", "Jack")
OBJECTS = ("ball", "book", "car", "hat", "lamp", "cup", "box", "bag")
COLORS = ("red", "blue", "green", "yellow", "violet", "orange", "white", "cyan")
_VERBS = ("saw", "found", "passed", "painted")
_THINGS = ("bird", "door", "kite", "boat", "coat", "fence", "flower", "shirt")
HELD_OUT = frozenset((n, COLORS[(3 * i) % len(COLORS)]) for i, n in enumerate(NAMES))  # one colour per name
PLACEMENTS = ("random", "inside", "far")
CHANCE = 1 / len(COLORS)
SCORE_BATCH = 50  # prompts a forward pass when a model is scored (odebook.study.retrieval.score_rows)
MAX_K = len(COLORS)


@dataclass(frozen=True)
class Example:
    prompt: str  # ends just before the answer
    color: str  # the answer
    name: str  # the queried name
    k: int  # bindings in the prompt
    fact_index: int  # sentence index of the queried fact
    n_sentences: int  # facts + filler
    answer_at: int  # character offset of the queried fact's colour word in the prompt
    colors_seen: tuple[str, ...]  # every colour word of the prompt, in order (facts and filler)
    bound: tuple[str, ...]  # the bound colours, in the order of their facts
    followups: tuple[tuple[str, str], ...] = ()  # the other bindings (name, colour), in the order training asks them


def make_example(rng: random.Random, *, k: int, n_filler: int, placement: str = "random",
                 split: str = "seen") -> Example:
    """One prompt. ``split`` 'seen' never binds a held-out pair; 'unseen' asks about a held-out pair (the other
    bindings are seen ones). ``placement``: where the queried fact stands (PLACEMENTS)."""
    if not 1 <= k <= min(MAX_K, len(NAMES) - 1):
        raise ValueError(f"k = {k}: between 1 and {min(MAX_K, len(NAMES) - 1)} bindings per prompt")
    names = rng.sample(NAMES, k)
    colors: list[str] = []
    for i, name in enumerate(names):
        if i == 0 and split == "unseen":
            colors.append(next(c for n, c in HELD_OUT if n == name))
            continue
        allowed = [c for c in COLORS if c not in colors and (name, c) not in HELD_OUT]
        colors.append(rng.choice(allowed))
    others = [n for n in NAMES if n not in names]
    filler = [f"{rng.choice(others)} {rng.choice(_VERBS)} a {rng.choice(COLORS)} {rng.choice(_THINGS)}."
              for _ in range(n_filler)]
    n_sentences = k + n_filler
    if placement == "random":
        slots = rng.sample(range(n_sentences), k)
    elif placement == "inside":  # second to last, then another fact (a filler when k = 1)
        if n_sentences < 2:
            raise ValueError("placement 'inside' needs at least two sentences (k + n_filler >= 2)")
        last = [n_sentences - 1] if k > 1 else []
        slots = [n_sentences - 2, *last, *rng.sample(range(n_sentences - 2), k - 1 - len(last))]
    elif placement == "far":
        slots = [0, *(s + 1 for s in rng.sample(range(n_sentences - 1), k - 1))]
    else:
        raise ValueError(f"placement {placement!r}; allowed: {', '.join(PLACEMENTS)}")
    facts = {slot: (name, color) for slot, name, color in zip(slots, names, colors)}
    sentences, answer_at, colors_seen, bound, offset = [], -1, [], [], 0
    filler_iter = iter(filler)
    for i in range(n_sentences):
        if i in facts:
            name, color = facts[i]
            sentence = f"{name} has a {color} {rng.choice(OBJECTS)}."
            bound.append(color)
            if i == slots[0]:
                answer_at = offset + len(name) + len(" has a ")
        else:
            sentence = next(filler_iter)
        colors_seen.append(next(c for c in COLORS if f" {c} " in f" {sentence} "))
        sentences.append(sentence)
        offset += len(sentence) + 1
    prompt = " ".join(sentences + [_question(names[0])])
    followups = rng.sample(list(zip(names[1:], colors[1:])), k - 1)
    return Example(prompt, colors[0], names[0], k, slots[0], n_sentences, answer_at, tuple(colors_seen),
                   tuple(bound), tuple(followups))


def _question(name: str) -> str:
    return f"What color does {name} have?"


def make_examples(n: int, seed: int, *, k: int, n_filler: int, placement: str = "random",
                  split: str = "seen") -> list[Example]:
    """``n`` examples drawn with their own ``seed`` (keep evaluation seeds apart from training seeds)."""
    rng = random.Random(seed)
    return [make_example(rng, k=k, n_filler=n_filler, placement=placement, split=split) for _ in range(n)]


def evaluation_sets(n: int, seed: int, *, ks: Sequence[int], n_filler: int) -> dict[tuple[str, int], list[Example]]:
    """Per k: the queried fact at a random position, 'inside' (last sentence), 'far' (first sentence), and the
    random placement on 'unseen pairs' — each set ``n`` examples with a seed of its own."""
    sets = {}
    for j, k in enumerate(ks):
        for i, (name, placement, split) in enumerate((("random", "random", "seen"), ("inside", "inside", "seen"),
                                                       ("far", "far", "seen"), ("unseen pairs", "random", "unseen"))):
            sets[(name, k)] = make_examples(n, seed + 10 * j + i, k=k, n_filler=n_filler, placement=placement,
                                            split=split)
    return sets


def shortcuts(ex: Example) -> dict[str, float]:
    """Expected accuracy of each shortcut on ``ex``: copy the most recent colour word, the most frequent one (ties: the
    latest), the latest fact's colour, or a bound colour at random (1/k)."""
    counts = Counter(ex.colors_seen)
    top = max(counts.values())
    frequent = next(c for c in reversed(ex.colors_seen) if counts[c] == top)
    return {"most recent colour": float(ex.colors_seen[-1] == ex.color),
            "most frequent colour": float(frequent == ex.color),
            "latest fact's colour": float(ex.bound[-1] == ex.color), "a bound colour at random": 1 / ex.k}


def max_prompt_tokens(k: int, n_filler: int, tok: Tokenizer) -> int:
    """An upper bound on the tokens of any prompt (longest sentence of each kind; a training prompt's k questions and
    answers), so a model's max_seq_len can be checked before training."""
    fact = max(len(tok.encode(f" {n} has a {c} {o}.")) for n in NAMES for o in OBJECTS for c in COLORS)
    filler = max(len(tok.encode(f" {n} {v} a {c} {t}.")) for n in NAMES for v in _VERBS for c in COLORS
                 for t in _THINGS)
    question = max(len(tok.encode(f" {_question(n)} {c}.")) for n in NAMES for c in COLORS)
    return k * fact + n_filler * filler + k * question + 2


def _answer(color: str, tok: Tokenizer) -> tuple[str, int, str]:
    """(text to append to a prompt, answer token, the rest of the colour word): ' red' is one GPT-2 token; under the
    byte tokenizer the prompt gets ' ' and the answer is the byte 'r', followed by 'ed'."""
    ids = tok.encode(" " + color)
    return ("", ids[0], "") if len(ids) == 1 else (" ", tok.encode(color)[0], color[1:])


def encode(ex: Example, tok: Tokenizer, *, every_question: bool = False) -> tuple[list[int], list[tuple[int, int]]]:
    """Token ids and the scored answers [(position that predicts it, answer token)]: the first question's, or with
    ``every_question`` also those of the follow-up questions, each asked after the previous answer."""
    ids: list[int] = []
    answers: list[tuple[int, int]] = []
    text = ex.prompt
    for name, color in [(ex.name, ex.color), *(ex.followups if every_question else ())]:
        if answers:
            text += f". {_question(name)}"
        suffix, answer, rest = _answer(color, tok)
        ids += tok.encode(text + suffix)
        answers.append((len(ids) - 1, answer))
        ids.append(answer)
        text = rest
    return ids[:-1], answers  # the last answer is predicted, never read


def distance(ex: Example, tok: Tokenizer) -> int:
    """Tokens from the queried fact's colour word to the position that predicts the answer."""
    suffix, _, _ = _answer(ex.color, tok)
    return len(tok.encode(ex.prompt[ex.answer_at:] + suffix)) - 1


def batch(examples: Sequence[Example], tok: Tokenizer, *,
          every_question: bool = False) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Right-padded inputs [B, T], targets that are IGNORE_INDEX except at the positions that predict an answer (the
    first question's, or with ``every_question`` each question's), and the first answer's positions [B]."""
    encoded = [encode(ex, tok, every_question=every_question) for ex in examples]
    T = max(len(ids) for ids, _ in encoded)
    x = torch.zeros(len(encoded), T, dtype=torch.long)
    y = torch.full((len(encoded), T), IGNORE_INDEX, dtype=torch.long)
    for i, (ids, answers) in enumerate(encoded):
        x[i, : len(ids)] = torch.tensor(ids)
        for position, answer in answers:
            y[i, position] = answer
    return x, y, torch.tensor([answers[0][0] for _, answers in encoded])


def equal_stages(curriculum: Sequence[int], steps: int) -> list[tuple[int, int]]:
    """[(until_step, n_filler), …]: the curriculum's stages with equal numbers of steps, covering ``steps``."""
    per_stage = -(-steps // len(curriculum))
    return [((i + 1) * per_stage, n) for i, n in enumerate(curriculum)]


def curriculum_batches(tok: Tokenizer, batch_size: int, seed: int, stages: Sequence[tuple[int, int]],
                       ks: Sequence[int]) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Endless (inputs, targets) batches of seen pairs at random positions, k drawn uniformly from ``ks`` per
    prompt, every bound name asked; ``stages`` = [(until_step, n_filler), …], the last stage lasting for ever."""
    rng, step = random.Random(seed), 0
    while True:
        step += 1
        n = next((d for until, d in stages if step <= until), stages[-1][1])
        x, y, _ = batch([make_example(rng, k=rng.choice(ks), n_filler=n) for _ in range(batch_size)], tok,
                        every_question=True)
        yield x, y
