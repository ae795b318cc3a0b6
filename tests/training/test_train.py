import math

import pytest
import torch

from odebook.models import lm as models
from odebook.data.corpus import fixed_batches, random_batches
from odebook.models.lm import lm_loss, param_groups
from odebook.training.runtime import GPU_POLICY, precision_for, resolve_device, seed_everything
from odebook.training.train import DivergenceError, TrainConfig, evaluate, train

TOKENS = torch.randint(0, 50, (5000,), generator=torch.Generator().manual_seed(0))
CPU = precision_for(torch.device("cpu"))


def tiny(kind="hybrid"):
    shape = dict(vocab_size=50, d_model=16, n_layer=4, n_head=2, max_seq_len=16, dropout=0.1)
    return models.gpt(**shape) if kind == "baseline" else models.ode_hybrid(**shape, ode_layers=[1, 2])


def run(seed=0, steps=6, loss_fn=lm_loss, kind="hybrid", log_dir=None):
    seed_everything(seed)
    model = tiny(kind)
    hist = train(model, random_batches(TOKENS, 4, 16, seed=seed), fixed_batches(TOKENS, 2, 4, 16),
                 TrainConfig(steps=steps, lr=1e-3, eval_interval=3), CPU, groups=param_groups(model),
                 loss_fn=loss_fn, progress=False, log_dir=log_dir)
    return model, hist


def test_same_seed_gives_identical_numbers_on_cpu():
    _, a = run(seed=1)
    _, b = run(seed=1)
    _, c = run(seed=2)
    assert a.loss == b.loss and a.eval_loss == b.eval_loss and a.grad_norm == b.grad_norm  # exactly equal
    assert a.loss != c.loss


def test_history_records_every_step_and_group():
    _, h = run(steps=7)
    assert h.step == list(range(1, 8)) and len(h.step_time) == 7
    assert set(h.grad_norm) == {"total", "embedding", "blocks", "ode", "head"}
    assert all(len(v) == 7 for v in h.grad_norm.values())
    assert h.eval_step == [3, 6, 7]  # every interval and at the end
    assert h.final_eval_loss == h.eval_loss[-1]
    # the total norm is the norm of the group norms (the groups partition the parameters)
    groups = math.sqrt(sum(h.grad_norm[g][0] ** 2 for g in ("embedding", "blocks", "ode", "head")))
    assert h.grad_norm["total"][0] == pytest.approx(groups, rel=1e-5)


def test_history_records_each_scalar_parameter_after_every_step():
    """The ODE block's α (its only 0-dim parameter), as it stands after each step: its trajectory."""
    model, h = run(steps=5)
    (name, alpha), = ((n, p) for n, p in model.named_parameters() if p.dim() == 0)
    assert list(h.scalars) == [name] and name.endswith("field.alpha") and len(h.scalars[name]) == 5
    assert h.scalars[name][-1] == alpha.item() and h.scalars[name][0] != 0.1  # moved by the first step
    _, baseline = run(steps=2, kind="baseline")
    assert baseline.scalars == {}


