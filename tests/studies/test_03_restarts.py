"""Study 03's restart rule: a run that fails its arm's learned gate on validation data trains again from a fresh
initialisation on the same seed's stream, together with its pair, at most ``restarts`` times; the last run is kept."""

import math

import pytest
import torch

from odebook import studies
from odebook.study.experiment import Run
from odebook.study.recall import first_name
from odebook.training.runtime import seed_everything
from odebook.training.train import History

study = studies.load("03_gdn_scaling")
restarts, Arms = study.restarts, study.capacity.Arms
ARMS = Arms(heads=(8, 1), width=32, ks=(2, 16), margin=0.1)
NON_BINDER, CHANCE = 0.5, 0.06


def _fake_run_seeds(calls, learns):
    """run_seeds as the rule calls it: seeds, builds (which reads the generator), and scores a run by whether
    ``learns(name, init)`` — ``init``, the first weight the builder drew, tells the initialisations apart."""
    def run_seeds(builders, task, configs, precision, *, seeds, done=(), **options):
        out = []
        for seed in seeds:
            for name, build in builders.items():
                if any(d.model == name and d.seed == seed for d in done):
                    out.append(next(d for d in done if d.model == name and d.seed == seed))
                    continue
                seed_everything(seed, torch.device("cpu"))
                init = float(build().weight[0, 0].detach())
                calls.append((name, seed, init, configs[name]))
                ok = learns(name.split(" restart")[0], init)
                first = NON_BINDER + (0.4 if ok else 0.0)
                scores = {first_name(2): first, first_name(2, rebound=True): 0.1,
                          first_name(16): 0.3, first_name(16, rebound=True): 0.25,
                          "check: " + first_name(2): first, "k=2": CHANCE + (0.2 if ok else 0.0)}
                out.append(Run(name, seed, 1, History(), math.nan, None, 0, math.nan, None, scores=scores))
        return out
    return run_seeds


def _rule(monkeypatch, learns, times=2):
    calls = []
    monkeypatch.setattr(restarts, "run_seeds", _fake_run_seeds(calls, learns))
    return restarts.Restarts(ARMS, NON_BINDER, CHANCE, times), calls


BUILDERS = {name: (lambda: torch.nn.Linear(2, 2)) for name in ("gdn h8", "gdn h1", "attention", "no state h8",
                                                                "no state h1")}
CONFIGS = {name: f"config of {name}" for name in BUILDERS}


def test_runs_that_learned_are_kept_without_a_restart(monkeypatch):
    rule, calls = _rule(monkeypatch, lambda name, init: True)
    runs = rule(BUILDERS, None, CONFIGS, None, seeds=[600, 601])
    assert [(r.model, r.seed) for r in runs] == [(n, s) for s in (600, 601) for n in BUILDERS]
    assert len(calls) == 10 and set(rule.table().restarts) == {0} and all(rule.table().learned)


def test_a_run_that_did_not_learn_restarts_with_its_pair_from_a_new_initialisation_on_the_same_seed(monkeypatch):
    first = {}

    def learns(arm, init):  # gdn h8 of seed 600 fails on its first initialisation only
        first.setdefault(arm, init)
        return not (arm == "gdn h8" and init == first[arm])

    rule, calls = _rule(monkeypatch, learns)
    runs = rule(BUILDERS, None, CONFIGS, None, seeds=[600])
    again = [c for c in calls if "restart" in c[0]]
    assert [(n, s, cfg) for n, s, _, cfg in again] == [("gdn h8 restart 1", 600, "config of gdn h8"),
                                                      ("no state h8 restart 1", 600, "config of no state h8")]
    inits = {n: i for n, _, i, _ in calls}
    assert inits["gdn h8 restart 1"] != inits["gdn h8"] and inits["gdn h8 restart 1"] == inits["no state h8 restart 1"]
    kept = {r.model: r for r in runs}
    assert set(kept) == set(BUILDERS) and kept["gdn h8"].origin.endswith("restart 1")
    assert kept["no state h8"].origin.endswith("restart 1") and "restart" not in kept["gdn h1"].origin
    table = rule.table()
    assert table.loc[("gdn h8", 600), "restarts"] == 1 and table.loc[("gdn h8", 600), "learned"]
    assert table.loc[("gdn h8", 600), "gates"] == "0.000, 0.400"
    assert table.loc[("attention", 600), "restarts"] == 0


def test_an_arm_that_never_learns_stops_after_the_last_restart_and_keeps_its_last_run(monkeypatch):
    rule, calls = _rule(monkeypatch, lambda name, init: name != "attention", times=2)
    runs = rule(BUILDERS, None, CONFIGS, None, seeds=[600])
    assert [c[0] for c in calls if c[0].startswith("attention")] == ["attention", "attention restart 1",
                                                                     "attention restart 2"]
    assert not rule.table().loc[("attention", 600), "learned"]
    assert next(r for r in runs if r.model == "attention").origin.endswith("restart 2")


def test_runs_done_at_an_earlier_look_are_neither_re_run_nor_re_checked(monkeypatch):
    rule, calls = _rule(monkeypatch, lambda name, init: name != "attention", times=1)
    first = rule(BUILDERS, None, CONFIGS, None, seeds=[600])
    logged = len(rule.log)
    rule(BUILDERS, None, CONFIGS, None, seeds=[600, 601], done=first)
    assert {c[1] for c in calls[len(calls) - 6:]} == {601} and len(rule.log) == 2 * logged


@pytest.mark.parametrize("arm, unit", [("gdn h8", ("gdn h8", "no state h8")),
                                       ("no state h1", ("gdn h1", "no state h1")), ("attention", ("attention",))])
def test_a_gdn_stack_and_its_no_state_control_restart_together(arm, unit):
    assert restarts.Restarts(ARMS, NON_BINDER, CHANCE, 2).unit(arm, BUILDERS) == unit
