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
# **Capacity, as the field measures it.** The primary question is how many bindings a GDN state holds, read from
# accuracy curves of multi-query associative recall (MQAR, the Zoology testbed) against the number of pairs and the
# state's size — measured as the accuracy binding adds (first queries on sequences as drawn against the same
# sequences with their pairs re-bound, which a model that binds nothing answers alike), beside full attention (the
# positive control, which keeps every pair) and a no-state control trained the same way; two primary claims and a
# secondary, each beside a negative control that binds nothing, seeds in looks (below).
#
# **What a GDN-only ablation can and cannot show.** In a stack of GDN layers nothing but the state (and a 4-token
# convolution) carries information between distant tokens, so zeroing the read-out leaves a constant guess: the accuracy
# drop is accuracy minus chance by construction, and "the state carries the answer" cannot fail. We do not report it as
# evidence: the MQAR section measures binding against the best a model that binds nothing can do, on sequences where
# binding cannot help as its control. The name → colour task of the earlier book stays as a secondary family: each
# prompt binds k names to k colours among filler that mentions names and colours too, and asks about one name
# (odebook.data.tasks); accuracy against k and the fact → question distance, beside chance and the best shortcut, with
# intervals across seeds. The GDN's decay gate starts as fla-core's does (a spread of memory lengths per head,
# odebook.nn.gdn).
#
# **The ladder, honestly.** The source planned to fit L(N) = a·N^(−α) + c over the hybrid at several sizes and
# apply "go if α > 0.3, no-go if α < 0.1"; it never ran the fit (its three models were GDN-only retrieval models of
# 6.6M / 14.4M / 37.7M parameters, compared on training loss and Delta). Here the ladder is descriptive — the curve,
# the learning rate chosen per size on the validation split, tokens per parameter — and the rule is applied only
# where the ladder can carry it: enough sizes for residual degrees of freedom, α's interval across seeds (a
# bootstrap), and enough tokens per parameter (this study's scaling); otherwise the verdict reads "not testable at
# this scale" with what it lacks.
#
# The gated delta rule runs as fla-core's kernel on CUDA and as odebook's chunked pure-PyTorch form elsewhere; both
# are tested against a plain reference loop (tests/nn/test_delta_rule.py), and the mechanism check below repeats that.

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
# The t4 profile's values; params/<profile>/03_gdn_scaling.yaml overrides these. The machine's settings (device,
# executor and SLURM, checkpoints) are set once for every study by the profile file or -p (docs/running.md).
seed = 0
n_seeds = 3
looks = []
tuning_seeds = 2
text = {"corpus": "wikitext2", "tokenizer": "gpt2"}
training = {"seq_len": 256, "batch_size": 16, "steps": 1000, "lr": 1e-3, "weight_decay": 0.1, "grad_clip": 1.0,
            "eval_interval": 100, "eval_batches": 20}
architecture = {"n_head": 4, "max_seq_len": 1024, "window": 64, "chunk_size": 64}
lm_ladder = {"ladder_d": [128, 256, 512], "ladder_layers": [1, 2, 4], "series": ["hybrid", "gdn"],
             "lr_grid": [3e-4, 1e-3, 3e-3]}
retrieval_task = {"ks": [2, 4], "curriculum": [0, 10, 30, 50, 100], "retrieval_batch_size": 16,
                  "retrieval_eval_examples": 500, "eval_seed": 10000, "retrieval_sizes": [0, 1, 2],
                  "retrieval_steps": 1500}
mqar_capacity = {"mqar_keys": 64, "mqar_width": 128, "mqar_heads": [8, 2], "mqar_layers": 2, "mqar_seq_len": 256,
                 "mqar_train_ks": [4, 8, 16, 32, 64], "mqar_eval_ks": [4, 8, 16, 32, 64], "mqar_batch_size": 64,
                 "mqar_steps": 3000, "mqar_lr_grid": [3e-4, 1e-3, 3e-3, 1e-2], "mqar_lr_extensions": 1,
                 "mqar_power_a": 0.1, "mqar_eval_batches": 8, "mqar_margin": 0.1, "mqar_restarts": 2}
