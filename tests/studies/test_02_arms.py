"""Study 02's arms (its arms module): causality, parameter counts, the twin's own draw, the faithful variants."""

import math

import pytest
import torch

from families import time_indexed
from odebook.models import lm as models
from odebook.nn import (Block, DepthStack, GatedBlock, HyperBlock, SSMGatedBlock, memoryless_scan, selective_scan,
                        sinusoidal_embedding)

from causality import assert_causal

from odebook import studies

arms = studies.load("02_time_indexed").arms
TIME_INDEXED_MODELS = tuple(arms.ARMS)


V, D, H, L, P = 40, 32, 4, 3, 16
S, E, W, N = 4, 8, 12, 5
SHAPE = dict(vocab_size=V, d_model=D, n_head=H, n_layer=L, max_seq_len=P, n_freq=S, d_emb=E, gate_width=W, d_state=N)


def build(name):
    torch.manual_seed(0)
    return time_indexed(name, **SHAPE)


@pytest.mark.parametrize("name", TIME_INDEXED_MODELS)
def test_changing_token_j_leaves_earlier_logits_unchanged(name):
    assert_causal(build(name), V, P, positions=[0, 5, P - 1])


def time_mlp(out):
    return (2 * S + 1) * W + W + W * out + out


BLOCK = 12 * D * D + 13 * D
EMB_HEAD = V * D + P * D + 2 * D + V * D
CHANNEL_GATES = 4 * D + 2 * D + 5 * D + 5 * D  # (out + in) for qkv, proj, fc, mlp out
SSM = 2 * D + (D * D + D) + 3 * D * N + D + (D * D + D) + time_mlp(3 * D + 2 * N)  # ln3, Δ, B/C/A_log, D, out, gates
FORMULAS = {
    "standard": EMB_HEAD + L * BLOCK,
    "tong": EMB_HEAD + ((2 * S + 1) * E + E + E * E + E) + (E + 1) * (12 * D * D + 9 * D) + 4 * E * D,
    "ti_mlp": EMB_HEAD + BLOCK + time_mlp(CHANNEL_GATES),
    "ti_mlp_full": EMB_HEAD + BLOCK + time_mlp(12 * D * D),
    "ti_ssm": EMB_HEAD + BLOCK + time_mlp(CHANNEL_GATES) + SSM,
    "ti_ssm_memoryless": EMB_HEAD + BLOCK + time_mlp(CHANNEL_GATES) + SSM,  # the same parameters, A unused
    "ti_mlp_constant": EMB_HEAD + BLOCK + time_mlp(CHANNEL_GATES),
    "ti_mlp_dt": EMB_HEAD + BLOCK + time_mlp(CHANNEL_GATES),
    "ode_shared": EMB_HEAD + BLOCK + time_mlp(D),
    "ti_mlp_twin": EMB_HEAD + BLOCK + time_mlp(CHANNEL_GATES),
}


@pytest.mark.parametrize("name", FORMULAS)
def test_parameter_count_matches_the_formula(name):
    """Each arm's count worked out by hand (a new arm is tested for causality above at once, and here once its
    formula is written down)."""
    assert name in arms.ARMS and models.count_params(build(name)) == FORMULAS[name]


def test_the_twin_is_the_ti_mlp_from_other_initial_weights():
    # the null arm of study 02: the same architecture and count, built after the same seed, every random weight new
    twin, mlp = build("ti_mlp_twin"), build("ti_mlp")
    w, v = twin.state_dict(), mlp.state_dict()
    assert w.keys() == v.keys() and type(twin.blocks[0]) is type(mlp.blocks[0])
    matrices = [k for k in v if v[k].dim() > 1]  # every weight drawn at random (LayerNorms start at 1 and 0)
    assert len(matrices) >= 8 and not any(torch.equal(w[k], v[k]) for k in matrices)
    shared = [torch.isin(w[k].flatten(), v[k].flatten()).float().mean().item() for k in matrices]
    assert max(shared) < 0.01, shared  # other draws, not ti_mlp's values shifted along the generator's stream
    torch.manual_seed(0)
    untouched = torch.get_rng_state()
    time_indexed("ti_mlp_twin", **SHAPE)
    assert torch.equal(torch.get_rng_state(), untouched)  # the run's own generator is left where it was
    assert all(torch.equal(w[k], build("ti_mlp_twin").state_dict()[k]) for k in w)  # reproducible from the seed
    mlp.load_state_dict(w)  # the same function of its weights: only the initial draw differs
    x = torch.randint(0, V, (2, P))
    torch.testing.assert_close(mlp(x), twin(x), atol=0, rtol=0)


