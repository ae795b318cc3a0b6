"""The committed reference reports (reports/<profile>/): well-formed, run with the profile's parameters, small, and
summarised in the README; and the machinery that publishes them and says when they are stale."""

import json
import re
import shutil
from pathlib import Path

import nbformat
import pytest

from odebook.book import index, reports
from odebook import studies
from odebook.studies import validate_values
from odebook.study.stats import outcome_word

STUDIES = {name: studies.schema(name) for name in studies.names()}


ROOT = Path(__file__).resolve().parents[2]
COMMITTED = sorted(p for p in (ROOT / reports.REPORTS).glob("*/*") if p.is_dir())
INJECTED = {"output_dir", "checkpoint_dir", "fresh"}  # set by the runner, not by the parameter file
# where a report's runs were executed, not what they computed: a default of these changed since (slurm_gpus_per_job,
# 1 → 0) does not make a report another profile's
WHERE_RUN = {"executor", "executor_folder", "slurm_partition", "slurm_time_min", "slurm_gpus_per_job",
             "slurm_array_parallelism"}
MAX_BYTES = 20 * 2**20


@pytest.mark.parametrize("report", COMMITTED, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_committed_report_is_well_formed_and_ran_with_its_profiles_parameters(report):
    profile, name = report.parent.name, report.name
    manifest = json.loads((report / "manifest.json").read_text())
    assert manifest["status"] == "ok" and manifest["notebook"] == name and manifest["profile"] == profile
    assert set(manifest["hashes"]) - {"files"} == {"notebook", "parameters", "odebook"} and manifest["device"]
    results = json.loads((report / "results.json").read_text())
    assert {"headline", "verdicts", "parameters"} <= set(results)
    for v in results["verdicts"]:
        assert v["claim"] and outcome_word(v["verdict"]) and "evidence" in v and "scale" in v
    nb = nbformat.read(report / f"{name}.ipynb", as_version=4)
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error"]
    assert not errors, f"{report}: a cell raised {errors[0].ename}"
    assert (report / f"{name}.html").is_file()
    figures = list((report / "figures").glob("*.png"))
    assert figures, f"{report}: no figures"
    index = (report.parent / "index.html").read_text(encoding="utf-8")
    for ref in {part.split("'")[0] for part in index.split(f"src='{name}/")[1:]}:
        assert (report / ref).is_file(), f"index.html shows {name}/{ref}, which is not committed"
    expected = validate_values(name, ROOT / "params" / profile / f"{name}.yaml")[0].to_dict()
    # a parameter added since the report ran was run at its default (make check-reports says the report is stale)
    default = STUDIES[name]().to_dict()
    ran = {k: v for k, v in manifest["parameters"].items() if k not in INJECTED | WHERE_RUN}
    later = {k for k in expected.keys() - ran.keys() if expected[k] == default[k]}
    assert ran == {k: v for k, v in expected.items() if k not in INJECTED | WHERE_RUN | later}, \
        f"{report}: not the profile's parameters"
    assert not list(report.rglob("*.pt")) and not (report / "tensorboard").exists()
    assert str(ROOT) not in (report / f"{name}.ipynb").read_text(encoding="utf-8")
    absolute = [v for v in _strings(manifest) + _strings(results) if v.startswith("/")]
    assert not absolute, f"{report}: a folder of the machine that made it: {absolute[:3]}"
    shown = [t for c in nb.cells for o in c.get("outputs", []) for t in (o.get("text", ""), *o.get("data", {}).values())
             if isinstance(t, str)]
    reprs = [m.group(0) for t in shown for m in RAW_REPR.finditer(t)]
    assert not reprs, f"{report}: an object printed as its raw repr, not as the reader's text: {reprs[:3]}"


RAW_REPR = re.compile(r"\b[A-Z][A-Za-z]+\([a-z_]+=")  # Verdict(claim=…, Interval(mean=…: a dataclass's repr


def _strings(record) -> list[str]:
    """Every string in a JSON record, at any depth."""
    if isinstance(record, str):
        return [record]
    values = record.values() if isinstance(record, dict) else record if isinstance(record, list) else []
    return [s for v in values for s in _strings(v)]


def test_committed_reports_cover_the_book_stay_small_and_fill_the_readme_table():
    profiles = {p.parent.name for p in COMMITTED}
    notebooks = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.py"))
    assert "cpu" in profiles
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for profile in profiles:
        committed = sorted(p.name for p in COMMITTED if p.parent.name == profile)
        # the cpu profile is the book's reference and covers it; a GPU profile holds the notebooks a lent GPU ran
        assert committed == notebooks if profile == "cpu" else set(committed) <= set(notebooks), profile
        assert (ROOT / reports.REPORTS / profile / "index.html").is_file()
        start, end = reports.readme_markers(profile)
        table = readme.split(start)[1].split(end)[0].strip()
        again = f"python -m odebook.book.reports readme --profile {profile}"
        assert table == reports.summary_table(ROOT, profile), f"README's {profile} table is out of date: {again}"
        page = (ROOT / reports.REPORTS / profile / reports.PAGE).read_text(encoding="utf-8")
        assert page == reports.page_text(ROOT, profile), f"reports/{profile}/{reports.PAGE} is out of date: {again}"
        # each profile's reports as small as the reference book's: a GPU profile's are a second book, not a bigger one
        size = sum(f.stat().st_size for f in (ROOT / reports.REPORTS / profile).rglob("*") if f.is_file())
        assert size < MAX_BYTES, f"committed {profile} reports take {size / 2**20:.1f} MB (at most 20 MB a profile)"


def _book(tmp_path: Path) -> Path:
    """A repository with one notebook, its cpu parameter file and a finished run of it in outputs/cpu."""
    root = tmp_path / "book"
    (root / "notebooks").mkdir(parents=True)
    (root / "params" / "cpu").mkdir(parents=True)
    (root / "notebooks" / "01_x.py").write_text("# # 01 · x\n#\n# **Question.** Does it hold?\n")
    (root / "params" / "cpu" / "01_x.yaml").write_text("steps: 3\n")
    run = root / "outputs" / "cpu" / "01_x"
    (run / "figures").mkdir(parents=True)
    (run / "checkpoints").mkdir()
    (run / "checkpoints" / "a.done.pt").write_bytes(b"weights")
    (run / "figures" / "f.png").write_bytes(b"png")
    (run / "01_x.ipynb").write_text(json.dumps({"out": f"{root.resolve()}/outputs/cpu/01_x"}))
    (run / "results.json").write_text(json.dumps({"headline": {}, "parameters": {}, "verdicts": [
        {"claim": "it holds", "verdict": "held", "evidence": "mean 1 [0.9, 1.1]; more", "scale": "tiny"}]}))
    (run / "manifest.json").write_text(json.dumps({"notebook": "01_x", "profile": "cpu", "status": "ok", "seconds": 1.0,
                                                   "finished": "2026-01-01T00:00:00+00:00",
                                                   "hashes": reports.hashes(root, "01_x", "cpu")}))
    (root / "outputs" / "cpu" / "index.html").write_text("<html></html>")
    shutil.copytree(run, root / "outputs" / "cpu" / "02_y.failed")
    (root / "README.md").write_text(f"# book\n{reports.README_START}\nold\n{reports.README_END}\nrest\n")
    return root


def test_publish_leaves_out_checkpoints_and_failures_and_writes_relative_paths(tmp_path):
    root = _book(tmp_path)
    dst = reports.publish(root, "cpu")
    assert sorted(p.name for p in dst.iterdir()) == ["01_x", "index.html"]
    assert not (dst / "01_x" / "checkpoints").exists() and (dst / "01_x" / "figures" / "f.png").is_file()
    assert json.loads((dst / "01_x" / "01_x.ipynb").read_text()) == {"out": "reports/cpu/01_x"}
    # README: each study's primary claims (here, with no roles declared, every claim); the page beside the reports:
    # the whole evidence (a verdict may rest on several), linked from there
    summary = "| [01_x](reports/cpu/01_x/01_x.ipynb)<br><sub>measured at tiny</sub> | it holds | **held** |"
    row = "| [01_x](01_x/01_x.ipynb)<br><sub>measured at tiny</sub> | it holds | **held** | " \
        "mean 1 [0.9, 1.1] | <details><summary>statistics</summary>evidence: mean 1 [0.9, 1.1]; more</details> |"
    assert reports.update_readme(root) and summary in (root / "README.md").read_text()
    assert row in (dst / reports.PAGE).read_text() and "mean 1" not in (root / "README.md").read_text()
    assert (root / "README.md").read_text().endswith(f"{reports.README_END}\nrest\n")
    assert not reports.update_readme(root)  # written once: nothing changes on a second call


def test_a_gpu_profiles_table_shows_each_claims_cpu_verdict_beside_its_own(tmp_path):
    """reports/t4 holds what a lent GPU ran: its README table, between its own markers, gives each claim's verdict in
    the committed cpu report beside the t4 one ("—" for a claim the cpu report lacks); the cpu table is untouched."""
    root = _book(tmp_path)
    reports.publish(root, "cpu")
    t4 = root / "outputs" / "t4" / "01_x"
    shutil.copytree(root / "outputs" / "cpu" / "01_x", t4)
    shutil.copy2(root / "outputs" / "cpu" / "index.html", t4.parent / "index.html")
    (t4 / "results.json").write_text(json.dumps({"verdicts": [
        {"claim": "it holds", "verdict": "not held", "evidence": "mean 0 [-0.1, 0.1]", "scale": "large"},
        {"claim": "only at scale", "verdict": "held", "evidence": "mean 2 [1, 3]", "scale": "large"}]}))
    reports.publish(root, "t4")
    start, end = reports.readme_markers("t4")
    readme = root / "README.md"
    readme.write_text(readme.read_text() + f"{start}\n{end}\n")
    cpu_table = readme.read_text().split(reports.README_START)[1]
    assert reports.update_readme(root, "t4")
    table = readme.read_text().split(start)[1].split(end)[0]
    assert "| verdict | cpu verdict |" in table
    assert "| it holds | **not held** | held |" in table and "| only at scale | **held** | — |" in table
    page = (root / reports.REPORTS / "t4" / reports.PAGE).read_text()
    assert "| it holds | **not held** | held | mean 0 [-0.1, 0.1] |" in page
    assert "| only at scale | **held** | — | mean 2 [1, 3] |" in page
    assert readme.read_text().split(reports.README_START)[1].startswith(cpu_table.split(start)[0])


def test_the_table_and_the_front_page_show_a_declared_claims_verdict_kind_and_margin(tmp_path):
    """results.json of the new form (study.claims): the new words with the claim's role, kind and margin; the old
    form (the committed reports) renders as before (test above)."""
    root = _book(tmp_path)
    declared = [{"claim": "time dependence does not help", "verdict": "equivalent", "evidence": "p = 0.017",
                 "scale": "", "kind": "equivalence at ±0.02 nats", "role": "primary, Holm over 2"},
                {"claim": "beats the null", "verdict": "inconclusive — needs ≈ 14 seeds", "evidence": "p = 0.4",
                 "scale": "", "kind": "superiority (a below b), margin 0.01 nats", "role": "primary, Holm over 2"},
                {"claim": "dt scaling helps", "verdict": "not testable at this scale", "evidence": "gate failed",
                 "scale": "", "kind": "superiority (a below b), margin 0.02 nats", "role": "secondary"}]
    results = root / "outputs" / "cpu" / "01_x" / "results.json"
    results.write_text(json.dumps({"headline": {}, "parameters": {}, "verdicts": declared}))
    reports.publish(root, "cpu")
    table = reports.verdict_table(root)
    assert "| time dependence does not help (primary) | **equivalent** | p = 0.017 | <details><summary>statistics" \
        "</summary>test: equivalence at ±0.02 nats<br>family: primary, Holm over 2<br>evidence: p = 0.017" in table
    assert "**inconclusive — needs ≈ 14 seeds** | p = 0.4 | <details><summary>statistics</summary>test: " \
        "superiority (a below b), margin 0.01" in table
    assert "dt scaling helps (secondary) | **not testable at this scale** | gate failed |" in table
    page = index.write_index(root / reports.REPORTS / "cpu", [root / "notebooks" / "01_x.py"], "cpu").read_text()
    assert "#1a7f37'>equivalent</span>" in page and "#8250df'>not testable at this scale</span>" in page
    assert "#6e7781'>inconclusive — needs ≈ 14 seeds</span>" in page
    assert "<b>test</b>: equivalence at ±0.02 nats<br><b>family</b>: primary, Holm over 2<br>" in page


def test_a_report_goes_stale_when_its_notebook_parameters_or_odebook_change_and_checking_writes_nothing(tmp_path,
                                                                                                    capsys):
    """make check-reports says which reports are stale and writes no file: it rewrote the committed front page
    (whose thumbnails it chose by file times, all equal in a fresh clone), and every later run was 'git_dirty'."""
    root = _book(tmp_path)
    reports.publish(root, "cpu")
    assert reports.check(root, "cpu") == {"01_x": []}
    (root / "params" / "cpu" / "01_x.yaml").write_text("steps: 4\n")
    (root / "notebooks" / "01_x.py").write_text("# # 01 · x, changed\n")
    before = {p: p.read_bytes() for p in (root / reports.REPORTS).rglob("*") if p.is_file()}
    assert reports.check(root, "cpu") == {"01_x": ["notebook", "parameters"]}
    assert "cpu/01_x: stale — notebook, parameters changed: notebooks/01_x.py, params/cpu/01_x.yaml" \
        in capsys.readouterr().out  # the files that changed, named
    assert {p: p.read_bytes() for p in (root / reports.REPORTS).rglob("*") if p.is_file()} == before
    manifest = root / reports.REPORTS / "cpu" / "01_x" / "manifest.json"
    manifest.write_text(json.dumps({**json.loads(manifest.read_text()), "hashes": {
        **reports.hashes(root, "01_x", "cpu"), "odebook": "0" * 16}}))
    assert reports.stale(root, "cpu") == {"01_x": ["odebook"]}


@pytest.mark.parametrize("touched, goes_stale", [
    ("odebook/book/runner.py", False), ("odebook/book/index.py", False), ("odebook/book/reports.py", False),
    ("odebook/book/budget.py", False), ("benchmarks/bench.py", False), ("README.md", False),
    ("odebook/studies/03_gdn_scaling/capacity.py", False), ("odebook/study/recall.py", True),
    ("odebook/studies/01_gradient_flow/analysis.py", True),
    ("odebook/nn/gemm.py", True), ("odebook/models/lm.py", True), ("odebook/training/train.py", True),
    ("odebook/data/corpus.py", True), ("odebook/study/stats.py", True), ("odebook/params/schema.py", True)])
def test_reports_go_stale_when_the_science_changes_and_not_the_books_machinery(tmp_path, touched, goes_stale):
    """The reports' hash covers the code a study runs (nn, models, data, training, study, params) — the modules its
    notebook imports, directly or not — not the runner, the front page, the report publisher, the budget, the
    benchmark, README or a module only another study imports: `make check-reports` stays green for those."""
    root = _book(tmp_path)
    for part in ("odebook", "benchmarks"):
        shutil.copytree(ROOT / part, root / part, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "notebooks" / "01_gradient_flow.py", root / "notebooks" / "01_x.py")  # imports as 01 does
    reports.publish(root, "cpu")
    manifest = root / reports.REPORTS / "cpu" / "01_x" / "manifest.json"
    manifest.write_text(json.dumps({**json.loads(manifest.read_text()), "hashes": reports.hashes(root, "01_x", "cpu")}))
    assert reports.stale(root, "cpu") == {"01_x": []}
    path = root / touched
    path.write_text(path.read_text() + "\n# touched\n")
    assert reports.stale(root, "cpu") == {"01_x": ["odebook"] if goes_stale else []}


def test_the_readme_table_marks_a_report_whose_code_changed_since_it_ran(tmp_path):
    """A stale report is said where it is read: its row in README's table, with what changed and how to see the
    files; a current one carries no mark."""
    root = _book(tmp_path)
    reports.publish(root, "cpu")
    assert "stale" not in reports.verdict_table(root)
    (root / "notebooks" / "01_x.py").write_text("# # 01 · x\n#\n# **Question.** Does it hold, now?\n")
    assert "<br><sub>⚠ stale: its notebook changed since it ran (`make check-reports PROFILE=cpu` names the " \
        "files); its numbers are those of the older code</sub> | it holds | **held** |" in reports.verdict_table(root)


def test_a_report_edited_after_its_run_or_with_a_damaged_manifest_is_named_and_kept_out_of_the_tables(tmp_path,
                                                                                                        capsys):
    """publish records each report's results.json and executed notebook as published: a verdict changed by hand
    there is named by check ("edited after its run") and refused by the table generator in one line; a damaged
    manifest is named too, and every other report is still checked."""
    root = _book(tmp_path)
    shutil.copytree(root / "outputs" / "cpu" / "01_x", root / "outputs" / "cpu" / "02_z")
    (root / "notebooks" / "02_z.py").write_text("# # 02 · z\n")
    (root / "params" / "cpu" / "02_z.yaml").write_text("steps: 3\n")
    manifest = root / "outputs" / "cpu" / "02_z" / "manifest.json"
    manifest.write_text(json.dumps({**json.loads(manifest.read_text()), "hashes": reports.hashes(root, "02_z", "cpu")}))
    reports.publish(root, "cpu")
    assert reports.stale(root, "cpu") == {"01_x": [], "02_z": []}
    results = root / reports.REPORTS / "cpu" / "01_x" / "results.json"
    results.write_text(results.read_text().replace('"verdict": "held"', '"verdict": "not held"'))
    assert reports.check(root, "cpu") == {"01_x": [reports.EDITED], "02_z": []}
    assert "cpu/01_x: edited after its run: results.json\ncpu/02_z: up to date" in capsys.readouterr().out
    assert reports.main(["readme", "--root", str(root)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "01_x: edited after its run (results.json)" in err
    (root / reports.REPORTS / "cpu" / "02_z" / "manifest.json").write_text('{"hashes": ')  # truncated
    found = reports.check(root, "cpu")
    assert found["02_z"] == [reports.DAMAGED] and found["01_x"] == [reports.EDITED]
    assert "cpu/02_z: damaged manifest: " in capsys.readouterr().out


@pytest.mark.parametrize("profile", ["../params", "", ".", "cpu/../.."])
def test_a_profile_that_is_a_path_is_refused_in_one_line(tmp_path, capsys, profile):
    root = _book(tmp_path)
    assert reports.main(["check", "--profile", profile, "--root", str(root)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the name of a profile folder" in err


def test_a_report_made_in_another_checkout_carries_no_path_of_that_machine(tmp_path):
    """A re-make from a worktree (/tmp/remake) published from the checkout printed the worktree's absolute paths in
    the committed report (issue 72): publish rewrites those of the checkout the run names as well as its own."""
    root = _book(tmp_path)
    run = root / "outputs" / "cpu" / "01_x"
    elsewhere = "/tmp/remake-elsewhere"
    manifest = json.loads((run / "manifest.json").read_text())
    (run / "manifest.json").write_text(json.dumps({**manifest, "parameter_file": f"{elsewhere}/params/cpu/01_x.yaml"}))
    (run / "01_x.ipynb").write_text(json.dumps({"out": f"outputs: {elsewhere}/outputs/cpu/01_x",
                                                "data": f"{elsewhere}/data/corpus.txt"}))
    dst = reports.publish(root, "cpu")
    assert json.loads((dst / "01_x" / "01_x.ipynb").read_text()) == {"out": "outputs: reports/cpu/01_x",
                                                                      "data": "data/corpus.txt"}
    assert not any(elsewhere in p.read_text() for p in dst.rglob("*") if p.suffix in reports.TEXT_SUFFIXES)


def test_a_data_mirror_outside_the_book_is_named_relative_to_it(tmp_path):
    """ODEBOOK_DATA=../shared/data is recorded as the absolute folder it was resolved to; published, it is relative
    to the book again (issue 72: every committed manifest named the folder of the machine that made it)."""
    root = _book(tmp_path)
    run = root / "outputs" / "cpu" / "01_x"
    mirror = str(tmp_path / "shared" / "data")
    manifest = json.loads((run / "manifest.json").read_text())
    key = {"data": {"source": mirror}}
    (run / "manifest.json").write_text(json.dumps({**manifest, "data": mirror, "run_key": key}))
    dst = reports.publish(root, "cpu")
    published = json.loads((dst / "01_x" / "manifest.json").read_text())
    assert published["data"] == published["run_key"]["data"]["source"] == "../shared/data"


def test_published_results_keep_a_list_of_numbers_on_one_line_and_the_same_values(tmp_path):
    """A run's histories, a number a line as json.dumps(indent=2) writes them, made 01's results.json 9 MB and the
    committed reports pass their 20 MB: published, each list of numbers takes one line; the values are the same."""
    root = _book(tmp_path)
    run = root / "outputs" / "cpu" / "01_x"
    results = json.loads((run / "results.json").read_text())
    results["runs"] = [{"history": {"loss": [2.5, 2.25, None], "scalars": {}}}]
    (run / "results.json").write_text(json.dumps(results, indent=2))
    (run / "progress.log").write_text("hybrid seed 0: step 3/3, 00:01 taken, 00:00 left\n")  # a run by hand in Lab
    published = (reports.publish(root, "cpu") / "01_x" / "results.json").read_text()
    assert json.loads(published) == results and '"loss": [2.5, 2.25, null]' in published
    assert not (root / "reports" / "cpu" / "01_x" / "progress.log").exists()
