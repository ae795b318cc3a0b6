"""A replacement judged against a calibrated null: study 01's declared claims and the numbers they rest on.

"The hybrid is as good as the baseline" means nothing where removing the replaced layers costs nothing. So the
claims are declared around a **gate**: the null arm (the baseline without the replaced layers) must be worse than
the baseline by more than the non-inferiority margin — tested at α on the per-seed paired gaps, outside every
family. Resting on that gate, the primary claims are

- *non-inferiority*: candidate − reference in test loss is below the margin (lower is better);
- *beats the null*: candidate − null lies below 0 (superiority; "not held" once an advantage as large as the margin
  is ruled out) — the candidate does the removed layers' work;

and, secondary, the candidate against each ``others`` arm (superiority at the same margin). With a failed gate every
one of them reads "not testable at this scale" (``claims.settle``). With ``ablated`` (the candidate with its flow
switched off at test, ``loss_without_flow``: the same trained weights, the ODE block the identity), each primary has
its negative control — the same test on the ablated candidate, which lost the work the claim credits to the flow,
and should come out "not held".

``design`` simulates the looks for the primaries at a pilot's seed SD (the design's power). ``alpha_normalised``
puts gradient-norm ratios of an ODE block beside the learned output scale α that multiplies every weight gradient of
its vector field: a ratio of α to the baseline's is what the parameterisation predicts (``gradient_ratios``, by
the groups of ``gradient_groups``, with the α of ``learned_alphas``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

import torch

from odebook.models.arms import HybridConfig
from odebook.models.lm import ode_blocks
from odebook.study.claims import Claim, negative_control, paired
from odebook.study.experiment import Run, by_seed, grad_ratios, summarize
from odebook.study.sequential import operating
from odebook.study.stats import mean_ci
from odebook.training.runtime import Precision
from odebook.training.train import evaluate

from .arms import layer_groups

__all__ = ["GATE", "FLOW_OFF", "calibrated_claims", "comparisons", "paired_losses", "seed_losses", "seed_differences",
           "results_table", "gap_closed", "alpha_normalised", "design", "gradient_groups", "learned_alphas",
           "gradient_ratios", "loss_without_flow"]

GATE = "removing the replaced layers costs more than the margin"
FLOW_OFF = "hybrid, flow off"  # the hybrid with its flow switched off at test (``loss_without_flow``): the ablated arm


def calibrated_claims(margin: float, *, candidate: str = "hybrid", reference: str = "baseline", null: str = "null",
                      others: Mapping[str, str] = {}, ablated: str = "", units: str = "nats") -> list[Claim]:
    """The gate, the two primary claims (each followed by its negative control on the ``ablated`` arm, if named)
    and a secondary claim per ``others`` arm (name → how the claim calls it), every comparison a paired difference
    a − b of test losses named ``"a − b"`` (``comparisons``)."""
    if not margin > 0:
        raise ValueError(f"the margin must be positive ({units}), got {margin!r}")
    gate = Claim(GATE, "gate", margin, "higher", units, parts=(f"{null} − {reference}",))
    rest = (GATE,)
    ni = Claim(f"{candidate} non-inferior to the {reference}", "non-inferiority", margin, "lower", units,
               rests_on=rest, parts=(f"{candidate} − {reference}",))
    beats = Claim(f"{candidate} beats the {null} arm (it does the replaced layers' work)", "superiority", margin,
                  "lower", units, rests_on=rest, parts=(f"{candidate} − {null}",))
    controls = [] if not ablated else [
        negative_control(ni, f"{ablated} − {reference}", f"the {ablated} non-inferior to the {reference}"),
        negative_control(beats, f"{ablated} − {null}", f"the {ablated} beats the {null} arm")]
    return [gate, ni, beats, *controls,
            *[Claim(f"{candidate} beats {label}", "superiority", margin, "lower", units, primary=False,
                    rests_on=rest, parts=(f"{candidate} − {arm}",)) for arm, label in others.items()]]


def comparisons(claims: Sequence[Claim]) -> list[tuple[str, str]]:
    """The (a, b) arm pairs the claims compare, read from their comparison names "a − b"."""
    return list(dict.fromkeys(tuple(part.split(" − ")) for c in claims for part in c.comparisons))


def paired_losses(losses: Mapping[str, Sequence[float]], claims: Sequence[Claim]) -> dict[str, np.ndarray]:
    """Per comparison of ``claims``, the per-seed differences a − b of ``losses`` (arm → values in seed order)."""
    return {f"{a} − {b}": paired(losses[a], losses[b]) for a, b in comparisons(claims)}


def seed_losses(runs: Sequence[Run], batches: Sequence, precision: Precision, *, arms: Sequence[str],
                ablated: str = FLOW_OFF, candidate: str = "hybrid") -> dict[str, list[float]]:
    """Per arm, its runs' test losses in seed order; under the name ``ablated``, the ``candidate``'s runs with their
    flow switched off, scored on ``batches`` (``loss_without_flow``)."""
    off = [loss_without_flow(r.module, batches, precision) for r in by_seed(runs, candidate, lambda r: r)]
    return {**{a: by_seed(runs, a) for a in arms}, ablated: off}


def seed_differences(claims: Sequence[Claim], batches: Sequence, precision: Precision, runs: Sequence[Run], *,
                     arms: Sequence[str], ablated: str = FLOW_OFF) -> dict[str, np.ndarray]:
    """What the looks read after each (``looks.run_in_looks``): ``paired_losses`` of ``seed_losses``."""
    return paired_losses(seed_losses(runs, batches, precision, arms=arms, ablated=ablated), claims)


def results_table(runs: Sequence[Run], pairs: int) -> pd.DataFrame:
    """``experiment.summarize``'s table with each arm's recall accuracy beside it, the mean over seeds of what the
    MQAR scorer reports at ``pairs`` bindings (``k=<pairs>``) and on pairs no training batch held (``unseen pairs``)."""
    table = summarize(runs)
    for column, score in (("accuracy", f"k={pairs}"), ("unseen pairs accuracy", "unseen pairs")):
        table[column] = [np.mean(by_seed(runs, a, lambda r: r.scores[score])) for a in table.index]
    return table


def gap_closed(losses: Mapping[str, Sequence[float]], arm: str, *, reference: str = "baseline",
               null: str = "null") -> np.ndarray:
    """Per seed, the share of the null → reference gap that ``arm`` closes: (null − arm) / (null − reference);
    1 = as good as the reference, 0 = as bad as removing the layers. Meaningful only where the gap is not noise."""
    n, a, r = (np.asarray(losses[k], dtype=float) for k in (null, arm, reference))
    return (n - a) / (n - r)


def alpha_normalised(ratios: Sequence[float], alphas: Sequence[float]) -> np.ndarray:
    """Per seed, a gradient-norm ratio (ODE block over the layers it replaces) divided by the block's learned α:
    the ratio the field's weights would show without the scale α puts on all their gradients (≈ 1 when the block's
    weights receive what the replaced layers' do, beside the α it learned)."""
    r, a = np.asarray(ratios, dtype=float), np.asarray(alphas, dtype=float)
    if r.shape != a.shape:
        raise ValueError(f"one α per ratio, got {len(a)} and {len(r)}")
    return r / np.abs(a)


