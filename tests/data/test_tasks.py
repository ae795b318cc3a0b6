import dataclasses
import random
from collections import Counter

import pytest
from scipy import stats

from odebook.data import tasks
from odebook.data.corpus import ByteTokenizer, get_tokenizer


def test_binding_is_needed_the_colours_alone_do_not_give_the_answer():
    """Two prompts with the same body (hence the same colour words in the same order) but questions about different
    bound names have different answers: no function of the colours alone answers both."""
    for seed in range(20):
        a = tasks.make_example(random.Random(seed), k=3, n_filler=4)
        body = a.prompt[: a.prompt.rindex("What color")]
        others = {n for n in tasks.NAMES if f"{n} has a " in body} - {a.name}
        assert len(others) == 2
        for ex in (a, *(tasks.make_example(random.Random(seed), k=3, n_filler=4) for _ in range(1))):
            assert ex.prompt.startswith(body)
        # the same body asked about another bound name: its colour, not a's
        other = sorted(others)[0]
        other_color = body.split(f"{other} has a ")[1].split()[0]
        assert other_color != a.color and other_color in a.bound and a.color in a.bound
        assert len(set(a.bound)) == 3  # k distinct colours: every bound colour is the answer to some question


def test_filler_mentions_names_and_colours_but_never_binds_them():
    ex = tasks.make_example(random.Random(1), k=2, n_filler=6)
    filler = [s for s in ex.prompt.split(". ") if " saw a " in s or " found a " in s or " passed a " in s
              or " painted a " in s]
    assert len(filler) == 6 and len(ex.colors_seen) == 8
    bound_names = {n for n in tasks.NAMES if f"{n} has a " in ex.prompt}
    assert not any(s.split()[0] in bound_names for s in filler)


def test_held_out_pairs_never_appear_as_bindings_in_training_batches():
    rng = random.Random(0)
    for _ in range(2000):
        ex = tasks.make_example(rng, k=rng.choice([1, 2, 4, 6]), n_filler=2)
        pairs = {(n, c) for n in tasks.NAMES for c in tasks.COLORS if f"{n} has a {c} " in ex.prompt}
        assert len(pairs) == ex.k and not pairs & tasks.HELD_OUT
    tok = ByteTokenizer()
    batches = tasks.curriculum_batches(tok, 16, seed=1, stages=[(5, 3)], ks=[2, 4, 6])
    for _ in range(20):
        x, _ = next(batches)
        for row in x:
            text = tok.decode([int(t) for t in row if t])
            assert not any(f"{n} has a {c} " in text for n, c in tasks.HELD_OUT)
    unseen = tasks.make_examples(200, 5, k=3, n_filler=2, split="unseen")
    assert all((ex.name, ex.color) in tasks.HELD_OUT for ex in unseen)
    assert len(tasks.HELD_OUT) == len(tasks.NAMES) and len({c for _, c in tasks.HELD_OUT}) == len(tasks.COLORS)


def test_fact_positions_are_uniform_in_training_and_random_evaluation():
    rng = random.Random(3)
    n_sentences = 7
    counts = Counter(tasks.make_example(rng, k=2, n_filler=n_sentences - 2).fact_index for _ in range(7000))
    assert stats.chisquare([counts[i] for i in range(n_sentences)]).pvalue > 0.001
    inside = tasks.make_examples(50, 1, k=3, n_filler=4, placement="inside")
    far = tasks.make_examples(50, 1, k=3, n_filler=4, placement="far")
    assert {ex.fact_index for ex in inside} == {5} and {ex.fact_index for ex in far} == {0}


def test_inside_is_not_solved_by_the_latest_fact_or_colour():
    """'inside' puts the queried fact second to last and another fact last: the latest fact's colour and the most
    recent colour are always wrong there (with one binding, a filler sentence comes last instead)."""
    inside = tasks.make_examples(200, 4, k=3, n_filler=4, placement="inside")
    assert all(ex.prompt.split(". ")[-2].split()[1] == "has" for ex in inside)  # the last sentence is a fact
    for name in ("latest fact's colour", "most recent colour"):
        assert sum(tasks.shortcuts(ex)[name] for ex in inside) == 0
    single = tasks.make_examples(20, 4, k=1, n_filler=2, placement="inside")
    assert {ex.fact_index for ex in single} == {1}
    with pytest.raises(ValueError, match="two sentences"):
        tasks.make_example(random.Random(0), k=1, n_filler=0, placement="inside")


