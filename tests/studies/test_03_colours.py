"""Study 03's name-colour claims on synthetic scores."""

import numpy as np

from odebook import studies

colours = studies.load("03_gdn_scaling").colours


def test_colour_claims_put_each_sizes_binding_beside_its_trained_no_state_control():
    import pandas as pd

    from odebook.study.retrieval import SHORTCUTS

    def rows(size, set_, seed, hit):
        return [{"size": size, "set": set_, "k": 4, "seed": seed, "hit": h, **dict.fromkeys(SHORTCUTS, 0.25)}
                for h in [1.0] * round(10 * hit) + [0.0] * (10 - round(10 * hit))]

    facts = pd.DataFrame([r for s in (0, 1) for set_ in ("random", "unseen pairs") for r in rows("d8", set_, s, 0.8)]
                         + [r for s in (0, 1) for r in rows("d8" + colours.NO_STATE, "random", s, 0.2 + 0.1 * s)])
    claims, values = colours.colour_claims(facts, [0, 1], sizes=["d8"], k=4, margin=0.1)
    assert [c.primary for c in claims] == [False] * 3 and claims[1].controls == claims[0].name
    assert claims[2].name == ("the d8 GDN state binds 4 held-out pairs (never bound in training) beyond the best "
                              "shortcut")
    assert np.allclose(values["d8, random: accuracy − shortcut"], [0.55, 0.55])
    assert claims[1].comparisons == ("d8 no state, random: accuracy − shortcut",)
    assert np.allclose(values["d8 no state, random: accuracy − shortcut"], [-0.05, 0.05])
