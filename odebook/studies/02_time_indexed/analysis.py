"""Time-indexed parameter sharing: study 02's declared claims, its learning-rate rule and the numbers its claims read.

Every loss claim compares two arms' test losses paired by seed, d = a − b, under a name in ``PAIRS``
("ti_mlp − standard"). ``declared_claims`` declares them before the runs — a **learned gate** for every arm a primary
or its control compares (its test loss below the unigram model's by more than ``LEARNED_MARGIN`` in every seed), three
primaries, each beside its negative control (a trained arm that differs only in what the claim is about: the TI-MLP's
twin, another initial draw, in place of the arm that should make the difference; for the SSM, ``ti_ssm_memoryless``,
the SSM without its state), the sources' numbers as descriptive rows that say what differs, and two more descriptive
lines — keeping those whose arms the profile trains.

**One tuning rule for every arm** (``tune_rates``): each arm's grid on the plan's tuning seeds, the lowest mean
validation loss choosing, the grid extended past an edge choice (``experiment.tune_lr``). The TI-MLP, its
constant-modulation ablation and its twin (``FAMILY``) differ only in what the claims test, so they share one rate,
chosen by the same rule on their mean. The earlier report's **one-standard-error rule** (``one_se``) is kept as a
sensitivity: the rates it would choose from the same table, and primary (1) re-run at them (``OLD_RULE``).

``design`` simulates the looks at the pilot's SDs (``PILOT_SD``); ``equal_time`` reads the SSM's validation curve at
the TI-MLP's training time, by the interleaved step-time ratio.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pandas as pd
import torch

from odebook.models.lm import block_params
from odebook.study.claims import Claim, Settled, negative_control, paired
from odebook.study.experiment import Run, by_seed, compare_to, run_seeds, summarize, tune_lr
from odebook.study.lr_grid import GridChoice, annotate, choose
from odebook.study.sequential import operating
from odebook.study.stats import Verdict
from odebook.study.timing import Timing, interleaved, training_step
from odebook.training.runtime import Precision

EQUAL_TIME = "equal time: ti_ssm − ti_mlp"
OLD_RULE = "one-standard-error rule: "  # the sensitivity rows' comparisons: OLD_RULE + "ti_mlp − standard"
PAIRS = {f"{a} − {b}": (a, b) for a, b in [("ti_mlp", "standard"), ("ti_mlp", "tong"), ("ti_mlp", "ti_mlp_constant"),
                                           ("ti_ssm", "ti_mlp"), ("ti_mlp", "ti_mlp_twin"),
                                           ("ti_ssm_memoryless", "ti_mlp"), ("ti_mlp_twin", "ti_mlp_constant"),
                                           ("ti_mlp_full", "standard"), ("ti_mlp_full", "tong"),
                                           ("ti_mlp_dt", "ti_mlp"), ("ode_shared", "standard")]}
PAIRS |= {EQUAL_TIME: ("ti_ssm", "ti_mlp")} | {OLD_RULE + part: PAIRS[part] for part in ("ti_mlp − standard",
                                                                                         "ti_mlp − tong")}
FAMILY = ("ti_mlp", "ti_mlp_constant", "ti_mlp_twin")  # one architecture but for what the claims test: one rate
LEARNED_MARGIN = 0.1  # nats below the unigram model's test loss that say an arm learned more than token frequencies
# The pilot: the committed cpu report of the one-standard-error design (seeds 200-211, d 64, 250 steps): the SD over
# seeds of each paired difference of test losses.
PILOT_SD = {"ti_mlp − standard": 0.0175, "ti_mlp − tong": 0.0191, "ti_mlp − ti_mlp_constant": 0.0129,
            "ti_ssm − ti_mlp": 0.0178, "ti_mlp − ti_mlp_twin": 0.0143}
# The one-standard-error rule's tolerance as that design fixed it: one model's loss on one seed, from the SD 0.0165 of
# the design before it (seeds 0-5) — its TI-MLP − constant-modulation SD (not, as it was labelled, two identical
# TI-MLPs') — over √2.
SE = 0.0165 / np.sqrt(2)


def learned(arm: str) -> str:
    """The comparison a learned gate reads: ``arm``'s test loss minus the unigram model's, per seed."""
    return f"{arm} − unigram"


def declared_claims(models: Sequence[str], margin: float) -> list[Claim]:
    """Study 02's claims, in the order the report prints them, those whose arms are all among ``models``: first the
    learned gate of each arm a primary or its negative control compares."""
    sup = functools.partial(Claim, kind="superiority", margin=margin, units="nats")
    gate = {a: Claim(f"learned: {a} — its test loss lies below the unigram model's by more than {LEARNED_MARGIN:g} "
                     "nats", "learned", -LEARNED_MARGIN, "lower", "nats", primary=False, parts=(learned(a),))
            for a in ("standard", "tong", "ti_mlp", "ti_mlp_constant", "ti_mlp_twin", "ti_ssm", "ti_ssm_memoryless")}

    def on(*arms):
        return tuple(gate[a].name for a in arms)

    beats = sup("the time-indexed MLP beats both the standard transformer and Tong's model",
                parts=("ti_mlp − standard", "ti_mlp − tong"), rests_on=on("ti_mlp", "standard", "tong"))
    matters = sup("time dependence changes the loss: the time-indexed MLP differs from constant modulation (t fixed)",
                  direction="two-sided", parts=("ti_mlp − ti_mlp_constant",), rests_on=on("ti_mlp", "ti_mlp_constant"))
    ssm = sup("the time-indexed SSM beats the time-indexed MLP (at equal steps)", parts=("ti_ssm − ti_mlp",),
              rests_on=on("ti_ssm", "ti_mlp"))

    def control(claim, part, what):
        return dataclasses.replace(negative_control(claim, part, what), rests_on=on(*PAIRS[part]))

    seed, fork = ("the seed's table (d 256; its 'standard' a 308.5M-parameter stack of Tong's hypernetwork blocks; "
                  "4× our t4 profile's tokens; the minimum over evaluations of a loss scored on the test split)"), (
        "the fork's ablation (one seed, lr 3e-4, d 256; the best validation loss over evaluations)")
    describe = functools.partial(Claim, kind="descriptive", units="nats", primary=False)
    declared = [
        *gate.values(),
        beats, control(beats, "ti_mlp − ti_mlp_twin", "the time-indexed MLP beats its twin (another draw)"),
        matters, control(matters, "ti_mlp − ti_mlp_twin", "the time-indexed MLP differs from its twin"),
        ssm, control(ssm, "ti_ssm_memoryless − ti_mlp", "the time-indexed SSM without its state (trained so) beats "
                     "the TI-MLP"),
        describe(f"the source's −0.136 nats against the standard transformer, from {seed}: the book's TI-MLP − "
                 "standard", parts=("ti_mlp − standard",)),
        describe(f"the source's −0.105 nats against Tong's model, from {seed}, where the time-indexed attention "
                 "appears to pool over future positions (the fork's scripts/test_time_indexed_weights.py): the "
                 "book's TI-MLP − Tong", parts=("ti_mlp − tong",)),
        describe(f"the fork's −0.013 nats from time dependence, from {fork}: the book's TI-MLP − constant "
                 "modulation", parts=("ti_mlp − ti_mlp_constant",)),
        describe("sensitivity: the first primary's comparisons under the earlier one-standard-error rule (the arms "
                 "whose rate it moves re-run at it)", parts=(OLD_RULE + "ti_mlp − standard",
                                                              OLD_RULE + "ti_mlp − tong")),
        sup("the published formula (a gate per weight) beats both the standard transformer and Tong's model",
            primary=False, parts=("ti_mlp_full − standard", "ti_mlp_full − tong")),
        sup("dt scaling helps the time-indexed MLP", primary=False, parts=("ti_mlp_dt − ti_mlp",)),
        sup("ODE integration with shared weights beats the standard transformer", primary=False,
            parts=("ode_shared − standard",)),
        describe("post hoc, after the first run: time dependence through the twin — the twin minus constant "
                 "modulation", parts=("ti_mlp_twin − ti_mlp_constant",)),
        describe("at equal training time: the SSM's validation loss at the TI-MLP's training time minus the TI-MLP's "
                 "final validation loss", parts=(EQUAL_TIME,)),
    ]
    kept = [c for c in declared if c.kind != "learned"
            and all(m in models for part in c.comparisons for m in PAIRS[part])]
    used = {g for c in kept for g in c.rests_on}
    return [c for c in declared if c.name in used] + kept


def design(claims: Sequence[Claim], looks: Sequence[int], *, margin: float, alpha: float) -> pd.DataFrame:
    """The design's power at the pilot's SDs (``sequential.operating``, normal differences): for each primary, the
    chance it decides for itself at d = −margin and against itself at d = 0 through ``looks`` at α / (number of
    primaries); for each negative control (settled once at α on the seeds the looks ran), the chance it comes out not
    held at d = 0 at each place the study can stop. Comparisons without a pilot SD are left out."""
    primaries = [c for c in claims if c.primary]
    level, rows = alpha / max(len(primaries), 1), []
    for c in [*primaries, *(c for c in claims if c.controls)]:
        for part in (part for part in c.comparisons if part in PILOT_SD):
            one, sd = dataclasses.replace(c, name=part, parts=(), controls=""), PILOT_SD[part]
            if c.controls:
                alone = [operating(one, [n], mean=0.0, sd=sd, alpha=alpha).futility for n in looks]
                against = " / ".join(f"{f:.0%}" for f in alone) + f" at {looks} seeds (d = 0)"
                rows.append({"claim": c.name, "comparison": part, "pilot sd": sd, "decides for it": "—",
                             "decides against it": against})
                continue
            good, bad = (operating(one, looks, mean=m, sd=sd, alpha=level) for m in (-margin, 0.0))
            rows.append({"claim": c.name, "comparison": part, "pilot sd": sd,
                         "decides for it": f"{good.efficacy:.0%} (d = −margin)",
                         "decides against it": f"{bad.futility:.0%} (d = 0)", "mean seeds": round(good.seeds, 1)})
    return pd.DataFrame(rows)


def one_se(losses: pd.Series, se: float = SE) -> float:
    """The earlier rule, kept as a sensitivity: the smallest rate whose loss lies within ``se`` of the lowest (the
    one-standard-error rule; Hastie, Tibshirani & Friedman, *The Elements of Statistical Learning*, 2nd ed., §7.10);
    ``losses`` is indexed by rate, NaN where a rate was not tried."""
    return float(min(lr for lr, loss in losses.dropna().items() if loss <= losses.min() + se))


@dataclasses.dataclass(frozen=True)
class Rates:
    """The rates chosen per arm, the grid's table (arm × rate → mean final validation loss over the tuning seeds, then
    the chosen rate and how its tuning ended), each arm's ``GridChoice``, where the family shared a rate the family's
    mean per rate, and the rates the one-standard-error rule would choose from the same table (``old_rule``)."""

    chosen: dict[str, float]
    table: pd.DataFrame
    status: dict[str, GridChoice]
    old_rule: dict[str, float]
    family: tuple[str, ...] = ()
    family_means: pd.Series | None = None

    @property
    def untuned(self) -> dict[str, str]:
        return {n: c.note for n, c in self.status.items() if c.action != "tuned"}

    @property
    def moved(self) -> list[str]:
        """The first primary's arms whose rate the one-standard-error rule would move: those its sensitivity re-runs."""
        return [n for n in ("ti_mlp", "standard", "tong") if n in self.chosen and self.old_rule[n] != self.chosen[n]]

    def describe(self) -> str:
        if not self.family:
            return ""
        return (f"{', '.join(self.family)}: one rate, {self.chosen[self.family[0]]:g} (mean validation loss over "
                "the three, per rate: " + ", ".join(f"{lr:g} {v:.4f}" for lr, v in self.family_means.items()) + ")")


