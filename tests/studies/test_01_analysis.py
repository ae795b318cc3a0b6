"""Study 01's analysis: study 01's claims rest on the null arm's gap; a failed gate makes them untestable."""

import numpy as np
import pytest

from odebook import studies
from odebook.study.claims import settle
from odebook.study.experiment import Run
from odebook.study.sequential import operating
from odebook.training.train import History

calibrated = studies.load("01_gradient_flow").analysis

NOISE = np.array([0.004, -0.003, 0.001, -0.002, 0.0, 0.003])


def _settled(null_gap: float, hybrid_gap: float, margin: float = 0.05):
    """Six seeds: baseline at 2.0, null and hybrid above it by the given gaps (plus a little seed noise)."""
    base = 2.0 + np.array([0.01, -0.02, 0.0, 0.015, -0.01, 0.005])
    losses = {"baseline": base, "null": base + null_gap + NOISE, "hybrid": base + hybrid_gap - NOISE[::-1],
              "shared": base + null_gap / 2 + NOISE}
    claims = calibrated.calibrated_claims(margin, others={"shared": "the weight-shared block"})
    return {s.claim.name: s.outcome for s in settle(claims, calibrated.paired_losses(losses, claims))}


def test_a_null_gap_below_the_margin_makes_the_primaries_not_testable():
    out = _settled(null_gap=0.01, hybrid_gap=0.0)
    assert out[calibrated.GATE] == "not held"
    assert [o for name, o in out.items() if name != calibrated.GATE] == ["not testable at this scale"] * 3


def test_a_calibrated_gap_lets_the_primaries_hold():
    out = _settled(null_gap=0.3, hybrid_gap=0.0)
    assert out[calibrated.GATE] == "held"
    assert out["hybrid non-inferior to the baseline"] == "held"
    assert out["hybrid beats the null arm (it does the replaced layers' work)"] == "held"
    assert out["hybrid beats the weight-shared block"] == "held"


def test_a_hybrid_that_does_no_work_fails_both_primaries():
    out = _settled(null_gap=0.3, hybrid_gap=0.3)
    assert out[calibrated.GATE] == "held"
    assert out["hybrid non-inferior to the baseline"] == "not held"
    assert out["hybrid beats the null arm (it does the replaced layers' work)"] == "not held"


def test_comparisons_and_differences_follow_the_declared_claims():
    claims = calibrated.calibrated_claims(0.1, others={"shared": "shared"})
    assert calibrated.comparisons(claims) == [("null", "baseline"), ("hybrid", "baseline"), ("hybrid", "null"),
                                              ("hybrid", "shared")]
    d = calibrated.paired_losses({"baseline": [2.0, 2.1], "null": [2.5, 2.4], "hybrid": [2.1, 2.1],
                                  "shared": [2.0, 2.3]}, claims)
    assert np.allclose(d["null − baseline"], [0.5, 0.3]) and np.allclose(d["hybrid − shared"], [0.1, -0.2])
    with pytest.raises(ValueError, match="margin must be positive"):
        calibrated.calibrated_claims(0.0)


def test_gap_closed_and_alpha_normalisation():
    losses = {"baseline": [2.0, 2.0], "null": [2.4, 2.2], "hybrid": [2.1, 2.2]}
    assert np.allclose(calibrated.gap_closed(losses, "hybrid"), [0.75, 0.0])
    assert np.allclose(calibrated.alpha_normalised([0.098, 0.2], [0.1, -0.4]), [0.98, 0.5])
    with pytest.raises(ValueError, match="one α per ratio"):
        calibrated.alpha_normalised([1.0], [0.1, 0.2])


def test_each_primary_has_a_negative_control_on_the_ablated_arm_that_a_flow_doing_the_work_fails():
    base = 2.0 + np.array([0.01, -0.02, 0.0, 0.015, -0.01, 0.005])
    losses = {"baseline": base, "null": base + 0.3 + NOISE, "hybrid": base - NOISE[::-1],
              "hybrid, flow off": base + 0.6 + NOISE[::-1]}
    claims = calibrated.calibrated_claims(0.05, ablated="hybrid, flow off")
    out = {s.claim.name: s.outcome for s in settle(claims, calibrated.paired_losses(losses, claims))}
    controls = {name: o for name, o in out.items() if name.startswith("negative control:")}
    assert controls == {"negative control: the hybrid, flow off non-inferior to the baseline": "not held",
                        "negative control: the hybrid, flow off beats the null arm": "not held"}
    assert [o for name, o in out.items() if name not in controls and name != calibrated.GATE] == ["held", "held"]


