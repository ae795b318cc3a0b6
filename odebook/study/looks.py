"""A study's seeds in looks: run every arm a look at a time until the primary claims stop, then settle each claim.

``run_in_looks`` runs the first look's seeds, asks ``sequential.decide_all`` whether every primary claim has
stopped (efficacy, futility, or the cap), and runs the next look's new seeds only when one has not — the seeds that
ran are kept, so a look costs only its new seeds. The verdicts: the primary claims take their sequential decision
(efficacy → held or equivalent, futility → not held, the cap → inconclusive with the seeds a fixed study at their
level would need); gates, descriptive and secondary claims are settled by ``claims.settle`` on every seed that ran.
With no interim looks the study runs its seeds at once and ``claims.settle`` decides everything (Holm over the
primaries). With looks, each of the m primary claims is decided at α/m (Bonferroni: the sequential stand-in for
Holm, which would need a group-sequential Holm procedure). When every primary claim rests on a gate (a calibration)
that has come out not held, the looks stop there and those claims read "not testable at this scale" with the gate's
numbers. The gate is a test with error: more seeds could move it, and a study that can afford them declares more
seeds before its first look, or the gate's own level (``Claim.alpha``). A claim whose negative control came out held
is void the same way (``void_by_controls``): its test called a difference built to be null an effect.
``tune_then_look`` puts a learning-rate grid on a tuning seed of its own in front of the looks: the study's runs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import pandas as pd

from odebook.params.seeds import SeedPlan
from odebook.study.claims import GATES, TESTED, Claim, Settled, seeds_needed, settle
from odebook.study.experiment import run_seeds, tune_lr
from odebook.study.lr_grid import GridChoice, annotate
from odebook.study.stats import NEEDS
from odebook.study.sequential import Decision, decide_all

__all__ = ["Looked", "run_in_looks", "tune_then_look", "settle_looked", "void_by_controls"]


@dataclass(frozen=True)
class Looked:
    """What the looks came to: every run, the primary claims' decisions (empty without interim looks), the
    verdicts, and the seeds that ran per arm."""

    runs: list
    decisions: dict[str, Decision]
    settled: list[Settled]
    seeds: int
    why: str = ""  # why the looks stopped where they did, in words (empty without looks)

    def markdown(self) -> str:
        """Why the study stopped, then the looks of each primary claim, as the report prints them."""
        return "\n\n".join([f"**{self.why}**"] * bool(self.why) +
                           [f"**{name}**\n\n{d.markdown()}" for name, d in self.decisions.items()])


def settle_looked(claims: Sequence[Claim], values: Mapping[str, Sequence[float]], decisions: Mapping[str, Decision],
                  *, alpha: float = 0.05, power: float = 0.8) -> list[Settled]:
    """``claims.settle``, with each primary claim that has a decision taking that decision's outcome."""
    out = []
    for s in settle(claims, values, alpha=alpha, power=power):
        d = decisions.get(s.claim.name)
        if d is None or s.claim.kind not in TESTED or s.outcome.startswith("not testable"):
            out.append(s)
            continue
        level, needs = alpha / len(decisions), (None, None)
        if d.action == "efficacy":
            outcome = "equivalent" if s.claim.kind == "equivalence" else "held"
        elif d.action == "futility":
            outcome = "not held"
        else:
            needs = seeds_needed(s.claim, s.tests, level, power)
            outcome = NEEDS.format(n=needs[0]) if needs[0] else "inconclusive"
        how = f"{d.action} at {d.n} seeds" if d.action != "cap" else f"no boundary crossed by the cap ({d.n} seeds)"
        if d.looks:  # the deciding look's p against its nominal level (a compound claim's parts: its looks table)
            last, (hold, fail) = d.looks[-1], s.claim.hypotheses()
            how += (f" (p = {last.p_hold:.3g} for {hold} against its nominal level {last.level_hold:.3g}, "
                    f"p = {last.p_fail:.3g} for {fail} against {last.level_fail:.3g})")
        out.append(replace(s, outcome=outcome, p_adjusted=math.nan, needs=needs,
                           family=f"primary, {len(decisions)} in looks at α/{len(decisions)} each",
                           note="; ".join(x for x in (f"looks: {how}", s.note if outcome == s.outcome else "") if x)))
    return out


