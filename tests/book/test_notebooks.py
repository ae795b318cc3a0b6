"""Every notebook: paired and in sync, no committed outputs, defaults equal to its schema, and it runs (smoke)."""

import dataclasses
import json
import os
import shutil
import subprocess

import jupytext
import pytest

from odebook.book import runner
from odebook.book.profile import MACHINE_SETTINGS
from odebook import studies
from odebook.params.cell import cell_groups

import browser
from conftest import ROOT

STUDIES = {name: studies.schema(name) for name in studies.names()}


BOOK = runner.Book.at(ROOT)
NOTEBOOKS = BOOK.all_notebooks()


def cells(nb):
    return [(c.cell_type, c.source.strip()) for c in nb.cells]


def test_the_book_has_notebooks():
    assert "01_gradient_flow" in NOTEBOOKS


def pairing_problems(py, ipynb) -> list[str]:
    """What keeps ``py`` and ``ipynb`` from being a clean pair, one line each, with the fix."""
    if not ipynb.is_file():
        return [f"{ipynb} is missing: run make sync"]
    a, b = cells(jupytext.read(py)), cells(jupytext.read(ipynb))
    problems = []
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            lx, ly = x[1].splitlines(), y[1].splitlines()
            j = next((k for k, (u, v) in enumerate(zip(lx, ly)) if u != v), min(len(lx), len(ly)))
            problems.append(f"{py.stem}: cell {i} differs between .py and .ipynb at its line {j + 1}: "
                            f"{(lx[j:j + 1] or ['<end>'])[0]!r} vs {(ly[j:j + 1] or ['<end>'])[0]!r}")
            break
    if len(a) != len(b):
        problems.append(f"{py.stem}: {len(a)} cells in the .py, {len(b)} in the .ipynb")
    if problems:
        problems.append("fix: make sync (jupytext keeps the more recently saved file of the pair)")
    raw = json.loads(ipynb.read_text())
    dirty = [i for i, c in enumerate(raw["cells"]) if c["cell_type"] == "code"
             and (c.get("outputs") or c.get("execution_count"))]
    if dirty:
        problems.append(f"{ipynb.name}: cells {dirty} have outputs or execution counts: run make sync (strips them)")
    return problems


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_py_and_ipynb_are_in_sync_and_the_ipynb_has_no_outputs(name):
    problems = pairing_problems(BOOK.notebooks / f"{name}.py", BOOK.notebooks / f"{name}.ipynb")
    assert not problems, "\n".join(problems)


