"""Time-indexed parameter sharing: study 02's declared claims, its learning-rate rule and the numbers its claims read.

Every loss claim compares two arms' test losses paired by seed, d = a − b, under a name in ``PAIRS``
("ti_mlp − standard"). ``declared_claims`` declares them before the runs — three primaries, each beside its negative
control (the TI-MLP's twin, another initial draw, in place of the arm that should make the difference; for the SSM,
the trained SSM model with its SSM branch switched off at test: ``ssm_off_loss``), the sources' numbers as secondary
non-inferiority claims, and two descriptive lines — keeping those whose arms the profile trains.

The learning rate is chosen per arm on a tuning seed by the **one-standard-error rule** (``one_se``; Hastie,
Tibshirani & Friedman, *The Elements of Statistical Learning*, 2nd ed., §7.10) at one tolerance for every arm,
``SE``: one model's loss on one seed, from the pilot's SD of two identical TI-MLPs' paired differences, / √2. The
TI-MLP, its constant-modulation ablation and its twin (``FAMILY``) differ only in what the claims test, so they share
one rate: each trains at every rate any of them tried, and the rule reads their mean (``tune_rates``).

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
from odebook.nn.ssm import ModulatedSSM
from odebook.study.claims import Claim, Settled, negative_control, paired
from odebook.study.experiment import Run, by_seed, compare_to, summarize, tune_lr
from odebook.study.lr_grid import GridChoice, annotate
from odebook.study.sequential import operating
from odebook.study.stats import Verdict
from odebook.study.timing import Timing, interleaved, training_step
from odebook.training.runtime import Precision
from odebook.training.train import evaluate

EQUAL_TIME = "equal time: ti_ssm − ti_mlp"
SSM_OFF = "ti_ssm with its SSM branch off − ti_mlp"
PAIRS = {f"{a} − {b}": (a, b) for a, b in [("ti_mlp", "standard"), ("ti_mlp", "tong"), ("ti_mlp", "ti_mlp_constant"),
                                           ("ti_ssm", "ti_mlp"), ("ti_mlp", "ti_mlp_twin"),
                                           ("ti_mlp_twin", "ti_mlp_constant"), ("ti_mlp_full", "standard"),
                                           ("ti_mlp_full", "tong"), ("ti_mlp_dt", "ti_mlp"),
                                           ("ode_shared", "standard")]}
PAIRS |= {EQUAL_TIME: ("ti_ssm", "ti_mlp"), SSM_OFF: ("ti_ssm", "ti_mlp")}
FAMILY = ("ti_mlp", "ti_mlp_constant", "ti_mlp_twin")  # one architecture but for what the claims test: one rate
# The pilot: the cpu report of the earlier design (seeds 0-5) — the SD over seeds of each paired difference; the twin
# comparison's SD is taken as the time-dependence comparison's (two TI-MLPs).
PILOT_SD = {"ti_mlp − standard": 0.0809, "ti_mlp − tong": 0.0094, "ti_mlp − ti_mlp_constant": 0.0165,
            "ti_ssm − ti_mlp": 0.0211, "ti_mlp − ti_mlp_twin": 0.0165}
SE = PILOT_SD["ti_mlp − ti_mlp_twin"] / np.sqrt(2)  # one model's validation loss on one seed (the pilot)


def declared_claims(models: Sequence[str], margin: float) -> list[Claim]:
    """Study 02's claims, in the order the report prints them, those whose arms are all among ``models``."""
    sup = functools.partial(Claim, kind="superiority", margin=margin, units="nats")
    source = functools.partial(Claim, kind="non-inferiority", direction="higher", units="nats", primary=False)
    beats = sup("the time-indexed MLP beats both the standard transformer and Tong's model",
                parts=("ti_mlp − standard", "ti_mlp − tong"))
    matters = sup("time dependence changes the loss: the time-indexed MLP differs from constant modulation (t fixed)",
                  direction="two-sided", parts=("ti_mlp − ti_mlp_constant",))
    ssm = sup("the time-indexed SSM beats the time-indexed MLP (at equal steps)", parts=("ti_ssm − ti_mlp",))
    declared = [
        beats, negative_control(beats, "ti_mlp − ti_mlp_twin", "the time-indexed MLP beats its twin (another draw)"),
        matters, negative_control(matters, "ti_mlp − ti_mlp_twin", "the time-indexed MLP differs from its twin"),
        ssm, negative_control(ssm, SSM_OFF, "the time-indexed SSM with its SSM branch switched off beats the TI-MLP"),
        source("the seed's 0.136-nat gain over the standard transformer is excluded: TI-MLP − standard lies above it",
               margin=0.136, parts=("ti_mlp − standard",)),
        source("the seed's 0.105-nat gain over Tong's model is excluded: TI-MLP − Tong lies above it", margin=0.105,
               parts=("ti_mlp − tong",)),
        source("the fork's 0.013-nat gain from time dependence is excluded: TI-MLP − constant lies above it",
               margin=0.0131, parts=("ti_mlp − ti_mlp_constant",)),
        sup("the published formula (a gate per weight) beats both the standard transformer and Tong's model",
            primary=False, parts=("ti_mlp_full − standard", "ti_mlp_full − tong")),
        sup("dt scaling helps the time-indexed MLP", primary=False, parts=("ti_mlp_dt − ti_mlp",)),
        sup("ODE integration with shared weights beats the standard transformer", primary=False,
            parts=("ode_shared − standard",)),
        Claim("post hoc, after the first run: time dependence through the twin — the twin minus constant modulation",
              "descriptive", units="nats", primary=False, parts=("ti_mlp_twin − ti_mlp_constant",)),
        Claim("at equal training time: the SSM's validation loss at the TI-MLP's training time minus the TI-MLP's "
              "final validation loss", "descriptive", units="nats", primary=False, parts=(EQUAL_TIME,)),
    ]
    return [c for c in declared if all(m in models for part in c.comparisons for m in PAIRS[part])]


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
    """The smallest rate whose loss lies within ``se`` of the lowest (the one-standard-error rule); ``losses`` is
    indexed by rate, NaN where a rate was not tried."""
    return float(min(lr for lr, loss in losses.dropna().items() if loss <= losses.min() + se))


