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
# learned fluent text but ignored its GDN state (Delta ≈ 0 when the state was zeroed) until its local attention path
# was stochastically dropped and it was trained on retrieval; mixed language-model + retrieval training reached
# "PPL 2.2, Delta +88". Its perplexity came from training loss and its retrieval test used the training template.
#
# **This rerun.** The SWA layer reads the last GDN layer's state with queries made by *that layer's* key projection
# and mixes the read-out into its local attention through a learned gate. Every run has the same step budget. We
# cross three bottlenecks of the local path (static scale 0.3, static 0.1, stochastic drop 0.7) with three training
# regimes (TinyStories language modelling; the retrieval curriculum; mixed, 0.5·LM + 0.5·retrieval per step with
# the haystack growing over training). Perplexity is held out (validation stories, never training loss); retrieval
# is scored on the fixed-position task, the random-position task (by position) and unseen name/object/colour
# combinations, normal and with every GDN state zeroed, with Wilson intervals and a paired interval on Delta.
#
# **Targets and claims (the source's).** PPL ≤ `ppl_target`, Delta ≥ `delta_target`; "stochastic local drop is
# essential"; "the task matters more than the bottleneck"; "mixed training gives both fluency and state dependence".

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
# The source's configuration (the t4 profile). params/<profile>/04_mixed_training.yaml overrides these.
seed = 0
n_seeds = 1
device = "auto"
output_dir = ""
corpus = "tinystories"
tokenizer = "gpt2"
pattern = "GGGGGS"
d_model = 256
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
bottlenecks = ["static_0.3", "static_0.1", "drop_0.7"]
regimes = ["lm", "niah", "mixed"]
max_train_stories = 50000
curriculum = [0, 10, 30, 50, 100]
niah_eval_examples = 500
eval_seed = 10000
ppl_target = 5.0
delta_target = 0.15
n_samples = 3
sample_tokens = 120

# %%
import math

import numpy as np
import pandas as pd
import torch
from IPython.display import Markdown, display
from matplotlib.patches import Patch

from odebook import data, notebook, plots, tasks
from odebook.models import gdn_diagnostics, generate, lm_loss, param_groups, pattern_lm, state_ablation
from odebook.params import MixedTrainingParams
from odebook.runtime import seed_everything
from odebook.stats import Verdict, paired_difference
from odebook.train import TrainConfig, evaluate, train

p, out, precision = notebook.start(MixedTrainingParams, globals())
tok = data.get_tokenizer(p.tokenizer)

# %% [markdown]
# ## Data

# %%
stories = data.load_tinystories(p.max_train_stories)
print(stories.description, f"Tokenizer: {tok.name}.", sep="\n")
train_docs = [torch.tensor(tok.encode(s)) for s in stories.train]
valid_batches = data.fixed_document_batches([torch.tensor(tok.encode(s)) for s in stories.valid], p.eval_batches,
                                            p.batch_size, p.seq_len)
stages = tasks.equal_stages(p.curriculum, p.steps)
eval_sets = tasks.evaluation_sets(p.niah_eval_examples, p.eval_seed, max(p.curriculum))

# %% [markdown]
# ## Runs
# One model per bottleneck × regime × seed, the same step budget each. Held-out loss during training is measured on
# the validation stories in every regime.

# %%
def bottleneck(name):
    kind, value = name.split("_") if name != "none" else ("static", "1.0")
    return {"local_scale": float(value), "local_drop_prob": 0.0} if kind == "static" else \
        {"local_scale": 1.0, "local_drop_prob": float(value)}


def batches(regime, seed):
    lm = data.document_batches(train_docs, p.batch_size, p.seq_len, seed)
    niah = tasks.curriculum_batches(tok, p.batch_size, seed, stages)
    return {"lm": lm, "niah": niah, "mixed": zip(lm, niah)}[regime]


def mixed_loss(model, batch):
    lm_batch, niah_batch = batch
    return 0.5 * lm_loss(model, lm_batch) + 0.5 * lm_loss(model, niah_batch)


