"""What each study computes, for its budget (odebook.book.budget): its training runs, each as the work one run does —
training steps on batches of the shapes its loader gives, and forward passes of evaluation and scoring.

Each study's plan follows its notebook: 01 each arm's learning-rate grid and every seed on MQAR, then its WikiText
section; 02 and 03's ladder a learning-rate grid on the first
seed, then the other seeds; 03's retrieval runs and 04's arm × regime runs on the retrieval curriculum, whose prompts
grow stage by stage (a batch of each stage's own prompts, whose answers alone reach the head) and are scored on the
evaluation sets under each ablation; 05 every solver and seed, each seed's rk4 re-solved, the rk4 / dopri5 timing and
the sensitivity sweep; 02's timing pairs. Seeds are counted to ``n_seeds`` (where looks stop a study early, it
takes less) and 02's learning-rate grid with every extension it may take. Generation, the dynamics probes and tables
and figures are not counted (the budget's start-up allowance holds them).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

from odebook.data import mqar, tasks
from odebook.data.corpus import Tokenizer, get_tokenizer
from odebook.models.arms import gradient_flow_arms
from odebook.models.lm import lm_loss
from odebook.nn.ode import SOLVERS, STAGES
from odebook.params import Params
from odebook.study.retrieval import ABLATIONS

__all__ = ["Work", "Runs", "PLANS", "plan", "evaluations"]

SEEDED = ("seeds", "MQAR", "retrieval", "re-solving")  # the parts whose runs come once per seed
# the parts run as an executor's jobs (experiment.run_seeds)
EXECUTED = ("seeds", "lr grid", "MQAR", "retrieval", "WikiText")
SCORE_BATCH = 50  # examples per forward pass of retrieval scoring (odebook.study.retrieval.score_rows)


@dataclasses.dataclass(frozen=True)
class Work:
    """``n`` passes on ``batch()`` (CPU tensors, as the study's loader gives them): training steps (forward and
    backward of ``loss``) when ``train``, else forward passes only (evaluation, scoring)."""
    n: int
    batch: Callable[[], Any]
    loss: Callable[[nn.Module, Any], torch.Tensor] = lm_loss
    train: bool = True


@dataclasses.dataclass(frozen=True)
class Runs:
    """``count`` training runs of the model ``build()`` makes, each doing ``work``; ``setup``: each is a run of the
    seed loop, which builds its model and counts a forward pass's FLOPs before its first step."""
    family: str
    build: Callable[[], nn.Module]
    count: int
    work: tuple[Work, ...]
    setup: bool = True
    part: str = "seeds"  # what these runs are for, in a run's breakdown: seeds, lr grid, timing, …

    @property
    def per_seed(self) -> bool:
        """One more seed adds one more of these runs (``count`` follows ``n_seeds``)."""
        return self.part in SEEDED

    @property
    def steps(self) -> int:
        return sum(w.n for w in self.work if w.train)


def evaluations(steps: int, interval: int) -> int:
    """How often the training loop evaluates: every ``interval`` steps and at the end (odebook.training.train)."""
    return steps // interval + (steps % interval != 0)


def _tokens(vocab: int, batch_size: int, seq_len: int) -> Callable[[], tuple[torch.Tensor, torch.Tensor]]:
    def batch() -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.randint(0, vocab, (batch_size, seq_len + 1), generator=torch.Generator().manual_seed(0))
        return x[:, :-1], x[:, 1:]
    return batch


def _lm(p: Params, tok: Tokenizer) -> tuple[Work, Work]:
    """A language-model run: its training steps, its evaluations and the test split once."""
    windows = _tokens(tok.vocab_size, p.batch_size, p.seq_len)
    forwards = (evaluations(p.steps, p.eval_interval) + 1) * p.eval_batches
    return Work(p.steps, windows), Work(forwards, windows, train=False)


def _lm_runs(p: Params, tok: Tokenizer, family: str, build: Callable[[], nn.Module], count: int) -> Runs:
    return Runs(family, build, count, _lm(p, tok))


def _tuned(p: Params, tok: Tokenizer, family: str, build: Callable[[], nn.Module], extensions: int = 0) -> list[Runs]:
    """The grid on the tuning seed (validation only), with every ``extensions`` it may take, then every seed at the
    chosen rate (odebook.study.experiment.tune_then_run: no tuning run is a confirmatory run)."""
    steps, forwards = _lm(p, tok)
    tried = len(p.lr_grid) + extensions
    grid = Runs(family, build, tried, (steps, dataclasses.replace(forwards, n=forwards.n - p.eval_batches)),
                part="lr grid")
    return [grid, Runs(family, build, p.n_seeds, (steps, forwards))]


def _prompts(tok: Tokenizer, batch_size: int, ks: Sequence[int], n_filler: int) -> Callable[[], tuple]:
    """A training batch of the retrieval curriculum at ``n_filler`` filler sentences (every question answered)."""
    return lambda: next(tasks.curriculum_batches(tok, batch_size, 0, [(1, n_filler)], ks))