def test_tong_generator_shapes_and_counts_match_its_docstring():
    block = HyperBlock(d_model=D, n_head=H, n_freq=S, d_emb=E)
    w = block.weights(0.5)
    shapes = {k: tuple(v.shape) for k, v in w.items()}
    assert shapes == {"qkv_w": (3 * D, D), "qkv_b": (3 * D,), "proj_w": (D, D), "proj_b": (D,),
                      "fc_w": (4 * D, D), "fc_b": (4 * D,), "out_w": (D, 4 * D), "out_b": (D,),
                      "ln1_w": (D,), "ln1_b": (D,), "ln2_w": (D,), "ln2_b": (D,)}
    assert sum(p.numel() for p in block.gen.parameters()) == (E + 1) * (12 * D * D + 9 * D)
    assert sum(p.numel() for p in block.embed.parameters()) == (2 * S + 1) * E + E + E * E + E
    assert sum(p.numel() for p in block.ln.parameters()) == 4 * E * D
    torch.testing.assert_close(w["ln1_w"], torch.ones(D))  # time-dependent LayerNorm starts as the identity map
    assert not torch.equal(w["qkv_w"], block.weights(0.9)["qkv_w"])  # the weights do depend on t


def test_gates_equal_to_one_give_a_weight_shared_transformer():
    torch.manual_seed(0)
    gated = GatedBlock(d_model=D, n_head=H, granularity="full", n_freq=S, gate_width=W)
    torch.nn.init.zeros_(gated.gate.net[-1].weight)
    torch.nn.init.constant_(gated.gate.net[-1].bias, 100.0)  # σ(100) = 1 exactly in float32
    assert all(torch.equal(g, torch.ones_like(g)) for g in gated.gates(0.3))
    shared = Block(d_model=D, n_head=H)
    shared.load_state_dict({k: v for k, v in gated.state_dict().items() if not k.startswith("gate.")})
    x = torch.randn(2, P, D)
    expected = x
    for _ in range(L):
        expected = shared(expected)
    torch.testing.assert_close(DepthStack(gated, steps=L, residual="direct")(x), expected, atol=1e-5, rtol=1e-5)


def test_sinusoidal_embedding_follows_its_formula():
    e = sinusoidal_embedding(0.25, 3)
    w = torch.tensor([math.exp(-math.log(1e4) * k / 3) for k in range(3)])
    torch.testing.assert_close(e, torch.cat([torch.tensor([0.25]), (250 * w).sin(), (250 * w).cos()]))


def test_depth_stack_times_and_step_sizes():
    assert DepthStack(torch.nn.Identity(), steps=4).times() == [0.25, 0.5, 0.75, 1.0]  # t_k = (k + 1)·dt
    assert DepthStack(torch.nn.Identity(), steps=4, time="constant").times() == [0.5] * 4
    seen = []
    stack = DepthStack(lambda x, t, h: seen.append(h) or x, steps=4, residual="dt")  # noqa: B023
    stack.forward(torch.zeros(1))
    assert seen == [0.25] * 4


