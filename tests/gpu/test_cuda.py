"""The CUDA paths a Colab or workstation user takes, each against the CPU's fp32 path or its plain reference: every
model family is causal on the GPU (the Gated DeltaNet through fla-core's kernel), trains under the device's
precision policy and under fp16 with a GradScaler (a T4's policy), the sliced head matches the plain one under
autocast, the reversible backward matches direct backpropagation under autocast, cached decoding gives the
recomputed tokens, and a data-parallel run on NCCL equals a single-process run. Skipped without a GPU (CI has none).
"""

import math

import pytest
import torch

from odebook.training import distributed
from odebook.study import measure
from odebook.models import lm as models
from odebook.data.corpus import fixed_batches, random_batches
from odebook.nn import delta_rule
from odebook.nn.gdn import GatedDeltaNet
from odebook.nn.linear_ce import IGNORE_INDEX, linear_cross_entropy, linear_cross_entropy_reference
from odebook.training.runtime import Precision, precision_for, seed_everything
from odebook.training.train import TrainConfig, train

import ddp_worker
from causality import assert_causal

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

CUDA = torch.device("cuda")
V, D, H, T = 61, 32, 4, 40
SHAPE = dict(vocab_size=V, d_model=D, n_head=H, max_seq_len=T)
FAMILIES = {
    "baseline": lambda: models.gpt(**SHAPE, n_layer=4),
    "hybrid-rk4": lambda: models.ode_hybrid(**SHAPE, n_layer=4, ode_layers=[1, 2], solver="rk4", steps=2),
    "hybrid-rk4-adjoint": lambda: models.ode_hybrid(**SHAPE, n_layer=4, ode_layers=[1, 2], solver="rk4", steps=2,
                                                    sensitivity="adjoint"),
    "hybrid-midpoint-reversible": lambda: models.ode_hybrid(**SHAPE, n_layer=4, ode_layers=[1, 2],
                                                            solver="midpoint", steps=3, sensitivity="reversible"),
    "tong": lambda: models.time_indexed("tong", **SHAPE, n_layer=4),
    "ti_mlp": lambda: models.time_indexed("ti_mlp", **SHAPE, n_layer=4),
    "ti_ssm": lambda: models.time_indexed("ti_ssm", **SHAPE, n_layer=4),
    "gdn-swa": lambda: models.pattern_lm("GGS", **SHAPE, window=8),
    "gdn-state-read": lambda: models.pattern_lm("GGS", **SHAPE, window=8, state_read=True, local_path="drop_0.7"),
}
POLICIES = {"native": None, "fp16+scaler": torch.float16}


class OnGPU(torch.nn.Module):
    """``model`` on the GPU, called with CPU token ids and returning CPU fp32 logits (for ``assert_causal``)."""

    def __init__(self, model):
        super().__init__()
        self.model = model.to(CUDA)

    def forward(self, idx):
        return self.model(idx.to(CUDA)).float().cpu()


@pytest.mark.parametrize("family", FAMILIES)
def test_every_family_is_causal_on_the_gpu(family):
    torch.manual_seed(0)
    assert_causal(OnGPU(FAMILIES[family]()), V, T, positions=[0, 13, T - 1], atol=1e-5)


def policy(name):
    return precision_for(CUDA) if POLICIES[name] is None else Precision(CUDA, POLICIES[name])


@pytest.mark.parametrize("name", POLICIES)
@pytest.mark.parametrize("family", FAMILIES)
def test_every_family_trains_under_the_gpu_policies_like_fp32(family, name):
    """Six steps from the same weights and batches: every loss finite, the first within 2 % of fp32's (the same
    function, only rounded more coarsely), and the last below the first (the stream is learnable)."""
    tokens = torch.arange(4000) * 7 % V  # each token determines the next: learnable in a few steps
    losses = {}
    for label, precision in [("fp32", Precision(CUDA, None)), (name, policy(name))]:
        seed_everything(0)
        model = FAMILIES[family]().to(CUDA)
        hist = train(model, random_batches(tokens, 8, 32, seed=0), fixed_batches(tokens, 2, 8, 32),
                     TrainConfig(steps=6, lr=3e-3, eval_interval=6), precision, progress=False)
        losses[label] = hist.loss
    assert all(math.isfinite(v) for v in losses[name]), losses
    assert losses[name][0] == pytest.approx(losses["fp32"][0], rel=0.02), losses
    assert losses[name][-1] < losses[name][0], losses


