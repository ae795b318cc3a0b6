"""Study 04's plan (odebook.study.plan): what its notebook loads and runs, costed by its budget before its first
step."""

from __future__ import annotations

import dataclasses

import torch

from odebook.data import corpus, tasks
from odebook.study.plan import Plan, Stage, Work, retrieval_scoring
from odebook.training.runtime import Precision, precision_for
from odebook.training.train import TrainConfig

from .analysis import ablations_of, held_out_prompts, regime_tasks
from .params import MixedTrainingParams
from .vocabulary import UsedTokens, stories

__all__ = ["Data", "data", "plan"]


@dataclasses.dataclass(frozen=True)
class Data:
    """The stories (``docs``: their description), their tokens in the models' vocabulary ``tok``, the held-out
    windows and prompts a regime validates on, and the retrieval sets a trained model is scored on."""
    docs: corpus.Documents
    tok: UsedTokens
    train: list[torch.Tensor]
    valid: list[torch.Tensor]
    valid_batches: list
    valid_prompts: list
    eval_sets: dict


def data(p: MixedTrainingParams) -> Data:
    """TinyStories in the models' vocabulary (each story cut once: vocabulary.stories), ``eval_batches`` held-out
    windows, as many batches of held-out prompts at the curriculum's last stage (drawn apart from every training
    stream: what tuning reads where a regime trains retrieval), and the retrieval sets."""
    tok = p.vocabulary()
    docs, train, valid = stories(p.tokenizer, p.max_train_stories)
    train, valid = ([torch.from_numpy(tok.renumbered(ids)) for ids in split] for split in (train, valid))
    return Data(docs, tok, train, valid, corpus.fixed_document_batches(valid, p.eval_batches, p.batch_size, p.seq_len),
                held_out_prompts(tok, p.retrieval_batch_size, p.eval_seed + 100, n_filler=max(p.curriculum),
                                 ks=p.ks, n=p.eval_batches),
                tasks.evaluation_sets(p.retrieval_eval_examples, p.eval_seed, ks=p.ks, n_filler=max(p.curriculum)))


def plan(p: MixedTrainingParams, d: Data, precision: Precision | None = None) -> Plan:
    """"seeds": every arm in every regime ("<arm>_<regime>", on its regime's task: analysis.regime_tasks) on its
    learning-rate grid on the tuning seeds, then on every seed, each scored on the retrieval sets under every ablation
    it has and for its held-out perplexity."""
    arms, precision = p.arms(), precision or precision_for(torch.device("cpu"))
    task = regime_tasks(arms, p.regimes, train_docs=d.train, valid=d.valid_batches, valid_prompts=d.valid_prompts,
                        tok=d.tok, eval_sets=d.eval_sets, stages=tasks.equal_stages(p.curriculum, p.steps), ks=p.ks,
                        window=p.window, batch_size=p.batch_size, seq_len=p.seq_len,
                        retrieval_batch_size=p.retrieval_batch_size, precision=precision)
    ppl = Work(len(d.valid_batches), lambda: d.valid_batches[0], train=False)

    def scored(arm) -> tuple[Work, ...]:
        return (*retrieval_scoring(d.eval_sets, d.tok, len(ablations_of(arm))), ppl)

    names = {f"{arm}_{regime}": arm for arm in arms for regime in p.regimes}
    return Plan({"seeds": Stage({n: arms[a].build for n, a in names.items()}, task, TrainConfig.from_params(p),
                                p.n_seeds, p.lr_grid, p.lr_extensions, p.tuning_seeds,
                                scored={n: scored(arms[a]) for n, a in names.items()},
                                family={n: "hybrid" if arms[a].state_read else "stateless" for n, a in names.items()})})
