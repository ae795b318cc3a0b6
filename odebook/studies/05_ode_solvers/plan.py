"""Study 05's plan (odebook.study.plan): what its notebook runs, costed by its budget before the first step."""

from __future__ import annotations

from odebook.data import corpus
from odebook.nn.ode import SOLVERS
from odebook.study.plan import Plan, Runs, Stage, Work
from odebook.study.task import lm_task
from odebook.training.train import TrainConfig

from .params import ODESolverParams

__all__ = ["data", "plan"]


def data(p: ODESolverParams) -> corpus.TokenSplits:
    """The corpus in the profile's tokens."""
    return corpus.tokenize(corpus.load_corpus(p.corpus, **p.corpus_files()), corpus.get_tokenizer(p.tokenizer))


def plan(p: ODESolverParams, splits: corpus.TokenSplits) -> Plan:
    """The baseline and every integrator trained side by side on every seed ("seeds"); then each seed's trained rk4
    re-solved by every integrator at the budget and by rk4 at 4× its steps, on the validation batches; rk4 against
    dopri5 interleaved (a first step counting evaluations, three warm-up pairs, the timed pairs) and the sensitivity
    sweep (a warm-up, the timed repeats, the memory), each on one training batch."""
    task = lm_task(splits, batch_size=p.batch_size, seq_len=p.seq_len, eval_batches=p.eval_batches)
    cfg = p.model_config(splits.vocab_size)

    def hybrid(solver: str, steps: int, sensitivity: str = p.sensitivity):
        return lambda: cfg.replace(solver=solver, steps=steps, sensitivity=sensitivity).hybrid()

    steps = {s: p.budget_steps(s) or 1 for s in SOLVERS}
    valid = Work(len(task.valid), lambda: task.valid[0], train=False)
    train = corpus.fixed_batches(splits.train, 1, p.batch_size, p.seq_len)[0]
    resolved = [Runs(s, hybrid(s, n), p.n_seeds, (valid,), part="re-solving", setup=False, executed=False)
                for s, n in [*steps.items(), ("rk4", 4 * p.nfe_budget)]]
    timing = [Runs(s, hybrid(s, steps[s]), 1, (Work(p.timing_pairs + 4, lambda: train),), part="timing",
                   setup=False, executed=False, per_seed=False) for s in ("rk4", "dopri5")]
    sweep = [Runs(f"sweep {m}", hybrid(p.sweep_solver, n, m), 1, (Work(p.timing_repeats + 2, lambda: train),),
                  part="memory sweep", setup=False, executed=False, per_seed=False)
             for n in p.sweep_steps for m in p.sensitivities]
    return Plan({"seeds": Stage(p.arms(splits.vocab_size), task, TrainConfig.from_params(p), p.n_seeds)},
                (*resolved, *timing, *sweep))
