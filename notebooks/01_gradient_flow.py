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
# **Question.** Can a neural-ODE flow block replace transformer residual layers without hurting loss or gradient
# flow? The source trained a 6-layer, 256-d GPT on WikiText-2 and replaced layers 3–4 by an ODE flow integrated
# with 4 Euler steps, conditioned on time and on a control vector, with a learned output scale α initialised at 0.1.
#
# **Models** (one configuration, `p.model_config(...)`, builds all four; same data, batches, steps and lr):
# - *baseline*: token + learned positional embeddings, pre-LN blocks (causal SDPA attention, 4× GELU MLP), final
#   LayerNorm, untied head;
# - *hybrid*: the baseline with layers `ode_layers` replaced by one block that integrates
#   dH/dt = α·F(H + e_t(t) + e_u(u)) over t ∈ [0, 1] (torchdiffeq), F = attention(LN ·) + MLP(LN ·);
# - *null* (control): the baseline with the replaced layers simply removed — what the hybrid must beat;
# - *shared* (control): one discrete transformer block, weights shared, applied as many times as the ODE evaluates
#   its field (4 for 4 Euler steps) — the same compute and about the same parameters without the ODE formulation.
#
# **Claims** (declared below, before the runs; test loss in nats, paired across seeds — the models of a seed share
# its batch stream). A *gate* first: removing the replaced layers must cost more than the margin `margin` (the null
# arm worse than the baseline by more than `margin`, one-sided t-test at `alpha`). Resting on it, two primary claims:
# the hybrid is **non-inferior** to the baseline at `margin`, and the hybrid **beats the null arm**. Where the gate
# fails, both read "not testable at this scale" — "as good as the baseline" says nothing when removing the layers
# costs nothing, which is what the previous cpu configuration showed (null 2.181 against baseline 2.193 nats). The
# weight-shared arm at equal evaluations is a secondary claim. Gradient health is described, not judged.
#
# **The pilot: is there a cpu configuration where the gate can hold?** The old cpu configuration (d 128, 6 layers,
# layers 2–3 replaced, byte tokens, 250 steps × 32 × 64, lr 1e-3; reports/cpu at commit e4871db, 3 seeds) trained
# too briefly for depth to matter: the null arm was *better* than the baseline by 0.012 nats, seed SD 0.036. A pilot
# of the baseline and null arms alone looked for a configuration within the cpu budget where the gap exceeds three
# seed SDs — more layers replaced, a faster learning rate (more steps at fewer tokens per step was started but not
# finished in the time the pilot had). Made by `python benchmarks/pilot_01.py --seeds 4 …` (the overrides are the
# table's first column), on a loaded machine (load average 7–11, so its seconds are not the quiet machine's);
# results in `params/cpu/01_gradient_flow.pilot.json`, this table by `python benchmarks/pilot_01.py --table` on it:
#
# | overrides of the cpu profile | seeds | null − baseline (nats) | seed SD | gap / SD | s per seed: baseline, null |
# |---|---|---|---|---|---|
# | lr 0.003 | 4 | -0.072 | 0.079 | -0.9 | 304, 223 |
# | lr 0.003, ode_layers [1, 2, 3, 4] | 4 | -0.171 | 0.033 | -5.1 | 313, 112 |
#
# Removing layers *helps* at this training length: a shallower model learns faster in its first 250 steps, and with
# four of six layers removed the gap is five seed SDs the wrong way. No configuration within the budget calibrates a
# margin, so the cpu profile keeps the old configuration, and its gate is expected to fail: the primaries then read
# "not testable at this scale" — the honest answer at this scale, where "within 10 %" was held but empty. The t4
# profile (the source's 500 steps on GPT-2 tokens) runs the same gate. The margin, 0.05 nats (about 2 % of the
# loss), is the design's smallest effect of interest: about 1.5 seed SDs of the old configuration (0.036 nats) and of
# the pilot's four-layer run (0.033), the least that a handful of seeds can resolve; `design_sd` carries that SD into
# the power of the looks shown below.
#
# **Departures from the source.** The source built its discrete blocks *and* its vector field (`ODEFunc`: attention
# and MLP) with dropout 0.1; the book trains every arm without dropout, because the field must be a deterministic
# function of (t, H) for the adjoint, adaptive and reversible solves of study 05, and parity then means none in the
# discrete layers either. The control u is zero during training — language modelling gives it nothing to carry — so
# the control check below is *untrained, not a finding*. The source's gradient test (no norm < 1e-6 or > 100) could
# not fire on the high side because it computed the norms *after* clipping them to 1.0; here norms are recorded
# before clipping, from the steps the optimiser took (steps skipped for non-finite fp16 gradients are counted and
# left out), and reported relative to the baseline's, group by group — as description: the ODE block's weight
# gradients are multiplied by its learned α (initialised at 0.1), so a ratio near α is what the parameterisation
# predicts, not a sign of vanishing gradients. The cpu profile uses byte tokens and a smaller model (the scale is
# printed beside every verdict).