def tune_rates(builders: Mapping[str, Callable], task, config, precision: Precision, *, lrs: Sequence[float],
               seeds: Sequence[int], max_extensions: int, **options) -> Rates:
    """The one rule for every arm: each on the tuning ``seeds`` over ``lrs`` (extended past an edge at most
    ``max_extensions`` times), the lowest mean validation loss choosing (``experiment.tune_lr``); the ``FAMILY`` arms
    then train at every rate any of them tried and share the rate with the lowest mean over the family. Beside it,
    the rates the one-standard-error rule would choose from the same table (per arm; the family on its mean)."""
    chosen, table, _ = tune_lr(builders, task, config, precision, lrs=lrs, seeds=seeds, max_extensions=max_extensions,
                               **options)
    old = {n: one_se(table.loc[n]) for n in builders}
    tried = {n: [lr for lr in table.columns if pd.notna(table.loc[n, lr])] for n in builders}
    family, means = [n for n in FAMILY if n in builders], None
    if len(family) > 1:
        rates = sorted({lr for n in family for lr in tried[n]})
        _, family_table, _ = tune_lr({n: builders[n] for n in family}, task, config, precision, lrs=rates,
                                     seeds=seeds, **options)
        table.loc[family, rates] = family_table.loc[family, rates]
        means = family_table.mean()
        chosen |= dict.fromkeys(family, choose(means))
        old |= dict.fromkeys(family, one_se(means))
        tried |= dict.fromkeys(family, rates)
    status = annotate(table, chosen, lrs, max_extensions=max_extensions, tried=tried)
    return Rates(chosen, table, status, old, tuple(family) if means is not None else (), means)


