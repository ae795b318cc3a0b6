"""GPU benchmarks at the sources' (t4) shapes, in one run on one CUDA device (``python -m benchmarks.gpu``).

- The device's matrix-product rate (8192³ in bf16 and fp16, the median of CUDA-event timings after a warm-up): the
  reference of the MFU below, measured beside it rather than read off a datasheet.
- Study 01's t4 training step (6 layers, d 256, batch 32 × 64, GPT-2 vocabulary; forward, backward, clipping,
  AdamW through ``odebook.training.train``) for the baseline and the ODE hybrid, under the GPU's own policy (bf16
  autocast) and under a T4's (fp16 autocast with a GradScaler): ms per step (median after warm-up) and MFU, the
  step's FLOPs (torch's counter) per second over the measured rate of the same dtype.
- Study 05's KV cache: greedy generation of 256 and 1024 new tokens cached and recomputed at its t4 shape (batch 1,
  prompt 32), the speed-up and whether the tokens are identical.
- The gated delta rule, forward + backward: odebook's chunked PyTorch form against fla-core's kernel, T ∈ {256,
  1024, 4096} (batch 8, 4 heads, K = V = 64), q, k, v, β in bf16 for the kernel, fp32 for the chunked form (as
  ``delta_rule.gated_delta_rule`` runs each under autocast). Only where ``fla_kernel()`` runs here.

Speed is measured here, never asserted in a test. Prints one table per section and, last, one JSON line.
"""

from __future__ import annotations

import json
import statistics
import sys

import torch
import torch.nn.functional as F

from odebook.data.corpus import random_batches
from odebook.models.lm import lm_loss
from odebook.nn.delta_rule import fla_kernel, gated_delta_rule_chunked
from odebook import studies
from odebook.study.flops import count_flops
from odebook.training.runtime import Precision, device_name, seed_everything
from odebook.training.train import TrainConfig, train

measure = studies.load("05_ode_solvers").measure
GradientFlowParams = studies.schema("01_gradient_flow")
ODESolverParams = studies.schema("05_ode_solvers")


CUDA = torch.device("cuda")
GPT2_VOCAB = 50257


