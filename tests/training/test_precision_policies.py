"""The precision policies a study can run under, on every device here: the CPU always (where CI runs), CUDA where
there is one. A T4 has no bf16, so its policy is fp16 autocast with a GradScaler; torch runs the same policy on the
CPU (fp16 autocast, ``GradScaler("cpu")``), so CI checks it for every model family, the sliced head's fp16 path and
the reversible backward under autocast. What the CPU cannot show: CUDA kernels' own rounding (TF32, fused
attention), fla-core's compiled kernels (tests/nn/test_fla_interpreted.py runs them interpreted), speed, memory."""

import math

import pytest
import torch

from odebook.models import lm as models
from odebook.models.lm import lm_loss
from odebook.data.corpus import fixed_batches, random_batches
from odebook.nn.linear_ce import IGNORE_INDEX, linear_cross_entropy, linear_cross_entropy_reference
from odebook import studies
from odebook.training.runtime import Precision, precision_for, seed_everything
from odebook.training.train import TrainConfig, train

from families import FAMILIES, SHAPE, T, V

measure = studies.load("05_ode_solvers").measure

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
# the device's own policy (fp32 on the CPU, so only the GPU's is new) and a T4's, everywhere
POLICIES = [("cpu", "fp16+scaler")] + [(d, p) for d in DEVICES[1:] for p in ("native", "fp16+scaler")]
HALF = [torch.float16, torch.bfloat16]
TOKENS = torch.arange(4000) * 7 % V  # each token determines the next: learnable in a few steps
BATCH = (4, 32)  # batch size, sequence length


def policy(device: torch.device, name: str) -> Precision:
    return precision_for(device) if name == "native" else Precision(device, torch.float16)


def first_batch_loss(family: str, device: torch.device) -> float:
    """fp32 loss of the freshly built model on the first training batch: what the first step of a run sees."""
    seed_everything(0)
    model = FAMILIES[family]().to(device)
    with torch.no_grad():
        return lm_loss(model, [t.to(device) for t in next(random_batches(TOKENS, *BATCH, seed=0))]).item()


def four_steps(family: str, precision: Precision):
    seed_everything(0)
    model = FAMILIES[family]().to(precision.device)
    return train(model, random_batches(TOKENS, *BATCH, seed=0), fixed_batches(TOKENS, 1, *BATCH),
                 TrainConfig(steps=4, lr=3e-3, eval_interval=4), precision, progress=False)


@pytest.mark.slow  # ~5 s of CPU a family under fp16 autocast (its casts dominate at this size); CI runs it
@pytest.mark.parametrize("device, name", POLICIES)
@pytest.mark.parametrize("family", FAMILIES)
def test_every_family_trains_under_the_policy_like_fp32(family, device, name):
    """Four steps: every loss finite, the first within 2 % of fp32's from the same weights and batch (the same
    function, only rounded more coarsely), the last below the first (the stream is learnable), and every step
    either taken (with a finite gradient norm recorded) or counted as skipped."""
    device = torch.device(device)
    hist = four_steps(family, policy(device, name))
    assert all(math.isfinite(v) for v in hist.loss), hist.loss
    assert hist.loss[0] == pytest.approx(first_batch_loss(family, device), rel=0.02), hist.loss
    assert hist.loss[-1] < hist.loss[0], hist.loss
    assert len(hist.grad_step) + len(hist.skipped_steps) == 4
    assert all(math.isfinite(v) for v in hist.grad_norm["total"])


@pytest.mark.parametrize("device", DEVICES)
def test_steps_the_scaler_skips_are_counted_and_left_out(device, monkeypatch):
    """A scale of 2⁴⁰ overflows fp16 gradients: the scaler skips those steps (halving the scale each time) until it
    fits. Each skipped step is counted, records no gradient norm, and leaves the weights as they were."""
    device = torch.device(device)
    monkeypatch.setattr(Precision, "scaler", lambda self: torch.amp.GradScaler(device.type, init_scale=2.0**40))
    seed_everything(0)
    model = FAMILIES["baseline"]().to(device)
    before = [p.detach().clone() for p in model.parameters()]
    hist = train(model, random_batches(TOKENS, *BATCH, seed=0), fixed_batches(TOKENS, 1, *BATCH),
                 TrainConfig(steps=1, lr=3e-3, eval_interval=1), Precision(device, torch.float16), progress=False)
    assert hist.skipped_steps == [1] and hist.grad_step == [] and hist.grad_norm["total"] == []
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))
    monkeypatch.undo()
    hist = four_steps("baseline", Precision(device, torch.float16))  # the same stream at the default scale: none
    assert hist.skipped_steps == []


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", HALF)
def test_sliced_head_under_autocast_is_as_accurate_as_the_plain_head(dtype, device):
    """Both paths round the head's matmuls to ``dtype``; against the fp32 truth, the sliced head's loss and
    gradients must be at most 1.5× the plain head's relative error (+1e-4), with padding tokens."""
    g = torch.Generator(device=device).manual_seed(0)
    n, d, vocab, padded = 2048 if device == "cuda" else 512, 64, 50257, 50304
    h = torch.randn(n, d, device=device, generator=g, requires_grad=True)
    w = (0.2 * torch.randn(d, padded, device=device, generator=g)).requires_grad_()
    y = torch.randint(0, vocab, (n,), device=device, generator=g)
    y[::7] = IGNORE_INDEX

    def loss_and_grads(fn, autocast):
        with torch.autocast(device, dtype=dtype, enabled=autocast):
            loss = fn(h, w, y, vocab_size=vocab)
        return [loss.float(), *torch.autograd.grad(loss, (h, w))]

    truth = loss_and_grads(linear_cross_entropy_reference, False)
    errors = {name: [measure.relative_error(a.float(), b) for a, b in zip(loss_and_grads(fn, True), truth)]
              for name, fn in [("plain", linear_cross_entropy_reference),
                               ("sliced", lambda *a, **k: linear_cross_entropy(*a, **k, chunk_rows=333))]}
    assert all(e > 0 for e in errors["plain"]), errors  # autocast did round: the comparison is not vacuous
    for sliced, plain in zip(errors["sliced"], errors["plain"]):
        assert sliced <= 1.5 * plain + 1e-4, errors


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", HALF)
def test_reversible_backward_matches_direct_backpropagation_under_autocast(dtype, device):
    """The reversible O(1)-memory backward reconstructs the trajectory; under autocast its gradient must stay as
    close to direct backpropagation's (same precision) as fp32's reconstruction error plus the dtype's rounding: a
    relative error below 5 %."""
    def build(sensitivity):
        torch.manual_seed(0)
        return models.ode_hybrid(**SHAPE, n_layer=4, ode_layers=[1, 2], solver="rk4", steps=4,
                                 sensitivity=sensitivity).to(device)

    idx = torch.randint(0, V, (4, T), device=device, generator=torch.Generator(device=device).manual_seed(1))
    grads = {}
    for sensitivity in ("direct", "reversible"):
        model = build(sensitivity)
        with torch.autocast(device, dtype=dtype):
            loss = model(idx[:, :-1], targets=idx[:, 1:])
        loss.backward()
        grads[sensitivity] = measure.gradient(model)
    assert torch.isfinite(grads["reversible"]).all()
    assert measure.relative_error(grads["reversible"], grads["direct"]) < 0.05
