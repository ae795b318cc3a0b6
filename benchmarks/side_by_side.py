"""Seed-runs per minute, per study: today's way (one run after another in one process, on all its threads) against
one-thread worker processes side by side (odebook.training.executor.Workers, the default on a CPU with several cores),
timed interleaved in one process (``python -m benchmarks.side_by_side [--steps N] [--rounds R]``, or ``make bench``'s
section ``--only side``).

A seed-run here is what a study's runs are made of: build the model of the largest training run of its cpu plan
(odebook.book.workload) and train it ``steps`` steps on that run's batch (odebook.study.timing.training_step). Each
round times one batch of as many seed-runs as there are usable cores, each way, one way after the other and the
order alternating by round (A B, B A, …), so load that comes and goes falls on both; the workers' pool is started
before the first round, as a study's is before its second look. The load average before and after is printed beside
the figures.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

from benchmarks.cpu_profile import STUDIES, largest_run


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
    """Seconds per batch of ``cores`` seed-runs, today's way and side by side, in interleaved rounds."""
    from odebook.training.executor import Local, Workers
    from odebook.training.runtime import precision_for

    cpu = precision_for(torch.device("cpu"))
    jobs = [SeedRun(study, steps, seed) for seed in range(cores)]
    ways = {"today": Local(), "side by side": Workers(cores)}
    ways["side by side"].run(jobs, cpu)  # the pool started and the workers' imports done
    jobs[0](cpu)  # this process's first-call costs, likewise
    times: dict[str, list[float]] = {w: [] for w in ways}
    for r in range(rounds):
        for name in (list(ways) if r % 2 == 0 else list(ways)[::-1]):
            t0 = time.perf_counter()
            ways[name].run(jobs, cpu)
            times[name].append(time.perf_counter() - t0)
    today, side = statistics.median(times["today"]), statistics.median(times["side by side"])
    return {"study": study, "family": largest_run(study)[0].family, "seed-runs": cores, "steps": steps,
            "today s": today, "side by side s": side, "today runs/min": 60 * cores / today,
            "side by side runs/min": 60 * cores / side, "ratio": today / side}


def main(argv: list[str] | None = None) -> None:
    import pandas as pd

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


if __name__ == "__main__":
    main()
