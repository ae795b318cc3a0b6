"""How many bindings a state holds: study 03's capacity claims, the tables they rest on, and the capacity read from
a curve over k — the largest number of bindings k at which it still reaches a threshold (``capacity``: accuracy at
≥ 90 % by default, Zoology's reading; this study's table, ``capacity_table``, reads binding at ≥ 0.5).

Given per-seed accuracies at the tested k (seeds × ks, from MQAR, odebook.data.mqar), the estimate is the largest
tested k at which the mean accuracy over seeds, and at every smaller tested k, reaches ``threshold`` — the Zoology
reading of capacity from accuracy curves (Arora et al. 2023, arXiv:2312.04927). Its interval resamples the seeds
(a percentile bootstrap of the same statistic), so one seed that did not learn widens it instead of hiding in a
mean. The estimate is a tested k, not an interpolation: 0 means the smallest k already failed; the largest tested k
means the state was never filled (a lower bound — test larger k).

**Binding** (``binding``) is first-query accuracy on MQAR sequences as drawn minus on the same sequences re-bound
(study.recall): zero in expectation for any model that does not use which value stands beside which key. ``Arms``
names study 03's arms — GDN stacks of one width whose head counts set their state's size, their no-state controls,
attention — and each claim's comparison once; ``binding_claims`` declares a learned gate for every arm, the two
primaries (the smaller state fills up, a larger state binds more) and a secondary (the larger state binds), each
beside its negative control (the same test on the no-state controls, trained the same way), and ``binding_values``
computes what they read.
``positive_control``: attention answers the first query above the best non-binder by more than the margin at every
k, on the exact interval of its hits pooled over seeds (at the ceiling every seed answers every query, and a test
across seeds holds nothing on no spread). ``store_and_retrieve`` checks the mechanism itself: with orthonormal keys,
β = 1 and no decay, reading key i returns the value written under it.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from odebook.data import mqar
from odebook.nn.delta_rule import fla_kernel, gated_delta_rule_chunked, gated_delta_rule_reference
from odebook.study import recall
from odebook.study.claims import Claim, negative_control
from odebook.study.experiment import Run, by_seed
from odebook.study.stats import Verdict, bounded_mean_ci, proportion_ci

__all__ = ["Capacity", "capacity", "Arms", "binding_claims", "recall_task", "first_query", "binding", "all_queries",
           "binding_values", "binding_table", "capacity_table", "positive_control", "implementations",
           "store_and_retrieve", "mechanism_verdict"]
MECHANISM_KEYS = 64  # orthonormal keys written and read back by ``store_and_retrieve``


@dataclasses.dataclass(frozen=True)
class Capacity:
    """The estimate and its bootstrap interval (tested ks, 0 below the smallest), the seeds, and the threshold."""

    estimate: int
    low: int
    high: int
    ks: tuple[int, ...]
    n: int
    threshold: float
    measure: str = "accuracy"  # what the curve is: accuracy (a share) or binding (a difference of accuracies)

    @property
    def lower_bound(self) -> bool:
        """The largest tested k still reached the threshold: the capacity may be larger."""
        return self.estimate == self.ks[-1]

    def __str__(self) -> str:
        where = (f"≥ {self.estimate} (every tested k up to {self.ks[-1]} reached it)" if self.lower_bound
                 else f"< {self.ks[0]} (the smallest k failed)" if self.estimate == 0 else str(self.estimate))
        at = (f"≥ {self.threshold:.0%} accuracy" if self.measure == "accuracy"
              else f"{self.measure} ≥ {self.threshold:g}")
        return (f"capacity at {at}: {where}; seed bootstrap 95 % [{self.low}, {self.high}] "
                f"(n = {self.n} seeds, k tested {list(self.ks)})")


def _largest(mean: np.ndarray, ks: np.ndarray, threshold: float) -> np.ndarray:
    """Per row of mean accuracies (…, len(ks)): the largest k whose row prefix all reaches ``threshold``; 0 if none."""
    ok = np.cumprod(mean >= threshold, axis=-1).astype(bool)
    reached = ok.sum(axis=-1)
    return np.where(reached > 0, ks[np.maximum(reached - 1, 0)], 0)


def capacity(ks: Sequence[int], accuracy: np.ndarray, *, threshold: float = 0.9, level: float = 0.95,
             resamples: int = 4000, seed: int = 0, measure: str = "accuracy") -> Capacity:
    """``accuracy``: (seeds, len(ks)) accuracies (or another ``measure`` on their scale) at increasing ``ks``."""
    ks_a, acc = np.asarray(ks, dtype=int), np.asarray(accuracy, dtype=float)
    if acc.ndim != 2 or acc.shape[1] != len(ks_a) or len(ks_a) == 0 or np.any(np.diff(ks_a) <= 0):
        raise ValueError(f"capacity needs accuracies of shape (seeds, {len(ks_a)}) at increasing ks, got shape "
                         f"{acc.shape} and ks {list(ks)}")
    estimate = int(_largest(acc.mean(axis=0), ks_a, threshold))
    rows = np.random.default_rng(seed).integers(0, len(acc), size=(resamples, len(acc)))
    boot = _largest(acc[rows].mean(axis=1), ks_a, threshold)
    tail = (1 - level) / 2
    low, high = (int(np.quantile(boot, q, method="inverted_cdf")) for q in (tail, 1 - tail))
    return Capacity(estimate, low, high, tuple(int(k) for k in ks_a), len(acc), threshold, measure)


@dataclasses.dataclass(frozen=True)
class Arms:
    """Study 03's MQAR arms: GDN stacks at ``width`` with ``heads`` heads, most first (the smallest state first), their
    no-state controls, and attention; the tested ``ks``, the claims' ``margin``; the name of each comparison and each
    learned gate's, written once."""

    heads: tuple[int, ...]
    width: int
    ks: tuple[int, ...]
    margin: float

    @property
    def small(self) -> str:
        return f"gdn h{self.heads[0]}"

    @property
    def large(self) -> str:
        return f"gdn h{self.heads[-1]}"

    @property
    def no_state_small(self) -> str:
        return f"no state h{self.heads[0]}"

    @property
    def no_state_large(self) -> str:
        return f"no state h{self.heads[-1]}"

    @property
    def binds(self) -> str:
        return f"k={min(self.ks)}: {self.large}, as drawn − re-bound"

    @property
    def no_state(self) -> str:
        return f"k={min(self.ks)}: {self.no_state_large}, as drawn − re-bound"

    @property
    def fills(self) -> str:
        return f"{self.small}: binding at k={min(self.ks)} − at k={max(self.ks)}"

    @property
    def no_state_fills(self) -> str:
        return f"{self.no_state_small}: binding at k={min(self.ks)} − at k={max(self.ks)}"

    @property
    def more(self) -> str:
        return f"k={max(self.ks)}: binding, {self.large} − {self.small}"

    @property
    def no_state_more(self) -> str:
        return f"k={max(self.ks)}: binding, {self.no_state_large} − {self.no_state_small}"

    @property
    def learners(self) -> tuple[str, ...]:
        """The arms with a learned gate: every arm a claim or a control compares, and attention."""
        return (self.small, self.large, "attention", self.no_state_small, self.no_state_large)

    def learned(self, arm: str) -> str:
        """The part ``arm``'s learned gate reads: at the fewest pairs, first-query accuracy above the best non-binder
        (an arm that binds), or, for a no-state control, accuracy over every query above chance (what a model with
        no memory can learn: the answers next to their pairs, the values' half of the vocabulary)."""
        few = min(self.ks)
        return (f"k={few}: {arm}, all queries − chance" if arm.startswith("no state")
                else f"k={few}: {arm}, first query − best non-binder")


