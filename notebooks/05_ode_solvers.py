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
# # 05 · ODE solvers: adjoints, integrators, reversibility and KV-cached generation
#
# **Question.** A neural-ODE language model written in Julia listed the upgrades a serious ODE-LM needs, with a
# claim for each: *the adjoint reduces memory*, *RK4 can be faster than adaptive solvers*, *a reversible mode is O(1)
# memory*, and *KV caching makes generation 10–100× faster*. What does each buy for study 01's hybrid — a GPT with
# layers `ode_layers` replaced by one flow dH/dt = α·F(H + e_t(t) + e_u(u)) integrated with torchdiffeq?
#
# **Sensitivity methods** (how the gradient is computed; the forward pass is the same). *direct*: backpropagation
# through the solver's operations, storing every stage of every step. *adjoint*: torchdiffeq's `odeint_adjoint`
# (with `adjoint_params`) integrates the adjoint ODE backwards with the state, storing nothing per step.
# *reversible*: the forward keeps only H(1); the backward steps the state back with the same integrator, re-runs
# each step from the recovered state and backpropagates through that step alone — exact only as far as the states
# are recovered, so its gradient error is measured.
#
# **Integrators.** euler, midpoint and rk4 on a fixed grid with the same number of function evaluations (NFE) per
# forward pass (`nfe_budget`), and the adaptive dopri5 at tolerances `rtol`, `atol` (its NFE is measured).
#
# **KV cache.** On a fixed grid every evaluation of the vector field happens at a known time, so the keys and values
# of each stage of each step are cached per token, like those of a transformer layer; the adaptive dopri5 picks its
# steps from the whole sequence and cannot be cached exactly (it recomputes).
#
# **Measurements.** Held-out loss and time per training step of each integrator over seeds; peak memory, time and
# gradient error of each sensitivity method against the number of steps (on the trained weights); generation time
# with and without the cache. Each claim gets a verdict computed from these numbers at the end.

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
# The t4 profile. params/<profile>/05_ode_solvers.yaml overrides these.
seed = 0
n_seeds = 3
device = "auto"
output_dir = ""
corpus = "wikitext2"
train_file = ""  # your own text, with corpus "files" (absolute paths; see the README)
valid_file = ""
test_file = ""
text_file = ""  # ... or one file, cut by split_fractions
split_fractions = [0.9, 0.05, 0.05]
tokenizer = "gpt2"
n_head = 4
seq_len = 128
max_seq_len = 1088
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
n_layer = 6
d_model = 256
ode_layers = [2, 3]
control_dim = 4
alpha_init = 0.1
integrators = ["euler", "midpoint", "rk4", "dopri5"]
nfe_budget = 8
rtol = 1e-3
atol = 1e-4
sensitivity = "direct"
sweep_solver = "rk4"
sweep_steps = [4, 8, 16, 32]
sensitivities = ["direct", "adjoint", "reversible"]
timing_repeats = 3
memory_growth_limit = 1.2
generation_solver = "rk4"
generation_lengths = [256, 1024]
prompt_tokens = 32
speedup_target = 10.0
n_samples = 2
sample_tokens = 100
temperature = 0.8
top_k = 40
alpha = 0.05

# %%
import matplotlib.pyplot as plt
import pandas as pd
import torch
from IPython.display import Markdown, display

from odebook.data import corpus as data
from odebook.models import lm as models
from odebook.book import notebook
from odebook.book import plots
from odebook.study.experiment import loss_with_solver, run_seeds, summarize
from odebook.study.task import lm_task
from odebook.study.measure import generation_speed, nfe_per_forward, sensitivity_sweep
from odebook.nn.ode import STAGES
from odebook.params import ODESolverParams
from odebook.study.stats import Verdict, claim_lower
from odebook.training.train import TrainConfig

p, out, precision = notebook.start(ODESolverParams, globals())

# %%
# What this profile will cost, before the first step: time here, peak memory, a T4's time (odebook.study.budget)
from odebook.study import budget

print(budget.line(p, precision))  # the runner's estimate where it made one

# %% [markdown]
# ## Data

# %%
tok = data.get_tokenizer(p.tokenizer)
splits = data.tokenize(data.load_corpus(p.corpus, **p.corpus_files()), tok)
print(splits.description)

# %% [markdown]
# ## Integrators at equal function evaluations
# Each fixed-grid integrator takes `nfe_budget / stages` steps, so all of them evaluate the vector field
# `nfe_budget` times per forward pass; dopri5 chooses its own steps. The baseline GPT is trained beside them on the
# same batches.

