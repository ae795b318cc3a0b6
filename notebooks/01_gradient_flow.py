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
# # 01 · Can a neural-ODE flow do the work of the layers it replaces?
#
# **Question.** Can a neural-ODE flow block replace transformer residual layers without hurting loss or gradient
# flow? The source trained a 6-layer, 256-d GPT on WikiText-2 and replaced layers 3–4 by an ODE flow integrated
# with 4 Euler steps, conditioned on time and on a control vector, with a learned output scale α initialised at 0.1.
#
# **Asked on a task that needs the replaced layer.** "As good as the baseline" says nothing where removing the
# replaced layers costs nothing, and on language-model data at this book's scales it costs nothing: after 250 steps
# on bytes the baseline without its layers 2–3 was *better* by 0.012 nats (cpu, commit e4871db), and at the source's
# own configuration by 0.010 [−0.027, +0.007] (H100 under a T4's policy, 3 seeds, commit 5b64201; docs/gpu.md). So
# the primaries are asked on **multi-query associative recall** (MQAR, odebook.data.mqar; Zoology, Arora et al.
# 2023): each query key must be answered with the value bound to it earlier in the sequence. A transformer answers by
# composing two attention layers — one writes each key into the position of its value, one finds that position from
# the query (the induction circuit; Olsson et al. 2022) — so a one-layer GPT cannot, and a two-layer GPT whose second
# layer is replaced can only if the replacement does that layer's work. WikiText stays as a descriptive section.
#
# **Models** (one configuration, `p.model_config(...)`; same batches, steps and tuning for every arm):
# - *baseline*: token + learned positional embeddings, pre-LN blocks (causal SDPA attention, 4× GELU MLP), final
#   LayerNorm, untied head;
# - *hybrid*: the baseline with layers `ode_layers` replaced by one block that integrates
#   dH/dt = α·F(H + e_t(t) + e_u(u)) over t ∈ [0, 1] (torchdiffeq), F = attention(LN ·) + MLP(LN ·);
# - *null* (control): the baseline with the replaced layers removed — what the hybrid must beat;
# - *tokenwise* (negative control): the hybrid whose vector field has no attention, F = MLP(LN ·): the same flow,
#   started and trained the same way, but it cannot move information between tokens — the mechanism the claim credits;
# - *hybrid_source* (where a profile starts α elsewhere than the source's 0.1: the t4 one): the hybrid at α 0.1,
#   described beside the claims;
# - *shared* (WikiText section only): one discrete block, weights shared, applied as often as the flow evaluates its
#   field.
#
# **Claims** (declared below, before the runs; test loss at the answers in nats, paired across seeds — the arms of a
# seed share its batch stream). **Learned gates**, seed by seed: the baseline answers above the shortcut (the
# context's most frequent value) by more than 0.5, and every arm finished learning — its best validation loss improved
# by less than `margin` over the last quarter of its steps — so that no answer is set by an arm stopped
# mid-transition. A **calibration gate**: removing the replaced layers costs more than `margin`. Resting on them, two
# primaries: the hybrid is **non-inferior** to the baseline at `margin`, and it **beats the null arm by more than
# `margin`** (any arm that adds width to the null arm beats it by a little, which says nothing about the replaced
# layer's work). Each primary's **negative control** is the same test on the trained *tokenwise* arm, which must come
# out not held. Gradient health and the flow's α through training are described, not judged.
#
# **Scale** (each profile's values are in params/<profile>/01_gradient_flow.yaml; how they were chosen is in the
# appendix). *cpu*: d 64, 2 layers with layer 1 replaced, MQAR with 8 keys and 4 pairs in 32 tokens, the flow's α
# from the source's 0.1, 3,000 steps of 32 sequences, each arm's rate chosen on two tuning seeds from {2.5e-4, 5e-4,
# 1e-3} (the middle of the rates that tie), 3 confirmatory seeds with one analysis — it decides only large effects.
# *t4* (this cell): the source's width d 256 on MQAR with 16 keys and 4 pairs in 64 tokens, α from 1.0 with the
# source's 0.1 beside it, up to 12 seeds with looks at 3, 6 and 9.
#
# **Departures from the source.** Depth: 2 layers with layer 1 replaced — half the stack, where the source replaced
# a third of 6 — because a 6-layer GPT did not learn MQAR in the steps a profile can give (appendix). The t4 profile
# starts the flow at α 1.0, not 0.1 (on its larger task the source's start stalled in the pilot; appendix); the cpu
# profile starts at the source's 0.1. The source built its blocks and its vector field with dropout 0.1; the book
# trains without dropout, because the field must be a deterministic function of (t, H) for the adjoint, adaptive and
# reversible solves of study 05. The control u is zero throughout (the task gives it nothing to carry), so the
# source's control check is not repeated. The source's gradient test (no norm below 1e-6 or above 100) could not fire
# on the high side, because it computed the norms *after* clipping them to 1.0; here norms are recorded before
# clipping, relative to the baseline's, as description. The scale is printed beside every verdict.

