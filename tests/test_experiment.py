"""Learning-rate selection on validation and paired comparisons across seeds."""

import math

import pytest
import torch

from odebook import models
from odebook.data import TokenSplits
from odebook.experiment import compare_to, run_seeds, score_test, tune_lr
from odebook.runtime import precision_for
from odebook.train import TrainConfig

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
