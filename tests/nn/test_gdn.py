import pytest
import torch
import torch.nn.functional as F

from odebook.models import lm as models
from odebook.nn.attention import SlidingWindowAttention, attention_reference, banded_causal_mask
from odebook.nn.gdn import GatedDeltaNet

from causality import assert_causal

V, D, H, T = 50, 32, 4, 40


@pytest.mark.parametrize("pattern", ["G", "GGS", "GGGGGS", "GA", "S", "CC", "GC", "WS", "GW"])
def test_pattern_models_are_causal(pattern):
    torch.manual_seed(0)
    model = models.pattern_lm(pattern, vocab_size=V, d_model=D, n_head=H, max_seq_len=T, window=8)
    assert_causal(model, V, T, positions=[0, 13, T - 1], atol=1e-5)


def test_sliding_window_sees_exactly_its_window():
    mask = banded_causal_mask(6, 3)
    assert mask.tolist()[5] == [False, False, False, True, True, True] and mask.tolist()[0][0]
    torch.manual_seed(0)
    attn = SlidingWindowAttention(d_model=D, n_head=H, window=T)  # a window as long as the sequence: full causal
    x = torch.randn(2, T, D)
    q, k, v = attn.heads(x)
    full = attn.proj(attention_reference(q, k, v).transpose(1, 2).reshape(2, T, D))
    torch.testing.assert_close(attn(x), full, atol=1e-5, rtol=1e-5)
    narrow = SlidingWindowAttention(d_model=D, n_head=H, window=4)
    narrow.load_state_dict(attn.state_dict())
    x2 = x.clone()
    x2[:, 10] += 1.0  # outside the window of positions ≥ 14
    torch.testing.assert_close(narrow(x)[:, 14:], narrow(x2)[:, 14:])


@pytest.mark.parametrize("pattern", ["S", "W", "WS", "WWS", "SS"])
def test_a_stateless_stack_sees_exactly_its_reach(pattern):
    """models.reach: a token that far back changes the last position's logits, one farther back does not."""
    torch.manual_seed(0)
    model = models.pattern_lm(pattern, vocab_size=V, d_model=D, n_head=H, max_seq_len=T, window=5).eval()
    reach = models.reach(pattern, window=5)
    x = torch.randint(0, V, (1, T))
    with torch.no_grad():
        last = model(x)[0, -1]
        for back, changes in ((reach, True), (reach + 1, False)):
            y = x.clone()
            y[0, T - 1 - back] = (y[0, T - 1 - back] + 1) % V
            assert (not torch.allclose(model(y)[0, -1], last, atol=1e-6)) == changes, (pattern, back)
    assert models.reach("GS", window=5) is None and models.reach("SA", window=5) is None


def test_gdn_state_ablation_argument_and_diagnostics():
    torch.manual_seed(0)
    model = models.pattern_lm("GG", vocab_size=V, d_model=D, n_head=H, max_seq_len=T)
    x = torch.randint(0, V, (2, T))
    normal = model(x)
    diag = models.gdn_diagnostics(model, x)
    assert len(diag) == 2 and all(d["state_norm"] > 0 for d in diag)
    assert all(0 < d["gate_mean"] < 1 for d in diag)
    zeroed = model(x, ablation=models.Ablation(gdn_state=True))
    assert (normal - zeroed).abs().max() > 1e-4
    torch.testing.assert_close(model(x), normal)  # nothing stays switched on


def test_decay_starts_as_fla_core_starts_it():
    """Per-head decays exp(−A·dt) with A ~ U(0, 16), dt log-uniform in [0.001, 0.1] (x = 0: softplus(dt_bias) = dt):
    many heads forget slowly at initialisation, so a fact tens of tokens back can still be read."""
    torch.manual_seed(0)
    layer = GatedDeltaNet(d_model=D, n_head=512, head_dim=1)
    dt = F.softplus(layer.dt_bias.detach())
    assert dt.min() >= 1e-3 * 0.999 and dt.max() <= 0.1 * 1.001
    assert 0 < layer.A_log.exp().min() and layer.A_log.exp().max() <= 16
    decay = torch.exp(-layer.A_log.exp() * dt).detach()
    assert (decay ** 50 > 0.5).float().mean() > 0.15  # some heads keep half a fact 50 steps back
    assert (decay ** 50 < 0.01).float().mean() > 0.15  # and some forget it


def test_beta_floor_one_always_writes():
    layer = GatedDeltaNet(d_model=D, n_head=H, beta_floor=1.0)
    assert layer(torch.randn(1, 5, D)).diagnostics["beta_mean"] == 1.0


def test_gdn_returns_the_state_that_continues_the_sequence():
    """Running two halves with the first half's final state equals running the whole (no conv: it needs history)."""
    torch.manual_seed(0)
    layer = GatedDeltaNet(d_model=D, n_head=H, conv_width=0)
    x = torch.randn(2, T, D)
    whole = layer(x).y
    first = layer(x[:, :17])
    second = layer(x[:, 17:], initial_state=first.state).y
    torch.testing.assert_close(torch.cat([first.y, second], 1), whole, atol=1e-5, rtol=1e-5)


def test_attention_behind_the_short_convolution_is_attention_of_the_convolved_input():
    from odebook.nn.attention import CausalSelfAttention

    torch.manual_seed(0)
    fronted = CausalSelfAttention(d_model=D, n_head=H, conv_width=4)
    plain = CausalSelfAttention(d_model=D, n_head=H)
    plain.load_state_dict({k: v for k, v in fronted.state_dict().items() if not k.startswith("conv.")})
    x = torch.randn(2, T, D)
    q, k, v = plain.heads(fronted.conv(x))
    reference = plain.proj(attention_reference(q, k, v).transpose(1, 2).reshape(2, T, D))
    torch.testing.assert_close(fronted(x), reference, atol=1e-5, rtol=1e-5)
    assert not torch.allclose(fronted(x), plain(x), atol=1e-3)  # the front does change the input
    assert fronted.cache_problem() and plain.cache_problem() is None  # no KV-cache decoding through a convolution
