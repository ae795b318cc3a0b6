"""The scoring and ablation rows of the retrieval studies, and the reachability of both verdict branches."""

import pandas as pd
import pytest
import torch

from odebook import models, retrieval, tasks
from odebook.data import ByteTokenizer
from odebook.stats import decide


class Oracle(torch.nn.Module):
    """A model that answers the byte of ``color_of(name)`` when its state is read, and the most recent colour (a
    local shortcut) when the state is zeroed: reads the prompt text to do so."""

    def __init__(self, answer_local: bool):
        super().__init__()
        self.answer_local = answer_local

    def forward(self, x, ablation=models.Ablation()):
        logits = torch.zeros(*x.shape, 256)
        for i, row in enumerate(x):
            text = bytes(int(t) for t in row if t).decode()
            prompt = text[: text.rindex("?") + 1]
            name = prompt.split("What color does ")[1].split()[0]
            truth = prompt.split(f"{name} has a ")[1].split()[0]
            recent = [c for c in prompt.replace(".", " ").split() if c in tasks.COLORS][-1]
            color = recent if ablation.gdn_state and not self.answer_local else truth
            logits[i, :, ord(color[0])] = 1.0
        return logits


def _rows(model, placement, seeds=(0, 1, 2)):
    """Scored rows of ``model``, each seed on examples of its own (so seeds vary as trained runs do)."""
    return pd.concat([retrieval.score_rows(
        model, {(placement, 2): tasks.make_examples(60, s, k=2, n_filler=4, placement=placement)}, ByteTokenizer(),
        torch.device("cpu"), window=32, ablations=["normal", "state zeroed"], seed=s) for s in seeds])


def test_rows_carry_hits_shortcuts_and_distance_bins():
    rows = _rows(Oracle(answer_local=False), "far", seeds=(0,))
    assert set(rows.ablation) == {"normal", "state zeroed"} and len(rows) == 120
    assert rows[rows.ablation == "normal"].hit.mean() == 1.0
    assert set(rows.bin) <= set(retrieval.BINS) and (rows.bin != "inside").all()
    s = retrieval.summary(rows, ["ablation"])
    assert (s.chance == tasks.CHANCE).all() and (s["best shortcut"] < 1).all()
    # the best shortcut is one rule for all examples: the best column mean, not the best per example
    assert retrieval.best_shortcut(rows) == max(rows[c].mean() for c in retrieval.SHORTCUTS)
    assert s.loc["normal", "example lo"] < 1.0 <= s.loc["normal", "example hi"] + 1e-9


def test_both_branches_of_the_state_verdict_are_reachable():
    # a model whose answer beyond the window needs the state (zeroed, it falls back to the most recent colour): held
    drop = retrieval.ablation_drop(_rows(Oracle(answer_local=False), "far"), "state zeroed")
    assert drop.mean > 0.3 and decide(drop, 0.0, claim="above") == "held"
    # a model that answers from its window whatever the state: the drop is 0 in every seed — never 'held'
    drop = retrieval.ablation_drop(_rows(Oracle(answer_local=True), "inside"), "state zeroed")
    assert drop.mean == 0 and decide(drop, 0.0, claim="above") == "inconclusive"
    # and a state whose removal helps: 'not held'
    rows = _rows(Oracle(answer_local=False), "far")
    swapped = rows.assign(ablation=rows.ablation.map({"normal": "state zeroed", "state zeroed": "normal"}))
    assert decide(retrieval.ablation_drop(swapped, "state zeroed"), 0.0, claim="above") == "not held"


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
