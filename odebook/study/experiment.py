"""Train a set of models over several seeds on one corpus, the same way for every study.

Every model sees the same training batches for a given seed (the batch stream is seeded by the seed, not by the
model), is evaluated at intervals on one fixed list of validation batches, and is scored once at the end on a fixed
list of test batches.

With ``checkpoints`` (a folder), each run keeps ``<model>_seed<seed>_lr<lr>.pt`` while it trains — resumed after an
interruption — and ``….done.pt`` once finished — reused by a re-run. Both are keyed by a fingerprint of the run's
configuration (odebook.training.fingerprint: ``key``, the parameters that affect it and the content hashes of the data
files; the model's architecture, seed, optimisation and batch shape; the science code its study imports,
odebook.training.code_hash), so anything changed runs afresh; ``fresh`` ignores them all. ``Run.origin`` says whether
a run was trained, resumed or reused.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections import Counter
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from pathlib import Path

import pandas as pd
import torch
from torch import nn

from odebook.training import checkpoint as ckpt
from odebook.training.fingerprint import run_fingerprint, stored_key
from odebook.study.flops import forward_flops
from odebook.study.lr_grid import check_tried, choose
from odebook.models.lm import count_params, ode_blocks, param_groups
from odebook.params.seeds import SeedPlan
from odebook.training.runtime import Precision, seed_everything
from odebook.training.executor import Executor, Local
from odebook.training.spread import BUILD
from odebook.study.stats import mean_ci, paired_test
from odebook.study.task import Task
from odebook.training.train import DivergenceError, History, TrainConfig, evaluate, train

__all__ = ["Run", "by_seed", "run_one", "train_once", "run_seeds", "tune_lr", "tune_then_run",
           "summarize", "compare_to", "loss_at_depth", "loss_with_solver", "grad_ratios", "WARMUP_STEPS"]

WARMUP_STEPS = 5  # step times of the first steps (allocator, caches) are left out of ms/step


@dataclass
class Run:
    model: str
    seed: int
    n_params: int
    history: History
    test_loss: float
    module: nn.Module | None  # None once a study has let go of it (run_seeds' keep)
    flops_per_forward: int  # one forward pass of one batch
    peak_memory: float  # bytes allocated at the peak of training (CUDA); NaN on CPU, where torch does not track it
    tokens_per_step: int | None
    lr: float = math.nan
    origin: str = "trained"  # or "resumed at step k", "reused" (see the checkpoints in the module docstring)
    scores: Any = None  # what the task's scorer gave (odebook.study.task.Task.score)

    @property
    def ms_per_step(self) -> float:
        times = self.history.step_time[WARMUP_STEPS:] or self.history.step_time
        return 1000 * statistics.median(times)

    @property
    def train_seconds(self) -> float:
        return sum(self.history.step_time)

    def record(self) -> dict:
        """What results.json keeps of a run: model, seed, parameter count, test loss and the whole history."""
        return {"model": self.model, "seed": self.seed, "params": self.n_params, "lr": self.lr,
                "test_loss": self.test_loss, "origin": self.origin, "history": self.history.to_dict()}


Groups = Callable[[str, nn.Module], Mapping[str, Sequence[nn.Parameter]]]


def by_seed(runs: Sequence[Run], arm: str, metric: Callable[[Run], Any] = lambda run: run.test_loss) -> list:
    """``metric`` of each of ``arm``'s runs, in seed order: the order paired comparisons pair two arms' runs in."""
    return [metric(r) for r in sorted((r for r in runs if r.model == arm), key=lambda r: r.seed)]


def _default_groups(name: str, model: nn.Module):
    return param_groups(model)


def run_one(name: str, build: Callable[[], nn.Module], seed: int, task: Task, config: TrainConfig,
            precision: Precision, *, groups: Groups = _default_groups, progress: bool = True,
            log_dir: Path | None = None, checkpoints: Path | None = None, fresh: bool = False,
            key: Mapping | None = None, reuse_only: bool = False) -> Run | None:
    """Seed, build, train on the seed's stream of ``task``, and score ``task.test`` once (NaN when it is None: a
    tuning run that must not see the test split, or a task scored otherwise). With ``checkpoints``, resume or reuse
    it (module docstring); ``reuse_only``: None instead of training when it is not finished there. Counting the
    model's FLOPs leaves the generators where seeding put them."""
    if reuse_only and checkpoints is None:
        return None
    cuda = precision.device.type == "cuda"
    with BUILD:  # the CPU's generators are shared by runs spread over several GPUs (odebook.training.spread)
        seed_everything(seed, precision.device)
        model = build().to(precision.device)
        with torch.random.fork_rng(devices=[precision.device] if cuda else []):
            flops = forward_flops(model, task.valid[0][0].to(precision.device))
    if cuda:
        torch.cuda.reset_peak_memory_stats(precision.device)

    def finish(model: nn.Module, hist: History) -> dict:
        peak = float(torch.cuda.max_memory_allocated(precision.device)) if cuda else math.nan
        test = evaluate(model, task.test, precision) if task.test is not None else math.nan
        return {"test_loss": test, "peak_memory": peak}

    trained = train_once(
        f"{name}_seed{seed}_lr{config.lr:g}", model, lambda: task.batches(seed), task.valid, config, precision,
        checkpoints=checkpoints, fresh=fresh, finish=finish, reuse_only=reuse_only,
        key=stored_key(key, task.key, scored=task.test is not None), groups=groups(name, model),
        loss_fn=task.loss_fn, eval_loss_fn=task.eval_loss_fn, desc=f"{name} seed {seed} lr {config.lr:g}",
        progress=progress, log_dir=log_dir / f"{name}_seed{seed}" if log_dir else None)
    if trained is None:
        return None
    hist, origin, extras = trained
    return Run(name, seed, count_params(model), hist, extras["test_loss"], model, flops, extras["peak_memory"],
               task.tokens_per_step, config.lr, origin)


