"""data.mqar: labels only at the queries, disjoint key and value halves, the power-law gaps, held-out pairs."""

import pytest
import torch

from odebook.data import mqar
from odebook.nn.linear_ce import IGNORE_INDEX

V = mqar.Vocab(16)


def _batch(n=512, k=6, seq_len=64, seed=0, **kw):
    return mqar.make_batch(n, vocab=V, k=k, seq_len=seq_len, generator=torch.Generator().manual_seed(seed), **kw)


def test_labels_stand_only_at_the_queries_and_name_the_bound_value():
    b = _batch()
    labelled = b.y != IGNORE_INDEX
    assert labelled.sum(1).eq(6).all()
    rows = torch.arange(len(b.x))[:, None]
    assert labelled[rows, b.queries].all()
    bound = {}
    for r in range(len(b.x)):
        bound = {int(V.key(i)): int(V.value(j)) for i, j in zip(b.keys[r], b.values[r])}
        for q in b.queries[r].tolist():
            assert b.x[r, q].item() in bound and b.y[r, q].item() == bound[b.x[r, q].item()]
            assert b.x[r, q + 1].item() == b.y[r, q].item() if q + 1 < b.x.shape[1] else True
        asked = sorted(b.x[r, b.queries[r]].tolist())
        assert asked == sorted(bound)  # every key asked once


def test_keys_and_values_come_from_disjoint_halves_and_keys_are_distinct():
    b = _batch()
    context = b.x[:, :12]
    keys, values = context[:, 0::2], context[:, 1::2]
    assert ((keys >= 1) & (keys <= 16)).all() and ((values >= 17) & (values <= 32)).all()
    assert all(len(set(row.tolist())) == 6 for row in keys)
    assert V.size == 33 and mqar.chance(V) == 1 / 16


def test_query_gaps_follow_the_power_law():
    k, seq_len, a = 2, 64, 0.3
    b = _batch(n=20000, k=k, seq_len=seq_len, power_a=a)
    slots = ((b.queries - 2 * k) // 2).flatten()
    n_slots = (seq_len + 1 - 2 * k) // 2
    seen = torch.bincount(slots, minlength=n_slots).double()
    seen /= seen.sum()
    w = mqar.slot_weights(n_slots, a)
    assert seen[0] > seen[5] > seen[-1]  # near slots likelier
    # two draws without replacement (Gumbel top-2): slot s is drawn first, or second after some other slot j
    chosen = w + w * ((w / (1 - w)).sum() - w / (1 - w))
    assert torch.allclose(seen, chosen / k, atol=0.006)
    uniform = _batch(n=20000, k=k, seq_len=seq_len, power_a=1.0)
    assert ((uniform.queries - 2 * k) // 2).double().mean() > slots.double().mean() + 5


def test_no_training_pair_is_a_held_out_pair_and_the_unseen_set_asks_only_those():
    b = _batch(n=4000)
    assert not (b.values == V.held_out(b.keys)).any()
    unseen = _batch(n=100, seed=1, unseen_pairs=True)
    assert (unseen.values == V.held_out(unseen.keys)).all()


def test_the_same_seed_gives_the_same_batch_and_bad_shapes_say_what():
    assert torch.equal(_batch(seed=3).x, _batch(seed=3).x) and not torch.equal(_batch(seed=3).x, _batch(seed=4).x)
    with pytest.raises(ValueError, match="k = 20 pairs need"):
        _batch(k=20)
    with pytest.raises(ValueError, match="query slots"):
        _batch(k=8, seq_len=24)


def test_the_shortcut_scores_what_counting_values_can_reach():
    b = _batch(n=2000, k=2)
    assert 0.45 < mqar.shortcut_accuracy(b.x, b.y, 2) < 0.6  # two values: the guess is right for one, both when equal
    # the same, counted over the pairs as bound
    guess = torch.nn.functional.one_hot(b.values, int(b.values.max()) + 1).sum(1).argmax(1)
    assert mqar.shortcut_accuracy(b.x, b.y, 2) == pytest.approx(float((b.values == guess[:, None]).float().mean()))