def seed_differences(models: Sequence[str], runs: Sequence[Run], unigram: float) -> dict[str, np.ndarray]:
    """What the looks read, in seed order: each comparison's paired test-loss differences, and for each arm its test
    loss minus the ``unigram`` model's (its learned gate); the equal-time line is read after the timing
    (``equal_time``), the one-standard-error rule's after its re-runs (``old_rule_differences``)."""
    values = {part: paired(by_seed(runs, a), by_seed(runs, b)) for part, (a, b) in PAIRS.items()
              if part != EQUAL_TIME and not part.startswith(OLD_RULE) and {a, b} <= set(models)}
    return values | {learned(a): np.array(by_seed(runs, a)) - unigram for a in models}


def rerun_old_rule(rates: Rates, builders: Mapping[str, Callable], task, config, precision: Precision, *,
                   seeds: Sequence[int], **options) -> list[Run]:
    """The arms the one-standard-error rule moves (``Rates.moved``), run on ``seeds`` at the rate it chooses
    (``experiment.run_seeds``; ``options`` pass on to it)."""
    configs = {n: dataclasses.replace(config, lr=rates.old_rule[n]) for n in rates.moved}
    return run_seeds({n: builders[n] for n in configs}, task, configs, precision, seeds=seeds, **options)


def old_rule_differences(runs: Sequence[Run], rerun: Sequence[Run]) -> dict[str, np.ndarray]:
    """The first primary's comparisons under the one-standard-error rule: ``runs`` with each arm that ``rerun`` holds
    (those whose rate the rule moves, re-run at it on the same seeds) taken from there."""
    moved = {r.model for r in rerun}
    at_old = [r for r in runs if r.model not in moved] + list(rerun)
    return {OLD_RULE + part: paired(by_seed(at_old, PAIRS[part][0]), by_seed(at_old, PAIRS[part][1]))
            for part in ("ti_mlp − standard", "ti_mlp − tong") if set(PAIRS[part]) <= {r.model for r in at_old}}


