"""A study's seeds, in one place: which seeds are confirmatory, when the claims are looked at, and which seeds the
learning rates are tuned on. Every notebook, ``study.looks`` and ``study.experiment`` read them from here
(``Params.seed_plan``); nothing else derives a seed from ``seed`` and ``n_seeds``."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SeedPlan", "looks_problem"]


def looks_problem(looks: tuple[int, ...] | list[int], n_seeds: int) -> str | None:
    """What is wrong with ``looks`` as interim looks of a study capped at ``n_seeds`` seeds, or None: each look is a
    seed count, they increase, and the last stays below the cap (the cap is the final look)."""
    if looks and (sorted(set(looks)) != list(looks) or looks[-1] >= n_seeds):
        return f"must increase and stay below n_seeds = {n_seeds} (the last look)"
    return None


@dataclass(frozen=True)
class SeedPlan:
    """The confirmatory seeds ``first`` … ``first + n − 1``, examined at the interim seed counts ``looks`` and at
    ``n`` (the cap); learning rates are tuned on the ``n_tuning`` seeds past the cap (``tuning``), so no run that
    chose its own rate is ever among the runs a claim is tested on."""

    first: int
    n: int
    looks: tuple[int, ...] = ()
    n_tuning: int = 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "looks", tuple(self.looks))
        problem = looks_problem(self.looks, self.n)
        if self.n < 1 or self.n_tuning < 1 or problem:
            raise ValueError(f"seed plan of {self.n} seeds, looks {list(self.looks)}, {self.n_tuning} tuning: "
                             + (problem or "needs at least one seed of each"))

    @property
    def seeds(self) -> list[int]:
        """Every confirmatory seed, in order (the looks take the first 2, 3, … of them)."""
        return list(range(self.first, self.first + self.n))

    @property
    def tuning(self) -> list[int]:
        """The seeds every learning-rate grid runs on (the mean of their validation losses chooses): past the last
        confirmatory seed."""
        return list(range(self.first + self.n, self.first + self.n + self.n_tuning))

    @property
    def design(self) -> list[int]:
        """The seed counts at which the primary claims are examined: each look, then the cap."""
        return [*self.looks, self.n]