@dataclasses.dataclass(frozen=True)
class Rates:
    """The rates chosen per arm, the grid's table (arm × rate → final validation loss, then the chosen rate and how
    its tuning ended), each arm's ``GridChoice`` and, where the family shared a rate, the family's mean per rate."""

    chosen: dict[str, float]
    table: pd.DataFrame
    status: dict[str, GridChoice]
    family: tuple[str, ...] = ()
    family_means: pd.Series | None = None

    @property
    def untuned(self) -> dict[str, str]:
        return {n: c.note for n, c in self.status.items() if c.action != "tuned"}

    def describe(self) -> str:
        if not self.family:
            return ""
        return (f"{', '.join(self.family)}: one rate, {self.chosen[self.family[0]]:g} (mean validation loss over "
                "the three, per rate: " + ", ".join(f"{lr:g} {v:.4f}" for lr, v in self.family_means.items()) + ")")


def tune_rates(builders: Mapping[str, Callable], task, config, precision: Precision, *, lrs: Sequence[float],
               seed: int, max_extensions: int, **options) -> Rates:
    """Every arm on the tuning ``seed`` over ``lrs`` (extended past an edge at most ``max_extensions`` times), the
    one-standard-error rule choosing; the ``FAMILY`` arms then train at every rate any of them tried and share the
    rate the rule chooses on their mean."""
    _, table, _ = tune_lr(builders, task, config, precision, lrs=lrs, seed=seed, max_extensions=max_extensions,
                          **options)
    chosen = {n: one_se(table.loc[n]) for n in builders}
    tried = {n: [lr for lr in table.columns if pd.notna(table.loc[n, lr])] for n in builders}
    family, means = [n for n in FAMILY if n in builders], None
    if len(family) > 1:
        rates = sorted({lr for n in family for lr in tried[n]})
        _, family_table, _ = tune_lr({n: builders[n] for n in family}, task, config, precision, lrs=rates, seed=seed,
                                     **options)
        table.loc[family, rates] = family_table.loc[family, rates]
        means = family_table.mean()
        chosen |= dict.fromkeys(family, one_se(means))  # one tolerance for every arm
        tried |= dict.fromkeys(family, rates)
    status = annotate(table, chosen, lrs, max_extensions=max_extensions, tried=tried)
    return Rates(chosen, table, status, tuple(family) if means is not None else (), means)


def ssm_off_loss(run: Run, batches: Sequence, precision: Precision) -> float:
    """The trained SSM model's loss on ``batches`` with every SSM branch's output replaced by zeros (the rest as
    trained)."""
    off = [m.register_forward_hook(lambda module, args, y: torch.zeros_like(y)) for m in run.module.modules()
           if isinstance(m, ModulatedSSM)]
    try:
        return evaluate(run.module, batches, precision)
    finally:
        for hook in off:
            hook.remove()


def seed_differences(models: Sequence[str], batches: Sequence, precision: Precision,
                     runs: Sequence[Run]) -> dict[str, np.ndarray]:
    """Each comparison's paired test-loss differences in seed order (what the looks read), the SSM-off control's
    scored on ``batches`` (the test split); the equal-time line is read after the timing (``equal_time``)."""
    values = {part: paired(by_seed(runs, a), by_seed(runs, b)) for part, (a, b) in PAIRS.items()
              if part not in (EQUAL_TIME, SSM_OFF) and {a, b} <= set(models)}
    if {"ti_ssm", "ti_mlp"} <= set(models):
        ssm_off = by_seed(runs, "ti_ssm", lambda r: ssm_off_loss(r, batches, precision))
        values[SSM_OFF] = paired(ssm_off, by_seed(runs, "ti_mlp"))
    return values


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
    arms = sorted({m for part in settled.claim.comparisons for m in PAIRS[part]} & set(untuned))
    flag = "rests on untuned learning rates: " + "; ".join(f"{n} ({untuned[n]})" for n in arms) if arms else ""
    return dataclasses.replace(settled, note="; ".join(x for x in (settled.note, flag) if x))


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
            for a, b in (("ti_mlp", "tong"), ("ti_ssm", "ti_mlp")) if {a, b} <= arms}


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
