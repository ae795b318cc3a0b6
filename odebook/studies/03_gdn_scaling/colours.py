"""Study 03's name-colour runs: the GDN-only stacks of ``retrieval_sizes`` trained on the retrieval curriculum, and the
claims on the facts they bind (odebook.study.retrieval scores them)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from odebook.data import tasks
from odebook.data.corpus import Tokenizer
from odebook.study.claims import Claim, negative_control, paired
from odebook.study.experiment import Run, run_seeds
from odebook.study.retrieval import COLOUR_SETS, curriculum_task, per_seed
from odebook.training.train import TrainConfig

from .scaling import size_name

__all__ = ["colour_runs", "colour_claims"]


def colour_runs(p, tok: Tokenizer, precision, **options) -> list[Run]:
    """Study 03's GDN-only stacks at ``p.retrieval_sizes`` (indices into ``p``'s ladder; runs named "retrieval_d64×1",
    their rows labelled with the size) on the curriculum (``p.curriculum`` filler sentences per stage, equal steps per
    stage, k drawn from ``p.ks``), every seed of ``p``'s plan; scored normal and with the state zeroed on the
    evaluation sets of generator ``p.eval_seed``. Returned by size, seeds in order."""
    sizes = {size_name(p, i): i for i in p.retrieval_sizes}
    stages = tasks.equal_stages(p.curriculum, p.retrieval_steps)
    sets = tasks.evaluation_sets(p.retrieval_eval_examples, p.eval_seed, ks=p.ks, n_filler=max(p.curriculum))
    valid = [tasks.batch(sets[("random", max(p.ks))][:p.retrieval_batch_size], tok)[:2]]
    curricula = {f"retrieval_{n}": curriculum_task(tok, batch_size=p.retrieval_batch_size, stages=stages, ks=p.ks,
                                                   valid=valid, sets=sets, device=precision.device, window=p.window,
                                                   ablations=("normal", "state zeroed"), size=n) for n in sizes}
    runs = run_seeds({f"retrieval_{n}": p.size_config(i, "gdn").build for n, i in sizes.items()}, curricula,
                     TrainConfig.from_params(p, steps=p.retrieval_steps), precision, seeds=p.seed_plan.seeds,
                     keep=False, **options)
    return [r for n in sizes for r in runs if r.model == f"retrieval_{n}"]


def colour_claims(facts: pd.DataFrame, memoryless: pd.DataFrame, seeds: Sequence[int], *, sizes: Sequence[str], k: int,
                  margin: float) -> tuple[list[Claim], dict[str, np.ndarray]]:
    """Study 03's secondary family: each GDN-only size binds ``k`` names to colours beyond the best shortcut on the
    same examples (random placement, and unseen pairs), superiority at ``margin``; beside the random-placement claim
    its negative control, the same test on the stack with its state zeroed (``memoryless``'s rows: a model that binds
    nothing). Returns the claims and their per-seed differences (accuracy − best shortcut)."""
    claims, values = [], {}
    for size in sizes:
        for set_, what in COLOUR_SETS:
            part, where = f"{size}, {set_}: accuracy − shortcut", {"size": size, "set": set_, "k": k}
            values[part] = paired(per_seed(facts, seeds, **where), per_seed(facts, seeds, shortcut=True, **where))
            claims.append(Claim(f"the {size} GDN state binds {k} {what} beyond the best shortcut", "superiority",
                                margin, "higher", "accuracy", primary=False, parts=(part,)))
            if set_ == "random":
                values[f"{part}, state zeroed"] = paired(per_seed(memoryless, seeds, **where),
                                                         per_seed(memoryless, seeds, shortcut=True, **where))
                claims.append(negative_control(claims[-1], f"{part}, state zeroed", f"the {size} stack with its state "
                                               f"zeroed binds {what} beyond the best shortcut"))
    return claims, values
