"""Train a set of models over several seeds on one corpus, the same way for every study.

Every model sees the same training batches for a given seed (the batch stream is seeded by the seed, not by the
model), is evaluated at intervals on one fixed list of validation batches, and is scored once at the end on a fixed
list of test batches.

With a checkpoint folder, each (model, seed) run keeps ``<model>_seed<seed>.pt`` while it trains (resumed after an
interruption) and ``<model>_seed<seed>.done.pt`` once finished (reused by a re-run), both keyed by a fingerprint of
the run's configuration; ``fresh`` ignores them. ``Run.origin`` says which runs were trained, resumed or reused.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch
from torch import nn

from odebook import checkpoint as ckpt
from odebook.data import TokenSplits, fixed_batches, random_batches
from odebook.flops import forward_flops
from odebook.models import count_params, ode_blocks, param_groups
from odebook.runtime import Precision, seed_everything
from odebook.stats import mean_ci, welch
from odebook.train import History, TrainConfig, evaluate, train

__all__ = ["Run", "run_seeds", "summarize", "compare_to", "loss_at_depth", "loss_with_solver", "WARMUP_STEPS"]

WARMUP_STEPS = 5  # step times of the first steps (allocator, caches) are left out of ms/step


@dataclass
class Run:
    model: str
    seed: int
    n_params: int
    history: History
    test_loss: float
    module: nn.Module
    flops_per_forward: int  # one forward pass of one batch
    peak_memory: float  # bytes allocated at the peak of training (CUDA); NaN on CPU, where torch does not track it
    tokens_per_step: int
    origin: str = "trained"  # or "resumed at step k", "reused" (see run_seeds' checkpoints)

    @property
    def ms_per_step(self) -> float:
        times = self.history.step_time[WARMUP_STEPS:] or self.history.step_time
        return 1000 * statistics.median(times)

    @property
    def train_seconds(self) -> float:
        return sum(self.history.step_time)

    def record(self) -> dict:
        """What results.json keeps of a run: model, seed, parameter count, test loss and the whole history."""
        return {"model": self.model, "seed": self.seed, "params": self.n_params, "test_loss": self.test_loss,
                "origin": self.origin, "history": self.history.to_dict()}


def run_seeds(builders: Mapping[str, Callable[[], nn.Module]], splits: TokenSplits, config: TrainConfig,
              precision: Precision, *, seeds: Sequence[int], batch_size: int, seq_len: int, eval_batches: int,
              progress: bool = True, log_dir: Path | None = None, checkpoints: Path | None = None,
              fresh: bool = False, key: Mapping | None = None) -> list[Run]:
    """For each seed and each model: seed, build, train, evaluate once on test. Returns the runs in that order.
    With ``log_dir``, each run writes TensorBoard logs to <log_dir>/<model>_seed<seed>; with ``checkpoints``, runs
    are resumed and reused as the module docstring says."""
    valid = fixed_batches(splits.valid, eval_batches, batch_size, seq_len)
    test = fixed_batches(splits.test, eval_batches, batch_size, seq_len)
    cuda = precision.device.type == "cuda"
    runs = []
    for seed in seeds:
        for name, build in builders.items():
            seed_everything(seed)
            model = build().to(precision.device)
            flops = forward_flops(model, valid[0][0].to(precision.device))
            tag = f"{name}_seed{seed}"
            fp = ckpt.fingerprint(key=key, data=splits.description, model=name, seed=seed, arch=repr(model),
                                  train=config, batch=(batch_size, seq_len, eval_batches))
            done = checkpoints / f"{tag}.done.pt" if checkpoints else None
            if done and not fresh and done.is_file() and (state := ckpt.load(done))["fingerprint"] == fp:
                model.load_state_dict(state["model"])
                runs.append(Run(name, seed, count_params(model), History(**state["history"]), state["test_loss"],
                                model, flops, state["peak_memory"], batch_size * seq_len, "reused"))
                continue
            partial = checkpoints / f"{tag}.pt" if checkpoints else None
            if fresh and partial:
                partial.unlink(missing_ok=True)
            if cuda:
                torch.cuda.reset_peak_memory_stats(precision.device)
            hist = train(model, random_batches(splits.train, batch_size, seq_len, seed=seed), valid, config,
                         precision, groups=param_groups(model), desc=f"{name} seed {seed}", progress=progress,
                         log_dir=log_dir / tag if log_dir else None, checkpoint=partial, fingerprint=fp)
            peak = float(torch.cuda.max_memory_allocated(precision.device)) if cuda else math.nan
            origin = f"resumed at step {hist.resumed_at}" if hist.resumed_at else "trained"
            run = Run(name, seed, count_params(model), hist, evaluate(model, test, precision), model, flops, peak,
                      batch_size * seq_len, origin)
            if done:
                ckpt.save(done, {"fingerprint": fp, "model": model.state_dict(), "history": hist.to_dict(),
                                 "test_loss": run.test_loss, "peak_memory": peak})
                partial.unlink(missing_ok=True)
            runs.append(run)
    return runs


def summarize(runs: Sequence[Run]) -> pd.DataFrame:
    """One row per model: parameters, how its runs came about (trained, resumed, reused), final validation loss and perplexity (mean and 95 % t-interval over seeds),
    test loss, ms/step (median over seeds), tokens/s, FLOPs per forward pass and peak memory."""
    rows = []
    for name in dict.fromkeys(r.model for r in runs):
        rs = [r for r in runs if r.model == name]
        val = mean_ci([r.history.final_eval_loss for r in rs])
        test = mean_ci([r.test_loss for r in rs])
        rows.append({"model": name, "params": rs[0].n_params, "seeds": len(rs),
                     "runs": ", ".join(f"{n} {o}" for o, n in Counter(r.origin for r in rs).items()),
                     "val_loss": val.mean, "val_loss_lo": val.low, "val_loss_hi": val.high,
                     "val_ppl": math.exp(val.mean), "test_loss": test.mean, "test_ppl": math.exp(test.mean),
                     "ms_per_step": statistics.median(r.ms_per_step for r in rs),
                     "tokens_per_s": statistics.median(1000 * r.tokens_per_step / r.ms_per_step for r in rs),
                     "gflops_per_forward": rs[0].flops_per_forward / 1e9,
                     "peak_memory_mb": max(r.peak_memory for r in rs) / 2**20})
    return pd.DataFrame(rows).set_index("model")


def compare_to(runs: Sequence[Run], reference: str, metric=lambda r: r.history.final_eval_loss) -> pd.DataFrame:
    """Each model against ``reference`` on ``metric`` (default: final validation loss): difference of means,
    Welch's t and p, Cohen's d."""
    by_model = {name: [metric(r) for r in runs if r.model == name] for name in dict.fromkeys(r.model for r in runs)}
    rows = []
    for name, values in by_model.items():
        c = welch(values, by_model[reference])
        rows.append({"model": name, f"diff_vs_{reference}": c.diff, "welch_t": c.t, "p_value": c.p, "cohens_d": c.d})
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
    (dopri5 ignores ``steps``), then restored."""
    blocks = ode_blocks(model)
    trained = [(b.solver, b.steps) for b in blocks]
    for b in blocks:
        b.solver, b.steps = solver, steps
    try:
        return evaluate(model, batches, precision)
    finally:
        for b, (s, n) in zip(blocks, trained):
            b.solver, b.steps = s, n