def train_once(tag: str, model: nn.Module, batches: Callable[[], Iterator], valid: Sequence, config: TrainConfig,
               precision: Precision, *, checkpoints: Path | None = None, fresh: bool = False,
               key: Mapping | None = None, finish: Callable[[nn.Module, History], dict] | None = None,
               reuse_only: bool = False, **train_kwargs) -> tuple[History, str, dict] | None:
    """Train the (seeded, built) ``model`` on ``batches()`` with odebook.training.train.train — or, with
    ``checkpoints``, resume it from ``<tag>.pt`` or take it finished from ``<tag>.done.pt`` when its fingerprint
    (``key``, ``tag``, the model's repr, ``config``, the study's science code) matches (the module docstring).
    ``finish(model, history)`` gives what is stored beside the finished weights (e.g. a test score) and returned again
    on reuse. Returns (history, origin, what ``finish`` gave); with ``reuse_only``, None instead of training when there
    is no finished run to take."""
    fingerprint = run_fingerprint(model=model, config=config, key=key, tag=tag)
    done = checkpoints / f"{tag}.done.pt" if checkpoints else None
    partial = checkpoints / f"{tag}.pt" if checkpoints else None
    if done and not fresh and done.is_file() and (state := ckpt.load(done))["fingerprint"] == fingerprint:
        model.load_state_dict(state["model"])
        return History(**state["history"]), "reused", state["extras"]
    if reuse_only:
        return None
    if fresh and partial:
        ckpt.remove(partial)
    hist = train(model, batches(), valid, config, precision, checkpoint=partial, fingerprint=fingerprint,
                 **train_kwargs)
    extras = finish(model, hist) if finish else {}
    if done:
        ckpt.save(done, {"fingerprint": fingerprint, "model": model.state_dict(), "history": hist.to_dict(),
                         "extras": extras})
        ckpt.remove(partial)
    return hist, f"resumed at step {hist.resumed_at}" if hist.resumed_at else "trained", extras


