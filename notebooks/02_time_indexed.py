# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 02 · Time-indexed parameter sharing, with honest statistics
#
# **Question.** A published extension of Tong et al.'s Neural ODE Transformers (ICLR 2025) claims that sharing
# one set of base weights across depth and modulating it with a small function of depth t — W_eff(t) = W_base ⊙
# σ(MLP(t)) — beats both a plain transformer and Tong's fully time-dependent weights with far fewer parameters.
# Its code let attention see future tokens, had no positional embeddings, built its "standard" baseline from
# hypernetwork blocks, and reported the minimum loss over evaluations on the test split. Here every model is causal
# (tested), has learned positional embeddings and goes through the same LM assembly; the baseline is a plain
# transformer; models are compared on the *final* validation loss over several seeds, and the test split is scored
# once at the end.
#
# | model | what it is |
# |---|---|
# | `standard` | L independent pre-LN transformer blocks |
# | `tong` | one block whose every weight (and LayerNorm) is generated from a sinusoidal embedding of t; Euler, dt = 1/L, t_k = (k+1)·dt |
# | `ti_mlp` | shared weights, per-channel gates σ(a_out(t)) σ(a_in(t))ᵀ (what the published code did); x + f |
# | `ti_mlp_full` | shared weights, one gate per weight (the published formula); x + f |
# | `ti_ssm` | `ti_mlp` with a selective diagonal SSM beside attention, its A, B, C, Δ, D gated by depth |
# | `ti_mlp_constant` | `ti_mlp` with t held fixed — the adapter structure without time dependence (the control) |
# | `ti_mlp_dt` | `ti_mlp` with ODE scaling x + dt·f |
# | `ode_shared` | ODE integration with weight sharing: x + dt·(f_base(x) ⊙ m(t)) |
#
# The published time-indexed SSM used input-independent A, B, C, Δ; ours is selective (input-dependent), as Mamba.
#
# **Claims tested** (at significance level `alpha`, Welch's t-test over seeds): (1) the time-indexed MLP beats Tong
# and the standard transformer; (2) the gain comes from time dependence rather than the adapter structure
# (`ti_mlp` vs `ti_mlp_constant`); (3) dt scaling helps (`ti_mlp_dt` vs `ti_mlp`).

# %% tags=["colab"]
# Run this cell first. In a checkout it imports the checkout's own odebook (../odebook), whatever is installed;
# elsewhere (Colab) it installs odebook from ODEBOOK_SOURCE, the repository and branch this notebook comes from
# (set the environment variable ODEBOOK_SOURCE, e.g. with %env, to install a fork or a local copy instead).
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

ODEBOOK_SOURCE = os.environ.get("ODEBOOK_SOURCE", "git+https://github.com/odebook/odebook@main")
if (Path.cwd().parent / "odebook" / "__init__.py").is_file():
    sys.path.insert(0, str(Path.cwd().parent))
elif importlib.util.find_spec("odebook") is None:
    print(f"odebook is not installed: pip install {ODEBOOK_SOURCE}", flush=True)
    pip = subprocess.run([sys.executable, "-m", "pip", "install", ODEBOOK_SOURCE], capture_output=True, text=True)
    if pip.returncode != 0:
        raise RuntimeError(f"pip could not install odebook from {ODEBOOK_SOURCE}:\n{pip.stdout[-2000:]}"
                           f"{pip.stderr[-4000:]}\nUpload the repository (this notebook in its notebooks/ folder) or "
                           "set ODEBOOK_SOURCE to an address pip can install, then run this cell again.")
    importlib.invalidate_caches()

# %% tags=["parameters"]
# The source's configuration (the t4 profile). params/<profile>/02_time_indexed.yaml overrides these.
seed = 0
n_seeds = 5
device = "auto"
output_dir = ""
models = ["standard", "tong", "ti_mlp", "ti_mlp_full", "ti_ssm", "ti_mlp_constant", "ti_mlp_dt", "ode_shared"]
corpus = "wikitext2"
tokenizer = "bytes"
d_model = 256
n_head = 4
n_layer = 6
seq_len = 128
max_seq_len = 128
batch_size = 8
steps = 1000
lr = 3e-4
weight_decay = 0.0
grad_clip = 1.0
eval_interval = 100
eval_batches = 20
tensorboard = False
n_freq = 16
d_emb = 32
gate_width = 32
d_state = 16
rediscretize = [3, 12]
alpha = 0.05