def results_table(runs: Sequence[Run]) -> pd.DataFrame:
    """``experiment.summarize`` with each arm against the standard transformer (paired by seed), its block
    parameters (what it adds to the embeddings and head every arm shares), their compression against the standard's,
    and FLOPs per parameter."""
    table = summarize(runs)
    if "standard" in table.index:
        table = table.join(compare_to(runs, "standard"))
    table["block_params"] = [block_params(next(r.module for r in runs if r.model == m)) for m in table.index]
    if "standard" in table.index:
        table["compression_vs_standard"] = table.loc["standard", "block_params"] / table.block_params
    table["flops_per_param"] = table.gflops_per_forward * 1e9 / table.params
    return table


def compression_verdicts(table: pd.DataFrame, target: float, scale: str) -> list[Verdict]:
    """The TI-MLPs' block-parameter compression against the standard transformer's: a count, held at ``target``×."""
    out = []
    for name in ("ti_mlp", "ti_mlp_full"):
        if {name, "standard"} <= set(table.index):
            ratio = table.loc[name, "compression_vs_standard"]
            out.append(Verdict(f"{name} has at least {target:g}× fewer block parameters than the standard transformer",
                               "held" if ratio >= target else "not held",
                               f"{table.loc['standard', 'block_params']:,} / {table.loc[name, 'block_params']:,} = "
                               f"{ratio:.2f}×", scale))
    return out