def binding_claims(a: Arms) -> list[Claim]:
    """A learned gate for every arm; the two primaries (the smaller state fills up, a larger state binds more at the
    most pairs) and a secondary (the larger state binds at the fewest pairs: its learned gate nearly implies it, so it
    decides nothing a primary should), each an *exceeds* claim at the margin resting on the gates of its arms and of
    its control's, each followed by its negative control: the same test on the no-state controls, trained the same way
    (the GDN layers with their state emptied before every write)."""
    few, most, m = min(a.ks), max(a.ks), f"{a.margin:g}"
    claim = functools.partial(Claim, kind="exceeds", margin=a.margin, direction="higher", units="accuracy")
    gate = {arm: Claim(f"learned: {arm} — " + ("answers every query above chance" if arm.startswith("no state") else
                                               "answers the first query above the best non-binder")
                       + f" at {few} pairs by more than {m} in every seed", "learned", a.margin, "higher", "accuracy",
                       primary=False, parts=(a.learned(arm),)) for arm in a.learners}

    def on(*arms):
        return tuple(gate[arm].name for arm in arms)

    def control(of: Claim, part: str, what: str, *arms) -> Claim:
        return dataclasses.replace(negative_control(of, part, what), rests_on=on(*arms))

    small, large = (f"{h} head{'s' * (h > 1)} of {a.width // h}-dim keys" for h in (a.heads[0], a.heads[-1]))
    fills = claim(f"the smaller GDN state ({a.small}: {small}) fills up: its binding falls from {few} to {most} pairs "
                  f"by more than {m} (runs that learned: the restart rule)", parts=(a.fills,),
                  rests_on=on(a.small, a.no_state_small))
    more = claim(f"a larger state binds more: at {most} pairs, {a.large}'s binding minus {a.small}'s exceeds {m} (the "
                 f"same width: {large} against {small}, {a.heads[0] // a.heads[-1]}× the state — the state's size and "
                 "its keys' dimension change together; runs that learned: the restart rule)", parts=(a.more,),
                 rests_on=on(a.large, a.small, a.no_state_large, a.no_state_small))
    binds = claim(f"the larger GDN state ({a.large}) binds: at {few} pairs it answers the first query better on the "
                  f"sequences as drawn than re-bound, by more than {m}", primary=False, parts=(a.binds,),
                  rests_on=on(a.large, a.no_state_large))
    return [*gate.values(),
            fills, control(fills, a.no_state_fills, f"{a.no_state_small} (no state) 'fills up' from {few} to {most} "
                                                    f"pairs by more than {m}", a.no_state_small),
            more, control(more, a.no_state_more, f"fewer heads with no state bind more: at {most} pairs, "
                                                 f"{a.no_state_large} minus {a.no_state_small} exceeds {m}",
                          a.no_state_large, a.no_state_small),
            binds, control(binds, a.no_state, f"{a.no_state_large} (no state) binds at {few} pairs by more than {m}",
                           a.no_state_large)]


