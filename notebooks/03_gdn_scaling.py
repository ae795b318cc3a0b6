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
# # 03 · Gated DeltaNet: how many bindings does a state hold, and how does the hybrid's loss scale?
#
# **The source's questions.** A hybrid-architecture experiment trained Gated DeltaNet (GDN) models on a needle task
# and asked (1) whether the recurrent state carries the answer, zeroing the state's read-out, and (2) how held-out
# loss of its GDN + sliding-window hybrid scales with size: L(N) = a·N^(−α) + c, go if α > 0.3, no-go if α < 0.1.
#
# **What a GDN-only ablation can and cannot show.** In a stack of GDN layers nothing but the state (and a 4-token
# convolution) carries information between distant tokens, so zeroing the read-out leaves a constant guess: the
# accuracy drop is accuracy minus chance by construction, and "the state carries the answer" cannot fail. We do not
# report it as evidence. The question a GDN-only stack *can* answer is how many bindings its state holds: here each
# prompt binds k names to k colours among filler that mentions names and colours too, and asks about one name
# (odebook.data.tasks); accuracy is reported against k and against the fact → question distance, beside chance and the
# best shortcut (copy the most recent / most frequent colour, the latest fact's colour, a bound colour at random),
# with intervals across seeds. Pairs (name, colour) held out of training are scored as "unseen pairs". The GDN's
# decay gate starts as fla-core's does (a spread of memory lengths per head, odebook.nn.gdn).
#
# **The ladder asks the source's question.** The hybrid pattern at each size (n GDN layers then one SWA layer that
# reads the last GDN state causally; the GDN-only stack as a second series where the profile runs it), the
# learning rate chosen per size on the validation split from `lr_grid` (first seed; the choice is shown), the same
# tokens per size (stated), α with its interval and the source's go/no-go rule.
#
# The gated delta rule runs as fla-core's kernel on CUDA and as odebook's chunked pure-PyTorch form elsewhere; both
# are tested against a plain reference loop (tests/nn/test_delta_rule.py), and the mechanism check below repeats that.

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
# The source's configuration (the t4 profile). params/<profile>/03_gdn_scaling.yaml overrides these.
seed = 0
n_seeds = 3
looks = []
device = "auto"
output_dir = ""
corpus = "wikitext2"
tokenizer = "gpt2"
ladder_d = [128, 256, 512]
ladder_layers = [1, 2, 4]
series = ["hybrid", "gdn"]
lr_grid = [3e-4, 1e-3, 3e-3]
n_head = 4
window = 64
seq_len = 256
max_seq_len = 1024
batch_size = 16
steps = 1000
lr = 1e-3
weight_decay = 0.1
grad_clip = 1.0
eval_interval = 100
eval_batches = 20
tensorboard = False
checkpoint_interval = 100
checkpoint_dir = ""
fresh = False
alpha = 0.05
chunk_size = 64
ks = [2, 4]
niah_sizes = [0, 1, 2]
niah_steps = 1500
niah_batch_size = 16
curriculum = [0, 10, 30, 50, 100]
niah_eval_examples = 500
eval_seed = 10000

# %%
import functools

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from IPython.display import display

from odebook.data import corpus as data
from odebook.book import notebook
from odebook.book import plots
from odebook.study import retrieval
from odebook.data import tasks
from odebook.study.experiment import run_seeds, summarize, tune_then_run
from odebook.study.task import Task, lm_task
from odebook.models.lm import block_params
from odebook.nn.delta_rule import fla_kernel, gated_delta_rule_chunked, gated_delta_rule_reference
from odebook.params import GDNScalingParams
from odebook.study.stats import Interval, Verdict, decide, holm_verdicts, paired_test, power_law_fit
from odebook.training.train import TrainConfig

p, out, precision = notebook.start(GDNScalingParams, globals())
tok = data.get_tokenizer(p.tokenizer)
seeds = range(p.seed, p.seed + p.n_seeds)
size_name = lambda i: f"d{p.ladder_d[i]}×{p.ladder_layers[i]}"  # noqa: E731
print(f"sizes (width × GDN layers): {[size_name(i) for i in range(len(p.ladder_d))]}; tokenizer {tok.name}")

# %%
# What this profile will cost, before the first step: time here, peak memory, a T4's time (odebook.book.budget)
from odebook.book import budget

print(budget.line(p, precision))  # the runner's estimate where it made one

# %% [markdown]
# ## Mechanism validation
# Orthonormal keys, β = 1, g = 0: after writing value i under key i, reading with key i must return value i
# (MSE < 0.01), for every implementation available here.

