"""Study 01's figures."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from odebook.study.plots import eval_loss, figure, grad_norm, plot_over_steps
from odebook.study.experiment import Run

from .arms import SOURCE_ALPHA

__all__ = ["loss_and_gradients", "alpha_trajectories"]


def loss_and_gradients(runs: Sequence[Run], models: Sequence[str]):
    """Study 01: validation loss at the answers, the embedding's gradient norm, and the replaced span's (in the arms
    that have one), each model coloured by its place in ``models``."""
    fig, (ax_loss, ax_grad, ax_span) = figure(3)
    plot_over_steps(ax_loss, runs, eval_loss, label_suffix=" held-out", models=models)
    ax_loss.set(title="validation loss at the answers", ylabel="nats")
    plot_over_steps(ax_grad, runs, grad_norm("embedding"), log=True, models=models)
    ax_grad.set(title="gradient norm, embedding")
    with_span = [r for r in runs if "replaced" in r.history.grad_norm]
    plot_over_steps(ax_span, with_span, grad_norm("replaced"), log=True, models=models)
    ax_span.set(title="gradient norm of the replaced span")
    fig.tight_layout()
    return fig


def alpha_trajectories(trajectories: Mapping[str, Mapping[int, Sequence[float]]], *, alpha_init: float):
    """Study 01: each flow arm's output scale α after every training step, one line per seed (a panel per arm), with
    the value it started at (``alpha_init``; the source's for ``hybrid_source``)."""
    fig, axes = figure(len(trajectories), width=4.5)
    for ax, (arm, by_seed) in zip(axes, trajectories.items()):
        for i, (seed, alphas) in enumerate(by_seed.items()):
            ax.plot(range(1, len(alphas) + 1), alphas, lw=1, color=f"C{i % 10}", label=f"seed {seed}")
        ax.axhline(0.0, color="black", lw=0.5)
        start = SOURCE_ALPHA if arm == "hybrid_source" else alpha_init
        ax.axhline(start, color="grey", ls="--", lw=1, label=f"initial {start:g}")
        ax.set(title=f"{arm}: the flow's α", xlabel="training step", ylabel="α")
        ax.grid(alpha=0.3)
    axes[-1].legend(fontsize=7, ncol=2)
    fig.tight_layout()
    return fig