def test_selective_scan_equals_its_closed_form():
    """y_t = Σ_{s≤t} Σ_n C_tn · exp(A_cn Σ_{r=s+1..t} Δ_rc) · Δ_sc B_sn u_sc + D_c u_tc."""
    torch.manual_seed(0)
    b, T, d, n = 2, 7, 3, 4
    u, delta = torch.randn(b, T, d, dtype=torch.float64), torch.rand(b, T, d, dtype=torch.float64)
    A, D_ = -torch.rand(d, n, dtype=torch.float64), torch.randn(d, dtype=torch.float64)
    B, C = torch.randn(b, T, n, dtype=torch.float64), torch.randn(b, T, n, dtype=torch.float64)
    cum = delta.cumsum(1)  # Σ_{r≤t} Δ_r
    y = torch.zeros(b, T, d, dtype=torch.float64)
    for t in range(T):
        for s in range(t + 1):
            decay = torch.exp((cum[:, t] - cum[:, s])[..., None] * A)  # [b, d, n]
            y[:, t] += (C[:, t, None, :] * decay * (delta[:, s] * u[:, s])[..., None] * B[:, s, None, :]).sum(-1)
    y += D_ * u
    torch.testing.assert_close(selective_scan(u, delta, A, B, C, D_), y)


def test_the_memoryless_scan_is_the_scan_with_its_state_dropped_and_reads_only_the_current_token():
    torch.manual_seed(0)
    b, T, d, n = 2, 7, 3, 4
    u, delta = torch.randn(b, T, d, dtype=torch.float64), torch.rand(b, T, d, dtype=torch.float64) + 0.1
    B, C, D_ = torch.randn(b, T, n, dtype=torch.float64), torch.randn(b, T, n, dtype=torch.float64), torch.randn(d)
    no_memory = torch.full((d, n), -math.inf, dtype=torch.float64)  # exp(Δ·A) = 0: nothing carries over
    torch.testing.assert_close(memoryless_scan(u, delta, B, C, D_.double()),
                               selective_scan(u, delta, no_memory, B, C, D_.double()), rtol=1e-12, atol=1e-12)
    # the trained arm differs from the SSM in the state alone: same weights, same output at the first token
    torch.manual_seed(0)
    ssm = SSMGatedBlock(d_model=D, n_head=H, d_state=N, n_freq=S, gate_width=W)
    memoryless = SSMGatedBlock(d_model=D, n_head=H, d_state=N, n_freq=S, gate_width=W, state=False)
    memoryless.load_state_dict(ssm.state_dict())
    x = torch.randn(2, P, D)
    y, z = ssm.ssm(x, 0.5), memoryless.ssm(x, 0.5)
    torch.testing.assert_close(y[:, 0], z[:, 0], rtol=1e-5, atol=1e-6)
    assert not torch.allclose(y[:, 1:], z[:, 1:], atol=1e-3)
    x2 = x.clone()
    x2[:, :-1] = torch.randn(2, P - 1, D)  # every earlier token changed: the last output stays the same
    torch.testing.assert_close(memoryless.ssm(x2, 0.5)[:, -1], z[:, -1], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["ti_mlp", "ti_ssm", "tong"])
def test_source_faithful_options_are_causal_and_add_the_stated_parameters(name):
    torch.manual_seed(0)
    faithful = time_indexed(name, **SHAPE, norm="temporal", tong_time_mlp="per_linear")
    assert_causal(faithful, V, P, positions=[0, 5, P - 1])
    extra = 4 * ((2 * S + 1) * E + E + E * E + E) if name == "tong" else time_mlp(4 * D)  # 4 more TimeMLPs / LN MLP
    assert models.count_params(faithful) == FORMULAS[name] + extra


def test_temporal_layernorm_starts_as_the_static_block():
    torch.manual_seed(0)
    static = GatedBlock(d_model=D, n_head=H, n_freq=S, gate_width=W)
    temporal = GatedBlock(d_model=D, n_head=H, n_freq=S, gate_width=W, norm="temporal")
    temporal.load_state_dict(static.state_dict(), strict=False)
    x = torch.randn(2, 5, D)
    assert torch.allclose(static(x, 0.3, 0.5), temporal(x, 0.3, 0.5), atol=1e-6)
    with torch.no_grad():
        temporal.norm_time.net[-1].bias.fill_(0.5)  # a trained shift changes the output
    assert not torch.allclose(static(x, 0.3, 0.5), temporal(x, 0.3, 0.5), atol=1e-3)