# %% tags=["colab"]
# Run this cell first. In a checkout it imports the checkout's own odebook (../odebook), whatever is installed;
# elsewhere (Colab) it installs odebook from ODEBOOK_SOURCE, the repository and branch this notebook comes from
# (set the environment variable ODEBOOK_SOURCE, e.g. with %env, to install a fork or a local copy instead), then
# only the dependencies this Python lacks: Colab's own packages stay as Colab pinned them. To run a profile's
# parameters (smoke, cpu) instead of the t4 values below, set ODEBOOK_PROFILE in a cell above this one, e.g. by
# the magic "%env ODEBOOK_PROFILE=cpu" (the README says how profiles work).
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

ODEBOOK_SOURCE = os.environ.get("ODEBOOK_SOURCE", "git+https://github.com/odebook/odebook@main")
if (Path.cwd().parent / "odebook" / "__init__.py").is_file():
    sys.path.insert(0, str(Path.cwd().parent))
elif importlib.util.find_spec("odebook") is None:
    print(f"odebook is not installed: pip install --no-deps {ODEBOOK_SOURCE}", flush=True)
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", ODEBOOK_SOURCE], capture_output=True,
                         text=True)
    if pip.returncode != 0:
        raise RuntimeError(f"pip could not install odebook from {ODEBOOK_SOURCE}:\n{pip.stdout[-2000:]}"
                           f"{pip.stderr[-4000:]}\nUpload the repository (this notebook in its notebooks/ folder) or "
                           "set ODEBOOK_SOURCE to an address pip can install, then run this cell again.")
    importlib.invalidate_caches()
    from odebook.book.colab import install_missing

    install_missing()

# %% tags=["parameters"]
# The source's configuration (the t4 profile). params/<profile>/01_gradient_flow.yaml overrides these.
seed = 0
n_seeds = 3
device = "auto"
output_dir = ""
executor = "auto"  # one-thread workers side by side on a CPU; "local"; "submitit": job arrays (docs/running.md)
executor_folder = ""
slurm_partition = ""
slurm_time_min = 120
slurm_gpus_per_job = 0  # 1 on a GPU partition (the README's cluster recipe)
slurm_array_parallelism = 16
corpus = "wikitext2"
train_file = ""  # your own text, with corpus "files" (absolute paths; see the README)
valid_file = ""
test_file = ""
text_file = ""  # ... or one file, cut by split_fractions
split_fractions = [0.9, 0.05, 0.05]
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
eval_interval = 50
eval_batches = 20
tensorboard = False
checkpoint_interval = 100
checkpoint_dir = ""
fresh = False
ode_layers = [2, 3]
solver = "euler"
ode_steps = 4
sensitivity = "direct"
rtol = 1e-3
atol = 1e-4
control_dim = 4
alpha_init = 0.1
control_scales = [0.0, 0.5, 1.0, 2.0, 4.0]
margin = 0.05
design_sd = 0.0
dynamics_sequences = 2
dynamics_tokens = 8
alpha = 0.05
looks = []

# %%
import math

import numpy as np
import pandas as pd
import torch
from IPython.display import Markdown, display

from odebook.data import corpus as data
from odebook.study import dynamics
from odebook.book import notebook
from odebook.book import plots
from odebook.models.arms import gradient_flow_arms, layer_groups
from odebook.study.calibrated import alpha_normalised, calibrated_claims, gap_closed, paired_losses
from odebook.study.claims import declaration
from odebook.study.experiment import grad_ratios, run_seeds, summarize
from odebook.study.looks import run_in_looks
from odebook.study.sequential import operating
from odebook.study.task import lm_task
from odebook.nn.ode import evaluations_per_forward
from odebook.params import GradientFlowParams
from odebook.study.stats import mean_ci
from odebook.training.train import TrainConfig

p, out, precision = notebook.start(GradientFlowParams, globals())

# %%
# What this profile will cost, before the first step: time here, peak memory, a T4's time (odebook.book.budget)
from odebook.book import budget

