import torch

from odebook import models
from odebook.nn.hybrid import StateReadAttention

from causality import assert_causal

V, D, H, T = 40, 32, 4, 30


def hybrid(**kw):
    torch.manual_seed(0)
    return models.pattern_lm("GGS", vocab_size=V, d_model=D, n_head=H, max_seq_len=T, window=4, state_read=True, **kw)


def state_reader(model):
    return next(m for m in model.modules() if isinstance(m, StateReadAttention))


def test_hybrid_is_causal_including_its_state_read():
    assert_causal(hybrid(local_drop_prob=0.7, local_scale=0.3), V, T, positions=[0, 9, T - 1], atol=1e-5)


def test_the_read_uses_the_source_state_and_its_key_projection():
    model = hybrid(conv_width=0).eval()
    reader, source = state_reader(model), model.blocks[1].mixer
    captured = {}
    reader.read_proj.register_forward_hook(lambda mod, inp, out: captured.update(read=inp[0]))
    x = torch.randint(0, V, (2, T))
    h_in = {}
    model.blocks[2].ln1.register_forward_hook(lambda mod, inp, out: h_in.update(x=out))
    model(x)
    q_last = source.keys(h_in["x"])[:, -1]  # [B, H, K]: the S layer's input through the source's key projection
    scale = source.head_dim**-0.5  # the gated delta rule reads with scale·q
    expected = torch.einsum("bhk,bhkv->bhv", scale * q_last, source.last["state"]).reshape(2, -1)
    torch.testing.assert_close(captured["read"][:, -1], expected, atol=1e-5, rtol=1e-5)


def test_state_ablation_also_silences_the_state_read():
    model = hybrid().eval()
    x = torch.randint(0, V, (2, T))
    normal = model(x)
    with models.state_ablation(model):
        zeroed = model(x)
        assert state_reader(model).last["retrieval_norm"] == 0
    assert (normal - zeroed).abs().max() > 1e-4
    diag = models.gdn_diagnostics(model)
    assert len(diag) == 3 and {"gate_mean", "local_norm", "retrieval_norm"} <= set(diag[-1])


def test_local_path_bottlenecks():
    x = torch.randint(0, V, (4, T))
    dropped = hybrid(local_drop_prob=1.0).train()
    dropped(x)
    assert state_reader(dropped).last["local_norm"] == 0  # always dropped in training
    dropped.eval()(x)
    assert state_reader(dropped).last["local_norm"] > 0  # never at inference
    scaled = hybrid(local_scale=0.0).eval()
    scaled(x)
    assert state_reader(scaled).last["local_norm"] == 0


def test_shared_source_parameters_are_counted_once():
    model = hybrid()
    ids = [id(p) for ps in models.param_groups(model).values() for p in ps]
    assert len(ids) == len(set(ids)) == len(list(model.parameters()))


def test_a_state_reading_layer_needs_a_gdn_layer_before_it():
    import pytest

    with pytest.raises(ValueError, match="needs a G layer before it"):
        models.pattern_lm("SG", vocab_size=V, d_model=D, n_head=H, max_seq_len=T, state_read=True)