def cuda_time(fn, repeats: int = 20, warmup: int = 3) -> float:
    """Median seconds of ``fn()`` by CUDA events, after ``warmup`` untimed calls."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return statistics.median(times)


def matmul_rate(dtype: torch.dtype, n: int = 8192) -> float:
    a, b = (torch.randn(n, n, device=CUDA, dtype=dtype) for _ in range(2))
    return 2 * n**3 / cuda_time(lambda: a @ b)


def step_01(rates: dict[torch.dtype, float], steps: int = 40, warmup: int = 10) -> list[dict]:
    p = GradientFlowParams()
    config = p.model_config(GPT2_VOCAB)
    tokens = torch.randint(0, GPT2_VOCAB, (400_000,), generator=torch.Generator().manual_seed(0))
    rows = []
    for name in ("baseline", "hybrid"):
        for dtype in (torch.bfloat16, torch.float16):
            seed_everything(0)
            model = getattr(config, name)().to(CUDA)
            precision = Precision(CUDA, dtype)
            x = torch.randint(0, GPT2_VOCAB, (p.batch_size, p.seq_len), device=CUDA)
            with precision.autocast():
                flops = count_flops(lambda: lm_loss(model, (x, x.roll(-1, 1))).backward())
            model.zero_grad(set_to_none=True)
            batches = ((a.to(CUDA), b.to(CUDA)) for a, b in random_batches(tokens, p.batch_size, p.seq_len, seed=0))
            hist = train(model, batches, [next(batches)], TrainConfig(steps=warmup + steps, lr=p.lr,
                         eval_interval=10**9), precision, progress=False)
            ms = statistics.median(hist.step_time[warmup:])
            rows.append({"model": name, "precision": str(precision).split(" on ")[0], "ms": 1e3 * ms,
                         "gflop": flops / 1e9, "mfu": flops / ms / rates[dtype]})
    return rows


def kv_cache() -> list[dict]:
    config = ODESolverParams().model_config(GPT2_VOCAB)
    seed_everything(0)
    prompt = torch.randint(0, GPT2_VOCAB, (1, 32), device=CUDA, generator=torch.Generator(CUDA).manual_seed(0))
    rows = []
    for name, build in (("baseline", config.baseline), (f"hybrid {config.solver}", config.hybrid)):
        model = build().to(CUDA).eval()
        rows += [{"model": name, **measure.generation_speed(model, prompt, n)} for n in (256, 1024)]
    return rows


def delta_rule(kernel) -> list[dict]:
    rows = []
    for T in (256, 1024, 4096):
        gen = torch.Generator(CUDA).manual_seed(T)
        B, H, K = 8, 4, 64
        q, k = (F.normalize(torch.randn(B, T, H, K, device=CUDA, generator=gen), dim=-1) for _ in range(2))
        v = torch.randn(B, T, H, K, device=CUDA, generator=gen)
        g = F.logsigmoid(torch.randn(B, T, H, device=CUDA, generator=gen))
        beta = torch.rand(B, T, H, device=CUDA, generator=gen)

        def chunked():
            xs = [t.clone().requires_grad_() for t in (q, k, v, g, beta)]
            o, S = gated_delta_rule_chunked(*xs)
            (o.sum() + S.sum()).backward()

        def fla():
            xs = [t.to(torch.bfloat16 if t is not g else torch.float32).requires_grad_() for t in (q, k, v, g, beta)]
            o, S = kernel(*xs, output_final_state=True)
            (o.float().sum() + S.sum()).backward()

        rows.append({"T": T, "chunked_ms": 1e3 * cuda_time(chunked, 10), "fla_ms": 1e3 * cuda_time(fla, 10)})
    return rows


def main() -> None:
    if not torch.cuda.is_available():
        sys.exit("benchmarks.gpu needs a CUDA device")
    print(f"device: {device_name(CUDA)}; torch {torch.__version__}", flush=True)
    rates = {dtype: matmul_rate(dtype) for dtype in (torch.bfloat16, torch.float16)}
    print("matmul 8192³: " + ", ".join(f"{d} {r / 1e12:.0f} TFLOP/s" for d, r in rates.items()), flush=True)

    steps = step_01(rates)
    print("\nstudy 01 t4 step (6 layers, d 256, batch 32 × 64, GPT-2 vocabulary)")
    print(f"{'model':9s} {'precision':28s} {'ms/step':>8s} {'GFLOP':>7s} {'MFU':>6s}")
    for r in steps:
        print(f"{r['model']:9s} {r['precision']:28s} {r['ms']:8.2f} {r['gflop']:7.1f} {r['mfu']:6.1%}")

    cache = kv_cache()
    print("\nstudy 05 generation (t4 shape, batch 1, prompt 32, greedy)")
    print(f"{'model':12s} {'new':>5s} {'cached s':>9s} {'recomputed s':>13s} {'speed-up':>9s} {'same':>5s}")
    for g in cache:
        print(f"{g['model']:12s} {g['new_tokens']:5d} {g['cached_s']:9.3f} {g['recomputed_s']:13.3f} "
              f"{g['speedup']:8.1f}× {str(g['identical_tokens']):>5s}")

    kernel = fla_kernel()
    rule = delta_rule(kernel) if kernel is not None else []
    print("\ngated delta rule forward + backward (batch 8, 4 heads, K = V = 64): chunked fp32 vs fla-core bf16"
          + ("" if rule else ": fla-core's kernel does not run here"))
    for r in rule:
        print(f"T {r['T']:5d}: chunked {r['chunked_ms']:8.2f} ms, fla-core {r['fla_ms']:7.2f} ms, "
              f"{r['chunked_ms'] / r['fla_ms']:5.1f}×")
    print(json.dumps({"device": device_name(CUDA), "matmul_tflops": {str(d): r / 1e12 for d, r in rates.items()},
                      "step_01": steps, "kv_cache": cache, "delta_rule": rule}))


if __name__ == "__main__":
    main()
