"""Interleaved timing recovers a known cost ratio (a generous bound; no absolute time is asserted)."""

import math

import pytest

from odebook.study.timing import interleaved


def _loop(n: int):
    def run():
        for _ in range(n):
            pass
    return run


def test_interleaved_timing_recovers_a_known_cost_ratio_and_records_the_load():
    t = interleaved(_loop(150_000), _loop(50_000), reps=20, warmup=2)  # a costs three times b
    assert 2.0 < t.ratio.mean < 4.5 and t.ratio.low <= t.ratio.mean <= t.ratio.high
    assert len(t.a) == len(t.b) == t.ratio.n == 20 and all(math.isfinite(x) for x in t.load)
    v = t.verdict("b is faster than a", threshold=1.0, side="above")
    assert v.outcome in ("held", "inconclusive") and "interleaved pairs" in v.evidence
    assert v.role == "outside the loss families" and "load" in v.evidence


def test_too_few_repetitions_are_refused():
    with pytest.raises(ValueError, match="reps ≥ 20"):
        interleaved(_loop(10), _loop(10), reps=5)