print(budget.line(p, precision))  # the runner's estimate where it made one

# %% [markdown]
# ## Data

# %%
tok = data.get_tokenizer(p.tokenizer)
splits = data.tokenize(data.load_corpus(p.corpus, **p.corpus_files()), tok)
print(splits.description)

# %% [markdown]
# ## Models

# %%
cfg = p.model_config(splits.vocab_size)
builders = gradient_flow_arms(cfg)
nfe = evaluations_per_forward(cfg.solver, cfg.steps)
print(f"hybrid: layers {p.ode_layers} → one ODE flow block, {p.solver}"
      + (f" with {p.ode_steps} steps ({nfe} field evaluations)" if nfe else f" (rtol {p.rtol}, atol {p.atol})")
      + f", gradients: {p.sensitivity}; shared: one block applied {nfe} times")

# %% [markdown]
# ## Claims, declared before the runs
# Each claim compares per-seed test losses a − b (nats). The margin `margin` is the largest loss the hybrid may give
# up against the baseline and still count as "as good"; the gate asks that removing the layers costs more than
# that, so that an arm that did nothing would fail non-inferiority. Holm's correction runs over the two primaries
# (with looks: each primary at `alpha`/2 under O'Brien–Fleming-type alpha spending, odebook.study.sequential); the
# gate stands outside every family.

# %%
claims = calibrated_claims(p.margin, others={"shared": f"one weight-shared block applied {nfe} times (equal "
                                                       "evaluations)"})
display(Markdown(declaration(claims)))
seeds = list(range(p.seed, p.seed + p.n_seeds))
plan = [*p.looks, p.n_seeds]
print(f"seeds: looks at {plan} seeds" if p.looks else f"seeds: {p.n_seeds} at once")

# %% [markdown]
# **The design's power.** With the seed SD `design_sd` of the pilot's paired differences, `operating` simulates the
# looks for each primary at its level (`alpha`/2): the chance to declare non-inferiority when the hybrid is exactly
# as good as the baseline, the false "non-inferior" rate when it is worse by exactly the margin, and the chance to
# find that the hybrid beats the null arm when it is better by the margin. (For the cpu profile — looks at 3 and 5
# seeds, SD 0.035, margin 0.05 — about two chances in three at the margin: the cap of 5 seeds is what the budget
# allows; 8 seeds with a look at 5 would give about 0.93.) Both primaries rest on the gate: when it has come out
# not held at a look, the study stops there (odebook.study.looks) and they read "not testable at this scale" with
# the gate's estimate and p. The gate is itself a test with error at these few seeds: more seeds could move it.

# %%
if p.design_sd > 0:
    level = p.alpha / 2
    ni, beats = claims[1], claims[2]
    rows = [("non-inferior, hybrid = baseline", operating(ni, plan, mean=0.0, sd=p.design_sd, alpha=level)),
            ("non-inferior, hybrid worse by the margin", operating(ni, plan, mean=p.margin, sd=p.design_sd,
                                                                   alpha=level)),
            ("beats null, by the margin", operating(beats, plan, mean=-p.margin, sd=p.design_sd, alpha=level))]
    design = pd.DataFrame([{"case": case, "P(held)": o.efficacy, "P(not held)": o.futility,
                            "P(inconclusive at the cap)": o.cap, "mean seeds": o.seeds} for case, o in rows])
    display(design.set_index("case").round(3))
else:
    design = pd.DataFrame()
    print("design_sd = 0: the design's power is not shown")

# %% [markdown]
# ## Runs
# Each seed trains every model on the same batch stream; held-out loss is measured every `eval_interval` steps on
# one fixed set of validation batches, and the test split is scored once at the end. Seeds run a look at a time
# (odebook.study.looks): after each look the primaries are examined and the study stops once both have stopped.
# Gradient norms are recorded per position group: embedding, the blocks before the replaced span, the span itself
# (the ODE block, the baseline's replaced layers, the shared block), the blocks after it, and the head.

# %%
config = TrainConfig.from_params(p)
task = lm_task(splits, **notebook.batch_shape(p))
groups = lambda name, model: layer_groups(model, cfg.replaced_blocks(name))  # noqa: E731


def test_losses(runs, arm):
    return [r.test_loss for r in sorted((r for r in runs if r.model == arm), key=lambda r: r.seed)]


