import pytest
import torch

from odebook.models import lm as models
from odebook.nn.state_read import StateReadAttention

from causality import assert_causal

V, D, H, T = 40, 32, 4, 30


def hybrid(**kw):
    torch.manual_seed(0)
    return models.pattern_lm("GGS", vocab_size=V, d_model=D, n_head=H, max_seq_len=T, window=4, state_read=True, **kw)


def state_reader(model):
    return next(m for m in model.modules() if isinstance(m, StateReadAttention))


@pytest.mark.parametrize("local_path", ["drop_0.7", "drop_0.7_inverted", "static_0.1"])
def test_hybrid_is_causal_including_its_state_read(local_path):
    assert_causal(hybrid(local_path=local_path), V, T, positions=[0, 9, T - 1], atol=1e-5)


def test_the_read_uses_the_source_state_and_its_key_projection():
    model = hybrid(conv_width=0).eval()
    reader, source = state_reader(model), model.blocks[1].attn
    captured = {}
    reader.read_proj.register_forward_hook(lambda mod, inp, out: captured.update(read=inp[0]))
    source.register_forward_hook(lambda mod, inp, out: captured.update(state=out.state))
    x = torch.randint(0, V, (2, T))
    h_in = {}
    model.blocks[2].ln1.register_forward_hook(lambda mod, inp, out: h_in.update(x=out))
    model(x)
    q_last = source.keys(h_in["x"])[:, -1]  # [B, H, K]: the S layer's input through the source's key projection
    scale = source.head_dim**-0.5  # the gated delta rule reads with scale·q
    expected = torch.einsum("bhk,bhkv->bhv", scale * q_last, captured["state"]).reshape(2, -1)
    torch.testing.assert_close(captured["read"][:, -1], expected, atol=1e-5, rtol=1e-5)


def _parts(model, x, ablation):
    """Each block's mixer output and the hybrid's diagnostics under ``ablation``."""
    outs = []
    hooks = [b.attn.register_forward_hook(lambda mod, inp, out: outs.append(out[0] if isinstance(out, tuple) else
                                                                           getattr(out, "y", out)))
             for b in model.blocks]
    _, diag = model.run(x, ablation=ablation)
    for h in hooks:
        h.remove()
    return outs, diag[-1]


def test_each_ablation_switch_zeroes_exactly_what_it_names():
    model = hybrid().eval()
    x = torch.randint(0, V, (2, T))
    base_outs, base = _parts(model, x, models.Ablation())
    assert base["local_norm"] > 0 and base["retrieval_norm"] > 0
    # the state read alone: the GDN layers are untouched, the local path too
    outs, d = _parts(model, x, models.Ablation(state_read=True))
    assert d["retrieval_norm"] == 0 and d["local_norm"] == pytest.approx(base["local_norm"])
    for a, b in zip(outs[:2], base_outs[:2]):
        torch.testing.assert_close(a, b)
    # the local path alone
    outs, d = _parts(model, x, models.Ablation(local=True))
    assert d["local_norm"] == 0 and d["retrieval_norm"] == pytest.approx(base["retrieval_norm"])
    for a, b in zip(outs[:2], base_outs[:2]):
        torch.testing.assert_close(a, b)
    # the GDN layers' own read-outs alone: the first GDN block's output changes, the local path of the S layer
    # sees changed inputs but is not zeroed
    outs, d = _parts(model, x, models.Ablation(gdn_state=True))
    assert not torch.allclose(outs[0], base_outs[0]) and d["local_norm"] > 0 and d["retrieval_norm"] > 0
    # the plain S layers of the no-state control: local zeroed leaves no token mixing; the state switches touch nothing
    control = models.pattern_lm("SSS", vocab_size=V, d_model=D, n_head=H, max_seq_len=T, window=4).eval()
    x2 = x.clone()
    x2[:, 0] = (x[:, 0] + 1) % V
    mixes = lambda m, a: not torch.allclose(m(x, ablation=a)[:, 1:], m(x2, ablation=a)[:, 1:])  # noqa: E731
    assert mixes(control, models.Ablation()) and not mixes(control, models.Ablation(local=True))
    torch.testing.assert_close(control(x, ablation=models.Ablation(gdn_state=True, state_read=True)), control(x))
    every = models.Ablation(gdn_state=True, state_read=True, local=True)
    assert mixes(model, models.Ablation(local=True)) and not mixes(model, every)  # both zeroed: nothing reaches back


