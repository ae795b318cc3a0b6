"""CPU benchmarks at the sources' (t4) shapes, measured side by side in one run (``make bench``).

Study 01: prints the FLOP/s of a large fp32 matmul through torch (MKL) and through oneDNN's inner product (the GEMM
odebook.nn.gemm gives the models on the CPU), and the time of a product whose weight is a column slice of a wider
matrix (given to oneDNN as it is, and through odebook.nn.gemm, which copies it first); then for the baseline and the
ODE hybrid the ms per training step (forward, backward, clipping, AdamW): with the sliced and the plain head, with
oneDNN and with torch's GEMM, with and without denormal flushing and with and without the allocator settings of
``odebook.training.runtime.ALLOCATOR_ENV``; and model-FLOPs utilisation: the model's FLOPs per step
(torch.utils.flop_counter) per second, divided by the faster of the two matmul rates as measured in the row's own worker
just before and just after its timed steps (their mean): a rate measured once at the start of the run swung by ±7 %
between consecutive processes on these shared machines, and the step's time moves with it. Each row runs in its own
worker process, because glibc reads its allocator settings at process start; timings are medians over steps after
warm-up.

Whether the GEMM rate is possible on these cores (clock and FLOP per cycle on the thread's CPU clock):
benchmarks/gemm_rate.py. The size rules of odebook.nn.gemm (MIN_MACS, MIN_WEIGHT, the weight gradient's orientation):
benchmarks/gemm_rules.py.

Gated delta rule: forward + backward time of the chunked pure-PyTorch form against the reference loop for
T ∈ {256, 1024, 4096} (batch 2, 4 heads, K = V = 64, chunk 64).

Study 02: ms per training step, tokens/s and FLOPs per parameter (forward pass) of each of its eight models at the
t4 shape (d 256, 6 layers or depth steps, batch 8 × 128, bytes), in one worker with the tuned allocator.

Study 05: greedy generation of 256 and 1024 new tokens with the KV cache and by recomputation (baseline and the
rk4 hybrid at study 01's t4 shape, GPT-2 vocabulary, batch 1, identical tokens checked); then peak memory and time
of one training step of the rk4 hybrid at 4, 8, 16 and 32 steps for each sensitivity method (bytes, batch 8 × 128,
so the ODE block rather than the 50,257-way head dominates the memory).

Each study's cpu-profile step — time, FLOPs, efficiency against the GEMM rate, and its slowdown beside one busy
process with each OpenMP wait policy: benchmarks/cpu_profile.py (section ``cpu``). Seed-runs per minute, one process
against one-thread workers side by side, interleaved: benchmarks/side_by_side.py (section ``side``).

Speed is measured here, never asserted in a test.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import torch

from benchmarks import cpu_profile, gemm_rate, side_by_side
from benchmarks.gemm_rate import matmul_flops, onednn_matmul_flops, reference_flops
from benchmarks.gemm_rules import bench_gemm
from benchmarks.timing import median_time
from odebook.models import lm as models
from odebook.data.corpus import random_batches
from odebook.study.flops import count_flops
from odebook.study.flops import forward_flops
from odebook import studies
from odebook.models.lm import count_params, lm_loss
from odebook.nn import gemm, torch_private
from odebook.training.runtime import ALLOCATOR_ENV, Precision, seed_everything
from odebook.training.train import TrainConfig, train

measure = studies.load("05_ode_solvers").measure
TIME_INDEXED_MODELS = studies.load("02_time_indexed").params.TIME_INDEXED_MODELS
GradientFlowParams = studies.schema("01_gradient_flow")
ODESolverParams = studies.schema("05_ode_solvers")
TimeIndexedParams = studies.schema("02_time_indexed")


__all__ = ["step_flops", "step_times", "main"]

# The shapes are the studies' own t4 defaults (their parameter schemas), not copies.
GPT2_VOCAB = 50257
T4_01 = GradientFlowParams()
T4_SHAPE = T4_01.model_config(GPT2_VOCAB)
BATCH, SEQ = T4_01.batch_size, T4_01.seq_len
BUILDERS = {"baseline": T4_SHAPE.baseline, "hybrid": T4_SHAPE.hybrid}
# (label, model, flush denormals, allocator settings, head + loss, GEMM); the first row is the trainer's default
ROWS = [
    ("baseline · sliced · oneDNN · flushed · tuned alloc.", "baseline", True, True, "sliced", "onednn"),
    ("baseline · plain head · oneDNN · flushed · tuned", "baseline", True, True, "plain", "onednn"),
    ("baseline · sliced · torch GEMM · flushed · tuned", "baseline", True, True, "sliced", "torch"),
    ("baseline · sliced · oneDNN · not flushed · tuned", "baseline", False, True, "sliced", "onednn"),
    ("baseline · sliced · oneDNN · flushed · default alloc.", "baseline", True, False, "sliced", "onednn"),
    ("hybrid (euler ×4) · sliced · oneDNN · flushed · tuned", "hybrid", True, True, "sliced", "onednn"),
]


def _plain_head_loss(model, batch):
    """All logits at once and F.cross_entropy (odebook.nn.linear_ce's reference), through the same GEMM as the
    sliced head, so that the two rows differ only in the slicing."""
    logits = gemm.linear(model.hidden(batch[0]).flatten(0, 1), model.head.weight.t())[:, :model.vocab_size]
    return torch.nn.functional.cross_entropy(logits, batch[1].flatten())


LOSSES = {"sliced": lm_loss, "plain": _plain_head_loss}  # the trainer's sliced head + cross-entropy, and the plain path


@torch.no_grad()
def weight_layout_times(n: int = 2048, k: int = 256, m: int = 256) -> dict[str, float] | None:
    """Seconds of one [n, k] × [k, m] product whose weight is a column slice of a wider matrix: oneDNN's kernel
    given the slice (once: it is that slow), the same through odebook.nn.gemm (which copies it to a plain layout),
    and a plain weight; None without oneDNN."""
    if not gemm.onednn_available():
        return None
    x, wide = torch.randn(n, k), torch.randn(m, 3 * k)
    weight = wide[:, k:2 * k]
    plain = weight.contiguous()
    t0 = time.perf_counter()
    torch_private.onednn_linear(x, weight)  # the kernel given the slice as it is: no copy to a plain layout
    return {"as given": time.perf_counter() - t0, "odebook.nn.gemm": median_time(lambda: gemm.mm(x, weight.t()), 10),
            "plain": median_time(lambda: gemm.mm(x, plain.t()), 10)}


def step_flops(model: torch.nn.Module, loss_fn=lm_loss) -> tuple[float, float]:
    """The model's FLOPs (counted by torch; the sliced and the plain head do the same matmuls) and the peak memory
    in bytes of one forward + backward pass with ``loss_fn`` at the benchmark shape."""
    x = torch.randint(0, GPT2_VOCAB, (BATCH, SEQ))
    flops = count_flops(lambda: loss_fn(model, (x, x.roll(-1, 1))).backward())
    model.zero_grad(set_to_none=True)
    peak = measure.peak_memory(lambda: loss_fn(model, (x, x.roll(-1, 1))).backward(), torch.device("cpu"))
    model.zero_grad(set_to_none=True)
    return float(flops), float(peak)


def step_times(model: torch.nn.Module, steps: int, warmup: int, flush_denormal: bool,
               loss_fn=lm_loss) -> list[float]:
    """Seconds per training step of ``model`` after ``warmup`` steps."""
    torch.set_flush_denormal(flush_denormal)
    tokens = torch.randint(0, GPT2_VOCAB, (200_000,), generator=torch.Generator().manual_seed(0))
    batches = random_batches(tokens, BATCH, SEQ, seed=0)
    precision = Precision(torch.device("cpu"), None)  # fp32; flushing is set above, not by the policy
    hist = train(model, batches, [next(batches)], TrainConfig(steps=warmup + steps, lr=3e-4, eval_interval=10**9),
                 precision, loss_fn=loss_fn, progress=False)
    return hist.step_time[warmup:]


def _worker(model_name: str, flush: bool, head: str, kernel: str, steps: int, warmup: int) -> dict:
    seed_everything(0)
    model = BUILDERS[model_name]()
    with gemm.backend(kernel):
        flops, peak = step_flops(model, LOSSES[head])
    before = reference_flops()
    with gemm.backend(kernel):
        times = step_times(model, steps, warmup, flush, LOSSES[head])
    return {"flops": flops, "peak": peak, "times": times, "reference": (before + reference_flops()) / 2}


T4_02 = TimeIndexedParams()
BATCH_02, SEQ_02 = T4_02.batch_size, T4_02.seq_len


def _worker_02(steps: int, warmup: int) -> dict:
    """Every study-02 model at its t4 shape: parameters, forward FLOPs, ms/step."""
    torch.set_flush_denormal(True)
    tokens = torch.randint(0, 256, (100_000,), generator=torch.Generator().manual_seed(0))
    rows = {}
    for name in TIME_INDEXED_MODELS:
        seed_everything(0)
        model = T4_02.model_config(256).build(name)
        batches = random_batches(tokens, BATCH_02, SEQ_02, seed=0)
        flops = forward_flops(model, next(batches)[0])
        hist = train(model, batches, [next(batches)], TrainConfig(steps=warmup + steps, lr=3e-4,
                     eval_interval=10**9), Precision(torch.device("cpu"), None), progress=False)
        rows[name] = {"params": count_params(model), "flops": flops, "times": hist.step_time[warmup:]}
    return rows


def delta_rule_times(T: int, repeats: int) -> dict[str, float]:
    """Median seconds of forward + backward for the reference and the chunked gated delta rule at length T."""
    from odebook.nn.delta_rule import gated_delta_rule_chunked, gated_delta_rule_reference

    gen = torch.Generator().manual_seed(T)
    B, H, K = 2, 4, 64
    base = [torch.nn.functional.normalize(torch.randn(B, T, H, K, generator=gen), dim=-1) for _ in range(2)]
    base += [torch.randn(B, T, H, K, generator=gen),
             torch.nn.functional.logsigmoid(torch.randn(B, T, H, generator=gen)), torch.rand(B, T, H, generator=gen)]
    out = {}
    for name, fn in (("reference", gated_delta_rule_reference), ("chunked", gated_delta_rule_chunked)):
        times = []
        for _ in range(repeats if name == "chunked" or T <= 1024 else 1):
            xs = [x.clone().requires_grad_() for x in base]
            t0 = time.perf_counter()
            o, S = fn(*xs)
            (o.sum() + S.sum()).backward()
            times.append(time.perf_counter() - t0)
        out[name] = statistics.median(times)
    return out


T4_05 = ODESolverParams()  # study 01's model with a positional table for a 32-token prompt + 1024 new tokens
CONFIG_05 = T4_05.model_config(GPT2_VOCAB)  # generation_solver at the budget of nfe_budget evaluations


def _worker_05() -> dict:
    """KV-cache speed-ups and the sensitivity sweep of study 05 (see the module docstring)."""
    from odebook import studies
    measure = studies.load("05_ode_solvers").measure

    torch.set_flush_denormal(True)
    seed_everything(0)
    generators = {"baseline": CONFIG_05.baseline(), f"hybrid {CONFIG_05.solver} ×2": CONFIG_05.hybrid()}
    prompt = torch.randint(0, GPT2_VOCAB, (1, 32), generator=torch.Generator().manual_seed(0))
    generation = [{"model": name, **measure.generation_speed(model, prompt, n)}
                  for name, model in generators.items() for n in (256, 1024)]

    seed_everything(0)
    config = CONFIG_05.replace(vocab_size=256, solver=T4_05.sweep_solver)
    x = torch.randint(0, 256, (8, 128), generator=torch.Generator().manual_seed(0))
    sweep = measure.sensitivity_sweep(config, config.hybrid().state_dict(), (x, x.roll(-1, 1)),
                              Precision(torch.device("cpu"), None), sensitivities=("direct", "adjoint", "reversible"),
                              steps=(4, 8, 16, 32), repeats=1)
    return {"generation": generation, "sweep": sweep.to_dict("records")}


def _in_worker(worker: list[str], tuned_allocator: bool, options: tuple[str, ...] = ()) -> dict:
    """Run ``python -m benchmarks.bench [options] --worker ...`` with or without the allocator settings."""
    env = {k: v for k, v in os.environ.items() if k not in ALLOCATOR_ENV}
    if tuned_allocator:
        env.update(ALLOCATOR_ENV)
    out = subprocess.run([sys.executable, "-m", "benchmarks.bench", *options, "--worker", *worker], env=env,
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def bench_01(steps: int, warmup: int) -> None:
    print(f"\nstudy 01 at its t4 shape: 6 layers, d 256, batch {BATCH}×{SEQ}, GPT-2 vocabulary (head padded to "
          f"{models.HEAD_MULTIPLE}); fp32, AdamW")
    rates = _in_worker(["matmul"], tuned_allocator=True)
    torch_rate, onednn = rates["flops_per_s"], rates["onednn_flops_per_s"]
    print(f"fp32 matmul 2048² through torch ({'MKL' if torch.backends.mkl.is_available() else 'its BLAS'}): "
          f"{torch_rate / 1e9:.1f} GFLOP/s")
    if onednn is not None:
        print(f"the same product through oneDNN's inner product (odebook.nn.gemm): {onednn / 1e9:.1f} GFLOP/s "
              f"({onednn / torch_rate:.2f}× torch's)")
    if (layout := rates["weight_layout"]) is not None:
        print(f"a weight that is a column slice of a wider matrix (2,048 × 256 × 256): oneDNN's kernel as given "
              f"{1000 * layout['as given']:.0f} ms, through odebook.nn.gemm (copied to a plain layout) "
              f"{1000 * layout['odebook.nn.gemm']:.2f} ms, a plain weight {1000 * layout['plain']:.2f} ms")
    print("MFU below is against the faster of the two, measured again in each row's worker just before and after "
          "its timed steps (mean: 'ref')")
    print(f"{'configuration':50s} {'GFLOP/step':>10s} {'peak MiB':>9s} {'ms/step':>8s} {'min–max ms':>12s} "
          f"{'ref GFLOP/s':>11s} {'MFU':>6s}", flush=True)
    median, mem = {}, {}
    for label, model_name, flush, tuned, head, kernel in ROWS:
        r = _in_worker([model_name, "flush" if flush else "noflush", head, kernel], tuned,
                       ("--steps", str(steps), "--warmup", str(warmup)))
        med = median[label] = statistics.median(r["times"])
        mem[label] = r["peak"]
        print(f"{label:50s} {r['flops'] / 1e9:10.1f} {r['peak'] / 2**20:9.0f} {1000 * med:8.0f} "
              f"{1000 * min(r['times']):5.0f}–{1000 * max(r['times']):<6.0f} {r['reference'] / 1e9:11.1f} "
              f"{r['flops'] / med / r['reference']:6.1%}",
              flush=True)
    base = median[ROWS[0][0]]
    print(f"sliced head: {mem[ROWS[1][0]] / mem[ROWS[0][0]]:.2f}× less peak memory of a step's forward + backward, "
          f"{base / median[ROWS[1][0]]:.2f}× the plain head's time; oneDNN: {median[ROWS[2][0]] / base:.2f}× faster "
          f"than torch's GEMM; denormal flushing: {median[ROWS[3][0]] / base:.2f}× faster; tuned allocator: "
          f"{median[ROWS[4][0]] / base:.2f}× faster; hybrid / baseline time: {median[ROWS[5][0]] / base:.2f}×")


def bench_delta_rule() -> None:
    print("\ngated delta rule, forward + backward on the CPU (batch 2, 4 heads, K = V = 64, chunk 64)")
    print(f"{'T':>6s} {'reference ms':>13s} {'chunked ms':>11s} {'speed-up':>9s}", flush=True)
    for T in (256, 1024, 4096):
        t = delta_rule_times(T, repeats=3)
        print(f"{T:6d} {1000 * t['reference']:13.0f} {1000 * t['chunked']:11.1f} "
              f"{t['reference'] / t['chunked']:8.1f}×", flush=True)


def bench_02(steps: int, warmup: int) -> None:
    print(f"\nstudy 02 at its t4 shape: d 256, 6 layers / depth steps, batch {BATCH_02}×{SEQ_02}, bytes; fp32, "
          "tuned allocator")
    print(f"{'model':16s} {'params':>10s} {'MFLOP/fwd':>10s} {'FLOP/param':>10s} {'ms/step':>8s} {'tokens/s':>9s} "
          f"{'vs standard':>11s}", flush=True)
    rows = _in_worker(["02"], True, ("--steps", str(max(2, steps // 2)), "--warmup", str(warmup)))
    standard = statistics.median(rows["standard"]["times"])
    for name, r in rows.items():
        med = statistics.median(r["times"])
        print(f"{name:16s} {r['params']:10,d} {r['flops'] / 1e6:10.0f} {r['flops'] / r['params']:10.0f} "
              f"{1000 * med:8.0f} {BATCH_02 * SEQ_02 / med:9.0f} {med / standard:10.2f}×")


def bench_05() -> None:
    print("\nstudy 05: generation at study 01's t4 shape (6 layers, d 256, GPT-2 vocabulary, batch 1, prompt 32, "
          "greedy); tuned allocator", flush=True)
    r = _in_worker(["05"], True)
    print(f"{'model':16s} {'new tokens':>10s} {'cached s':>9s} {'recomputed s':>13s} {'speed-up':>9s} "
          f"{'same tokens':>11s}")
    for g in r["generation"]:
        print(f"{g['model']:16s} {g['new_tokens']:10d} {g['cached_s']:9.2f} {g['recomputed_s']:13.2f} "
              f"{g['speedup']:8.1f}× {str(g['identical_tokens']):>11s}")
    print("\none training step of the rk4 hybrid (d 256, bytes, batch 8 × 128), by sensitivity")
    print(f"{'sensitivity':11s} {'steps':>5s} {'peak MiB':>9s} {'ms/step':>8s} {'NFE fwd+bwd':>12s} "
          f"{'grad error':>11s}")
    sweep = r["sweep"]
    for row in sweep:
        print(f"{row['sensitivity']:11s} {row['steps']:5d} {row['peak_memory_mb']:9.1f} {row['ms_per_step']:8.0f} "
              f"{row['nfe_forward'] + row['nfe_backward']:12d} {row['grad_rel_error']:11.2g}")
    for sensitivity in ("direct", "adjoint", "reversible"):
        peak = {row["steps"]: row["peak_memory_mb"] for row in sweep if row["sensitivity"] == sensitivity}
        print(f"peak-memory growth 4 → 32 steps, {sensitivity}: {peak[32] / peak[4]:.2f}×")


def _ddp_worker(steps: int, warmup: int, threads: int) -> list[float]:
    """Step times of the 01 baseline at its t4 shape in this process, data-parallel when launched so."""
    torch.set_num_threads(threads)
    seed_everything(0)
    return step_times(BUILDERS["baseline"](), steps, warmup, flush_denormal=True)


def bench_ddp(steps: int, warmup: int) -> None:
    from odebook.training import distributed

    cores = os.cpu_count() or 2
    print(f"\ndata-parallel on the CPU: study 01's baseline at its t4 shape, global batch {BATCH}×{SEQ}; 1 process "
          f"with {cores} threads against 2 gloo processes with {max(1, cores // 2)} each", flush=True)
    one = statistics.median(_ddp_worker(steps, warmup, cores))
    two = statistics.median(distributed.launch(_ddp_worker, steps, warmup, max(1, cores // 2), nprocs=2)[0])
    print(f"1 process: {1000 * one:.0f} ms/step; 2 processes: {1000 * two:.0f} ms/step ({two / one:.2f}×)")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench", description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=8, help="timed steps per row")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--only", choices=("rate", "cpu", "side", "01", "gemm", "delta_rule", "02", "05", "ddp"),
                        help="run one section")
    parser.add_argument("--quick", action="store_true",
                        help="a few minutes: the clock and peak, each study's step alone and beside a busy process, "
                             "and seed-runs per minute (10 steps, 2 rounds)")
    parser.add_argument("--worker", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker is not None:  # one measurement, printed as JSON for the parent
        if args.worker == ["matmul"]:
            print(json.dumps({"flops_per_s": matmul_flops(), "onednn_flops_per_s": onednn_matmul_flops(),
                              "weight_layout": weight_layout_times()}))
        elif args.worker == ["02"]:
            print(json.dumps(_worker_02(args.steps, args.warmup)))
        elif args.worker == ["05"]:
            print(json.dumps(_worker_05()))
        else:
            model_name, flush, head, kernel = args.worker
            print(json.dumps(_worker(model_name, flush == "flush", head, kernel, args.steps, args.warmup)))
        return

    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; {_load()}")
    quick = ("rate", "cpu", "side")
    sections = {"rate": gemm_rate.main, "cpu": lambda: cpu_profile.main(*((3, 1, False) if args.quick else ())),
                "side": lambda: side_by_side.main(["--steps", "10", "--rounds", "2"] if args.quick else []),
                "01": lambda: bench_01(args.steps, args.warmup), "gemm": bench_gemm, "delta_rule": bench_delta_rule,
                "02": lambda: bench_02(args.steps, args.warmup), "05": bench_05,
                "ddp": lambda: bench_ddp(args.steps, args.warmup)}
    for name, section in sections.items():
        if args.only in (None, name) and (name in quick or not args.quick):
            start = time.perf_counter()
            section()
            print(f"[section {name}: {time.perf_counter() - start:.0f} s]", flush=True)
    print(f"\n{_load()} (other processes on these cores inflate every timing above)")


def _load() -> str:
    """The 1-, 5- and 15-minute load averages: how busy the machine's cores were while the timings ran."""
    return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


if __name__ == "__main__":
    main()