def void_by_controls(settled: Sequence[Settled]) -> list[Settled]:
    """Each claim whose negative control (``Claim.controls``) came out held reads "not testable at this scale": the
    test that settled it called a difference built to be null an effect, so its outcome cannot be told from that
    test's error. The note names the control and keeps what the claim's own test said."""
    held = {s.claim.controls: s.claim.name for s in settled if s.claim.controls and s.outcome == "held"}
    return [replace(s, outcome="not testable at this scale", needs=(None, None),
                    note="; ".join(x for x in (f"void: its negative control held ({held[s.claim.name]!r}); as tested "
                                               f"it was {s.outcome}", s.note) if x))
            if s.claim.name in held else s for s in settled]


def run_in_looks(run: Callable[..., list], claims: Sequence[Claim],
                 values_of: Callable[[list], Mapping[str, Sequence[float]]], *, plan: SeedPlan,
                 alpha: float = 0.05, power: float = 0.8) -> Looked:
    """``run(seeds=…, done=…)`` runs every arm on ``seeds`` reusing the runs in ``done`` and returns all of them (e.g.
    ``functools.partial(experiment.run_seeds, builders, task, configs, precision, **options)``); ``values_of(runs)``
    gives each comparison's per-seed differences (``claims.paired``), in seed order. ``plan``: the study's seeds and
    looks (``Params.seed_plan``). A claim whose negative control held is void (``void_by_controls``)."""
    seeds, looks = plan.seeds, plan.looks
    if not looks:
        runs = run(seeds=seeds, done=[])
        return Looked(runs, {}, void_by_controls(settle(claims, values_of(runs), alpha=alpha, power=power)),
                      len(seeds))
    runs, n = [], looks[0]
    while True:
        runs = run(seeds=seeds[:n], done=runs)
        values = values_of(runs)
        action, next_n, decisions = decide_all(claims, values, plan.design, alpha=alpha)
        gated = action != "stop" and _gated_out(claims, values, alpha)
        if action == "stop" or gated:
            why = (f"Stopped at {n} of {len(seeds)} seeds: the gate every primary claim rests on came out not held, "
                   "so they read \"not testable at this scale\"; the looks below would have continued" if gated else
                   f"Stopped at {n} of {len(seeds)} seeds: every primary claim " +
                   ("had its decision by the cap" if n == len(seeds) else "crossed a boundary"))
            settled = settle_looked(claims, values, decisions, alpha=alpha, power=power)
            return Looked(runs, decisions, void_by_controls(settled), n, why)
        n = next_n


def tune_then_look(builders: Mapping[str, Callable], task, config, precision, claims: Sequence[Claim],
                   values_of: Callable[[list], Mapping[str, Sequence[float]]], *, lrs: Sequence[float],
                   plan: SeedPlan, alpha: float = 0.05, max_extensions: int = 0, tie: float = 0.0,
                   run_only: Mapping | None = None, **options) -> tuple[Looked, pd.DataFrame, dict[str, GridChoice]]:
    """Each arm's learning rate chosen on the plan's tuning seeds (``experiment.tune_lr`` on validation: the middle
    of the rates within ``tie`` of the lowest loss, extending the grid past an edge at most ``max_extensions`` times;
    ``lr_grid.annotate`` writes each choice and how its tuning ended beside the grid's table), then every arm at its
    rate on the plan's seeds in looks (``run_in_looks``).
    ``options`` pass on to the grid's runs and the study's alike, ``run_only`` (log_dir, keep, groups) to the study's.
    Returns the looks, the annotated grid table (its "chosen lr" column the rates) and each arm's ``GridChoice``."""
    chosen, table, _ = tune_lr(builders, task, config, precision, lrs=lrs, seeds=plan.tuning,
                               max_extensions=max_extensions, tie=tie, **options)
    status = annotate(table, chosen, lrs, max_extensions=max_extensions)
    configs = {name: replace(config, lr=chosen[name]) for name in builders}

    def run(*, seeds, done):
        return run_seeds(builders, task, configs, precision, seeds=seeds, done=done, **options, **(run_only or {}))

    return run_in_looks(run, claims, values_of, plan=plan, alpha=alpha), table, status


def _gated_out(claims: Sequence[Claim], values: Mapping[str, Sequence[float]], alpha: float) -> bool:
    """Every primary claim rests on a gate that came out not held on the seeds so far (the calibration failed):
    more seeds would be run for claims that read "not testable at this scale", so the looks stop."""
    primaries = [c for c in claims if c.primary and c.kind in TESTED]
    gates = {s.claim.name: s.outcome for s in settle([c for c in claims if c.kind in GATES], values, alpha=alpha)}
    return bool(primaries) and all(any(gates.get(g) == "not held" for g in c.rests_on) for c in primaries)