rows, position_rows, models_by_run = [], [], {}
for seed in range(p.seed, p.seed + p.n_seeds):
    for bn in p.bottlenecks:
        for regime in p.regimes:
            seed_everything(seed)
            model = pattern_lm(p.pattern, vocab_size=tok.vocab_size, d_model=p.d_model, n_head=p.n_head,
                               max_seq_len=p.max_seq_len, window=p.window, state_read=True, **bottleneck(bn))
            hist = train(model, iter(batches(regime, seed)), valid_batches, TrainConfig.from_params(p), precision,
                         groups=param_groups(model), desc=f"{bn} · {regime} · seed {seed}",
                         loss_fn=mixed_loss if regime == "mixed" else lm_loss, eval_loss_fn=lm_loss,
                         log_dir=notebook.tensorboard_dir(out, p, f"{bn}_{regime}_seed{seed}"))
            ppl = math.exp(evaluate(model, valid_batches, precision))
            scores = {name: tasks.score(model, exs, tok, precision.device) for name, exs in eval_sets.items()}
            with state_ablation(model):
                zeroed = {name: tasks.score(model, exs, tok, precision.device) for name, exs in eval_sets.items()}
            model(tasks.batch(eval_sets["fixed"][:8], tok)[0].to(precision.device))  # diagnostics on retrieval input
            normal, z = scores["fixed"], zeroed["fixed"]
            delta = paired_difference(normal.hits, z.hits)
            rows.append({"configuration": bn, "training": regime, "seed": seed, "PPL": ppl,
                         "normal": normal.acc1, "normal lo": normal.interval(normal.top1)[0],
                         "normal hi": normal.interval(normal.top1)[1], "zeroed": z.acc1,
                         "zeroed lo": z.interval(z.top1)[0], "zeroed hi": z.interval(z.top1)[1],
                         "Delta": delta.mean, "Delta lo": delta.low, "Delta hi": delta.high,
                         "unseen": scores["unseen combinations"].acc1,
                         "unseen zeroed": zeroed["unseen combinations"].acc1,
                         "random position": scores["random position"].acc1,
                         **{f"L{i} {k}": v for i, d in enumerate(gdn_diagnostics(model)) for k, v in d.items()}})
            position_rows += [{"configuration": bn, "training": regime, "position": tasks.third(ex), "hit": hit}
                              for ex, hit in zip(eval_sets["random position"], scores["random position"].hits)]
            models_by_run[(bn, regime, seed)] = (model, normal.hits, z.hits)

# %% [markdown]
# ## Results
# In the source's form: configuration, training, held-out PPL, accuracy normal / state zeroed, and Delta (all
# accuracies top-1 on the fixed-position task at the longest haystack; intervals: Wilson for accuracies, paired
# bootstrap for Delta).

# %%
table = pd.DataFrame(rows)
notebook.save_table(table.set_index(["configuration", "training", "seed"]), out, "ablation")
display(table.set_index(["configuration", "training", "seed"]).iloc[:, :13].round(3))
positions = pd.DataFrame(position_rows).groupby(["configuration", "training", "position"]).hit.mean().unstack()
display(positions[[c for c in ("early", "middle", "late") if c in positions]].round(3))

# %%
fig, (ax_d, ax_p) = plots.figure(2)
mean = table.groupby(["configuration", "training"], sort=False).mean(numeric_only=True)
x = np.arange(len(mean))
ax_d.bar(x, mean.Delta, yerr=[mean.Delta - mean["Delta lo"], mean["Delta hi"] - mean.Delta], capsize=3,
         color=[f"C{p.regimes.index(r)}" for _, r in mean.index])
ax_d.axhline(p.delta_target, color="k", linestyle=":", label=f"target {p.delta_target:.2f}")
ax_d.set(xticks=x, ylabel="Delta = normal − zeroed", title="state dependence (fixed position)")
ax_d.set_xticklabels([f"{c}\n{r}" for c, r in mean.index], fontsize=7)
ax_p.bar(x, mean.PPL, color=[f"C{p.regimes.index(r)}" for _, r in mean.index])
ax_p.axhline(p.ppl_target, color="k", linestyle=":", label=f"target {p.ppl_target}")
ax_p.set(xticks=x, ylabel="held-out perplexity", title="fluency (validation stories)", yscale="log")
ax_p.set_xticklabels([f"{c}\n{r}" for c, r in mean.index], fontsize=7)
regime_patches = [Patch(color=f"C{i}", label=f"trained on {r}") for i, r in enumerate(p.regimes)]
ax_p.legend(handles=[*regime_patches, *ax_p.get_legend_handles_labels()[0]], fontsize=8)
ax_d.legend(handles=[*regime_patches, *ax_d.get_legend_handles_labels()[0]], fontsize=8)
fig.tight_layout()
notebook.save_figure(fig, out, "delta_and_ppl")

