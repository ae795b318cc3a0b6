"""Study 02's plan (odebook.study.plan): what its notebook runs, costed by its budget before the first step."""

from __future__ import annotations

from odebook.data import corpus
from odebook.study.plan import Plan, Runs, Stage, Work
from odebook.study.task import lm_task
from odebook.training.train import TrainConfig

from .analysis import TIMED
from .params import TimeIndexedParams

__all__ = ["data", "plan"]


def data(p: TimeIndexedParams) -> corpus.TokenSplits:
    """The corpus in the profile's tokens."""
    return corpus.tokenize(corpus.load_corpus(p.corpus, **p.corpus_files()), corpus.get_tokenizer(p.tokenizer))


def plan(p: TimeIndexedParams, splits: corpus.TokenSplits) -> Plan:
    """"seeds": every model of ``models`` on its grid on the tuning seeds (with its extensions, at most
    ``lr_extensions``), then its seeds; "sensitivity": primary (1)'s arms re-run at the one-standard-error rule's
    rates, costed as the TI-MLP's seeds (the family with the flat curve is the one that rule moves); then the steps
    of each pair of ``TIMED`` it trains, timed interleaved on the first batch of seed ``seed`` (odebook.study.timing:
    three warm-up pairs, ``timing_reps`` timed)."""
    task = lm_task(splits, batch_size=p.batch_size, seq_len=p.seq_len, eval_batches=p.eval_batches)
    arms, config = p.arms(splits.vocab_size), TrainConfig.from_params(p)
    stages = {"seeds": Stage(arms, task, config, p.n_seeds, p.lr_grid, p.lr_extensions, p.tuning_seeds)}
    if {"ti_mlp", "standard", "tong"} <= set(p.models):
        stages["sensitivity"] = Stage({"ti_mlp": arms["ti_mlp"]}, task, config, p.n_seeds, part="sensitivity")
    batch = next(task.batches(p.seed))
    step = Work(p.timing_reps + 3, lambda: batch)
    timed = [m for pair in TIMED if set(pair) <= set(p.models) for m in pair]
    return Plan(stages, tuple(Runs(m, arms[m], 1, (step,), part="timing", setup=False, executed=False, per_seed=False)
                              for m in timed))
