"""A GDN + sliding-window hybrid trained on a mixture: study 04's declared claims, its runs' tasks and the per-seed
differences its claims read.

Every claim compares accuracies (or losses) of one seed's models, which share its data stream and its evaluation
examples, under a part name that says what is subtracted from what ("far: drop_0.7 · mixed, normal − state
resampled"): a drop is normal − ablated accuracy on the same examples. ``Design`` names the arms and regimes the
claims compare — the hybrids (S layers that read the GDN state), the static-bottleneck ones, the source's stochastic
local drop, the same arm with its GDN output dropped, the no-state control, the reaching comparator (full attention),
the regime the source trained — and builds each part's name in one place, for the claims (``declared_claims``) and
for their values (``seed_differences``) alike.

Learned gates come first, seed by seed: every arm that can reach a fact beyond the window must answer such facts
above the best shortcut, and the no-state control facts inside its window, or a claim comparing it reads "not
testable". The source's fluency target (held-out PPL ≤ ``ppl_target``) is placed beside the book's perplexities as a
descriptive line — the source trained many times the language-model tokens of a profile here, so its absolute
perplexity is not this scale's to test; mixed training's cost in fluency is tested instead, as non-inferiority
against language modelling alone.
"""

from __future__ import annotations

import functools
import itertools
import math
import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from odebook.data import corpus as data
from odebook.data import tasks
from odebook.models.lm import count_params, lm_loss, mixed_loss, reach
from odebook.study import retrieval
from odebook.study.claims import Claim, Settled, negative_control, paired
from odebook.study.experiment import Run, tune_lr
from odebook.study.lr_grid import annotate
from odebook.study.task import Task
from odebook.training.runtime import Precision
from odebook.training.train import evaluate

READ = "state read resampled"  # the source's mechanism: only the SWA layer's read of the GDN state, resampled
ABLATED = (READ, "gdn output resampled", "state resampled")  # a hybrid's far-accuracy drops the claims read
LM_TOKENS = {"lm": 1.0, "retrieval": 0.0, "mixed": 1.0}  # language-model windows per step, by regime
LEARNED_MARGIN = 0.1  # accuracy above the best shortcut, in every seed, that says an arm learned the task


def drop_part(arm: str, regime: str, ablation: str, set_: str = "far") -> str:
    return f"{set_}: {arm} · {regime}, normal − {ablation}"


def learned_part(arm: str, regime: str, set_: str = "far") -> str:
    return f"{set_}: {arm} · {regime} − best shortcut"


def reaches_part(arm: str, regime: str) -> str:
    return f"far: {arm} · {regime} − attention · {regime}"


def sufficient_part(arm: str, regime: str) -> str:
    return f"far: {arm} · {regime}, gdn output resampled − state resampled"


def read_gain_part(regime: str, arm: str, other: str) -> str:
    return f"far: read-resampled drop, {arm} − {other} · {regime}"


@dataclass(frozen=True)
class Design:
    """What study 04's claims compare: ``hybrids`` (arms whose S layers read the GDN state), the ``static`` ones
    among them, the source's stochastic local ``drop`` and the same arm with its GDN output dropped (``output_drop``;
    each None without one), the ``regimes`` trained, whether the no-state ``control`` and the reaching comparator
    ``attention`` run, and the fluency target's ``ppl_target``."""

    hybrids: tuple[str, ...]
    static: tuple[str, ...]
    drop: str | None
    output_drop: str | None
    regimes: tuple[str, ...]
    control: bool
    attention: bool
    ppl_target: float

    @classmethod
    def of(cls, arms: Mapping, regimes: Sequence[str], *, ppl_target: float) -> Design:
        hybrids = tuple(a for a, c in arms.items() if c.state_read)
        dropped = [a for a in hybrids if getattr(arms[a], "output_drop", 0) > 0]
        return cls(hybrids, tuple(a for a in hybrids if arms[a].local_path.static),
                   next((a for a in hybrids if arms[a].local_path.source_drop and a not in dropped), None),
                   next(iter(dropped), None), tuple(regimes), "control" in arms, "attention" in arms, ppl_target)

    @property
    def source(self) -> tuple[str, str]:
        """The source's arm (its stochastic drop, else the first hybrid) and regime (mixed, else the first)."""
        return self.drop or self.hybrids[0], "mixed" if "mixed" in self.regimes else self.regimes[0]

    @property
    def learners(self) -> dict[tuple[str, str], str]:
        """(arm, regime) → the set its learned gate reads: far facts for every arm that can reach them, facts inside
        its window for the no-state control."""
        reaching = (*self.hybrids, *("attention",) * self.attention)
        return ({(a, r): "far" for a in reaching for r in self.regimes}
                | {("control", r): "inside" for r in self.regimes if self.control})

    @property
    def task_matters(self) -> str:
        """The comparison of the drops' ranges across regimes and across arms ("" with fewer than two of either)."""
        return ("far drop with the state resampled: range across regimes − range across arms"
                if len(self.regimes) >= 2 and len(self.hybrids) >= 2 else "")

    @property
    def fluency(self) -> str:
        return f"held-out loss: {self.source[0]} · mixed − {self.source[0]} · lm" if {"lm", "mixed"} <= set(
            self.regimes) else ""

    @property
    def read_gains(self) -> list[tuple[str, str, str]]:
        """(regime, arm, other): the read-resampled drops the secondary claims compare — the source's stochastic
        drop against each static arm, the dropped-output arm against the source's drop."""
        pairs = [(self.drop, a) for a in self.static if self.drop] + [(self.output_drop, self.drop)] * bool(
            self.output_drop and self.drop)
        return [(r, a, b) for r in self.regimes for a, b in pairs]

    def target_part(self, arm: str, regime: str) -> str:
        return f"held-out log PPL − log {self.ppl_target:g}: {arm} · {regime}"

    def fluent(self) -> list[tuple[str, str]]:
        """The (hybrid, regime) pairs that train on language-model tokens: those with a held-out perplexity."""
        return [(a, r) for a in self.hybrids for r in self.regimes if LM_TOKENS[r]]