def test_local_path_arms():
    x = torch.randint(0, V, (4, T))
    unscaled = models.gdn_diagnostics(hybrid(local_path="none").eval(), x)[-1]["local_norm"]
    for arm, scale in (("static_0.3", 0.3), ("static_0.1", 0.1), ("drop_0.7", 0.3), ("drop_0.7_inverted", 1.0)):
        local = models.gdn_diagnostics(hybrid(local_path=arm).eval(), x)[-1]["local_norm"]
        assert local == pytest.approx(scale * unscaled, rel=1e-4), arm  # inference: the arm's local_scale
    torch.manual_seed(0)
    source = state_reader(hybrid(local_path="drop_0.7").train())._local_multiplier(4000, "cpu").flatten()
    assert set(source.unique().tolist()) == {0.0, 1.0} and (source == 0).float().mean() == pytest.approx(0.7, abs=0.03)
    inverted = state_reader(hybrid(local_path="drop_0.7_inverted").train())._local_multiplier(4000, "cpu").flatten()
    assert inverted.max() == pytest.approx(1 / 0.3) and inverted.mean() == pytest.approx(1.0, abs=0.1)
    assert state_reader(hybrid(local_path="static_0.3").train())._local_multiplier(4, "cpu") == 0.3


def test_shared_source_parameters_are_counted_once():
    model = hybrid()
    ids = [id(p) for ps in models.param_groups(model).values() for p in ps]
    assert len(ids) == len(set(ids)) == len(list(model.parameters()))


def test_a_state_reading_layer_needs_a_gdn_layer_before_it():
    with pytest.raises(ValueError, match="needs a G layer before it"):
        models.pattern_lm("SG", vocab_size=V, d_model=D, n_head=H, max_seq_len=T, state_read=True)
    with pytest.raises(ValueError, match="unknown local_path"):
        hybrid(local_path="drop_0.5")


@pytest.mark.parametrize("mode", ["mean", "resample"])
def test_a_mean_or_resampled_state_read_replaces_the_read_alone_by_what_it_names(mode):
    model = hybrid().eval()
    reader = state_reader(model)
    seen = {}
    reader.register_forward_pre_hook(lambda mod, args, kw: seen.update(h=args[0], writes=kw["writes"]),
                                     with_kwargs=True)
    x = torch.randint(0, V, (3, T))
    outs, _ = _parts(model, x, models.Ablation(state_read=mode))
    h, writes = seen["h"], seen["writes"]
    read = writes.read(h)
    other = read.mean(0, keepdim=True).expand_as(read) if mode == "mean" else read.roll(1, dims=0)
    expected = reader.local(h) + torch.sigmoid(reader.gate(h)) * reader.read_proj(other.reshape(3, T, -1))
    torch.testing.assert_close(outs[2], expected, atol=1e-5, rtol=1e-5)
    # the prompt's own read is gone, another's (or the average) stands in: the output changes
    assert not torch.allclose(outs[2], _parts(model, x, models.Ablation())[0][2], atol=1e-4)
    # identical prompts: the batch mean and the other prompt's read are this prompt's own read — nothing changes
    same = x[:1].expand(3, T)
    torch.testing.assert_close(_parts(model, same, models.Ablation(state_read=mode))[0],
                               _parts(model, same, models.Ablation())[0], atol=1e-5, rtol=1e-5)


def test_replacements_say_what_they_need():
    from odebook.nn.gdn import replaced

    t = torch.arange(6.0).view(3, 2)
    assert torch.equal(replaced(t, False), t) and not replaced(t, True).any() and not replaced(t, "zero").any()
    assert torch.equal(replaced(t, "mean"), torch.tensor([[2.0, 3.0]] * 3))
    assert torch.equal(replaced(t, "resample"), t[[2, 0, 1]])
    with pytest.raises(ValueError, match="needs a batch of two"):
        replaced(t[:1], "resample")
    with pytest.raises(ValueError, match="Ablation.local must be"):
        models.Ablation(local="shuffle")