# %% tags=["colab"]
# Run this cell first: in a checkout it imports the checkout's own odebook; elsewhere (Colab) it installs odebook
# from ODEBOOK_SOURCE and only what this Python lacks. "%env ODEBOOK_PROFILE=cpu" (or ODEBOOK_SOURCE=<a fork>) in a
# cell above it runs a profile's values instead of the t4 ones below (docs/running.md, Colab).
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
# The t4 profile's values; params/<profile>/01_gradient_flow.yaml overrides these. The machine's settings (device,
# executor and SLURM, checkpoints) are set once for every study by the profile file or -p (docs/running.md).
seed = 0
n_seeds = 12
looks = [3, 6, 9]
tuning_seeds = 2
# the model: the source's block and flow, 2 layers with layer 1 replaced (see Departures)
architecture = {"n_head": 4, "max_seq_len": 64, "n_layer": 2, "d_model": 256, "ode_layers": [1],
                "sensitivity": "direct", "rtol": 1e-3, "atol": 1e-4, "control_dim": 4, "alpha_init": 1.0,
                "solver": "euler", "ode_steps": 4}
# the primaries' task: MQAR on seq_len tokens
recall_task = {"mqar_keys": 16, "mqar_pairs": 4, "task_steps": 2000, "task_batch_size": 32,
               "lr_grid": [5e-4, 1e-3, 2e-3], "lr_extensions": 2, "lr_tie": 1e-3}
margin = 0.05
design_sd = 0.0
alpha = 0.05
# the source's setting, descriptive: WikiText-2 (corpus "files": your own text, absolute paths; see the README)
lm_seeds = 3
text = {"corpus": "wikitext2", "tokenizer": "gpt2", "train_file": "", "valid_file": "", "test_file": "",
        "text_file": "", "split_fractions": [0.9, 0.05, 0.05]}
training = {"seq_len": 64, "batch_size": 32, "steps": 500, "lr": 3e-4, "weight_decay": 0.1, "grad_clip": 1.0,
            "eval_interval": 50, "eval_batches": 20}
dynamics_sequences = 2
dynamics_tokens = 8

# %%
import functools
from operator import attrgetter

import numpy as np
import pandas as pd
import torch
from IPython.display import Markdown, display

from odebook import studies
from odebook.book import budget, notebook
from odebook.data import mqar
from odebook.nn.ode import evaluations_per_forward
from odebook.study import dynamics, plots
from odebook.study.claims import declaration
from odebook.study.experiment import by_seed, run_seeds, summarize
from odebook.study.looks import tune_then_look
from odebook.study.stats import mean_ci

study = studies.load("01_gradient_flow")  # this study's package: its parameters, arms, analysis and figures
calibrated = study.analysis
p, out, precision = notebook.start(study.Params, globals())

