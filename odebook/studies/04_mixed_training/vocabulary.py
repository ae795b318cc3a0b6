"""Study 04's vocabulary: the base tokenizer's tokens that its training stories and its retrieval task use, numbered
afresh, and one more for every other token ("unknown").

At d 64 nearly all of a GPT-2 model's parameters are its embedding and head (2 × 50,257 × 64 of the cpu profile's
6.6M), and the head's logits and the optimiser's pass over those parameters take about half of a training step. The
data mirror's 2,316 TinyStories training stories use 7,010 distinct GPT-2 tokens (with the task's); its held-out
stories about 1 % of their tokens outside that set. The text is cut into tokens exactly as GPT-2 cuts it; only the
ids change, and a held-out token the training stories never use counts as "unknown" (so held-out perplexity is over
this closed vocabulary).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence

import numpy as np

from odebook.data import corpus as data
from odebook.data import tasks

__all__ = ["UsedTokens", "used_tokens", "stories", "UNKNOWN"]

UNKNOWN = "\N{REPLACEMENT CHARACTER}"  # how a decoded "unknown" token reads
TASK_EXAMPLES = 400  # prompts (4 bindings, 8 filler sentences) whose tokens join the vocabulary: each word many times


class UsedTokens:
    """A ``Tokenizer`` (odebook.data.corpus) over the ``used`` ids of ``base``: id i is base id ``used[i]``; id
    ``len(used)`` stands for every other base id."""

    def __init__(self, base: data.Tokenizer, used: Iterable[int]):
        self.base, self.used = base, np.array(sorted(set(used)), dtype=np.int64)
        self.unknown = len(self.used)
        self.vocab_size = self.unknown + 1
        self.name = f"{base.name} ({self.unknown:,} used)"
        self._ids = np.full(base.vocab_size, self.unknown, dtype=np.int64)
        self._ids[self.used] = np.arange(self.unknown)

    def encode(self, text: str) -> list[int]:
        return self.renumbered(self.base.encode(text)).tolist()

    def renumbered(self, base_ids: Sequence[int]) -> np.ndarray:
        """``base``'s ids as this vocabulary's."""
        return self._ids[np.asarray(base_ids, dtype=np.int64)]

    def decode(self, ids: Sequence[int]) -> str:
        pieces, run = [], []
        for i in ids:
            if i == self.unknown:
                pieces += [self.base.decode(run), UNKNOWN]
                run = []
            else:
                run.append(int(self.used[i]))
        return "".join([*pieces, self.base.decode(run)])


def task_tokens(base: data.Tokenizer) -> set[int]:
    """Every base id a retrieval prompt uses: prompts of 4 bindings among 8 filler sentences, every question
    asked and answered (each name, colour, object, verb and thing appears in them many times)."""
    examples = tasks.make_examples(TASK_EXAMPLES, 0, k=4, n_filler=8)
    ids = {t for ex in examples for t in tasks.encode(ex, base, every_question=True)[0]}
    return ids | {t for color in tasks.COLORS for t in base.encode(" " + color) + base.encode(color)}


@functools.cache
def stories(tokenizer: str, max_train_stories: int) -> tuple[data.Documents, list[list[int]], list[list[int]]]:
    """The first ``max_train_stories`` TinyStories training stories and the held-out ones, and each split's stories in
    ``tokenizer``'s ids: cut once, for the vocabulary and for the documents the models train on."""
    base, docs = data.get_tokenizer(tokenizer), data.load_tinystories(max_train_stories)
    return docs, [base.encode(s) for s in docs.train], [base.encode(s) for s in docs.valid]


@functools.cache
def used_tokens(tokenizer: str, max_train_stories: int) -> UsedTokens:
    """The vocabulary of ``tokenizer``'s tokens in the first ``max_train_stories`` TinyStories training stories and
    in the retrieval task."""
    base, train = data.get_tokenizer(tokenizer), stories(tokenizer, max_train_stories)[1]
    return UsedTokens(base, {t for ids in train for t in ids} | task_tokens(base))