def test_distance_counts_tokens_from_the_fact_to_the_answer_position():
    tok = ByteTokenizer()
    ex = tasks.make_example(random.Random(0), k=1, n_filler=0)
    ids, [(position, _)] = tasks.encode(ex, tok)
    assert position == len(ids) - 1 and ex.prompt[ex.answer_at:].startswith(ex.color)
    assert tasks.distance(ex, tok) == len(ids) - 1 - ex.answer_at  # the fact's colour byte → last prompt position
    far = tasks.make_examples(30, 2, k=2, n_filler=5, placement="far")
    inside = tasks.make_examples(30, 2, k=2, n_filler=5, placement="inside")
    assert min(tasks.distance(e, tok) for e in far) > max(tasks.distance(e, tok) for e in inside)


def test_shortcuts_are_shortcuts_and_not_solutions():
    exs = tasks.make_examples(2000, 7, k=4, n_filler=4)
    acc = {name: sum(tasks.shortcuts(ex)[name] for ex in exs) / len(exs) for name in tasks.shortcuts(exs[0])}
    assert acc["a bound colour at random"] == pytest.approx(0.25)
    assert all(0.0 < a < 0.5 for a in acc.values())  # better than nothing, far from solving the task
    ex = exs[0]
    assert tasks.shortcuts(ex)["most recent colour"] == float(ex.colors_seen[-1] == ex.color)


def test_answers_are_single_distinct_tokens():
    ex = tasks.make_example(random.Random(0), k=2, n_filler=1)
    ids, [(_, answer)] = tasks.encode(ex, get_tokenizer("gpt2"))
    assert get_tokenizer("gpt2").decode([answer]) == " " + ex.color
    _, [(_, byte)] = tasks.encode(ex, ByteTokenizer())
    assert byte == ord(ex.color[0])
    firsts = {c[0] for c in tasks.COLORS}
    assert len(firsts) == len(tasks.COLORS)


def test_batch_marks_only_the_answer():
    tok = ByteTokenizer()
    exs = tasks.make_examples(3, 0, k=2, n_filler=2)
    x, y, last = tasks.batch(exs, tok)
    assert ((y != tasks.IGNORE_INDEX).sum(1) == 1).all()
    for i, ex in enumerate(exs):
        ids, [(position, answer)] = tasks.encode(ex, tok)
        assert x[i, : len(ids)].tolist() == ids and last[i] == position and y[i, position] == answer


@pytest.mark.parametrize("name", ["bytes", "gpt2"])
def test_training_prompts_ask_every_bound_name_once_after_the_evaluation_prompt(name):
    """With every_question the prompt starts exactly as the evaluation prompt, then asks each other bound name once,
    after the previous answer; every answer position is scored with that name's colour."""
    tok = get_tokenizer(name)
    for ex in tasks.make_examples(20, 3, k=4, n_filler=3):
        first, [answer0] = tasks.encode(ex, tok)
        ids, answers = tasks.encode(ex, tok, every_question=True)
        assert ids[: len(first)] == first and answers[0] == answer0 and len(answers) == 4
        asked = [ex.name, *(n for n, _ in ex.followups)]
        assert sorted(asked) == sorted(n for n in tasks.NAMES if f"{n} has a " in ex.prompt)
        bindings = dict([(ex.name, ex.color), *ex.followups])
        for (position, answer), who in zip(answers, asked):
            assert tok.decode(ids[: position + 1]).rstrip().endswith(f"What color does {who} have?")
            assert answer == tasks.encode(dataclasses.replace(ex, color=bindings[who]), tok)[1][0][1]
    x, y, last = tasks.batch(tasks.make_examples(5, 0, k=3, n_filler=1), tok, every_question=True)
    assert ((y != tasks.IGNORE_INDEX).sum(1) == 3).all()


def test_curriculum_batches_grow_and_draw_k():
    batches = tasks.curriculum_batches(ByteTokenizer(), 2, seed=0, stages=[(2, 0), (4, 5)], ks=[1, 3])
    lengths = [next(batches)[0].shape[1] for _ in range(4)]
    assert max(lengths[:2]) < min(lengths[2:])
    assert tasks.equal_stages([0, 10, 30], 10) == [(4, 0), (8, 10), (12, 30)]


def test_max_prompt_tokens_bounds_every_prompt():
    tok = ByteTokenizer()
    bound = tasks.max_prompt_tokens(4, 5, tok)
    assert all(len(tasks.encode(ex, tok, every_question=True)[0]) <= bound
               for ex in tasks.make_examples(300, 1, k=4, n_filler=5))


def test_bad_task_arguments_are_refused():
    with pytest.raises(ValueError, match="bindings per prompt"):
        tasks.make_example(random.Random(0), k=9, n_filler=0)
    with pytest.raises(ValueError, match="placement"):
        tasks.make_example(random.Random(0), k=1, n_filler=0, placement="middle")
