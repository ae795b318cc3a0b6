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
# # 01 · Gradient flow through a neural-ODE block
#
# **Question.** Can a neural-ODE flow block replace transformer residual layers without hurting gradient flow or
# loss? The source trained a 6-layer, 256-d GPT on WikiText-2 and replaced layers 3–4 by an ODE flow integrated
# with 4 Euler steps, conditioned on time and on a control vector, with a learned output scale initialised at 0.1.
#
# **Models.** *Baseline*: token + learned positional embeddings, pre-LN blocks (causal SDPA attention, 4× GELU MLP),
# final LayerNorm, untied head. *Hybrid*: the same model with layers `ode_layers` replaced by one block that
# integrates dH/dt = α·F(H + e_t(t) + e_u(u)) over t ∈ [0, 1] (torchdiffeq), F = attention(LN ·) + MLP(LN ·).
# The control u is zero during training (the language-modelling task gives it nothing to encode); the
# control-signal check below measures how strongly the block responds to a non-zero u.
#
# **Success criteria (the source's).** (1) gradients finite and non-vanishing for both models; (2) the hybrid's final
# held-out loss within 10 % of the baseline's; (3) the ODE block's gradients well behaved — finite, none vanishing
# (< 1e-6) and none exploding (> 100). The verdict at the end is computed from the runs.

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
# The source's configuration (the t4 profile). params/<profile>/01_gradient_flow.yaml overrides these.
seed = 0
n_seeds = 3
device = "auto"
output_dir = ""
corpus = "wikitext2"
tokenizer = "gpt2"
n_layer = 6
d_model = 256
n_head = 4
seq_len = 64
max_seq_len = 64
batch_size = 32
steps = 500
lr = 3e-4
weight_decay = 0.1
grad_clip = 1.0
dropout = 0.1
eval_interval = 50
eval_batches = 20
tensorboard = False
ode_layers = [2, 3]
solver = "euler"
ode_steps = 4
sensitivity = "direct"
rtol = 1e-3
atol = 1e-4
control_dim = 4
alpha_init = 0.1
control_scales = [0.0, 0.5, 1.0, 2.0, 4.0]

# %%
import numpy as np
import pandas as pd
import torch
from IPython.display import Markdown, display

from odebook import data, models, notebook, plots
from odebook.experiment import run_seeds, summarize
from odebook.params import GradientFlowParams
from odebook.stats import Verdict, decide, mean_ci
from odebook.train import TrainConfig

p, out, precision = notebook.start(GradientFlowParams, globals())

# %% [markdown]
# ## Data

# %%
tok = data.get_tokenizer(p.tokenizer)
splits = data.tokenize(data.load_corpus(p.corpus), tok)
print(splits.description)

# %% [markdown]
# ## Models

# %%
shape = dict(vocab_size=splits.vocab_size, d_model=p.d_model, n_layer=p.n_layer, n_head=p.n_head,
             max_seq_len=p.max_seq_len, dropout=p.dropout)
builders = {
    "baseline": lambda: models.gpt(**shape),
    "hybrid": lambda: models.ode_hybrid(**shape, ode_layers=p.ode_layers, solver=p.solver, steps=p.ode_steps,
                                        sensitivity=p.sensitivity, rtol=p.rtol, atol=p.atol, control_dim=p.control_dim,
                                        alpha_init=p.alpha_init),
}
print(f"hybrid: layers {p.ode_layers} → one ODE flow block, {p.solver}"
      + (f" with {p.ode_steps} steps" if p.solver != "dopri5" else f" (rtol {p.rtol}, atol {p.atol})")
      + f", gradients: {p.sensitivity}")

# %% [markdown]
# ## Runs
# Each seed trains both models on the same batch stream; held-out loss is measured every `eval_interval` steps on
# one fixed set of validation batches, and the test split is scored once at the end.

# %%
config = TrainConfig.from_params(p)
runs = run_seeds(builders, splits, config, precision, seeds=range(p.seed, p.seed + p.n_seeds),
                 batch_size=p.batch_size, seq_len=p.seq_len, eval_batches=p.eval_batches,
                 log_dir=notebook.tensorboard_dir(out, p, "runs"))

# %% [markdown]
# ## Results

