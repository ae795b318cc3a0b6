"""The front page and the README's table read as findings: each claim one sentence (claim, verdict, effect with its
interval in the claim's units, n), primary claims first, the statistics one click away, the scale beside the study."""

import html
import json
from pathlib import Path

import numpy as np

from odebook.book import findings, index, reports
from odebook.study.claims import Claim, settle

SCALE = "d 64, 250 steps, 3 seeds (source: d 256)"


def _declared_verdicts() -> list[dict]:
    """results.json verdicts as a notebook on declared claims writes them (Settled.verdict().to_dict())."""
    claims = [Claim("the ODE block beats the null arm", "superiority", 0.02, units="nats"),
              Claim("time dependence does not matter", "equivalence", 0.05, units="nats"),
              Claim("the gate calibrates", "gate", 0.5, direction="higher", units="accuracy"),
              Claim("dt scaling helps", "superiority", 0.02, units="nats", primary=False,
                    parts=("vs tong", "vs standard"))]
    values = {"the ODE block beats the null arm": [-0.30, -0.28, -0.33],
              "time dependence does not matter": [0.004, -0.003, 0.001],
              "the gate calibrates": [0.9, 0.95, 0.85],
              "vs tong": [-0.1, 0.2, 0.05], "vs standard": [-0.2, -0.1, 0.3]}
    secondary = [s.verdict("tiny, zeroed") if s.claim.name == "dt scaling helps" else s.verdict(SCALE)
                 for s in settle(claims, values)]
    return json.loads(json.dumps([v.to_dict() for v in secondary]))  # as read back from results.json


def _book_with(tmp_path: Path, verdicts: list[dict]) -> Path:
    root = tmp_path / "book"
    (root / "notebooks").mkdir(parents=True)
    (root / "notebooks" / "01_x.py").write_text("# # 01 · x\n#\n# **Question.** Does it hold?\n")
    run = root / "outputs" / "cpu" / "01_x"
    run.mkdir(parents=True)
    (run / "results.json").write_text(json.dumps({"headline": {}, "verdicts": verdicts}))
    (root / "params" / "cpu").mkdir(parents=True)
    (root / "params" / "cpu" / "01_x.yaml").write_text("steps: 3\n")
    (run / "manifest.json").write_text(json.dumps({"notebook": "01_x", "profile": "cpu", "status": "ok",
                                                   "seconds": 1.0, "finished": "2026-01-01T00:00:00+00:00",
                                                   "hashes": reports.hashes(root, "01_x", "cpu")}))
    return root


def test_the_front_page_renders_each_declared_claim_as_one_sentence_primaries_first(tmp_path):
    verdicts = _declared_verdicts()
    assert verdicts[0]["units"] == "nats" and verdicts[0]["effects"][0]["n"] == 3
    root = _book_with(tmp_path, verdicts)
    page = index.write_index(root / "outputs" / "cpu", [root / "notebooks" / "01_x.py"], "cpu").read_text()
    mean = np.mean([-0.30, -0.28, -0.33])
    first = findings.sentence(verdicts[0])
    assert first.startswith("the ODE block beats the null arm — held: a − b = ") and first.endswith(" nats, n = 3")
    assert f"a − b = {mean:.3g} [" in first
    for v in verdicts:  # every claim, its verdict and its effect with interval are on the page
        claim, effect = findings.sentence(v).split(" — ", 1)[0], findings.sentence(v).split(": ", 1)[-1]
        assert html.escape(claim) in page and html.escape(effect) in page and f">{v['verdict']}</span>" in page
    assert "vs tong: a − b = 0.05 [" in findings.sentence(verdicts[3]) and "vs standard: a − b = 0 [" in page
    primary, other = page.index("Primary claims"), page.index("Other claims")
    assert primary < page.index("the ODE block beats") < page.index("time dependence") < other < page.index("the gate")
    assert f"measured at {SCALE}" in page and page.count(SCALE) == 1  # the study's scale once, beside the study
    assert "<b>measured at</b>: tiny, zeroed" in page  # a claim measured elsewhere says so in its statistics
    stats = page.split("the ODE block beats the null arm", 1)[1].split("</li>", 1)[0]
    assert "<details><summary>statistics</summary>" in stats and "Holm p = " in stats
    assert "primary, Holm over 2" in stats


def test_an_effect_whose_comparison_names_its_arms_reads_with_them_not_a_and_b():
    named = {"claim": "hybrid non-inferior to the baseline", "verdict": "not held", "units": "nats",
             "effects": [{"comparison": "hybrid − baseline", "mean": 0.7692, "low": 0.3493, "high": 1.189, "n": 9}]}
    assert findings.sentence(named) == ("hybrid non-inferior to the baseline — not held: "
                                        "hybrid − baseline = 0.769 [0.349, 1.19] nats, n = 9")
    both = {**named, "effects": [{"comparison": "ti_mlp − standard", "mean": -0.0468, "low": -0.058, "high": -0.036,
                                  "n": 12}, {"comparison": "ti_mlp − tong", "mean": 0.0037, "low": -0.0084,
                                             "high": 0.0159, "n": 12}]}
    assert findings.sentence(both).endswith(": ti_mlp − standard = -0.0468 [-0.058, -0.036] nats; "
                                            "ti_mlp − tong = 0.0037 [-0.0084, 0.0159] nats, n = 12")


