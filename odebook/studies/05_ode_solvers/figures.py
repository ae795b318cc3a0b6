"""Study 05's figures: work–precision and the memory sweep."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt

from odebook.study.plots import figure

__all__ = ["work_precision", "sensitivity_sweep"]

SWEEP_PANELS = (("peak_memory_mb", "peak memory of a training step (MiB)"),
                ("ms_per_step", "time of a training step (ms)"),
                ("grad_rel_error", "gradient error vs direct (relative)"))


def work_precision(rows, *, flow: str, loss_errors):
    """Study 05: at each curvature (a panel), each solver's relative error of H(1) against its vector-field
    evaluations on one trained flow, beside the error at which the held-out loss moves by the stated tolerance
    (``loss_errors``: curvature → that error)."""
    curvatures = sorted(rows.curvature.unique())
    per_row = min(3, len(curvatures))  # rows of three panels: legible where six in one row were not
    lines = -(-len(curvatures) // per_row)
    fig, grid = plt.subplots(lines, per_row, figsize=(4.2 * per_row, 3.4 * lines), squeeze=False)
    axes = list(grid.flat)
    for ax in axes[len(curvatures):]:
        ax.remove()
    for ax, c in zip(axes, curvatures):
        for i, (solver, by_solver) in enumerate(rows[rows.curvature == c].groupby("solver", sort=False)):
            by_solver = by_solver.sort_values("evaluations")
            ax.plot(by_solver.evaluations, by_solver.error, "o-", ms=3, color=f"C{i}", label=solver)
        ax.axhline(loss_errors[c], color="grey", ls="--", lw=1, label="the loss feels")
        ax.set(xlabel="vector-field evaluations", xscale="log", yscale="log", title=f"α × {c:g}")
        ax.grid(alpha=0.3)
    for ax in axes[::per_row]:
        ax.set_ylabel("relative error of H(1)")
    axes[0].legend(fontsize=8)
    fig.suptitle(f"work–precision across curvature, {flow}")
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