def declared_claims(d: Design, *, delta: float, ppl_margin: float, tokens: str) -> list[Claim]:
    """Study 04's claims, in the order the report prints them: a learned gate for every arm (seed by seed); the
    source's mechanism, the same read in the dropped-output arm, and the hybrid against the reaching comparator with
    the no-state control as its negative control (primary); each other hybrid's read, the read's sufficiency, the
    read gains, the task against the bottleneck and fluency (secondary); the source's Delta and fluency target beside
    each hybrid (descriptive; ``tokens`` says the source's language-model tokens against this profile's)."""
    arm, regime = d.source
    sup = functools.partial(Claim, kind="superiority", margin=delta, direction="higher", units="accuracy")
    where = {"far": "facts beyond the window", "inside": "facts inside its window"}
    gate = {k: Claim(f"learned: {k[0]} · {k[1]} — answers {where[s]} above the best shortcut by more than "
                     f"{LEARNED_MARGIN:g} in every seed", "learned", LEARNED_MARGIN, "higher", "accuracy",
                     primary=False, parts=(learned_part(*k, s),)) for k, s in d.learners.items()}

    def on(*keys):
        return tuple(gate[k].name for k in keys)

    def reads(a, r, what, **kw):
        return sup(f"{what} ({a} · {r}: far accuracy falls by more than {delta:g} when that read alone is resampled)",
                   parts=(drop_part(a, r, READ),), rests_on=on((a, r)), **kw)

    claims = [*gate.values(), reads(arm, regime, "the source's mechanism: the SWA layer's read of the GDN state "
                                                 "carries facts beyond the window")]
    if d.output_drop:
        claims.append(reads(d.output_drop, regime, "with the GDN layer's direct output dropped in training, the SWA "
                                                    "layer's read carries facts beyond the window"))
    if d.attention:
        reaches = Claim(f"the hybrid's state answers beyond the window as well as full attention of its width: "
                        f"{arm} · {regime}'s far accuracy is not below the attention comparator's by {delta:g} or more",
                        "non-inferiority", delta, "higher", "accuracy", parts=(reaches_part(arm, regime),),
                        rests_on=on((arm, regime), ("attention", regime)))
        claims.append(reaches)
        if d.control:
            claims.append(dataclasses.replace(
                negative_control(reaches, reaches_part("control", regime), f"the no-state control ({regime}) answers "
                                 f"beyond the window as well as full attention, within {delta:g}"),
                rests_on=on(("control", regime), ("attention", regime))))
    primary = {(arm, regime), (d.output_drop, regime)}
    claims += [reads(a, r, "the SWA layer’s read of the state carries facts beyond the window", primary=False)
               for a in d.hybrids for r in d.regimes if (a, r) not in primary]
    claims += [sup(f"{a} · {r}: the read alone carries facts beyond the window (far accuracy with the GDN layer's own "
                   "output resampled above that with the whole state resampled)", primary=False,
                   parts=(sufficient_part(a, r),), rests_on=on((a, r))) for a in d.hybrids for r in d.regimes]
    claims += [sup(f"{a} · {r}: its read carries more than {b}'s (far accuracy's fall when the read is resampled)",
                   primary=False, parts=(read_gain_part(r, a, b),), rests_on=on((a, r), (b, r)))
               for r, a, b in d.read_gains]
    if d.task_matters:
        claims.append(sup("the task matters more than the bottleneck: the far drop with the state resampled ranges "
                          "wider across regimes than across arms", primary=False, parts=(d.task_matters,)))
    if d.fluency:
        claims.append(Claim(f"mixed training keeps the language model's fluency: {arm}'s held-out loss after mixed "
                            f"training within {ppl_margin:g} nats of language modelling alone", "non-inferiority",
                            ppl_margin, units="nats", primary=False, parts=(d.fluency,)))
    claims += [Claim(f"{a} · {r}: the source's Delta, scored top-1 (far accuracy, normal − state resampled; only the "
                     "state reaches beyond the window here, so it reads how well the hybrid learned)", "descriptive",
                     units="accuracy", primary=False, parts=(drop_part(a, r, "state resampled"),))
               for a in d.hybrids for r in d.regimes]
    claims += [Claim(f"{a} · {r}: the source's fluency target (held-out PPL ≤ {d.ppl_target:.4g}), beside this "
                     f"scale's held-out PPL ({tokens})", "descriptive", units="nats", primary=False,
                     parts=(d.target_part(a, r),)) for a, r in d.fluent()]
    return claims


