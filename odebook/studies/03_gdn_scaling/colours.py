"""Study 03's name-colour runs: the GDN-only stacks of ``retrieval_sizes`` trained on the retrieval curriculum, and the
claims on the facts they bind (odebook.study.retrieval scores them)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import torch

from odebook.data import tasks
from odebook.data.corpus import Tokenizer
from odebook.study.claims import Claim, negative_control, paired
from odebook.study.experiment import Run, run_seeds
from odebook.study.plan import Stage, retrieval_scoring
from odebook.study.retrieval import COLOUR_SETS, curriculum_task, per_seed
from odebook.training.train import TrainConfig

from .no_state import NoStateConfig
from .scaling import size_name

__all__ = ["NO_STATE", "colour_stage", "colour_runs", "colour_claims"]


NO_STATE = " no state"  # the suffix of a size's no-state control, in run names and row labels


def colour_stage(p, tok: Tokenizer, device: torch.device) -> Stage:
    """Study 03's GDN-only stacks at ``p.retrieval_sizes`` (indices into ``p``'s ladder; arms named "retrieval_d64×1",
    their rows labelled with the size) and each one's no-state control (the same stack with its state emptied before
    every write, trained the same way; rows labelled "d64×1 no state") on the curriculum (``p.curriculum`` filler
    sentences per stage, equal steps per stage, k drawn from ``p.ks``), every seed; scored on the evaluation sets of
    generator ``p.eval_seed``."""
    configs = {}
    for i in p.retrieval_sizes:
        gdn = p.size_config(i, "gdn")
        configs |= {size_name(p, i): gdn, size_name(p, i) + NO_STATE: NoStateConfig.of(gdn)}
    stages = tasks.equal_stages(p.curriculum, p.retrieval_steps)
    sets = tasks.evaluation_sets(p.retrieval_eval_examples, p.eval_seed, ks=p.ks, n_filler=max(p.curriculum))
    valid = [tasks.batch(sets[("random", max(p.ks))][:p.retrieval_batch_size], tok)[:2]]
    curricula = {f"retrieval_{n}": curriculum_task(tok, batch_size=p.retrieval_batch_size, stages=stages, ks=p.ks,
                                                   valid=valid, sets=sets, device=device, window=p.window,
                                                   ablations=("normal",), size=n) for n in configs}
    return Stage({f"retrieval_{n}": c.build for n, c in configs.items()}, curricula,
                 TrainConfig.from_params(p, steps=p.retrieval_steps), p.n_seeds, part="retrieval",
                 scored=retrieval_scoring(sets, tok),
                 family={f"retrieval_{n}": "no state" if n.endswith(NO_STATE) else "gdn" for n in configs})


def colour_runs(stage: Stage, precision, *, seeds: Sequence[int], **options) -> list[Run]:
    """``colour_stage``'s runs on ``seeds``, by size, seeds in order."""
    runs = run_seeds(stage.arms, stage.task, stage.config, precision, seeds=seeds, keep=False, **options)
    return [r for n in stage.arms for r in runs if r.model == n]


def colour_claims(facts: pd.DataFrame, seeds: Sequence[int], *, sizes: Sequence[str], k: int,
                  margin: float) -> tuple[list[Claim], dict[str, np.ndarray]]:
    """Study 03's secondary family: each GDN-only size binds ``k`` names to colours beyond the best shortcut on the
    same examples (random placement, and unseen pairs), superiority at ``margin``; beside the random-placement claim
    its negative control, the same test on the size's no-state control (its rows in ``facts``, labelled with
    ``NO_STATE``). Returns the claims and their per-seed differences (accuracy − best shortcut)."""
    claims, values = [], {}

    def beyond(size: str, set_: str) -> tuple[str, np.ndarray]:
        where = {"size": size, "set": set_, "k": k}
        return (f"{size}, {set_}: accuracy − shortcut",
                paired(per_seed(facts, seeds, **where), per_seed(facts, seeds, shortcut=True, **where)))

    for size in sizes:
        for set_, what in COLOUR_SETS:
            part, values_ = beyond(size, set_)
            values[part] = values_
            claims.append(Claim(f"the {size} GDN state binds {k} {what} beyond the best shortcut", "superiority",
                                margin, "higher", "accuracy", primary=False, parts=(part,)))
            if set_ == "random":
                control, values_ = beyond(size + NO_STATE, set_)
                values[control] = values_
                claims.append(negative_control(claims[-1], control, f"the {size} stack with no state (trained the "
                                               f"same way) binds {what} beyond the best shortcut"))
    return claims, values
