"""The CUDA paths a Colab or workstation user takes, each against the CPU's fp32 path or its plain reference: every
model family is causal on the GPU (the Gated DeltaNet through fla-core's kernel), the layer runs under autocast,
cached decoding gives the recomputed tokens, and a data-parallel run on NCCL equals a single-process run. Skipped
without a GPU (CI has none). The precision policies (every family under the native and the fp16 policy, the sliced head
and the reversible backward under autocast) run on the CPU and on CUDA in tests/training/test_precision_policies.py.
"""

import pytest
import torch

from odebook.training import distributed
from odebook import studies
from odebook.models import lm as models
from odebook.nn import delta_rule
from odebook.nn.gdn import GatedDeltaNet

import ddp_worker
from causality import assert_causal
from families import FAMILIES, T, V

measure = studies.load("05_ode_solvers").measure

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

CUDA = torch.device("cuda")


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
