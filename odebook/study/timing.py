"""Timing claims measured as timing: the two arms' steps interleaved in one process (A, B, A, B, …) after a warm-up,
the ratio of their median times with a bootstrap interval over the pairs, and the machine's load (os.getloadavg)
recorded beside it. A speed verdict is read from this, never from training runs taken minutes apart on a shared
machine, and stays outside the loss claims' families (it has its own rule: ``stats.decide`` on the ratio).

Interleaving removes drift, not load: on a machine with more runnable processes than cores a call waits for the CPU,
and a longer call waits more often, so the wall clock overstates the cost ratio of CPU-bound work there. The wall
clock (the default) is what a user waits and the only clock for GPU work; ``clock=time.thread_time`` (this thread's
CPU time) or ``time.process_time`` (all of its threads') measure the work of CPU-bound arms on a busy machine. The
load beside the ratio says which case it was.
"""

from __future__ import annotations

import contextlib
import copy
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import stats

from odebook.study.stats import Interval, Verdict, decide

__all__ = ["MIN_REPS", "Timing", "interleaved", "training_step"]

MIN_REPS = 20


@dataclass(frozen=True)
class Timing:
    """Seconds per call of a and b, paired by repetition, the ratio of medians a / b with its bootstrap interval,
    and the 1-minute load average before and after."""

    a: tuple[float, ...]
    b: tuple[float, ...]
    ratio: Interval
    load: tuple[float, float]
    warmup: int
    clock: str

    def __str__(self) -> str:
        r = self.ratio
        return (f"median time a / b = {r.mean:.3g} [{r.low:.3g}, {r.high:.3g}] ({r.n} interleaved pairs after "
                f"{self.warmup} warm-up, bootstrap 95 %; medians {np.median(self.a) * 1e3:.3g} / "
                f"{np.median(self.b) * 1e3:.3g} ms by {self.clock}; load {self.load[0]:.2f} → {self.load[1]:.2f})")

    def verdict(self, claim: str, *, threshold: float = 1.0, side: str = "below", scale: str = "") -> Verdict:
        """'held' when the whole interval of a / b lies ``side`` ``threshold`` (1: a is faster), by ``stats.decide``."""
        return Verdict(claim, decide(self.ratio, threshold, claim=side), str(self), scale,
                       f"timing: a / b {side} {threshold:g}, interleaved", "outside the loss families")


def interleaved(a: Callable[[], object], b: Callable[[], object], *, reps: int = MIN_REPS, warmup: int = 3,
                sync: Callable[[], object] = lambda: None, clock: Callable[[], float] = time.perf_counter,
                level: float = 0.95, seed: int = 0) -> Timing:
    """Time ``a`` and ``b`` alternately, ``warmup`` untimed pairs then ``reps`` timed ones (at least MIN_REPS),
    by ``clock`` (see the module's note on load); ``sync`` runs after each call inside the timing
    (torch.cuda.synchronize on a GPU)."""
    if reps < MIN_REPS or warmup < 1:
        raise ValueError(f"interleaved timing needs reps ≥ {MIN_REPS} and a warm-up ≥ 1, got reps = {reps}, "
                         f"warmup = {warmup}")

    def once(fn: Callable[[], object]) -> float:
        start = clock()
        fn()
        sync()
        return clock() - start

    for _ in range(warmup):
        once(a), once(b)
    load_before = os.getloadavg()[0]
    pairs = np.array([(once(a), once(b)) for _ in range(reps)])
    load_after = os.getloadavg()[0]
    ta, tb = pairs[:, 0], pairs[:, 1]
    res = stats.bootstrap((ta, tb), lambda x, y, axis=-1: np.median(x, axis=axis) / np.median(y, axis=axis),
                          paired=True, vectorized=True, n_resamples=2000, confidence_level=level,
                          method="percentile", random_state=seed)
    ratio = Interval(float(np.median(ta) / np.median(tb)), float(res.confidence_interval.low),
                     float(res.confidence_interval.high), reps)
    return Timing(tuple(ta.tolist()), tuple(tb.tolist()), ratio, (load_before, load_after), warmup,
                  getattr(clock, "__name__", str(clock)))


def training_step(model, batch, loss_fn: Callable, *, lr: float = 1e-3, grad_clip: float = 1.0,
                  autocast: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext
                  ) -> Callable[[], None]:
    """One training step as ``train`` takes it (forward under ``autocast``, backward, gradient clipping, AdamW) on a
    copy of ``model`` with the same ``batch`` every call: a callable for ``interleaved``. ``model`` is untouched."""
    import torch

    net = copy.deepcopy(model).train()
    params = [p for p in net.parameters() if p.requires_grad]
    device = params[0].device.type
    optimizer = torch.optim.AdamW(params, lr=lr, fused=device in ("cpu", "cuda"))

    def step() -> None:
        with autocast():
            loss = loss_fn(net, batch)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, grad_clip)
        optimizer.step()

    return step
