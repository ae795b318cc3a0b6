"""The step each study's cpu profile actually trains, measured: its time, FLOPs and efficiency, alone and beside a
busy process (``python -m benchmarks.cpu_profile``, or ``make bench``'s section ``--only cpu``).

For each study, the largest training step of its cpu-profile plan (odebook.book.budget.plan: the model and the batch of
the shapes its loader gives) as ``odebook.study.timing.training_step`` takes it (forward, backward, clipping, AdamW),
timed in a worker process of its own:

- **alone**: ms per step (median after warm-up), its FLOPs (forward and backward, counted by torch), and its rate
  against the GEMM rate (the faster of torch's and oneDNN's 2048² fp32 product) measured in the same worker just
  before and after the steps;
- **beside one busy process** pinned to one core: the same step with libgomp's default (its threads spin while they
  wait) and with the wait policy the runner chooses for a machine this busy (odebook.book.wait_policy), each as a
  ratio to the step alone. A fair share of two cores is 2×.

Then each study's whole cpu run, broken down by what it spends its time on — odebook.book.budget's estimate by part
(the seeds' training and evaluation, the lr grid, timings, re-solving, building models, start-up), beside the
measured time of the committed report — and the seeds the study can afford within ``BUDGET_S`` (its other parts as
they are; one more seed adds one run of every per-seed group).

Each worker is a fresh process because libgomp reads its wait policy when it starts. The load average is printed
beside the figures; another process on the machine inflates them all.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from benchmarks.timing import contaminated

BUDGET_S = 20 * 60  # the cpu profile's target per study
STUDIES = ("01_gradient_flow", "02_time_indexed", "03_gdn_scaling", "04_mixed_training", "05_ode_solvers")
OMP = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")


@functools.lru_cache(maxsize=None)
def largest_run(study: str) -> tuple:
    """The runs of ``study``'s cpu plan that train the most steps, and their training work (budget.plan)."""
    from odebook.book.budget import plan
    from odebook.studies import validate_values

    params = validate_values(study, f"params/cpu/{study}.yaml")[0]
    runs = max(plan(params), key=lambda r: r.steps)
    return runs, next(w for w in runs.work if w.train)


def _largest_step(study: str) -> tuple:
    """The largest training step of ``study``'s cpu plan, built in this process: (its runs, the model, its FLOPs —
    NaN where torch cannot count them — and the step as ``training_step`` takes it)."""
    import torch

    from odebook.book.passes import pass_flops
    from odebook.study.timing import training_step
    from odebook.training.runtime import Precision

    runs, work = largest_run(study)
    torch.manual_seed(0)
    model, batch = runs.build(), work.batch()
    flops = pass_flops(model, work, Precision(torch.device("cpu"), None))
    return runs, model, flops, training_step(model, batch, work.loss)


def worker(study: str, steps: int, warmup: int, reference: bool) -> dict:
    """Time the largest training step of ``study``'s cpu plan in this process (and the GEMM rate around it)."""
    import torch

    from benchmarks.gemm_rate import reference_flops
    from benchmarks.timing import timed

    runs, model, flops, step = _largest_step(study)
    before = reference_flops() if reference else float("nan")
    for _ in range(warmup - 1):  # timed makes one more untimed call
        step()
    seconds, share = timed(step, steps, torch.get_num_threads())
    after = reference_flops() if reference else float("nan")
    return {"family": runs.family, "params": sum(p.numel() for p in model.parameters()), "flops": flops,
            "seconds": seconds, "share": share, "reference": (before + after) / 2, "threads": torch.get_num_threads()}


GEMM_OPS = {"mm", "addmm", "bmm", "baddbmm", "addbmm", "_linear_pointwise", "mkldnn_linear", "_mkl_linear"}
PARTS = ("GEMM", "attention", "optimizer", "other ops", "outside ops")


