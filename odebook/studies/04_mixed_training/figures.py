"""Study 04's figure: retrieval accuracy under each ablation, by arm and regime."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from odebook.study.plots import figure

__all__ = ["ablations"]

ABLATION_BARS = (("state read resampled", -0.3), ("gdn output resampled", -0.1), ("state resampled", 0.1),
                 ("local zeroed", 0.3))


def ablations(table, *, hybrids: Sequence[str], arms: Sequence[str], regimes: Sequence[str], target: float,
              chance: float):
    """Study 04: the far accuracy each ablation costs each hybrid in each regime, beside the target; and every arm's
    accuracy inside and beyond the window (intervals across seeds), beside chance and the best shortcut."""
    fig, (ax_d, ax_p) = figure(2)
    far = table.xs("far", level="set")
    labels = [(a, r) for a in hybrids for r in regimes]
    x = np.arange(len(labels))
    for ablation, shift in ABLATION_BARS:
        vals = [far.loc[(a, r, "normal"), "acc"] - far.loc[(a, r, ablation), "acc"] for a, r in labels]
        ax_d.bar(x + shift, vals, width=0.2, label=f"far: normal − {ablation}")
    ax_d.axhline(target, color="k", linestyle=":", label=f"target {target:.2f}")
    ax_d.set(xticks=x, ylabel="accuracy drop", title="what the answer beyond the window depends on")
    ax_d.set_xticklabels([f"{a}\n{r}" for a, r in labels], fontsize=7)
    ax_d.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2)
    normal = table.xs("normal", level="ablation")
    runs = [(a, r) for a in arms for r in regimes]
    for j, where in enumerate(("inside", "far")):
        rows = normal.loc[[(a, r, where) for a, r in runs]]
        ax_p.errorbar(np.arange(len(runs)) + 0.1 * j, rows.acc, fmt="o", capsize=3,
                      label=f"{where} (interval across seeds)",
                      yerr=[(rows.acc - rows["seed lo"]).clip(lower=0), (rows["seed hi"] - rows.acc).clip(lower=0)])
    ax_p.axhline(chance, color="k", lw=0.8, label="chance")
    ax_p.axhline(normal.xs("far", level="set")["best shortcut"].max(), color="k", ls=":", lw=0.8, label="best shortcut")
    ax_p.set(xticks=range(len(runs)), ylabel="top-1 accuracy", ylim=(0, 1.05),
             title="accuracy, inside vs beyond the window")
    ax_p.set_xticklabels([f"{a}\n{r}" for a, r in runs], fontsize=7)
    ax_p.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2)
    fig.tight_layout()
    return fig
