"""study.looks: seeds run a look at a time, each primary claim taking its sequential decision."""

import numpy as np
import pytest

from odebook.params import SeedPlan
from odebook.study.claims import Claim, settle
from odebook.study.looks import run_in_looks
from odebook.study.sequential import decide_claim


def _study(differences):
    """A fake study whose comparison k has difference d[i] at its i-th seed; ``calls`` records each run's new
    seeds."""
    calls = []

    def run(*, seeds, done):
        have = {r["seed"] for r in done}
        calls.append([s for s in seeds if s not in have])
        first = min(seeds)
        return list(done) + [{"seed": s, **{k: v[s - first] for k, v in differences.items()}} for s in seeds
                             if s not in have]

    def values_of(runs):
        return {k: [r[k] for r in sorted(runs, key=lambda r: r["seed"])] for k in differences}

    return run, values_of, calls


def test_a_clear_effect_stops_at_the_first_look_and_runs_no_more_seeds():
    run, values_of, calls = _study({"better": [-3.0, -3.1, -2.9, -3.05, -2.95, -3.0, -3.0, -3.0]})
    looked = run_in_looks(run, [Claim("better", "superiority", margin=0.5)], values_of, plan=SeedPlan(0, 8, (3, 5)))
    assert calls == [[0, 1, 2]] and looked.seeds == 3 and len(looked.runs) == 3
    (s,) = looked.settled
    assert s.outcome == "held" and "efficacy at 3 seeds" in s.evidence() and "Holm" not in s.evidence()


def test_an_unclear_claim_runs_to_the_cap_reusing_earlier_seeds_and_says_what_it_needs():
    noisy = list(np.random.default_rng(1).normal(0.0, 1.0, 8))
    run, values_of, calls = _study({"better": noisy})
    looked = run_in_looks(run, [Claim("better", "superiority", margin=0.3)], values_of, plan=SeedPlan(10, 8, (3, 5)))
    assert calls == [[10, 11, 12], [13, 14], [15, 16, 17]] and looked.seeds == 8
    (s,) = looked.settled
    assert s.outcome.startswith("inconclusive") and "seeds at the margin" in s.evidence()


def test_the_looks_can_fail_a_claim_and_decide_equivalence():
    run, values_of, _ = _study({"worse": [2.0, 2.1, 1.9, 2.05, 2.0, 2.0], "same": [0.001, -0.002, 0.0, 0.002, -0.001,
                                                                                 0.0]})
    claims = [Claim("worse", "superiority", margin=0.5), Claim("same", "equivalence", margin=0.5)]
    looked = run_in_looks(run, claims, values_of, plan=SeedPlan(0, 6, (3,)))
    assert [s.outcome for s in looked.settled] == ["not held", "equivalent"]


def test_a_compound_claim_fails_when_one_part_fails_and_holds_when_all_hold():
    both = Claim("beats both", "superiority", margin=0.5, parts=("vs x", "vs y"))
    good, bad = [-3.0, -3.1, -2.9, -3.0], [3.0, 3.1, 2.9, 3.0]
    assert decide_claim(both, {"vs x": good, "vs y": bad}, (2, 4)).action == "futility"
    held = decide_claim(both, {"vs x": good, "vs y": good}, (2, 4))
    assert held.action == "efficacy" and [name for name, _ in held.parts] == ["vs x", "vs y"]
    assert "vs y" in held.markdown()


def test_without_looks_every_seed_runs_once_and_holm_settles():
    run, values_of, calls = _study({"better": [-1.0, -1.2, -0.9, -1.1]})
    claims = [Claim("better", "superiority", margin=0.5)]
    looked = run_in_looks(run, claims, values_of, plan=SeedPlan(0, 4))
    assert calls == [[0, 1, 2, 3]] and looked.decisions == {}
    assert looked.settled == settle(claims, values_of(looked.runs))


def test_bad_looks_are_refused_by_the_seed_plan():
    with pytest.raises(ValueError, match="stay below n_seeds = 4"):
        SeedPlan(0, 4, (2, 4))
    with pytest.raises(ValueError, match="must increase"):
        SeedPlan(0, 6, (3, 2))


def test_the_seed_plan_names_the_confirmatory_seeds_the_looks_and_the_tuning_seed_past_them():
    plan = SeedPlan(100, 12, [3, 6, 9])
    assert plan.seeds == list(range(100, 112)) and plan.looks == (3, 6, 9) and plan.design == [3, 6, 9, 12]
    assert plan.tuning == [112] and not set(plan.tuning) & set(plan.seeds)
    assert SeedPlan(5, 3).design == [3] and SeedPlan(5, 3).tuning == [8]
    assert SeedPlan(5, 3, n_tuning=2).tuning == [8, 9]