# %% [markdown]
# ## The task
# Sequences of `seq_len` tokens open with `mqar_pairs` key–value pairs (keys and values from disjoint halves of a
# vocabulary of `mqar_keys` each); every key comes back later as a query, and the model must predict its value.
# Only the answers are scored. Validation and test sets are fixed batches from a generator no training seed uses.

# %%
vocab, splits = mqar.Vocab(p.mqar_keys), study.data(p)  # WikiText, where its section runs seeds
plan = study.plan(p, splits, precision.device)  # the runs below, as the study declares them (its plan module)
print(budget.line(p, precision, plan))  # what they will cost, before the first step (odebook.book.budget)
task = plan["MQAR"].task
example = mqar.make_batch(1, vocab=vocab, k=p.mqar_pairs, seq_len=p.seq_len, generator=torch.Generator().manual_seed(0))
print("a sequence:", " ".join(str(t) for t in example.x[0].tolist()))
shortcut = float(np.mean([mqar.shortcut_accuracy(x, y, p.mqar_pairs) for x, y in task.valid]))
print(f"chance {mqar.chance(vocab):.3f}; shortcut (the context's most frequent value) {shortcut:.3f} on the "
      "validation set: the baseline's learned gate asks for more than this + 0.5")

# %% [markdown]
# ## Models and claims, declared before the runs

# %%
cfg = p.model_config(vocab.size)
builders = plan["MQAR"].arms
nfe = evaluations_per_forward(cfg.solver, cfg.steps)
print(f"hybrid: layers {p.ode_layers} of {p.n_layer} → one ODE flow block, {p.solver}"
      + (f" with {p.ode_steps} steps ({nfe} field evaluations)" if nfe else f" (rtol {p.rtol}, atol {p.atol})"))
source = "hybrid_source" if "hybrid_source" in builders else ""  # the source's α_init, where the profile's differs
claims = calibrated.calibrated_claims(p.margin, control="tokenwise", source=source)
display(Markdown(declaration(claims)))

# %% [markdown]
# **The design's power.** With a seed SD `design_sd` of the paired differences (a pilot's; 0 = not shown),
# `operating` simulates the looks for each primary at its level (`alpha`/2, O'Brien–Fleming-type spending).

# %%
design = calibrated.design(claims, p.seed_plan.design, margin=p.margin, sd=p.design_sd, alpha=p.alpha / 2)
if len(design):
    display(design.round(3))

# %% [markdown]
# ## Runs: a learning rate per arm, then the seeds a look at a time
# Each arm trains on `tuning_seeds` seeds of their own (`p.seed_plan.tuning`, past the last confirmatory seed) at every
# rate of `lr_grid`; the lowest mean final validation loss chooses, or, where several rates come within `lr_tie` of it
# (they solved the task, and their differences are noise), the middle one of them: the appendix says why. The same
# grid, steps and batches for every arm; an arm whose choice lies at an edge of what it tried trains one grid step
# beyond it, up to `lr_extensions` times, so that each grid brackets its choice (a choice still at an edge is flagged
# untuned: odebook.study.lr_grid). Then every arm at its rate; after each look the primaries are examined
# (odebook.study.looks), and the study stops once both have stopped, or once a gate every primary rests on has failed.

# %%
options = notebook.run_options(p, out)
values_of = functools.partial(calibrated.seed_differences, claims, shortcut=shortcut, pairs=p.mqar_pairs)
run_only = {"groups": calibrated.gradient_groups(cfg), "log_dir": options.pop("log_dir")}
mqar = plan["MQAR"]
looked, lr_table, grid = tune_then_look(builders, task, mqar.config, precision, claims, values_of, lrs=mqar.lrs,
                                        plan=p.seed_plan, alpha=p.alpha, max_extensions=mqar.extensions, tie=p.lr_tie,
                                        run_only=run_only, **options)
chosen = lr_table["chosen lr"]
notebook.save_table(lr_table, out, "lr_selection")
display(lr_table.round(4))
runs = looked.runs
losses = {arm: by_seed(runs, arm) for arm in builders}
print(f"ran {looked.seeds} seeds of {p.n_seeds}")
if looked.decisions:
    display(Markdown(looked.markdown()))

