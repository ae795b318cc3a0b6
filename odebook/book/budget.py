"""What a study's profile will cost, said before its first training step: the estimated wall time on this device, the
peak memory of its largest model at the profile's shapes, and the estimate on a T4 with whether that fits its 15 GB.

The time: the work of the runs the study's notebook executes (its plan, odebook.study.plan — training steps on the
batches its tasks give, forward passes of evaluation and scoring on their own batches) costs its FLOPs
(odebook.study.flops: each kind of pass counted once per model) at a rate measured on this device by a short timed
probe — six steps of the training loop itself, the median of the last five — of the largest training step of each
family (a pass whose FLOPs torch cannot count is probed itself), plus what each run does before its first step (timed:
building its model, counting a forward pass) and the start-up: a kernel's start, the imports, reading the data,
generation, tables and figures, which are not probed — the most of a smoke run, a small part of any other. It is
``START_UP_PER_IMPORT`` times the CPU seconds a fresh interpreter takes here to import the notebooks' libraries
(``start_up``: it scales with the machine as a kernel's start does), divided by the share of a core this process gets
now.

A plan of tiny models (a smoke run: under ``TINY`` FLOPs by the rule of 6 per parameter and token, counted before
anything runs) is neither counted nor probed — at that scale a FLOP count and a probe of the training loop take about
as long as the runs — but each kind of pass is timed once as it is (odebook.book.passes.timed: its forward, backward
and optimizer step), which is what a step of a tiny model costs.

The memory: the largest training step (odebook.study.measure.peak_memory: activations, gradients and temporaries, in
fp32 on the CPU) plus its model's weights and Adam's two moments (12 bytes a parameter). fp16 autocast on a T4 keeps
the weights and their state in fp32 and halves most activations: the fp32 figure bounds the T4's.

Where a study's runs go side by side (odebook.training.executor.Workers: ``executor: auto`` on a CPU with several
cores), the runs' steps are probed on one thread and their time divided by the workers, plus one more start-up for
the workers' imports.

The probes are kept per processor, device, package code, torch and parameters in the profile's outputs folder
(``PROBES``), so an unchanged re-run of a notebook estimates without probing.

The calibration: the runner records each finished run's measured time over its estimate, per processor and study,
in the profile's outputs folder (``CALIBRATION``), and scales the next estimate there by the median of the last few
(``calibrated``); the line says how many runs calibrated it, or that none has yet on this processor.

The T4: each pass's FLOPs and the kernels it launches, counted here at the profile's shapes, at a T4's rate and
cost per launch (odebook.book.passes: small models are bound by launches on a GPU, not by arithmetic); the line says
which bound.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import hashlib
import itertools
import math
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

from odebook.book import calibration, notebook, passes, processor
from odebook.book.calibration import CALIBRATION, calibrated, record
from odebook import studies
from odebook.params import ParamError, Params
from odebook.study.measure import peak_memory
from odebook.training.code_hash import study_hash
from odebook.training.fingerprint import arithmetic
from odebook.training import checkpoint
from odebook.training.executor import Workers
from odebook.training.runtime import Precision, precision_for, resolve_device
from odebook.training.train import TrainConfig, train
from odebook.study.plan import Plan, Runs, Work

__all__ = ["Runs", "Work", "Budget", "planned", "plan", "estimate", "memory", "announce", "line",
           "HANDED",
           "calibrated", "record", "CALIBRATION", "START_UP_PER_IMPORT", "start_up"]

LONG = 1800  # seconds: above this, the line says how to choose a smaller profile
TINY = (1e11, 1e8)  # FLOPs and peak bytes below which the line leaves the T4 and the FLOPs out
BUSY = 0.75  # below this share of a core, the line says the machine was busy (short steps then slow unevenly)
LONG_STEP = 0.25  # seconds: a probe's step this long is timed twice, a shorter one five times
# A smoke notebook's start-up over a fresh interpreter's import of its libraries (CPU time): 3–6× on the Zen 3 EPYC of
# 2026-11-25 (smoke runs of 14–30 s against 4.6 s of imports, run to run). 4.5 put two of a clean-clone CI run's
# smoke notebooks at 0.47× their estimate; a constant 10 s, measured on a Zen 4, was 1.5–2.7× too little there.
START_UP_PER_IMPORT = 3.5
IMPORTS = "import torch, pandas, matplotlib.pyplot, odebook.study.experiment, odebook.book.notebook"


@dataclasses.dataclass(frozen=True)
class Budget:
    study: str
    seconds: float  # estimated wall time of the notebook on this device
    flops: float  # of every training step, evaluation and scoring pass
    peak_bytes: int  # the largest model's training step, weights and Adam's moments
    largest: str
    device: str
    share: float = 1.0  # of a core, that this process got while it was estimated (_cpu_share)
    parts: tuple[tuple[str, float], ...] = ()  # the estimate's seconds by what they are spent on (``estimate``)
    seed_seconds: float = math.nan  # what one more seed adds (one more run of every per-seed group)
    n_seeds: int = 0
    defaults: bool = True  # the run is the notebook's own (t4) parameters: only then does the cpu profile help
    factor: float = 1.0  # measured over estimated time of this study's earlier runs on this processor (``calibrated``)
    calibrations: int = 0  # how many runs the factor comes from
    implausible: int = 0  # recorded ratios left out as no calibration (odebook.book.calibration.PLAUSIBLE)
    launches: float = 0.0  # kernels every pass would launch on a GPU (odebook.book.passes)

    def seeds_within(self, seconds: float) -> int:
        """How many seeds the study can run within ``seconds`` here, its other parts as they are."""
        return max(0, self.n_seeds + math.floor((seconds - self.here) / (self.factor * self.seed_seconds)))

    @property
    def here(self) -> float:
        """The estimated seconds on this device, calibrated by this study's earlier runs here where there were any."""
        return self.seconds * self.factor

    @property
    def t4_seconds(self) -> float:
        return passes.seconds(self.flops, self.launches, passes.T4)

    def line(self) -> str:
        """One line a person reads before the first step."""
        how = (f"calibrated by {self.calibrations} earlier run{'s' * (self.calibrations > 1)} here"
               if self.calibrations else "not yet calibrated on this processor")
        how += f"; {self.implausible} implausible ratio{'s' * (self.implausible > 1)} left out" * bool(self.implausible)
        tiny = self.flops < TINY[0] and self.peak_bytes < TINY[1]  # a smoke run: no T4 figure worth reading
        text = f"budget {self.study}: ≈ {_duration(self.here)} here ({self.device}; {how})" + (
            f"; tiny models ({self.peak_bytes / 2**20:.0f} MiB at their peak, under {TINY[0] / 1e12:g} TFLOP in all)"
            if tiny else f", {self.flops / 1e12:,.1f} TFLOP; peak memory {self.peak_bytes / 1e9:.2f} GB "
            f"({self.largest}); on a T4 ≈ {_duration(self.t4_seconds)} "
            f"({passes.bound(self.flops, self.launches)}: {self.launches / 1e6:,.2f}M kernel launches), "
            f"{'fits' if self.peak_bytes < passes.T4.memory else 'does NOT fit'} its 15 GB")
        if self.here > LONG and self.defaults and self.device == "cpu":
            text += (f" — long here: the cpu profile is sized for a CPU (params/cpu/{self.study}.yaml; "
                     "make run-all PROFILE=cpu)")
        if self.share < BUSY:
            text += (f" — estimated on a busy machine (this process got {self.share:.0%} of a core): the time here "
                     "may be several times off")
        return text


