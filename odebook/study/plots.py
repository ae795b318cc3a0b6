"""The figures two studies share: curves over training steps (mean over seeds with the range over seeds), validation
loss, the learned dynamics' spectrum. Each study's own figures are in its package (odebook.studies)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import matplotlib.pyplot as plt
import numpy as np

from odebook.study.experiment import Run

__all__ = ["plot_over_steps", "figure", "eval_loss", "grad_norm", "validation_loss", "spectrum"]


def figure(ncols: int = 1, width: float = 5.5, height: float = 3.6):
    fig, axes = plt.subplots(1, ncols, figsize=(width * ncols, height), squeeze=False)
    return fig, list(axes[0])


def _smooth(y: np.ndarray, window: int) -> np.ndarray:
    if window <= 1 or len(y) < window:
        return y
    return np.convolve(y, np.ones(window) / window, mode="valid")


def plot_over_steps(ax, runs: Sequence[Run], metric: Callable[[Run], tuple[Sequence[int], Sequence[float]]],
                    *, label_suffix: str = "", smooth: int = 1, linestyle: str = "-", log: bool = False,
                    models: Sequence[str] | None = None) -> None:
    """For each model, the mean over seeds of ``metric(run) -> (steps, values)``, shaded from the lowest to the
    highest seed (a band that stays positive on a log scale). A model's colour is its place in ``models`` (default:
    the models of ``runs``), so panels that show a subset still colour each model alike."""
    models = list(models or dict.fromkeys(r.model for r in runs))
    for name in dict.fromkeys(r.model for r in runs):
        rs = [r for r in runs if r.model == name]
        steps = np.asarray(metric(rs[0])[0])
        ys = np.stack([_smooth(np.asarray(metric(r)[1], dtype=float), smooth) for r in rs])
        steps = steps[len(steps) - ys.shape[1]:]
        mean = ys.mean(0)
        color = f"C{models.index(name)}"
        ax.plot(steps, mean, linestyle, color=color, label=f"{name}{label_suffix}")
        if len(rs) > 1:
            ax.fill_between(steps, ys.min(0), ys.max(0), color=color, alpha=0.2, linewidth=0)
    ax.set_xlabel("step")
    if log:
        ax.set_yscale("log")
    ax.grid(alpha=0.3)
    ax.legend()


# Each study's figures, drawn from its runs and tables: a notebook saves the figure a function returns.


def eval_loss(run: Run) -> tuple[Sequence[int], Sequence[float]]:
    """A run's validation loss at each evaluation (a ``plot_over_steps`` metric)."""
    return run.history.eval_step, run.history.eval_loss


def grad_norm(group: str) -> Callable[[Run], tuple[Sequence[int], Sequence[float]]]:
    """A run's gradient norm of parameter group ``group`` at each logged step (a ``plot_over_steps`` metric)."""
    return lambda run: (run.history.grad_step, run.history.grad_norm[group])


def validation_loss(runs: Sequence[Run], *, title: str, ylabel: str, width: float = 5.5):
    """One panel: each model's validation loss over steps, mean over seeds with their range."""
    fig, (ax,) = figure(1, width=width)
    plot_over_steps(ax, runs, eval_loss)
    ax.set(title=title, ylabel=ylabel)
    return fig


def spectrum(table):
    """The learned dynamics (odebook.study.dynamics.analyse): the leading real eigenvalue of J(t), σ_max(J(t))
    against t (one line per model and sequence), and the FTLE per model (one dot per sequence)."""
    fig, (ax_eig, ax_sig, ax_ftle) = figure(3)
    for j, (name, rows) in enumerate(table.groupby("model", sort=False)):
        for k, (_, seq) in enumerate(rows.groupby("sequence")):
            label = name if k == 0 else None
            ax_eig.plot(seq.t, seq.max_real_eig, "o-", color=f"C{j}", label=label, alpha=0.8)
            ax_sig.plot(seq.t, seq.sigma_max, "o-", color=f"C{j}", label=label, alpha=0.8)
        ftles = rows.groupby("sequence").ftle.first()
        ax_ftle.plot([j] * len(ftles), ftles, "o", color=f"C{j}")
    ax_eig.axhline(0, color="k", lw=0.5)
    ax_ftle.axhline(0, color="k", lw=0.5)
    ax_eig.set(xlabel="t", title="leading Re λ(J(t))")
    ax_sig.set(xlabel="t", title="σ_max(J(t))", yscale="log")
    names = list(dict.fromkeys(table.model))
    ax_ftle.set(xticks=range(len(names)), title="finite-time Lyapunov exponent")
    ax_ftle.set_xticklabels(names, rotation=30, fontsize=8)
    ax_eig.legend(fontsize=7)
    fig.tight_layout()
    return fig