def _curriculum(p: Params, steps: int, batch: Callable[[int], Callable[[], Any]], loss=lm_loss) -> tuple[Work, ...]:
    """Training steps stage by stage (tasks.equal_stages), each stage on batches of its own prompts."""
    work, done = [], 0
    for until, n_filler in tasks.equal_stages(p.curriculum, steps):
        if min(until, steps) > done:
            work.append(Work(min(until, steps) - done, batch(n_filler), loss))
            done = min(until, steps)
    return tuple(work)


def _scoring(p: Params, tok: Tokenizer, ablations: int) -> tuple[Work, ...]:
    """retrieval.score_rows: every evaluation set under each ablation, in batches of SCORE_BATCH prompts."""
    sets = tasks.evaluation_sets(p.retrieval_eval_examples, p.eval_seed, ks=p.ks, n_filler=max(p.curriculum))
    return tuple(Work(ablations * math.ceil(len(examples) / SCORE_BATCH),
                      functools.partial(lambda ex: tasks.batch(ex, tok)[:2], examples[:SCORE_BATCH]), train=False)
                 for examples in sets.values())


def _gradient_flow(p: Params, tok: Tokenizer) -> list[Runs]:
    """Study 01: on MQAR, each arm's learning-rate grid on the tuning seed, then every seed; each hybrid's test
    batches once more with its flow switched off; then every arm of the WikiText section on ``lm_seeds`` seeds."""
    vocab = mqar.Vocab(p.mqar_keys)

    def batch() -> tuple[torch.Tensor, torch.Tensor]:
        b = mqar.make_batch(p.task_batch_size, vocab=vocab, k=p.mqar_pairs, seq_len=p.seq_len,
                            generator=torch.Generator().manual_seed(0))
        return b.x, b.y

    valid = evaluations(p.task_steps, p.eval_interval) * p.eval_batches
    scored = 3 * p.eval_batches  # the test set, the accuracy at k and on unseen pairs
    out = []
    for name, build in gradient_flow_arms(p.model_config(vocab.size), ("baseline", "hybrid", "null")).items():
        off = p.eval_batches if name == "hybrid" else 0
        out += [Runs(name, build, len(p.lr_grid), (Work(p.task_steps, batch), Work(valid, batch, train=False)),
                     part="lr grid"),
                Runs(name, build, p.n_seeds, (Work(p.task_steps, batch), Work(valid + scored + off, batch,
                                                                                 train=False)), part="MQAR")]
    text = gradient_flow_arms(p.model_config(tok.vocab_size))
    return out + [Runs(name, build, p.lm_seeds, _lm(p, tok), part="WikiText") for name, build in text.items()
                  if p.lm_seeds]


def _time_indexed(p: Params, tok: Tokenizer) -> list[Runs]:
    """The grid (and its extensions, at most ``lr_extensions`` a model) and the seeds, then the interleaved timing
    of two pairs of models (odebook.study.timing: three warm-up pairs, ``timing_reps`` timed)."""
    cfg = p.model_config(tok.vocab_size)
    runs = [r for name in p.models for r in _tuned(p, tok, name, functools.partial(cfg.build, name), p.lr_extensions)]
    timed = [m for a, b in (("ti_mlp", "tong"), ("ti_ssm", "ti_mlp")) if {a, b} <= set(p.models) for m in (a, b)]
    step = Work(p.timing_reps + 3, _tokens(tok.vocab_size, p.batch_size, p.seq_len))
    return runs + [Runs(m, functools.partial(cfg.build, m), 1, (step,), setup=False, part="timing") for m in timed]


def _gdn_scaling(p: Params, tok: Tokenizer) -> list[Runs]:
    ladder = [r for s in p.series for i in range(len(p.ladder_d)) for r in _tuned(p, tok, s, p.size_config(i, s).build)]
    prompts = functools.partial(_prompts, tok, p.retrieval_batch_size, p.ks)
    valid = Work(evaluations(p.retrieval_steps, p.eval_interval), prompts(max(p.curriculum)), train=False)
    work = (*_curriculum(p, p.retrieval_steps, prompts), valid, *_scoring(p, tok, ablations=2))
    bound = [Runs("gdn", p.size_config(i, "gdn").build, p.n_seeds, work, part="retrieval") for i in p.retrieval_sizes]
    return ladder + bound + _mqar(p)


SCORING_BATCHES = 16  # odebook.study.recall.SCORING_BATCHES, held equal by a test: importing recall here would make
# every study's report depend on it (odebook.training.code_hash follows the budget's imports)