def recall_task(p, vocab: mqar.Vocab, device: torch.device) -> tuple[dict, object, dict[int, float]]:
    """Study 03's MQAR task from ``p``: the first-query scoring sets, drawn anew for each series of seeds (generator
    ``p.eval_seed + p.seed``), the task (training stream over ``p.mqar_train_ks``, evaluation at ``p.mqar_eval_ks``)
    and the best non-binder's first-query accuracy per k."""
    ks = p.mqar_eval_ks
    sets = recall.scoring_sets(vocab=vocab, ks=ks, batch_size=p.mqar_batch_size, seq_len=p.mqar_seq_len,
                               power_a=p.mqar_power_a, seed=p.eval_seed + p.seed)
    task = recall.mqar_task(vocab=vocab, train_ks=p.mqar_train_ks, eval_ks=ks, batch_size=p.mqar_batch_size,
                            seq_len=p.mqar_seq_len, eval_batches=p.mqar_eval_batches, power_a=p.mqar_power_a,
                            device=device, first=sets)
    return sets, task, {k: float(np.mean([recall.non_binder(b, vocab) for b in s])) for k, s in sets.items()}


def first_query(runs: Sequence[Run], arm: str, k: int, ablation: str = "", rebound: bool = False) -> np.ndarray:
    """Per seed (in seed order): ``arm``'s first-query accuracy at ``k`` pairs on the scoring sets, as drawn or
    re-bound, normal or under ``ablation``."""
    name = recall.first_name(k, ablation=ablation, rebound=rebound)
    return np.array(by_seed(runs, arm, lambda r: r.scores[name]))