# %%
import functools

import numpy as np
import pandas as pd
from IPython.display import Markdown, display

from odebook import data, notebook, plots
from odebook.experiment import compare_to, loss_at_depth, run_seeds, summarize
from odebook.models import time_indexed
from odebook.nn.modulated import modulation_curves
from odebook.params import TimeIndexedParams
from odebook.stats import Verdict, all_of, claim_lower, mean_ci
from odebook.train import TrainConfig

p, out, precision = notebook.start(TimeIndexedParams, globals())

# %% [markdown]
# ## Data

# %%
splits = data.tokenize(data.load_corpus(p.corpus), data.get_tokenizer(p.tokenizer))
print(splits.description)

# %% [markdown]
# ## Models and runs
# Every model sees the same batches for a given seed; validation loss is measured every `eval_interval` steps on
# one fixed set of batches shared by all models.

# %%
shape = dict(vocab_size=splits.vocab_size, d_model=p.d_model, n_head=p.n_head, n_layer=p.n_layer,
             max_seq_len=p.max_seq_len, n_freq=p.n_freq, d_emb=p.d_emb, gate_width=p.gate_width, d_state=p.d_state)
builders = {name: functools.partial(time_indexed, name, **shape) for name in p.models}
config = TrainConfig.from_params(p)
runs = run_seeds(builders, splits, config, precision, seeds=range(p.seed, p.seed + p.n_seeds),
                 batch_size=p.batch_size, seq_len=p.seq_len, eval_batches=p.eval_batches,
                 log_dir=notebook.tensorboard_dir(out, p, "runs"))

# %% [markdown]
# ## Results
# Final validation loss (mean and 95 % t-interval over seeds), test loss (scored once), and each model against the
# standard transformer (Welch's t-test, Cohen's d; negative differences are better than the standard). Peak memory
# is tracked on CUDA only.

# %%
table = summarize(runs)
if "standard" in table.index:
    table = table.join(compare_to(runs, "standard"))
table["flops_per_param"] = table.gflops_per_forward * 1e9 / table.params
notebook.save_table(table, out, "results_table")
display(table.round(4))

# %%
fig, (ax_p, ax_t) = plots.figure(2)
for i, (name, row) in enumerate(table.iterrows()):
    secs = mean_ci([r.train_seconds for r in runs if r.model == name])
    yerr = [[row.val_loss - row.val_loss_lo], [row.val_loss_hi - row.val_loss]] if p.n_seeds > 1 else None
    ax_p.errorbar(row.params, row.val_loss, yerr=yerr, fmt="o", color=f"C{i}", label=name, capsize=3)
    xerr = [[secs.mean - secs.low], [secs.high - secs.mean]] if p.n_seeds > 1 else None
    ax_t.errorbar(secs.mean, row.val_loss, xerr=xerr, yerr=yerr, fmt="o", color=f"C{i}", label=name, capsize=3)
ax_p.set(xscale="log", xlabel="parameters", ylabel="final validation loss", title="loss against parameters")
ax_t.set(xlabel="training time (s, device synchronised)", ylabel="final validation loss",
         title="loss against wall-clock")
for ax in (ax_p, ax_t):
    ax.grid(alpha=0.3)
ax_t.legend(fontsize=8)
fig.tight_layout()
notebook.save_figure(fig, out, "loss_vs_params_and_time")

fig, (ax,) = plots.figure(1, width=7)
plots.plot_over_steps(ax, runs, lambda r: (r.history.eval_step, r.history.eval_loss))
ax.set(title="validation loss during training (range over seeds shaded)", ylabel="loss")
notebook.save_figure(fig, out, "validation_curves")

