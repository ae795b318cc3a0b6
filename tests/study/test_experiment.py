"""Learning-rate selection on validation and paired comparisons across seeds."""

import math

import pytest
import torch

from odebook.models import lm as models
from odebook.data.corpus import TokenSplits
from odebook.params import SeedPlan
from odebook.study.experiment import compare_to, run_seeds, tune_lr, tune_then_run
from odebook.study.task import Task, lm_task
from odebook.training.executor import Local
from odebook.training.runtime import precision_for
from odebook.training.train import TrainConfig

CPU = precision_for(torch.device("cpu"))
gen = torch.Generator().manual_seed(0)
SPLITS = TokenSplits(*(torch.randint(0, 20, (n,), generator=gen) for n in (3000, 600, 600)), 20, "random tokens")
SHAPE = dict(batch_size=4, seq_len=8, eval_batches=2)
TASK = lm_task(SPLITS, **SHAPE)


def tiny():
    return models.gpt(vocab_size=20, d_model=16, n_layer=1, n_head=2, max_seq_len=8)


def test_tune_lr_chooses_the_lowest_validation_loss_counts_divergence_as_infinite_and_never_scores_test():
    builders = {"a": tiny}
    config = TrainConfig(steps=4, lr=1.0, eval_interval=4, weight_decay=0.0)
    chosen, table, kept = tune_lr(builders, TASK, config, CPU, lrs=[1e-3, 3e-2, 1e30], seeds=[0], progress=False)
    assert list(table.columns) == [1e-3, 3e-2, 1e30] and math.isinf(table.loc["a", 1e30])
    assert chosen["a"] == table.loc["a"].idxmin() and len(kept) == 1 and kept[0].lr == chosen["a"]
    assert math.isnan(kept[0].test_loss)


def test_tune_lr_chooses_on_the_mean_over_its_tuning_seeds_and_a_divergence_on_any_seed_excludes_the_rate():
    config = TrainConfig(steps=4, lr=1.0, eval_interval=4, weight_decay=0.0)
    tables = [tune_lr({"a": tiny}, TASK, config, CPU, lrs=[1e-3, 3e-2], seeds=[s], progress=False)[1] for s in (3, 4)]
    chosen, table, kept = tune_lr({"a": tiny}, TASK, config, CPU, lrs=[1e-3, 3e-2, 1e30], seeds=[3, 4],
                                  progress=False)
    mean = (tables[0] + tables[1]) / 2
    assert table.loc["a", [1e-3, 3e-2]].to_numpy() == pytest.approx(mean.loc["a"].to_numpy(), rel=1e-12)
    assert chosen["a"] == float(mean.loc["a"].idxmin()) and math.isinf(table.loc["a", 1e30])
    assert sorted(r.seed for r in kept) == [3, 4] and {r.lr for r in kept} == {chosen["a"]}
    with pytest.raises(ValueError, match="at least one seed"):
        tune_lr({"a": tiny}, TASK, config, CPU, lrs=[1e-3], seeds=[], progress=False)


def test_tune_lr_with_a_tie_takes_the_middle_of_the_rates_within_it_of_the_best():
    """On rates whose mean final validation losses differ by less than ``tie``, the middle one (lr_grid.choose)."""
    from odebook.study.lr_grid import choose

    config = TrainConfig(steps=4, lr=1.0, eval_interval=4, weight_decay=0.0)
    lrs = [1e-4, 2e-4, 4e-4]  # four steps this small barely move the loss: the three lie within 0.5 nats
    _, table, _ = tune_lr({"a": tiny}, TASK, config, CPU, lrs=lrs, seeds=[0], progress=False)
    assert table.loc["a"].max() - table.loc["a"].min() < 0.5
    chosen, _, kept = tune_lr({"a": tiny}, TASK, config, CPU, lrs=lrs, seeds=[0], progress=False, tie=0.5)
    assert chosen["a"] == 2e-4 == choose(table.loc["a"], tie=0.5) and kept[0].lr == 2e-4