looked = run_in_looks(
    lambda seeds, done: run_seeds(builders, task, config, precision, groups=groups,
                                  **{**notebook.run_options(p, out), "seeds": seeds, "done": done}),
    claims, lambda runs: paired_losses({a: test_losses(runs, a) for a in builders}, claims),
    seeds=seeds, looks=p.looks, alpha=p.alpha)
runs = looked.runs
print(f"ran {looked.seeds} seeds of {p.n_seeds}")
if looked.decisions:
    display(Markdown(looked.markdown()))

# %% [markdown]
# ## Results
# Loss, parameters and the compute match: FLOPs of one forward pass (torch's counter: matmuls and attention) and the
# median ms per training step (device synchronised, after warm-up) per model. Steps skipped for non-finite
# gradients are counted (fp16 only; fp32 runs skip none unless a gradient overflows).

# %%
table = summarize(runs)
notebook.save_table(table, out, "results_table")
display(table[["params", "gflops_per_forward", "ms_per_step", "val_loss", "test_loss", "test_loss_lo",
               "test_loss_hi", "skipped_steps"]].round(4))
losses = {a: test_losses(runs, a) for a in builders}
per_seed = pd.DataFrame(losses, index=pd.Index(sorted({r.seed for r in runs}), name="seed"))
per_seed["null − baseline"] = per_seed["null"] - per_seed["baseline"]
display(per_seed.round(4))

# %%
fig, (ax_loss, ax_grad, ax_ode) = plots.figure(3)
plots.plot_over_steps(ax_loss, runs, lambda r: (r.history.eval_step, r.history.eval_loss), label_suffix=" held-out")
ax_loss.set(title="validation loss", ylabel="cross-entropy (nats/token)")
plots.plot_over_steps(ax_grad, runs, lambda r: (r.history.grad_step, r.history.grad_norm["before"]), log=True)
ax_grad.set(title="gradient norm, blocks before the span")
with_span = [r for r in runs if "replaced" in r.history.grad_norm]
plots.plot_over_steps(ax_ode, with_span, lambda r: (r.history.grad_step, r.history.grad_norm["replaced"]), log=True,
                      models=list(builders))
ax_ode.set(title="gradient norm of the replaced span")
fig.tight_layout()
notebook.save_figure(fig, out, "loss_and_gradients")

# %% [markdown]
# ## Gradients relative to the baseline (descriptive)
# Per seed, the mean gradient norm of each group over training divided by the baseline's (same seed, same batches);
# geometric mean over seeds with its 95 % interval. For the groups outside the span (embedding, blocks before and
# after it, head) 1 means they receive the gradient the baseline's do. For the span itself the hybrid's ratio is
# dominated by its parameterisation: every weight gradient of the vector field is multiplied by α, so the row
# "replaced ÷ α" divides each seed's ratio by the α its hybrid ended with (α's mean over training is not recorded;
# its final value is shown beside it). No verdict is drawn from these numbers: the source's thresholds could not fail
# (its norms were taken after clipping), and a band around a ratio that α sets would test the initialisation.

# %%
group_names = [g for g in ("embedding", "before", "replaced", "after", "head") if g in runs[0].history.grad_norm]
hybrid_runs = sorted((r for r in runs if r.model == "hybrid"), key=lambda r: r.seed)
span = f"blocks.{cfg.replaced_blocks('hybrid').start}"
alphas = [r.module.get_submodule(span).field.alpha.item() for r in hybrid_runs]


def geometric(xs):
    ci = mean_ci(np.log(xs))
    return {"ratio": math.exp(ci.mean), "low": math.exp(ci.low), "high": math.exp(ci.high), "seeds": len(xs)}


ratio_rows = []
for arm in ("hybrid", "shared"):
    for g in group_names:
        if all(g in r.history.grad_norm for r in runs if r.model == arm):
            xs = grad_ratios(runs, arm, "baseline", g)
            ratio_rows.append({"arm": arm, "group": g, **geometric(xs)})
            if arm == "hybrid" and g == "replaced":
                ratio_rows.append({"arm": arm, "group": "replaced ÷ α", **geometric(alpha_normalised(xs, alphas))})
ratio_table = pd.DataFrame(ratio_rows)
display(ratio_table.round(4))
print("the hybrid's learned α at the end of training, per seed: " + ", ".join(f"{a:.3f}" for a in alphas)
      + f" (initialised at {p.alpha_init})")

