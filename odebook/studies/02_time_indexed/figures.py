"""Study 02's figures: loss against parameters and time, validation curves, the learned modulation and
re-discretisation."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from odebook.study.plots import eval_loss, figure, plot_over_steps
from odebook.nn.modulated import modulation_curves
from odebook.study.experiment import Run
from odebook.study.stats import mean_ci

__all__ = ["loss_against_params_and_time", "validation_curves", "modulation", "rediscretisation"]


def clock(run: Run) -> tuple[np.ndarray, np.ndarray]:
    """Training seconds at each evaluation (the steps' own time, evaluations left out) and the validation loss."""
    seconds = np.cumsum(run.history.step_time)
    return seconds[np.asarray(run.history.eval_step) - 1], np.asarray(run.history.eval_loss)


def loss_against_params_and_time(table, runs: Sequence[Run], seeds: int):
    """Study 02: each model's final validation loss against its parameters and against its training time (intervals
    across seeds where there are several)."""
    fig, (ax_p, ax_t) = figure(2)
    for i, (name, row) in enumerate(table.iterrows()):
        seconds = [r.train_seconds for r in runs if r.model == name]
        yerr = [[row.val_loss - row.val_loss_lo], [row.val_loss_hi - row.val_loss]] if seeds > 1 else None
        ax_p.errorbar(row.params, row.val_loss, yerr=yerr, fmt="o", color=f"C{i}", label=name, capsize=3)
        secs = mean_ci(seconds)
        xerr = [[secs.mean - secs.low], [secs.high - secs.mean]] if seeds > 1 else None
        ax_t.errorbar(secs.mean, row.val_loss, xerr=xerr, yerr=yerr, fmt="o", color=f"C{i}", label=name, capsize=3)
    ax_p.set(xscale="log", xlabel="parameters", ylabel="final validation loss", title="loss against parameters")
    ax_t.set(xlabel="training time (s, device synchronised)", ylabel="final validation loss",
             title="loss against wall-clock")
    for ax in (ax_p, ax_t):
        ax.grid(alpha=0.3)
    ax_t.legend(fontsize=8)
    fig.tight_layout()
    return fig


def validation_curves(runs: Sequence[Run], models: Sequence[str]):
    """Study 02: validation loss against steps (mean, range over seeds) and against each seed's training seconds."""
    fig, (ax_s, ax_w) = figure(2)
    plot_over_steps(ax_s, runs, eval_loss)
    ax_s.set(title="validation loss against steps (range over seeds shaded)", ylabel="loss")
    for i, name in enumerate(models):
        for j, r in enumerate(r for r in runs if r.model == name):
            ax_w.plot(*clock(r), color=f"C{i}", alpha=0.6, label=name if j == 0 else None)
    ax_w.set(title="validation loss against training seconds (each seed)", xlabel="training seconds (steps only)",
             ylabel="loss")
    ax_w.grid(alpha=0.3)
    ax_w.legend(fontsize=8)
    fig.tight_layout()
    return fig


def modulation(models: dict):
    """Study 02: each gated model's mean gate value of each gated matrix against depth t (dots: the depths it was
    trained at), one panel a model."""
    ts = list(np.linspace(0.0, 1.0, 41))
    fig, axes = figure(max(len(models), 1), width=3.6)
    for ax, (name, model) in zip(axes, models.items()):
        trained_t = model.blocks[0].times()
        for j, (gate, curve) in enumerate(modulation_curves(model, ts).items()):
            ax.plot(ts, curve, color=f"C{j}", label=gate)
            ax.plot(trained_t, modulation_curves(model, trained_t)[gate], "o", color=f"C{j}", markersize=3)
        ax.set(title=name, xlabel="t", ylim=(0, 1))
        ax.legend(fontsize=6)
    fig.tight_layout()
    return fig


def rediscretisation(table, *, trained: int):
    """Study 02: each ODE-style model's validation loss against the depth steps it is evaluated with (``table``:
    models by steps), the trained depth marked."""
    fig, (ax,) = figure(1)
    for name, row in table.iterrows():
        ax.plot(row.index, row.values, "o-", label=name)
    ax.axvline(trained, color="k", linestyle=":", label="trained")
    ax.set(xscale="log", xlabel="depth steps", ylabel="validation loss", title="re-discretisation")
    ax.legend()
    ax.grid(alpha=0.3)
    return fig