alpha = 0.05

# %%
import dataclasses
import functools

import pandas as pd
from IPython.display import Markdown, display

from odebook import studies
from odebook.book import budget, notebook
from odebook.data import mqar, tasks
from odebook.study import recall, retrieval
from odebook.study.claims import declaration, settle
from odebook.study.looks import void_by_controls

study = studies.load("03_gdn_scaling")  # this study's package: its parameters, arms, analysis and figures
capacity, colours, scaling, figures = study.capacity, study.colours, study.scaling, study.figures
p, out, precision = notebook.start(study.Params, globals())
d = study.data(p, precision.device)  # MQAR's sets and task, the tokenizer, the ladder's corpus (its plan module)
plan = study.plan(p, d, precision.device)  # the runs below, as the study declares them
print(budget.line(p, precision, plan))  # what they will cost, before the first step (odebook.book.budget)
tok = d.tok
print(f"sizes (width × GDN layers): {[scaling.size_name(p, i) for i in range(len(p.ladder_d))]}; tokenizer {tok.name}")

# %% [markdown]
# ## Mechanism validation
# Orthonormal keys, β = 1, g = 0: after writing value i under key i, reading with key i must return value i
# (MSE < 0.01), for every implementation available here.

# %%
mechanism = capacity.store_and_retrieve(p.chunk_size, seed=p.seed, device=precision.device)
display(pd.Series(mechanism, name="retrieval MSE").to_frame())