@pytest.mark.parametrize("kernel", ["fla-core", "chunked"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_gated_deltanet_under_autocast_matches_fp32(dtype, kernel, monkeypatch):
    """Under autocast the layer's q and k leave their L2 norm in fp32 while v and β are half precision; either
    kernel must take them. The output stays within 3 % (relative RMS) of the fp32 layer's, gradients finite."""
    if kernel == "chunked":
        monkeypatch.setattr(delta_rule, "fla_kernel", lambda: None)
    elif delta_rule.fla_kernel() is None:
        pytest.skip("fla-core's kernel is not installed or does not run correctly here")
    torch.manual_seed(0)
    layer = GatedDeltaNet(d_model=64, n_head=2).to(CUDA)
    x = torch.randn(2, 100, 64, device=CUDA, requires_grad=True)
    ref = layer(x).y
    with torch.autocast("cuda", dtype=dtype):
        out = layer(x).y
    assert measure.relative_error(out.float(), ref) < 0.03
    out.float().square().mean().backward()
    assert torch.isfinite(x.grad).all() and all(torch.isfinite(p.grad).all() for p in layer.parameters())


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_sliced_head_under_autocast_is_as_accurate_as_the_plain_head(dtype):
    """Both paths round the head's matmuls to ``dtype``; against the fp32 truth, the sliced head's loss and
    gradients must be at most 1.5× the plain head's relative error (+1e-4), with padding tokens."""
    g = torch.Generator(device=CUDA).manual_seed(0)
    n, d, vocab, padded = 2048, 64, 50257, 50304
    h = torch.randn(n, d, device=CUDA, generator=g, requires_grad=True)
    w = (0.2 * torch.randn(d, padded, device=CUDA, generator=g)).requires_grad_()
    y = torch.randint(0, vocab, (n,), device=CUDA, generator=g)
    y[::7] = IGNORE_INDEX

    def loss_and_grads(fn, autocast):
        with torch.autocast("cuda", dtype=dtype, enabled=autocast):
            loss = fn(h, w, y, vocab_size=vocab)
        return [loss.float(), *torch.autograd.grad(loss, (h, w))]

    truth = loss_and_grads(linear_cross_entropy_reference, False)
    errors = {name: [measure.relative_error(a.float(), b) for a, b in zip(loss_and_grads(fn, True), truth)]
              for name, fn in [("plain", linear_cross_entropy_reference),
                               ("sliced", lambda *a, **k: linear_cross_entropy(*a, **k, chunk_rows=333))]}
    for sliced, plain in zip(errors["sliced"], errors["plain"]):
        assert sliced <= 1.5 * plain + 1e-4, errors


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_reversible_backward_matches_direct_backpropagation_under_autocast(dtype):
    """The reversible O(1)-memory backward reconstructs the trajectory; under autocast its gradient must stay as
    close to direct backpropagation's (same precision) as fp32's reconstruction error plus the dtype's rounding: a
    relative error below 5 %."""
    def build(sensitivity):
        torch.manual_seed(0)
        return models.ode_hybrid(**SHAPE, n_layer=4, ode_layers=[1, 2], solver="rk4", steps=4,
                                 sensitivity=sensitivity).to(CUDA)

    idx = torch.randint(0, V, (4, T), device=CUDA, generator=torch.Generator(device=CUDA).manual_seed(1))
    grads = {}
    for sensitivity in ("direct", "reversible"):
        model = build(sensitivity)
        with torch.autocast("cuda", dtype=dtype):
            loss = model(idx[:, :-1], targets=idx[:, 1:])
        loss.backward()
        grads[sensitivity] = measure.gradient(model)
    assert torch.isfinite(grads["reversible"]).all()
    assert measure.relative_error(grads["reversible"], grads["direct"]) < 0.05


@pytest.mark.parametrize("family", ["baseline", "hybrid-rk4"])
def test_cached_decoding_gives_the_recomputed_tokens_on_the_gpu(family):
    torch.manual_seed(0)
    model = FAMILIES[family]().to(CUDA).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    start = torch.randint(0, V, (2, 5), device=CUDA, generator=torch.Generator(device=CUDA).manual_seed(2))
    cached = models.generate(model, start, 30, temperature=0, cache=True)
    recomputed = models.generate(model, start, 30, temperature=0, cache=False)
    assert torch.equal(cached, recomputed)


def test_data_parallel_on_nccl_equals_a_single_process_run():
    """One NCCL process per GPU (one GPU is enough to exercise the NCCL path) with the same global batch as one plain
    process: the same losses and weights (within fp32 reduction-order rounding)."""
    single = ddp_worker.run(6, device="cuda")
    ranks = distributed.launch(ddp_worker.run, 6, None, 0, None, 0, 0.0, "cuda",
                               nprocs=torch.cuda.device_count())
    for losses, _, _, weights in ranks.values():
        assert losses == pytest.approx(single[0], rel=1e-5)
        for name, w in weights.items():
            torch.testing.assert_close(w, single[3][name], rtol=1e-5, atol=1e-6)
