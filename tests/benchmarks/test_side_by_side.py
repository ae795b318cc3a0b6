"""The side-by-side section says why a study gains less than issue 47's bar, from what it measured."""

import torch

from benchmarks.side_by_side import GAIN, why


def row(ratio: float, busy: float) -> dict:
    return {"study": "01_gradient_flow", "ratio": ratio, "today threads busy": busy, "steps": 30}


def test_a_study_that_gains_enough_needs_no_reason():
    assert why(row(GAIN, 0.9)) == "" and why(row(2.0, 0.3)) == ""


def test_a_short_gain_is_explained_by_how_busy_todays_process_kept_its_threads():
    busy = why(row(1.2, 0.9))
    assert busy.startswith("01_gradient_flow: side by side 1.20×") and "90% busy" in busy
    assert f"{torch.get_num_threads()} threads" in busy and "at most 1.11×" in busy
    idle = why(row(1.1, 0.5))
    assert "only 50% busy" in idle and "30 steps" in idle