# %% [markdown]
# ## Capacity: multi-query associative recall
# How many bindings a state holds, measured as the field measures it: multi-query associative recall (MQAR, the
# Zoology form; odebook.data.mqar) on a vocabulary of its own — `mqar_keys` keys and as many values, keys and values
# from disjoint halves, `k` pairs at the start of a sequence, then the same `k` keys as queries at power-law gaps,
# the loss and the accuracy only at the queries. The arms, each `mqar_layers` layers deep at width `mqar_width`:
# - **GDN stacks** with the head counts `mqar_heads`. A layer's state holds width² / heads numbers, so at one width
#   fewer heads is a larger state (the q, k, v, output-gate and output projections do not depend on the head count;
#   the per-head β and decay gates do, width · heads numbers, and fewer heads draw fewer decay rates). The head count
#   also sets each head's key dimension (width / heads: 4 at eight heads, 32 at one), which the keys are normalised
#   over, the read is scaled by (1/√K) and the read-out norm runs over — the state's shape, not only its size — and the
#   initial weights differ (the per-head gates draw first). So the comparison is of two ways to split one width: the
#   state's size and its keys' dimension change together, and the claims say so;
# - beside each, its **no-state control**: the same stack with its state emptied before every write (this study's
#   `no_state`: the same projections, short convolutions, β, read-out norm and output gate, and the same initial
#   weights for a seed), so it differs in one thing, memory across tokens — it sees what its convolutions reach, six
#   tokens back over two layers;
# - the **positive control**: full causal attention (`n_head` heads) behind the same short convolution, which keeps
#   every pair (Zoology: attention solves MQAR at every width it tests).
#
# Every arm of a seed sees the same training stream (k from `mqar_train_ks` in turn), so seeds pair. Every arm's
# learning rate is chosen by the book's one rule: the lowest mean validation loss (every k) over `tuning_seeds` seeds
# past the confirmatory ones, from `mqar_lr_grid`, the grid extended past an edge it chose at most
# `mqar_lr_extensions` times. Accuracy is scored per k on fixed evaluation sets, and at the largest k on held-out
# pairs too (each key bound to the one value training never binds it to).
#
# **Recall is measured on each sequence's first query, as the accuracy binding adds.** Each query's value follows it in
# the input, so later queries can be answered without binding by elimination (the values not yet given; a second reader
# simulated 0.78 / 0.58 / 0.44 / 0.33 for that at k = 2 / 4 / 8 / 16). On the first query nothing has been given away.
# Each scoring sequence is scored twice: as drawn, and *re-bound* — the pairs' values rotated by one pair among the
# pairs' keys, the answer left as first bound (odebook.study.recall). The context holds the same values either way, so
# any model that ignores which value stands beside which key (the most frequent value, elimination, a prior per key, the
# never-bound value) scores exactly the same on both; a model that binds answers the re-bound value and falls.
# **Binding** = first-query accuracy as drawn − re-bound, per seed: 0 for a non-binder; for a perfect binder about 0.94,
# not 1 (values repeat: the re-bound value is the answer for 14 in 225 pairs). The scoring sets are drawn anew for each
# series of seeds (generator `eval_seed` + `seed`), apart from the validation sets and every training stream, 16
# batches per k.
#
# **Every arm must have learned, seed by seed** (a `learned:` gate each, declared before the runs): at the fewest
# pairs, first-query accuracy above the best non-binder (the context's most frequent value other than the one the
# queried key is never bound to) by more than `mqar_margin` — for the GDN stacks and attention; for the no-state
# controls, which can bind only the pairs within their convolutions' reach, accuracy over every query above chance by
# the margin (what a model with no memory beyond that reach can learn). A claim whose arms did not all learn reads
# "not testable at this scale", naming the arm and seeds.
#
# **The restart rule** (declared before the runs; this study's `restarts`): a confirmatory run that fails its arm's
# learned gate read on *validation* sequences — a first-query series of its own, as large as the scoring sets, for the
# stacks that bind; the validation set's every query for the no-state controls — trains again from a fresh
# initialisation on the same seed's stream, at most `mqar_restarts` times, and the last run is kept. A GDN stack and its
# no-state control restart together (a seed, and each restart, gives them the same initial weights). The gates and the
# claims then read the kept runs on the scoring sets, so the primaries are about **runs that learned**: whether a state
# that has learned the task fills up, not how often a stack fails to leave the initial plateau — which the restart table
# below reports as a result of its own (per arm and seed: the restarts taken, and at each try the validation gate and
# the binding at the fewest and the most pairs). A plateau run binds about zero at every k, so keeping it would make the
# smaller state look *full* at sixteen pairs and *empty* at two; replacing it can only raise the smaller state's binding
# at sixteen pairs (against "a larger state binds more") and its binding at two (toward "fills up"): the larger state
# and attention, which pass the same rule and do not fall, show how much of a fall the selection itself makes. An arm
# still failing after its last restart fails its gate, and the claims resting on it read "not testable".
#
# The claims, each a paired difference across seeds that must exceed the margin (kind *exceeds*: held when "no more
# than the margin" is rejected, not held when "at least the margin" is), each beside its **negative control** — the
# same test on the no-state controls, which were trained the same way and differ only in having no state. Each claim
# rests on the learned gates of its arms and of its control's arms (a claim beside a control that did not learn has
# no control). The primaries:
# 1. **the smaller state fills up** — its binding falls from the fewest pairs to the most; control: its no-state
#    stack's fall (a model that sees only six tokens back answers some first queries at few pairs, where a query can
#    stand near its pair, and fewer at many: a fall made by reach, not by a full state, would show there; that the
#    task at many pairs can be done at all, the larger state and attention show). At sixteen pairs the first query
#    also stands further from its pair (about 17 tokens on average, a few at two pairs), so a state that forgets by
#    its decay gate would fall too: the larger state, whose gates decay the same way, and attention bound the
#    distance's share, but no arm scores two pairs at sixteen pairs' distance — a check the book does not yet run;
# 2. **a larger state binds more** — the larger state's binding minus the smaller's at the most pairs, where a state
#    can be full (at the fewest pairs both sit near a binder's ceiling, and an average over k would dilute the
#    difference by design); control: the same difference between the no-state stacks (the head count alone, with no
#    state).
#
# A secondary: **the larger state binds** — its binding at the fewest pairs; control: its no-state stack's (a strategy
# by position within the convolutions' reach that made a non-binder's difference nonzero would show there). Its
# learned gate nearly implies it (at two pairs, first-query accuracy above the best non-binder by the margin leaves a
# binding above about 0.27), so it is not a primary: a second reader's point.
#
# The **positive control**: attention answers the first query above the best non-binder by more than the margin at
# every k — read off the exact 95 % interval of its first-query hits pooled over seeds (at the ceiling every seed
# answers every query, and a test across seeds holds nothing on no spread). Capacity per stack, descriptive: the
# largest tested k up to which the binding stays ≥ 0.5 (about half the pairs bound), with a seed-bootstrap interval
# (this study's capacity); at the largest tested k it is a lower bound.
#
# How this design was chosen, and the runs before it: the appendix at the end.

