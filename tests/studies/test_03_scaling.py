"""When a ladder can decide a scaling exponent: the seed bootstrap on a known power law, and the conditions."""

import numpy as np

from odebook import studies

scaling = studies.load("03_gdn_scaling").scaling


def _ladder(alpha: float, seed_sd: float, sizes: int = 6, seeds: int = 5):
    rng = np.random.default_rng(0)
    n = np.geomspace(1e5, 1e7, sizes)
    loss = 2.0 * (n / n[0]) ** (-alpha) + 3.0
    return n, [list(mean + seed_sd * rng.standard_normal(seeds)) for mean in loss]


def test_the_seed_bootstrap_covers_the_true_exponent_and_widens_with_the_seed_spread():
    n, quiet = _ladder(0.3, 0.002)
    _, noisy = _ladder(0.3, 0.05)
    a, b = scaling.seed_bootstrap(n, quiet), scaling.seed_bootstrap(n, noisy)
    assert a.low < 0.3 < a.high and abs(a.mean - 0.3) < 0.02
    assert (b.high - b.low) > 5 * (a.high - a.low)
    assert a.n == 5


def test_a_ladder_decides_only_with_residual_freedom_and_enough_tokens_per_parameter():
    assert scaling.decidable(6, [25.0, 40.0]) == ""
    assert "4 sizes leave 1 residual" in scaling.decidable(4, [25.0, 40.0])
    assert "tokens per parameter" in scaling.decidable(6, [0.14, 1.8])
    assert "; " in scaling.decidable(4, [0.14, 1.8])  # both said


def _table(alpha: float, tokens_per_parameter: float):
    """A Ladder of one series whose mean losses follow L(N) = 2·(N/1e5)^(−alpha) + 3 over six sizes."""
    import pandas as pd

    n, losses = _ladder(alpha, 0.001)
    rows = [{"series": "hybrid", "size": f"s{i}", "non-embedding params": float(x), "val_loss": float(np.mean(seeds)),
             "tokens per parameter": tokens_per_parameter} for i, (x, seeds) in enumerate(zip(n, losses))]
    table = pd.DataFrame(rows).set_index(["series", "size"])
    return scaling.Ladder(pd.DataFrame(), table, {("hybrid", f"s{i}"): seeds for i, seeds in enumerate(losses)}, [])


def test_the_go_no_go_applies_the_sources_rule_only_where_the_ladder_can_carry_it():
    from types import SimpleNamespace

    steep = _table(0.5, 40.0)
    fit = steep.fits()["hybrid"]
    assert abs(fit.alpha - 0.5) < 0.05
    assert scaling.go_no_go(fit, steep, "hybrid")[0] == "held"
    flat = _table(0.05, 40.0)
    assert scaling.go_no_go(flat.fits()["hybrid"], flat, "hybrid")[0] == "not held"
    short = _table(0.5, 2.0)
    outcome, evidence = scaling.go_no_go(short.fits()["hybrid"], short, "hybrid")
    assert outcome == "not testable at this scale" and "tokens per parameter" in evidence
    p = SimpleNamespace(ladder_d=[1, 2, 3, 4, 5, 6], steps=10, batch_size=2, seq_len=8)
    verdict, = scaling.go_no_go_verdicts(steep.fits(), steep, p)
    assert verdict.outcome == "held" and verdict.scale == "6 sizes d [1, 2, 3, 4, 5, 6], 160 tokens each (40–40 per " \
                                                          "parameter), context 8"


def test_a_profile_with_no_series_runs_no_ladder_and_says_so():
    """The cpu profile lists no series: 2 cores cannot train a ladder the source's rule can read (≥ 5 sizes at ≥ 20
    tokens per parameter), so none runs: no runs, no fits, no go/no-go verdict, and the figure's third panel says so."""
    from matplotlib import pyplot as plt

    from odebook.params.schema import load_yaml

    study = studies.load("03_gdn_scaling")
    p = study.Params.from_mapping({**load_yaml("params/smoke/03_gdn_scaling.yaml"), "series": []}, "test")
    stage = scaling.ladder_stage(p, task=None)
    assert not stage.arms and stage.runs() == []  # nothing to run, nothing for the budget to count
    ladder = scaling.run_ladder(p, stage, precision=None)
    assert ladder.table.empty and ladder.lr_choice.empty and ladder.records == [] and ladder.fits() == {}
    assert scaling.go_no_go_verdicts(ladder.fits(), ladder, p) == []
    fig = study.figures.capacity_distance_scaling(*_retrieval_frames(), ladder.table, {}, bins=["a"], chance=0.1,
                                                  window=4, seeds=2)
    assert "not run" in " ".join(t.get_text() for t in fig.axes[2].texts)
    plt.close(fig)


def _retrieval_frames():
    import pandas as pd

    idx = pd.MultiIndex.from_tuples([("d8×1", "random", 1)], names=["size", "set", "k"])
    by_k = pd.DataFrame({"acc": [0.5], "seed lo": [0.4], "seed hi": [0.6], "best shortcut": [0.3]}, index=idx)
    by_distance = pd.DataFrame({"acc": [0.5], "seed lo": [0.4], "seed hi": [0.6]},
                               index=pd.MultiIndex.from_tuples([("d8×1", "a")], names=["size", "bin"]))
    return by_k, by_distance