def _mqar(p: Params) -> list[Runs]:
    """Study 03's MQAR arms (a GDN stack per width, the no-state control, full attention at the largest width), each
    on its learning-rate grid (every extension it may take) and then every seed: training steps on sequences of
    ``mqar_seq_len`` tokens (the same cost at every k), the validation passes (every k's sets), and the scoring of
    every k and the held-out pairs, and of the first queries (odebook.study.recall.scoring_sets) as drawn and
    re-bound, normal and with the state zeroed."""
    vocab = mqar.Vocab(p.mqar_keys)

    def batch() -> tuple[torch.Tensor, torch.Tensor]:
        b = mqar.make_batch(p.mqar_batch_size, vocab=vocab, k=min(p.mqar_train_ks), seq_len=p.mqar_seq_len,
                            generator=torch.Generator().manual_seed(0), power_a=p.mqar_power_a)
        return b.x, b.y

    sets = len(p.mqar_eval_ks) + 1
    forwards = ((evaluations(p.mqar_steps, p.eval_interval) * len(p.mqar_eval_ks) + sets) * p.mqar_eval_batches
                + 4 * SCORING_BATCHES * len(p.mqar_eval_ks))
    work = (Work(p.mqar_steps, batch), Work(forwards, batch, train=False))
    arms = [*(("gdn", p.mqar_config(d).build) for d in p.mqar_d),
            *(("swa", p.mqar_config(d, "no state").build) for d in (p.mqar_d[0], p.mqar_d[-1])),
            ("gpt", p.mqar_config(p.mqar_d[-1], "attention").build)]
    tried = len(p.mqar_lr_grid) + p.mqar_lr_extensions
    return [Runs(family, build, n, work, part=part) for family, build in arms
            for n, part in ((tried, "MQAR lr grid"), (p.n_seeds, "MQAR"))]


def _mixed_loss(model: nn.Module, batch: tuple) -> torch.Tensor:
    return 0.5 * lm_loss(model, batch[0]) + 0.5 * lm_loss(model, batch[1])


def _mixed_training(p: Params, tok: Tokenizer) -> list[Runs]:
    windows = _tokens(tok.vocab_size, p.batch_size, p.seq_len)
    prompts = functools.partial(_prompts, tok, p.retrieval_batch_size, p.ks)
    train = {"lm": (Work(p.steps, windows),), "retrieval": _curriculum(p, p.steps, prompts),
             "mixed": _curriculum(p, p.steps, lambda n: lambda: (windows(), prompts(n)()), _mixed_loss)}
    valid = Work((evaluations(p.steps, p.eval_interval) + 1) * p.eval_batches, windows, train=False)  # + held-out PPL
    return [Runs("hybrid" if arm.state_read else "control", arm.build, p.n_seeds,
                 (*train[regime], valid, *_scoring(p, tok, len(ABLATIONS) if arm.state_read else 2)))
            for arm in p.arms().values() for regime in p.regimes]


def _ode_solvers(p: Params, tok: Tokenizer) -> list[Runs]:
    cfg = p.model_config(tok.vocab_size)

    def hybrid(solver: str, steps: int, sensitivity: str = p.sensitivity) -> Callable[[], nn.Module]:
        return lambda: cfg.replace(solver=solver, steps=steps, sensitivity=sensitivity).hybrid()

    runs = [_lm_runs(p, tok, "baseline", cfg.baseline, p.n_seeds)]
    runs += [_lm_runs(p, tok, s, hybrid(s, p.nfe_budget // STAGES[s] if s in STAGES else 1), p.n_seeds)
             for s in p.integrators]
    windows = _tokens(tok.vocab_size, p.batch_size, p.seq_len)
    steps = {s: p.nfe_budget // STAGES[s] if s in STAGES else 1 for s in SOLVERS}
    # each seed's trained rk4 re-solved by every integrator at the budget and by rk4 at 4x its steps, on validation
    valid = (Work(p.eval_batches, windows, train=False),)
    runs += [Runs(s, hybrid(s, n), p.n_seeds, valid, setup=False, part="re-solving")
             for s, n in [*steps.items(), ("rk4", 4 * p.nfe_budget)]]
    # rk4 against dopri5, interleaved: a first step counting evaluations, three warm-up pairs, the timed pairs
    runs += [Runs(s, hybrid(s, steps[s]), 1, (Work(p.timing_pairs + 4, windows),), setup=False, part="timing")
             for s in ("rk4", "dopri5")]
    sweep = Work(p.timing_repeats + 2, windows)  # warm-up, timed, memory
    return runs + [Runs(f"sweep {m}", hybrid(p.sweep_solver, n, m), 1, (sweep,), setup=False, part="memory sweep")
                   for n in p.sweep_steps for m in p.sensitivities]


PLANS = {"01_gradient_flow": _gradient_flow, "02_time_indexed": _time_indexed, "03_gdn_scaling": _gdn_scaling,
         "04_mixed_training": _mixed_training, "05_ode_solvers": _ode_solvers}


def plan(params: Params) -> list[Runs]:
    """The training runs the study of ``params`` makes."""
    return PLANS[params.study](params, get_tokenizer(params.tokenizer))