# %% [markdown]
# ## Results
# Test loss at the answers and accuracy per arm (mean and 95 % interval over seeds), and the compute match (FLOPs of
# one forward pass, median ms per step); then each arm's test loss per seed.

# %%
table = calibrated.results_table(runs, p.mqar_pairs)
notebook.save_table(table, out, "results_table")
display(table[["params", "lr", "gflops_per_forward", "ms_per_step", "test_loss", "test_loss_lo", "test_loss_hi",
               "accuracy", "unseen pairs accuracy"]].round(4))
per_seed = pd.DataFrame(losses, index=pd.Index(sorted({r.seed for r in runs}), name="seed"))
display(per_seed.round(4))

# %%
notebook.save_figure(study.figures.loss_and_gradients(runs, list(builders)), out, "loss_and_gradients")

# %% [markdown]
# ## The flow's α and the gradients (descriptive)
# The flow's output scale α after every step, per seed (it multiplies the field, so every weight gradient of the
# field is scaled by it too: a flow whose α falls to ≈ 0 has stopped moving the state, and its field has stopped
# learning). Then, per seed, each group's mean gradient norm over training divided by the baseline's (same seed, same
# batches); geometric mean over seeds with its 95 % interval.

# %%
alphas = calibrated.learned_alphas(runs)
trajectories = {arm: calibrated.alpha_trajectories(runs, arm=arm) for arm in builders
                if arm not in ("baseline", "null")}
notebook.save_figure(study.figures.alpha_trajectories(trajectories, alpha_init=p.alpha_init), out, "alpha")
print("the hybrid's α at the end of training, per seed: " + ", ".join(f"{a:.3f}" for a in alphas)
      + f" (initialised at {p.alpha_init}); |α| median {np.median(np.abs(alphas)):.3f}")
ratio_table = calibrated.gradient_ratios(runs)
display(ratio_table.round(4))

# %% [markdown]
# ## The learned dynamics
# For the first seed's hybrid, on `dynamics_sequences` test sequences cut to `dynamics_tokens` tokens: the leading
# eigenvalue and largest singular value of the field's Jacobian J(t) = ∂f/∂H along the trajectory, and the flow's
# finite-time Lyapunov exponent log σ_max(∂H(1)/∂H(0)) (odebook.study.dynamics).

# %%
test_tokens = task.test[0][0][: p.dynamics_sequences, : p.dynamics_tokens]
first_hybrid = by_seed(runs, "hybrid", attrgetter("module"))[0]
dyn = dynamics.analyse(first_hybrid, f"blocks.{cfg.replaced_blocks('hybrid').start}", list(test_tokens), label="hybrid")
display(dyn.round(4))
notebook.save_figure(plots.spectrum(dyn), out, "dynamics")

# %% [markdown]
# ## Verdicts
# - *The learned gates*: the baseline answers above the shortcut by more than 0.5, and every arm finished learning,
#   in every seed.
# - *The calibration gate*: removing the replaced layers costs more than `margin`.
# - *Hybrid non-inferior to the baseline*: held when "worse by `margin` or more" is rejected; not held when "worse
#   by less" is.
# - *Hybrid beats the null arm by more than `margin`*: held when its test loss lies below the null arm's by more than
#   `margin`; not held when an advantage that large is ruled out.
# - *Negative controls*: each primary's test on the tokenwise arm (the flow without attention); each must come out
#   not held.

# %%
scale = (f"MQAR ({p.mqar_keys} keys, {p.mqar_pairs} pairs, {p.seq_len} tokens), d {p.d_model}, {p.n_layer} layers "
         f"with {p.ode_layers} replaced, {p.task_steps} steps × {p.task_batch_size}, lr per arm "
         f"{', '.join(f'{a} {lr:g}' for a, lr in chosen.items())}, {looked.seeds} seeds (source: WikiText-2, d 256, "
         "6 layers with [2, 3] replaced)")