def test_compare_to_is_paired_by_seed():
    from scipy import stats

    class R:
        def __init__(self, model, seed, test_loss):
            self.model, self.seed, self.test_loss = model, seed, test_loss

    a, b = [2.0, 2.5, 1.8], [2.1, 2.7, 1.85]
    runs = [R("a", s, x) for s, x in enumerate(a)] + [R("b", s, x) for s, x in reversed(list(enumerate(b)))]
    row = compare_to(runs, "b").loc["a"]
    assert row.p_value == pytest.approx(stats.ttest_rel(a, b).pvalue)


def test_train_once_reuses_a_finished_run_of_any_batch_stream_and_retrains_a_changed_one(tmp_path):
    """The retrieval runs of studies 03 and 04 train on their own batch streams through train_once: a finished run is
    taken from its .done.pt (same weights, history and finish() values), a changed key retrains, fresh retrains."""
    from odebook.data import tasks
    from odebook.data.corpus import ByteTokenizer
    from odebook.study.experiment import train_once

    tok, cpu = ByteTokenizer(), precision_for(torch.device("cpu"))
    config = TrainConfig(steps=3, lr=1e-3, eval_interval=3, checkpoint_interval=2)
    valid = [tasks.batch(tasks.make_examples(2, 9, k=1, n_filler=0), tok)[:2]]

    def once(key, fresh=False):
        torch.manual_seed(0)
        model = models.pattern_lm("GS", vocab_size=256, d_model=16, n_head=2, max_seq_len=512, window=8,
                                  state_read=True)
        stream = lambda: tasks.curriculum_batches(tok, 2, 0, [(3, 1)], [1, 2])  # noqa: E731
        hist, origin, extras = train_once("retrieval_seed0", model, stream, valid, config, cpu, checkpoints=tmp_path,
                                          fresh=fresh, key=key, progress=False,
                                          finish=lambda m, h: {"last": h.loss[-1]})
        return model, hist, origin, extras

    first, hist, origin, extras = once({"k": 1})
    assert origin == "trained" and (tmp_path / "retrieval_seed0.done.pt").is_file()
    assert not (tmp_path / "retrieval_seed0.pt").exists()  # the partial checkpoint goes once the run is done
    again, hist2, origin2, extras2 = once({"k": 1})
    assert origin2 == "reused" and extras2 == extras and hist2.loss == hist.loss
    for a, b in zip(first.state_dict().values(), again.state_dict().values()):
        assert torch.equal(a, b)
    assert once({"k": 2})[2] == "trained" and once({"k": 2}, fresh=True)[2] == "trained"


def test_a_run_trained_on_other_data_content_is_retrained_not_reused(tmp_path):
    """A corpus edited in place keeps its name and token counts (the task's own description) but not its content
    hash (fingerprint.run_key's "data"): every run trained on the old content must train again, and one on the same
    content is reused. The key a run is stored under holds both."""
    from odebook.training.fingerprint import stored_key

    config = {"a": TrainConfig(steps=2, lr=1e-3, eval_interval=2, checkpoint_interval=1)}

    def runs(data_hash):
        return run_seeds({"a": tiny}, TASK, config, CPU, seeds=[0, 1], checkpoints=tmp_path, progress=False,
                         key={"study": "x", "data": {"wiki.train.tokens": data_hash}})

    assert [r.origin for r in runs("old")] == ["trained", "trained"]
    assert [r.origin for r in runs("old")] == ["reused", "reused"]
    assert [r.origin for r in runs("edited in place")] == ["trained", "trained"]
    key = stored_key({"data": {"f": "h"}}, TASK.key, scored=True)
    assert key["data"] == {"f": "h"} and key["task"] == TASK.key and key["scored"] is True


