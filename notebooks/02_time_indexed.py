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
# σ(MLP(t)) — beats both a plain transformer and Tong's fully time-dependent weights with far fewer parameters
# (its table: by ≈ 0.136 and ≈ 0.105 nats), that the time dependence is what helps, and that its state-space variant
# is best of all. The arms — `standard`, `tong`, `ti_mlp`, `ti_mlp_full`, `ti_ssm`, `ti_ssm_memoryless` (the SSM
# without its state), `ti_mlp_constant` (t held fixed), `ti_mlp_dt`, `ode_shared` and `ti_mlp_twin` (the null arm) —
# are declared once, each with what it is, in this study's `arms` module; the table below the parameters shows those
# the profile trains.
#
# **Claims, declared before the runs** (the table below the parameters prints them with their margins): (1) the
# TI-MLP beats both the standard transformer and Tong's model (one intersection–union claim: both parts must hold);
# (2) time dependence changes the loss — the TI-MLP against the same model with t held fixed, one two-sided decision
# at ±`margin`: *held* says on which side (helps or hurts), *not held* says the difference lies within ±margin
# (equivalent), and an undecided one prints the seeds it needs; (3) the SSM beats the TI-MLP. Each primary rests on a
# **learned gate** for every arm it compares — the arm's test loss lies below that of a unigram model (the train split's
# token frequencies) by more than 0.1 nats in every seed — and stands beside its **negative control**, a trained arm
# that differs only in what the claim is about and should come out not held: for (1) and (2) the TI-MLP's twin (another
# initial draw) in place of the arm that should make the difference; for (3) `ti_ssm_memoryless`, the SSM trained
# without its state (each token reads only itself), so that a win of (3) is the state's and not that of the branch's
# extra gates and projections. The sources' own numbers are placed beside the book's intervals as descriptive rows that
# say what differs between their measurement and ours (below). Margins are in nats of test loss. Speed is measured as
# timing (interleaved steps), outside the loss claims.
#
# **Fair comparison.** Same batches for every model of a seed, and **one tuning rule for every arm**: each model trains
# at every rate of the factor-2 grid `lr_grid` on `tuning_seeds` seeds of their own (never a confirmatory one), the
# lowest mean final validation loss chooses, and a choice at an edge extends the grid one step, at most
# `lr_extensions` times, so that every rate ends bracketed by its neighbours at half and twice (a model still at an
# edge is flagged *untuned*, and a claim resting on it says so). The TI-MLP, its twin and constant modulation — one
# architecture but for what the claims test — share one rate, chosen by the same rule on their mean, so a difference
# between them is not a difference of rates. The earlier report's one-standard-error rule, which moved flat-curved arms
# to slower rates, is shown beside as a sensitivity row (primary 1 re-run at the rates it chooses). Every seed then
# trains at the chosen rate; the test split is scored once per run at the end and carries the verdicts. Seeds share the
# batch stream across models, so comparisons are paired across seeds; the seeds come in looks (study.looks): the
# study stops adding seeds once every primary claim has stopped.
#
# **Scale (read every verdict with it).** The cpu profile trains d 64, 6 depth steps, 250 steps of 16 × 64 bytes —
# about 2.4 % of one epoch of WikiText-2. Its loss claims measure *early learning speed*, not converged quality; an
# "implicit regularisation" effect of sharing cannot show at this scale. The sources measured at d 256 (the t4 profile's
# scale; their tokens below).
#
# **Departures from the sources (stated).** Every model here is causal (tested), has learned positional embeddings and
# goes through one LM assembly; the baseline is a plain transformer (the source's code let attention see future tokens,
# had no positional embeddings and built its "standard" from hypernetwork blocks). Our SSM is selective
# (input-dependent), as Mamba — claim (3) is about our SSM variant, which the code-level source did not build. The
# source's TI-MLP used Tong's temporal LayerNorms and Tong's code gives each time-dependent linear its own time MLP;
# both are options (`norm: temporal`, `tong_time_mlp: per_linear`; default: static LayerNorms and one shared time MLP,
# so `tong` here is lighter than Tong's code). Tong et al. integrate with dt = 1/L from t = dt; the published TI models
# add f without dt (x + f), which we keep (`ti_mlp_dt` is the dt-scaled variant). Constant modulation holds t at 1/2
# (the middle of the trained depths), the fork's at t = 0. The test split is scored once, after training, at a rate
# chosen on validation. What the sources say and where they disagree, and this design's history: the appendix.

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
# The t4 profile's values; params/<profile>/02_time_indexed.yaml overrides these. The machine's settings (device,
# executor and SLURM, checkpoints) are set once for every study by the profile file or -p (docs/running.md).
seed = 0
n_seeds = 12
looks = [4, 8]
tuning_seeds = 2
# every arm of the study's arms.py trains; to train some only, add a line: models = ["standard", "ti_mlp"]
# corpus "files": your own text (absolute paths; see the README)
text = {"corpus": "wikitext2", "tokenizer": "bytes", "train_file": "", "valid_file": "", "test_file": "",
        "text_file": "", "split_fractions": [0.9, 0.05, 0.05]}
# lr is the source's rate, not used here: each model's rate is chosen from lr_grid
training = {"seq_len": 128, "batch_size": 8, "steps": 1000, "lr": 3e-4, "weight_decay": 0.0, "grad_clip": 1.0,
            "eval_interval": 100, "eval_batches": 20}
architecture = {"n_head": 4, "max_seq_len": 128, "d_model": 256, "n_layer": 6, "n_freq": 16, "d_emb": 32,
                "gate_width": 32, "d_state": 16, "rediscretize": [3, 12], "norm": "static", "tong_time_mlp": "shared"}
lr_grid = [5e-4, 1e-3, 2e-3]
lr_extensions = 2
margin = 0.02
timing_reps = 30
compression_target = 3.0
dynamics_sequences = 2
dynamics_tokens = 8
alpha = 0.05

# %%
import dataclasses
import functools

import pandas as pd
from IPython.display import Markdown, display

from odebook import studies
from odebook.book import budget, notebook
from odebook.data import corpus as data
from odebook.params import SeedPlan
from odebook.study import dynamics, plots
from odebook.study.claims import declaration, settle
from odebook.study.experiment import loss_at_depth, run_seeds
from odebook.study.looks import run_in_looks

study = studies.load("02_time_indexed")  # this study's package: its parameters, arms, analysis and figures
ti, figures = study.analysis, study.figures
p, out, precision = notebook.start(study.Params, globals())
display(Markdown(study.arms.table(p.models)))

# %% [markdown]
# ## The claims, declared before the runs
# Every loss claim compares test loss paired by seed, d = a − b (negative: a is better), with one margin `margin`
# in nats: 0.02 nats is a 2 % change in perplexity, under a quarter of the TI-MLP's lead over the standard
# transformer in the pilot below (0.09) and about the seed-to-seed SD of the time-dependence comparison (0.017) — a
# smaller difference in early learning speed is not one a reader would choose an architecture by. A one-sided claim
# *holds* when d < 0 is shown and is *not held* when an effect of the margin is ruled out (d > −margin shown); the
# two-sided time-dependence claim holds when d ≠ 0 is shown (the evidence names the side) and is not held when
# −margin < d < margin is shown (TOST). The three primaries are settled in looks, each at α / 3; their negative
# controls alone at α; the secondary claims (arms the cpu profile does not train) form their own Holm family. A claim
# whose arm did not learn (its learned gate not held) reads "not testable at this scale" and names the arm and seeds.
# The sources' numbers, the one-standard-error sensitivity and the equal-time comparison are descriptive.

# %%
claims = ti.declared_claims(p.models, p.margin)  # those whose arms this profile trains (study.analysis)
primaries = [c for c in claims if c.primary]
display(Markdown(declaration(claims)))
later = [c for c in claims if c.comparisons[0] == ti.EQUAL_TIME or c.comparisons[0].startswith(ti.OLD_RULE)]
claims = [c for c in claims if c not in later]  # the equal-time and sensitivity rows are settled after their runs

# %% [markdown]
# ### The design's power
# Pilot: the committed cpu report of the one-standard-error design (seeds 200–211, every model at 250 steps, the same
# grid) — the SD over seeds of each comparison's paired difference (the confirmatory seeds here are fresh: 300 on).
# Simulated (study.sequential.operating, 4,000 studies of normal differences) through this profile's looks at
# α / (number of primaries): the chance that a claim decides for itself when its effect is the margin, and against
# itself when there is none. The twin's controls, settled once at α on the seeds the looks ran: the chance they come
# out not held at each place the study can stop (a control can miss it for want of seeds, not only because its test is
# blind). The memoryless SSM's control has no pilot and is not simulated.

# %%
design = p.seed_plan.design
power_table = ti.design(claims, design, margin=p.margin, alpha=p.alpha) if p.n_seeds >= 2 else pd.DataFrame()
print(f"looks at {design} seeds, each primary at α = {p.alpha / max(len(primaries), 1):.3g}")
display(power_table)

# %% [markdown]
# ## Data and plan

# %%
splits = study.data(p)
print(splits.description)
plan = study.plan(p, splits)  # the runs below, as the study declares them (its plan module)
print(budget.line(p, precision, plan))  # what they will cost, before the first step (odebook.book.budget)

# %% [markdown]
# ## Learning rate per model
# Each model trains on the tuning seeds at every rate of `lr_grid` (a rate that diverges on any seed counts as
# infinite); the lowest mean final validation loss chooses, and a choice at an edge of what the model tried sends it one
# grid step further (study.lr_grid), at most `lr_extensions` times; a choice still at an edge is *untuned*. The TI-MLP,
# its constant-modulation ablation and its twin train at every rate any of the three tried and share the rate of
# lowest mean over the three. The column "one-SE rule" is the rate the earlier rule would choose from the same table
# (the smallest rate within 0.012 nats of the lowest); the sensitivity row re-runs primary (1)'s arms it moves.

# %%
stage, options = plan["seeds"], notebook.run_options(p, out)
builders, task, config = stage.arms, stage.task, stage.config
log_dir, seeding = options.pop("log_dir"), p.seed_plan
rates = ti.tune_rates(builders, task, config, precision, lrs=stage.lrs, seeds=seeding.tuning,
                      max_extensions=stage.extensions, **options)
print(rates.describe(), f"\nlearning rates tuned on seeds {seeding.tuning}; confirmatory seeds {seeding.seeds[0]}–"
      f"{seeding.seeds[-1]}", *(f"\n{n}: {note}" for n, note in rates.untuned.items()))
notebook.save_table(rates.table.assign(**{"one-SE rule": pd.Series(rates.old_rule)}), out, "lr_selection")
display(rates.table.assign(**{"one-SE rule": pd.Series(rates.old_rule)}).round(4))

# %% [markdown]
# ## The runs, a look at a time
# The other seeds train at each model's chosen rate, on the same batch stream per seed for every model. After each
# look's seeds the primary claims are examined (study.looks); the study stops once every one has stopped.

# %%
configs = {n: dataclasses.replace(config, lr=rates.chosen[n]) for n in builders}
run_arms = functools.partial(run_seeds, builders, task, configs, precision, log_dir=log_dir, **options)
unigram = data.unigram_loss(splits.train, task.test, splits.vocab_size)  # the learned gates' reference
values_of = functools.partial(ti.seed_differences, p.models, unigram=unigram)
# without primaries (a profile whose models leave none) no look is taken: every seed runs at once
looked = run_in_looks(run_arms, claims, values_of, plan=seeding if primaries else SeedPlan(p.seed, p.n_seeds),
                      alpha=p.alpha)
runs = looked.runs
print(f"{looked.seeds} of {p.n_seeds} seeds ran; the unigram model's test loss {unigram:.4f} nats")
display(Markdown(looked.markdown()))

# %% [markdown]
# ### Sensitivity: the one-standard-error rule
# The arms of primary (1) whose rate the earlier rule would move, re-run at that rate on the seeds that ran.

# %%
rerun = ti.rerun_old_rule(rates, builders, task, config, precision, seeds=seeding.seeds[:looked.seeds], log_dir=log_dir,
                         **options)
print("re-run at the one-SE rule's rates:", {n: rates.old_rule[n] for n in rates.moved} or "none")

# %% [markdown]
# ## Results
# Final validation and test loss (mean and 95 % t-interval over seeds), and each model against the standard
# transformer on test loss, paired by seed (mean difference with its interval, paired t, uncorrected p, d_z;
# negative is better than the standard). Block parameters leave out the embeddings, final LayerNorm and head, which
# every model shares; their ratio to the standard's is the compression. Peak memory is tracked on CUDA only.

# %%
table = ti.results_table(runs)
notebook.save_table(table, out, "results_table")
display(table.round(4))

# %%
notebook.save_figure(figures.loss_against_params_and_time(table, runs, looked.seeds), out, "loss_vs_params_and_time")
notebook.save_figure(figures.validation_curves(runs, table.index), out, "validation_curves")

# %% [markdown]
# ## Speed, timed interleaved
# A TI-MLP training step against a Tong step (and an SSM step against a TI-MLP step), on the first seed's trained
# models (copies), the same batch, alternated A, B, A, B, … after a warm-up (study.timing): the ratio of median step
# times with a bootstrap interval, and the machine's load beside it. The clock is the wall clock (synchronised on a
# GPU): what a user waits. Interleaving removes the drift between arms; it does not remove load — on a machine with
# more runnable processes than cores the longer step waits more often, so read the load printed beside the ratio.
# (The process's CPU time is no better inside a Jupyter kernel, whose own threads count in it.) The training runs'
# own step times, taken minutes apart, are not used for a speed verdict.

# %%
batch = tuple(t.to(precision.device) for t in next(task.batches(p.seed)))
timings = ti.step_timings(runs, batch, task.loss_fn, rates.chosen, precision, reps=p.timing_reps,
                         grad_clip=p.grad_clip)
for (a_, b_), t in timings.items():
    print(f"{a_} / {b_}: {t}")

# %% [markdown]
# ## Equal wall-clock
# The SSM's step costs several TI-MLP steps, so "beats at equal steps" is not "beats at equal time". The clock is the
# interleaved ratio r of an SSM step to a TI-MLP step timed above: the TI-MLP's whole training (`steps` of its steps)
# takes as long as steps / r SSM steps. Per seed: the SSM's validation loss after steps / r of its steps (read off
# its validation curve, linear between evaluations every `eval_interval` steps) against the TI-MLP's final validation
# loss. Each run's own step times are not the clock: taken minutes apart on a shared machine, they moved up to 9×
# between seeds of one model in an earlier report (and the point fell before the SSM's first evaluation, a NaN).
# Descriptive: validation loss, read between evaluations; the lr schedule is constant, so the SSM's curve part-way
# through is a run of that length. The other side — the TI-MLP's loss after as long as the SSM trained — would need
# the TI-MLP trained for several times its steps, which this study does not do.

# %%
equal, later_values = pd.DataFrame(), ti.old_rule_differences(runs, rerun)  # and the sensitivity rows' values
if ("ti_ssm", "ti_mlp") in timings:
    r = timings["ti_ssm", "ti_mlp"].ratio.mean
    equal, later_values[ti.EQUAL_TIME] = ti.equal_time(runs, r)
    notebook.save_table(equal, out, "equal_time")
    display(equal.round(4))
    print(f"SSM step / TI-MLP step = {r:.3g} (interleaved): {p.steps} TI-MLP steps take as long as "
          f"{p.steps / r:.0f} SSM steps")
later_settled = settle(later, later_values, alpha=p.alpha)

# %% [markdown]
# ## Learned modulation m(t)
# Mean gate value of each gated matrix against depth t, for the first seed's model (dots: the depths used in
# training). A gate that does not move with t means the model did not use its time dependence. The depth embedding
# has frequencies up to 1000 rad per unit t (the published form), so between the trained depths a curve need not be
# smooth: the re-discretisation below tests what that does to other step counts.

# %%
first = {name: next(r.module for r in runs if r.model == name) for name in study.arms.having(p.models, "gated")}
notebook.save_figure(figures.modulation(first), out, "modulation_curves")

# %% [markdown]
# ## Re-discretisation
# The ODE-style models (dt-scaled), trained with L steps, evaluated with other step counts (Tong et al.'s adaptive
# depth) on the same validation batches.

# %%
valid = data.fixed_batches(splits.valid, p.eval_batches, p.batch_size, p.seq_len)
depths = sorted({*p.rediscretize, p.n_layer})
ode_style = study.arms.having(p.models, "ode_style")
redisc = pd.DataFrame([{"model": r.model, "seed": r.seed, "steps": n, "val_loss": loss_at_depth(r, n, valid, precision)}
                       for r in runs if r.model in ode_style for n in depths])
if len(redisc):
    redisc_table = redisc.groupby(["model", "steps"]).val_loss.mean().unstack()
    display(redisc_table.round(4))
    notebook.save_figure(figures.rediscretisation(redisc_table, trained=p.n_layer), out, "rediscretisation")

# %% [markdown]
# ## The learned dynamics
# For the first seed's depth-shared models: the Jacobian J(t) = ∂f/∂x of the depth field f(t, x) = (block(x, t, h) −
# x)/h at the states the stack reaches, its leading eigenvalue and σ_max across depth, and the finite-time Lyapunov
# exponent of the whole stack, log σ_max(∂x_L/∂x_0) (exact: the product of the steps' Jacobians), on
# `dynamics_sequences` held-out sequences of `dynamics_tokens` tokens. For the direct-residual models (h = 1) the
# "field" is the per-step update.

# %%
test_tokens = splits.test[: p.dynamics_sequences * p.dynamics_tokens].view(p.dynamics_sequences, p.dynamics_tokens)
shared_models = study.arms.having(p.models, "shared")
dyn = pd.concat([dynamics.analyse(next(r for r in runs if r.model == n).module, "blocks.0", list(test_tokens), label=n)
                 for n in shared_models], ignore_index=True) if shared_models else pd.DataFrame()
if len(dyn):
    display(dyn.groupby("model", sort=False)[["max_real_eig", "sigma_max", "ftle"]].agg(["mean", "min", "max"])
            .round(4))
    notebook.save_figure(plots.spectrum(dyn), out, "dynamics")

# %% [markdown]
# ## Verdicts
# The primary claims settle in looks (each at α / the number of primaries; efficacy → held, futility → not held, the cap
# → inconclusive with the seeds it would need), each negative control alone at α on every seed that ran, the secondary
# claims by Holm over their family; a claim whose arm did not learn (its learned gate, seed by seed, not held) reads
# "not testable at this scale" and names the arm. How each can fail: a superiority claim is *not held* once an effect of
# the margin is ruled out, and a held one whose margin-sized effect is ruled out too says it is real but smaller (the
# pilot had the TI-MLP ahead of Tong by only 0.011 nats — the intersection–union claim can fail on that part alone); the
# time-dependence claim is not held once the difference is shown to lie within ±margin, and when held its evidence says
# which side (a below b: time dependence helps; above: it hurts). A negative control that holds would show a test that
# calls a null difference an effect: the claim it controls is then void, whatever its own test said, and reads "not
# testable at this scale" with the control named, as a claim on a failed gate does. The sources' numbers are
# descriptive: each row names what differs between their measurement and ours, and reads our interval beside their
# number, not a test of it. A claim resting on a model whose learning rate stayed at the edge of its grid says so. The
# TI-MLP, the twin and constant modulation share one rate (above), so the twin's comparisons and the time-dependence
# claim compare models at the same rate; every other arm's rate is its own, by the same rule at factor-2 resolution. The
# descriptive line "twin minus constant modulation", added after the first run, reads the time-dependence comparison
# once more through the twin's draw. The speed verdict is a timing, outside the loss families; the compression claim is
# a count.

# %%
frac = p.steps * p.batch_size * p.seq_len / len(splits.train)
scale = (f"early learning: {p.steps} steps × {p.batch_size} × {p.seq_len} {p.tokenizer} tokens = {frac:.1%} of an "
         f"epoch; d {p.d_model}, {p.n_layer} depth steps; {looked.seeds} seeds (source: d 256, 6 steps, 1000 steps "
         "× 8 × 128 bytes)")
# a claim whose negative control held reads void (study.looks); one resting on an untuned rate says so
verdicts = [ti.flag_untuned(s, rates.untuned).verdict(scale) for s in [*looked.settled, *later_settled]]
if ("ti_mlp", "tong") in timings:
    verdicts.append(timings["ti_mlp", "tong"].verdict("a time-indexed MLP training step is faster than a Tong step",
                                                      scale=scale))
verdicts += ti.compression_verdicts(table, p.compression_target, scale)
notebook.show_verdicts(verdicts)

# %%
notebook.save_results(
    out,
    headline={**{f"{m} test loss": table.loc[m, "test_loss"] for m in table.index},
              **{f"{m} lr": rates.chosen[m] for m in table.index}, "seeds": looked.seeds,
              **{f"{a} / {b} step time": t.ratio.mean for (a, b), t in timings.items()}},
    verdicts=verdicts, data=splits.description, precision=str(precision), parameters=p.to_dict(),
    lr_selection=rates.table, lr_tuning={n: c.note for n, c in rates.status.items()}, one_se_rule=rates.old_rule,
    unigram_loss=unigram, design=power_table,
    looks=looked.markdown(), summary=table, equal_time=equal, timings={f"{a} / {b}": str(t) for (a, b), t in
                                                                        timings.items()},
    rediscretisation=redisc, dynamics=dyn, runs=[r.record() for r in runs], one_se_runs=[r.record() for r in rerun])

# %% [markdown]
# ## Appendix: what the sources say, and this design's history
# **The sources.** The seed text lists the constant-modulation ablation as future work, unchecked; the fork's
# repository reports it later (zaphrode/qkvflow, `ABLATION_T0_FINDINGS.md`: best validation loss 2.3698 with t varying
# against 2.3829 at t = 0, a 0.013-nat gain, "+0.55 %", from one seed at lr 3e-4, "gain primarily from the adapter
# structure"). The seed's table calls its losses validation losses; the fork's comparison script
# (`scripts/compare_vs_tong_neuralode.py`, `load_wikitext2`) reads `test.txt` and builds its "valid" batches from it,
# reporting the minimum over evaluations: the test split, selected on. Its "standard" is a 308.5M-parameter stack of
# Tong's hypernetwork attention, and its time-indexed attention appears to pool over future positions
# (`scripts/test_time_indexed_weights.py`); it trained at d 256 on 4× the t4 profile's tokens. The seeds disagree on
# the SSM: seed 001 calls it "Mamba-style selective", while seed 002's pseudocode and the fork's code
# (`scripts/test_time_indexed_ssm.py`, whose `_get_params` reads A, B, C, Δ off the depth embedding alone) make it
# input-independent.
#
# **The tuning rule.** The first design chose each arm's rate by the lowest validation loss on one tuning seed; its run
# of 2026-11-27 (seeds 100–111) gave the TI-MLP family 1.6e-2 over 8e-3 by 0.0007 nats of mean loss, and there two
# identical TI-MLPs differed by an SD of 0.044 nats across seeds — too wide for the time-dependence claim to decide (it
# needed ≈ 39 seeds). Tuned apart, that report's twin landed on 8e-3 and the TI-MLP on 1.6e-2 (on the tuning seeds
# 112–114 of an uncommitted pilot the choice between the two flipped from seed to seed), and the twin's control held
# (+0.015 [0.003, 0.027] nats): a rate difference read as an effect — hence one rate for the family. The second design
# (the report of seeds 200–211) took the smallest rate within one standard error (0.012 nats) of the lowest on one
# tuning seed; arms with a sharp optimum kept their best rate while the flat-curved family was moved to a slower one,
# which cost it 0.010 nats on the tuning seed — enough to move "TI-MLP beats Tong" from a clear futility stop to a hair
# at the 12-seed cap. That rule is now the sensitivity row; this design tunes every arm by one rule on two seeds. Its
# SSM control was the trained SSM with its branch switched off at test (+1.81 nats: a control that could not hold); the
# trained memoryless SSM replaces it.
