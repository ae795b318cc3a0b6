"""How a kernel's threads wait for each other: spinning on an idle machine, sleeping on a busy one.

torch's CPU kernels run on libgomp's thread pool, and at the end of each parallel region a thread waits for its
partners. By default it spins for a while before it sleeps. That is the fastest way when every thread has a core of
its own (a sleeping core wakes slowly), and the slowest when another process holds one of the cores: the spinning
thread burns the time its descheduled partner needs, and a step slows far beyond a fair share. Passive waiting
(``OMP_WAIT_POLICY=PASSIVE``) keeps a busy machine near a fair share and costs the small steps of an idle one;
``python -m benchmarks.bench --only cpu`` measures both for every study (the figures are in README, Performance).

The thread count cannot follow the load instead: it changes the order of floating-point sums (a training step's
gradient differs in its last digits between one and two threads), and a re-run must give the same numbers. libgomp
reads its policy once, when it starts, so the runner chooses it for each kernel from how busy the machine is just
before (``busy_cores``) and records the choice in the run's manifest. A policy the user set
(``OMP_WAIT_POLICY``, ``GOMP_SPINCOUNT``) is left as it is.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from unittest import mock

__all__ = ["BUSY", "USER_SET", "busy_cores", "choose", "chosen"]

BUSY = 0.5  # cores' worth of other processes' CPU time above which kernels wait passively
USER_SET = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")


def _busy_jiffies() -> tuple[int, int]:
    """(busy, total) clock ticks of all cores since boot, from /proc/stat's first line."""
    with open("/proc/stat") as f:
        ticks = [int(x) for x in f.readline().split()[1:]]
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)  # idle + iowait
    return sum(ticks) - idle, sum(ticks)


def busy_cores(seconds: float = 0.5) -> float:
    """Cores' worth of CPU time other processes use now: /proc/stat over ``seconds`` while this one sleeps (where
    there is no /proc/stat, the 1-minute load average; NaN where neither exists)."""
    try:
        b0, t0 = _busy_jiffies()
        time.sleep(seconds)
        b1, t1 = _busy_jiffies()
        return (os.cpu_count() or 1) * (b1 - b0) / max(t1 - t0, 1)
    except (OSError, ValueError, IndexError):
        try:
            return os.getloadavg()[0]
        except OSError:
            return float("nan")


def choose(busy: float, environ: dict[str, str] | None = None) -> dict[str, str]:
    """The variables a kernel gets: passive waiting when ``busy`` ≥ BUSY cores, else none (libgomp's spinning);
    none where the user set a policy."""
    environ = os.environ if environ is None else environ
    if any(k in environ for k in USER_SET) or not busy >= BUSY:
        return {}
    return {"OMP_WAIT_POLICY": "PASSIVE"}


@contextlib.contextmanager
def chosen() -> Iterator[dict]:
    """Kernels started inside wait as ``choose`` says for the machine now; yields the record for the manifest:
    {"busy_cores": …, "omp_wait_policy": "PASSIVE" / "spin (libgomp's default)" / "set by the user: …"}."""
    busy = busy_cores()
    env = choose(busy)
    user = {k: os.environ[k] for k in USER_SET if k in os.environ}
    policy = (f"set by the user: {user}" if user else
              env.get("OMP_WAIT_POLICY", "spin (libgomp's default)"))
    with mock.patch.dict(os.environ, env):
        yield {"busy_cores": round(busy, 2), "omp_wait_policy": policy}
