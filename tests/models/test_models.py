import pytest
import torch

from odebook.models import lm as models
from odebook.nn import CausalSelfAttention, attention_reference

from causality import assert_causal

V, D, L, H, T = 61, 32, 6, 4, 24
SHAPE = dict(vocab_size=V, d_model=D, n_layer=L, n_head=H, max_seq_len=T)


def hybrid(**ode):
    return models.ode_hybrid(**SHAPE, ode_layers=[2, 3], control_dim=4, **ode)


def test_sdpa_attention_matches_the_plain_reference():
    torch.manual_seed(0)
    attn = CausalSelfAttention(d_model=D, n_head=H)
    x = torch.randn(3, T, D)
    q, k, v = attn.heads(x)
    ref = attn.proj(attention_reference(q, k, v).transpose(1, 2).reshape(3, T, D))
    torch.testing.assert_close(attn(x), ref, atol=1e-6, rtol=1e-5)


FAMILIES = {
    "baseline": lambda: models.gpt(**SHAPE),
    "hybrid-euler": lambda: hybrid(solver="euler", steps=4),
    "hybrid-midpoint": lambda: hybrid(solver="midpoint", steps=3),
    "hybrid-rk4": lambda: hybrid(solver="rk4", steps=2),
    "hybrid-rk4-adjoint": lambda: hybrid(solver="rk4", steps=2, sensitivity="adjoint"),
    "hybrid-midpoint-reversible": lambda: hybrid(solver="midpoint", steps=2, sensitivity="reversible"),
    "hybrid-tokenwise": lambda: hybrid(solver="euler", steps=4, attention=False),
}


def test_a_tokenwise_flow_moves_nothing_between_tokens():
    """Without attention in its field the flow block maps each position on its own: a change at token j leaves
    the block's output at every other position as it was."""
    from odebook.nn.ode import ODEFlowBlock

    torch.manual_seed(0)
    block = ODEFlowBlock(d_model=D, n_head=H, solver="rk4", steps=2, attention=False, alpha_init=1.0)
    x = torch.randn(2, T, D)
    y = x.clone()
    y[:, 5] += 1.0
    out_x, out_y = block(x), block(y)
    others = [i for i in range(T) if i != 5]
    torch.testing.assert_close(out_x[:, others], out_y[:, others], atol=0, rtol=0)
    assert not torch.allclose(out_x[:, 5], out_y[:, 5])
    assert block.field.attn is None and sum(p.numel() for p in block.parameters()) < sum(
        p.numel() for p in ODEFlowBlock(d_model=D, n_head=H).parameters())


@pytest.mark.parametrize("family", FAMILIES)
def test_changing_token_j_leaves_earlier_logits_unchanged(family):
    torch.manual_seed(0)
    assert_causal(FAMILIES[family](), V, T, positions=[0, 7, T - 1])


def test_dopri5_is_causal_only_up_to_its_tolerance():
    """An adaptive solver picks one step size for the whole sequence from an error norm over all positions, so a
    future token can move earlier outputs — by less than the solver's tolerance, but not by zero."""
    torch.manual_seed(0)
    model = hybrid(solver="dopri5", rtol=1e-4, atol=1e-5).eval()
    x = torch.randint(0, V, (2, T))
    x2 = x.clone()
    x2[:, 12] = (x[:, 12] + 1) % V
    with torch.no_grad():
        diff = (model(x)[:, :12] - model(x2)[:, :12]).abs().max().item()
    assert diff < 1e-3


def per_block(d):
    return 12 * d * d + 13 * d  # ln1 2d + qkv 3d²+3d + proj d²+d + ln2 2d + fc 4d²+4d + proj 4d²+d


def test_parameter_counts_match_the_formula():
    emb, head = V * D + T * D, 2 * D + V * D  # token + position; final LN + untied head
    assert models.count_params(models.gpt(**SHAPE)) == emb + L * per_block(D) + head
    # the ODE block: one block's F, plus time embedding (1→d→d), control embedding (4→d) and α
    ode = per_block(D) + (D + D) + (D * D + D) + (4 * D + D) + 1
    assert models.count_params(hybrid()) == emb + (L - 2) * per_block(D) + ode + head


def test_padded_head_leaves_the_distribution_unchanged():
    model = models.gpt(**SHAPE)  # V = 61 → 64 head columns
    assert model.head.weight.shape == (D, 64) and model.n_spare_params == 3 * D
    x = torch.randint(0, V, (2, T))
    logits = model(x)
    assert logits.shape == (2, T, V)
    torch.testing.assert_close(logits, (model.ln_f(model.blocks[-1](  # the same as a head of exactly V rows
        _hidden_before_last(model, x))) @ model.head.weight[:, :V]))
    models.lm_loss(model, (x, x)).backward()
    assert model.head.weight.grad[:, V:].abs().sum() == 0  # spare columns get no gradient


def _hidden_before_last(model, x):
    h = model.drop(model.tok_emb(x) + model.pos_emb(torch.arange(x.shape[1])))
    for block in model.blocks[:-1]:
        h = block(h)
    return h


def test_param_groups_partition_the_model():
    model = hybrid()
    groups = models.param_groups(model)
    assert set(groups) == {"embedding", "blocks", "ode", "head"}
    ids = [id(p) for ps in groups.values() for p in ps]
    assert len(ids) == len(set(ids)) == len(list(model.parameters()))


def test_sequence_longer_than_the_positional_table_is_refused():
    with pytest.raises(ValueError, match="exceeds max_seq_len"):
        models.gpt(**SHAPE)(torch.zeros(1, T + 1, dtype=torch.long))


def test_greedy_generation_appends_the_argmax_and_top1_sampling_equals_it():
    torch.manual_seed(0)
    model = models.gpt(**SHAPE)
    start = torch.randint(0, V, (2, 5))
    out = models.generate(model, start, 6, temperature=0)
    assert out.shape == (2, 11) and torch.equal(out[:, :5], start)
    for t in range(5, 11):  # each new token is the argmax given everything before it
        assert torch.equal(out[:, t], model(out[:, :t])[:, -1].argmax(-1))
    sampled = models.generate(model, start, 6, temperature=1.0, top_k=1, generator=torch.Generator().manual_seed(1))
    assert torch.equal(sampled, out)
    long = models.generate(model, torch.randint(0, V, (1, T)), 3, temperature=0)  # the window slides past max_seq_len
    assert long.shape == (1, T + 3)