def seed_differences(d: Design, runs: Sequence[Run]) -> dict[str, np.ndarray]:
    """Each part's per-seed differences, in seed order, from the runs' retrieval rows and held-out perplexities
    (``regime_tasks``' scores)."""
    sc, ran = pd.concat([r.scores[0] for r in runs]), sorted({r.seed for r in runs})
    ppl = {(r.scores[1]["arm"], r.scores[1]["regime"], r.seed): r.scores[1]["PPL"] for r in runs}

    def acc(arm, regime, ablation="normal", set_="far", shortcut=False):
        return retrieval.per_seed(sc, ran, arm=arm, regime=regime, set=set_, ablation=ablation, shortcut=shortcut)

    def fall(arm, regime, ablation):
        return paired(acc(arm, regime), acc(arm, regime, ablation))

    out = {drop_part(a, r, ab): fall(a, r, ab) for a in d.hybrids for r in d.regimes for ab in ABLATED}
    out |= {learned_part(a, r, s): paired(acc(a, r, set_=s), acc(a, r, set_=s, shortcut=True))
            for (a, r), s in d.learners.items()}
    out |= {sufficient_part(a, r): paired(acc(a, r, "gdn output resampled"), acc(a, r, "state resampled"))
            for a in d.hybrids for r in d.regimes}
    out |= {read_gain_part(r, a, b): paired(fall(a, r, READ), fall(b, r, READ)) for r, a, b in d.read_gains}
    if d.attention:
        out |= {reaches_part(a, r): paired(acc(a, r), acc("attention", r))
                for a in (*d.hybrids, *("control",) * d.control) for r in d.regimes}
    if d.fluency:
        arm = d.source[0]
        out[d.fluency] = paired([math.log(ppl[arm, "mixed", s]) for s in ran],
                                [math.log(ppl[arm, "lm", s]) for s in ran])
    if d.task_matters:
        drops = np.array([[fall(a, r, "state resampled") for r in d.regimes] for a in d.hybrids])
        out[d.task_matters] = paired(np.ptp(drops, axis=1).mean(0), np.ptp(drops, axis=0).mean(0))
    out |= {d.target_part(a, r): np.log([ppl[a, r, s] for s in ran]) - math.log(d.ppl_target) for a, r in d.fluent()}
    return out


def models_table(arms: Mapping, *, window: int, nearest_far: int) -> pd.DataFrame:
    """Each arm's layers, parameters and how far back it sees without a state; a no-state control that sees as far
    as the nearest 'far' fact is no control of it (a ValueError naming the settings)."""
    table = pd.DataFrame({arm: {"layers": c.pattern, "parameters": count_params(c.build()),
                                "sees back (tokens)": reach(c.pattern, window=window)
                                or ("all (state)" if "G" in c.pattern else "all (attention)")}
                          for arm, c in arms.items()}).T
    if "control" in arms and (seen := reach(arms["control"].pattern, window=window)) >= nearest_far:
        raise ValueError(f"window = {window}, pattern = {arms['control'].pattern!r}: the no-state control sees {seen} "
                         f"tokens back, as far as the nearest 'far' fact ({nearest_far}); a smaller window or fewer "
                         "layers")
    return table


def ablations_of(arm) -> list[str]:
    """What an arm's retrieval is scored under: every ablation where it reads a GDN state, else its local path's."""
    return list(retrieval.ABLATIONS) if arm.state_read else ["normal", "local zeroed"]