# %%
VANISHING, EXPLODING = 1e-6, 100.0  # the source's thresholds for a vanishing / exploding gradient norm
table = summarize(runs)
grads = pd.DataFrame([{"model": r.model, "seed": r.seed, "group": group,
                       **r.history.grad_stats(group, VANISHING, EXPLODING)}
                      for r in runs for group in ("total", "ode") if group in r.history.grad_norm])
display(table.round(4))
display(grads)

# %% [markdown]
# Lines are means over seeds; shading spans the lowest to the highest seed. Training loss is smoothed over 10 steps.

# %%
fig, (ax_loss, ax_grad, ax_ode) = plots.figure(3)
plots.plot_over_steps(ax_loss, runs, lambda r: (r.history.step, r.history.loss), label_suffix=" train", smooth=10)
plots.plot_over_steps(ax_loss, runs, lambda r: (r.history.eval_step, r.history.eval_loss),
                      label_suffix=" held-out", linestyle="--")
ax_loss.set(title="loss", ylabel="cross-entropy (nats/token)")
plots.plot_over_steps(ax_grad, runs, lambda r: (r.history.step, r.history.grad_norm["total"]), log=True)
ax_grad.set(title="total gradient norm (before clipping)")
hybrid_runs = [r for r in runs if r.model == "hybrid"]
plots.plot_over_steps(ax_ode, hybrid_runs, lambda r: (r.history.step, r.history.grad_norm["ode"]), log=True)
ode_mean = float(np.mean([r.history.grad_norm["ode"] for r in hybrid_runs]))
ax_ode.axhline(ode_mean, color="k", linestyle=":", label=f"mean {ode_mean:.3g}")
ax_ode.legend()
ax_ode.set(title="ODE-block gradient norm")
fig.tight_layout()
notebook.save_figure(fig, out, "loss_and_gradients")

# %% [markdown]
# ## Control-signal check
# Mean absolute change of the hybrid's logits on held-out text when the control goes from none (u = 0) to a random
# u ~ N(0, I) scaled by s. A block that ignored its control would show zeros.

# %%
hybrid = hybrid_runs[0].module.eval()
x, _ = data.fixed_batches(splits.valid, 1, p.batch_size, p.seq_len)[0]
x = x.to(precision.device)
u = torch.randn(x.shape[0], p.control_dim, generator=torch.Generator().manual_seed(p.seed)).to(precision.device)
with torch.no_grad(), precision.autocast():
    base_logits = hybrid(x).float()
    control_table = pd.DataFrame([{"scale": s, "mean |Δ logits|": (hybrid(x, control=s * u).float() - base_logits)
                                   .abs().mean().item()} for s in p.control_scales]).set_index("scale")
display(control_table)

# %% [markdown]
# ## Verdict

# %%
ratio = mean_ci([h.history.final_eval_loss / b.history.final_eval_loss
                 for b, h in zip([r for r in runs if r.model == "baseline"], hybrid_runs)])
total, ode = grads[grads.group == "total"], grads[grads.group == "ode"]
finite_nonvanishing = bool(total.finite.all() and (total.vanishing == 0).all())
ode_ok = bool(ode.finite.all() and (ode.vanishing == 0).all() and (ode.exploding == 0).all())
verdicts = {
    "gradients finite and non-vanishing (both models, every step)": "held" if finite_nonvanishing else "not held",
    "hybrid final held-out loss within 10 % of baseline": decide(ratio, 1.10, claim="below"),
    "ODE-block gradients well behaved (finite, none < 1e-6 or > 100)": "held" if ode_ok else "not held",
}
lines = [f"- **{claim}**: {v}" for claim, v in verdicts.items()]
lines.insert(2, f"  (hybrid / baseline final held-out loss = {ratio})")
display(Markdown("\n".join(lines)))

# %%
headline = {
    **{f"{m} val loss": table.loc[m, "val_loss"] for m in table.index},
    **{f"{m} val ppl": table.loc[m, "val_ppl"] for m in table.index},
    "hybrid/baseline loss": ratio.mean,
    "hybrid/baseline time": table.loc["hybrid", "ms_per_step"] / table.loc["baseline", "ms_per_step"],
}
notebook.save_results(out, headline, data=splits.description, precision=str(precision), parameters=p.to_dict(),
                    summary=table.reset_index().to_dict("records"), gradients=grads.to_dict("records"),
                    control=control_table.reset_index().to_dict("records"),
                    verdicts=[Verdict(k, v) for k, v in verdicts.items()], runs=[r.record() for r in runs])
