"""What a study's profile will cost, said before its first training step: the estimated wall time on this device, the
peak memory of its largest model at the profile's shapes, and the estimate on a T4 with whether that fits its 15 GB.

The time: each study's training runs (``plan``: how many runs of which model, how many steps at which batch shape)
cost their FLOPs (odebook.study.flops: one counted training step per model, evaluations at a third of a step) at a
rate measured on this device by a short timed probe — six steps of the training loop itself, the median of the
last five — of the largest model of each family (a model whose FLOPs torch cannot count is probed itself). Start-up, data loading, tables, figures and retrieval scoring are not counted.
Retrieval batches (studies 03 and 04) are counted at the full ``max_seq_len``, an upper bound.

The memory: the largest model's training step (odebook.study.measure.peak_memory: activations, gradients and
temporaries, in fp32 on the CPU) plus its weights and Adam's two moments (12 bytes a parameter). fp16 autocast on a T4 keeps the weights and their state in fp32 and halves most activations: the fp32
figure bounds the T4's.

The T4: its fp16 tensor-core peak (65 TFLOP/s) at ``T4_FRACTION`` of it — small models spend much of a step in
element-wise kernels and launches, so a quarter is what such models reach, not a measurement here.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
import os
import statistics
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from odebook.data.corpus import get_tokenizer
from odebook.models.arms import gradient_flow_arms
from odebook.models.lm import lm_loss
from odebook.nn.ode import STAGES
from odebook.params import Params
from odebook.study.flops import count_flops
from odebook.study.measure import peak_memory
from odebook.training.runtime import Precision, precision_for, resolve_device
from odebook.training.train import TrainConfig, train

__all__ = ["Runs", "Budget", "plan", "estimate", "announce", "line", "HANDED", "T4_FLOPS", "T4_FRACTION", "T4_MEMORY"]

T4_FLOPS = 65e12  # fp16 tensor-core peak (NVIDIA's T4 datasheet)
T4_FRACTION = 0.25
T4_MEMORY = 15e9  # what a T4 offers of its 16 GB (Colab reports 15 GB)
LONG = 1800  # seconds: above this, the line says how to choose a smaller profile


@dataclasses.dataclass(frozen=True)
class Runs:
    """``count`` training runs of the model ``build()`` makes, of ``steps`` steps at ``batch_size`` × ``seq_len``
    (``passes`` forward-backward passes a step: 2 for mixed language-model + retrieval training)."""
    family: str
    build: Callable[[], nn.Module]
    count: int
    steps: int
    batch_size: int
    seq_len: int
    eval_forwards: int = 0  # forward passes of evaluation per run
    passes: int = 1


def _lm_runs(p: Params, family: str, build: Callable[[], nn.Module], count: int, **override: Any) -> Runs:
    evals = (p.steps // p.eval_interval + 1) * p.eval_batches
    return Runs(family, build, count, **{"steps": p.steps, "batch_size": p.batch_size, "seq_len": p.seq_len,
                                         "eval_forwards": evals, **override})


def _gradient_flow(p: Params, vocab: int) -> list[Runs]:
    return [_lm_runs(p, name, build, p.n_seeds) for name, build in gradient_flow_arms(p.model_config(vocab)).items()]


def _time_indexed(p: Params, vocab: int) -> list[Runs]:
    runs = len(p.lr_grid) + p.n_seeds - 1  # the grid on the first seed, then the other seeds at the chosen rate
    return [_lm_runs(p, name, functools.partial(p.model_config(vocab).build, name), runs) for name in p.models]


def _gdn_scaling(p: Params, vocab: int) -> list[Runs]:
    runs = len(p.lr_grid) + p.n_seeds - 1
    ladder = [_lm_runs(p, s, p.size_config(i, s).build, runs) for s in p.series for i in range(len(p.ladder_d))]
    niah = [Runs("gdn", p.size_config(i, "gdn").build, p.n_seeds, p.niah_steps, p.niah_batch_size, p.max_seq_len)
            for i in p.niah_sizes]
    return ladder + niah


def _mixed_training(p: Params, vocab: int) -> list[Runs]:
    shape = {"lm": (p.batch_size, p.seq_len, 1), "niah": (p.niah_batch_size, p.max_seq_len, 1),
             "mixed": (max(p.batch_size, p.niah_batch_size), p.max_seq_len, 2)}
    return [_lm_runs(p, "hybrid" if arm.state_read else "control", arm.build, p.n_seeds, batch_size=shape[r][0],
                     seq_len=shape[r][1], passes=shape[r][2]) for arm in p.arms().values() for r in p.regimes]


def _ode_solvers(p: Params, vocab: int) -> list[Runs]:
    cfg = p.model_config(vocab)

    def hybrid(solver: str, steps: int, sensitivity: str = p.sensitivity) -> Callable[[], nn.Module]:
        return lambda: cfg.replace(solver=solver, steps=steps, sensitivity=sensitivity).hybrid()

    runs = [_lm_runs(p, "baseline", cfg.baseline, p.n_seeds)]
    runs += [_lm_runs(p, s, hybrid(s, p.nfe_budget // STAGES[s] if s in STAGES else 1), p.n_seeds)
             for s in p.integrators]
    sweep = p.timing_repeats + 2  # a warm-up, the timed repeats, the step the memory is measured on
    return runs + [Runs(f"sweep {m}", hybrid(p.sweep_solver, n, m), 1, sweep, p.batch_size, p.seq_len)
                   for n in p.sweep_steps for m in p.sensitivities]


PLANS = {"01_gradient_flow": _gradient_flow, "02_time_indexed": _time_indexed, "03_gdn_scaling": _gdn_scaling,
         "04_mixed_training": _mixed_training, "05_ode_solvers": _ode_solvers}


def plan(params: Params) -> list[Runs]:
    """The training runs the study of ``params`` makes."""
    return PLANS[params.study](params, get_tokenizer(params.tokenizer).vocab_size)


@dataclasses.dataclass(frozen=True)
class Budget:
    study: str
    seconds: float  # estimated training time on this device
    flops: float  # of every training step and evaluation
    peak_bytes: int  # the largest model's training step, weights and Adam's moments
    largest: str
    device: str

    @property
    def t4_seconds(self) -> float:
        return self.flops / (T4_FRACTION * T4_FLOPS)

    def line(self) -> str:
        """One line a person reads before the first step."""
        fits = "fits" if self.peak_bytes < T4_MEMORY else "does NOT fit"
        text = (f"budget {self.study}: ≈ {_duration(self.seconds)} here ({self.device}), {self.flops / 1e12:,.1f} "
                f"TFLOP; peak memory {self.peak_bytes / 1e9:.2f} GB ({self.largest}); on a T4 ≈ "
                f"{_duration(self.t4_seconds)} (at {T4_FRACTION:.0%} of its fp16 peak), {fits} its 15 GB")
        if self.seconds > LONG:
            text += (f" — long here: the cpu profile is sized for a CPU (params/cpu/{self.study}.yaml; "
                     "make run-all PROFILE=cpu)")
        return text


def _duration(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 5400 else (f"{seconds / 60:.0f} min" if seconds >= 90
                                                              else f"{seconds:.0f} s")


def _batch(runs: Runs, vocab: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.randint(0, vocab, (runs.batch_size, runs.seq_len + 1), generator=torch.Generator().manual_seed(0))
    return x[:, :-1].to(device), x[:, 1:].to(device)


def _loss(runs: Runs) -> Callable:
    return lambda model, batch: sum(lm_loss(model, batch) for _ in range(runs.passes))


def _flops(runs: Runs, vocab: int, precision: Precision) -> float:
    """FLOPs of one training step's forward and backward (the optimiser's update is element-wise), or NaN where
    torch's counter cannot follow the backward (the adjoint method calls autograd.grad inside it)."""
    model, batch = runs.build().to(precision.device).train(), _batch(runs, vocab, precision.device)

    def step() -> None:
        with precision.autocast():
            loss = _loss(runs)(model, batch)
        loss.backward()
    try:
        return float(count_flops(step))
    except RuntimeError:
        return math.nan