def _duration(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 5400 else (f"{seconds / 60:.0f} min" if seconds >= 90
                                                              else f"{seconds:.0f} s")


def planned(params: Params) -> bool:
    """Whether ``params`` are a study's whose package declares its plan (odebook.study.plan), so that it can be
    costed."""
    try:
        return hasattr(studies.load(params.study), "plan")
    except ParamError:  # a notebook that is not one of the book's studies
        return False


def plan(params: Params, made: Plan | None = None) -> list[Runs]:
    """The runs the study of ``params`` makes: its plan's (``made``, where the notebook has it already, else the
    study's ``plan(p, data(p))``)."""
    if made is None:
        study = studies.load(params.study)
        made = study.plan(params, study.data(params))
    return made.runs()


def _cpu_share(wall: float = 0.2) -> float:
    """The share of a core this process gets now: CPU time over wall time of a short pure-Python loop (1 on an idle
    core, less where other processes take turns on it)."""
    t0, c0 = time.perf_counter(), time.thread_time()
    while time.perf_counter() - t0 < wall:
        sum(range(1000))
    return min(1.0, max(0.05, (time.thread_time() - c0) / (time.perf_counter() - t0)))


@functools.lru_cache(maxsize=1)
def start_up() -> float:
    """Seconds of a notebook's start-up on an idle core (module docstring): ``START_UP_PER_IMPORT`` times the CPU time
    (user and system, so other processes' load does not count) of a fresh interpreter importing ``IMPORTS``; measured
    once a process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", IMPORTS], check=True, capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return START_UP_PER_IMPORT * (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)


def _setup(runs: Runs, precision: Precision) -> float:
    """What each run does before its first step, timed: build its model and count one forward pass's FLOPs (as
    odebook.study.experiment.run_one does for its report)."""
    t0 = time.perf_counter()
    model = runs.build().to(precision.device)
    passes.pass_flops(model, dataclasses.replace(runs.work[0], train=False), precision)
    return time.perf_counter() - t0


def _seconds(build: Callable[[], nn.Module], work: Work, precision: Precision) -> float:
    """One training step of ``work`` timed through the training loop itself (odebook.training.train): the median of
    the steps after the first (which allocates and warms caches) — two of them for a step of ``LONG_STEP`` or more,
    else five: a short step is as long as the stray delays of a busy machine (another process, the allocator), and
    one such step in a median of two makes the whole estimate several times too high."""
    batch = passes.on(work.batch(), precision.device)
    for steps in (3, 6):
        hist = train(build().to(precision.device), itertools.repeat(batch), [batch],
                     TrainConfig(steps=steps, lr=1e-4, eval_interval=steps), precision, loss_fn=work.loss,
                     progress=False)
        if statistics.median(hist.step_time[1:]) >= LONG_STEP:
            break
    return statistics.median(hist.step_time[1:])


def estimate(params: Params, precision: Precision, made: Plan | None = None) -> Budget:
    """Cost the study's plan (``made``, where the caller has it): count every kind of pass of every run's work,
    probe the largest training step of each family, measure the largest training step's memory; add the start-up
    allowance. A training step torch cannot count is timed by its forward pass's FLOPs at the rate of its family's
    largest such step, probed itself. A plan of tiny models (under ``TINY`` by passes.rough_flops: a smoke run) is
    timed pass by pass instead (passes.timed), neither counted nor probed: at that scale a count or a probe of the
    training loop takes about as long as the runs."""
    plan_ = plan(params, made)
    ex = notebook.executor(params, Path())
    workers = ex.processes if isinstance(ex, Workers) else 1  # the runs' parts go side by side, each on one thread
    rough = passes.rough_flops(plan_, stop=TINY[0])  # the whole plan's, where it stays under TINY
    if rough < TINY[0]:
        timed = passes.timed(plan_, precision)
        each = [(runs, work, seconds, 0.0) for runs, work, seconds in timed]
        total_flops, launches = rough, 0.0
        largest = max((c for c in timed if c[1].train), key=lambda c: c[2])
    else:
        raw = passes.counted(plan_, precision, train_only=False, kernels=False)
        if sum(r.count * w.n * f for r, w, (f, _, _) in raw if not math.isnan(f)) >= TINY[0]:  # the T4 line shows
            raw = passes.counted(plan_, precision, train_only=False)  # and needs the kernels launched
        counted = [(runs, work, flops, scale) for runs, work, (flops, scale, _) in raw]
        rates = {None: _rates(counted, precision, None)}  # on this process's threads; side by side, on one as well
        if workers > 1:
            rates[1] = _rates(counted, precision, 1)
        each = []
        for runs, work, flops, scale in counted:
            rate, typical = rates[1 if workers > 1 and runs.executed else None]
            one = scale / rate.get((runs.family, not math.isnan(flops)), typical)  # a pass's seconds on its threads
            each.append((runs, work, one, flops if not math.isnan(flops) else one * typical))  # at the typical rate
        total_flops, launches = sum(r.count * w.n * f for r, w, _, f in each), passes.launches(raw)
        largest = max(((r, w, m) for r, w, f, m in counted if w.train), key=lambda c: c[2])
    every, setup = [r for r in {id(r): r for r, *_ in each}.values() if r.setup], {}
    for runs in every:  # seconds a run spends before its first step
        if id(runs.build) not in setup:
            setup[id(runs.build)] = _setup(runs, precision) / (workers if runs.executed else 1)
    share = _cpu_share()
    parts = collections.Counter({"start-up (kernel, imports, data, tables, figures)": start_up() / share,
                                 "building models": sum(r.count * setup[id(r.build)] for r in every)})
    if workers > 1:
        parts["starting the workers"] = start_up() / share
    seed_seconds = sum(setup[id(r.build)] for r in every if r.per_seed)
    for runs, work, one, _ in each:
        one /= workers if workers > 1 and runs.executed else 1  # side by side: the workers share the passes
        parts[f"{runs.part}: {'training' if work.train else 'evaluation'}"] += runs.count * work.n * one
        seed_seconds += work.n * one if runs.per_seed else 0.0
    peak, name = _peak(*largest[:2], precision)
    return Budget(params.study, sum(parts.values()), total_flops, peak, name, precision.device.type, share,
                  tuple(parts.most_common()), seed_seconds, params.n_seeds,
                  defaults=arithmetic(params) == arithmetic(type(params)()), launches=launches)


def _rates(counted: list, precision: Precision, threads: int | None) -> tuple[dict, float]:
    """FLOPs a second of each (family, countable) kind's largest training step, probed on ``threads`` threads (None:
    this process's), and their median over the countable kinds."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads or before)
    try:
        rate = {}
        for key in dict.fromkeys((r.family, not math.isnan(f)) for r, w, f, _ in counted if w.train):
            runs, work, _, scale = max(((r, w, f, m) for r, w, f, m in counted
                                        if w.train and (r.family, not math.isnan(f)) == key), key=lambda c: c[3])
            rate[key] = scale / _seconds(runs.build, work, precision)
    finally:
        torch.set_num_threads(before)
    return rate, statistics.median([v for (_, countable), v in rate.items() if countable] or rate.values())