# %%
V, ks, stage = d.vocab, p.mqar_eval_ks, plan["MQAR"]
score_sets, recall_task, shortcut, rule = d.score_sets, d.task, d.shortcut, d.rule  # the restart rule's check in it
mqar_arms = stage.arms
print(f"MQAR: {V.size} tokens, chance {mqar.chance(V):.3f}; the best non-binder at the first query "
      + ", ".join(f"k={k}: {a:.3f}" for k, a in shortcut.items()))

arms = d.arms  # capacity.Arms: names each comparison once
mqar_claims = capacity.binding_claims(arms)
display(Markdown(declaration(mqar_claims)))
mqar_options = notebook.run_options(p, out, "mqar")
mqar_values = functools.partial(capacity.binding_values, arms, non_binder=shortcut, chance=mqar.chance(V))
mqar_looked, mqar_lr_table, mqar_tuning = study.restarts.tune_then_look(
    mqar_arms, recall_task, stage.config, precision, mqar_claims, mqar_values, rule=rule, lrs=stage.lrs,
    plan=p.seed_plan, alpha=p.alpha, max_extensions=stage.extensions,
    run_only={"keep": False, "log_dir": mqar_options.pop("log_dir")}, **mqar_options)
mqar_runs, mqar_lr = mqar_looked.runs, mqar_lr_table["chosen lr"]
notebook.save_table(mqar_lr_table, out, "mqar_lr_selection")
display(mqar_lr_table.round(4))
print(f"{mqar_looked.seeds} of {p.n_seeds} seeds ran; learning rates tuned on seeds {p.seed_plan.tuning}")
display(rule.table(), Markdown(mqar_looked.markdown()))  # the restarts each arm's seeds took (restarts.py)

# %% [markdown]
# Per arm and k: first-query accuracy (mean over seeds with a t-interval cut to [0, 1]) beside the best non-binder,
# on re-bound sequences, the binding (as drawn − re-bound, with its interval across seeds), and the accuracy over
# every query (where elimination helps a non-binder); the capacity estimate per GDN stack; and the positive control.

# %%
mqar_table = capacity.binding_table(mqar_runs, list(mqar_arms), ks, non_binder=shortcut, chance=mqar.chance(V),
                                    lrs=mqar_lr)
notebook.save_table(mqar_table, out, "mqar_accuracy")
display(mqar_table.round(3))
capacities, by_stack = capacity.capacity_table(mqar_runs, p.mqar_heads, ks, layers=p.mqar_layers, width=p.mqar_width)
notebook.save_table(by_stack, out, "mqar_capacity")
display(by_stack)
positive = capacity.positive_control(mqar_runs, ks, non_binder=shortcut, margin=p.mqar_margin,
                                     queries=recall.SCORING_BATCHES * p.mqar_batch_size)  # first queries per k, seed