# %% [markdown]
# ## Control signal (untrained, not a finding)
# Mean absolute change of the hybrid's logits on held-out text when the control goes from none (u = 0) to a random
# u ~ N(0, I) scaled by s. u was zero throughout training, so its embedding never received a gradient: these numbers
# describe an untrained input layer, not something the model learned, and they enter no verdict.

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
# ## The learned dynamics
# For the first seed's hybrid, on `dynamics_sequences` held-out sequences of `dynamics_tokens` tokens: the Jacobian
# J(t) = ∂f/∂H of the vector field at the states the trajectory reaches, its leading eigenvalue (largest real part)
# and largest singular value across t, and the finite-time Lyapunov exponent of the whole block,
# log σ_max(∂H(1)/∂H(0)) (odebook.study.dynamics; Tong et al. analyse the same quantities). A negative leading real part
# means the field contracts along every direction of the token's own state; σ_max bounds the local stretching.

# %%
test_tokens = splits.test[: p.dynamics_sequences * p.dynamics_tokens].view(p.dynamics_sequences, p.dynamics_tokens)
dyn = dynamics.analyse(hybrid_runs[0].module, span, list(test_tokens), label="hybrid")
display(dyn.round(4))
fig, axes = plots.figure(3)
dynamics.plot_spectrum(axes, dyn)
fig.tight_layout()
notebook.save_figure(fig, out, "dynamics")

# %% [markdown]
# ## Verdicts
# - *The gate* (removing the replaced layers costs more than `margin`): if it is not held, the configuration cannot
#   tell a working hybrid from an arm that does nothing, and the claims resting on it read "not testable at this
#   scale".
# - *Hybrid non-inferior to the baseline*: held when "the hybrid is worse by `margin` or more" is rejected; not held
#   when "it is worse by less" is — an arm that does no work (the null arm, by the gate) would be not held.
# - *Hybrid beats the null arm*: held when the hybrid's test loss is below the null arm's; not held when an advantage
#   as large as `margin` is ruled out.
# - *Hybrid beats the weight-shared block* (secondary, its own Holm family): the same rule against the shared arm.
# - The share of the null → baseline gap the hybrid closes is descriptive (meaningful only where the gate holds).

# %%
closed = mean_ci(gap_closed(losses, "hybrid"))
closed_shared = mean_ci(gap_closed(losses, "shared"))
scale = (f"d {p.d_model}, {p.n_layer} layers with {p.ode_layers} replaced, {p.tokenizer} tokens, {p.steps} steps × "
         f"{p.batch_size} × {p.seq_len} tokens, lr {p.lr:g}, {looked.seeds} seeds (source: d 256, 6 layers with "
         "[2, 3] replaced, GPT-2 tokens, 500 steps × 32 × 64, lr 3e-4)")
skipped = int(table.skipped_steps.sum())
verdicts = [s.verdict(scale) for s in looked.settled]
notebook.show_verdicts(verdicts)
gate_held = any(v.claim == claims[0].name and v.outcome == "held" for v in verdicts)
print(f"the hybrid closes {closed} of the null → baseline gap, the shared block {closed_shared} (1 = as good as "
      "the baseline, 0 = as bad as removing the layers)" if gate_held else
      "the share of the null → baseline gap the hybrid closes is not shown: the gate did not hold, so the gap "
      f"({per_seed['null − baseline'].mean():+.3g} nats) is not known to exceed the noise and a ratio over it means "
      "nothing")
print(f"{skipped} skipped steps")

# %%
headline = {
    **{f"{m} test loss": table.loc[m, "test_loss"] for m in table.index},
    "null − baseline test loss": float(np.mean(per_seed["null − baseline"])),
    "margin (nats)": p.margin,
    "hybrid − baseline test loss": float(np.mean(np.subtract(losses["hybrid"], losses["baseline"]))),
    **{f"{m}/baseline ms per step": table.loc[m, "ms_per_step"] / table.loc["baseline", "ms_per_step"]
       for m in table.index if m != "baseline"},
    **({"gap closed by the hybrid": closed.mean} if gate_held else {}),
    "hybrid α (final, mean over seeds)": float(np.mean(alphas)),
    "seeds run": looked.seeds,
}
notebook.save_results(out, headline, verdicts=verdicts, data=splits.description, precision=str(precision),
                      parameters=p.to_dict(), summary=table.reset_index().to_dict("records"),
                      declared=declaration(claims), design=design.to_dict("records"),
                      looks=looked.markdown(), gradient_ratios=ratio_table.to_dict("records"), alphas=alphas,
                      dynamics=dyn.to_dict("records"), control_untrained=control_table.reset_index().to_dict("records"),
                      runs=[r.record() for r in runs])
