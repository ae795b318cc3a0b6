"""Study 05's figures: work–precision and the memory sweep."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt

from odebook.study.plots import figure

__all__ = ["work_precision", "sensitivity_sweep"]

SWEEP_PANELS = (("peak_memory_mb", "peak memory of a training step (MiB)"),
                ("ms_per_step", "time of a training step (ms)"),
                ("grad_rel_error", "gradient error vs direct (relative)"))


def work_precision(rows, *, flow: str, stated_error: float):
    """Study 05: each solver's relative error of H(1) against its evaluations and against its seconds per solve, on
    one trained flow, beside the stated error."""
    fig, axes = figure(2)
    for ax, x in zip(axes, ("evaluations", "seconds")):
        for i, (solver, by_solver) in enumerate(rows.groupby("solver", sort=False)):
            ax.plot(by_solver[x], by_solver.error, "o-", color=f"C{i}", label=solver)
        ax.axhline(stated_error, color="grey", ls="--", lw=1, label=f"stated error {stated_error:g}")
        ax.set(xlabel="vector-field evaluations" if x == "evaluations" else "seconds per solve",
               ylabel="relative error of H(1)", xscale="log", yscale="log", title=f"work–precision, {flow}")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    return fig


def _steps_axis(ax, ticks: Sequence[int]) -> None:
    ax.set_xticks(ticks, [str(n) for n in ticks], minor=False)
    ax.xaxis.set_minor_locator(plt.NullLocator())
    ax.grid(alpha=0.3)
    ax.legend()


def sensitivity_sweep(sweep, *, solver: str, steps: Sequence[int]):
    """Study 05: a training step's peak memory, time and gradient error (against direct backpropagation) for each
    sensitivity against the solver's steps."""
    fig, axes = figure(3)
    for ax, (column, title) in zip(axes, SWEEP_PANELS):
        for i, (sensitivity, rows) in enumerate(sweep.groupby("sensitivity", sort=False)):
            if column != "grad_rel_error" or sensitivity != "direct":
                ax.plot(rows.steps, rows[column], "o-", color=f"C{i}", label=sensitivity)
        ax.set(title=title, xlabel=f"{solver} steps", xscale="log", yscale="log")
        _steps_axis(ax, steps)
    fig.tight_layout()
    return fig