verdicts = [s.verdict(scale) for s in looked.settled]
notebook.show_verdicts(verdicts)  # and names any negative control that held

# %% [markdown]
# ## The source's setting, descriptive: WikiText-2
# The same model configuration on `corpus` with `tokenizer` tokens, `lm_seeds` seeds at the one rate `lr` (not
# tuned: no claim rests on this section), and the weight-shared arm beside the others: loss curves and what removing
# the replaced layers costs on text, with its interval across seeds.

# %%
lm_runs, lm_table = [], pd.DataFrame()
if p.lm_seeds:
    print(splits.description)
    text = plan["WikiText"]
    lm_runs = run_seeds(text.arms, text.task, text.config, precision, seeds=p.seed_plan.seeds[:text.seeds], **options)
    lm_table = summarize(lm_runs)
    removal = mean_ci(np.subtract(by_seed(lm_runs, "null"), by_seed(lm_runs, "baseline")))
    print(f"null − baseline on {p.corpus}: {removal} nats of test loss, {p.lm_seeds} seeds")
    display(lm_table[["params", "gflops_per_forward", "ms_per_step", "test_loss", "test_loss_lo",
                      "test_loss_hi"]].round(4))
    fig = plots.validation_loss(lm_runs, title=f"validation loss on {p.corpus}", ylabel="nats/token")
    notebook.save_figure(fig, out, "wikitext_loss")

# %%
headline = {
    **{f"{m} test loss": table.loc[m, "test_loss"] for m in table.index},
    **{f"{m} accuracy": table.loc[m, "accuracy"] for m in table.index},
    "null − baseline test loss": float(np.mean(np.subtract(losses["null"], losses["baseline"]))),
    "hybrid − baseline test loss": float(np.mean(np.subtract(losses["hybrid"], losses["baseline"]))),
    "margin (nats)": p.margin,
    "hybrid |α| (final, median over seeds)": float(np.median(np.abs(alphas))),
    "seeds run": looked.seeds,
}
notebook.save_results(out, headline, verdicts=verdicts, precision=str(precision), parameters=p.to_dict(), summary=table,
                      per_seed=per_seed, declared=declaration(claims), design=design, lr_selection=lr_table,
                      lr_tuning={a: g.note for a, g in grid.items()},
                      looks=looked.markdown(), gradient_ratios=ratio_table, alphas=alphas,
                      alpha_trajectories=trajectories, shortcut=shortcut, dynamics=dyn,
                      wikitext=lm_table, runs=[r.record() for r in runs + lm_runs])