# %% [markdown]
# ## Verdicts

# %%
def delta_hits(bn, regime):
    _, normal, zeroed = models_by_run[(bn, regime, p.seed)]
    return np.asarray(normal, float) - np.asarray(zeroed, float)


def drop_essential():
    """Under each regime, drop_0.7's Delta against each static bottleneck's (paired over the same examples)."""
    if "drop_0.7" not in p.bottlenecks or len(p.bottlenecks) < 2:
        return "not run", "needs drop_0.7 and a static bottleneck"
    evidence, outcomes = [], []
    for regime in p.regimes:
        for other in (b for b in p.bottlenecks if b != "drop_0.7"):
            d = paired_difference(delta_hits("drop_0.7", regime), delta_hits(other, regime))
            outcomes.append("held" if d.low > 0 else "not held" if d.high < 0 else "inconclusive")
            evidence.append(f"{regime}: drop − {other} = {d.mean:+.3f} [{d.low:+.3f}, {d.high:+.3f}]")
    verdict = "held" if all(o == "held" for o in outcomes) else "not held" if "not held" in outcomes else \
        "inconclusive"
    return verdict, "; ".join(evidence)


def spread(held_fixed):
    """Mean, over the values of ``held_fixed``, of the range of Delta across the other factor."""
    return mean.Delta.groupby(level=held_fixed).agg(lambda s: s.max() - s.min()).mean()


task_spread, bottleneck_spread = spread("configuration"), spread("training")
best = mean.loc[[i for i in mean.index if i[1] == "mixed"]] if "mixed" in p.regimes else mean.iloc[:0]
mixed_ok = [(c, r) for (c, r), row in best.iterrows() if row.PPL <= p.ppl_target and row["Delta lo"] >= p.delta_target]
verdicts = {
    "stochastic local drop is essential": drop_essential(),
    "the task matters more than the bottleneck": (
        "held" if task_spread > bottleneck_spread else "not held",
        f"mean range of Delta across regimes {task_spread:.3f} vs across bottlenecks {bottleneck_spread:.3f} "
        "(descriptive, no test)"),
    "mixed training gives both fluency and state dependence": (
        "held" if mixed_ok else "not held" if len(best) else "not run",
        f"mixed runs meeting PPL ≤ {p.ppl_target} and Delta ≥ {p.delta_target} (lower bound): "
        + (", ".join(c for c, _ in mixed_ok) or "none")),
}
display(Markdown("\n".join(f"- **{claim}**: {v} ({e})" for claim, (v, e) in verdicts.items())))

# %% [markdown]
# ## Samples from the mixed model
# Continuations of a story opening by the mixed-regime model with stochastic local drop (temperature 0.8, top-k 40).

# %%
key = ("drop_0.7", "mixed", p.seed)
samples = []
if key in models_by_run and p.n_samples:
    start = torch.tensor([tok.encode("Once upon a time")] * p.n_samples, device=precision.device)
    gen = torch.Generator(device=precision.device.type).manual_seed(p.seed)
    ids = generate(models_by_run[key][0], start, p.sample_tokens, temperature=0.8, top_k=40, generator=gen)
    samples = [tok.decode(row.tolist()) for row in ids.cpu()]
    display(Markdown("\n\n".join(f"> {s}" for s in samples)))

# %%
notebook.save_results(
    out,
    headline={**{f"{c} · {r}: PPL / Delta": f"{row.PPL:.2f} / {row.Delta:+.2f}" for (c, r), row in mean.iterrows()}},
    data=stories.description, precision=str(precision), parameters=p.to_dict(), table=table.to_dict("records"),
    positions=positions.reset_index().to_dict("records"),
    verdicts=[Verdict(k, v, e) for k, (v, e) in verdicts.items()], samples=samples)