def _part(event) -> str:
    """Which part of a step an operator's own time belongs to: the optimizer's step (any operator under it), the
    matrix products, attention's fused kernel, or the other operators (element-wise, norms, softmax, copies)."""
    parent = event
    while parent is not None:
        if parent.name.startswith("Optimizer.step"):
            return "optimizer"
        parent = parent.cpu_parent
    name = event.name.split("::")[-1]
    if name in GEMM_OPS:
        return "GEMM"
    return "attention" if "scaled_dot_product" in name else "other ops"


def ops_worker(study: str, steps: int, warmup: int) -> dict:
    """Where ``study``'s cpu-profile step spends its time, by torch's profiler over ``steps`` steps: each operator's
    own time summed by ``_part``, and the rest of the steps' wall time ("outside ops": Python, autograd's engine,
    the profiler's own cost). Also the step's FLOPs (as ``worker`` counts them)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    _, _, flops, step = _largest_step(study)
    for _ in range(warmup):
        step()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        wall = time.perf_counter() - t0
    parts = dict.fromkeys(PARTS, 0.0)
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CPU:
            parts[_part(event)] += event.self_cpu_time_total / 1e6
    parts["outside ops"] = wall - sum(parts.values())
    return {"flops": flops, "seconds": wall / steps, "parts": {k: v / steps for k, v in parts.items()}}


def estimate(study: str) -> dict:
    """odebook.book.budget's estimate of ``study``'s cpu run, in this process."""
    from odebook.book import budget
    from odebook.studies import validate_values
    from odebook.training.runtime import precision_for, resolve_device

    params = validate_values(study, f"params/cpu/{study}.yaml")[0]
    b = budget.estimate(params, precision_for(resolve_device("cpu")))
    return {"seconds": b.seconds, "parts": b.parts, "seeds": b.n_seeds, "afford": b.seeds_within(BUDGET_S)}


def _in_worker(args: list[str], env: dict[str, str]) -> dict:
    from odebook.training.runtime import ALLOCATOR_ENV

    env = {**{k: v for k, v in os.environ.items() if k not in OMP}, **ALLOCATOR_ENV, **env}
    done = subprocess.run([sys.executable, "-m", "benchmarks.cpu_profile", "--worker", *args], env=env,
                          capture_output=True, text=True)
    if done.returncode:  # one line that says which worker and why, not the parent's traceback
        raise SystemExit(f"bench: the worker for {' '.join(args)} failed: "
                         + (done.stderr.strip().splitlines() or ["no message"])[-1])
    return json.loads(done.stdout.strip().splitlines()[-1])


def _step_in_worker(study: str, steps: int, warmup: int, env: dict[str, str], reference: bool = False) -> dict:
    return _in_worker(["step", study, str(steps), str(warmup), str(int(reference))], env)


@contextlib.contextmanager
def busy_process(core: int = 0) -> Iterator[subprocess.Popen]:
    """A Python process spinning on ``core`` for as long as the block runs."""
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"],
                            preexec_fn=lambda: os.sched_setaffinity(0, {core}))
    try:
        time.sleep(0.5)
        yield proc
    finally:
        proc.kill()
        proc.wait()


def main(steps: int = 10, warmup: int = 3, detail: bool = True) -> None:
    from odebook.book import wait_policy

    fair = hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) >= 2
    print("\neach study's cpu-profile training step (its largest model, the batch its loader gives; fp32, AdamW), "
          "alone: time, FLOPs and rate against the GEMM rate measured around it"
          + ("; beside one process spinning on core 0, as a ratio to alone: libgomp's spinning wait, and the policy "
             "the runner chooses then (a fair share is 2×)" if fair else ""), flush=True)
    print(f"{'study':<18} {'model':<9} {'params':>7} {'GFLOP':>6} {'ms':>7} {'GFLOP/s':>8} {'GEMM':>6} {'eff.':>5}"
          + (f" {'busy, spin':>10} {'busy, book':>10}  policy" if fair else ""))
    references = {}
    for study in STUDIES:
        for _ in range(3):  # "alone" only when it was: another process busy or its threads off their cores voids it
            busy = wait_policy.busy_cores()
            alone = _step_in_worker(study, steps, warmup, wait_policy.choose(busy), reference=True)
            why = contaminated(alone["share"], busy)
            if not why:
                break
        references[study] = alone["reference"]
        if why:
            print(f"{study:<18} {alone['family']:<9} not measured alone after 3 tries: {why}", flush=True)
            continue
        rate = alone["flops"] / alone["seconds"]
        row = (f"{study:<18} {alone['family']:<9} {alone['params'] / 1e6:6.2f}M {alone['flops'] / 1e9:6.1f} "
               f"{1e3 * alone['seconds']:7.1f} {rate / 1e9:8.1f} {alone['reference'] / 1e9:6.0f} "
               f"{rate / alone['reference']:5.0%}")
        if fair:
            with busy_process():
                spin = _step_in_worker(study, steps, warmup, {})
                chosen = wait_policy.choose(wait_policy.busy_cores())
                book = _step_in_worker(study, steps, warmup, chosen)
            row += (f" {spin['seconds'] / alone['seconds']:9.2f}× {book['seconds'] / alone['seconds']:9.2f}×  "
                    f"{chosen.get('OMP_WAIT_POLICY', 'spin')}")
        print(row, flush=True)
    print("load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg()))
    if detail:  # each step by part, and the budget's breakdown of each study
        ops(references, steps, warmup)
        breakdown()


def ops(references: dict[str, float], steps: int = 10, warmup: int = 3) -> None:
    """Each study's step by part (``ops_worker``), and the efficiency its GEMMs and attention alone would give: the
    step's FLOPs over their time against the GEMM rate measured beside that study's step (``references``) — the
    ceiling if everything else took no time."""
    from odebook.book import wait_policy

    print("\nwhere each study's cpu-profile step goes (torch's profiler; its own cost lands in 'outside ops'), and "
          "the step's efficiency if only its GEMMs and attention took time", flush=True)
    print(f"{'study':<18} {'ms':>7} " + " ".join(f"{p:>11}" for p in PARTS) + f" {'ceiling':>8}")
    for study in STUDIES:
        out = _in_worker(["ops", study, str(steps), str(warmup)], wait_policy.choose(wait_policy.busy_cores()))
        parts, reference = out["parts"], references[study]
        products = parts["GEMM"] + parts["attention"]
        print(f"{study:<18} {1e3 * out['seconds']:7.1f} "
              + " ".join(f"{parts[p] / out['seconds']:11.0%}" for p in PARTS)
              + f" {out['flops'] / products / reference:8.0%}", flush=True)
    print("load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg()))


def breakdown() -> None:
    from odebook.book import wait_policy

    print("\neach study's cpu run by part (odebook.book.budget's estimate here), the committed report's measured "
          f"time, and the seeds it can afford in {BUDGET_S // 60} minutes", flush=True)
    for study in STUDIES:
        est = _in_worker(["estimate", study], wait_policy.choose(wait_policy.busy_cores()))
        manifest = Path("reports/cpu") / study / "manifest.json"
        measured = json.loads(manifest.read_text()).get("seconds") if manifest.is_file() else None
        print(f"{study}: ≈ {est['seconds']:.0f} s estimated, {measured or '—'} s measured (committed report); "
              f"{est['seeds']} seeds now, {est['afford']} within {BUDGET_S // 60} min")
        for part, seconds in est["parts"]:
            print(f"    {part:<52} {seconds:7.0f} s  {seconds / est['seconds']:4.0%}")


if __name__ == "__main__":
    if sys.argv[1:3] == ["--worker", "step"]:
        study, steps, warmup, reference = sys.argv[3:7]
        print(json.dumps(worker(study, int(steps), int(warmup), reference == "1")))
    elif sys.argv[1:3] == ["--worker", "ops"]:
        study, steps, warmup = sys.argv[3:6]
        print(json.dumps(ops_worker(study, int(steps), int(warmup))))
    elif sys.argv[1:3] == ["--worker", "estimate"]:
        print(json.dumps(estimate(sys.argv[3])))
    else:
        main()
