"""A replacement judged against a calibrated null: study 01's declared claims and the numbers they rest on.

"The hybrid is as good as the baseline" means nothing where removing the replaced layers costs nothing. So the
claims are declared around a **gate**: the null arm (the baseline without the replaced layers) must be worse than
the baseline by more than the non-inferiority margin — tested at α on the per-seed paired gaps, outside every
family. Resting on that gate, the primary claims are

- *non-inferiority*: candidate − reference in test loss is below the margin (lower is better);
- *beats the null*: candidate − null lies below −margin ("exceeds"; "not held" once an advantage that large is ruled
  out) — the candidate does the removed layers' work, not merely a little better than without them (an arm that adds
  any trainable width beats the null by a hair);

and, secondary, the candidate against each ``others`` arm (superiority at the same margin). Every arm a claim compares
must have **learned**, seed by seed (``claims``' learned gates): each finished learning — its best validation loss
over the last quarter of its steps is below its best before by less than the margin (``unfinished``) — and the
reference answers the task above the shortcut (the context's most frequent value) by ``LEARNED_ACCURACY``. With a
failed gate the claims resting on it read "not testable at this scale" (``claims.settle``). With a ``control`` arm,
each primary has its negative control — the same test on a trained arm that differs from the candidate only in the
mechanism the claim credits (for 01: the flow without attention, which cannot move information between tokens) — which
should come out "not held".

``design`` simulates the looks for the primaries at a pilot's seed SD (the design's power). ``gradient_ratios``
describes each group's gradient norm over the baseline's (by the groups of ``gradient_groups``); ``learned_alphas``
reads the output scale α of each seed's flow at the end, ``alpha_trajectories`` through training.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

import torch

from odebook.models.arms import HybridConfig
from odebook.study.claims import Claim, negative_control, paired
from odebook.study.experiment import Run, by_seed, grad_ratios, summarize
from odebook.study.sequential import operating
from odebook.study.stats import mean_ci

from .arms import layer_groups

__all__ = ["GATE", "LEARNED_ACCURACY", "calibrated_claims", "comparisons", "paired_losses", "unfinished",
           "seed_differences", "results_table", "design", "gradient_groups", "learned_alphas",
           "alpha_trajectories", "gradient_ratios"]

GATE = "removing the replaced layers costs more than the margin"
LEARNED_ACCURACY = 0.5  # the reference's accuracy above the shortcut that says it learned the task


def _answers(arm: str) -> str:
    return f"{arm}: accuracy above the shortcut"


def _fall(arm: str) -> str:
    return f"{arm}: validation loss fall over the last quarter"


def calibrated_claims(margin: float, *, candidate: str = "hybrid", reference: str = "baseline", null: str = "null",
                      control: str = "", source: str = "", others: Mapping[str, str] = {}, units: str = "nats"
                      ) -> list[Claim]:
    """The learned gates (the reference answers the task; every arm finished learning), the calibration gate, the two
    primary claims (each followed by its negative control on the ``control`` arm, if named), a secondary claim per
    ``others`` arm (name → how the claim calls it) and, for a ``source`` arm (the candidate as the source initialised
    it), two descriptive rows: it against the candidate and against the null arm. Every comparison is a paired
    difference a − b of test losses named ``"a − b"`` (``comparisons``)."""
    if not margin > 0:
        raise ValueError(f"the margin must be positive ({units}), got {margin!r}")
    arms = [reference, candidate, null, *([control] if control else []), *([source] if source else []), *others]
    answers = Claim(f"learned: the {reference} answers above the shortcut by more than {LEARNED_ACCURACY:g}",
                    "learned", LEARNED_ACCURACY, "higher", "accuracy", parts=(_answers(reference),))
    finished = {a: Claim(f"learned: the {a} arm finished learning (its best validation loss improved by less than "
                         f"{margin:g} {units} over the last quarter of its steps)", "learned", margin, "lower", units,
                         parts=(_fall(a),)) for a in arms}
    gate = Claim(GATE, "gate", margin, "higher", units, parts=(f"{null} − {reference}",))
    rest = (answers.name, *(finished[a].name for a in (reference, candidate, null)), GATE)
    ni = Claim(f"{candidate} non-inferior to the {reference}", "non-inferiority", margin, "lower", units,
               rests_on=rest, parts=(f"{candidate} − {reference}",))
    beats = Claim(f"{candidate} beats the {null} arm by more than the margin (it does the replaced layers' work)",
                  "exceeds", margin, "lower", units, rests_on=rest, parts=(f"{candidate} − {null}",))
    controls = [] if not control else [
        dataclasses.replace(negative_control(claim, f"{control} − {b}", f"the {control} arm {what}"),
                            rests_on=(*rest, finished[control].name))
        for claim, b, what in ((ni, reference, f"non-inferior to the {reference}"),
                               (beats, null, f"beats the {null} arm by more than the margin"))]
    described = [Claim(f"the source's initialisation: {source} − {b}", "descriptive", units=units, primary=False,
                       parts=(f"{source} − {b}",)) for b in (candidate, null) if source]
    return [answers, *finished.values(), gate, ni, beats, *controls, *described,
            *[Claim(f"{candidate} beats {label}", "superiority", margin, "lower", units, primary=False,
                    rests_on=(*rest, finished[arm].name), parts=(f"{candidate} − {arm}",))
              for arm, label in others.items()]]


def comparisons(claims: Sequence[Claim]) -> list[tuple[str, str]]:
    """The (a, b) arm pairs the claims compare, read from their comparison names "a − b" (not the learned gates)."""
    return list(dict.fromkeys(tuple(part.split(" − ")) for c in claims if c.kind != "learned"
                              for part in c.comparisons))


def paired_losses(losses: Mapping[str, Sequence[float]], claims: Sequence[Claim]) -> dict[str, np.ndarray]:
    """Per comparison of ``claims``, the per-seed differences a − b of ``losses`` (arm → values in seed order)."""
    return {f"{a} − {b}": paired(losses[a], losses[b]) for a, b in comparisons(claims)}


def unfinished(run: Run) -> float:
    """How far ``run``'s validation loss still fell over the last quarter of its steps: its best evaluation up to three
    quarters of them minus its best after (positive: still falling). Best, not first and last: a solved task's loss
    jitters by a few hundredths between evaluations, which a difference of two single evaluations reads as learning."""
    h = run.history
    at = max(i for i, step in enumerate(h.eval_step) if step <= 0.75 * h.eval_step[-1])
    return min(h.eval_loss[: at + 1]) - min(h.eval_loss[at + 1:], default=h.eval_loss[at])


def seed_differences(claims: Sequence[Claim], runs: Sequence[Run], *, shortcut: float, pairs: int
                     ) -> dict[str, np.ndarray]:
    """What the looks read after each (``looks.run_in_looks``), per seed in seed order: ``paired_losses`` of the
    test losses, and for each learned gate its arm's accuracy at ``pairs`` bindings above ``shortcut`` or its
    ``unfinished`` fall."""
    arms = sorted({r.model for r in runs})
    out = paired_losses({a: by_seed(runs, a) for a in arms}, claims)
    for a in arms:
        out[_answers(a)] = np.array(by_seed(runs, a, lambda r: r.scores[f"k={pairs}"] - shortcut))
        out[_fall(a)] = np.array(by_seed(runs, a, unfinished))
    return out


def results_table(runs: Sequence[Run], pairs: int) -> pd.DataFrame:
    """``experiment.summarize``'s table with each arm's recall accuracy beside it, the mean over seeds of what the
    MQAR scorer reports at ``pairs`` bindings (``k=<pairs>``) and on pairs no training batch held (``unseen pairs``)."""
    table = summarize(runs)
    for column, score in (("accuracy", f"k={pairs}"), ("unseen pairs accuracy", "unseen pairs")):
        table[column] = [np.mean(by_seed(runs, a, lambda r: r.scores[score])) for a in table.index]
    return table


def design(claims: Sequence[Claim], looks: Sequence[int], *, margin: float, sd: float, alpha: float) -> pd.DataFrame:
    """The design's power, by case: the share of simulated studies through ``looks`` (``sequential.operating``, each
    primary at level ``alpha``) that hold the claim, rule it out or reach the cap undecided, and their mean seeds,
    for paired differences of seed SD ``sd`` (a pilot's) — non-inferiority with the candidate equal to the
    reference and worse by the margin, and beating the null by twice the margin. Empty without a pilot (``sd`` 0)."""
    if sd <= 0:
        return pd.DataFrame()
    ni, beats = (c for c in claims if c.primary and c.kind != "gate" and c.kind != "learned")
    cases = [("non-inferior, hybrid = baseline", ni, 0.0), ("non-inferior, worse by the margin", ni, margin),
             ("beats null, by twice the margin", beats, -2 * margin)]
    rows = [(case, operating(c, looks, mean=m, sd=sd, alpha=alpha)) for case, c, m in cases]
    return pd.DataFrame([{"case": case, "P(held)": o.efficacy, "P(not held)": o.futility,
                          "P(inconclusive at the cap)": o.cap, "mean seeds": o.seeds} for case, o in rows]
                        ).set_index("case")


def gradient_groups(cfg: HybridConfig) -> Callable[[str, torch.nn.Module], dict[str, list]]:
    """The parameter groups whose gradient norms the runs record, for an arm by name: its parameters by position
    around the span that arm puts where the baseline has the ODE layers (``layer_groups``, ``cfg.replaced_blocks``)."""
    def groups(arm: str, model: torch.nn.Module) -> dict[str, list]:
        return layer_groups(model, cfg.replaced_blocks(arm))
    return groups


def alpha_trajectories(runs: Sequence[Run], *, arm: str = "hybrid") -> dict[int, list[float]]:
    """Per seed, ``arm``'s flow output scale α after every training step (the History's record of it)."""
    return {r.seed: next(v for k, v in r.history.scalars.items() if k.endswith("field.alpha"))
            for r in sorted(runs, key=lambda r: r.seed) if r.model == arm}


def learned_alphas(runs: Sequence[Run], *, arm: str = "hybrid") -> list[float]:
    """Per seed, in seed order, the output scale α that ``arm``'s ODE block ended training with (the last of its
    ``alpha_trajectories``)."""
    return [alphas[-1] for alphas in alpha_trajectories(runs, arm=arm).values()]


def gradient_ratios(runs: Sequence[Run], *, arm: str = "hybrid", reference: str = "baseline") -> pd.DataFrame:
    """Per parameter group, ``arm``'s mean gradient norm over ``reference``'s, per seed (``experiment.grad_ratios``):
    the geometric mean over seeds with its 95 % interval."""
    def geometric(xs):
        ci = mean_ci(np.log(xs))
        return {"ratio": math.exp(ci.mean), "low": math.exp(ci.low), "high": math.exp(ci.high), "seeds": len(xs)}

    recorded = next(r for r in runs if r.model == arm).history.grad_norm
    return pd.DataFrame([{"group": g, **geometric(grad_ratios(runs, arm, reference, g))}
                         for g in ("embedding", "before", "replaced", "after", "head") if g in recorded])