def test_the_flow_switched_off_makes_the_hybrid_the_blocks_around_it_and_is_restored():
    import torch

    from odebook.models.lm import gpt, ode_hybrid
    from odebook import studies
    calibrated = studies.load("01_gradient_flow").analysis
    from odebook.training.runtime import precision_for

    torch.manual_seed(0)
    shape = dict(vocab_size=32, d_model=16, n_layer=3, n_head=2, max_seq_len=8)
    hybrid = ode_hybrid(**shape, ode_layers=(1,), solver="euler", steps=2, sensitivity="direct", rtol=1e-3,
                        atol=1e-4, control_dim=2, alpha_init=0.5)
    plain = gpt(**{**shape, "n_layer": 2})  # the hybrid without its block, weights copied from it
    plain.load_state_dict({k.replace("blocks.2.", "blocks.1."): v for k, v in hybrid.state_dict().items()
                           if not k.startswith("blocks.1.")})
    x = torch.randint(0, 32, (2, 9))
    batches, prec = [(x[:, :-1], x[:, 1:])], precision_for(torch.device("cpu"))
    from odebook.training.train import evaluate

    plain_loss = evaluate(plain, batches, prec)
    assert calibrated.loss_without_flow(hybrid, batches, prec) == pytest.approx(plain_loss, abs=1e-6)
    assert hybrid.blocks[1].field.alpha.item() == 0.5  # restored
    with pytest.raises(ValueError, match="ODE flow"):
        calibrated.loss_without_flow(plain, batches, prec)


def test_the_design_simulates_each_primary_at_the_margins_cases_and_is_empty_without_a_pilot():
    claims = calibrated.calibrated_claims(0.05)
    assert calibrated.design(claims, [3, 6], margin=0.05, sd=0.0, alpha=0.025).empty
    table = calibrated.design(claims, [3, 6], margin=0.05, sd=0.04, alpha=0.025)
    at_margin = operating(claims[1], [3, 6], mean=0.05, sd=0.04, alpha=0.025)
    assert list(table.index) == ["non-inferior, hybrid = baseline", "non-inferior, worse by the margin",
                                 "beats null, by the margin"]
    assert table.loc["non-inferior, worse by the margin", "P(held)"] == at_margin.efficacy <= 0.025 + 0.01
    assert table.loc["beats null, by the margin", "P(held)"] > table.loc["non-inferior, worse by the margin", "P(held)"]


def test_seed_losses_pair_the_arms_by_seed_with_the_flow_off_hybrid_beside_them():
    import torch

    from odebook.models.lm import gpt, ode_hybrid
    from odebook import studies
    calibrated = studies.load("01_gradient_flow").analysis
    from odebook.training.runtime import precision_for

    shape = dict(vocab_size=32, d_model=16, n_layer=2, n_head=2, max_seq_len=8)
    torch.manual_seed(0)
    hybrids = {s: ode_hybrid(**shape, ode_layers=(1,), solver="euler", steps=2, sensitivity="direct", rtol=1e-3,
                             atol=1e-4, control_dim=2, alpha_init=0.5) for s in (1, 0)}  # given out of seed order
    x = torch.randint(0, 32, (2, 9))
    batches, prec = [(x[:, :-1], x[:, 1:])], precision_for(torch.device("cpu"))

    def run(model, seed, loss, module=None):
        return Run(model, seed, 0, History(), loss, module, 0, float("nan"), None)

    runs = [run("hybrid", s, 2.0 + s, m) for s, m in hybrids.items()] + [run("baseline", s, 2.5 - s) for s in (1, 0)]
    runs += [run("null", s, 3.0 + s / 10, gpt(**shape)) for s in (0, 1)]
    off = [calibrated.loss_without_flow(hybrids[s], batches, prec) for s in (0, 1)]
    losses = calibrated.seed_losses(runs, batches, prec, arms=["baseline", "null", "hybrid"],
                                    ablated="hybrid, flow off")
    assert losses == {"baseline": [2.5, 1.5], "null": [3.0, 3.1], "hybrid": [2.0, 3.0], "hybrid, flow off": off}
    claims = calibrated.calibrated_claims(0.05, ablated="hybrid, flow off")
    d = calibrated.seed_differences(claims, batches, prec, runs, arms=["baseline", "null", "hybrid"],
                                    ablated="hybrid, flow off")
    assert np.allclose(d["hybrid − baseline"], [-0.5, 1.5]) and np.allclose(d["null − baseline"], [0.5, 1.6])
    assert np.allclose(d["hybrid, flow off − null"], np.subtract(off, [3.0, 3.1]))