# %% [markdown]
# ## Learned modulation m(t)
# Mean gate value of each gated matrix against depth t, for the first seed's model (dots: the depths used in
# training). A gate that does not move with t means the model did not use its time dependence. The depth embedding
# has frequencies up to 1000 rad per unit t (the published form), so between the trained depths a curve need not be
# smooth: the re-discretisation below tests what that does to other step counts.

# %%
gated = [n for n in p.models if n not in ("standard", "tong")]
ts = list(np.linspace(0.0, 1.0, 41))
fig, axes = plots.figure(max(len(gated), 1), width=3.6)
for ax, name in zip(axes, gated):
    run = next(r for r in runs if r.model == name)
    trained_t = run.module.blocks[0].times()
    for j, (gate, curve) in enumerate(modulation_curves(run.module, ts).items()):
        ax.plot(ts, curve, color=f"C{j}", label=gate)
        ax.plot(trained_t, modulation_curves(run.module, trained_t)[gate], "o", color=f"C{j}", markersize=3)
    ax.set(title=name, xlabel="t", ylim=(0, 1))
    ax.legend(fontsize=6)
fig.tight_layout()
notebook.save_figure(fig, out, "modulation_curves")

# %% [markdown]
# ## Re-discretisation
# The ODE-style models (dt-scaled), trained with L steps, evaluated with other step counts (Tong et al.'s adaptive
# depth) on the same validation batches.

# %%
valid = data.fixed_batches(splits.valid, p.eval_batches, p.batch_size, p.seq_len)
depths = sorted({*p.rediscretize, p.n_layer})
ode_style = [n for n in p.models if n in ("tong", "ti_mlp_dt", "ode_shared")]
redisc = pd.DataFrame([{"model": r.model, "seed": r.seed, "steps": n, "val_loss": loss_at_depth(r, n, valid, precision)}
                       for r in runs if r.model in ode_style for n in depths])
if len(redisc):
    redisc_table = redisc.groupby(["model", "steps"]).val_loss.mean().unstack()
    display(redisc_table.round(4))
    fig, (ax,) = plots.figure(1)
    for name, row in redisc_table.iterrows():
        ax.plot(row.index, row.values, "o-", label=name)
    ax.axvline(p.n_layer, color="k", linestyle=":", label="trained")
    ax.set(xscale="log", xlabel="depth steps", ylabel="validation loss", title="re-discretisation")
    ax.legend()
    ax.grid(alpha=0.3)
    notebook.save_figure(fig, out, "rediscretisation")

# %% [markdown]
# ## Verdicts
# Each claim is *held* when the predicted difference is significant at `alpha`, *not held* when the opposite
# difference is, and *inconclusive* otherwise.

# %%
def final(name):
    return [r.history.final_eval_loss for r in runs if r.model == name]


def lower(a, b):
    """Verdict and evidence for "a has lower final validation loss than b"."""
    return claim_lower(final(a), final(b), p.alpha, a, b)


verdicts = {
    "time-indexed MLP (channel gates) beats Tong and the standard transformer":
        all_of(lower("ti_mlp", "tong"), lower("ti_mlp", "standard")),
    "time-indexed MLP (full gates) beats Tong and the standard transformer":
        all_of(lower("ti_mlp_full", "tong"), lower("ti_mlp_full", "standard")),
    "the gain comes from time dependence rather than the adapter structure": lower("ti_mlp", "ti_mlp_constant"),
    "dt scaling helps": lower("ti_mlp_dt", "ti_mlp"),
}
display(Markdown("\n".join(f"- **{claim}**: {v} ({evidence})" for claim, (v, evidence) in verdicts.items())))

# %%
notebook.save_results(
    out,
    headline={**{f"{m} val loss": table.loc[m, "val_loss"] for m in table.index}},
    data=splits.description, precision=str(precision), parameters=p.to_dict(),
    summary=table.reset_index().to_dict("records"), rediscretisation=redisc.to_dict("records"),
    verdicts=[Verdict(k, v, e) for k, (v, e) in verdicts.items()],
    runs=[r.record() for r in runs])
