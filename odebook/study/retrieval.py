"""Scoring of the retrieval task (odebook.data.tasks) under ablations, the rows the retrieval studies report, and their
summaries: per example, the hit of the model's top-1 answer and of each shortcut; then accuracy with chance and the
best shortcut beside it — with an example-level Wilson interval (one run) and a Student-t interval across seeds
cut to [0, 1].

Distances are binned relative to a local window w: 'inside' (≤ w tokens from the fact to the question), 'just beyond'
(w < d ≤ 2w), 'far beyond' (> 2w).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import torch

from odebook.data import tasks
from odebook.data.corpus import Tokenizer
from odebook.params.retrieval import ABLATIONS
from odebook.study.stats import bounded_mean_ci, proportion_ci
from odebook.study.task import Task

__all__ = ["ABLATIONS", "distance_bin", "BINS", "SHORTCUTS", "score_rows", "curriculum_task", "best_shortcut",
           "summary", "across_seeds", "per_seed", "COLOUR_SETS"]

BINS = ("inside", "just beyond", "far beyond")
SHORTCUTS = tuple(tasks.shortcuts(tasks.make_examples(1, 0, k=1, n_filler=0)[0]))
COLOUR_SETS = (("random", "names to colours"), ("unseen pairs", "held-out pairs (never bound in training)"))


def distance_bin(d: int, window: int) -> str:
    return "inside" if d <= window else "just beyond" if d <= 2 * window else "far beyond"


@torch.no_grad()
def score_rows(model: torch.nn.Module, sets: Mapping[tuple[str, int], Sequence[tasks.Example]], tok: Tokenizer,
               device: torch.device, *, window: int, ablations: Sequence[str] = ("normal",),
               batch_size: int = tasks.SCORE_BATCH, **labels) -> pd.DataFrame:
    """One row per (set, k, ablation, example): the top-1 hit, the shortcut hits, distance and its bin, plus
    ``labels`` (run labels such as seed, arm)."""
    model.eval()
    rows = []
    for (name, k), examples in sets.items():
        extra = [(tasks.distance(ex, tok), tasks.shortcuts(ex)) for ex in examples]
        for ablation in ablations:
            hits: list[bool] = []
            for start in range(0, len(examples), batch_size):
                x, y, last = tasks.batch(examples[start:start + batch_size], tok)
                rows_ = torch.arange(len(x))
                h = model.run(x.to(device), ablation=ABLATIONS[ablation])[0][rows_, last.to(device)]
                logits, answer = model.logits(h), y[rows_, last].to(device)  # the head at the answer position only
                hits += (logits.argmax(-1) == answer).tolist()
            rows += [{**labels, "set": name, "k": k, "ablation": ablation, "hit": float(hit), "distance": d,
                      "bin": distance_bin(d, window), **sc}
                     for hit, (d, sc) in zip(hits, extra)]
    return pd.DataFrame(rows)


def _scored_rows(run, *, sets, tok, device, window, ablations, labels) -> pd.DataFrame:
    return score_rows(run.module, sets, tok, device, window=window, ablations=ablations, **labels, seed=run.seed)


def curriculum_task(tok: Tokenizer, *, batch_size: int, stages: Sequence[tuple[int, int]], ks: Sequence[int],
                    valid: Sequence, sets: Mapping[tuple[str, int], Sequence[tasks.Example]], device: torch.device,
                    window: int, ablations: Sequence[str], **labels) -> Task:
    """The retrieval curriculum as a run's task (odebook.study.task): the seed's stream of prompts stage by stage
    (tasks.curriculum_batches), ``valid`` evaluated during training, and the trained model scored on ``sets`` under
    each of ``ablations`` (``score_rows``, its rows labelled with ``labels`` and the run's seed)."""
    return Task(batches=functools.partial(tasks.curriculum_batches, tok, batch_size, stages=stages, ks=ks), valid=valid,
                score=functools.partial(_scored_rows, sets=sets, tok=tok, device=device, window=window,
                                        ablations=ablations, labels=labels))


def best_shortcut(rows: pd.DataFrame) -> float:
    """The accuracy of the best single shortcut on ``rows``: the highest mean over the shortcut columns (one rule for
    all examples, not the best per example)."""
    return float(rows[list(SHORTCUTS)].mean().max())


def summary(rows: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """Accuracy per group of ``by`` with its example-level Wilson 95 % interval (examples of one or more runs pooled:
    it says nothing about training variance), chance, and the best shortcut's accuracy on the same examples."""
    shortcut_cols = list(SHORTCUTS)
    g = rows.groupby(list(by), sort=False)
    out = g.agg(acc=("hit", "mean"), n=("hit", "size"), hits=("hit", "sum"), **{c: (c, "mean") for c in shortcut_cols})
    ci = [proportion_ci(int(h), int(n)) for h, n in zip(out.hits, out.n)]
    out["example lo"], out["example hi"] = [c.low for c in ci], [c.high for c in ci]
    out["chance"] = tasks.CHANCE
    out["best shortcut"] = out[shortcut_cols].max(axis=1)
    return out.drop(columns="hits")[["acc", "example lo", "example hi", "n", "chance", "best shortcut", *shortcut_cols]]


def across_seeds(rows: pd.DataFrame, by: Sequence[str], seed: str = "seed") -> pd.DataFrame:
    """Per group of ``by``: mean accuracy over seeds with its Student-t 95 % interval across seeds, cut to [0, 1]
    (``stats.bounded_mean_ci``), the number of seeds, chance and the best shortcut."""
    out = []
    for key, grp in rows.groupby(list(by), sort=False):
        ci = bounded_mean_ci(grp.groupby(seed).hit.mean().tolist())
        out.append({**dict(zip(by, key if isinstance(key, tuple) else (key,))), "acc": ci.mean, "seed lo": ci.low,
                    "seed hi": ci.high, "seeds": ci.n, "chance": tasks.CHANCE, "best shortcut": best_shortcut(grp)})
    return pd.DataFrame(out).set_index(list(by))


def per_seed(rows: pd.DataFrame, seeds: Sequence[int], *, shortcut: bool = False, seed: str = "seed",
             **where) -> np.ndarray:
    """Accuracy per seed (in the order of ``seeds``) of the rows where each column named in ``where`` equals its value
    (e.g. set="far", ablation="state zeroed"); with ``shortcut``, the best shortcut's accuracy on those rows instead.
    The per-seed values a paired test takes (seeds share their evaluation examples)."""
    sel = rows
    for col, val in where.items():
        sel = sel[sel[col] == val]
    groups = sel.groupby(seed)
    values = groups.apply(best_shortcut) if shortcut else groups.hit.mean()
    return values.reindex(list(seeds)).to_numpy(dtype=float)