def test_tensorboard_logs_hold_the_numbers_of_the_history(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    _, h = run(steps=7, log_dir=tmp_path / "tb")
    events = EventAccumulator(str(tmp_path / "tb")).Reload()

    def series(tag):
        return [(e.step, e.value) for e in events.Scalars(tag)]

    assert series("train/loss") == [(s, pytest.approx(v)) for s, v in zip(h.step, h.loss)]
    assert series("train/perplexity") == [(s, pytest.approx(math.exp(v), rel=1e-6)) for s, v in zip(h.step, h.loss)]
    assert series("eval/loss") == [(s, pytest.approx(v)) for s, v in zip(h.eval_step, h.eval_loss)]
    assert [v for _, v in series("train/lr")] == [pytest.approx(1e-3)] * 7
    for group in ("total", "embedding", "blocks", "ode", "head"):
        assert [v for _, v in series(f"grad_norm/{group}")] == [pytest.approx(v, rel=1e-6) for v in h.grad_norm[group]]


def test_training_reduces_held_out_loss():
    model, h = run(steps=30)
    assert h.eval_loss[-1] < h.eval_loss[0]
    assert h.eval_loss[-1] == pytest.approx(evaluate(model, fixed_batches(TOKENS, 2, 4, 16), CPU))


def test_divergence_stops_with_a_message_and_keeps_the_metrics():
    calls = {"n": 0}

    def nan_at_third_step(model, batch):
        calls["n"] += 1
        loss = lm_loss(model, batch)
        return loss * float("nan") if calls["n"] == 3 else loss

    with pytest.raises(DivergenceError, match="became nan at step 3 of 6") as info:
        run(loss_fn=nan_at_third_step)
    assert info.value.history.step == [1, 2] and len(info.value.history.loss) == 2


def test_cpu_policy_is_fp32_and_flushes_denormals():
    assert CPU.dtype is None and not CPU.uses_scaler
    assert torch.tensor([1e-40]).mul(1.0).item() == 0.0  # a denormal is flushed to zero


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("policy", ["", "t4"])
def test_cuda_policy_uses_native_bf16_or_fp16_with_scaler(policy, monkeypatch):
    """The GPU's own policy, and a T4's on any GPU; set here, so that a run under ODEBOOK_GPU_POLICY=t4 (as the t4
    reports are made) tests both, not the T4's twice (on an H200, 2026-11-27, the native case read the t4 setting)."""
    monkeypatch.setenv(GPU_POLICY, policy)
    prec = precision_for(resolve_device("cuda"))
    major, minor = torch.cuda.get_device_capability()
    assert prec.dtype == (torch.bfloat16 if (major, minor) >= (8, 0) and not policy else torch.float16)
    assert prec.uses_scaler == (prec.dtype == torch.float16)
    model = tiny().cuda()
    hist = train(model, random_batches(TOKENS, 4, 16, seed=0), fixed_batches(TOKENS, 2, 4, 16),
                 TrainConfig(steps=5, lr=1e-3, eval_interval=5), prec, progress=False)
    assert all(math.isfinite(v) for v in hist.loss)


def test_the_t4_policy_is_fp16_with_a_scaler_and_no_tf32_on_any_gpu(monkeypatch):
    """ODEBOOK_GPU_POLICY=t4 emulates a Colab T4 on a larger GPU (no CUDA needed to choose it); a wrong value is one
    clear error; the CPU ignores it."""
    before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    monkeypatch.setenv("ODEBOOK_GPU_POLICY", "t4")
    try:
        prec = precision_for(torch.device("cuda"))
        tf32 = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before
    assert prec.dtype == torch.float16 and prec.uses_scaler
    assert tf32 == (False, False)
    assert precision_for(torch.device("cpu")).dtype is None
    monkeypatch.setenv("ODEBOOK_GPU_POLICY", "T4 please")
    with pytest.raises(ValueError, match="ODEBOOK_GPU_POLICY='T4 please': unknown; use 't4'"):
        precision_for(torch.device("cuda"))


def test_evaluation_can_use_its_own_loss():
    calls = {"train": 0, "eval": 0}

    def counting(kind):
        def fn(model, batch):
            calls[kind] += 1
            return lm_loss(model, batch)
        return fn

    seed_everything(0)
    model = tiny()
    train(model, random_batches(TOKENS, 4, 16, seed=0), fixed_batches(TOKENS, 2, 4, 16),
          TrainConfig(steps=4, lr=1e-3, eval_interval=2), CPU, loss_fn=counting("train"),
          eval_loss_fn=counting("eval"), progress=False)
    assert calls == {"train": 4, "eval": 4}  # 2 evaluations × 2 batches


def test_train_config_from_parameters_takes_their_optimisation_settings():
    from odebook import studies
    GradientFlowParams = studies.schema("01_gradient_flow")

    p = GradientFlowParams.from_mapping({"tokenizer": "bytes", "steps": 70, "lr": 1e-3, "grad_clip": 0.5}, "p")
    assert TrainConfig.from_params(p) == TrainConfig(steps=70, lr=1e-3, weight_decay=0.1, grad_clip=0.5,
                                                     eval_interval=50, checkpoint_interval=100)
    assert TrainConfig.from_params(p, steps=9).steps == 9


def test_a_step_with_inf_gradients_is_skipped_counted_and_left_out_of_the_gradient_statistics():
    """fp16 autocast with an enabled GradScaler (on the CPU here): a gradient hook makes step 3's gradients infinite
    while its loss stays finite. The scaler skips that update; the history counts it and keeps no norm from it."""
    from odebook.training.runtime import Precision

    fp16 = Precision(torch.device("cpu"), torch.float16)
    assert fp16.scaler().is_enabled()
    seed_everything(0)
    model = tiny("baseline")
    calls = {"n": 0}

    def poison(grad):
        calls["n"] += 1
        return grad * math.inf if calls["n"] == 3 else grad

    model.tok_emb.weight.register_hook(poison)
    before = {}

    def loss_fn(m, batch):
        before[calls["n"] + 1] = m.head.weight.detach().clone()
        return lm_loss(m, batch)

    hist = train(model, random_batches(TOKENS, 4, 16, seed=0), fixed_batches(TOKENS, 1, 4, 16),
                 TrainConfig(steps=5, lr=1e-3, eval_interval=5), fp16, groups=param_groups(model), loss_fn=loss_fn,
                 progress=False)
    assert hist.skipped_steps == [3] and hist.grad_step == [1, 2, 4, 5] and len(hist.loss) == 5
    assert all(len(v) == 4 and all(map(math.isfinite, v)) for v in hist.grad_norm.values())
    assert torch.equal(before[3], before[4])  # the optimiser did not move the weights at step 3
    assert not torch.equal(before[2], before[3])  # …but did at step 2
    assert hist.grad_stats("total")["skipped"] == 1 and hist.grad_stats("total")["finite"]


def test_fp32_steps_with_non_finite_gradients_are_skipped_too():
    seed_everything(0)
    model = tiny("baseline")
    model.head.weight.register_hook(lambda g: g * math.nan)
    hist = train(model, random_batches(TOKENS, 4, 16, seed=0), fixed_batches(TOKENS, 1, 4, 16),
                 TrainConfig(steps=2, lr=1e-3, eval_interval=2), CPU, progress=False)
    assert hist.skipped_steps == [1, 2] and hist.grad_norm["total"] == []
    assert all(torch.isfinite(p).all() for p in model.parameters())


def test_divergence_at_the_first_step_names_the_initial_scale_not_the_learning_rate():
    """alpha_init: 1e30 makes the first loss infinite: lr and grad_clip cannot be the cause, the initial values are."""
    from odebook.models.arms import HybridConfig

    torch.manual_seed(0)
    model = HybridConfig(vocab_size=50, d_model=16, n_layer=4, n_head=2, max_seq_len=16, ode_layers=(2, 3),
                         solver="euler", steps=4, sensitivity="direct", rtol=1e-3, atol=1e-4, control_dim=4,
                         alpha_init=1e30).hybrid()
    with pytest.raises(DivergenceError) as info:
        train(model, random_batches(TOKENS, 4, 16, seed=0), fixed_batches(TOKENS, 2, 4, 16),
              TrainConfig(steps=3, lr=1e-3, eval_interval=3), CPU, progress=False)
    message = str(info.value)
    assert "at step 1 of 3" in message and "alpha_init" in message and "lr and grad_clip are not the cause" in message
    assert "alpha = 1e+30" in message and "Try a lower lr" not in message
