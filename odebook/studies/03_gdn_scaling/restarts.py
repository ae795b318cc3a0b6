"""Study 03's restart rule, declared before the runs: an MQAR run that did not learn is trained again from a fresh
initialisation on the same training stream, at most ``restarts`` times, and the last run is kept.

Whether a run learned is its arm's own learned gate (``capacity.Arms.learned``) read on validation data, never on the
scoring sets the gates and claims read: for an arm that binds, first-query accuracy at the fewest pairs on a
validation series of first-query sequences (``with_rule``: a generator of their own) above that series' best
non-binder by the margin; for a no-state control, accuracy over every query on the validation set at the fewest pairs
above chance by the margin. So the rule is the same for every arm, and an arm that passes it needs no restart. Restart
``r`` of seed ``s`` initialises from ``s + INIT_STRIDE · r`` and trains on seed ``s``'s stream, so the arms of a seed
still pair; learning-rate tuning has no restarts. ``Restarts.log`` keeps every run tried — the restarts are a result
the report shows, beside the verdicts that read the kept runs.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Collection, Mapping, Sequence

import numpy as np
import pandas as pd
import torch

from odebook.data import mqar
from odebook.study import recall
from odebook.study.experiment import Run, run_seeds, tune_lr
from odebook.study.looks import Looked, run_in_looks
from odebook.study.lr_grid import GridChoice, annotate

from .capacity import Arms

__all__ = ["INIT_STRIDE", "CHECK_SEED", "with_rule", "Restarts", "tune_then_look"]

INIT_STRIDE = 1000  # restart r of seed s initialises from s + INIT_STRIDE * r
CHECK_SEED = 1  # the check sets' generator: eval_seed + seed + CHECK_SEED (the scoring sets': eval_seed + seed)


def _check_name(k: int) -> str:
    return f"check: {recall.first_name(k)}"


def with_rule(p, arms: Arms, task, vocab: mqar.Vocab, device: torch.device) -> tuple[object, Restarts]:
    """``task`` whose scores also hold each run's first-query accuracy at the fewest pairs on the rule's validation
    series (drawn apart from the scoring sets, the validation sets and every training stream), and the rule (at most
    ``p.mqar_restarts`` restarts) against that series' best non-binder."""
    few = min(arms.ks)
    (check,) = recall.scoring_sets(vocab=vocab, ks=[few], batch_size=p.mqar_batch_size, seq_len=p.mqar_seq_len,
                                   power_a=p.mqar_power_a, seed=p.eval_seed + p.seed + CHECK_SEED).values()

    def score(run) -> dict[str, float]:
        return task.score(run) | {_check_name(few): recall.first_accuracy(run.module, check, device)}

    non_binder = float(np.mean([recall.non_binder(b, vocab) for b in check]))
    return dataclasses.replace(task, score=score), Restarts(arms, non_binder, mqar.chance(vocab), p.mqar_restarts)


def _reinitialised(build: Callable, restart: int):
    torch.manual_seed(torch.initial_seed() + INIT_STRIDE * restart)  # run_one seeded the generators with the seed
    return build()


@dataclasses.dataclass
class Restarts:
    """``run_seeds`` with the rule: called as ``run_seeds`` is, it runs every arm on the seeds, then trains each new
    run that did not learn again, at most ``restarts`` times; ``log`` holds every run tried."""

    arms: Arms
    check_non_binder: float
    chance: float
    restarts: int
    log: list[dict] = dataclasses.field(default_factory=list)

    def gate(self, run: Run) -> float:
        """The run's learned gate read on validation data (its arm's accuracy above the best non-binder, or above
        chance): the run learned when this exceeds the margin."""
        few = min(self.arms.ks)
        if run.model.startswith("no state"):
            return run.scores[f"k={few}"] - self.chance
        return run.scores[_check_name(few)] - self.check_non_binder

    def unit(self, arm: str, arms: Collection[str]) -> tuple[str, ...]:
        """The arms that restart together: a GDN stack and its no-state control (a seed gives them the same initial
        weights, and a restart gives them the same new ones), or the arm alone."""
        heads = arm.rsplit(" ", 1)[-1]
        pair = tuple(name for name in (f"gdn {heads}", f"no state {heads}") if name in arms)
        return pair if arm in pair else (arm,)

    def _note(self, run: Run, restart: int) -> dict:
        few, most = min(self.arms.ks), max(self.arms.ks)
        bound = {f"binding k={k}": run.scores[recall.first_name(k)] - run.scores[recall.first_name(k, rebound=True)]
                 for k in (few, most)}
        gate = self.gate(run)
        return {"arm": run.model, "seed": run.seed, "restart": restart, "gate": gate,
                "learned": gate > self.arms.margin, **bound}

    def __call__(self, builders, task, configs, precision, *, seeds, done=(), **options) -> list[Run]:
        runs = run_seeds(builders, task, configs, precision, seeds=seeds, done=done, **options)
        new = {(r.model, r.seed): r for r in runs if not any(r is d for d in done)}
        for unit, seed in dict.fromkeys((self.unit(arm, builders), seed) for arm, seed in new):
            members = {arm: new[arm, seed] for arm in unit}
            for restart in range(self.restarts + 1):
                notes = [self._note(run, restart) for run in members.values()]
                self.log += notes
                if all(n["learned"] for n in notes) or restart == self.restarts:
                    break
                names = {f"{arm} restart {restart + 1}": arm for arm in unit}
                fresh = {n: functools.partial(_reinitialised, builders[a], restart + 1) for n, a in names.items()}
                again = run_seeds(fresh, task, {n: configs[a] for n, a in names.items()}, precision, seeds=[seed],
                                  **options)
                members = {names[r.model]: dataclasses.replace(r, model=names[r.model],
                                                               origin=f"{r.origin}, restart {restart + 1}")
                           for r in again}
            new.update({(arm, seed): run for arm, run in members.items()})
        return [new.get((r.model, r.seed), r) for r in runs]

    def table(self) -> pd.DataFrame:
        """Per arm and seed: the restarts it took, and at each try its gate on validation data and its binding at the
        fewest and the most pairs (on the scoring sets)."""
        if not self.log:
            return pd.DataFrame()
        tries = pd.DataFrame(self.log).groupby(["arm", "seed"], sort=False)
        listed = {c: (c, lambda v: ", ".join(f"{x:.3f}" for x in v)) for c in self.log[0] if c.startswith("binding")}
        return tries.agg(restarts=("restart", "max"), learned=("learned", "last"),
                         gates=("gate", lambda v: ", ".join(f"{x:.3f}" for x in v)), **listed)


def tune_then_look(builders: Mapping[str, Callable], task, config, precision, claims, values_of, *, rule: Restarts,
                   lrs: Sequence[float], plan, alpha: float, max_extensions: int, run_only: Mapping,
                   **options) -> tuple[Looked, pd.DataFrame, dict[str, GridChoice]]:
    """``looks.tune_then_look`` with the restart rule in the looks' runs (tuning has none): each arm's rate by the
    book's one rule on the plan's tuning seeds, then every arm at its rate on the plan's seeds in looks."""
    chosen, table, _ = tune_lr(builders, task, config, precision, lrs=lrs, seeds=plan.tuning,
                               max_extensions=max_extensions, **options)
    status = annotate(table, chosen, lrs, max_extensions=max_extensions)
    configs = {name: dataclasses.replace(config, lr=chosen[name]) for name in builders}
    run = functools.partial(rule, builders, task, configs, precision, **options, **run_only)
    return run_in_looks(run, claims, values_of, plan=plan, alpha=alpha), table, status