def run_seeds(builders: Mapping[str, Callable[[], nn.Module]], task: Task | Mapping[str, Task],
              config: TrainConfig | Mapping[str, TrainConfig], precision: Precision, *, seeds: Sequence[int],
              groups: Groups = _default_groups, progress: bool = True, log_dir: Path | None = None,
              done: Sequence[Run] = (), checkpoints: Path | None = None, fresh: bool = False,
              key: Mapping | None = None, executor: Executor | None = None,
              keep: bool | Collection[tuple[str, int]] = True) -> list[Run]:
    """For each seed and each model: seed, build, train on ``task`` (odebook.study.task), score it — the test split
    once, and ``task.score(run)`` into ``run.scores``. Returns the runs in that order. ``task`` and ``config`` may be
    one per model (e.g. each model's regime, each model's chosen lr); runs already in ``done`` (same model and seed)
    are reused. ``groups(name, model)`` names the parameter groups whose gradient norms are recorded. With
    ``log_dir``, each run writes TensorBoard logs to <log_dir>/<model>_seed<seed>. ``keep`` False lets go of every
    scored run's model (``run.module`` None), a collection of (model, seed) of all but those runs' models. The runs
    are jobs of ``executor`` (odebook.training.executor; default ``Local()``: here, one after another, or one per GPU
    on a machine with several); each is scored where it ran and its model comes back to ``precision.device``."""
    reuse = {(r.model, r.seed): r for r in done}
    todo = [(name, seed) for seed in seeds for name in builders if (name, seed) not in reuse]

    def job(name: str, seed: int) -> _Job:
        cfg = config[name] if isinstance(config, Mapping) else config
        tsk = task[name] if isinstance(task, Mapping) else task

        def make(prec: Precision, reuse_only: bool) -> Run | None:
            run = run_one(name, builders[name], seed, tsk, cfg, prec, groups=groups, progress=progress,
                          log_dir=log_dir, checkpoints=checkpoints, fresh=fresh, key=key, reuse_only=reuse_only)
            return None if run is None else _home(_scored(run, tsk, prec, keep), precision)
        return _Job(make)

    ran = dict(zip(todo, (executor or Local()).run([job(*t) for t in todo], precision)))
    return [reuse.get((name, seed)) or ran[name, seed] for seed in seeds for name in builders]


@dataclass(frozen=True)
class _Job:
    """One run as a job of an executor (odebook.training.executor): ``make(precision, reuse_only)`` trains it, or
    with ``reuse_only`` takes it finished from its checkpoint (None when it is not there)."""

    make: Callable[[Precision, bool], Run | None]

    def __call__(self, precision: Precision) -> Run | None:
        return self.make(precision, False)

    def finished(self, precision: Precision) -> Run | None:
        return self.make(precision, True)


def _home(run: Run, precision: Precision) -> Run:
    """``run`` with its model (if kept) on ``precision.device`` (a run made on another device comes back)."""
    if run.module is not None:
        run.module.to(precision.device)
    return run


def _scored(run: Run, task: Task, precision: Precision, keep: bool | Collection[tuple[str, int]] = True) -> Run:
    """``run`` with its test split scored (when the task has one and it is not yet), ``task.score(run)`` in
    ``run.scores`` (when not yet), and its model let go of unless ``keep`` (run_seeds') keeps it."""
    if task.test is not None and math.isnan(run.test_loss):
        run.test_loss = evaluate(run.module, task.test, precision)
    if task.score is not None and run.scores is None:
        run.scores = task.score(run)
    if not (keep is True or (keep is not False and (run.model, run.seed) in keep)):
        run.module = None
    return run