def binding(runs: Sequence[Run], arm: str, k: int, ablation: str = "") -> np.ndarray:
    """Per seed: first-query accuracy on the sequences as drawn minus on the same sequences re-bound."""
    return first_query(runs, arm, k, ablation) - first_query(runs, arm, k, ablation, rebound=True)


def all_queries(runs: Sequence[Run], arm: str, k: int | str) -> np.ndarray:
    """Per seed: ``arm``'s accuracy over every query at ``k`` pairs (``"unseen"``: the held-out pairs)."""
    name = "unseen pairs" if k == "unseen" else f"k={k}"
    return np.array(by_seed(runs, arm, lambda r: r.scores[name]))


def binding_values(a: Arms, runs: Sequence[Run], *, non_binder: Mapping[int, float],
                   chance: float) -> dict[str, np.ndarray]:
    """What ``binding_claims`` read, per seed: the learned gates' (against the best non-binder's first-query accuracy
    ``non_binder`` per k, or ``chance``) and the claims' and controls' bindings."""
    b, few, most = functools.partial(binding, runs), min(a.ks), max(a.ks)
    gates = {a.learned(arm): (all_queries(runs, arm, few) - chance if arm.startswith("no state")
                              else first_query(runs, arm, few) - non_binder[few]) for arm in a.learners}
    return gates | {
        a.binds: b(a.large, few), a.no_state: b(a.no_state_large, few),
        a.fills: b(a.small, few) - b(a.small, most),
        a.no_state_fills: b(a.no_state_small, few) - b(a.no_state_small, most),
        a.more: b(a.large, most) - b(a.small, most),
        a.no_state_more: b(a.no_state_large, most) - b(a.no_state_small, most)}


def binding_table(runs: Sequence[Run], arms: Sequence[str], ks: Sequence[int], *, non_binder: Mapping[int, float],
                  chance: float, lrs: Mapping[str, float]) -> pd.DataFrame:
    """Per arm and k: first-query accuracy (mean over seeds, its interval across seeds cut to [0, 1]) beside the best
    non-binder, on re-bound sequences, the binding with its interval, over every query, and on unseen pairs at the
    largest k."""
    rows, n = [], len({r.seed for r in runs})
    for arm in arms:
        for k in ks:
            ci, bound = bounded_mean_ci(first_query(runs, arm, k)), bounded_mean_ci(binding(runs, arm, k), low=-1)
            rows.append({"arm": arm, "k": k, "first query": ci.mean, "seed lo": ci.low, "seed hi": ci.high, "n": n,
                         "best non-binder": non_binder[k], "excess": ci.mean - non_binder[k],
                         "re-bound": first_query(runs, arm, k, rebound=True).mean(), "binding": bound.mean,
                         "binding lo": bound.low, "binding hi": bound.high,
                         "all queries": all_queries(runs, arm, k).mean(),
                         "unseen pairs (all queries)": (all_queries(runs, arm, "unseen").mean() if k == max(ks)
                                                        else np.nan),
                         "chance": chance, "lr": lrs[arm]})
    return pd.DataFrame(rows).set_index(["arm", "k"])