def test_an_old_form_verdict_reads_its_effect_from_its_evidence(tmp_path):
    old = [{"claim": "within 10% of the baseline", "verdict": "held", "scale": SCALE,
            "evidence": "mean log(a/b) = -0.004095 [-0.01888, 0.01069] (n = 3) vs +0.09531, paired t = -28.9"},
           {"claim": "fewer parameters", "verdict": "not held", "evidence": "299,904 / 1,673,088 = 0.18×", "scale": ""},
           {"claim": "beats the null", "verdict": "inconclusive", "scale": SCALE,
            "evidence": "mean a − b = 0.002578 [-0.0851, 0.09025] (n = 3) vs +0, p = 0.911, Holm p = 1"}]
    assert findings.sentence(old[0]) == "within 10% of the baseline — held: a/b = 0.996 [0.981, 1.01]×, n = 3"
    assert findings.sentence(old[1]) == "fewer parameters — not held: 299,904 / 1,673,088 = 0.18×"
    assert findings.sentence(old[2]) == "beats the null — inconclusive: a − b = 0.00258 [-0.0851, 0.0902], n = 3"
    root = _book_with(tmp_path, old)
    page = index.write_index(root / "outputs" / "cpu", [root / "notebooks" / "01_x.py"], "cpu").read_text()
    assert "Primary claims" not in page and page.index("within 10%") < page.index("fewer") < page.index("beats the")
    assert "a/b = 0.996 [0.981, 1.01]×, n = 3" in page and "paired t = -28.9" in page


def test_the_verdict_page_has_one_row_per_claim_primaries_first_and_the_readme_the_primaries(tmp_path):
    verdicts = _declared_verdicts()
    root = _book_with(tmp_path, verdicts[::-1])  # declared out of order: the table still leads with the primaries
    (root / "outputs" / "cpu" / "index.html").write_text("<html></html>")
    reports.publish(root, "cpu")
    rows = reports.verdict_table(root).splitlines()[2:]
    assert [r.split(" | ")[1] for r in rows] == [
        "time dependence does not matter (primary)", "the ODE block beats the null arm (primary)",
        "dt scaling helps (secondary)", "the gate calibrates (gate)"]
    assert rows[0].startswith(f"| [01_x](01_x/01_x.ipynb)<br><sub>measured at {SCALE}</sub> |")  # from reports/cpu
    assert all(r.startswith("|  | ") for r in rows[1:])  # the study named once
    assert "| **held** | a − b = " in rows[1] and " nats, n = 3 | <details><summary>statistics</summary>" in rows[1]
    short = reports.summary_table(root).splitlines()[2:]
    assert [r.split(" | ")[1] for r in short] == ["time dependence does not matter", "the ODE block beats the null arm"]
    assert short[0].startswith(f"| [01_x](reports/cpu/01_x/01_x.ipynb)<br><sub>measured at {SCALE}</sub> |")


def test_a_study_measured_at_several_scales_says_so_and_each_claim_names_its_own():
    verdicts = [{"claim": f"claim {i}", "verdict": "held", "evidence": "", "scale": scale}
                for i, scale in enumerate(["d32", "d32", "d64", "d64", "ladder"])]
    assert findings.study_scale(verdicts) == findings.SEVERAL
    assert ("measured at", "d64") in findings.statistics(verdicts[2], findings.SEVERAL)
    assert findings.study_scale(verdicts[:3]) == "d32" and findings.statistics(verdicts[0], "d32") == []


def test_the_verdicts_shown_name_a_negative_control_that_held(capsys):
    from odebook.book.notebook import show_verdicts
    from odebook.study.stats import Verdict

    quiet = [Verdict("hybrid beats null", "held"), Verdict("negative control: flow off beats null", "not held")]
    show_verdicts(quiet)
    assert "NEGATIVE CONTROL" not in capsys.readouterr().out
    show_verdicts([*quiet, Verdict("negative control: flow off non-inferior", "held")])
    out = capsys.readouterr().out
    assert "A NEGATIVE CONTROL HELD" in out and "flow off non-inferior" in out and "flow off beats null" not in out


def test_a_table_in_the_results_is_its_rows_with_a_named_index_as_a_field():
    import pandas as pd

    from odebook.book.notebook import to_jsonable

    named = pd.DataFrame({"loss": [2.0, float("nan")]}, index=pd.Index(["a", "b"], name="model"))
    assert to_jsonable(named) == [{"model": "a", "loss": 2.0}, {"model": "b", "loss": None}]
    assert to_jsonable(named.reset_index()) == to_jsonable(named)  # an unnamed index is left out, not made a field
    assert to_jsonable({"t": pd.DataFrame()}) == {"t": []}