def tune_lr(builders: Mapping[str, Callable[[], nn.Module]], task: Task, config: TrainConfig, precision: Precision,
            *, lrs: Sequence[float], seeds: Sequence[int], progress: bool = True, checkpoints: Path | None = None,
            fresh: bool = False, key: Mapping | None = None, executor: Executor | None = None,
            max_extensions: int = 0, tie: float = 0.0) -> tuple[dict[str, float], pd.DataFrame, list[Run]]:
    """The book's one tuning rule, the same for every arm: train each model at each lr in ``lrs`` on every one of
    the tuning ``seeds`` and choose the lr with the lowest mean final validation loss over them, or the middle one of
    the rates within ``tie`` of that loss (``lr_grid.choose``; a rate at which the loss diverges on any seed counts as
    infinite). A model whose choice lies at an edge of what it tried trains one grid step beyond that edge, at most
    ``max_extensions`` times (study.lr_grid; ``lr_grid.check_tried`` on the table says which choices stayed untuned).
    Neither the test split nor ``task.score`` is scored here. Returns the chosen lr per model, the grid's table (model
    × lr → mean final validation loss; NaN where a model did not try that lr) and the chosen runs, one per tuning seed
    (never scored: no tuning run is a confirmatory one). Run by ``executor`` as ``run_seeds``."""
    tuning, seeds = dataclasses.replace(task, test=None), [int(s) for s in seeds]
    if not seeds or len(set(seeds)) != len(seeds):
        raise ValueError(f"tuning needs at least one seed, each once; got {seeds}")

    def job(name: str, lr: float, seed: int) -> _Job:
        def make(prec: Precision, reuse_only: bool) -> Run | None:
            try:
                run = run_one(name, builders[name], seed, tuning, dataclasses.replace(config, lr=lr), prec,
                              progress=progress, checkpoints=checkpoints, fresh=fresh, key=key, reuse_only=reuse_only)
            except DivergenceError:  # a rate too high for this model: it cannot be chosen
                return None
            return None if run is None else _home(run, precision)
        return _Job(make)

    results: dict[tuple[str, float, int], Run | None] = {}
    todo = [(name, float(lr)) for name in builders for lr in lrs]
    while todo:
        jobs = [(name, lr, seed) for name, lr in todo for seed in seeds]
        results.update(zip(jobs, (executor or Local()).run([job(*g) for g in jobs], precision)))
        rows = [{"model": name, "lr": lr, "val_loss": run.history.final_eval_loss if run else math.inf}
                for (name, lr, _), run in results.items()]
        table = (pd.DataFrame(rows).groupby(["model", "lr"]).val_loss.mean().unstack().loc[list(builders)]
                 .rename_axis(columns="lr"))
        chosen = {name: choose(table.loc[name], tie=tie) for name in builders}
        tried = {name: sorted({lr for (n, lr, _) in results if n == name}) for name in builders}
        todo = [(name, c.value) for name, c in check_tried(tried, chosen, lrs, max_extensions=max_extensions).items()
                if c.action == "extend"] if max_extensions > 0 else []
    return chosen, table, [r for r in results.values() if r is not None and r.lr == chosen[r.model]]


def tune_then_run(builders: Mapping[str, Callable[[], nn.Module]], task: Task, config: TrainConfig,
                  precision: Precision, *, lrs: Sequence[float], plan: SeedPlan, progress: bool = True,
                  checkpoints: Path | None = None, fresh: bool = False, key: Mapping | None = None,
                  executor: Executor | None = None, max_extensions: int = 0,
                  **options) -> tuple[list[Run], pd.DataFrame, dict[str, float]]:
    """Each model's lr chosen on the plan's tuning seeds (``SeedPlan.tuning``: past every confirmatory seed;
    ``tune_lr``: validation only, extending the grid past an edge choice at most ``max_extensions`` times), then
    every confirmatory seed run at the chosen rate (``run_seeds``; ``options`` pass on to it): no tuning run is a
    confirmatory run. Returns the runs, the grid's table and the chosen lr per model."""
    shared = dict(progress=progress, checkpoints=checkpoints, fresh=fresh, key=key, executor=executor)
    chosen, table, _ = tune_lr(builders, task, config, precision, lrs=lrs, seeds=plan.tuning,
                               max_extensions=max_extensions, **shared)
    configs = {name: dataclasses.replace(config, lr=chosen[name]) for name in builders}
    runs = run_seeds(builders, task, configs, precision, seeds=plan.seeds, **shared, **options)
    return runs, table, chosen