def capacity_table(runs: Sequence[Run], heads: Sequence[int], ks: Sequence[int], *, layers: int,
                   width: int) -> tuple[dict[int, Capacity], pd.DataFrame]:
    """Each GDN stack's capacity at binding ≥ 0.5 (about half the pairs bound), by its heads, with its state's size."""
    capacities = {h: capacity(ks, np.array([binding(runs, f"gdn h{h}", k) for k in ks]).T, threshold=0.5,
                              measure="binding") for h in heads}
    return capacities, pd.DataFrame([{"arm": f"gdn h{h}", "state (numbers)": layers * width * width // h,
                                      "key dimension": width // h,
                                      "capacity": c.estimate, "lo": c.low, "hi": c.high, "lower bound": c.lower_bound,
                                      "seeds": c.n} for h, c in capacities.items()]).set_index("arm")


def positive_control(runs: Sequence[Run], ks: Sequence[int], *, non_binder: Mapping[int, float], margin: float,
                     queries: int) -> Verdict:
    """Attention answers the first query above the best non-binder by more than ``margin`` at every k: held when
    every k's exact 95 % interval of first-query hits pooled over seeds (``queries`` per seed and k) lies above it, not
    held when one lies below."""
    seeds = len({r.seed for r in runs})
    pooled = {k: proportion_ci(round(first_query(runs, "attention", k).sum() * queries), queries * seeds,
                               method="exact") for k in ks}
    above = [ci.low > non_binder[k] + margin for k, ci in pooled.items()]
    below = [ci.high < non_binder[k] + margin for k, ci in pooled.items()]
    return Verdict(f"positive control: attention answers the first query above the best non-binder by more "
                   f"than {margin:g} at every k in {list(ks)}",
                   "held" if all(above) else "not held" if any(below) else "inconclusive",
                   "; ".join(f"k={k}: {ci.mean:.4f} [{ci.low:.4f}, {ci.high:.4f}] against {non_binder[k]:.3f} + "
                             f"{margin:g}" for k, ci in pooled.items())
                   + f" (exact 95 % intervals of {queries * seeds} first queries pooled over seeds)",
                   "", "the exact binomial interval, pooled over seeds", "positive control, alone at α")


def implementations(chunk_size: int, device: torch.device) -> dict[str, Callable]:
    """The gated delta rule's implementations that run here: the reference loop, the chunked form, and fla-core's
    kernel on CUDA where it runs correctly."""
    out = {"reference": gated_delta_rule_reference,
           "chunked": functools.partial(gated_delta_rule_chunked, chunk_size=chunk_size)}
    if device.type == "cuda" and (kernel := fla_kernel()) is not None:
        out["fla-core (CUDA)"] = functools.partial(kernel, output_final_state=True)
    return out


def store_and_retrieve(chunk_size: int, *, seed: int, device: torch.device,
                       size: int = MECHANISM_KEYS) -> dict[str, float]:
    """Each implementation's (``implementations``) MSE reading ``size`` orthonormal keys back from the state after
    writing value i under key i (β = 1, g = 0): ≈ 0 for a delta rule that stores and retrieves."""
    keys = torch.linalg.qr(torch.randn(size, size, generator=torch.Generator().manual_seed(seed)))[0].T
    values = torch.randn(size, size, generator=torch.Generator().manual_seed(seed + 1))
    mse = {}
    for name, fn in implementations(chunk_size, device).items():
        k = keys[None, :, None, :].to(device)
        _, S = fn(k, k, values[None, :, None, :].to(device), torch.zeros(1, size, 1, device=device),
                  torch.ones(1, size, 1, device=device))
        mse[name] = F.mse_loss(keys.to(S.device) @ S[0, 0], values.to(S.device)).item()
    return mse


def mechanism_verdict(mse: Mapping[str, float], *, tolerance: float = 0.01) -> Verdict:
    """Every implementation stores and retrieves: its ``store_and_retrieve`` MSE below ``tolerance``."""
    return Verdict(f"every implementation stores and retrieves (MSE < {tolerance:g})",
                   "held" if all(v < tolerance for v in mse.values()) else "not held",
                   ", ".join(f"{k}: {v:.2g}" for k, v in mse.items()), f"K = {MECHANISM_KEYS}, one head")