# %%
K = 64
keys = torch.linalg.qr(torch.randn(K, K, generator=torch.Generator().manual_seed(p.seed)))[0].T
values = torch.randn(K, K, generator=torch.Generator().manual_seed(p.seed + 1))
implementations = {"reference": gated_delta_rule_reference,
                   "chunked": functools.partial(gated_delta_rule_chunked, chunk_size=p.chunk_size)}
if precision.device.type == "cuda" and (kernel := fla_kernel()) is not None:
    implementations["fla-core (CUDA)"] = functools.partial(kernel, output_final_state=True)
mechanism = {}
for name, fn in implementations.items():
    k = keys[None, :, None, :].to(precision.device)
    _, S = fn(k, k, values[None, :, None, :].to(precision.device), torch.zeros(1, K, 1, device=precision.device),
              torch.ones(1, K, 1, device=precision.device))
    mechanism[name] = F.mse_loss(keys.to(S.device) @ S[0, 0], values.to(S.device)).item()
display(pd.Series(mechanism, name="retrieval MSE").to_frame())

# %% [markdown]
# ## Bindings held by a GDN-only state
# GDN-only stacks (each GDN followed by an MLP) at the sizes `niah_sizes`, trained on the retrieval curriculum
# (filler sentences per stage `curriculum`, equal steps per stage, k drawn from `ks` per prompt, facts at random
# positions; each training prompt asks about every bound name in turn and the loss is on the answers only),
# `n_seeds` seeds each. Scored with one question at the last stage's haystack, per k, on the queried fact at a random
# position, near the question ('inside': second to last, another fact after it), first ('far'), and on unseen
# pairs. Each stack is scored with its state zeroed too — not as evidence (in a GDN-only stack that leaves a constant
# guess by construction) but as the calibration that shows the verdict below can come out "not held": a model with
# no memory, varying from seed to seed like the trained ones.

# %%
stages = tasks.equal_stages(p.curriculum, p.niah_steps)
eval_sets = tasks.evaluation_sets(p.niah_eval_examples, p.eval_seed, ks=p.ks, n_filler=max(p.curriculum))
niah_valid = [tasks.batch(eval_sets[("random", max(p.ks))][:p.niah_batch_size], tok)[:2]]
sizes = {f"niah_{size_name(i)}": i for i in p.niah_sizes}


def bindings(size):
    """A retrieval task: the curriculum, scored on the evaluation sets normal and with the state zeroed."""
    return Task(batches=lambda seed: tasks.curriculum_batches(tok, p.niah_batch_size, seed, stages, p.ks),
                valid=niah_valid, score=lambda run: retrieval.score_rows(
                    run.module, eval_sets, tok, precision.device, window=p.window,
                    ablations=("normal", "state zeroed"), size=size, seed=run.seed))


niah_runs = run_seeds({n: p.size_config(i, "gdn").build for n, i in sizes.items()},
                      {n: bindings(size_name(i)) for n, i in sizes.items()},
                      TrainConfig.from_params(p, steps=p.niah_steps), precision, keep=lambda run: False,
                      **notebook.run_options(p, out, "retrieval"))
niah_runs = sorted(niah_runs, key=lambda r: list(sizes).index(r.model))  # by size, seeds in order
origins = {f"{r.model}_seed{r.seed}": r.origin for r in niah_runs}
print("runs:", ", ".join(f"{run} {origin}" for run, origin in origins.items()))
scored = pd.concat([r.scores for r in niah_runs])
niah, memoryless = scored[scored.ablation == "normal"], scored[scored.ablation == "state zeroed"]
by_k = retrieval.across_seeds(niah, ["size", "set", "k"])
notebook.save_table(by_k, out, "retrieval_by_k")
display(by_k.round(3))

# %% [markdown]
# Accuracy by distance from the queried fact to the question (random placement), binned relative to the hybrid's
# window `window`, pooled over k; the interval is across seeds.

# %%
by_distance = retrieval.across_seeds(niah[niah.set == "random"], ["size", "bin"])
notebook.save_table(by_distance, out, "retrieval_by_distance")
display(by_distance.round(3))
display(retrieval.summary(niah, ["size", "set"]).round(3).rename(columns={"example lo": "example-level lo",
                                                                          "example hi": "example-level hi"}))

# %% [markdown]
# ## Language modelling at each size
# Each series trained as language models; for each size the learning rate of `lr_grid` with the lowest validation
# loss on the first seed is kept, the other seeds run at it. Perplexity is held out (validation split, final
# evaluation), never training loss; the fit L(N) = a·N^(−α) + c uses non-embedding parameters N and the mean over
# seeds at each size.

