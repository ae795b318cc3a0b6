"""odebook.book.compare: two runs of the book, verdict by verdict and value by value, leaving out the machine."""

import copy
import json

import pytest

from odebook.book import compare

RESULTS = {
    "verdicts": [
        {"claim": "hybrid beats the null arm", "verdict": "held", "effects": [{"mean": 0.12, "n": 6}]},
        {"claim": "RK4 trains faster than dopri5 (time per step)", "verdict": "held", "effects": [{"mean": 0.52}]},
    ],
    "parameters": {"seed": 0, "device": "cpu", "fresh": False},
    "summary": {"hybrid": {"test_loss": 1.25, "ms_per_step": 41.0, "runs": "6 trained"}},
    "timings": {"ti_mlp / tong": "median time a / b = 0.834"},
    "runs": {"hybrid_seed0": "trained"},  # each run's origin (study 04's)
}


def changed(**edits):
    new = copy.deepcopy(RESULTS)
    for path, value in edits.items():
        *keys, last = path.split(".")
        target = new
        for key in keys:
            target = target[int(key)] if isinstance(target, list) else target[key]
        target[last] = value
    return new


def test_identical_runs_agree_on_every_verdict_and_value():
    c = compare.compare_study(RESULTS, copy.deepcopy(RESULTS), "01")
    assert c.same_verdicts and c.verdicts == 2 and not c.differ
    assert c.values == 5  # the science claim's verdict and effect (mean, n), the seed, the test loss: the rest is
    # the machine's


def test_a_changed_outcome_is_a_changed_verdict_not_a_differing_value():
    c = compare.compare_study(RESULTS, changed(**{"verdicts.0.verdict": "not held"}))
    assert c.changed == {"hybrid beats the null arm": ("held", "not held")} and not c.same_verdicts


def test_an_inconclusive_verdict_stays_inconclusive_whatever_seeds_it_needs():
    old, new = (changed(**{"verdicts.0.verdict": f"inconclusive — needs ≈ {n} seeds"}) for n in (37, 27))
    c = compare.compare_study(old, new)
    assert c.same_verdicts and list(c.differ) == ["verdicts / hybrid beats the null arm / verdict"]


def test_a_claim_in_one_run_only_is_listed_on_its_side():
    new = copy.deepcopy(RESULTS)
    new["verdicts"][0]["claim"] = "hybrid beats the null arm by 0.1"
    c = compare.compare_study(RESULTS, new)
    assert c.only_old == ["hybrid beats the null arm"] and c.only_new == ["hybrid beats the null arm by 0.1"]
    assert not c.same_verdicts


def test_timings_memory_machine_settings_and_run_origins_are_left_out():
    new = changed(**{"summary.hybrid.ms_per_step": 39.0, "summary.hybrid.runs": "6 reused", "parameters.fresh": True,
                     "parameters.device": "cuda", "verdicts.1.effects.0.mean": 0.49,
                     "timings.ti_mlp / tong": "median time a / b = 0.842", "runs.hybrid_seed0": "reused"})
    assert not compare.compare_study(RESULTS, new).differ


def test_a_science_value_that_differs_is_listed_with_both_values_unless_within_rtol():
    new = changed(**{"summary.hybrid.test_loss": 1.2500001, "parameters.seed": 1})
    c = compare.compare_study(RESULTS, new)
    assert c.differ == {"summary / hybrid / test_loss": (1.25, 1.2500001), "parameters / seed": (0, 1)}
    assert set(compare.compare_study(RESULTS, new, rtol=1e-6).differ) == {"parameters / seed"}
    assert "2 differ" in "\n".join(c.lines())


def test_nan_equals_nan():
    new = changed(**{"summary.hybrid.test_loss": float("nan")})
    assert not compare.compare_study(new, copy.deepcopy(new)).differ


@pytest.fixture
def two_folders(tmp_path):
    for run, results in (("a", RESULTS), ("b", changed(**{"verdicts.0.verdict": "inconclusive"}))):
        (tmp_path / run / "01_gradient_flow").mkdir(parents=True)
        (tmp_path / run / "01_gradient_flow" / "results.json").write_text(json.dumps(results))
    (tmp_path / "a" / "02_time_indexed").mkdir()  # a study in one folder only is not compared
    (tmp_path / "a" / "02_time_indexed" / "results.json").write_text(json.dumps(RESULTS))
    return tmp_path


def test_the_command_prints_each_study_and_fails_when_a_verdict_changed(two_folders, capsys):
    assert compare.main([str(two_folders / "a"), str(two_folders / "a")]) == 0
    assert compare.main([str(two_folders / "a"), str(two_folders / "b")]) == 1
    out = capsys.readouterr().out
    assert "verdict changed: hybrid beats the null arm: held → inconclusive" in out and "02_time_indexed" in out


def test_the_command_says_what_is_wrong_with_its_folders(two_folders, capsys):
    with pytest.raises(SystemExit):
        compare.main([str(two_folders / "a"), str(two_folders / "missing")])
    assert "is not a folder of reports" in capsys.readouterr().err
    (two_folders / "empty").mkdir()
    with pytest.raises(SystemExit):
        compare.main([str(two_folders / "a"), str(two_folders / "empty")])
    assert "no study has a results.json in both" in capsys.readouterr().err


def test_what_one_side_lacks_is_listed_and_fails_the_command(two_folders, capsys):
    """A study in one folder only, a section or a value in one run only: listed, never dropped, and exit 1."""
    without = copy.deepcopy(RESULTS)
    del without["summary"]  # a whole section: named once, with its count
    without["parameters"].pop("seed")
    c = compare.compare_study(RESULTS, without, "01")
    assert c.same_verdicts and not c.complete and c.values_only_new == []
    assert c.values_only_old == ["parameters / seed", "summary"]  # the section's one science value; ms, runs left out
    extra = changed(**{"summary.ti_mlp": {"test_loss": 1.3, "val_loss": 1.31}})
    assert compare.compare_study(RESULTS, extra).values_only_new == ["summary / ti_mlp (2 values)"]
    (two_folders / "c" / "01_gradient_flow").mkdir(parents=True)
    (two_folders / "c" / "01_gradient_flow" / "results.json").write_text(json.dumps(RESULTS))
    assert compare.main([str(two_folders / "a"), str(two_folders / "c")]) == 1  # 02 only in a
    assert f"02_time_indexed: only in {two_folders / 'a'} (not compared)" in capsys.readouterr().out
    (two_folders / "c" / "01_gradient_flow" / "results.json").write_text(json.dumps(without))
    assert compare.main([str(two_folders / "c"), str(two_folders / "c")]) == 0
    assert compare.main([str(two_folders / "a"), str(two_folders / "c")]) == 1
    assert "values only in the first: summary" in capsys.readouterr().out


@pytest.mark.parametrize("text, what", [
    ('{"verdicts": [{"claim": "x", "verd', "cannot be read as JSON"),
    ('[1, 2]', "holds a list, not the object a run writes"),
    ('{"verdicts": [{"verdict": "held"}]}',
     "'verdicts' must be a list of objects, each with its 'claim' and 'verdict'"),
])
def test_a_damaged_results_file_is_named_in_one_line(two_folders, capsys, text, what):
    damaged = two_folders / "b" / "01_gradient_flow" / "results.json"
    damaged.write_text(text)
    assert compare.main([str(two_folders / "a"), str(two_folders / "b")]) == 2
    out = capsys.readouterr().out.strip().splitlines()
    assert out == [f"error: {damaged}: {out[0].split(': ', 2)[2]}"] and what in out[0] and "Traceback" not in out[0]
