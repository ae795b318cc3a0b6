"""study.recall: MQAR as a task — a seeded stream, fixed evaluation sets, accuracy at the query positions only."""

import torch
from torch import nn

from odebook.data import mqar
from odebook.study import recall

V = mqar.Vocab(8)
KW = dict(vocab=V, batch_size=4, seq_len=32, power_a=0.2)


class Oracle(nn.Module):
    """Reads the pairs from the context and answers every key with its bound value (or a fixed wrong one)."""

    def __init__(self, wrong: bool = False):
        super().__init__()
        self.wrong = wrong

    def forward(self, x):
        logits = torch.zeros(*x.shape, V.size)
        for b in range(x.shape[0]):
            bound = {}
            for t in range(0, x.shape[1] - 1, 2):
                if 1 <= x[b, t] <= V.n_keys and int(x[b, t]) not in bound and x[b, t + 1] > V.n_keys:
                    bound[int(x[b, t])] = int(x[b, t + 1])
            for t in range(x.shape[1]):
                if int(x[b, t]) in bound:
                    logits[b, t, 1 if self.wrong else bound[int(x[b, t])]] = 1.0
        return logits


def test_the_stream_is_seeded_and_cycles_through_its_ks():
    a, b = recall.stream(3, ks=[1, 4], **KW), recall.stream(3, ks=[1, 4], **KW)
    first = [next(a) for _ in range(4)]
    assert all(torch.equal(x, y) for (x, _), (y, _) in zip(first, [next(b) for _ in range(4)]))
    assert [int((y != -100).sum(1)[0]) for _, y in first] == [1, 4, 1, 4]


def test_accuracy_counts_only_the_query_positions():
    sets = recall.eval_sets(ks=[2, 4], batches=2, **KW)
    assert set(sets) == {"k=2", "k=4", "unseen pairs"}
    device = torch.device("cpu")
    assert recall.accuracy(Oracle(), sets["k=4"], device) == 1.0
    assert recall.accuracy(Oracle(wrong=True), sets["k=4"], device) == 0.0
    assert recall.accuracy(Oracle(), sets["unseen pairs"], device) == 1.0  # binding, not memorised pairs


def test_the_task_scores_every_set_and_names_its_data():
    task = recall.mqar_task(train_ks=[2], eval_ks=[2, 4], eval_batches=1, device=torch.device("cpu"), **KW)
    run = type("Run", (), {"module": Oracle()})()
    assert task.score(run) == {"k=2": 1.0, "k=4": 1.0, "unseen pairs": 1.0}
    assert "MQAR, 8 keys" in task.key["data"]
    assert len(task.valid) == 2 and task.key["valid"] == "k [2, 4]"  # validation: every evaluated k's sets


def test_first_query_scores_are_the_model_on_the_first_queries_as_drawn_re_bound_and_ablated():
    from odebook.models.lm import pattern_lm
    from odebook.nn.gdn import Ablation

    torch.manual_seed(0)
    model = pattern_lm("GG", vocab_size=V.size, d_model=16, n_head=2, max_seq_len=32, chunk_size=8)
    zeroed, cpu = Ablation(gdn_state=True), torch.device("cpu")
    first = recall.scoring_sets(ks=[2, 4], seed=5, batches=2, **KW)
    task = recall.mqar_task(train_ks=[2], eval_ks=[2, 4], eval_batches=1, device=cpu, first=first,
                            ablations={"state zeroed": zeroed}, **KW)
    scores = task.score(type("Run", (), {"module": model})())
    names = {recall.first_name(k, ablation=a, rebound=r) for k in first for a in ("", "state zeroed") for r in (0, 1)}
    assert set(scores) == {"k=2", "k=4", "unseen pairs", *names}
    assert recall.first_name(4, ablation="state zeroed", rebound=True) == "state zeroed: first k=4, re-bound"
    for k, batches in first.items():
        assert scores[f"first k={k}"] == recall.first_accuracy(model, batches, cpu)
        again = [recall.rebound(b) for b in batches]
        assert scores[f"state zeroed: first k={k}, re-bound"] == recall.first_accuracy(model, again, cpu,
                                                                                      ablation=zeroed)
    x = first[4][0].x
    assert not torch.allclose(model(x), model(x, ablation=zeroed))  # the ablation changes the forward pass