def summarize(runs: Sequence[Run]) -> pd.DataFrame:
    """One row per model: parameters, lr, how its runs came about (trained, resumed, reused), final validation loss
    and perplexity (mean and 95 % t-interval over seeds), test loss (mean and interval), ms/step (median over seeds),
    tokens/s, FLOPs per forward pass, peak memory, and the training steps skipped for non-finite gradients (summed over
    seeds)."""
    rows = []
    for name in dict.fromkeys(r.model for r in runs):
        rs = [r for r in runs if r.model == name]
        val = mean_ci([r.history.final_eval_loss for r in rs])
        test = mean_ci([r.test_loss for r in rs])
        rows.append({"model": name, "params": rs[0].n_params, "seeds": len(rs), "lr": rs[0].lr,
                     "runs": ", ".join(f"{n} {o}" for o, n in Counter(r.origin for r in rs).items()),
                     "val_loss": val.mean, "val_loss_lo": val.low, "val_loss_hi": val.high,
                     "val_ppl": math.exp(val.mean), "test_loss": test.mean, "test_loss_lo": test.low,
                     "test_loss_hi": test.high, "test_ppl": math.exp(test.mean),
                     "ms_per_step": statistics.median(r.ms_per_step for r in rs),
                     "tokens_per_s": statistics.median(1000 * (r.tokens_per_step or math.nan) / r.ms_per_step
                                                       for r in rs),
                     "gflops_per_forward": rs[0].flops_per_forward / 1e9,
                     "peak_memory_mb": max(r.peak_memory for r in rs) / 2**20,
                     "skipped_steps": sum(len(r.history.skipped_steps) for r in rs)})
    return pd.DataFrame(rows).set_index("model")


def compare_to(runs: Sequence[Run], reference: str, metric=lambda r: r.test_loss) -> pd.DataFrame:
    """Each model against ``reference`` on ``metric`` (default: the test loss, scored once), paired by seed (the
    seed fixes the batch stream): mean difference with its 95 % t-interval, paired t and p (uncorrected), d_z."""
    by_model = {name: {r.seed: metric(r) for r in runs if r.model == name}
                for name in dict.fromkeys(r.model for r in runs)}
    ref = by_model[reference]
    rows = []
    for name, values in by_model.items():
        seeds = sorted(set(values) & set(ref))
        t = paired_test([values[s] for s in seeds], [ref[s] for s in seeds], claim="below")
        rows.append({"model": name, f"diff_vs_{reference}": t.interval.mean, "diff_lo": t.interval.low,
                     "diff_hi": t.interval.high, "paired_t": t.t, "p_value": t.p, "d_z": t.dz})
    return pd.DataFrame(rows).set_index("model")


def loss_at_depth(run: Run, steps: int, batches: Sequence, precision: Precision) -> float:
    """Held-out loss of a trained depth-shared model re-discretised to ``steps`` depth steps (then restored)."""
    stack = run.module.blocks[0]
    trained, stack.steps = stack.steps, steps
    try:
        return evaluate(run.module, batches, precision)
    finally:
        stack.steps = trained


def loss_with_solver(model: nn.Module, solver: str, steps: int, batches: Sequence, precision: Precision) -> float:
    """Held-out loss of a trained ODE hybrid with its flow re-solved by ``solver`` in ``steps`` fixed-grid steps
    (dopri5 ignores ``steps``), then restored. The change goes through ``ODEFlowBlock.set_solver``, the rule that
    validated the block: a solver its sensitivity rules out is refused (ValueError) and the model left as it was."""
    blocks = ode_blocks(model)
    trained = [(b.solver, b.steps) for b in blocks]
    try:
        for b in blocks:
            b.set_solver(solver, steps)
        return evaluate(model, batches, precision)
    finally:
        for b, (s, n) in zip(blocks, trained):
            b.set_solver(s, n)


def grad_ratios(runs: Sequence[Run], arm: str, reference: str, group: str) -> list[float]:
    """Per seed: the mean gradient norm of ``group`` over the steps ``arm`` took, over the same for ``reference``
    (seeds share the batch stream, so the ratio is paired)."""
    ref = {r.seed: r for r in runs if r.model == reference}
    return [statistics.fmean(r.history.grad_norm[group]) / statistics.fmean(ref[r.seed].history.grad_norm[group])
            for r in runs if r.model == arm and r.seed in ref]
