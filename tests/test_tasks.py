import random

import pytest
import torch

from odebook import tasks
from odebook.data import ByteTokenizer, get_tokenizer


def test_combinations_hold_out_a_fixed_fifth():
    seen, unseen = tasks.combinations("seen"), tasks.combinations("unseen")
    assert len(seen) + len(unseen) == 512 and len(unseen) == 102
    assert not set(seen) & set(unseen)
    assert unseen == tasks.combinations("unseen")  # the same every time


def test_examples_follow_the_source_templates():
    rng = random.Random(0)
    ex = tasks.make_example(rng, 3, "fixed")
    name = ex.prompt.split()[0]
    assert ex.prompt.startswith(f"{name} has a {ex.color} ") and ex.prompt.endswith(f"What does {name} have?")
    assert ex.prompt.count(".") == 4 and ex.position == 0
    positions = {tasks.make_example(rng, 10, "random").position for _ in range(200)}
    assert min(positions) == 0 and max(positions) == 1 and len(positions) == 11
    assert "What color is" in tasks.make_example(rng, 2, "random").prompt


def test_answer_is_one_token_for_both_tokenizers():
    ex = tasks.Example("Alice has a red ball. What does Alice have?", "red", 0.0)
    ids, answer = tasks.encode(ex, get_tokenizer("gpt2"))
    assert answer == 2266 and get_tokenizer("gpt2").decode([answer]) == " red"
    ids, answer = tasks.encode(ex, ByteTokenizer())
    assert chr(answer) == "r" and ids[-1] == ord(" ")
    assert len({tasks.encode(tasks.Example("x?", c, 0), ByteTokenizer())[1] for c in tasks.COLORS}) == 8


def test_batches_put_the_only_target_at_the_last_prompt_position():
    tok = ByteTokenizer()
    exs = [tasks.make_example(random.Random(i), i, "fixed") for i in range(3)]
    x, y, last = tasks.batch(exs, tok)
    assert ((y != tasks.IGNORE).sum(1) == 1).all()
    for i, ex in enumerate(exs):
        ids, answer = tasks.encode(ex, tok)
        assert last[i] == len(ids) - 1 and y[i, last[i]] == answer and x[i, : len(ids)].tolist() == ids


def test_curriculum_grows_the_haystack():
    batches = tasks.curriculum_batches(ByteTokenizer(), 2, seed=0, stages=[(2, 0), (4, 5)])
    lengths = [next(batches)[0].shape[1] for _ in range(6)]
    assert max(lengths[:2]) < 60 < min(lengths[2:])


class ConstantModel(torch.nn.Module):
    """Logits that rank the bytes of 'r' first, then 'b', 'g', 'y', 'v', 'o', 'w', 'c'."""

    def forward(self, x):
        logits = torch.zeros(*x.shape, 256)
        for rank, letter in enumerate("rbgyvowc"):
            logits[..., ord(letter)] = 10.0 - rank
        return logits


@pytest.mark.parametrize("color, top1, top5", [("red", 4, 4), ("violet", 0, 4), ("cyan", 0, 0)])
def test_score_counts_top1_and_top5(color, top1, top5):
    exs = [tasks.Example(f"Alice has a {color} cup. What does Alice have?", color, 0.0)] * 4
    s = tasks.score(ConstantModel(), exs, ByteTokenizer(), torch.device("cpu"), batch_size=3)
    assert (s.top1, s.top5, s.n) == (top1, top5, 4)


def test_wilson_interval():
    low, high = tasks.Score(5, 5, 10).interval(5)
    assert low == pytest.approx(0.2366, abs=1e-4) and high == pytest.approx(0.7634, abs=1e-4)


def test_evaluation_sets_stages_and_thirds():
    sets = tasks.evaluation_sets(20, seed=5, n_distractors=3)
    assert [len(v) for v in sets.values()] == [20, 20, 20]
    assert all(ex.position == 0 for ex in sets["fixed"])
    unseen = set(tasks.combinations("unseen"))
    assert all((ex.prompt.split()[0], ex.prompt.split()[4].rstrip("."), ex.color) in unseen
               for ex in sets["unseen combinations"])
    assert tasks.equal_stages([0, 10, 30], 10) == [(4, 0), (8, 10), (12, 30)]
    assert [tasks.third(tasks.Example("", "red", x)) for x in (0.0, 0.4, 0.7, 1.0)] == ["early", "middle", "late",
                                                                                          "late"]
