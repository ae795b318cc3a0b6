"""Study 01's figures."""

from __future__ import annotations

from collections.abc import Sequence

from odebook.study.plots import eval_loss, figure, grad_norm, plot_over_steps
from odebook.study.experiment import Run

__all__ = ["loss_and_gradients"]


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
