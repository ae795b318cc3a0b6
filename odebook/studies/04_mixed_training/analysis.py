"""A GDN + sliding-window hybrid trained on a mixture: study 04's declared claims, its runs' tasks and the per-seed
differences its claims read.

Every claim compares accuracies (or losses) of one seed's models, which share its data stream and its evaluation
examples, under a part name that says what is subtracted from what ("far: drop_0.7 · mixed, normal − state
resampled"): a drop is normal − ablated accuracy on the same examples. ``Design`` names the arms and regimes the
claims compare — the hybrids (S layers that read the GDN state), the static-bottleneck ones, the source's stochastic
local drop, the regime the source trained — and builds each part's name in one place, for the claims
(``declared_claims``) and for their values (``seed_differences``) alike.

Gates come first: each hybrid's local path must be used inside the window (zeroing it costs more than Delta there),
or its state-read claim is not testable; the no-state control must answer facts inside its window above the best
shortcut, or beating it says nothing. The source's fluency target (held-out PPL ≤ ``ppl_target``) is placed beside
the book's perplexities as a descriptive line — the source trained many times the language-model tokens of a profile
here, so its absolute perplexity is not this scale's to test; mixed training's cost in fluency is tested instead,
as non-inferiority against language modelling alone.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from odebook.data import corpus as data
from odebook.data import tasks
from odebook.models.lm import count_params, lm_loss, mixed_loss, reach
from odebook.study import retrieval
from odebook.study.claims import Claim, negative_control, paired
from odebook.study.experiment import Run
from odebook.study.task import Task
from odebook.training.runtime import Precision
from odebook.training.train import evaluate

ABLATED = ("state read resampled", "state resampled")  # a hybrid's far-accuracy drops the claims read
LM_TOKENS = {"lm": 1.0, "retrieval": 0.0, "mixed": 1.0}  # language-model windows per step, by regime


def drop_part(arm: str, regime: str, ablation: str, set_: str = "far") -> str:
    return f"{set_}: {arm} · {regime}, normal − {ablation}"


def learned_part(regime: str) -> str:
    return f"inside: control · {regime} − best shortcut"


@dataclass(frozen=True)
class Design:
    """What study 04's claims compare: ``hybrids`` (arms whose S layers read the GDN state), the ``static`` ones
    among them, the source's stochastic local ``drop`` (None without one), the ``regimes`` trained, whether the
    no-state ``control`` runs, and the fluency target's ``ppl_target``."""

    hybrids: tuple[str, ...]
    static: tuple[str, ...]
    drop: str | None
    regimes: tuple[str, ...]
    control: bool
    ppl_target: float

    @classmethod
    def of(cls, arms: Mapping, regimes: Sequence[str], *, control: bool, ppl_target: float) -> Design:
        hybrids = tuple(a for a, c in arms.items() if c.state_read)
        return cls(hybrids, tuple(a for a in hybrids if arms[a].local_path.static),
                   next((a for a in hybrids if arms[a].local_path.source_drop), None), tuple(regimes), control,
                   ppl_target)

    @property
    def source(self) -> tuple[str, str]:
        """The source's arm (its stochastic drop, else the first hybrid) and regime (mixed, else the first)."""
        return self.drop or self.hybrids[0], "mixed" if "mixed" in self.regimes else self.regimes[0]

    @property
    def reads(self) -> str:
        return f"far: {self.source[0]} · {self.source[1]}, normal − state read resampled"

    @property
    def beats(self) -> str:
        return f"far: {self.source[0]} · {self.source[1]} − control"

    @property
    def stateless(self) -> str:
        return f"far: {self.source[0]} · {self.source[1]}, state resampled − control"

    @property
    def task_matters(self) -> str:
        """The comparison of the drops' ranges across regimes and across arms ("" with fewer than two of either)."""
        return ("far drop with the state resampled: range across regimes − range across arms"
                if len(self.regimes) >= 2 and len(self.hybrids) >= 2 else "")

    @property
    def fluency(self) -> str:
        return f"held-out loss: {self.source[0]} · mixed − {self.source[0]} · lm" if {"lm", "mixed"} <= set(
            self.regimes) else ""

    def essential_part(self, regime: str, other: str) -> str:
        return f"far: state-resampled drop, {self.drop} − {other} · {regime}"

    def target_part(self, arm: str, regime: str) -> str:
        return f"held-out log PPL − log {self.ppl_target:g}: {arm} · {regime}"

    def fluent(self) -> list[tuple[str, str]]:
        """The (hybrid, regime) pairs that train on language-model tokens: those with a held-out perplexity."""
        return [(a, r) for a in self.hybrids for r in self.regimes if LM_TOKENS[r]]