# %%
splits = data.tokenize(data.load_corpus(p.corpus), tok)
print(splits.description)
tokens_per_size = p.steps * p.batch_size * p.seq_len
print(f"tokens per size: {tokens_per_size:,} ({p.steps} steps × {p.batch_size} × {p.seq_len})")
task = lm_task(splits, **notebook.batch_shape(p))
ladder_rows, lr_rows, runs_record = [], [], []
for s in p.series:
    for i in range(len(p.ladder_d)):
        name = f"{s} {size_name(i)}"
        runs, tried, chosen = tune_then_run({name: p.size_config(i, s).build}, task, TrainConfig.from_params(p),
                                            precision, lrs=p.lr_grid, **notebook.run_options(p, out, "lm"))
        best = chosen[name]
        lr_rows += [{"series": s, "size": size_name(i), "lr": lr, "val_loss": loss, "chosen": lr == best}
                    for lr, loss in tried.loc[name].items()]
        runs_record += [r.record() for r in runs]
        row = summarize(runs).iloc[0].to_dict()
        ladder_rows.append({"series": s, "size": size_name(i), "lr": best, "tokens": tokens_per_size,
                            "non-embedding params": block_params(runs[0].module), **row})
lr_choice = pd.DataFrame(lr_rows).set_index(["series", "size", "lr"])
ladder = pd.DataFrame(ladder_rows).set_index(["series", "size"])
notebook.save_table(lr_choice, out, "lr_choice")
notebook.save_table(ladder, out, "lm_ladder")
display(lr_choice.round(4))
display(ladder[["lr", "tokens", "non-embedding params", "seeds", "val_loss", "val_loss_lo", "val_loss_hi",
                "val_ppl", "test_ppl", "ms_per_step"]].round(4))

# %%
fits = {s: power_law_fit(ladder.loc[s, "non-embedding params"].tolist(), ladder.loc[s, "val_loss"].tolist())
        for s in p.series}


def go_no_go(fit):
    """The source's rule on α's 95 % interval: go when it clears 0.3, no-go when it lies below 0.1."""
    if fit.n_points <= 3 or not np.isfinite([fit.alpha_low, fit.alpha_high]).all():
        return "inconclusive", f"α = {fit.alpha:.3f} from {fit.n_points} sizes: no interval"
    alpha = Interval(fit.alpha, fit.alpha_low, fit.alpha_high, fit.n_points)
    go, stop = decide(alpha, 0.3, claim="above"), decide(alpha, 0.1, claim="below")
    outcome = "go" if go == "held" else "no-go" if stop == "held" else "inconclusive"
    return outcome, f"α = {fit.alpha:.3f} [{fit.alpha_low:.3f}, {fit.alpha_high:.3f}] from {fit.n_points} sizes"


for s, fit in fits.items():
    print(s, *go_no_go(fit))

# %%
fig, (ax_k, ax_d, ax_fit) = plots.figure(3)
rand = by_k.xs("random", level="set")
for j, (size, grp) in enumerate(rand.groupby(level="size", sort=False)):
    ks_ = grp.index.get_level_values("k")
    ax_k.errorbar(np.asarray(ks_) + 0.05 * j, grp.acc, yerr=[grp.acc - grp["seed lo"], grp["seed hi"] - grp.acc],
                  fmt="o-", capsize=3, label=size)
    ax_k.plot(ks_, grp["best shortcut"], ":", color=f"C{j}")
ax_k.axhline(tasks.CHANCE, color="k", lw=0.8, label="chance")
ax_k.set(xlabel="bindings per prompt k", ylabel="top-1 accuracy", ylim=(0, 1.05),
         title="GDN-only: accuracy vs k (dotted: best shortcut)")
ax_k.legend(fontsize=8)
for j, (size, grp) in enumerate(by_distance.groupby(level="size", sort=False)):
    grp = grp.reindex(retrieval.BINS, level="bin")
    ax_d.errorbar(np.arange(len(grp)) + 0.08 * j, grp.acc, yerr=[grp.acc - grp["seed lo"], grp["seed hi"] - grp.acc],
                  fmt="o-", capsize=3, label=size)
ax_d.axhline(tasks.CHANCE, color="k", lw=0.8)
ax_d.set(xticks=range(len(retrieval.BINS)), xticklabels=retrieval.BINS, ylim=(0, 1.05), ylabel="top-1 accuracy",
         title=f"accuracy by distance (window {p.window})")
for j, s in enumerate(p.series):
    lad = ladder.loc[s]
    ax_fit.errorbar(lad["non-embedding params"], lad.val_loss,
                    yerr=None if p.n_seeds < 2 else [lad.val_loss - lad.val_loss_lo, lad.val_loss_hi - lad.val_loss],
                    fmt="o", capsize=3, color=f"C{j}", label=f"{s} (held-out loss)")
    grid = np.geomspace(lad["non-embedding params"].min() / 2, lad["non-embedding params"].max() * 2, 50)
    ax_fit.plot(grid, fits[s](grid), "--", color=f"C{j}", label=f"{s} fit, α = {fits[s].alpha:.2f}")
