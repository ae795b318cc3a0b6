"""The benchmarks' one way of timing a call, and how they tell a figure measured alone from one another process
shared."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

from odebook.book import wait_policy

__all__ = ["median_time", "timed", "CONTAMINATED", "contaminated"]

# A one-process figure is "alone" only if its threads held their cores: process CPU time over wall time × threads of
# at least this share (spinning waits keep an idle machine's share near 1), and the machine was not busy as it started
# (wait_policy.BUSY: the load at which the runner, too, treats the machine as shared).
CONTAMINATED = 0.85


def timed(fn: Callable[[], object], repeats: int, threads: int = 1) -> tuple[float, float]:
    """Median seconds of ``fn()`` over ``repeats`` calls, after one untimed call (first-call allocations, caches), and
    the share of the calls' wall time this process's ``threads`` spent on a core (its CPU time over wall × threads)."""
    fn()
    times = []
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    share = (time.process_time() - cpu0) / max((time.perf_counter() - wall0) * threads, 1e-12)
    return statistics.median(times), share


def median_time(fn: Callable[[], object], repeats: int) -> float:
    """Median seconds of ``fn()`` over ``repeats`` calls, after one untimed call."""
    return timed(fn, repeats)[0]


def contaminated(share: float, busy: float) -> str:
    """Why a figure measured "alone" is not (empty when it is): another process was busy as it started (``busy``
    cores, NaN: unknown), or its threads were off their cores (``share`` below CONTAMINATED)."""
    why = []
    if busy >= wait_policy.BUSY:
        why.append(f"{busy:.1f} cores busy with other processes")
    if share < CONTAMINATED:
        why.append(f"its threads on a core {share:.0%} of the time")
    return "; ".join(why)