def design(claims: Sequence[Claim], looks: Sequence[int], *, margin: float, sd: float, alpha: float) -> pd.DataFrame:
    """The design's power, by case: the share of simulated studies through ``looks`` (``sequential.operating``, each
    primary at level ``alpha``) that hold the claim, rule it out or reach the cap undecided, and their mean seeds,
    for paired differences of seed SD ``sd`` (a pilot's) — non-inferiority with the candidate equal to the
    reference and worse by the margin, and beating the null by the margin. Empty without a pilot (``sd`` 0)."""
    if sd <= 0:
        return pd.DataFrame()
    ni, beats = claims[1], claims[2]
    cases = [("non-inferior, hybrid = baseline", ni, 0.0), ("non-inferior, worse by the margin", ni, margin),
             ("beats null, by the margin", beats, -margin)]
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


def learned_alphas(runs: Sequence[Run], cfg: HybridConfig, *, arm: str = "hybrid") -> list[float]:
    """Per seed, in seed order, the output scale α that ``arm``'s ODE block ended training with."""
    span = f"blocks.{cfg.replaced_blocks(arm).start}"
    return [r.module.get_submodule(span).field.alpha.item() for r in by_seed(runs, arm, lambda r: r)]


def gradient_ratios(runs: Sequence[Run], alphas: Sequence[float], *, arm: str = "hybrid",
                    reference: str = "baseline") -> pd.DataFrame:
    """Per parameter group, ``arm``'s mean gradient norm over ``reference``'s, per seed (``experiment.grad_ratios``):
    the geometric mean over seeds with its 95 % interval; beside the replaced span, the same divided by the α each
    seed's ``arm`` ended with (``alphas``, in seed order; ``alpha_normalised``)."""
    def geometric(xs):
        ci = mean_ci(np.log(xs))
        return {"ratio": math.exp(ci.mean), "low": math.exp(ci.low), "high": math.exp(ci.high), "seeds": len(xs)}

    recorded = next(r for r in runs if r.model == arm).history.grad_norm
    rows = []
    for g in [g for g in ("embedding", "before", "replaced", "after", "head") if g in recorded]:
        xs = grad_ratios(runs, arm, reference, g)
        rows.append({"group": g, **geometric(xs)})
        if g == "replaced":
            rows.append({"group": "replaced ÷ α", **geometric(alpha_normalised(xs, alphas))})
    return pd.DataFrame(rows)


@torch.no_grad()
def loss_without_flow(model: torch.nn.Module, batches: Sequence, precision: Precision) -> float:
    """Held-out loss of a trained hybrid with every ODE flow switched off (its output scale α set to 0, so the block
    is the identity: the blocks around it as trained, the flow's work gone), then restored."""
    blocks = ode_blocks(model)
    if not blocks:
        raise ValueError("loss_without_flow needs a model with an ODE flow block")
    trained = [b.field.alpha.detach().clone() for b in blocks]
    try:
        for b in blocks:
            b.field.alpha.zero_()
        return evaluate(model, batches, precision)
    finally:
        for b, a in zip(blocks, trained):
            b.field.alpha.copy_(a)
