"""The side-by-side section names each study that gains less than issue 47's bar, with what it measured beside it."""

import torch

from benchmarks.side_by_side import GAIN, why


def row(ratio: float, busy: float) -> dict:
    return {"study": "01_gradient_flow", "ratio": ratio, "today threads busy": busy, "steps": 30}


def test_a_study_that_gains_enough_is_not_named():
    assert why(row(GAIN, 0.9)) == "" and why(row(2.0, 0.3)) == ""


def test_a_short_gain_is_named_with_how_busy_todays_threads_were_and_no_inference_from_it():
    line = why(row(1.2, 0.9))
    assert line.startswith("01_gradient_flow: side by side 1.20× (< 1.4×)") and "90% busy by CPU time" in line
    assert f"{torch.get_num_threads()} threads" in line and "30 steps" in line and "at most" not in line