def flag_untuned(settled: Settled, untuned: Mapping[str, str]) -> Settled:
    """``settled`` with a note naming the arms of its comparisons whose learning rate stayed at an edge of the grid."""
    arms = sorted({m for part in settled.claim.comparisons for m in PAIRS.get(part, ())} & set(untuned))
    flag = "rests on untuned learning rates: " + "; ".join(f"{n} ({untuned[n]})" for n in arms) if arms else ""
    return dataclasses.replace(settled, note="; ".join(x for x in (settled.note, flag) if x))


TIMED = (("ti_mlp", "tong"), ("ti_ssm", "ti_mlp"))  # the speed comparisons: each pair's steps timed interleaved


def step_timings(runs: Sequence[Run], batch: tuple, loss_fn: Callable, lrs: Mapping[str, float], precision: Precision,
                 *, reps: int, grad_clip: float) -> dict[tuple[str, str], Timing]:
    """A TI-MLP training step against a Tong step, and an SSM step against a TI-MLP step (where both arms ran): each
    on a copy of the first seed's trained model at its own rate, on ``batch``, timed interleaved (``study.timing``)."""
    arms = {r.model for r in runs}

    def step_of(name):
        return training_step(next(r.module for r in runs if r.model == name), batch, loss_fn, lr=lrs[name],
                             grad_clip=grad_clip, autocast=precision.autocast)

    sync = torch.cuda.synchronize if precision.device.type == "cuda" else lambda: None
    return {(a, b): interleaved(step_of(a), step_of(b), reps=reps, sync=sync)
            for a, b in TIMED if {a, b} <= arms}


def at_equal_time(ssm: Run, mlp: Run, ratio: float) -> float:
    """The SSM's validation loss after as many of its steps as take the TI-MLP's whole training (its steps / the
    step-time ratio ``ratio``; linear between evaluations, NaN before the SSM's first), minus the TI-MLP's final
    validation loss."""
    steps, loss = np.asarray(ssm.history.eval_step), np.asarray(ssm.history.eval_loss)
    at = mlp.history.eval_step[-1] / ratio
    return (np.interp(at, steps, loss) if at >= steps[0] else np.nan) - mlp.history.final_eval_loss


def equal_time(runs: Sequence[Run], ratio: float) -> tuple[pd.DataFrame, list[float]]:
    """Per seed: the TI-MLP's steps, the SSM steps that take as long at the step-time ``ratio``, both final validation
    losses and the SSM's at the TI-MLP's time; and the differences the equal-time line reads (``at_equal_time``)."""
    pairs = list(zip(by_seed(runs, "ti_ssm", lambda r: r), by_seed(runs, "ti_mlp", lambda r: r)))
    gaps = [at_equal_time(a, b, ratio) for a, b in pairs]
    table = pd.DataFrame([{"seed": a.seed, "ti_mlp steps": b.history.eval_step[-1],
                           "ti_ssm steps in that time": b.history.eval_step[-1] / ratio,
                           "ti_mlp final val loss": b.history.final_eval_loss,
                           "ti_ssm final val loss": a.history.final_eval_loss,
                           "ti_ssm val loss at ti_mlp's time": b.history.final_eval_loss + gap}
                          for (a, b), gap in zip(pairs, gaps)])
    return table.set_index("seed"), gaps
