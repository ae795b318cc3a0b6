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
                if 1 <= x[b, t] <= V.n_keys and x[b, t] not in bound and x[b, t + 1] > V.n_keys:
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


def test_an_ablated_score_is_the_model_run_with_the_ablation():
    from odebook.models.lm import pattern_lm
    from odebook.nn.gdn import Ablation

    torch.manual_seed(0)
    model = pattern_lm("GG", vocab_size=V.size, d_model=16, n_head=2, max_seq_len=32, chunk_size=8)
    zeroed = Ablation(gdn_state=True)
    task = recall.mqar_task(train_ks=[2], eval_ks=[2, 4], eval_batches=1, device=torch.device("cpu"),
                            ablations={"state zeroed": zeroed}, **KW)
    scores = task.score(type("Run", (), {"module": model})())
    sets = recall.eval_sets(ks=[2, 4], batches=1, **KW)
    assert set(scores) == {*sets, *(f"state zeroed: {name}" for name in sets)}
    for name, batches in sets.items():
        assert scores[name] == recall.accuracy(model, batches, torch.device("cpu"))
        assert scores[f"state zeroed: {name}"] == recall.accuracy(model, batches, torch.device("cpu"), ablation=zeroed)
    x = sets["k=4"][0][0]
    assert not torch.allclose(model(x), model(x, ablation=zeroed))  # the ablation changes the forward pass


def test_a_test_set_is_drawn_after_the_others_and_scored_only_as_the_test_loss():
    plain = recall.eval_sets(ks=[2, 4], batches=2, **KW)
    with_test = recall.eval_sets(ks=[2, 4], batches=2, test=True, **KW)
    assert list(with_test) == [*plain, "test"]
    assert all(torch.equal(a[0], b[0]) for name in plain for a, b in zip(plain[name], with_test[name]))
    assert not torch.equal(with_test["test"][0][0], with_test["k=4"][0][0])
    task = recall.mqar_task(train_ks=[2], eval_ks=[2, 4], eval_batches=2, device=torch.device("cpu"), test=True, **KW)
    assert task.test is not None and len(task.test) == 2
    assert recall.mqar_task(train_ks=[2], eval_ks=[2], eval_batches=2, device=torch.device("cpu"), **KW).test is None


def test_the_shortcut_is_scored_on_the_very_sequences_of_each_set():
    sets = recall.eval_sets(ks=[2, 4, 8], batches=3, **KW)
    g = torch.Generator().manual_seed(recall.EVAL_SEED)  # eval_sets' draws, in its order
    again = {f"k={k}": [mqar.make_batch(4, vocab=V, k=k, seq_len=32, generator=g, power_a=0.2) for _ in range(3)]
             for k in [2, 4, 8]}
    got = recall.shortcut(sets)
    for name, batches in again.items():
        assert all(torch.equal(b.x, x) for b, (x, _) in zip(batches, sets[name]))
        assert abs(got[name] - sum(mqar.shortcut_accuracy(b) for b in batches) / 3) < 1e-12
    assert got["k=2"] >= 0.5 and got["k=8"] < got["k=2"]  # of two values the mode is right at least half the time