ax_fit.set(xscale="log", xlabel="non-embedding parameters", ylabel="validation loss", title="scaling")
ax_fit.legend(fontsize=8)
for ax in (ax_k, ax_d, ax_fit):
    ax.grid(alpha=0.3)
fig.tight_layout()
notebook.save_figure(fig, out, "capacity_distance_scaling")

# %% [markdown]
# ## Verdicts
# Binding: accuracy minus the best shortcut's on the same examples, at the most bindings (random placement, and on
# unseen pairs); calibration: the same test on the stacks with their state zeroed, which must not hold. Capacity:
# accuracy at the fewest minus at the most bindings. Each a paired t-test across seeds, with Holm's correction over
# these tests at level `alpha`. The go/no-go is the source's own rule on α's 95 % interval from the fit (outside the
# Holm family). What the GDN-only stack cannot show: with no other path between tokens beyond a 4-token convolution,
# zeroing its state can only remove every answer, so "the state carries the answer" is not a verdict here (study 04
# asks it of the hybrid).

# %%
retrieval_scale = (f"{tok.name} prompts of {max(p.ks)} bindings + {max(p.curriculum)} filler sentences, "
                   f"{p.niah_steps} steps × {p.niah_batch_size} prompts, {p.n_seeds} seeds "
                   "(source: one fact per prompt, 100 distractors, 1500 steps)")
sizes_run = [size_name(i) for i in p.niah_sizes]
tests, scales = {}, {}
for size in sizes_run:
    for set_, what in (("random", "names to colours"), ("unseen pairs", "held-out pairs (never bound in training)")):
        claim = f"the {size} GDN state binds {max(p.ks)} {what} beyond the best shortcut"
        where = {"size": size, "set": set_, "k": max(p.ks)}
        tests[claim] = [paired_test(retrieval.per_seed(niah, seeds, **where),
                                    retrieval.per_seed(niah, seeds, shortcut=True, **where), claim="above")]
        scales[claim] = f"{size}, {retrieval_scale}"
    claim = f"calibration: the {size} stack with its state zeroed binds beyond the best shortcut (must not hold)"
    where = {"size": size, "set": "random", "k": max(p.ks)}
    tests[claim] = [paired_test(retrieval.per_seed(memoryless, seeds, **where),
                                retrieval.per_seed(memoryless, seeds, shortcut=True, **where), claim="above")]
    scales[claim] = f"{size}, {retrieval_scale}, state zeroed"
    claim = f"the {size} state holds fewer than {max(p.ks)} bindings (accuracy falls from k = {min(p.ks)} to {max(p.ks)})"
    tests[claim] = [paired_test(retrieval.per_seed(niah, seeds, size=size, set="random", k=min(p.ks)),
                                retrieval.per_seed(niah, seeds, size=size, set="random", k=max(p.ks)), claim="above")]
    scales[claim] = f"{size}, {retrieval_scale}"
verdicts = [Verdict("every implementation stores and retrieves (MSE < 0.01)",
                    "held" if all(v < 0.01 for v in mechanism.values()) else "not held",
                    ", ".join(f"{k}: {v:.2g}" for k, v in mechanism.items()), "K = 64, one head"),
            *holm_verdicts(tests, p.alpha, scales)]
for s, fit in fits.items():
    outcome, evidence = go_no_go(fit)
    verdicts.append(Verdict(f"go/no-go on the {s} ladder's scaling exponent: go (α > 0.3)",
                            {"go": "held", "no-go": "not held"}.get(outcome, "inconclusive"), f"{outcome}: {evidence}",
                            f"{len(p.ladder_d)} sizes d {p.ladder_d}, {tokens_per_size:,} tokens each, context "
                            f"{p.seq_len} (source: 3 sizes up to 125M parameters)"))
notebook.show_verdicts(verdicts)

# %%
notebook.save_results(
    out,
    headline={**{f"{s} alpha": fits[s].alpha for s in p.series},
              **{f"{size} acc at k={max(p.ks)} (best shortcut)": f"{r.acc:.2f} ({r['best shortcut']:.2f})"
                 for (size, k), r in by_k.xs("random", level="set").iterrows() if k == max(p.ks)}},
    data=splits.description, precision=str(precision), parameters=p.to_dict(), mechanism=mechanism,
    retrieval_by_k=by_k.reset_index().to_dict("records"), by_distance=by_distance.reset_index().to_dict("records"),
    lr_choice=lr_choice.reset_index().to_dict("records"), ladder=ladder.reset_index().to_dict("records"),
    runs=runs_record, retrieval_runs=origins,
    fits={s: {"a": f.a, "alpha": f.alpha, "c": f.c, "alpha_low": f.alpha_low, "alpha_high": f.alpha_high}
          for s, f in fits.items()},
    verdicts=verdicts)
