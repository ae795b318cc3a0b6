"""The book's figures: curves over training steps (mean over seeds with the range over seeds), and each study's
figures, drawn from its runs and tables. A figure draws numbers and decides none: the book's machinery, not its
science (odebook.training.code_hash), so editing one marks no report stale."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import matplotlib.pyplot as plt
import numpy as np
from odebook.nn.modulated import modulation_curves
from odebook.study.experiment import Run
from odebook.study.stats import mean_ci

__all__ = ["plot_over_steps", "figure", "eval_loss", "grad_norm", "validation_loss", "loss_and_gradients", "spectrum",
           "clock", "loss_against_params_and_time", "validation_curves", "modulation", "rediscretisation",
           "mqar_capacity", "capacity_distance_scaling", "ablations", "work_precision", "sensitivity_sweep",
           "generation_speedup"]


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
    ax_fit.set(xscale="log", xlabel="non-embedding parameters", ylabel="validation loss", title="scaling")
    ax_fit.legend(fontsize=8)
    for ax in (ax_k, ax_d, ax_fit):
        ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


ABLATION_BARS = (("state read resampled", -0.3), ("state resampled", -0.1), ("state zeroed", 0.1),
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


SWEEP_PANELS = (("peak_memory_mb", "peak memory of a training step (MiB)"),
                ("ms_per_step", "time of a training step (ms)"),
                ("grad_rel_error", "gradient error vs direct (relative)"))


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


def generation_speedup(speed, crossovers: dict, *, target: float, lengths: Sequence[int]):
    """Study 05: each model's KV-cache speed-up against the generated length, its crossover of ``target`` marked."""
    fig, (ax,) = figure(1, width=6)
    for i, (name, rows) in enumerate(speed.groupby("model", sort=False)):
        ax.plot(rows.new_tokens, rows.speedup, "o-", color=f"C{i}", label=name)
        if crossovers[name].reached:
            ax.axvline(crossovers[name].length, color=f"C{i}", ls=":", lw=1)
    ax.axhline(target, color="grey", ls="--", lw=1, label=f"{target:g}×")
    ax.set(title="KV-cache speed-up against generated length", xlabel="new tokens", ylabel="recomputed / cached time",
           xscale="log", yscale="log")
    _steps_axis(ax, lengths)
    return fig
