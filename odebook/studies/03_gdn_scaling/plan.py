"""Study 03's plan (odebook.study.plan): what its notebook loads and runs, costed by its budget before its first
step."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import torch

from odebook.data import corpus, mqar
from odebook.study.plan import Plan, Stage, Work
from odebook.study.task import Task, lm_task
from odebook.training.train import TrainConfig

from . import capacity, restarts
from .colours import colour_stage
from .params import GDNScalingParams
from .scaling import ladder_stage

__all__ = ["Data", "data", "plan"]


@dataclasses.dataclass(frozen=True)
class Data:
    """The tokenizer of the name-colour prompts and the ladder's corpus (None where the profile lists no series);
    MQAR's vocabulary, its arms' names (``capacity.Arms``), its first-query scoring sets, its task (with the restart
    rule's check), the best non-binder's first-query accuracy per k, and the restart rule."""
    tok: corpus.Tokenizer
    splits: corpus.TokenSplits | None
    vocab: mqar.Vocab
    arms: capacity.Arms
    score_sets: Mapping[int, list]
    task: Task
    shortcut: Mapping[int, float]
    rule: restarts.Restarts


def data(p: GDNScalingParams, device: torch.device = torch.device("cpu")) -> Data:
    """What the notebook reads: MQAR's sets, drawn anew for each series of seeds (capacity.recall_task), and the
    restart rule's check beside them (restarts.with_rule); the tokenizer; the corpus where a ladder runs."""
    tok, vocab = corpus.get_tokenizer(p.tokenizer), mqar.Vocab(p.mqar_keys)
    splits = corpus.tokenize(corpus.load_corpus(p.corpus), tok) if p.series else None
    arms = capacity.Arms(tuple(p.mqar_heads), p.mqar_width, tuple(p.mqar_eval_ks), p.mqar_margin)
    sets, task, shortcut = capacity.recall_task(p, vocab, device)
    task, rule = restarts.with_rule(p, arms, task, vocab, device)
    return Data(tok, splits, vocab, arms, sets, task, shortcut, rule)


def plan(p: GDNScalingParams, d: Data, device: torch.device = torch.device("cpu")) -> Plan:
    """"MQAR": every arm (``mqar_arms``; its family gdn, no state or attention) on its grid with every extension it
    may take on the tuning seeds, then every seed, scored on every k's set and the held-out pairs, on the first
    queries as drawn and re-bound, and on the restart rule's check (training steps on sequences of ``mqar_seq_len``
    tokens cost the same at every k; a restart, at most ``mqar_restarts`` of a seed's pair, is not counted);
    "retrieval": the name-colour stacks (colours.colour_stage); "ladder": every series at every size, where the
    profile lists one (scaling.ladder_stage)."""
    first = [(b.x, b.y) for batches in d.score_sets.values() for b in batches]
    scored = (Work(len(d.task.valid) + p.mqar_eval_batches, lambda: d.task.valid[0], train=False),  # + unseen pairs
              Work(2 * len(first) + len(next(iter(d.score_sets.values()))), lambda: first[0], train=False))
    arms = {n: a.build for n, a in p.mqar_arms().items()}
    stages = {"MQAR": Stage(arms, d.task, TrainConfig.from_params(p, steps=p.mqar_steps), p.n_seeds, p.mqar_lr_grid,
                            p.mqar_lr_extensions, p.tuning_seeds, part="MQAR", scored=scored,
                            family={n: n.split(" h")[0] for n in arms}),
              "retrieval": colour_stage(p, d.tok, device)}
    if d.splits is not None:
        stages["ladder"] = ladder_stage(p, lm_task(d.splits, batch_size=p.batch_size, seq_len=p.seq_len,
                                                   eval_batches=p.eval_batches))
    return Plan(stages)
