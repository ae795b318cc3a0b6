"""Study 01's plan (odebook.study.plan): what its notebook runs, costed by its budget before the first step."""

from __future__ import annotations

import torch

from odebook.data import corpus, mqar
from odebook.study.plan import Plan, Stage, Work
from odebook.study.recall import mqar_task
from odebook.study.task import lm_task
from odebook.training.train import TrainConfig

from .arms import gradient_flow_arms, mqar_arms
from .params import GradientFlowParams

__all__ = ["data", "plan"]


def data(p: GradientFlowParams) -> corpus.TokenSplits | None:
    """The WikiText section's corpus in the profile's tokens (None where it runs no seed: MQAR makes its own)."""
    if not p.lm_seeds:
        return None
    return corpus.tokenize(corpus.load_corpus(p.corpus, **p.corpus_files()), corpus.get_tokenizer(p.tokenizer))


def plan(p: GradientFlowParams, splits: corpus.TokenSplits | None, device: torch.device = torch.device("cpu")) -> Plan:
    """"MQAR": every arm on its learning-rate grid on the tuning seeds (with every extension it may take), then every
    seed, scored for its accuracy on the validation pairs and on unseen pairs; "WikiText": the same configuration on
    text, ``lm_seeds`` seeds at the one rate ``lr``, with the weight-shared arm beside the others."""
    vocab = mqar.Vocab(p.mqar_keys)
    task = mqar_task(vocab=vocab, train_ks=[p.mqar_pairs], eval_ks=[p.mqar_pairs], batch_size=p.task_batch_size,
                     seq_len=p.seq_len, eval_batches=p.eval_batches, power_a=0.1, device=device, test=True)
    scored = (Work(2 * len(task.valid), lambda: task.valid[0], train=False),)  # the accuracy at k and on unseen pairs
    stages = {"MQAR": Stage(mqar_arms(p.model_config(vocab.size)), task, TrainConfig.from_params(p, steps=p.task_steps),
                            p.n_seeds, p.lr_grid, p.lr_extensions, p.tuning_seeds, part="MQAR", scored=scored)}
    if splits is not None:
        text = lm_task(splits, batch_size=p.batch_size, seq_len=p.seq_len, eval_batches=p.eval_batches)
        stages["WikiText"] = Stage(gradient_flow_arms(p.model_config(splits.vocab_size)), text,
                                   TrainConfig.from_params(p), p.lm_seeds, part="WikiText", per_seed=False)
    return Plan(stages)