def regime_tasks(arms: Mapping, regimes: Sequence[str], *, train_docs: Sequence, valid: Sequence,
                 valid_prompts: Sequence, tok, eval_sets: Mapping, stages: Sequence, ks: Sequence[int], window: int,
                 batch_size: int, seq_len: int, retrieval_batch_size: int, precision: Precision) -> dict[str, Task]:
    """One task per arm × regime ("drop_0.7_mixed"): the regime's batches (LM documents, retrieval prompts through the
    curriculum's ``stages``, or both — a seed's stream the same for every arm), its loss, validated on what the claims
    read: the answers of held-out prompts ``valid_prompts`` (language modelling alone: held-out windows ``valid``),
    which the tuning rule reads; and a score of retrieval rows under every ablation the arm has beside the held-out
    perplexity."""
    def batches(regime, seed):
        lm = data.document_batches(train_docs, batch_size, seq_len, seed)
        prompts = tasks.curriculum_batches(tok, retrieval_batch_size, seed, stages, ks)
        return iter({"lm": lm, "retrieval": prompts, "mixed": zip(lm, prompts)}[regime])

    def score(arm, regime, run):
        rows = retrieval.score_rows(run.module, eval_sets, tok, precision.device, window=window,
                                    ablations=ablations_of(arms[arm]), arm=arm, regime=regime, seed=run.seed)
        return rows, {"arm": arm, "regime": regime, "seed": run.seed,
                      "PPL": math.exp(evaluate(run.module, valid, precision))}

    return {f"{arm}_{regime}": Task(batches=functools.partial(batches, regime),
                                    valid=valid if regime == "lm" else valid_prompts,
                                    loss_fn=mixed_loss if regime == "mixed" else lm_loss, eval_loss_fn=lm_loss,
                                    score=functools.partial(score, arm, regime))
            for arm in arms for regime in regimes}


def held_out_prompts(tok, batch_size: int, seed: int, *, n_filler: int, ks: Sequence[int], n: int) -> list:
    """``n`` batches of retrieval prompts at the curriculum's last stage (``n_filler`` filler sentences), drawn with
    ``seed`` apart from every training stream: the retrieval half of a regime's validation."""
    return list(itertools.islice(tasks.curriculum_batches(tok, batch_size, seed, [(1, n_filler)], ks), n))


def headline(table: pd.DataFrame, d: Design, arms: Sequence[str]) -> dict[str, str]:
    """The results file's headline: each hybrid's far accuracy normal and under each ablation the claims read, every
    other arm's far and inside accuracy (``table``: the ablation table across seeds)."""
    def acc(a, r, set_, ablation="normal"):
        return f"{table.loc[(a, r, set_, ablation), 'acc']:.2f}"

    return ({f"{a} · {r}: far acc normal / read resampled / GDN output resampled / state resampled":
             " / ".join(acc(a, r, "far", ab) for ab in ("normal", *ABLATED)) for a in d.hybrids for r in d.regimes}
            | {f"{a} · {r}: far / inside acc": f"{acc(a, r, 'far')} / {acc(a, r, 'inside')}"
               for a in arms if a not in d.hybrids for r in d.regimes})


@dataclass(frozen=True)
class Rates:
    """The tuning rule's outcome: the chosen rate per run name ("drop_0.7_mixed"), the grid's table (run × rate → mean
    final validation loss, with the chosen rate and how its tuning ended) and the runs left ``untuned`` (name → why)."""

    chosen: dict[str, float]
    table: pd.DataFrame
    untuned: dict[str, str]


def tune_rates(arms: Mapping, regimes: Sequence[str], regime_task: Mapping[str, Task], config, precision: Precision,
               *, lrs: Sequence[float], seeds: Sequence[int], max_extensions: int, tie: float, **options) -> Rates:
    """The book's one tuning rule (``experiment.tune_lr``) for every arm in every regime: on the tuning ``seeds`` over
    ``lrs``, extended past an edge at most ``max_extensions`` times, the lowest mean validation loss of the regime's
    task (``regime_tasks``) choosing, or the middle of the rates within ``tie`` of it."""
    chosen, tables, status = {}, [], {}
    for regime in regimes:
        names = {f"{arm}_{regime}": arms[arm].build for arm in arms}
        picked, table, _ = tune_lr(names, regime_task[next(iter(names))], config, precision, lrs=lrs, seeds=seeds,
                                   max_extensions=max_extensions, tie=tie, **options)
        status |= annotate(table, picked, lrs, max_extensions=max_extensions)
        chosen |= picked
        tables.append(table)
    return Rates(chosen, pd.concat(tables), {n: c.note for n, c in status.items() if c.action != "tuned"})


def flag_untuned(settled: Settled, untuned: Mapping[str, str]) -> Settled:
    """``settled`` with a note naming the runs its comparisons read whose learning rate stayed at a grid's edge."""
    named = [n for n in untuned if any(" · ".join(n.rsplit("_", 1)) in part for part in settled.claim.comparisons)]
    flag = "rests on untuned learning rates: " + "; ".join(f"{n} ({untuned[n]})" for n in named) if named else ""
    return dataclasses.replace(settled, note="; ".join(x for x in (settled.note, flag) if x))