def declared_claims(d: Design, *, delta: float, ppl_margin: float, tokens: str) -> list[Claim]:
    """Study 04's claims, in the order the report prints them: the gates, the source's mechanism (primary), the
    hybrid against the no-state control with its negative control (primary), each hybrid's read and Delta in each
    regime, stochastic drop against the static arms, the task against the bottleneck (two regimes and two arms), and
    fluency: mixed against LM alone, and the source's target beside each perplexity (``tokens`` says the source's
    language-model tokens against this profile's)."""
    arm, regime = d.source
    sup = functools.partial(Claim, kind="superiority", margin=delta, direction="higher", units="accuracy")
    exceeds = functools.partial(Claim, kind="exceeds", margin=delta, direction="higher", units="accuracy")
    gate = functools.partial(Claim, kind="gate", direction="higher", units="accuracy", primary=False)
    local_gate = {(a, r): gate(f"{a} · {r}: its local path is used inside the window (inside accuracy falls by more "
                               f"than {delta:g} when the local path is zeroed)", margin=delta,
                               parts=(drop_part(a, r, "local zeroed", "inside"),))
                  for a in d.hybrids for r in d.regimes}
    learned_gate = {r: gate(f"the no-state control · {r} answers facts inside its window above the best shortcut",
                            margin=0.0, parts=(learned_part(r),)) for r in d.regimes if d.control}
    claims = [*local_gate.values(), *learned_gate.values(),
              sup(f"the source's mechanism: the SWA layer's read of the GDN state carries facts beyond the window "
                  f"({arm} · {regime}: far accuracy falls when the read is resampled)", parts=(d.reads,),
                  rests_on=(local_gate[arm, regime].name,))]
    if d.control:
        beats = exceeds(f"the hybrid ({arm} · {regime}) beats the no-state control on facts beyond the window by more "
                        f"than {delta:g}, and its own memoryless self (state resampled) too",
                        parts=(d.beats, drop_part(arm, regime, "state resampled")),
                        rests_on=(learned_gate[regime].name,))
        claims += [beats, negative_control(beats, d.stateless, f"the hybrid ({arm} · {regime}) with its state "
                                                               "resampled beats the no-state control beyond the "
                                                               f"window by more than {delta:g}")]
    for a in d.hybrids:
        for r in d.regimes:
            for ablation in ABLATED:
                if (a, r, ablation) == (arm, regime, "state read resampled"):
                    continue
                read = ablation.startswith("state read")
                what = ("the SWA layer’s read of the state carries facts beyond the window (far accuracy falls when "
                        "the read is resampled)" if read else "the source's Delta, scored top-1: far accuracy falls "
                        f"by more than {delta:g} when the state is resampled")
                claims.append((sup if read else exceeds)(f"{a} · {r}: {what}", primary=False,
                                                         parts=(drop_part(a, r, ablation),),
                                                         rests_on=(local_gate[a, r].name,) if read else ()))
    if d.drop and d.static:
        claims.append(sup(f"stochastic local drop is essential: {d.drop}'s far drop with the state resampled above "
                          "every static arm's, every regime", primary=False,
                          parts=tuple(d.essential_part(r, a) for r in d.regimes for a in d.static)))
    if d.task_matters:
        claims.append(sup("the task matters more than the bottleneck: the far drop with the state resampled ranges "
                          "wider across regimes than across arms", primary=False, parts=(d.task_matters,)))
    if d.fluency:
        claims.append(Claim(f"mixed training keeps the language model's fluency: {arm}'s held-out loss after mixed "
                            f"training within {ppl_margin:g} nats of language modelling alone", "non-inferiority",
                            ppl_margin, units="nats", primary=False, parts=(d.fluency,)))
    claims += [Claim(f"{a} · {r}: the source's fluency target (held-out PPL ≤ {d.ppl_target:.4g}), beside this "
                     f"scale's held-out PPL ({tokens})", "descriptive", units="nats", primary=False,
                     parts=(d.target_part(a, r),)) for a, r in d.fluent()]
    return claims