# %%
cfg = p.model_config(splits.vocab_size)
steps_of = {s: p.nfe_budget // STAGES[s] if s in STAGES else None for s in p.integrators}
builders = {"baseline": cfg.baseline, **{s: cfg.replace(solver=s, steps=steps_of[s] or 1).hybrid for s in p.integrators}}
config = TrainConfig.from_params(p)
runs = run_seeds(builders, lm_task(splits, **notebook.batch_shape(p)), config, precision,
                 **notebook.run_options(p, out))

# %%
x_valid = data.fixed_batches(splits.valid, 1, p.batch_size, p.seq_len)[0][0].to(precision.device)
table = summarize(runs)
table.insert(1, "steps", [steps_of.get(m) for m in table.index])
table.insert(2, "nfe_per_forward", [None if m == "baseline" else
                                    sum(nfe_per_forward(r.module, x_valid, precision) for r in runs if r.model == m)
                                    / p.n_seeds for m in table.index])
display(table[["steps", "nfe_per_forward", "params", "val_loss", "val_loss_lo", "val_loss_hi", "test_loss",
               "ms_per_step"]].round(4))
notebook.save_table(table, out, "integrators")

fig, (ax_loss,) = plots.figure(1, width=7)
plots.plot_over_steps(ax_loss, runs, lambda r: (r.history.eval_step, r.history.eval_loss))
ax_loss.set(title="held-out loss", ylabel="cross-entropy (nats/token)")
notebook.save_figure(fig, out, "integrators_validation")

# %% [markdown]
# How far apart are the integrators on the same weights? The trained `generation_solver` hybrid (seed `seed`) with its
# flow re-solved by each integrator at the same budget, and by rk4 with 16× the budget as a reference.

# %%
trained = {r.model: r.module for r in runs if r.seed == p.seed}
valid = data.fixed_batches(splits.valid, p.eval_batches, p.batch_size, p.seq_len)
reference_steps = 4 * p.nfe_budget
resolved = pd.DataFrame([{"integrator": s, "steps": n, "val_loss": loss_with_solver(trained[p.generation_solver], s,
                                                                                    n or 1, valid, precision)}
                         for s, n in [*steps_of.items(), ("rk4", reference_steps)]])
resolved["vs reference"] = resolved.val_loss - resolved.val_loss.iloc[-1]
with pd.option_context("display.float_format", "{:.3g}".format):
    display(resolved)

# %% [markdown]
# ## Sensitivities against the number of steps
# One training step (forward + backward) of the hybrid with `sweep_solver` at each number of steps and each sensitivity,
# all with the trained weights of the `generation_solver` hybrid (seed `seed`), on one training batch. Peak memory
# is what the step allocates beyond the weights (CUDA: the allocator's peak; CPU: the running total of every
# allocation and free the profiler records, in time order, also inside the adjoint's and the reversible backward's
# own operations). The gradient error is relative to direct backpropagation at the same number of steps; in float32,
# round-off alone puts it near 1e-7.

# %%
sweep = sensitivity_sweep(cfg.replace(solver=p.sweep_solver), trained[p.generation_solver].state_dict(),
                          data.fixed_batches(splits.train, 1, p.batch_size, p.seq_len)[0], precision,
                          sensitivities=p.sensitivities, steps=p.sweep_steps, repeats=p.timing_repeats)
with pd.option_context("display.float_format", "{:.4g}".format):
    display(sweep)
notebook.save_table(sweep.set_index(["steps", "sensitivity"]), out, "sensitivity_sweep")

fig, axes = plots.figure(3)
for ax, column, title in zip(axes, ["peak_memory_mb", "ms_per_step", "grad_rel_error"],
                             ["peak memory of a training step (MiB)", "time of a training step (ms)",
                              "gradient error vs direct (relative)"]):
    for i, (sensitivity, rows) in enumerate(sweep.groupby("sensitivity", sort=False)):
        if column != "grad_rel_error" or sensitivity != "direct":
            ax.plot(rows.steps, rows[column], "o-", color=f"C{i}", label=sensitivity)
    ax.set(title=title, xlabel=f"{p.sweep_solver} steps", xscale="log", yscale="log")
    ax.set_xticks(p.sweep_steps, [str(n) for n in p.sweep_steps], minor=False)
    ax.xaxis.set_minor_locator(plt.NullLocator())
    ax.grid(alpha=0.3)
    ax.legend()
fig.tight_layout()
notebook.save_figure(fig, out, "sensitivity_sweep")

# %% [markdown]
# ## Generation with and without the KV cache
# Greedy decoding (batch 1) from a held-out prompt of `prompt_tokens` tokens, timed with the cache and by recomputing
# the whole sequence for each new token (only the last position goes through the head in both); the tokens must be
# identical.

# %%
prompt = data.fixed_batches(splits.test, 1, 1, p.prompt_tokens)[0][0].to(precision.device)
generators = {"baseline": trained["baseline"], f"hybrid ({p.generation_solver})": trained[p.generation_solver]}
speed = pd.DataFrame([{"model": name, **generation_speed(model, prompt, n)}
                      for name, model in generators.items() for n in p.generation_lengths])
display(speed.round(3))
notebook.save_table(speed.set_index(["model", "new_tokens"]), out, "generation_speed")

# %% [markdown]
# Samples (temperature `temperature`, top-`top_k`) from the trained models, continuing held-out prompts.

# %%
samples = []
for i, start in enumerate(data.fixed_batches(splits.test, 1, max(p.n_samples, 1), p.prompt_tokens)[0][0]
                          [: p.n_samples]):
    for name, model in generators.items():
        ids = models.generate(model, start[None].to(precision.device), p.sample_tokens, temperature=p.temperature,
                              top_k=p.top_k, generator=torch.Generator(precision.device).manual_seed(p.seed + i))
        samples.append({"prompt": i, "model": name, "prompt text": tok.decode(start.tolist()),
                        "continuation": tok.decode(ids[0, p.prompt_tokens:].tolist())})
display(Markdown("\n\n".join(f"**{s['model']}**, prompt {s['prompt']}: _{s['prompt text']}_ → {s['continuation']}"
                              for s in samples)))

# %% [markdown]
# ## Verdicts
# Memory and generation-speed verdicts are single measurements (they vary little between repeats); the solver-speed
# verdict is a Welch test over seeds at `alpha`.

# %%
def at(sensitivity, n, column):
    return sweep[(sweep.sensitivity == sensitivity) & (sweep.steps == n)][column].item()


first, last = min(p.sweep_steps), max(p.sweep_steps)
growth = {m: at(m, last, "peak_memory_mb") / at(m, first, "peak_memory_mb") for m in p.sensitivities}
verdicts = []
if "adjoint" in p.sensitivities:
    ratio = at("adjoint", last, "peak_memory_mb") / at("direct", last, "peak_memory_mb")
    verdicts.append(Verdict(
        "adjoint reduces memory", "held" if ratio < 1 else "not held",
        f"at {last} steps adjoint / direct peak memory = {ratio:.3f}; growth {first}→{last} steps: adjoint "
        f"{growth['adjoint']:.2f}×, direct {growth['direct']:.2f}×"))
if "reversible" in p.sensitivities:
    verdicts.append(Verdict(
        "reversible mode is O(1) memory", "held" if growth["reversible"] <= p.memory_growth_limit else "not held",
        f"peak memory grows {growth['reversible']:.2f}× from {first} to {last} steps (limit "
        f"{p.memory_growth_limit}×); gradient error vs direct {at('reversible', first, 'grad_rel_error'):.2g} at "
        f"{first} steps, {at('reversible', last, 'grad_rel_error'):.2g} at {last}"))
if {"rk4", "dopri5"} <= set(p.integrators):
    def per_seed(model, metric):
        return [metric(r) for r in runs if r.model == model]

    faster = claim_lower(per_seed("rk4", lambda r: r.ms_per_step), per_seed("dopri5", lambda r: r.ms_per_step),
                         p.alpha, "rk4 ms/step", "dopri5 ms/step")
    worse = claim_lower(per_seed("dopri5", lambda r: r.history.final_eval_loss),
                        per_seed("rk4", lambda r: r.history.final_eval_loss), p.alpha, "dopri5 loss", "rk4 loss")
    verdicts.append(Verdict(
        "RK4 can be faster than adaptive solvers",
        "not held" if faster[0] == "not held" or worse[0] == "held" else faster[0],
        f"{faster[1]}; held-out loss {worse[1]} (rk4 {steps_of['rk4']} steps = {p.nfe_budget} NFE, dopri5 "
        f"{table.loc['dopri5', 'nfe_per_forward']:.0f} NFE per forward)"))
longest = speed[speed.new_tokens == max(p.generation_lengths)]
verdicts.append(Verdict(
    "KV caching is 10–100× faster",
    "held" if (longest.speedup >= p.speedup_target).all() and speed.identical_tokens.all() else "not held",
    "; ".join(f"{r.model}, {r.new_tokens} tokens: {r.speedup:.1f}×" for r in speed.itertuples())
    + ("" if speed.identical_tokens.all() else " — cached and recomputed tokens differ")))
notebook.show_verdicts(verdicts)

# %%
notebook.save_results(
    out,
    headline={**{f"{m} val loss": table.loc[m, "val_loss"] for m in table.index},
              **{f"KV speed-up {r.model} {r.new_tokens}": r.speedup for r in speed.itertuples()},
              **{f"memory growth {m} {first}→{last}": g for m, g in growth.items()}},
    data=splits.description, precision=str(precision), parameters=p.to_dict(),
    integrators=table.reset_index().to_dict("records"), sensitivity=sweep.to_dict("records"),
    generation=speed.to_dict("records"), samples=samples,
    verdicts=verdicts,
    runs=[r.record() for r in runs])
