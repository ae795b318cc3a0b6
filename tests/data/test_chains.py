"""data.chains: every label is what following the bindings from the queried variable reaches, in as many lookups as
the query's depth; labels only at the queries; distinct variables and values; bad shapes say what and where."""

import pytest
import torch

from odebook.data import chains
from odebook.nn.linear_ce import IGNORE_INDEX

V = chains.Vocab(n_values=16, n_vars=40)


def _batch(n=256, n_chains=4, hops=5, seq_len=64, seed=0, **kw):
    return chains.make_batch(n, vocab=V, chains=n_chains, hops=hops, seq_len=seq_len,
                             generator=torch.Generator().manual_seed(seed), **kw)


def _follow(row: list[int], var: int) -> tuple[int, int]:
    """A plain reading of one sequence: the pairs before the first query mark bind variables; follow them from
    ``var`` until a value comes back. Returns (value, lookups)."""
    first_query = row.index(chains.QUERY)
    bound = dict(zip(row[0:first_query:2], row[1:first_query:2]))
    lookups = 0
    while var >= V.var(torch.tensor(0)).item():
        var, lookups = bound[var], lookups + 1
    return var, lookups


def test_every_label_is_the_value_the_bindings_reach_in_depth_lookups():
    b = _batch()
    labelled = b.y != IGNORE_INDEX
    assert labelled.sum(1).eq(4).all()
    rows = torch.arange(len(b.x))[:, None]
    assert labelled[rows, b.queries].all()
    assert (b.x[rows, b.queries - 1] == chains.QUERY).all()
    for r in range(len(b.x)):
        row = b.x[r].tolist()
        for q, depth in zip(b.queries[r].tolist(), b.depths[r].tolist()):
            value, lookups = _follow(row, row[q])
            assert b.y[r, q].item() == value and lookups == depth
    assert set(b.depths.unique().tolist()) == {1, 2, 3, 4, 5}  # training depths drawn from 1 … hops


def test_variables_and_values_are_distinct_and_every_chain_is_asked_once():
    b = _batch(depth=5)
    assert (b.depths == 5).all()
    m = 4 * 5
    pairs = b.x[:, : 2 * m]
    lhs = pairs[:, 0::2]
    assert all(len(set(row.tolist())) == m for row in lhs)  # each variable bound once
    answers = b.y[torch.arange(len(b.y))[:, None], b.queries]
    assert all(len(set(row.tolist())) == 4 for row in answers)  # the chains' values differ: one answer per chain
    assert ((answers >= 2) & (answers < 2 + 16)).all()
    assert (b.x[:, chains.tokens_needed(4, 5):] == chains.PAD).all()
    assert V.size == 58 and chains.chance(V) == 1 / 16 and chains.shortcut_accuracy(4) == pytest.approx(25 / 48)


def test_the_same_generator_seed_gives_the_same_batch():
    a, b = _batch(seed=3), _batch(seed=3)
    assert torch.equal(a.x, b.x) and torch.equal(a.y, b.y)
    assert not torch.equal(a.x, _batch(seed=4).x)


@pytest.mark.parametrize("kw, match", [({"n_chains": 1}, "chains >= 2"), ({"hops": 12}, "variables"),
                                       ({"seq_len": 30}, "seq_len"), ({"depth": 6}, "depth 6")])
def test_bad_shapes_say_what_is_needed(kw, match):
    with pytest.raises(ValueError, match=match):
        _batch(n=2, **kw)