def seed_differences(d: Design, runs: Sequence[Run]) -> dict[str, np.ndarray]:
    """Each part's per-seed differences, in seed order, from the runs' retrieval rows and held-out perplexities
    (``regime_tasks``' scores)."""
    sc, ran = pd.concat([r.scores[0] for r in runs]), sorted({r.seed for r in runs})
    ppl = {(r.scores[1]["arm"], r.scores[1]["regime"], r.seed): r.scores[1]["PPL"] for r in runs}

    def acc(arm, regime, ablation="normal", set_="far"):
        return retrieval.per_seed(sc, ran, arm=arm, regime=regime, set=set_, ablation=ablation)

    def fall(arm, regime, ablation, set_="far"):
        return paired(acc(arm, regime, set_=set_), acc(arm, regime, ablation, set_))

    out = {drop_part(a, r, ab): fall(a, r, ab) for a in d.hybrids for r in d.regimes for ab in ABLATED}
    out |= {drop_part(a, r, "local zeroed", "inside"): fall(a, r, "local zeroed", "inside")
            for a in d.hybrids for r in d.regimes}
    arm, regime = d.source
    out[d.reads] = out[drop_part(arm, regime, "state read resampled")]
    if d.control:
        out[d.beats] = paired(acc(arm, regime), acc("control", regime))
        out[d.stateless] = paired(acc(arm, regime, "state resampled"), acc("control", regime))
        inside = sc[(sc.arm == "control") & (sc.set == "inside") & (sc.ablation == "normal")]
        out |= {learned_part(r): paired(retrieval.per_seed(inside, ran, regime=r),
                                        retrieval.per_seed(inside, ran, regime=r, shortcut=True)) for r in d.regimes}
    if d.fluency:
        out[d.fluency] = paired([math.log(ppl[arm, "mixed", s]) for s in ran],
                                [math.log(ppl[arm, "lm", s]) for s in ran])
    if d.drop and d.static:
        out |= {d.essential_part(r, a): paired(fall(d.drop, r, "state resampled"), fall(a, r, "state resampled"))
                for r in d.regimes for a in d.static}
    if d.task_matters:
        drops = np.array([[fall(a, r, "state resampled") for r in d.regimes] for a in d.hybrids])
        out[d.task_matters] = paired(np.ptp(drops, axis=1).mean(0), np.ptp(drops, axis=0).mean(0))
    out |= {d.target_part(a, r): np.log([ppl[a, r, s] for s in ran]) - math.log(d.ppl_target) for a, r in d.fluent()}
    return out


def models_table(arms: Mapping, *, window: int, nearest_far: int, control: bool) -> pd.DataFrame:
    """Each arm's layers, parameters and how far back it sees without a state; a no-state control that sees as far
    as the nearest 'far' fact is no control of it (a ValueError naming the settings)."""
    table = pd.DataFrame({arm: {"layers": c.pattern, "parameters": count_params(c.build()),
                                "sees back (tokens)": reach(c.pattern, window=window) or "all (state)"}
                          for arm, c in arms.items()}).T
    if control and (seen := reach(arms["control"].pattern, window=window)) >= nearest_far:
        raise ValueError(f"window = {window}, pattern = {arms['control'].pattern!r}: the no-state control sees {seen} "
                         f"tokens back, as far as the nearest 'far' fact ({nearest_far}); a smaller window or fewer "
                         "layers")
    return table


def regime_tasks(arms: Mapping, regimes: Sequence[str], *, train_docs: Sequence, valid: Sequence, tok,
                 eval_sets: Mapping, stages: Sequence, ks: Sequence[int], window: int, batch_size: int, seq_len: int,
                 retrieval_batch_size: int, precision: Precision) -> dict[str, Task]:
    """One task per arm × regime ("drop_0.7_mixed"): the regime's batches (LM documents, retrieval prompts through the
    curriculum's ``stages``, or both — a seed's stream the same for every arm), its loss, and a score of retrieval rows
    under every ablation the arm has beside the held-out perplexity."""
    def batches(regime, seed):
        lm = data.document_batches(train_docs, batch_size, seq_len, seed)
        prompts = tasks.curriculum_batches(tok, retrieval_batch_size, seed, stages, ks)
        return iter({"lm": lm, "retrieval": prompts, "mixed": zip(lm, prompts)}[regime])

    def score(arm, regime, run):
        ablations = list(retrieval.ABLATIONS) if arms[arm].state_read else ["normal", "local zeroed"]
        rows = retrieval.score_rows(run.module, eval_sets, tok, precision.device, window=window, ablations=ablations,
                                    arm=arm, regime=regime, seed=run.seed)
        return rows, {"arm": arm, "regime": regime, "seed": run.seed,
                      "PPL": math.exp(evaluate(run.module, valid, precision))}

    return {f"{arm}_{regime}": Task(batches=functools.partial(batches, regime), valid=valid, eval_loss_fn=lm_loss,
                                    loss_fn=mixed_loss if regime == "mixed" else lm_loss,
                                    score=functools.partial(score, arm, regime))
            for arm in arms for regime in regimes}
