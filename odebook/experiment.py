"""Train a set of models over several seeds on one corpus, the same way for every study.

Every model sees the same training batches for a given seed (the batch stream is seeded by the seed, not by the
model), is evaluated at intervals on one fixed list of validation batches, and is scored once at the end on a fixed
list of test batches.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import pandas as pd
from torch import nn

from odebook.data import TokenSplits, fixed_batches, random_batches
from odebook.models import count_params, param_groups
from odebook.precision import Precision, seed_everything
from odebook.stats import mean_ci
from odebook.train import History, TrainConfig, evaluate, train

__all__ = ["Run", "run_seeds", "summarize", "WARMUP_STEPS"]

WARMUP_STEPS = 5  # step times of the first steps (allocator, caches) are left out of ms/step


@dataclass
class Run:
    model: str
    seed: int
    n_params: int
    history: History
    test_loss: float
    module: nn.Module

    @property
    def ms_per_step(self) -> float:
        times = self.history.step_time[WARMUP_STEPS:] or self.history.step_time
        return 1000 * statistics.median(times)


def run_seeds(builders: Mapping[str, Callable[[], nn.Module]], splits: TokenSplits, config: TrainConfig,
              precision: Precision, *, seeds: Sequence[int], batch_size: int, seq_len: int, eval_batches: int,
              progress: bool = True) -> list[Run]:
    """For each seed and each model: seed, build, train, evaluate once on test. Returns the runs in that order."""
    valid = fixed_batches(splits.valid, eval_batches, batch_size, seq_len)
    test = fixed_batches(splits.test, eval_batches, batch_size, seq_len)
    runs = []
    for seed in seeds:
        for name, build in builders.items():
            seed_everything(seed)
            model = build().to(precision.device)
            hist = train(model, random_batches(splits.train, batch_size, seq_len, seed=seed), valid, config,
                         precision, groups=param_groups(model), desc=f"{name} seed {seed}", progress=progress)
            runs.append(Run(name, seed, count_params(model), hist, evaluate(model, test, precision), model))
    return runs


def summarize(runs: Sequence[Run]) -> pd.DataFrame:
    """One row per model: parameters, final validation loss and perplexity (mean and 95 % t-interval over seeds),
    test loss, ms/step."""
    rows = []
    for name in dict.fromkeys(r.model for r in runs):
        rs = [r for r in runs if r.model == name]
        val = mean_ci([r.history.final_eval_loss for r in rs])
        test = mean_ci([r.test_loss for r in rs])
        rows.append({"model": name, "params": rs[0].n_params, "seeds": len(rs),
                     "val_loss": val.mean, "val_loss_lo": val.low, "val_loss_hi": val.high,
                     "val_ppl": math.exp(val.mean), "test_loss": test.mean, "test_ppl": math.exp(test.mean),
                     "ms_per_step": statistics.median(r.ms_per_step for r in rs)})
    return pd.DataFrame(rows).set_index("model")
