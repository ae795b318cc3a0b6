"""A learning rate chosen at the edge of its grid extends the grid (at most twice) or is flagged untuned."""

import pytest

from odebook.study.lr_grid import check_grid


def test_an_edge_choice_extends_the_grid_one_step_then_is_flagged():
    grid = [1e-3, 3e-3]
    first = check_grid(grid, 3e-3)
    assert first.action == "extend" and first.edge == "top" and first.value == pytest.approx(9e-3)
    second = check_grid([*grid, first.value], first.value, extensions=1)
    assert second.action == "extend" and second.value == pytest.approx(2.7e-2)
    third = check_grid([*grid, first.value, second.value], second.value, extensions=2)
    assert third.action == "untuned" and third.value is None and "top of the grid" in third.note
    bottom = check_grid(grid, 1e-3)
    assert bottom.action == "extend" and bottom.edge == "bottom" and bottom.value == pytest.approx(1e-3 / 3)


def test_an_interior_choice_is_tuned_and_a_profile_may_forbid_extending():
    assert check_grid([1e-3, 3e-3, 1e-2], 3e-3).action == "tuned"
    flagged = check_grid([1e-3, 3e-3], 3e-3, may_extend=False)
    assert flagged.action == "untuned" and "does not extend" in flagged.note


def test_bad_grids_say_what():
    with pytest.raises(ValueError, match="not in the grid"):
        check_grid([1e-3, 3e-3], 2e-3)
    with pytest.raises(ValueError, match="two distinct positive"):
        check_grid([1e-3], 1e-3)


def test_check_tried_counts_the_extensions_beyond_the_base_grid_and_flags_a_one_rate_grid():
    from odebook.study.lr_grid import check_tried

    base = [1e-3, 3e-3]
    out = check_tried({"a": [1e-3, 3e-3], "b": [1e-3, 3e-3, 9e-3], "c": [1e-3, 3e-3, 9e-3, 2.7e-2]},
                      {"a": 3e-3, "b": 3e-3, "c": 2.7e-2}, base, max_extensions=2)
    assert out["a"].action == "extend" and out["b"].action == "tuned" and out["c"].action == "untuned"
    assert check_tried({"a": [1e-3]}, {"a": 1e-3}, [1e-3], max_extensions=2)["a"].action == "untuned"


def test_annotate_writes_the_choice_and_how_its_tuning_ended_beside_the_grid():
    import math

    import pandas as pd

    from odebook.study.lr_grid import annotate

    table = pd.DataFrame({1e-3: [2.0, 2.5], 2e-3: [1.9, 2.4], 4e-3: [2.1, math.nan]}, index=["a", "b"])
    status = annotate(table, {"a": 2e-3, "b": 2e-3}, [1e-3, 2e-3, 4e-3])
    assert table["chosen lr"].tolist() == [2e-3, 2e-3] and table["tuning"].tolist() == ["tuned", "untuned"]
    assert "top of the grid" in status["b"].note  # b never trained at 4e-3: its choice is at its own grid's edge
    shared = pd.DataFrame({1e-3: [2.0], 2e-3: [1.9]}, index=["a"])
    assert annotate(shared, {"a": 2e-3}, [1e-3, 2e-3], tried={"a": [1e-3, 2e-3, 4e-3]})["a"].action == "tuned"


def test_choose_takes_the_lowest_loss_or_the_middle_of_the_rates_that_tie_it():
    import math

    from odebook.study.lr_grid import choose

    solved = {2.5e-4: 1.1e-8, 5e-4: 1.2e-8, 1e-3: 2.6e-4, 2e-3: 0.0225, 4e-3: 0.3}
    assert choose(solved) == 2.5e-4  # tie 0: the lowest loss alone, as before
    assert choose(solved, tie=0.01) == 5e-4  # three rates within 0.01 nats of the best: the middle one
    assert choose(solved, tie=0.05) == 5e-4  # four: the lower of the two middles
    assert choose(solved, tie=1.0) == 1e-3
    assert choose({1e-3: 1.0, 2e-3: 1.0}) == 1e-3  # an exact tie at tie 0: the lower rate (pandas' idxmin's first)
    assert choose({1e-3: 1.0, 2e-3: math.inf, 5e-4: float("nan")}, tie=10.0) == 1e-3  # diverged and untried never
    assert choose({1e-3: math.inf, 2e-3: math.inf}) == 1e-3  # every rate diverged: the lowest, flagged downstream
    with pytest.raises(ValueError, match="tie"):
        choose(solved, tie=-0.1)
    with pytest.raises(ValueError, match="no rate"):
        choose({1e-3: float("nan")})

