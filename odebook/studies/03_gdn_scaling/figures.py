"""Study 03's figures: MQAR capacity, and accuracy by distance beside the ladder's scaling."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from odebook.study.plots import figure

__all__ = ["mqar_capacity", "capacity_distance_scaling"]


def mqar_capacity(table, ks: Sequence[int], shortcut: dict, chance: float):
    """Study 03: first-query accuracy and binding (as drawn − re-bound) against pairs, each arm of ``table``
    (indexed by arm and k) with its interval across seeds, beside the best non-binder and chance."""
    fig, (ax_c, ax_s) = figure(2)
    arms = list(dict.fromkeys(table.index.get_level_values("arm")))
    for ax, col, lo, hi in ((ax_c, "first query", "seed lo", "seed hi"), (ax_s, "binding", "binding lo", "binding hi")):
        for j, arm in enumerate(arms):
            t = table.loc[arm]
            ax.errorbar(np.asarray(ks) * (1 + 0.03 * j), t[col], yerr=[t[col] - t[lo], t[hi] - t[col]], fmt="o-",
                        capsize=3, label=arm, color=f"C{j}")
    ax_c.plot(ks, [shortcut[k] for k in ks], "k:", label="best non-binder")
    ax_c.axhline(chance, color="k", lw=0.8, label="chance")
    ax_c.set(xscale="log", xlabel="pairs per sequence k", ylabel="accuracy at the first query", ylim=(0, 1.05),
             title="MQAR: first-query accuracy against pairs")
    ax_c.legend(fontsize=8)
    ax_s.axhline(0, color="k", ls=":", label="binds nothing")
    ax_s.axhline(0.5, color="k", lw=0.8, ls="--", label="capacity threshold")
    ax_s.set(xscale="log", xlabel="pairs per sequence k", ylabel="binding: first query as drawn − re-bound",
             ylim=(-0.3, 1.05), title="MQAR: binding against pairs")
    ax_s.legend(fontsize=8)
    for ax in (ax_c, ax_s):
        ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def capacity_distance_scaling(by_k, by_distance, ladder, fits: dict, *, bins: Sequence[str], chance: float,
                              window: int, seeds: int):
    """Study 03: retrieval accuracy against k (dotted: the best shortcut) and by distance, and each series' held-out
    loss against non-embedding parameters with its power-law fit."""
    fig, (ax_k, ax_d, ax_fit) = figure(3)
    rand = by_k.xs("random", level="set")
    for j, (size, grp) in enumerate(rand.groupby(level="size", sort=False)):
        ks = grp.index.get_level_values("k")
        ax_k.errorbar(np.asarray(ks) + 0.05 * j, grp.acc, yerr=[grp.acc - grp["seed lo"], grp["seed hi"] - grp.acc],
                      fmt="o-", capsize=3, label=size)
        ax_k.plot(ks, grp["best shortcut"], ":", color=f"C{j}")
    ax_k.axhline(chance, color="k", lw=0.8, label="chance")
    ax_k.set(xlabel="bindings per prompt k", ylabel="top-1 accuracy", ylim=(0, 1.05),
             title="GDN-only: accuracy vs k (dotted: best shortcut)")
    ax_k.legend(fontsize=8)
    for j, (size, grp) in enumerate(by_distance.groupby(level="size", sort=False)):
        grp = grp.reindex(bins, level="bin")
        ax_d.errorbar(np.arange(len(grp)) + 0.08 * j, grp.acc,
                      yerr=[grp.acc - grp["seed lo"], grp["seed hi"] - grp.acc], fmt="o-", capsize=3, label=size)
    ax_d.axhline(chance, color="k", lw=0.8)
    ax_d.set(xticks=range(len(bins)), xticklabels=bins, ylim=(0, 1.05), ylabel="top-1 accuracy",
             title=f"accuracy by distance (window {window})")
    for j, s in enumerate(fits):
        lad = ladder.loc[s]
        ax_fit.errorbar(lad["non-embedding params"], lad.val_loss,
                        yerr=None if seeds < 2 else [lad.val_loss - lad.val_loss_lo, lad.val_loss_hi - lad.val_loss],
                        fmt="o", capsize=3, color=f"C{j}", label=f"{s} (held-out loss)")
        grid = np.geomspace(lad["non-embedding params"].min() / 2, lad["non-embedding params"].max() * 2, 50)
        ax_fit.plot(grid, fits[s](grid), "--", color=f"C{j}", label=f"{s} fit, α = {fits[s].alpha:.2f}")
    if fits:
        ax_fit.set(xscale="log", xlabel="non-embedding parameters", ylabel="validation loss", title="scaling")
        ax_fit.legend(fontsize=8)
    else:
        ax_fit.text(0.5, 0.5, "the ladder was not run\nin this profile", ha="center", va="center",
                    transform=ax_fit.transAxes)
        ax_fit.set(xticks=[], yticks=[], title="scaling")
    for ax in (ax_k, ax_d, ax_fit):
        ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig
