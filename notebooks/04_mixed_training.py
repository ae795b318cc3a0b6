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
# # 04 · Mixed training: what makes a GDN + SWA hybrid use its state?
#
# **Question.** In the source, a hybrid of five Gated DeltaNet layers and one sliding-window attention (SWA) layer
# that reads the last GDN layer's state learned fluent text but ignored its state until its local attention path was
# stochastically dropped and it was trained on a mixture of language modelling and retrieval ("PPL 2.2, Delta +88").
# Three questions follow, and this study asks them of models trained the same way on the same data:
# (1) **the source's mechanism** — under its recipe (stochastic local drop, mixed training) does the SWA layer's read of
# the GDN state carry facts from beyond the window? (2) does it when the GDN layer's own output is dropped in training
# as the source drops the local path, so that a fact beyond the window must pass through that read in most steps?
# (3) does the hybrid's state answer beyond the window **as well as full attention** of the same width, which sees every
# fact?
#
# **Arms** (odebook.models.local_paths; this study's `output_drop` module): the hybrid "GS" with the source's local
# paths — stochastic drop p = 0.7 in training and scale 0.3 at inference (`drop_0.7`, the one the cpu profile
# trains), static scale 0.3 (`static_0.3`) and others on larger profiles; the same `drop_0.7` hybrid with its GDN
# layer's direct output dropped per sequence with p = `output_drop` in training and scaled by 1 − p at inference
# (`drop_0.7+out_0.7`: its state and what the SWA layer reads of it untouched); the **no-state control** "WS", every G
# layer a window attention behind a short convolution of the GDN's width 4 (W; one convolution on the layer's input,
# where the GDN has one after each of its q, k, v projections) — the hybrid with its state replaced by a window; and
# the **reaching comparator** `attention`, "CS", every G layer full causal attention behind that convolution (C) — the
# hybrid with its state replaced by attention over the whole prompt. Training regimes: TinyStories language
# modelling; the retrieval curriculum; mixed, 0.5·LM + 0.5·retrieval per step.
#
# **Task.** Retrieval (odebook.data.tasks) binds k names to colours among filler that names colours too; training
# prompts ask about every bound name, evaluation prompts about one, whose fact stands inside the window ('inside':
# second to last), first ('far': beyond the window) or anywhere ('random'). Each model is scored normal and with a
# component removed — the SWA layer's read of the state, the GDN layer's own output, the whole state, the local path —
# by *resampling* it (another prompt's value at the same position), as well as by the batch mean and by zeroing (a
# value no prompt produces, which can push accuracy below chance), beside chance and the best shortcut (a rule such
# as "the most recent colour", scored on the same examples). Accuracy is top-1.
#
# **Claims, declared before the runs** (the table below the parameters prints them with their margins): (1) for
# `drop_0.7` · mixed, far accuracy falls when the SWA layer's read alone is resampled; (2) the same for
# `drop_0.7+out_0.7`; (3) `drop_0.7`'s far accuracy is **not below** the attention comparator's by Delta =
# `delta_target` or more (non-inferiority). (1) and (2) are superiority claims, tested against no fall with Delta the
# smallest fall of interest (the test that fails them asks whether the fall is below Delta; a fall that is real but
# smaller holds with a note saying so) — their wording, "by more than Delta", says more than that test. Each rests on a
# **learned gate** for every arm it compares, seed by seed: far accuracy above the best shortcut by more than 0.1 in
# every seed (for the no-state control, which cannot reach a far fact, inside accuracy); a claim whose arm did not
# learn reads "not testable" and names the seeds. (3) stands beside its **negative control**, the same test with the
# no-state control in place of the hybrid: a trained arm that cannot reach a far fact, so the test must not hold it
# (a control that held would void (3)); where the control did not learn inside its window, it reads "not testable",
# and (3) stands without a control that could have failed it, as the verdicts then show. The control differs from
# the hybrid in its memory (a window for the state) and, with it, in its second layer: a plain SWA layer, with no
# read, no gate and no local drop or scale — as does the comparator. (1) and (2) have none: an arm without a
# read has a read-resampled fall of exactly zero in every seed, which the test reads as not held whatever the test's
# power, so it could not show a test blind to the fall. Secondary (Holm over their family): the read in every other
# hybrid and regime; the read's sufficiency (far accuracy with the GDN layer's own read-out resampled but the SWA
# layer's read kept, above that with the whole state resampled); the read gains (stochastic drop against a static
# bottleneck, dropped output against the source's drop); mixed training's cost in fluency where the profile trains
# language modelling alone too. The source's Delta (far accuracy when the whole state is resampled; at this design only
# the state reaches beyond the window, so it reads how well a hybrid learned) and its fluency target are descriptive
# rows.
#
# **What each claim can and cannot tell, at this scale.** (1): the GDN layer's own output reads the same state at the
# same position and reaches the head through the residual stream, and the local path's drop cannot route a far fact
# anywhere (the window never sees one); so resampling the read asks whether the read is *needed* beside that output,
# and the sufficiency row whether it *carries* far facts alone. (2): the dropped-output arm learns slowly — in the
# design before this one it had learned far facts in 1 seed of 5 after 720 steps, in a pilot in 3 of 3 after 1,440
# (appendix) — so the cpu profile trains 1,440 steps. (3): with 2 or 4 bindings both arms may sit near
# the ceiling, and a hybrid that learned far facts in some seeds only reads "not testable", not "not held": (3) fails
# only when the hybrid learned in every seed yet stays Delta or more below attention. The "GDN output resampled"
# ablation resamples the layer's read-out before its norm and output gate (the gate stays this prompt's).
#
# **One tuning rule for every arm**: each arm × regime trains at every rate of the factor-2 grid `lr_grid` on
# `tuning_seeds` seeds of its own (never a confirmatory one), and the lowest mean final validation loss on what the
# claims read — the answers of held-out prompts at the last curriculum stage, every question asked (held-out windows
# where a regime trains language modelling alone) — chooses, or the middle one of the rates within `lr_tie` nats of
# it; a choice at an edge extends the grid one step, at most `lr_extensions` times (a choice still at an edge is
# flagged *untuned* in the claims that read it). Mixed training's own objective is not the tuning loss: its language
# model half sets the rate by fluency, which no primary reads (appendix). So the language-model regime's rates are
# chosen for fluency and the others' for answers, which tilts the secondary "mixed training keeps fluency" (a larger
# profile's) against mixed training. A tie of 0.02 nats — 2 % of the answer's probability — was set before the runs,
# not estimated from them. Every seed then trains at the chosen rate; seeds share the data stream across arms
# (paired), and come in looks (study.looks).
#
# **Scale.** The cpu profile trains two-layer stacks at d 64 and window 16 for 1,440 steps of 16 retrieval prompts of
# 2 or 4 bindings among up to 4 filler sentences, plus 8 TinyStories windows of 16 GPT-2 tokens; the source trained six
# layers at d 256 on prompts with 100 distractors. The no-state control sees 33 tokens back, short of the nearest 'far'
# fact (38; the Models section checks it); every 'inside' fact stands within one window.
#
# **Where this departs from the source.** Its SWA layer read the GDN layer's *final* state, which shows every position
# the whole sequence (a leak from the future in language-model training); here the read is causal — position by
# position, with queries made by that layer's key projection, mixed into its local attention through a learned gate —
# so its perplexities and ours are not comparable. It scored a hit when the colour was among the **top 5** of GPT-2's
# 50,257 logits, with 8 colours, so a model that ranks colour words first but binds nothing is right 5 times in 8;
# this book scores top-1. It cut every prompt at 300 GPT-2 tokens (its seed 004's tokenizer call, `max_length=300`): at
# 100 distractors a prompt is about 511 tokens, so its question was cut off and its Delta +64 and +88 were scored on
# prompts that no longer asked for the colour; this book scores whole prompts (its parameters refuse a `max_seq_len`
# shorter than the longest prompt). Its targets — PPL ≤ `ppl_target`, Delta ≥ `delta_target` — came after far more
# language-model tokens than a cpu profile trains; the PPL target is a descriptive row beside the token counts. Its
# head spanned GPT-2's 50,257 tokens; here the models know the GPT-2 tokens that the training stories and the task use
# (the text is cut into tokens as GPT-2 cuts it; 7,010 from the 2,316 stories of the data mirror the cpu report read,
# more from the hub's stories, so the vocabulary follows the data source), and a held-out token outside them counts as
# one "unknown" token. Held-out perplexity is over that closed vocabulary: the unknown token is never a training
# target, so each one (the Data section gives their share) costs a large loss, as a token the training stories never
# use does under the whole vocabulary. At d 64 the whole vocabulary's embedding and head were 98 % of a model's
# parameters, and its logits and their optimiser steps about half of a step's time.
#
# How the design came to be (earlier designs, their pilots and what they could not decide) is in the appendix at the
# end.

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
# The t4 profile's values; params/<profile>/04_mixed_training.yaml overrides these. The machine's settings (device,
# executor and SLURM, checkpoints) are set once for every study by the profile file or -p (docs/running.md).
seed = 0
n_seeds = 3
looks = []
tuning_seeds = 2
text = {"corpus": "tinystories", "tokenizer": "gpt2", "max_train_stories": 50000}
training = {"seq_len": 256, "batch_size": 16, "steps": 1000, "lr": 1e-3, "weight_decay": 0.1, "grad_clip": 1.0,
            "eval_interval": 100, "eval_batches": 20}
architecture = {"n_head": 4, "max_seq_len": 1024, "window": 64, "chunk_size": 64, "pattern": "GGGGGS", "d_model": 256}
retrieval_task = {"ks": [2, 4], "curriculum": [0, 10, 30, 50, 100], "retrieval_batch_size": 16,
                  "retrieval_eval_examples": 500, "eval_seed": 10000}
bottlenecks = ["static_0.3", "static_0.1", "drop_0.7", "drop_0.7_inverted"]
output_drop = 0.7
regimes = ["lm", "retrieval", "mixed"]
control = True
comparator = True
tuning = {"lr_grid": [5e-4, 1e-3, 2e-3], "lr_extensions": 2, "lr_tie": 0.02}
ppl_target = 5.0
delta_target = 0.15
ppl_margin = 0.1
sampling = {"n_samples": 3, "sample_tokens": 120, "temperature": 0.8, "top_k": 40}
alpha = 0.05

# %%
import dataclasses
import functools

import numpy as np
import pandas as pd
import torch
from IPython.display import Markdown, display

from odebook import studies
from odebook.book import budget, notebook
from odebook.data import tasks
from odebook.models.lm import generate
from odebook.study import retrieval
from odebook.study.claims import declaration
from odebook.study.experiment import run_seeds
from odebook.study.looks import run_in_looks
from odebook.study.stats import mean_ci

study = studies.load("04_mixed_training")  # this study's package: its parameters, arms, analysis and figures
mt = study.analysis
p, out, precision = notebook.start(study.Params, globals())
arms = p.arms()  # name → configuration (odebook.models.configs.PatternConfig)

# %% [markdown]
# ## Data and plan

# %%
d = study.data(p)  # the stories in the models' vocabulary, held-out windows and prompts, the retrieval sets
tok, eval_sets = d.tok, d.eval_sets  # tok: the tokenizer's tokens the stories and the task use, numbered afresh
unknown = torch.cat(d.valid).eq(tok.unknown).double().mean()
print(f"corpus {p.corpus}:", d.docs.description, f"Tokenizer: {tok.name}; held-out tokens outside it: {unknown:.1%}.",
      sep="\n")
plan = study.plan(p, d, precision)  # the runs below, as the study declares them (its plan module)
print(budget.line(p, precision, plan))  # what they will cost, before the first step (odebook.book.budget)
back = {(name, k): [tasks.distance(ex, tok) for ex in exs] for (name, k), exs in eval_sets.items()}
distances = pd.Series({name: np.median(d) for (name, k), d in back.items() if k == max(p.ks)},
                      name=f"median distance (tokens), k = {max(p.ks)}")
display(distances.to_frame().T)
nearest_far = min(min(d) for (name, _), d in back.items() if name == "far")

# %% [markdown]
# ## Models
# Each arm's layers (G: Gated DeltaNet; S: sliding-window attention, in a hybrid reading the GDN state; W:
# sliding-window attention behind the GDN's short convolution; C: full causal attention behind it), its parameters,
# and how far back it sees without a state.

# %%
models_table = mt.models_table(arms, window=p.window, nearest_far=nearest_far)
display(models_table)
if p.control:  # a control that reached a 'far' fact would be no stateless control of it (mt.models_table checks)
    print(f"the no-state control sees {models_table.loc['control', 'sees back (tokens)']} tokens back; the nearest "
          f"'far' fact stands {nearest_far} back")

# %% [markdown]
# ## The claims, declared before the runs
# Each a paired difference of far accuracies across seeds (a seed's models share its data stream and its evaluation
# examples), "higher" the claimed side, margin Delta = `delta_target`. A drop is normal − ablated accuracy on the
# same examples.

# %%
design = mt.Design.of(arms, p.regimes, ppl_target=p.ppl_target)
source = study.Params()  # the source's configuration (the t4 profile)
ours, theirs = (q.steps * q.batch_size * q.seq_len for q in (p, source))
tokens = (f"the source's configuration trains {theirs:,} language-model tokens, {theirs / ours:.0f}× this profile's "
          f"{ours:,}, at d {source.d_model} with a final-state read that sees the future")
claims = mt.declared_claims(design, delta=p.delta_target, ppl_margin=p.ppl_margin, tokens=tokens)
display(Markdown(declaration(claims)))


# %% [markdown]
# ## Learning rate per arm
# Each arm in each regime trains on the tuning seeds at every rate of `lr_grid` (a rate that diverges on any seed
# counts as infinite); the lowest mean final validation loss of held-out answers (language modelling alone: held-out
# windows) chooses, or the middle of the rates within `lr_tie` of it, and a choice at an edge of what the arm tried
# sends it one grid step further (study.lr_grid), at most `lr_extensions` times.

# %%
stage, options = plan["seeds"], notebook.run_options(p, out)
regime_task, config = stage.task, stage.config  # a task per arm × regime (mt.regime_tasks)
log_dir, seeding = options.pop("log_dir"), p.seed_plan
rates = mt.tune_rates(arms, p.regimes, regime_task, config, precision, lrs=stage.lrs, seeds=seeding.tuning,
                      max_extensions=stage.extensions, tie=p.lr_tie, **options)
print(f"learning rates tuned on seeds {seeding.tuning}; confirmatory seeds {seeding.seeds[0]}–{seeding.seeds[-1]}",
      *(f"\n{n}: {note}" for n, note in rates.untuned.items()))
notebook.save_table(rates.table, out, "lr_selection")
display(rates.table.round(4))

# %% [markdown]
# ## Runs, a look at a time
# One model per arm × regime × seed at its chosen rate, the same step budget each; seeds share the data stream across
# arms (paired).

# %%
sample = f"{design.source[0]}_mixed" if design.drop and "mixed" in p.regimes else None
configs = {n: dataclasses.replace(config, lr=rates.chosen[n]) for n in stage.arms}
run_arms = functools.partial(run_seeds, stage.arms, regime_task, configs, precision, log_dir=log_dir, **options,
                             keep={(sample, p.seed)})
looked = run_in_looks(run_arms, claims, functools.partial(mt.seed_differences, design), plan=seeding, alpha=p.alpha)
runs = looked.runs
print(f"{looked.seeds} of {p.n_seeds} seeds ran")
display(Markdown(looked.markdown()))
origins = {f"{r.model}_seed{r.seed}": r.origin for r in runs}
print("runs:", ", ".join(f"{run} {origin}" for run, origin in origins.items()))
scores, ppl = pd.concat([r.scores[0] for r in runs]), pd.DataFrame([r.scores[1] for r in runs])

# %% [markdown]
# ## Results
# Accuracy (top-1, all k pooled) by arm, regime, placement of the queried fact and ablation: mean over seeds with its
# interval across seeds, chance and the best shortcut on the same examples.

# %%
table = retrieval.across_seeds(scores, ["arm", "regime", "set", "ablation"])
notebook.save_table(table, out, "ablation")
display(table["acc"].unstack("ablation").round(3))
display(table.xs("normal", level="ablation")[["acc", "seed lo", "seed hi", "chance", "best shortcut"]].round(3))
examples = retrieval.summary(scores[scores.ablation == "normal"], ["arm", "regime", "set"])
display(examples[["acc", "example lo", "example hi", "n"]].rename(
    columns={"example lo": "example-level lo", "example hi": "example-level hi"}).round(3))
by_distance = retrieval.across_seeds(scores[scores.set == "random"], ["arm", "regime", "ablation", "bin"])
display(by_distance["acc"].unstack("bin").reindex(columns=list(retrieval.BINS)).round(3))
ppl_table = ppl.groupby(["arm", "regime"], sort=False).PPL.agg(mean_ci).map(str)
display(ppl_table.to_frame("held-out PPL (mean [95 % interval across seeds])"))

# %% [markdown]
# ## Verdicts
# The declared claims as settled above: the learned gates first (seed by seed), the primaries in looks, the negative
# control alone at α, the secondary claims by Holm over their family; a claim resting on an untuned rate says so. The
# source's Delta and fluency target are descriptive lines (log PPL − log target with its interval across seeds, beside
# the source's language-model tokens and this profile's: an absolute perplexity is a matter of tokens trained).

# %%
scale = (f"{p.pattern} d {p.d_model}, window {p.window}, {p.steps} steps of {p.retrieval_batch_size} retrieval prompts "
         f"({p.ks} bindings + up to {max(p.curriculum)} filler sentences, median 'far' distance {distances['far']:.0f} "
         f"tokens) and/or {p.batch_size} × {p.seq_len} LM tokens by regime, {tok.name} tokens, {looked.seeds} seeds "
         f"(source: {source.pattern} d {source.d_model}, GPT-2 tokens, 100 distractors)")
verdicts = [mt.flag_untuned(settled, rates.untuned).verdict(scale) for settled in looked.settled]
notebook.show_verdicts(verdicts)

# %%
fig = study.figures.ablations(table, hybrids=list(design.hybrids), arms=list(arms), regimes=p.regimes,
                              target=p.delta_target, chance=tasks.CHANCE)
notebook.save_figure(fig, out, "ablations")

# %% [markdown]
# ## Samples from the mixed model
# Continuations of a story opening by the mixed-regime model with the source's stochastic local drop
# (temperature `temperature`, top-k `top_k`).

# %%
samples, sample_model = [], next((r.module for r in runs if r.module is not None), None)
if sample_model is not None and p.n_samples:
    start = torch.tensor([tok.encode("Once upon a time")] * p.n_samples, device=precision.device)
    gen = torch.Generator(device=precision.device.type).manual_seed(p.seed)
    ids = generate(sample_model, start, p.sample_tokens, temperature=p.temperature, top_k=p.top_k,
                   generator=gen)
    samples = [tok.decode(row.tolist()) for row in ids.cpu()]
    display(Markdown("\n\n".join(f"> {s}" for s in samples)))

# %%
notebook.save_results(
    out,
    headline=mt.headline(table, design, arms),
    data=d.docs.description, precision=str(precision), parameters=p.to_dict(), lr_selection=rates.table,
    lr_tuning=rates.untuned, table=table, by_distance=by_distance, ppl=ppl, runs=origins, verdicts=verdicts,
    samples=samples)