def test_first_accuracy_reads_only_the_first_query_and_a_binder_fails_re_bound_sequences():
    cpu = torch.device("cpu")
    first = recall.scoring_sets(ks=[4], seed=1, batches=3, **KW)[4]
    assert recall.first_accuracy(Oracle(), first, cpu) == 1.0
    assert recall.first_accuracy(Oracle(wrong=True), first, cpu) == 0.0
    rebound = [recall.rebound(b) for b in first]
    # the binder answers the value re-bound to the key: right only where that value equals the one first bound
    expected = []
    for b in first:
        rows, q = torch.arange(len(b.x)), b.queries[:, 0]
        slot = (b.keys == (b.x[rows, q] - 1)[:, None]).float().argmax(1)
        expected += (b.values[rows, slot] == b.values[rows, (slot - 1) % 4]).tolist()
    assert recall.first_accuracy(Oracle(), rebound, cpu) == sum(expected) / len(expected) < 0.5


def test_scoring_sets_are_seeded_apart_from_the_evaluation_sets():
    a, b = recall.scoring_sets(ks=[2, 4], seed=3, **KW), recall.scoring_sets(ks=[2, 4], seed=3, **KW)
    assert len(a[2]) == recall.SCORING_BATCHES and all(torch.equal(x.x, y.x) for x, y in zip(a[4], b[4]))
    assert not torch.equal(a[2][0].x, recall.eval_sets(ks=[2], batches=1, **KW)["k=2"][0][0])


def test_a_test_set_is_drawn_after_the_others_and_scored_only_as_the_test_loss():
    plain = recall.eval_sets(ks=[2, 4], batches=2, **KW)
    with_test = recall.eval_sets(ks=[2, 4], batches=2, test=True, **KW)
    assert list(with_test) == [*plain, "test"]
    assert all(torch.equal(a[0], b[0]) for name in plain for a, b in zip(plain[name], with_test[name]))
    assert not torch.equal(with_test["test"][0][0], with_test["k=4"][0][0])
    task = recall.mqar_task(train_ks=[2], eval_ks=[2, 4], eval_batches=2, device=torch.device("cpu"), test=True, **KW)
    assert task.test is not None and len(task.test) == 2
    assert recall.mqar_task(train_ks=[2], eval_ks=[2], eval_batches=2, device=torch.device("cpu"), **KW).test is None


V16 = mqar.Vocab(16)


def _batch(n=512, k=6, seq_len=64, seed=0):
    return mqar.make_batch(n, vocab=V16, k=k, seq_len=seq_len, generator=torch.Generator().manual_seed(seed))


def test_a_re_bound_batch_keeps_the_context_values_and_the_answers():
    b = _batch(n=64, k=4)
    r = recall.rebound(b)
    assert torch.equal(r.y, b.y) and torch.equal(r.queries, b.queries)
    assert torch.equal(r.x[:, 0:8:2], b.x[:, 0:8:2])  # the keys stay
    assert torch.equal(r.x[:, 1:8:2].sort(1).values, b.x[:, 1:8:2].sort(1).values)  # the same values …
    assert torch.equal(r.x[:, 3:8:2], b.x[:, 1:6:2]) and torch.equal(r.x[:, 1], b.x[:, 7])  # … one pair on
    assert torch.equal(r.x[:, 8:], b.x[:, 8:])  # the queries and what follows them


def test_the_first_query_non_binder_against_a_plain_loop():
    for k in (2, 4, 8):
        b = _batch(n=200, k=k, seed=k)
        hits = 0
        for r in range(len(b.x)):
            q = int(b.queries[r, 0])
            never = int(V16.value(V16.held_out(b.x[r, q] - 1)))
            counts = {}
            for v in b.x[r, 1:2 * k:2].tolist():
                counts[v] = counts.get(v, 0) + (v != never)
            best = max(counts.values())
            guess = min(v for v, c in counts.items() if c == best) if best else 0
            hits += guess == int(b.y[r, q])
        assert abs(recall.non_binder(b, V16) - hits / len(b.x)) < 1e-6
    assert recall.non_binder(_batch(n=500, k=2), V16) > 0.5  # of two values one is the answer