display(Markdown(positive.markdown()))
print(*(f"gdn h{h}: {cap}" for h, cap in capacities.items()), sep="\n")

# %%
notebook.save_figure(figures.mqar_capacity(mqar_table, ks, shortcut, mqar.chance(V)), out, "mqar_capacity")

# %% [markdown]
# ## Bindings held by a GDN-only state
# GDN-only stacks (each GDN followed by an MLP) at the sizes `retrieval_sizes`, trained on the retrieval curriculum
# (filler sentences per stage `curriculum`, equal steps per stage, k drawn from `ks` per prompt, facts at random
# positions; each training prompt asks about every bound name in turn and the loss is on the answers only),
# `n_seeds` seeds each. Scored with one question at the last stage's haystack, per k, on the queried fact at a random
# position, near the question ('inside': second to last, another fact after it), first ('far'), and on unseen
# pairs. Beside each size, its no-state control ("… no state": the same stack with its state emptied before every
# write, trained the same way on the same stream), the negative control that shows the verdict below can come out
# "not held": a model with no memory beyond its convolutions' reach, varying from seed to seed like the trained ones.

# %%
retrieval_runs = colours.colour_runs(plan["retrieval"], precision, seeds=p.seed_plan.seeds,
                                     **notebook.run_options(p, out, "retrieval"))
origins = {f"{r.model}_seed{r.seed}": r.origin for r in retrieval_runs}
print("runs:", ", ".join(f"{run} {origin}" for run, origin in origins.items()))
scored = pd.concat([r.scores for r in retrieval_runs])
facts = scored[scored.ablation == "normal"]
by_k = retrieval.across_seeds(facts, ["size", "set", "k"])
notebook.save_table(by_k, out, "retrieval_by_k")
display(by_k.round(3))

# %% [markdown]
# Accuracy by distance from the queried fact to the question (random placement), binned relative to the hybrid's
# window `window`, pooled over k; the interval is across seeds.

# %%
by_distance = retrieval.across_seeds(facts[facts.set == "random"], ["size", "bin"])
notebook.save_table(by_distance, out, "retrieval_by_distance")
display(by_distance.round(3))
display(retrieval.summary(facts, ["size", "set"]).round(3).rename(columns={"example lo": "example-level lo",
                                                                          "example hi": "example-level hi"}))

# %% [markdown]
# ## Language modelling at each size
# Each series trained as language models; for each size the learning rate of `lr_grid` with the lowest validation loss
# on a tuning seed of its own (past the last confirmatory seed) is kept, and every seed runs at it. Perplexity is held
# out (validation split, final evaluation), never training loss; the fit L(N) = a·N^(−α) + c uses non-embedding
# parameters N and the mean over seeds at each size. A profile that lists no `series` runs no ladder: the cpu profile,
# because the source's rule needs at least five sizes each trained on ≥ 20 tokens per parameter — for its largest
# size (d 96 × 2, 376,200 non-embedding parameters) 7.5 M tokens, about 100 minutes a run on 2 cores — and the ladder
# it ran before (four sizes at 0.14–1.8 tokens per parameter) could only read "not testable".

# %%
ladder = scaling.Ladder.empty()  # where this profile lists no series: no runs, no fits, no go/no-go
if p.series:
    print(d.splits.description, f"tokens per size: {p.steps} steps × {p.batch_size} × {p.seq_len}", sep="\n")
    ladder = scaling.run_ladder(p, plan["ladder"], precision, **notebook.run_options(p, out, "lm"))
    notebook.save_table(ladder.lr_choice, out, "lr_choice")
    notebook.save_table(ladder.table, out, "lm_ladder")
    display(ladder.lr_choice.round(4))
    display(ladder.shown().round(4))