def _peak(runs: Runs, work: Work, precision: Precision) -> tuple[int, str]:
    """Peak memory of one training step of ``work`` plus its model's weights and Adam's moments, and which it was."""
    model = runs.build().to(precision.device)
    n_params = sum(p.numel() for p in model.parameters())
    step = passes.one_pass(model, work, passes.on(work.batch(), precision.device), precision)
    peak = peak_memory(step, precision.device)
    return peak + 12 * n_params, f"{runs.family}, {n_params / 1e6:.1f}M parameters"


def memory(params: Params, precision: Precision) -> tuple[int, str]:
    """``estimate``'s peak memory alone (no timing): the training step of the most FLOPs in the study's plan (a step
    torch cannot count, by its forward pass's)."""
    steps = passes.counted(plan(params), precision, train_only=True, kernels=False)
    return _peak(*max(steps, key=lambda c: c[2][1])[:2], precision)


PROBES = ".budget-probes.json"  # in a profile's outputs folder: estimates by what they were measured from


def _probed(params: Params, precision: Precision, folder: Path) -> Budget:
    """``estimate``, made once per processor, device, package code, torch and parameters and kept in ``folder``
    (an estimate made on a busy machine is not kept): an unchanged re-run costs no probe."""
    key = checkpoint.fingerprint(processor=processor.describe(), precision=str(precision), torch=torch.__version__,
                                 estimator=_estimator_hash(), study=params.study, parameters=arithmetic(params),
                                 threads=notebook.layout(params), code=study_hash(params.study))
    kept = calibration.kept(folder / PROBES)
    if key in kept:
        return Budget(**{**kept[key], "parts": tuple(map(tuple, kept[key]["parts"]))})
    made = estimate(params, precision)
    if made.share >= BUSY:
        calibration.keep(folder / PROBES, {**kept, key: dataclasses.asdict(made)})
    return made