def test_make_sync_pairs_and_strips_outputs_and_counts(tmp_path, root):
    """The state JupyterLab leaves behind (outputs, counts, a cell edited in the .ipynb) is what make sync fixes."""
    name = NOTEBOOKS[0]
    (tmp_path / "notebooks").mkdir()
    py, ipynb = tmp_path / "notebooks" / f"{name}.py", tmp_path / "notebooks" / f"{name}.ipynb"
    shutil.copy(BOOK.notebooks / f"{name}.py", py)
    nb = json.loads((BOOK.notebooks / f"{name}.ipynb").read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    code[1]["execution_count"] = 7
    code[1]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": ["hello\n"]}]
    code[-1]["source"] = ["print('edited in JupyterLab')"]
    ipynb.write_text(json.dumps(nb))
    os.utime(py, (1, 1))  # the .ipynb is the newer file, as after saving in JupyterLab
    problems = pairing_problems(py, ipynb)
    assert any("differs between .py and .ipynb" in p for p in problems) and any("make sync" in p for p in problems)
    assert any("have outputs or execution counts" in p for p in problems)
    done = subprocess.run(["make", "-f", str(root / "Makefile"), "sync", f"VENV={root / '.venv'}"], cwd=tmp_path,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert pairing_problems(py, ipynb) == []
    assert "print('edited in JupyterLab')" in py.read_text()


def parameters_cell(name):
    """The notebook ``name``'s parameters cell (tagged "parameters")."""
    (cell,) = [c for c in jupytext.read(BOOK.notebooks / f"{name}.py").cells
               if "parameters" in c.metadata.get("tags", [])]
    return cell


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_parameters_cell_holds_the_study_settings_and_no_machine_setting(name):
    """The cell assigns every setting of the study, at the schema's default, and none of the machine's
    (``spec(machine=True)``: declared once, set by the profile or -p)."""
    cell = parameters_cell(name)
    namespace: dict = {}
    exec(cell.source, namespace)
    values = {k: v for k, v in namespace.items() if not k.startswith("__")}
    schema = STUDIES[name]
    defaults = schema().to_dict()
    groups = cell_groups(schema)
    grouped = {k for keys in groups.values() for k in keys}
    expected = {k: defaults[k] for k in schema.cell_fields() if k not in grouped}
    expected |= {g: {k: defaults[k] for k in keys} for g, keys in groups.items()}
    assert values == expected, "the parameters cell and odebook.params disagree"
    assert len(cell.source.splitlines()) <= 25, "a parameters cell a reader takes in at a glance"


def test_02s_arms_are_written_once_in_its_arms_module_so_a_new_arm_trains_without_a_notebook_edit():
    """02's ``models`` is left out of its parameters cell: the default is every arm its arms module declares, and a
    profile that names some is applied by papermill and by "Run all" (``ODEBOOK_PROFILE``) as a machine setting is."""
    from odebook.book.profile import outside_cell

    study = studies.load("02_time_indexed")
    namespace: dict = {}
    exec(parameters_cell("02_time_indexed").source, namespace)
    assert "models" not in namespace and study.Params().models == list(study.arms.ARMS)
    assert outside_cell(study.Params) == MACHINE_SETTINGS | {"models"}


def test_the_machine_settings_are_declared_once_and_are_the_same_in_every_study():
    """device, executor, SLURM, checkpoints, outputs: one default for the whole book, whatever the study."""
    machine = {name: {f.name: getattr(schema(), f.name) for f in dataclasses.fields(schema)
                      if f.metadata.get("machine")} for name, schema in STUDIES.items()}
    first = next(iter(machine.values()))
    assert {"device", "executor", "checkpoint_dir", "fresh", "output_dir"} <= set(first) == MACHINE_SETTINGS
    assert all(m == first for m in machine.values()), machine


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_a_notebook_reads_like_a_paper_its_machinery_in_odebook(name):
    """At most 150 non-blank lines of code (comments and the Markdown cells, which jupytext writes as comments, not
    counted): the study's claims, runs, tables and verdicts are its odebook module's; the notebook runs them."""
    code = [line for line in (BOOK.notebooks / f"{name}.py").read_text().splitlines()
            if line.strip() and not line.lstrip().startswith("#")]
    assert len(code) <= 150, f"{name}: {len(code)} lines of code"


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_a_notebook_defines_no_function_its_functions_are_odebooks(name):
    """No ``def``, ``lambda`` or ``class`` in a notebook: a function a study needs is its odebook module's, with a
    docstring and a test, and a Runs cell reads as calls."""
    import ast

    tree = ast.parse((BOOK.notebooks / f"{name}.py").read_text())
    defined = [f"line {n.lineno}: {type(n).__name__}" for n in ast.walk(tree)
               if isinstance(n, (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    assert not defined, f"{name}: {defined}"


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_papermill_reads_every_line_of_the_parameters_cell(name, caplog):
    """``papermill --help-notebook`` lists every parameter (a line it cannot parse is left out, with a warning)."""
    from papermill.translators import PythonTranslator

    cell = parameters_cell(name)
    with caplog.at_level("WARNING", logger="papermill"):
        listed = [p.name for p in PythonTranslator.inspect(cell)]
    warnings = [r.message for r in caplog.records]
    groups = cell_groups(STUDIES[name])
    grouped = {k for keys in groups.values() for k in keys}
    names = [k for k in STUDIES[name].cell_fields() if k not in grouped] + list(groups)
    assert sorted(listed) == sorted(names) and not warnings, warnings


@pytest.mark.parametrize("name", NOTEBOOKS)
@pytest.mark.parametrize("profile", ["smoke", "cpu", "t4"])
def test_every_profile_has_a_parameter_file(name, profile):
    assert (BOOK.params / profile / f"{name}.yaml").is_file()


@pytest.mark.slow
def test_every_notebook_runs_with_the_smoke_profile(smoke_book):
    """The same runner as make run-all: every notebook runs, writes its headline numbers, and every figure it saves
    is shown inline in its report."""
    tmp_path, results = smoke_book.out, smoke_book.results
    assert [r.name for r in results] == NOTEBOOKS
    assert all(r.ok for r in results), [r.error for r in results if not r.ok]
    for name in NOTEBOOKS:
        out = tmp_path / "smoke" / name
        results_json = json.loads((out / "results.json").read_text())
        assert results_json["headline"], f"{name} wrote no headline numbers"
        figures = list((out / "figures").glob("*.png"))
        assert figures, f"{name} saved no figure"
        images = (out / f"{name}.html").read_text(encoding="utf-8").count("<img ")
        # every figure inline, and the key figure once more beside the findings (odebook.book.report_page.lead)
        assert images == len(figures) + 1, f"{name}: {images} images, {len(figures)} figures saved"
        executed = json.loads((out / f"{name}.ipynb").read_text(encoding="utf-8"))
        warnings = [line for cell in executed["cells"] for o in cell.get("outputs", []) if o.get("name") == "stderr"
                    for line in "".join(o.get("text", "")).splitlines() if "Warning" in line]
        assert not warnings, f"{name}: warnings in the published cells: {warnings}"
    assert (tmp_path / "smoke" / "index.html").is_file()


REPORT_LAYOUT = """(() => {
  const findings = [...document.querySelectorAll('h2')].find(h => h.textContent.trim().startsWith('Findings'));
  const cell = document.querySelector('.jp-CodeCell');
  const top = e => e.getBoundingClientRect().top + window.scrollY;
  return {findings: findings ? top(findings) : null, code: top(cell),
          folded: getComputedStyle(cell.querySelector('.jp-Cell-inputWrapper')).display === 'none',
          button: (document.getElementById('odebook-code') || {}).textContent};
})()"""
FRONT_PAGE = """(() => ({text: document.body.innerText, marked: document.querySelectorAll('code, strong, em').length,
                    thumbnails: [...document.querySelectorAll('img')].map(i => i.getBoundingClientRect().width)}))()"""


@pytest.mark.slow
@pytest.mark.skipif(browser.CHROMIUM is None, reason="no Chromium here (CI installs Debian's chromium)")
def test_reports_open_on_their_findings_with_code_folded_and_the_front_page_renders_markdown(smoke_book):
    """What a reader sees in a browser: each report's Findings above its first code cell, its code hidden behind a
    "show code" button; the front page's Markdown rendered (no backticks or asterisks left), thumbnails readable."""
    out = smoke_book.out / "smoke"
    for name in NOTEBOOKS:
        page = browser.evaluate(out / name / f"{name}.html", REPORT_LAYOUT)
        assert page["findings"] is not None and page["findings"] < page["code"], (name, page)
        assert page["folded"] and page["button"] == "show code", (name, page)
    front = browser.evaluate(out / "index.html", FRONT_PAGE)
    assert "`" not in front["text"] and "**" not in front["text"] and front["marked"] > 0, front["text"][:2000]
    assert len(front["thumbnails"]) == len(NOTEBOOKS) and min(front["thumbnails"]) >= 400, front["thumbnails"]


FIRST_SCREEN = """(() => {
  const top = e => e.getBoundingClientRect().top + window.scrollY;
  const findings = [...document.querySelectorAll('h2')].find(h => h.textContent.trim().startsWith('Findings'));
  const figure = findings && findings.parentElement.parentElement.querySelector('img');
  return {findings: findings ? top(findings) : null, figure: figure ? top(figure) : null,
          banner: [...document.querySelectorAll('blockquote')].map(top)[0] ?? null,
          code: top(document.querySelector('.jp-CodeCell'))};
})()"""


@pytest.mark.skipif(browser.CHROMIUM is None, reason="no Chromium here (CI installs Debian's chromium)")
@pytest.mark.parametrize("report", sorted((ROOT / "reports").glob("*/[0-9][0-9]_*/")), ids=lambda p: p.name)
def test_a_committed_report_opens_on_its_banner_findings_and_key_figure_within_the_first_screen(report):
    """Question → result → evidence (issue 72): in a 1400 × 1000 window the profile's banner, then the findings with
    the study's key figure beside them, all above the fold and above the first code cell."""
    page = browser.evaluate(report / f"{report.name}.html", FIRST_SCREEN, size=(1400, 1000))
    assert page["banner"] is not None and page["findings"] is not None and page["figure"] is not None, page
    assert page["banner"] < page["findings"] < page["figure"] < 1000 and page["findings"] < page["code"], page


def test_pre_commit_runs_make_sync_on_notebooks(root):
    import re

    import yaml

    (hook,) = yaml.safe_load((root / ".pre-commit-config.yaml").read_text())["repos"][0]["hooks"]
    assert hook["entry"] == "make sync" and not hook["pass_filenames"]
    assert re.search(hook["files"], "notebooks/01_gradient_flow.ipynb") and re.search(hook["files"], "notebooks/x.py")


@pytest.mark.slow
def test_a_misspelt_papermill_parameter_stops_the_notebook_before_compute(tmp_path):
    """papermill -p with a name the study does not know: papermill only warns, the notebook's start refuses it."""
    import papermill

    name = NOTEBOOKS[0]
    with pytest.raises(papermill.PapermillExecutionError) as info:
        papermill.execute_notebook(jupytext.read(BOOK.notebooks / f"{name}.py"), str(tmp_path / "out.ipynb"),
                                   parameters={"stepz": 3, "output_dir": str(tmp_path)}, kernel_name="python3",
                                   language="python", cwd=str(BOOK.notebooks), progress_bar=False)
    assert info.value.ename == "ParamError"
    assert "unknown key 'stepz' (did you mean 'steps'?)" in info.value.evalue
    assert not list(tmp_path.glob("figures/*")) and not (tmp_path / "results.json").exists()