# %%
fits = ladder.fits()
go_no_go = scaling.go_no_go_verdicts(fits, ladder, p)  # the source's rule on α, where the ladder can apply it
display(Markdown("\n".join(v.markdown() for v in go_no_go) or "No language-model ladder in this profile (series: [])."))

# %%
fig = figures.capacity_distance_scaling(by_k, by_distance, ladder.table, fits, bins=retrieval.BINS, chance=tasks.CHANCE,
                                      window=p.window, seeds=p.n_seeds)
notebook.save_figure(fig, out, "capacity_distance_scaling")

# %% [markdown]
# ## Verdicts
# The two MQAR primaries settle in looks (each at α / 2; efficacy → held, futility → not held once a
# difference beyond the margin is ruled out, the cap → inconclusive with the seeds it needs); each negative control
# alone at α on every seed that ran; the secondary (the larger state binds) by claims.settle on the same seeds; the
# positive control from its exact pooled intervals. A claim whose negative
# control held is void: it reads "not testable at this scale", its note naming the control (study.looks). The name →
# colour claims form a secondary Holm family on the same claims machinery, margin `mqar_margin`: binding is accuracy
# minus the best shortcut's on the same examples at the most bindings (random placement, and on unseen pairs); their
# negative controls (the same test on the no-state stacks) stand outside every family, alone at α. The go/no-go is the
# source's rule on α, where the ladder can apply it (outside the families).

# %%
retrieval_scale = (f"{tok.name} prompts of {max(p.ks)} bindings + {max(p.curriculum)} filler sentences, "
                   f"{p.retrieval_steps} steps × {p.retrieval_batch_size} prompts, {p.n_seeds} seeds "
                   "(source: one fact per prompt, 100 distractors, 1500 steps)")
colour_claims, colour_values = colours.colour_claims(facts, p.seed_plan.seeds, k=max(p.ks), margin=p.mqar_margin,
                                                     sizes=[scaling.size_name(p, i) for i in p.retrieval_sizes])
colour_settled = void_by_controls(settle(colour_claims, colour_values, alpha=p.alpha))
mqar_scale = (f"MQAR, {p.mqar_keys} keys, k {p.mqar_eval_ks} in {p.mqar_seq_len} tokens, {p.mqar_layers}-layer stacks "
              f"d {p.mqar_width}, heads {p.mqar_heads}, {p.mqar_steps} steps × {p.mqar_batch_size}, "
              f"{mqar_looked.seeds} seeds (Zoology: up to 64 pairs in 256–1024 tokens, widths 64–512)")
verdicts = [capacity.mechanism_verdict(mechanism), *(settled.verdict(mqar_scale) for settled in mqar_looked.settled),
            dataclasses.replace(positive, scale=mqar_scale),
            *(settled.verdict(retrieval_scale) for settled in colour_settled), *go_no_go]
notebook.show_verdicts(verdicts)

# %%
notebook.save_results(
    out,
    headline={**{f"capacity gdn h{h} (largest k binding ≥ 0.5)":
                 f"{c.estimate} [{c.low}, {c.high}]" for h, c in capacities.items()},
              **{f"{arm} first-query acc at k={k} (best non-binder {shortcut[k]:.2f})":
                 mqar_table.loc[(arm, k), "first query"] for arm in ("attention", arms.small, arms.large) for k in ks},
              **{f"{arm} binding at k={k}": mqar_table.loc[(arm, k), "binding"] for arm in (arms.small, arms.large)
                 for k in ks},
              **{f"{s} alpha": fits[s].alpha for s in p.series},
              **{f"{size} acc at k={max(p.ks)} (best shortcut)": f"{r.acc:.2f} ({r['best shortcut']:.2f})"
                 for (size, k), r in by_k.xs("random", level="set").iterrows() if k == max(p.ks)}},
    data=d.splits.description if p.series else "no language-model ladder", precision=str(precision),
    parameters=p.to_dict(), mechanism=mechanism, retrieval_by_k=by_k, by_distance=by_distance,
    lr_choice=ladder.lr_choice, ladder=ladder.table, runs=ladder.records, retrieval_runs=origins, mqar=mqar_table,
    mqar_capacity=by_stack, mqar_non_binder=shortcut, mqar_lr_selection=mqar_lr_table,
    mqar_lr_tuning={n: c.note for n, c in mqar_tuning.items()}, mqar_restarts=rule.log,
    fits={s: dataclasses.asdict(f) for s, f in fits.items()}, verdicts=verdicts)

