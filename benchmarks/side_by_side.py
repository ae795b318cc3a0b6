"""Seed-runs per minute, per study: today's way (one run after another in one process, on all its threads) against
one-thread worker processes side by side (odebook.training.executor.Workers, the default on a CPU with several cores),
timed interleaved in one process (``python -m benchmarks.side_by_side [--steps N] [--rounds R]``, or ``make bench``'s
section ``--only side``).

A seed-run here is what a study's runs are made of: build the model of the largest training run of its cpu plan
(odebook.book.budget.plan) and train it ``steps`` steps on that run's batch (odebook.study.timing.training_step). Each
round times one batch of as many seed-runs as there are usable cores, each way, one way after the other and the
order rotating by round (A B C, B C A, …), so load that comes and goes falls on every way; the workers' pools are
started before the first round, as a study's is before its second look. The load average before and after is
printed beside the figures.

Each round times a third way too: one seed-run alone on one one-thread worker, the other cores idle. It splits the
ratio into two measured factors, ``ratio = cores / (threads × sharing)``: *threads*, how much faster today's one
process (all threads on one run) finishes a seed-run than one thread alone does; *sharing*, how much longer a seed-run
takes beside the others than alone (the cores' caches, memory bandwidth, and on a virtual machine whatever the host's
cores share). Where side by side gains less than ``GAIN`` (issue 47's bar), a line names the study with both factors
and the ceiling that today's threads alone leave it (``cores / threads``, the gain with nothing shared).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

from benchmarks.cpu_profile import STUDIES, largest_run

GAIN = 1.4  # side by side should finish this many times more seed-runs a minute, or the bench says why not


class SeedRun:
    """One seed-run of ``study`` (module docstring) as a job of an executor; only its time counts."""

    def __init__(self, study: str, steps: int, seed: int):
        self.study, self.steps, self.seed = study, steps, seed

    def __call__(self, precision) -> None:
        from odebook.study.timing import training_step

        runs, work = largest_run(self.study)
        torch.manual_seed(self.seed)
        step = training_step(runs.build(), work.batch(), work.loss)
        for _ in range(self.steps):
            step()


def compare(study: str, steps: int, rounds: int, cores: int) -> dict:
    """Seconds per batch of ``cores`` seed-runs, today's way and side by side, and of one seed-run alone on one
    thread, in interleaved rounds; the ratio and its two factors (module docstring)."""
    from odebook.training.executor import Local, Workers
    from odebook.training.runtime import precision_for

    cpu = precision_for(torch.device("cpu"))
    jobs = [SeedRun(study, steps, seed) for seed in range(cores)]
    ways = {"today": (Local(), jobs), "side by side": (Workers(cores), jobs), "alone": (Workers(1), jobs[:1])}
    for executor, batch in list(ways.values())[1:]:
        executor.run(batch, cpu)  # the pools started and the workers' imports done
    jobs[0](cpu)  # this process's first-call costs, likewise
    times: dict[str, list[float]] = {w: [] for w in ways}
    for r in range(rounds):
        order = list(ways)[r % len(ways):] + list(ways)[:r % len(ways)]  # each way first in turn
        for name in order:
            executor, batch = ways[name]
            t0 = time.perf_counter()
            executor.run(batch, cpu)
            times[name].append(time.perf_counter() - t0)
    today, side, alone = (statistics.median(times[w]) for w in ways)
    return {"study": study, "family": largest_run(study)[0].family, "steps": steps, "today s": today,
            "side by side s": side, "alone s": alone, "today runs/min": 60 * cores / today,
            "side by side runs/min": 60 * cores / side, **factors(today, side, alone, cores)}


def factors(today: float, side: float, alone: float, cores: int) -> dict:
    """From three median times (s) — ``cores`` seed-runs today's way, the same side by side, one seed-run alone on
    one thread — the ratio and its two factors, ``ratio = cores / (threads × sharing)`` (module docstring)."""
    return {"seed-runs": cores, "ratio": today / side, "threads": cores * alone / today, "sharing": side / alone}


def why(row: dict) -> str:
    """For a study (``compare``'s row) where side by side gains less than GAIN: the ratio as ``cores / (threads ×
    sharing)`` with both factors measured, and the ceiling today's threads leave it; "" where it gains enough."""
    if row["ratio"] >= GAIN:
        return ""
    cores, threads, sharing = row["seed-runs"], row["threads"], row["sharing"]
    ceiling = cores / threads
    cause = (f"so even with nothing shared side by side could gain at most {ceiling:.2f}×" if ceiling < GAIN else
             f"with nothing shared it could gain {ceiling:.2f}×; the shortfall is what the runs share "
             "(caches, memory bandwidth, a virtual machine's host cores)")
    return (f"{row['study']}: side by side {row['ratio']:.2f}× (< {GAIN}×) = {cores} / ({threads:.2f} × "
            f"{sharing:.2f}): today's one process finishes a seed-run {threads:.2f}× faster than one thread alone, "
            f"and side by side each seed-run takes {sharing:.2f}× its time alone; {cause}")


def main(argv: list[str] | None = None) -> None:
    import pandas as pd

    from odebook.book.notebook import SIDE_BY_SIDE_STEPS
    from odebook.training.executor import usable_cores

    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--steps", type=int, default=30, help="training steps per seed-run")
    args.add_argument("--rounds", type=int, default=3, help="interleaved rounds per study")
    args.add_argument("--studies", nargs="*", default=list(STUDIES))
    a = args.parse_args(argv)
    cores = usable_cores()
    if cores < 2:
        print(f"side by side: {cores} usable core — nothing to run side by side here")
        return
    load = os.getloadavg()[0]
    rows = [compare(s, a.steps, a.rounds, cores) for s in a.studies]
    print(f"seed-runs per minute, {cores} at a time, {a.steps} steps each, median of {a.rounds} interleaved rounds "
          f"(load {load:.2f} → {os.getloadavg()[0]:.2f}; today = one process on {torch.get_num_threads()} threads)")
    print(pd.DataFrame(rows).set_index("study").round(3).to_markdown())
    faster = sum(r["ratio"] > 1 for r in rows)
    print(f"the book's default here (executor 'auto', {cores} usable cores): side by side for runs of "
          f"{SIDE_BY_SIDE_STEPS} steps or more — the faster way for {faster} of {len(rows)} studies in this run")
    for line in filter(None, map(why, rows)):
        print(line)


if __name__ == "__main__":
    main()