def test_runs_spread_over_two_devices_equal_the_runs_one_after_another():
    """odebook.training.spread's path (two worker threads, here on two CPU 'devices'; on a machine with several GPUs,
    one per GPU): the same runs in the same order, each equal to its sequential twin (fp32, within 1e-6: two threads
    share the CPU's intra-op pool), and a diverging rate of the grid still counts as infinite."""
    builders = {"a": tiny, "b": lambda: models.gpt(vocab_size=20, d_model=8, n_layer=2, n_head=2, max_seq_len=8)}
    config = TrainConfig(steps=3, lr=1e-2, eval_interval=3)
    two = Local(devices=[torch.device("cpu")] * 2)
    one_by_one, spread = (run_seeds(builders, TASK, config, CPU, seeds=[0, 1], progress=False, executor=e)
                          for e in (None, two))
    assert [(r.model, r.seed) for r in spread] == [(r.model, r.seed) for r in one_by_one] == \
        [("a", 0), ("b", 0), ("a", 1), ("b", 1)]
    for s, o in zip(spread, one_by_one):
        assert s.history.loss == pytest.approx(o.history.loss, rel=1e-6) and s.test_loss == pytest.approx(o.test_loss)
        for (name, w), w_o in zip(s.module.state_dict().items(), o.module.state_dict().values()):
            torch.testing.assert_close(w, w_o, rtol=1e-6, atol=1e-7, msg=name)
    grid = [tune_lr({"a": tiny}, TASK, config, CPU, lrs=[1e-3, 1e30], seeds=[0], progress=False, executor=e)
            for e in (None, two)]
    assert grid[0][0] == grid[1][0] == {"a": 1e-3} and math.isinf(grid[1][1].loc["a", 1e30])


def test_tune_then_run_tunes_on_a_seed_of_its_own_then_runs_every_confirmatory_seed(tmp_path):
    """The rate is chosen on the plan's tuning seed (past the last confirmatory seed): no tuning run is among the
    confirmatory runs, which equal run_seeds at the chosen rate — also where checkpoints would let a tuning run be
    reused."""
    builders = {"a": tiny, "b": lambda: models.gpt(vocab_size=20, d_model=8, n_layer=2, n_head=2, max_seq_len=8)}
    config = TrainConfig(steps=4, lr=1.0, eval_interval=4, weight_decay=0.0)
    runs, table, chosen = tune_then_run(builders, TASK, config, CPU, lrs=[1e-3, 3e-2], plan=SeedPlan(0, 2),
                                        progress=False, checkpoints=tmp_path)
    by_hand, _, _ = tune_lr(builders, TASK, config, CPU, lrs=[1e-3, 3e-2], seeds=[2], progress=False)
    again = run_seeds(builders, TASK, {n: TrainConfig(steps=4, lr=by_hand[n], eval_interval=4, weight_decay=0.0)
                                       for n in builders}, CPU, seeds=[0, 1], progress=False)
    assert chosen == by_hand and list(table.index) == ["a", "b"]
    assert [(r.model, r.seed, r.lr) for r in runs] == [(r.model, r.seed, r.lr) for r in again]
    assert [r.origin for r in runs] == ["trained"] * 4  # none reused from the grid's checkpoints
    assert [r.test_loss for r in runs] == [r.test_loss for r in again] and all(math.isfinite(r.test_loss) for r in runs)


def dropout_lm():
    return models.gpt(vocab_size=20, d_model=16, n_layer=1, n_head=2, max_seq_len=8, dropout=0.2)


def test_run_seeds_takes_any_task_and_equals_the_hand_rolled_seed_loop():
    """A task is a batch source per seed, fixed validation batches, a loss and a scorer — not only token splits.
    run_seeds on it trains exactly what the loop the notebooks wrote by hand trains (seed, build, train, score), bit
    for bit, on a model that draws random numbers in its forward pass (dropout): counting its FLOPs must not move
    the generators. ``keep`` lets a study drop the models it has scored."""
    from odebook.models.lm import lm_loss
    from odebook.study.experiment import train_once
    from odebook.training.runtime import seed_everything
    from odebook.training.train import evaluate

    def stream(seed):
        gen = torch.Generator().manual_seed(100 + seed)
        while True:
            x = torch.randint(0, 20, (3, 8), generator=gen)
            yield x, x.roll(-1, 1)

    valid = [next(stream(99))]
    half = lambda model, batch: 0.5 * lm_loss(model, batch)  # noqa: E731
    task = Task(batches=stream, valid=valid, loss_fn=half, eval_loss_fn=lm_loss,
                score=lambda run: {"valid": evaluate(run.module, valid, CPU), "seed": run.seed})
    config = TrainConfig(steps=5, lr=1e-2, eval_interval=5)
    runs = run_seeds({"d": dropout_lm}, task, config, CPU, seeds=[0, 1], progress=False,
                     keep={("d", 0)})
    for run in runs:
        seed_everything(run.seed)
        model = dropout_lm()
        hist, _, _ = train_once("x", model, lambda: stream(run.seed), valid, config, CPU, progress=False,
                                loss_fn=half, eval_loss_fn=lm_loss)
        assert run.history.loss == hist.loss and run.history.eval_loss == hist.eval_loss
        assert run.scores == {"valid": evaluate(model, valid, CPU), "seed": run.seed}
        assert math.isnan(run.test_loss)
    assert runs[0].module is not None and runs[1].module is None