def test_a_failed_gate_stops_the_looks_and_leaves_the_primaries_untestable():
    gate = Claim("calibrated", "gate", 0.5, "higher")
    gated = Claim("better", "superiority", margin=0.3, rests_on=("calibrated",))
    noisy = list(np.random.default_rng(1).normal(0.0, 1.0, 8))  # would run to the cap (the test above)
    run, values_of, calls = _study({"better": noisy, "calibrated": [0.0, 0.01, -0.01, 0.0, 0.0, 0.0, 0.0, 0.0]})
    looked = run_in_looks(run, [gate, gated], values_of, plan=SeedPlan(0, 8, (3, 5)))
    assert calls == [[0, 1, 2]] and looked.seeds == 3
    assert [s.outcome for s in looked.settled] == ["not held", "not testable at this scale"]
    # the report says why it stopped before the looks table, whose own decision was to continue
    assert looked.markdown().startswith("**Stopped at 3 of 8 seeds: the gate every primary claim rests on came out "
                                        "not held") and "continue to 5 seeds" in looked.markdown()
    run, values_of, calls = _study({"better": noisy, "calibrated": [2.0, 2.1, 1.9, 2.0, 2.0, 2.0, 2.0, 2.0]})
    looked = run_in_looks(run, [gate, gated], values_of, plan=SeedPlan(0, 8, (3, 5)))
    assert looked.seeds == 8 and looked.settled[0].outcome == "held"
    assert looked.why == "Stopped at 8 of 8 seeds: every primary claim had its decision by the cap"


def test_an_ablation_that_changes_nothing_stops_for_futility_at_the_first_look():
    """Every seed's difference exactly 0 (the state read is unused): futility at the first look, not a cap with
    'more than 10,000 seeds'."""
    run, values_of, calls = _study({"drop": [0.0] * 5})
    claim = Claim("drop", "superiority", margin=0.15, direction="higher")
    looked = run_in_looks(run, [claim], values_of, plan=SeedPlan(0, 5, (3,)))
    (s,) = looked.settled
    assert calls == [[0, 1, 2]] and s.outcome == "not held" and "futility at 3 seeds" in s.evidence()


def test_a_claim_whose_negative_control_holds_is_void_and_says_what_its_own_test_said():
    from odebook.study.claims import negative_control

    claim = Claim("better", "superiority", margin=0.5)
    effect = [-3.0, -3.1, -2.9, -3.05, -2.95, -3.0]
    for control_diffs, void in (([-2.0, -2.1, -1.9, -2.05, -1.95, -2.0], True),  # the null case called an effect
                                ([0.01, -0.02, 0.0, 0.02, -0.01, 0.0], False)):
        run, values_of, _ = _study({"better": effect, "twin": control_diffs})
        control = negative_control(claim, "twin", "better than its twin")
        for looks in ([3], []):
            looked = run_in_looks(run, [claim, control], values_of, plan=SeedPlan(0, 6, looks))
            settled = {s.claim.name: s for s in looked.settled}
            s = settled["better"]
            assert settled[control.name].outcome == ("held" if void else "not held")
            assert s.outcome == ("not testable at this scale" if void else "held")
            assert ("void: its negative control held ('negative control: better than its twin'); as tested it was "
                    "held" in s.note) == void


def test_tune_then_look_chooses_each_rate_on_the_tuning_seed_then_runs_the_plans_seeds_at_it():
    """The grid on the plan's tuning seed (past its seeds), the choice written beside the grid, then run_in_looks on
    the plan's seeds at the chosen rates: the same runs as tune_lr followed by run_seeds by hand."""
    import torch

    from odebook.data.corpus import TokenSplits
    from odebook.models import lm as models
    from odebook.study.experiment import run_seeds, tune_lr
    from odebook.study.looks import tune_then_look
    from odebook.study.task import lm_task
    from odebook.training.runtime import precision_for
    from odebook.training.train import TrainConfig

    gen, cpu = torch.Generator().manual_seed(0), precision_for(torch.device("cpu"))
    task = lm_task(TokenSplits(*(torch.randint(0, 20, (n,), generator=gen) for n in (3000, 600, 600)), 20, "tokens"),
                   batch_size=4, seq_len=8, eval_batches=2)
    builders = {name: (lambda d=d: models.gpt(vocab_size=20, d_model=d, n_layer=1, n_head=2, max_seq_len=8))
                for name, d in (("a", 16), ("b", 8))}
    config = TrainConfig(steps=4, lr=1.0, eval_interval=4, weight_decay=0.0)
    claim = Claim("a below b", "superiority", margin=0.5, parts=("a − b",))
    plan = SeedPlan(0, 2)

    def values_of(runs):
        loss = {(r.model, r.seed): r.test_loss for r in runs}
        return {"a − b": np.array([loss["a", s] - loss["b", s] for s in sorted({r.seed for r in runs})])}

    looked, table, status = tune_then_look(builders, task, config, cpu, [claim], values_of, lrs=[1e-3, 3e-2],
                                           plan=plan, progress=False)
    chosen, grid, _ = tune_lr(builders, task, config, cpu, lrs=[1e-3, 3e-2], seeds=plan.tuning, progress=False)
    by_hand = run_seeds(builders, task, {n: TrainConfig(steps=4, lr=chosen[n], eval_interval=4, weight_decay=0.0)
                                         for n in builders}, cpu, seeds=plan.seeds, progress=False)
    assert table["chosen lr"].to_dict() == chosen and set(status) == {"a", "b"}
    assert table.loc[:, [1e-3, 3e-2]].equals(grid)
    assert [(r.model, r.seed, r.lr, r.test_loss) for r in looked.runs] == [(r.model, r.seed, r.lr, r.test_loss)
                                                                           for r in by_hand]
    assert looked.seeds == 2 and [s.claim.name for s in looked.settled] == ["a below b"]
