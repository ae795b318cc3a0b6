"""Learning-rate selection that says when it is untuned. A value chosen at the edge of its grid may lie beyond it:
extend the grid one step in that direction (the grid's own ratio at that edge), at most ``max_extensions`` times,
or — where the profile forbids it or the extensions are spent — flag the choice as untuned, so that the report and
the claims resting on it can say so. ``choose`` picks a rate from the grid's losses: the lowest, or the middle of the
rates that tie it. Pure functions: study.experiment.tune_lr acts on them (its ``tie`` and ``max_extensions``), and
``annotate`` writes what they found beside a tuned grid's table."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

__all__ = ["GridChoice", "choose", "check_grid", "check_tried", "annotate"]


@dataclass(frozen=True)
class GridChoice:
    """``action``: "tuned" (an interior choice), "extend" (try ``value`` next) or "untuned" (at the ``edge`` of the
    grid with no extension left or allowed); ``note`` says it in words for the report."""

    action: str
    value: float | None
    edge: str
    note: str


def choose(final: Mapping[float, float], *, tie: float = 0.0) -> float:
    """The rate to train at, from each tried rate's mean final validation loss (NaN: not tried; infinite: diverged):
    the one with the lowest loss, or — where other rates came within ``tie`` of that loss — the middle one of them (the
    lower of two middles, as an exact tie at ``tie`` 0 takes the lower rate). Where several rates solve a task on the
    tuning seeds, their differences are noise, and the lowest loss picks a rate at random, often at an end of the span,
    where another seed fails: at the slow end it has not finished learning in its steps, at the fast end it stalls.
    The middle of the span lies furthest from both. Where every rate diverged, the lowest rate."""
    if not tie >= 0:
        raise ValueError(f"a tie is a loss difference of 0 or more, got {tie!r}")
    tried = {float(lr): float(v) for lr, v in final.items() if not math.isnan(v)}
    if not tried:
        raise ValueError(f"no rate to choose from: every loss is NaN ({dict(final)})")
    best = min(tried.values())
    if math.isinf(best):
        return min(tried)
    tied = sorted(lr for lr, v in tried.items() if v <= best + tie)
    return tied[(len(tied) - 1) // 2]


def check_grid(grid: Sequence[float], chosen: float, *, extensions: int = 0, max_extensions: int = 2,
               may_extend: bool = True) -> GridChoice:
    """What to do about ``chosen`` from ``grid`` (the values tried so far, ``extensions`` of them added by earlier
    calls): an interior choice is tuned; an edge choice extends the grid by one step beyond that edge (the ratio of
    the two values at that edge), or is flagged untuned."""
    values = sorted(float(v) for v in grid)
    if len(values) < 2 or len(set(values)) != len(values) or values[0] <= 0:
        raise ValueError(f"a learning-rate grid needs at least two distinct positive values, got {list(grid)}")
    if float(chosen) not in values:
        raise ValueError(f"the chosen learning rate {chosen!r} is not in the grid {values}")
    edge = "top" if chosen == values[-1] else "bottom" if chosen == values[0] else ""
    if not edge:
        return GridChoice("tuned", float(chosen), "", f"lr {chosen:g} lies inside the grid {values}")
    step = values[-1] / values[-2] if edge == "top" else values[0] / values[1]
    if may_extend and extensions < max_extensions:
        nxt = chosen * step
        return GridChoice("extend", nxt, edge, f"lr {chosen:g} is at the {edge} of the grid: try {nxt:g}")
    why = "the profile does not extend grids" if not may_extend else f"after {extensions} extension(s)"
    return GridChoice("untuned", None, edge, f"untuned: lr {chosen:g} is at the {edge} of the grid {values} ({why})")


def check_tried(tried: Mapping[str, Sequence[float]], chosen: Mapping[str, float], base: Sequence[float], *,
                max_extensions: int = 0) -> dict[str, GridChoice]:
    """``check_grid`` for every model: ``tried[name]`` the rates it trained at (the ``base`` grid and any
    extensions, which are the rates not in ``base``). A base grid of one rate cannot be bracketed: untuned."""
    out = {}
    for name, rates in tried.items():
        rates = sorted(set(float(r) for r in rates))
        if len(set(float(b) for b in base)) < 2:
            out[name] = GridChoice("untuned", None, "", f"untuned: a grid of one rate {rates[0]:g} cannot bracket")
            continue
        extensions = len(set(rates) - set(float(b) for b in base))
        out[name] = check_grid(rates, chosen[name], extensions=extensions, max_extensions=max_extensions,
                               may_extend=max_extensions > 0)
    return out


def annotate(table: pd.DataFrame, chosen: Mapping[str, float], base: Sequence[float], *, max_extensions: int = 0,
             tried: Mapping[str, Sequence[float]] | None = None) -> dict[str, GridChoice]:
    """``check_tried`` on a tuned grid's table (``experiment.tune_lr``'s: model × rate → final validation loss, NaN
    where a model did not train at that rate; ``tried``, where given, says instead which rates each model trained at),
    and beside it, in ``table``, each model's "chosen lr" and how its tuning ended ("tuning": "tuned", or "untuned" at
    an edge). Returns each model's ``GridChoice``, whose note says it in words."""
    if tried is None:
        tried = {n: [lr for lr in table.columns if pd.notna(table.loc[n, lr])] for n in table.index}
    status = check_tried(tried, chosen, base, max_extensions=max_extensions)
    table["chosen lr"] = pd.Series(chosen)
    table["tuning"] = pd.Series({n: c.action for n, c in status.items()})
    return status
