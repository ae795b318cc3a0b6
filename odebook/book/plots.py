"""Figures shared by the studies: curves over training steps, mean over seeds with the range over seeds."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import matplotlib.pyplot as plt
import numpy as np
from odebook.study.experiment import Run

__all__ = ["plot_over_steps", "figure"]


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
