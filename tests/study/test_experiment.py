"""Learning-rate selection on validation and paired comparisons across seeds."""

import math

import pytest
import torch

from odebook.models import lm as models
from odebook.data.corpus import TokenSplits
from odebook.study.experiment import compare_to, run_seeds, score_test, tune_lr
from odebook.training.runtime import precision_for
from odebook.training.train import TrainConfig

CPU = precision_for(torch.device("cpu"))
gen = torch.Generator().manual_seed(0)
SPLITS = TokenSplits(*(torch.randint(0, 20, (n,), generator=gen) for n in (3000, 600, 600)), 20, "random tokens")
SHAPE = dict(batch_size=4, seq_len=8, eval_batches=2)


def tiny():
    return models.gpt(vocab_size=20, d_model=16, n_layer=1, n_head=2, max_seq_len=8)


def test_tune_lr_chooses_the_lowest_validation_loss_counts_divergence_as_infinite_and_never_scores_test():
    builders = {"a": tiny}
    config = TrainConfig(steps=4, lr=1.0, eval_interval=4, weight_decay=0.0)
    chosen, table, kept = tune_lr(builders, SPLITS, config, CPU, lrs=[1e-3, 3e-2, 1e30], seed=0, progress=False,
                                  **SHAPE)
    assert list(table.columns) == [1e-3, 3e-2, 1e30] and math.isinf(table.loc["a", 1e30])
    assert chosen["a"] == table.loc["a"].idxmin() and len(kept) == 1 and kept[0].lr == chosen["a"]
    assert math.isnan(kept[0].test_loss)
    runs = run_seeds(builders, SPLITS, {"a": TrainConfig(steps=4, lr=chosen["a"], eval_interval=4)}, CPU,
                     seeds=[0, 1], done=score_test(kept, SPLITS, CPU, **SHAPE), progress=False, **SHAPE)
    assert runs[0] is kept[0] and math.isfinite(runs[0].test_loss) and runs[1].seed == 1


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
        hist, origin, extras = train_once("niah_seed0", model, stream, valid, config, cpu, checkpoints=tmp_path,
                                          fresh=fresh, key=key, progress=False,
                                          finish=lambda m, h: {"last": h.loss[-1]})
        return model, hist, origin, extras

    first, hist, origin, extras = once({"k": 1})
    assert origin == "trained" and (tmp_path / "niah_seed0.done.pt").is_file()
    assert not (tmp_path / "niah_seed0.pt").exists()  # the partial checkpoint goes once the run is done
    again, hist2, origin2, extras2 = once({"k": 1})
    assert origin2 == "reused" and extras2 == extras and hist2.loss == hist.loss
    for a, b in zip(first.state_dict().values(), again.state_dict().values()):
        assert torch.equal(a, b)
    assert once({"k": 2})[2] == "trained" and once({"k": 2}, fresh=True)[2] == "trained"


def test_runs_spread_over_two_devices_equal_the_runs_one_after_another():
    """odebook.training.spread's path (two worker threads, here on two CPU 'devices'; on a machine with several GPUs, one per
    GPU): the same runs in the same order, each equal to its sequential twin (fp32, within 1e-6: two threads share
    the CPU's intra-op pool), and a diverging rate of the grid still counts as infinite."""
    builders = {"a": tiny, "b": lambda: models.gpt(vocab_size=20, d_model=8, n_layer=2, n_head=2, max_seq_len=8)}
    config = TrainConfig(steps=3, lr=1e-2, eval_interval=3)
    two = [torch.device("cpu")] * 2
    one_by_one, spread = (run_seeds(builders, SPLITS, config, CPU, seeds=[0, 1], progress=False, devices=d, **SHAPE)
                          for d in ((), two))
    assert [(r.model, r.seed) for r in spread] == [(r.model, r.seed) for r in one_by_one] == \
        [("a", 0), ("b", 0), ("a", 1), ("b", 1)]
    for s, o in zip(spread, one_by_one):
        assert s.history.loss == pytest.approx(o.history.loss, rel=1e-6) and s.test_loss == pytest.approx(o.test_loss)
        for (name, w), w_o in zip(s.module.state_dict().items(), o.module.state_dict().values()):
            torch.testing.assert_close(w, w_o, rtol=1e-6, atol=1e-7, msg=name)
    grid = [tune_lr({"a": tiny}, SPLITS, config, CPU, lrs=[1e-3, 1e30], seed=0, progress=False, devices=d, **SHAPE)
            for d in ((), two)]
    assert grid[0][0] == grid[1][0] == {"a": 1e-3} and math.isinf(grid[1][1].loc["a", 1e30])