# %% [markdown]
# ## Appendix: how this design was chosen
# **This design (seeds 600–605, tuning 606–607) is the seventh**, each changed after reading the last one's results;
# every run's seeds were fresh, but the choice among designs is not corrected for — its re-make on another day or
# processor is the check. It is the sixth with the restart rule. In the sixth (seeds 500–505, a Zen 3 AMD EPYC) the
# eight-head stack learned in three of four seeds — first-query accuracy at two pairs minus the best non-binder's
# −0.045, 0.412, 0.104 and 0.416 — so both primaries read "not testable"; one head, attention and the no-state controls
# learned in every seed. A pilot on 2026-11-30 had found about one eight-head seed in four to eight that never leaves
# the initial plateau, whatever the curriculum, steps or schedule. A second reader of the rule, before this run: fresh
# seeds (the sixth's seeds that learned were read already, and would have decided both primaries by having been
# read); the stack and its no-state control restarted together, so a seed still gives them the same weights; the
# claims said to be about runs that learned, with the restarts reported per arm and seed and the larger state's and
# attention's falls beside the smaller state's as the selection's own check; a validation series as large as the
# scoring sets, so a borderline seed does not flip. The budget's estimate does not count restarts.
#
# **The sixth design (seeds 500–505, tuning 506–507).** The fifth (seeds 400–405) compared four heads with one and read
# both primaries "not testable at this scale": the four-head stack had not learned in one seed of four by step 1,600
# (binding ≈ 0), and the three that had held all sixteen pairs (binding 0.92 at two pairs, about 0.88 at sixteen), so no
# state filled up within k ≤ 16 — neither claim could have come out held. At eight heads a head's key has four
# dimensions and its state 4 × 4 numbers (2 × 128 in the stack, against 2 × 1,024 at one head). The pilot that chose it
# (a Zen 3 AMD EPYC, seeds 1200–1203 at 3e-3, 1,600 steps; binding at k = 2 / 16): 0.44 / 0.01, 0.70 / 0.07, 0.87 / 0.18
# and 0.79 / 0.23, with first-query accuracy at two pairs of 0.76, 0.87, 0.97 and 0.94 — every seed above the learned
# gate's 0.67 and every one falling; 2,400 steps raised the first two seeds' binding at two pairs (0.59, 0.70) and left
# sixteen near zero (0.07, 0.09); at 1e-2 the validation loss was higher (1.45 and 1.36 against 1.29 and 1.25) and one
# seed's first-query accuracy 0.69; one head at 1e-2 bound 0.92 at every k in both seeds. The cpu profile also stopped
# running the language-model ladder (its section says why): ten of that run's 78 minutes went to a verdict that could
# only read "not testable".
#
# **The fifth design (seeds 400–405, tuning 406–407).** A review of the fourth (seeds 300–305) found its answers set by
# the design, not by the question: "a larger state binds more" (held, +0.69) compared a d 32 stack that learned with a d
# 16 stack that did not (d 16's first-query accuracy below the best non-binder at every k, binding ≈ 0.02), and width
# changes the whole model, not only the state; "the d 32 state fills up" was partly under-training (800 steps; a quarter
# of the pilot's seeds held most of sixteen pairs); the no-state control was sliding-window attention without the GDN's
# short convolution, so it differed from the GDN stacks in two ways; the control for "fills up" was attention at its
# ceiling, which cannot hold; every arm's rate came from a two-point grid on one tuning seed, flagged untuned; and the
# name → colour claim's control was the trained stack with its state zeroed at test. Hence: the state's size varied by
# the head count at one width (projections of the same shapes); the no-state control built as the GDN stack with its
# state emptied before every write (`no_state`, tested against the delta rule's reference), at each head count, and
# every negative control the same test on those trained stacks; a learned gate for every arm, seed by seed; 1,600 steps;
# the book's one tuning rule on two tuning seeds with the grid extended past an edge; the name → colour control a
# trained no-state stack. The pilot (a Xeon, seeds 1100–1101 at 3e-3, 1,600 steps; binding at k = 2 / 16): one head
# 0.77 / 0.70 and 0.92 / 0.92; four heads 0.92 / 0.59 and 0.92 / 0.80; eight heads 0.92 / 0.63 (seed 1100); the no-state
# stack at four heads 0.01 / −0.01 and −0.01 / 0.00, with accuracy over every query at k = 2 of 0.23 and 0.20 (chance
# 0.06). Every arm learned, and the pilot already shows what the claims test: the four-head state falls by 0.12–0.33
# where the one-head state barely falls, while at two pairs one head binds no better than four. A second reader of this
# design, before its run, found the first claim ("the larger state binds") nearly implied by its learned gate — it is
# now a secondary — and the third diluted by its average over k (at two pairs both states sit near the ceiling) — it is
# now read at the most pairs; and estimated from the pilot's spread that "fills up" needs about 15 seeds at α / 3 (now α
# / 2) and "binds more", whose pilot differences (0.11, 0.12) sit at the margin, far more: at six seeds either may stay
# inconclusive, which the verdicts then say with the seeds they would need.
#
# **The designs before.** The run of 2026-11-27 (seeds 0–3) claimed first-query accuracy above the best
# non-binder; two of its three claims were inconclusive (d 16 seeds at k = 2: 0.86, 0.86, 0.61, 0.57 against a
# non-binder of 0.57 — some seeds bind, some barely). Its re-bound control already measured the binding, which the next
# run (seeds 100–103) claimed at d 16 and d 64, each difference tested against zero: two of its three primaries were
# void, for two reasons. d 16 barely bound at two pairs (0.28 [−0.02, 0.58]) while d 64 held all sixteen, so neither
# size could show a state filling up; and the negative controls held against zero on effects far below the margin that
# the measure itself makes — the no-state control's +0.02 (it sees the pairs next to a query) and attention's fall of
# +0.01 (a perfect binder's ceiling moves with k: 0.947 at two pairs, 0.934 at eight, as value repeats change). Hence
# every claim must exceed the margin. The third and fourth designs used d 16 and d 32, chosen by pilots on seeds
# 1000–1011 (at 3e-3 d 32 bound 0.77–0.95 at two pairs in every seed and 0.12–0.82 at sixteen). The third (seeds
# 200–205) let the grid reach 1e-2, which the tuning seed's validation loss chose for both GDN sizes: two of six d 32
# seeds had not learned the task after 800 steps (validation loss 2.1 and 2.3, the others 0.4–1.5), so the fourth's
# grid stopped at 3e-3 — a cap that was not neutral: d 16 then chose 1e-3 (validation loss 1.827 against 1.904 at
# 3e-3, that report's `mqar_lr_selection`), where it bound about 0.02. The third and fourth runs first computed claims
# 1 and 2 from the d 16 stack's binding under d 32's name (a slip, fixed before their verdicts were kept). A second
# reader found, in an earlier version, two controls that could not fail (the states zeroed leave a function of each
# token alone, whose binding is zero by construction) or failed for a reason other than the one claimed. The book
# trains far less than Zoology (its sequences and steps against Zoology's 100,000 sequences × 64 epochs) and runs no
# Zoology-size point.
