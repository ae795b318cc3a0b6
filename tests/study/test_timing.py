"""Interleaved timing recovers a known cost ratio (a generous bound; no absolute time is asserted)."""

import math
import time

import pytest

from odebook.study.timing import interleaved


def _loop(n: int):
    def run():
        for _ in range(n):
            pass
    return run


def test_interleaved_timing_recovers_a_known_cost_ratio_and_records_the_load():
    """Two loops, one three times the other's work, timed by this thread's CPU time: on a shared machine under load
    the wall clock times them further apart than their work (see odebook.study.timing)."""
    t = interleaved(_loop(300_000), _loop(100_000), reps=20, warmup=2, clock=time.thread_time)
    assert 2.0 < t.ratio.mean < 4.5 and t.ratio.low <= t.ratio.mean <= t.ratio.high
    assert len(t.a) == len(t.b) == t.ratio.n == 20 and all(math.isfinite(x) for x in t.load)
    v = t.verdict("b is faster than a", threshold=1.0, side="above")
    assert v.outcome == "held" and "interleaved pairs" in v.evidence and "thread_time" in v.evidence
    assert v.role == "outside the loss families" and "load" in v.evidence


def test_the_wall_clock_is_the_default():
    t = interleaved(_loop(1000), _loop(1000))
    assert t.clock == "perf_counter" and t.ratio.low <= t.ratio.mean <= t.ratio.high and t.warmup == 3


def test_too_few_repetitions_are_refused():
    with pytest.raises(ValueError, match="reps ≥ 20"):
        interleaved(_loop(10), _loop(10), reps=5)


def test_training_step_trains_a_copy_and_times_a_wider_model_as_slower():
    import torch

    from odebook.models import lm as models
    from odebook.study.timing import training_step

    def lm(d):
        torch.manual_seed(0)
        return models.gpt(vocab_size=50, d_model=d, n_layer=2, n_head=2, max_seq_len=32)

    small, wide = lm(16), lm(192)
    x = torch.randint(0, 50, (8, 32))
    before = [w.clone() for w in small.parameters()]
    step = training_step(small, (x, x.roll(-1, 1)), models.lm_loss)
    step()
    assert all(torch.equal(a, b) for a, b in zip(before, small.parameters()))  # the model itself is untouched
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # all of a step's work in this thread, which is what thread_time counts
    try:
        t = interleaved(training_step(wide, (x, x.roll(-1, 1)), models.lm_loss), step, reps=20, clock=time.thread_time)
    finally:
        torch.set_num_threads(threads)
    assert t.ratio.low > 1.5 and t.verdict("the small model's step is faster", side="above").outcome == "held"