@functools.lru_cache(maxsize=1)
def _estimator_hash() -> str:
    """sha256 of the estimate's own code, this module and its counts (odebook.book.passes); the plans it costs (each
    study's plan module) and the science code a step runs are in the key as ``study_hash``."""
    files = (Path(sys.modules[__name__].__file__), Path(passes.__file__))
    return hashlib.sha256(b"".join(f.read_bytes() for f in files)).hexdigest()


HANDED = "ODEBOOK_BUDGET"  # "<study>\t<line>": the runner's estimate, handed to the kernel it starts for that study


def announce(params: Params, folder: Path) -> tuple[str, dict[str, str], Budget | None]:
    """The line the runner prints before a notebook runs (empty for a notebook without a plan; a note instead of an
    error when the estimate fails, which the notebook itself then raises), the environment that hands a good
    estimate to the notebook's kernel, so that ``line`` there does not probe and count everything again, and the
    estimate (calibrated by ``folder``'s record of earlier runs here), for ``record`` once the run has finished."""
    if not planned(params):
        return "", {}, None
    try:
        made = calibrated(_probed(params, precision_for(resolve_device(params.device)), folder), folder)
    except Exception as err:
        return f"budget {params.study}: could not estimate ({type(err).__name__}: {err})", {}, None
    return made.line(), {HANDED: f"{params.study}\t{made.line()}"}, made


def line(params: Params, precision: Precision, made: Plan | None = None) -> str:
    """The budget line a notebook prints: the runner's, where it handed one over for this study, else the estimate
    of its plan (``made``: the notebook's own)."""
    study, _, handed = os.environ.get(HANDED, "").partition("\t")
    return handed if study == params.study and handed else estimate(params, precision, made).line()