def _seconds_per_step(runs: Runs, vocab: int, precision: Precision, steps: int = 6) -> float:
    """The training loop itself (odebook.training.train) for ``steps`` steps: the median of the steps after the
    first (which allocates and warms caches). Five of them, not two: a small model's step is short, and one stray
    slow step (another process, the allocator) in a median of two makes the whole estimate several times too high."""
    batch = _batch(runs, vocab, precision.device)
    hist = train(runs.build().to(precision.device), itertools.repeat(batch), [batch],
                 TrainConfig(steps=steps, lr=1e-4, eval_interval=steps), precision, loss_fn=_loss(runs),
                 progress=False)
    return statistics.median(hist.step_time[1:])


def estimate(params: Params, precision: Precision) -> Budget:
    """Count every model's training step, probe the largest model of each family (and each model whose FLOPs cannot
    be counted), measure the largest model's memory."""
    vocab = get_tokenizer(params.tokenizer).vocab_size
    plan_ = [(runs, _flops(runs, vocab, precision)) for runs in plan(params)]
    rate = {}  # FLOP/s of each family's largest countable model
    for family in dict.fromkeys(r.family for r, f in plan_ if not math.isnan(f)):
        runs, flops = max(((r, f) for r, f in plan_ if r.family == family and not math.isnan(f)), key=lambda c: c[1])
        rate[family] = flops / _seconds_per_step(runs, vocab, precision)
    typical = statistics.median(rate.values())
    total_flops = seconds = 0.0
    for runs, flops in plan_:
        step = flops / rate[runs.family] if not math.isnan(flops) else _seconds_per_step(runs, vocab, precision)
        flops = flops if not math.isnan(flops) else step * typical  # uncountable: at the typical rate
        evals = runs.eval_forwards / (3 * runs.passes)  # a forward is about a third of a forward and backward
        total_flops += runs.count * (runs.steps + evals) * flops
        seconds += runs.count * (runs.steps + evals) * step
    runs, _ = max(plan_, key=lambda c: -1 if math.isnan(c[1]) else c[1])
    model = runs.build().to(precision.device).train()
    batch, n_params = _batch(runs, vocab, precision.device), sum(p.numel() for p in model.parameters())

    def step() -> None:
        model.zero_grad(set_to_none=True)
        with precision.autocast():
            loss = _loss(runs)(model, batch)
        loss.backward()
    peak = peak_memory(step, precision.device) + 12 * n_params
    return Budget(params.study, seconds, total_flops, peak, f"{runs.family}, {n_params / 1e6:.1f}M parameters",
                  precision.device.type)


HANDED = "ODEBOOK_BUDGET"  # "<study>\t<line>": the runner's estimate, handed to the kernel it starts for that study


def announce(params: Params) -> tuple[str, dict[str, str]]:
    """The line the runner prints before a notebook runs (empty for a notebook without a plan; a note instead of an
    error when the estimate fails, which the notebook itself then raises), and the environment that hands a good
    estimate to the notebook's kernel, so that ``line`` there does not probe and count everything again."""
    if params.study not in PLANS:
        return "", {}
    try:
        text = estimate(params, precision_for(resolve_device(params.device))).line()
    except Exception as err:
        return f"budget {params.study}: could not estimate ({type(err).__name__}: {err})", {}
    return text, {HANDED: f"{params.study}\t{text}"}


def line(params: Params, precision: Precision) -> str:
    """The budget line a notebook prints: the runner's, where it handed one over for this study, else estimated."""
    study, _, handed = os.environ.get(HANDED, "").partition("\t")
    return handed if study == params.study and handed else estimate(params, precision).line()