def test_the_results_table_puts_each_arms_mean_recall_accuracy_beside_the_summary():
    from odebook import studies
    calibrated = studies.load("01_gradient_flow").analysis

    def run(model, seed, acc, unseen):
        return Run(model, seed, 10, History(eval_loss=[2.0], step_time=[0.01]), 2.0, None, 0, float("nan"), 64,
                   scores={"k=4": acc, "unseen pairs": unseen, "k=8": 0.0})

    runs = [run("baseline", 1, 0.9, 0.5), run("baseline", 0, 0.7, 0.3), run("null", 0, 0.2, 0.1)]
    table = calibrated.results_table(runs, 4)
    assert list(table.index) == ["baseline", "null"] and table.loc["baseline", "seeds"] == 2
    assert table["accuracy"].tolist() == pytest.approx([0.8, 0.2])
    assert table["unseen pairs accuracy"].tolist() == pytest.approx([0.4, 0.1])


def test_gradient_ratios_are_geometric_means_over_seeds_beside_the_alpha_normalised_span():
    def run(model, seed, replaced):
        norms = {"embedding": [1.0, 1.0], "replaced": [replaced, replaced]}
        return Run(model, seed, 0, History(grad_norm=norms), 0.0, None, 0, float("nan"), None)

    runs = [run("baseline", s, 1.0) for s in (0, 1)] + [run("hybrid", 0, 0.1), run("hybrid", 1, 0.4)]
    table = calibrated.gradient_ratios(runs, [0.1, 0.1]).set_index("group")
    assert list(table.index) == ["embedding", "replaced", "replaced ÷ α"]
    assert table.loc["embedding", "ratio"] == pytest.approx(1.0)
    assert table.loc["replaced", "ratio"] == pytest.approx(0.2)  # exp(mean(log 0.1, log 0.4))
    assert table.loc["replaced ÷ α", "ratio"] == pytest.approx(2.0) and table.loc["replaced", "seeds"] == 2


def test_each_arm_is_grouped_around_its_own_span_and_the_alphas_are_read_in_seed_order():
    import torch

    from odebook.models.arms import HybridConfig
    from odebook import studies
    arms01 = studies.load("01_gradient_flow").arms
    from odebook import studies
    calibrated = studies.load("01_gradient_flow").analysis

    cfg = HybridConfig(vocab_size=32, d_model=16, n_layer=4, n_head=2, max_seq_len=8, ode_layers=(1, 2),
                       solver="euler", steps=2, sensitivity="direct", rtol=1e-3, atol=1e-4, control_dim=2,
                       alpha_init=0.5)
    groups = calibrated.gradient_groups(cfg)
    for arm, replaced in (("baseline", range(1, 3)), ("hybrid", range(1, 2)), ("null", range(1, 1))):
        model = getattr(cfg, arm)()
        got, want = groups(arm, model), arms01.layer_groups(model, replaced)
        assert got.keys() == want.keys() and all(
            [id(p) for p in got[g]] == [id(p) for p in want[g]] for g in got), arm
    assert "replaced" not in groups("null", cfg.null()) and len(groups("hybrid", cfg.hybrid())["after"]) > 0

    def run(seed, alpha):
        model = cfg.hybrid()
        with torch.no_grad():
            model.blocks[1].field.alpha.fill_(alpha)
        return Run("hybrid", seed, 0, History(), 0.0, model, 0, float("nan"), None)

    runs = [run(2, 0.3), run(0, 0.1), run(1, -0.2), Run("baseline", 0, 0, History(), 0.0, cfg.baseline(), 0,
                                                           float("nan"), None)]
    assert calibrated.learned_alphas(runs, cfg) == pytest.approx([0.1, -0.2, 0.3])
