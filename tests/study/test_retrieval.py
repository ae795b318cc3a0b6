"""The scoring and ablation rows of the retrieval studies, and the reachability of both verdict branches."""

import numpy as np
import pandas as pd
import pytest
import torch

from odebook.models import lm as models
from odebook.study import retrieval
from odebook.data import tasks
from odebook.data.corpus import ByteTokenizer
from odebook.study.claims import Claim, settle


class Oracle(torch.nn.Module):
    """A model that reads the prompt text and answers the byte of the queried name's colour. With its state zeroed it
    falls back to the most recent colour (``zeroed="recent"``: an answer beyond the window needs the state), keeps
    answering (``"truth"``: the window holds the answer), or keeps answering but for the prompts whose byte sum is
    divisible by ``slip`` (``"slipping"``: zeroing the state costs a few answers, varying from seed to seed)."""

    def __init__(self, zeroed: str, slip: int = 32):
        super().__init__()
        self.zeroed, self.slip = zeroed, slip

    def run(self, x, ablation=models.Ablation()):  # (features, diagnostics) like odebook.models.lm.LM.run
        logits = torch.zeros(*x.shape, 256)
        for i, row in enumerate(x):
            text = bytes(int(t) for t in row if t).decode()
            prompt = text[: text.rindex("?") + 1]
            name = prompt.split("What color does ")[1].split()[0]
            truth = prompt.split(f"{name} has a ")[1].split()[0]
            recent = [c for c in prompt.replace(".", " ").split() if c in tasks.COLORS][-1]
            slipped = self.zeroed == "slipping" and sum(prompt.encode()) % self.slip == 0
            wrong = next(c for c in tasks.COLORS if c != truth)
            color = truth if not ablation.gdn_state else {"recent": recent, "truth": truth}.get(
                self.zeroed, wrong if slipped else truth)
            logits[i, :, ord(color[0])] = 1.0
        return logits, []

    def logits(self, h):  # its features are already logits
        return h


def _rows(model, placement, seeds=(0, 1, 2), n=60):
    """Scored rows of ``model``, each seed on examples of its own (so seeds vary as trained runs do)."""
    return pd.concat([retrieval.score_rows(
        model, {(placement, 2): tasks.make_examples(n, s, k=2, n_filler=4, placement=placement)}, ByteTokenizer(),
        torch.device("cpu"), window=32, ablations=["normal", "state zeroed"], seed=s) for s in seeds])


def test_rows_carry_hits_shortcuts_and_distance_bins():
    rows = _rows(Oracle("recent"), "far", seeds=(0,))
    assert set(rows.ablation) == {"normal", "state zeroed"} and len(rows) == 120
    assert rows[rows.ablation == "normal"].hit.mean() == 1.0
    assert set(rows.bin) <= set(retrieval.BINS) and (rows.bin != "inside").all()
    s = retrieval.summary(rows, ["ablation"])
    assert (s.chance == tasks.CHANCE).all() and (s["best shortcut"] < 1).all()
    # the best shortcut is one rule for all examples: the best column mean, not the best per example
    assert retrieval.best_shortcut(rows) == max(rows[c].mean() for c in retrieval.SHORTCUTS)
    assert s.loc["normal", "example lo"] < 1.0 <= s.loc["normal", "example hi"] + 1e-9


def test_every_branch_of_the_state_verdict_is_reachable():
    """Study 04's Delta claim — normal minus state-zeroed far accuracy per seed beats Delta = 0.15 ("exceeds",
    settled by study.claims) — is held for a model whose answer beyond the window needs its state, and not held for
    one that loses a few answers inside its window, or none: a drop of 0 in every seed rules out a drop of 0.15 (the
    t-test's limit, study.claims), though it could never hold a claim."""
    seeds = range(5)
    claim = Claim("the state carries the answer", "exceeds", margin=0.15, direction="higher", units="accuracy")

    def verdict(model, placement):
        rows = _rows(model, placement, seeds, n=100)
        drop = (retrieval.per_seed(rows, seeds, ablation="normal")
                - retrieval.per_seed(rows, seeds, ablation="state zeroed"))
        [s] = settle([claim], {claim.name: drop})
        return s.outcome, s.tests[0].estimate

    outcome, drop = verdict(Oracle("recent"), "far")
    assert outcome == "held" and drop.mean > 0.5
    outcome, drop = verdict(Oracle("slipping"), "inside")
    assert outcome == "not held" and 0 < drop.mean < 0.15
    outcome, drop = verdict(Oracle("truth"), "inside")
    assert outcome == "not held" and drop.mean == 0


def test_per_seed_follows_the_seed_order_and_the_shortcut():
    rows = pd.DataFrame({"seed": [2, 2, 0, 0], "set": "far", "hit": [1.0, 1.0, 0.0, 1.0],
                         **{c: [0.0, 0.0, 1.0, 0.0] for c in retrieval.SHORTCUTS}})
    assert retrieval.per_seed(rows, [0, 2], set="far").tolist() == [0.5, 1.0]
    assert retrieval.per_seed(rows, [0, 2], set="far", shortcut=True).tolist() == [0.5, 0.0]
    assert np.isnan(retrieval.per_seed(rows, [0, 1], set="far")[1])  # a missing seed is NaN, never dropped


def test_ablations_are_the_package_mapping():
    assert retrieval.ABLATIONS["state zeroed"] == models.Ablation(gdn_state=True, state_read=True)
    assert retrieval.ABLATIONS["both zeroed"] == models.Ablation(gdn_state=True, state_read=True, local=True)
    assert [retrieval.distance_bin(d, 32) for d in (32, 33, 64, 65)] == ["inside", "just beyond", "just beyond",
                                                                       "far beyond"]


def test_across_seeds_gives_a_seed_interval():
    rows = pd.DataFrame({"seed": [0, 0, 1, 1, 2, 2], "hit": [1, 0, 1, 1, 0, 0], "g": "a",
                         **{c: 0.25 for c in retrieval.SHORTCUTS}})
    out = retrieval.across_seeds(rows, ["g"])
    assert out.loc["a", "acc"] == pytest.approx(0.5) and out.loc["a", "seeds"] == 3
    assert out.loc["a", "seed lo"] < 0.5 < out.loc["a", "seed hi"]


def test_the_interval_across_seeds_stays_within_zero_one():
    """Three seeds at accuracies 0, 0.5, 1 (04 printed [-0.616, 1.650] for such seeds): the interval reads [0, 1]."""
    rows = pd.DataFrame({"seed": [0, 0, 1, 1, 2, 2], "hit": [0, 0, 1, 0, 1, 1], "g": "a",
                         **{c: 0.25 for c in retrieval.SHORTCUTS}})
    out = retrieval.across_seeds(rows, ["g"])
    assert (out.loc["a", "seed lo"], out.loc["a", "seed hi"]) == (0.0, 1.0)