# %% [markdown]
# ## Appendix: how this design came to be
#
# **The design before this one** (its cpu report, made on an AMD EPYC Zen 5 at commit bb50a20: seeds 400–404, tuning
# 405 and 406, 720 steps, GPT-2's whole vocabulary, each arm's rate chosen by mixed training's own objective — held-out
# windows and prompts, equally weighted — on the grid 1.5e-3 to 6e-3 with one extension). `drop_0.7` and attention
# learned in 5 of 5 seeds; the dropped-output arm in 1 of 5 (far accuracy above the best shortcut −0.119, −0.025,
# 0.150, −0.131, 0.013) and the no-state control in 3 of 5 (inside). (1) was not held: resampling the read changed no
# answer in any seed. (2) read "not testable", and with it the negative control of (3). (3) was inconclusive,
# `drop_0.7` − attention 0.075 [−0.246, 0.396] (n = 5): one `drop_0.7` seed and two attention seeds had half learned
# (0.19, 0.27 and 0.28 above the shortcut). `drop_0.7`'s rate ended at the bottom edge after its extension (7.5e-4,
# untuned), its validation loss flat from 7.5e-4 to 3e-3 (2.481 to 2.507 nats): the language-model half of the mixed
# objective set it.
#
# **What changed, and why.** Training doubled to 1,440 steps, so that the dropped-output arm can learn (a pilot, below)
# and half-learned seeds do not decide (3). The tuning rule reads the held-out answers, what the claims read, not the
# mixed objective, with rates that come within 0.02 nats of the lowest tied (the middle one chosen, as in study 01),
# on a grid one step lower (7.5e-4 to 3e-3). The models' vocabulary became the GPT-2 tokens the stories and the task
# use, which cut a control's or the comparator's step about threefold and a hybrid's by about a third: the doubled
# steps took no longer than the 720 of the design before (1,796 s against 1,843 s, the same Zen 5). Seeds are fresh:
# 700–704, tuning 705 and 706. A first run of this design, with one extension past an edge, left attention at the top
# edge of its extended grid (6e-3, untuned); the rule extends a grid until it brackets its choice, so before that
# run's verdicts were read the extensions went to three and the study ran again (every other arm's runs are the same
# computation as in that first run).
#
# **The pilots** (2026-12-07, an AMD EPYC Zen 5, 2 cores, 1,440 steps). The first (seeds 600–602, `drop_0.7` and the
# dropped-output arm alone, the grid {1.5e-3, 6e-3} under the mixed objective, GPT-2's whole vocabulary): the
# dropped-output arm learned in 3 of 3 seeds (0.556, 0.619 and 0.575 above the shortcut), `drop_0.7` in 3 of 3 (0.619
# to 0.625); the dropped-output arm's read-resampled fall was 0.627 [−0.154, 1.408] (n = 3); both arms chose 1.5e-3,
# the grid's bottom edge; 1,287 s for the two arms. The second, of this design after a second reader (seeds 650 and
# 651, one tuning seed 652, no comparator; 830 s): held-out answers' loss at 7.5e-4 / 1.5e-3 / 3e-3 was 0.0008 /
# 0.0020 / 0.0079 nats for `drop_0.7` (a tie: 1.5e-3), 0.306 / 0.840 / 0.020 and 0.045 at 6e-3 for the
# dropped-output arm (3e-3; one seed at 1.5e-3 had not left its plateau), 1.626 / 1.551 / 1.576 for the no-state
# control (1.5e-3). Far accuracy normal / read resampled / GDN output resampled / state resampled: `drop_0.7` 1.00 /
# 1.00 / 0.14 / 0.14, the dropped-output arm 0.97 / 0.14 / 0.97 / 0.15; both learned in 2 of 2 seeds (0.625, 0.625;
# 0.600, 0.588). The no-state control answered inside its window at 0.52, learned in 1 of 2 (0.213, 0.075): a
# confirmatory run may well find it not learned, so its reading was declared (the claims' paragraph) and nothing else
# changed.
#
# **The design before that** (its cpu report, made on an AMD Zen 4 at commit f77aa92, seeds 100–104, every arm at
# one rate 3e-3): the same "GS" hybrid with `static_0.3` and `drop_0.7`, the no-state control "WS", mixed training for
# 720 steps. Far accuracy (normal / read resampled / state resampled) was 0.99 / 0.99 / 0.14 for `static_0.3` and
# 0.84 / 0.84 / 0.13 for `drop_0.7` (its interval across seeds 0.54–1.00: not every seed had learned): the single GDN
# layer answered every fact itself, inside the window too, and neither the local path nor the SWA layer's read changed
# an answer. Its primary "the hybrid beats the no-state control on facts beyond the window by more than Delta, and
# its own memoryless self" held, but was decided by reach: the control sees 33 tokens back and the nearest far fact
# stands 38 back (its far accuracy 0.039, below chance: it answers with a colour inside its window, always another
# name's), and resampling the hybrid's state removes its only path to a far fact; both parts read "the hybrid learned
# the task". Its negative control (the hybrid with its state resampled at test) removed a trained branch at test time.
# The mechanism's claim rested on a gate "the local path is used inside the window", which failed for both hybrids,
# so the claim read "not testable". The control answered inside its window at 0.515 against the best shortcut's 0.375.
#
# **What changed then, and why.** The reach-limited comparison gave way to one with an arm that can reach: attention
# over the whole prompt in place of the state ("CS": the G layer's short convolution kept, its state replaced by full
# causal attention), so "as good as" is a comparison of memories, with the no-state control as the case built to
# fail it. The dropped-output arm (a second reader's proposal) gives the source's mechanism a way to be tested: with
# the GDN layer's own output gone from most training steps, a fact beyond the window can reach the answer only
# through the read. The local-path gate gave way to learned gates, seed by seed, for every arm a primary compares: a
# read that costs nothing when resampled in a hybrid that answers far facts is a finding about the mechanism (it is
# not used), not a reason to withhold the verdict. Every arm now trains on one grid of rates chosen by one rule on two
# tuning seeds apart from the confirmatory ones, on the validation loss of its regime's own objective (language
# modelling alone chose by perplexity before, which says nothing of retrieval).
#
# **Pilots of that design** (seed 0, the cpu profile otherwise, mixed training; an Intel Xeon, 2 cores; far accuracy,
# the best shortcut 0.38). `drop_0.7` at 3e-3: 0.99, and 0.99 with its read resampled, 0.11 with its GDN layer's own
# output resampled — the GDN layer answers by itself. A first comparator, a window layer then full attention ("WA"),
# had not learned in 720 steps at 3e-3 (far 0.32, inside 0.38); attention behind the short convolution ("CS", the
# one kept) answered every fact at 3e-3 and 6e-3 (far 1.00). The dropped-output arm at p = 0.7 was at 0.22 after 720
# steps at 3e-3 and 0.35 at 6e-3, where its read carried what it had learned (0.12 with the read resampled, 0.36 with
# the GDN output resampled); at p = 0.5 and 3e-3 it was at 0.34 and its GDN output carried that (0.34 with the read
# resampled, 0.11 with the output resampled). The profile keeps p = 0.7, the source's own drop rate and the one that
# routed facts through the read; whether it learns in 720 steps is its learned gate's to say.
#
# **Earlier still.** A "GGS" design at window 24 let its control reach 69 tokens, beyond every far fact. Zeroing a
# component put a value no prompt produces: the earlier book's zeroed drops of 0.11–0.13 below chance made "the state
# carries facts" certain whenever accuracy was above ~0.3, hence resampling. A pilot on seeds 0 and 1 chose the
# window of 16 tokens and the two-layer stack.