def test_block_parameters_are_counted_one_way_for_every_family():
    """What a model adds to the embeddings, final LayerNorm and head every model of a study shares."""
    from families import time_indexed

    from odebook.models.lm import block_params, count_params, ode_hybrid, pattern_lm

    shape = dict(vocab_size=20, d_model=16, n_head=2, max_seq_len=8)
    for model in (models.gpt(**shape, n_layer=2), time_indexed("ti_mlp", **shape, n_layer=3),
                  pattern_lm("GS", **shape, state_read=True), ode_hybrid(**shape, n_layer=3, ode_layers=[1])):
        shared = sum(q.numel() for part in (model.tok_emb, model.pos_emb, model.ln_f) for q in part.parameters())
        head = model.head.weight.numel() - model.n_spare_params
        assert block_params(model) == count_params(model) - shared - head > 0


def test_tune_lr_extends_an_edge_choice_until_it_is_bracketed_or_the_extensions_are_spent():
    from odebook.study.lr_grid import check_tried

    periodic = torch.arange(4200) % 7  # learnable: a larger rate learns more in four steps, until it diverges
    task = lm_task(TokenSplits(periodic[:3000], periodic[3000:3600], periodic[3600:], 20, "periodic"), **SHAPE)
    config = TrainConfig(steps=4, lr=1.0, eval_interval=4, weight_decay=0.0)
    # rates far too small: the largest wins each time, so the grid grows upward twice, then stays untuned
    chosen, table, kept = tune_lr({"a": tiny}, task, config, CPU, lrs=[1e-5, 2e-5], seeds=[0], progress=False,
                                  max_extensions=2)
    assert list(table.columns) == pytest.approx([1e-5, 2e-5, 4e-5, 8e-5]) and chosen["a"] == pytest.approx(8e-5)
    tried = {"a": list(table.columns[table.loc["a"].notna()])}
    status = check_tried(tried, chosen, [1e-5, 2e-5], max_extensions=2)["a"]
    assert status.action == "untuned" and "top of the grid" in status.note and kept[0].lr == chosen["a"]
    # a diverging top: the bottom is extended once (to a rate that learns nothing), and the choice is bracketed
    chosen, table, _ = tune_lr({"a": tiny, "b": tiny}, task, config, CPU, lrs=[1e-2, 1e30], seeds=[0], progress=False,
                               max_extensions=2)
    assert chosen == {"a": 1e-2, "b": 1e-2} and len(table.columns) == 3 and math.isinf(table.loc["a", 1e30])
    tried = {n: list(table.columns[table.loc[n].notna()]) for n in table.index}
    assert {c.action for c in check_tried(tried, chosen, [1e-2, 1e30], max_extensions=2).values()} == {"tuned"}
    # without extensions the old behaviour: the base grid only, the edge choice flagged untuned
    chosen, table, _ = tune_lr({"a": tiny}, task, config, CPU, lrs=[1e-5, 2e-5], seeds=[0], progress=False)
    assert list(table.columns) == [1e-5, 2e-5] and chosen["a"] == 2e-5
    assert check_tried({"a": [1e-5, 2e-5]}, chosen, [1e-5, 2e-5])["a"].action == "untuned"
