"""Whether a size ladder can decide a scaling exponent: the power-law fit with an interval across seeds, and the
conditions under which the source's go / no-go rule on it means anything.

L(N) = a·N^(−α) + c has three parameters, so a ladder of n sizes leaves n − 3 residual degrees of freedom; the fit's
own interval on α (``stats.power_law_fit``) ignores how the per-size losses vary from seed to seed. ``seed_bootstrap``
refits on per-size means of seeds drawn with replacement, which carries that spread into α. ``decidable`` says
whether a ladder can apply the rule at all: at least ``MIN_DOF`` residual degrees of freedom, and every size trained
on at least ``MIN_TOKENS_PER_PARAMETER`` tokens per parameter — near the compute-optimal ratio (Hoffmann et al. 2022,
"Training compute-optimal large language models", arXiv:2203.15556, about 20 tokens per parameter). Below that ratio
the loss at each size is a point on its training curve rather than the size's loss, and α measures training time.

``run_ladder`` trains study 03's ladder (each series at each size, its rate chosen on a tuning seed of its own, then
every confirmatory seed); ``go_no_go`` applies the source's rule — go when α's interval across seeds clears 0.3,
no-go when it lies below 0.1 — where ``decidable`` lets it, and says what the ladder lacks where not.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from odebook.models.lm import block_params
from odebook.study.experiment import summarize, tune_then_run
from odebook.study.plan import Stage
from odebook.study.stats import Interval, PowerLaw, Verdict, decide, power_law_fit
from odebook.training.train import TrainConfig

__all__ = ["MIN_DOF", "MIN_TOKENS_PER_PARAMETER", "seed_bootstrap", "decidable", "size_name", "Ladder", "ladder_stage",
           "run_ladder", "go_no_go", "go_no_go_verdicts"]

MIN_DOF = 2
MIN_TOKENS_PER_PARAMETER = 20.0


def seed_bootstrap(n: Sequence[float], losses: Sequence[Sequence[float]], *, level: float = 0.95,
                   resamples: int = 500, seed: int = 0) -> Interval:
    """α fitted on the per-size mean losses, with a percentile interval from refits on means of seeds resampled with
    replacement at each size (``losses[i]``: the seeds' losses at size ``n[i]``). A refit that fails is left out."""
    rng = np.random.default_rng(seed)
    means = [float(np.mean(size)) for size in losses]
    alpha = power_law_fit(n, means).alpha
    boot = []
    for _ in range(resamples):
        resampled = [float(np.mean(rng.choice(np.asarray(size, dtype=float), size=len(size)))) for size in losses]
        try:
            boot.append(power_law_fit(n, resampled).alpha)
        except RuntimeError:  # curve_fit found no minimum for this resample
            continue
    tail = (1 - level) / 2
    low, high = (float(np.quantile(boot, q)) for q in (tail, 1 - tail)) if boot else (np.nan, np.nan)
    return Interval(alpha, low, high, min(len(size) for size in losses))


def decidable(n_sizes: int, tokens_per_parameter: Sequence[float]) -> str:
    """'' when a ladder can apply a rule on α, else what it lacks (and what it would take)."""
    lacks = []
    if n_sizes - 3 < MIN_DOF:
        lacks.append(f"{n_sizes} sizes leave {n_sizes - 3} residual degrees of freedom for a 3-parameter fit "
                     f"(needs ≥ {MIN_DOF + 3} sizes)")
    if min(tokens_per_parameter) < MIN_TOKENS_PER_PARAMETER:
        lacks.append(f"{min(tokens_per_parameter):.2g}–{max(tokens_per_parameter):.2g} tokens per parameter (needs "
                     f"≥ {MIN_TOKENS_PER_PARAMETER:g} at every size)")
    return "; ".join(lacks)


def size_name(p, i: int) -> str:
    """The ``i``-th size of ``p``'s ladder as width × GDN layers: "d128×1"."""
    return f"d{p.ladder_d[i]}×{p.ladder_layers[i]}"


@dataclass(frozen=True)
class Ladder:
    """The rate grid per series and size (``lr_choice``), one row per series and size (``table``: rate, tokens,
    non-embedding parameters, tokens per parameter and ``experiment.summarize``'s row), each size's final validation
    losses per seed (``losses``, keyed by series and size) and every run's record."""

    lr_choice: pd.DataFrame
    table: pd.DataFrame
    losses: dict[tuple[str, str], list[float]]
    records: list[dict]

    @classmethod
    def empty(cls) -> "Ladder":
        """No series run: no rates, no rows, no fits."""
        rates = pd.DataFrame(columns=["series", "size", "lr", "val_loss", "chosen"]).set_index(["series", "size", "lr"])
        return cls(rates, pd.DataFrame(columns=["series", "size"]).set_index(["series", "size"]), {}, [])

    def shown(self) -> pd.DataFrame:
        """The table's columns a reader compares across sizes."""
        return self.table[["lr", "tokens", "non-embedding params", "tokens per parameter", "seeds", "val_loss",
                           "val_loss_lo", "val_loss_hi", "val_ppl", "test_ppl", "ms_per_step"]]

    def fits(self) -> dict[str, PowerLaw]:
        """L(N) = a·N^(−α) + c per series, on non-embedding parameters and the mean validation loss at each size."""
        return {s: power_law_fit(rows["non-embedding params"].tolist(), rows["val_loss"].tolist())
                for s, rows in self.table.groupby(level="series", sort=False)}


def ladder_stage(p, task) -> Stage:
    """Every series of ``p`` at every size ("<series> <size>", its family the series) on the language-model ``task``:
    each on ``p.lr_grid`` on the tuning seeds, then every confirmatory seed at its rate."""
    arms = {f"{s} {size_name(p, i)}": p.size_config(i, s).build for s in p.series for i in range(len(p.ladder_d))}
    return Stage(arms, task, TrainConfig.from_params(p), p.n_seeds, p.lr_grid, tuning_seeds=p.tuning_seeds,
                 part="ladder", family={name: name.split(" ")[0] for name in arms})


def run_ladder(p, stage: Stage, precision, **options) -> Ladder:
    """``ladder_stage``'s sizes one at a time: the rate of its grid chosen on the seed plan's tuning seeds, then every
    confirmatory seed at it (``experiment.tune_then_run``). No series: an empty ladder (no runs, no fits)."""
    tokens = p.steps * p.batch_size * p.seq_len
    lr_rows, rows, losses, records = [], [], {}, []
    for name, build in stage.arms.items():
        s, size = name.split(" ", 1)
        runs, tried, chosen = tune_then_run({name: build}, stage.task, stage.config, precision, lrs=stage.lrs,
                                            plan=p.seed_plan, **options)
        lr_rows += [{"series": s, "size": size, "lr": lr, "val_loss": loss, "chosen": lr == chosen[name]}
                    for lr, loss in tried.loc[name].items()]
        records += [r.record() for r in runs]
        losses[s, size] = [r.history.final_eval_loss for r in runs]
        n = block_params(runs[0].module)
        rows.append({"series": s, "size": size, "lr": chosen[name], "tokens": tokens, "non-embedding params": n,
                     "tokens per parameter": tokens / n, **summarize(runs).iloc[0].to_dict()})
    if not rows:
        return Ladder.empty()
    return Ladder(pd.DataFrame(lr_rows).set_index(["series", "size", "lr"]),
                  pd.DataFrame(rows).set_index(["series", "size"]), losses, records)


def go_no_go(fit: PowerLaw, ladder: Ladder, series: str) -> tuple[str, str]:
    """The source's rule on α's 95 % interval across seeds (a bootstrap) for one series, where the ladder can apply it
    (``decidable``); otherwise "not testable at this scale", saying what it lacks. Returns the outcome and evidence."""
    rows = ladder.table.loc[series]
    boot = seed_bootstrap(rows["non-embedding params"].tolist(), [ladder.losses[series, size] for size in rows.index])
    evidence = (f"α = {fit.alpha:.3f}; across seeds (bootstrap) [{boot.low:.3f}, {boot.high:.3f}]; the fit's own "
                f"interval [{fit.alpha_low:.3f}, {fit.alpha_high:.3f}], {fit.n_points} sizes")
    lacks = decidable(fit.n_points, rows["tokens per parameter"].tolist())
    if lacks:
        return "not testable at this scale", f"{evidence}; {lacks}"
    go, stop = decide(boot, 0.3, claim="above"), decide(boot, 0.1, claim="below")
    return "held" if go == "held" else "not held" if stop == "held" else "inconclusive", evidence


def go_no_go_verdicts(fits: dict[str, PowerLaw], ladder: Ladder, p) -> list[Verdict]:
    """``go_no_go`` on each series' fit as a verdict, outside the families, at ``p``'s ladder's scale."""
    out = []
    for s, fit in fits.items():
        tpp = ladder.table.loc[s, "tokens per parameter"]
        outcome, evidence = go_no_go(fit, ladder, s)
        out.append(Verdict(f"go/no-go on the {s} ladder's scaling exponent: go (α > 0.3)", outcome, evidence,
                           f"{len(p.ladder_d)} sizes d {p.ladder_d}, {p.steps * p.batch_size * p.seq_len:,} tokens "
                           f"each ({tpp.min():.2g}–{tpp.max():.2g} per parameter), context {p.seq_len}",
                           "the source's rule on α's interval", "outside the families"))
    return out