# %% [markdown]
# ## Appendix: how the design was chosen
#
# **The pilot that chose the cpu task** (`benchmarks/pilot_01.py`, the AMD EPYC of this profile's report, 2 cores,
# November 2026; α from the source's 0.1, seeds from 0; every row in `params/cpu/01_gradient_flow.pilot.json`). The
# earlier cpu design (16 keys, 4 pairs, 64 tokens, α from 1.0, 2,000 steps; cpu report of commit fed21e8) ran 76
# minutes and left both primaries not testable: the hybrid finished learning in 1 of 3 seeds and stalled at the
# partial solution (test loss 0.85–0.89, accuracy 0.57) in all three, while the source's α 0.1 solved it in 2 of 3.
# On a smaller MQAR every arm settles within the steps:
#
# | pairs (8 keys, 32 tokens) | steps | lr | arm | solved (accuracy > 0.99) | test loss per seed | s a run |
# |---|---|---|---|---|---|---|
# | 2 | 1,000 | 1e-3 | baseline | 4 of 4 | 0.000 0.001 0.004 0.000 | 25 |
# | 2 | 1,000 | 1e-3 | hybrid | 1 of 4 | 0.489 0.011 0.412 0.139 | 60 |
# | 2 | 1,000 | 1e-3 | null | 0 of 4 | 0.530 0.554 0.534 0.521 | 13 |
# | 2 | 1,000 | 5e-4 | baseline | 4 of 4 | 0.000 0.000 0.000 0.000 | 28 |
# | 2 | 1,000 | 5e-4 | hybrid | 3 of 4 | 0.003 0.001 0.001 0.474 | 62 |
# | 2 | 1,000 | 5e-4 | null | 0 of 4 | 0.537 0.556 0.533 0.515 | 14 |
# | 2 | 2,000 | 5e-4 | hybrid | 4 of 4 | 0.000 0.005 0.000 0.000 | 110 |
# | 2 | 2,000 | 5e-4 | tokenwise | 1 of 4 | 0.542 0.515 0.001 0.530 | 74 |
# | 4 | 2,000 | 5e-4 | baseline | 2 of 2 | 0.000 0.000 | 44 |
# | 4 | 2,000 | 5e-4 | hybrid | 2 of 2 | 0.000 0.000 | 107 |
# | 4 | 2,000 | 5e-4 | null | 0 of 2 | 1.039 1.045 | 25 |
# | 4 | 2,000 | 5e-4 | tokenwise | 0 of 2 | 1.041 1.043 | 70 |
#
# At 2 pairs the token-wise arm — whose flow's α had fallen to 0, so a one-layer GPT — solved the task in one seed,
# and the null arm's loss was still falling at step 1,000: with the pairs at fixed positions, two pairs can be told
# apart by position alone, so that task does not need the second layer and cannot calibrate. At 4 pairs the null
# and token-wise arms stayed at 1.04 nats while the baseline solved the task by step 500 and the hybrid, its α
# growing from 0.1 to 0.20–0.25, by step 1,000. So the cpu profile asks the question at 4 pairs in 32 tokens, with
# the source's α, for 2,000 steps.
#
# **The pilots that chose this task** (2-core Zen 4, November 2026). *Variable tracking* (chains of bindings
# x2 ← x1 ← value, asked at depth 1–5; its generator is in the history at commit eb00594) stayed at its shortcut for
# up to 2,000 steps at every configuration tried — widths 64 and 128, 2 to 6 layers, rates 1e-3 to 1e-2, pairs as
# one token or two — so no arm could be told from another. *MQAR* did separate them; made by
# `python benchmarks/pilot_01.py` (results in `params/cpu/01_gradient_flow.pilot.json`; this table is the first 22
# rows of `python benchmarks/pilot_01.py --table` on it: first the pilot that chose the task, last the one that chose
# α's initial value and the number of steps, below):
#
# | overrides of the cpu profile | arm | seed | test loss | accuracy | validation loss by quarter | α by quarter | s |
# |---|---|---|---|---|---|---|---|
# | lr 0.001 | baseline | 0 | 0.006 | 1.00 | — | — | 27 |
# | lr 0.001 | hybrid | 0 | 1.243 | 0.37 | — | — | 69 |
# | lr 0.001 | null | 0 | 1.246 | 0.37 | — | — | 15 |
# | lr 0.003 | baseline | 0 | 1.026 | 0.52 | — | — | 27 |
# | lr 0.003 | hybrid | 0 | 1.257 | 0.34 | — | — | 71 |
# | lr 0.01 | hybrid | 0 | 1.448 | 0.41 | — | — | 72 |
# | lr 0.01 | null | 0 | 1.413 | 0.47 | — | — | 14 |
# | lr 0.001, n_layer 6, ode_layers [2, 3], mqar_pairs 3 | baseline | 0 | 1.039 | 0.42 | — | — | 79 |
# | lr 0.001, α 1.0, steps 2000 | hybrid | 0 | 0.007 | 1.00 | 1.30 1.00 0.01 0.01 | 1.00 0.72 0.70 0.87 0.97 | 325 |
# | lr 0.001, α 1.0, steps 2000 | tokenwise | 0 | 1.230 | 0.35 | 1.29 1.24 1.22 1.22 | 1.00 0.71 0.42 0.16 -0.01 | 222 |
# | lr 0.001, α 1.0, steps 2000 | hybrid | 1 | 0.855 | 0.57 | 1.29 1.01 0.88 0.85 | 1.00 0.71 0.66 0.64 0.62 | 298 |
# | lr 0.001, α 1.0, steps 2000 | tokenwise | 1 | 1.235 | 0.34 | 1.29 1.24 1.23 1.23 | 1.00 0.72 0.40 0.09 -0.01 | 186 |
# | lr 0.001, steps 2000 | hybrid | 0 | 1.236 | 0.35 | 1.29 1.23 1.22 1.23 | 0.10 -0.00 -0.00 -0.01 -0.00 | 279 |
# | lr 0.001, steps 2000 | hybrid | 1 | 0.881 | 0.58 | 1.29 1.25 1.10 0.87 | 0.10 0.00 0.03 0.14 0.21 | 280 |
# | lr 0.001, steps 2000 | baseline | 0 | 0.003 | 1.00 | 1.29 0.00 0.03 0.01 | — | 110 |
# | lr 0.001, steps 2000 | null | 0 | 1.233 | 0.38 | 1.28 1.23 1.23 1.22 | — | 57 |
# | lr 0.001, steps 2000 | baseline | 1 | 0.882 | 0.56 | 1.19 1.00 0.90 0.88 | — | 122 |
# | lr 0.001, steps 2000 | null | 1 | 1.235 | 0.36 | 1.28 1.24 1.23 1.23 | — | 67 |
# | lr 0.001, steps 2000 | baseline | 2 | 0.001 | 0.99 | 1.30 0.01 0.00 0.05 | — | 108 |
# | lr 0.001, steps 2000 | null | 2 | 1.237 | 0.37 | 1.29 1.24 1.24 1.23 | — | 61 |
# | lr 0.001, steps 2000 | baseline | 3 | 0.001 | 1.00 | 1.29 0.01 0.01 0.01 | — | 114 |
# | lr 0.001, steps 2000 | null | 3 | 1.226 | 0.36 | 1.29 1.25 1.23 1.22 | — | 64 |
#
# The 2-layer baseline solves the task at 1e-3 and not at 3e-3; the 1-layer null arm and the hybrid solve it at no rate
# tried (up to 1e-2); a 6-layer GPT does not learn it in the same steps even at 3 pairs: deeper GPTs learn recall
# later, which is why the book tests the source's question on 2 layers, not 6. A first run of the earlier design (α 0.1,
# 1,000 steps; seeds 0–4, cap 5) was its pilot for the seeds: the gate held (null − baseline +1.02 [0.48, 1.56] nats),
# "hybrid non-inferior" came out not held, and "hybrid beats null" needed ≈ 11 seeds (hybrid − null −0.025 [−0.090,
# 0.039], seed SD 0.05); the t4 design runs looks at 3, 6 and 9 seeds up to 12, on seeds from 100, apart from the
# pilots'; the cpu profile runs 3 seeds, one analysis (below).
#
# **The pilot that chose α's initial value and the steps** (this table's last rows; an Intel Xeon @ 2.50 GHz, 2 cores,
# November 2026; seeds 0–3, lr 1e-3, 2,000 steps). That design's cpu report (commit da19829) ended with the flow's α
# at ≈ 0 in every seed (|α| median 0.0066, mixed signs) and 4 of its 9 baselines still at 0.98–1.19 nats at step
# 1,000.
# At the source's α 0.1 the flow's gain falls to ≈ 0 within the first 250 steps (seed 0: 0.00 from there on, test loss
# 1.236, the null arm's; seed 1: back to 0.21 by the end, accuracy 0.58): a flow whose α is 0 passes no gradient to
# its field, a saddle it leaves late or never. Started at α 1.0 the gain stays away from 0 (0.6–0.97) and the hybrid
# solves the task in seed 0 (accuracy 1.00, test loss 0.007, the drop between steps 1,000 and 1,500) and reaches 0.57
# in seed 1; the token-wise control, started the same way, stays at the null arm's loss (1.23) with its α falling to
# 0 — the flow without attention has nothing to add. The baseline solves the task by step 1,000 in 3 of 4 seeds and
# sits at 0.56 in seed 1 up to step 2,000 (1.00 → 0.88 over the last 1,000 steps), where the hybrids also stall at
# 0.57–0.58: a partial solution that seed's batches lead every two-layer arm to. So the book's design (this cell, the
# t4 values) starts the flow at α 1.0 (the source's 0.1 stays as an arm, `hybrid_source`, described beside the
# claims) and trains 2,000 steps; the learned gates say, seed by seed, which arms finished and whether the baseline
# solved the task.
#
# **The pilot that chose the learning-rate grid** (`benchmarks/pilot_01.py`, the same Xeon; the baseline alone, seeds
# 0–7, 2,000 steps; its rows are in the pilot file, not this table). At 5e-4 the baseline solves the task in 8 of 8
# seeds (test loss ≤ 0.007, the drop between steps 750 and 1,250), at 1e-3 in 6 of 8 (seeds 1 and 6 stall at accuracy
# 0.56–0.57), at 2e-3 in 3 of 8. The earlier design (1,000 steps, one tuning seed, the grid {5e-4, 1e-3, 2e-3}) chose
# 1e-3 for the baseline — at 5e-4 it had not dropped by step 1,000 — a rate at which a quarter of the pilot's seeds
# stall, and 4 of the 9 baselines of the da19829 report had not learned by step 1,000. So the grid is {2.5e-4, 5e-4,
# 1e-3} at cpu and {5e-4, 1e-3, 2e-3} at t4 (its width 256), each arm choosing on two tuning seeds (one seed made each
# arm's rate a lottery between solved and stalled) and the bracketing rule extending an edge choice. That design's
# cpu profile (16 keys, 4 pairs, 64 tokens, α from 1.0) took 76 minutes of both cores on the EPYC; the smaller task
# above replaced it.
#
# **The tie.** Until December 2026 the lowest mean final validation loss alone chose each rate. In the c4ec9f5 report
# every rate of {2.5e-4, 5e-4, 1e-3} solved the task for the baseline and the hybrid on both tuning seeds (final losses
# 1e-8 to 3e-4 nats), so the choice fell on differences of ten-thousandths of a nat: the hybrid took 2.5e-4, the
# slowest, and had not finished learning in 2 of its 3 seeds (its best validation loss still fell 0.14 and 0.10 nats
# over the last quarter), which left both primaries untestable. Two runs then chose the *largest* rate within a tie
# (on the EPYC, 2,000 steps, each on confirmatory seeds no earlier run had used). At a tie of 0.01 nats (f68b17f, seeds
# 100-104, 888 s) the hybrid finished in 3 of 3 seeds at 1e-3, but the baseline took 2e-3 and stalled in seed 101
# (0.23 above the shortcut against 0.59 in the others); at 1e-3 nats (d789ae9, seeds 200-204, 802 s) the same: the
# hybrid at 1e-3 finished in 3 of 3, the baseline at 2e-3 (its tuning seeds at 8e-5 nats) stalled in seed 200 (0.22).
# The pilot's baseline stalled in 5 of 8 seeds at 2e-3 and 2 of 8 at 1e-3, none at 5e-4; the hybrid had not finished
# in 2 of 3 seeds at 2.5e-4 and finished in 6 of 6 at 1e-3. So the rule takes the middle of the rates that tie, away
# from both ends, the task trains 3,000 steps (time for a slower rate to finish), and the confirmatory seeds start at
# 300. In the d789ae9 run the null arm learned most at 2.5e-4 (0.96 nats against 1.01) and in f68b17f's at 4e-3 (0.90):
# its rate is a lottery between partial solutions; the cpu grid extends each edge choice up to three times.
