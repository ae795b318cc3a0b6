"""The science code a notebook runs: the static import walk against a made-up package and against Python's own
imports of the real notebooks."""

import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from odebook.book import reports
from odebook.training import checkpoint, code_hash
from odebook.training.fingerprint import run_fingerprint

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.py"))


def _book(tmp_path: Path) -> Path:
    """A package 'odebook' with two science modules (one reached only lazily, one by a relative import), a module no
    notebook imports, and a book module that imports science."""
    files = {
        "odebook/__init__.py": "",
        "odebook/study/__init__.py": "",
        "odebook/study/a.py": "from .b import f\n",
        "odebook/study/b.py": "def f():\n    from odebook.nn import lazy\n",
        "odebook/study/only_two.py": "X = 2\n",
        "odebook/nn/__init__.py": "",
        "odebook/nn/lazy.py": "Y = 1\n",
        "odebook/book/__init__.py": "",
        "odebook/book/machinery.py": "import odebook.study.only_two\n",
        "nb/one.py": "from odebook.study import a\nimport os\n",
        "nb/two.py": "from odebook.book import machinery\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


def test_the_walk_follows_relative_lazy_and_machinery_imports(tmp_path):
    root = _book(tmp_path)
    assert code_hash.modules_of(root, root / "nb/one.py") == {
        "odebook", "odebook.study", "odebook.study.a", "odebook.study.b", "odebook.nn", "odebook.nn.lazy"}
    files = [str(f.relative_to(root)) for f in code_hash.science_files(root, root / "nb/two.py")]
    assert files == ["odebook/study/__init__.py", "odebook/study/only_two.py"]  # book/ itself is not science


def test_a_change_stales_only_the_notebooks_that_import_it(tmp_path):
    root = _book(tmp_path)
    before = {n: code_hash.code_hash(root, root / f"nb/{n}.py") for n in ("one", "two")}
    (root / "odebook/nn/lazy.py").write_text("Y = 2\n")
    after = {n: code_hash.code_hash(root, root / f"nb/{n}.py") for n in ("one", "two")}
    assert after["one"] != before["one"] and after["two"] == before["two"]
    (root / "odebook/book/machinery.py").write_text("import odebook.study.only_two  # mended\n")
    assert code_hash.code_hash(root, root / "nb/two.py") == after["two"]  # machinery: no number changes


def test_odebook_imports_from_a_string_only_a_study_by_its_name():
    """The walk is static; an importlib.import_module would hide a dependency from it. The one such import is
    odebook.studies.load, whose package the walk adds by the notebook's name (the next test)."""
    offenders = [str(f.relative_to(ROOT)) for f in (ROOT / "odebook").rglob("*.py")
                 if "import_module(" in f.read_text() or "__import__(" in f.read_text()]
    assert offenders == ["odebook/studies/__init__.py"]


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_walk_covers_what_python_imports(notebook):
    """Every odebook module Python loads when it runs a notebook's import lines and loads its study's package is in
    the walk's set."""
    source = notebook.read_text()
    lines = [ast.get_source_segment(source, node) for node in ast.parse(source).body
             if isinstance(node, (ast.Import, ast.ImportFrom)) and "odebook" in ast.dump(node)]
    assert lines and f'studies.load("{notebook.stem}")' in source
    program = "\n".join(lines) + f"\nfrom odebook import studies\nstudies.load({notebook.stem!r})" + \
        "\nimport json, sys\nprint(json.dumps(sorted(m for m in sys.modules if m == 'odebook' or " \
        "m.startswith('odebook.'))))"
    loaded = json.loads(subprocess.run([sys.executable, "-c", program], cwd=ROOT, capture_output=True, text=True,
                                       check=True).stdout)
    assert set(loaded) <= code_hash.modules_of(ROOT, notebook)


def test_a_stored_run_and_its_report_follow_one_rule():
    """A study's runs are fingerprinted with the code hash its report is checked against: a change to a module one
    study does not import leaves the other's stored runs and report alike; without a notebook, every science file."""
    for notebook in NOTEBOOKS:
        assert code_hash.study_hash(notebook.stem) == reports.odebook_hash(ROOT, notebook.stem)
    every = sorted(f for part in code_hash.SCIENCE for f in (ROOT / "odebook" / part).rglob("*.py"))
    assert code_hash.study_hash(None) == code_hash.files_hash(ROOT, every) != code_hash.study_hash(NOTEBOOKS[0].stem)
    model = torch.nn.Linear(2, 2)
    first, second = ({"study": n.stem} for n in NOTEBOOKS[:2])
    assert run_fingerprint(model=model, config=1, key=first) == checkpoint.fingerprint(
        key=first, arch=repr(model), train=1, data={}, code=code_hash.study_hash(first["study"]))
    assert run_fingerprint(model=model, config=1, key=first) != run_fingerprint(model=model, config=1, key=second)


def test_an_edit_to_one_studys_package_stales_its_report_only(tmp_path):
    """In a copy of the book whose committed reports all match its code, an edit to study 02's analysis makes 02's
    report stale and leaves the other four up to date (odebook.book.reports, as ``make check-reports`` reads it); an
    edit to a shared floor stales every study that imports it."""
    for part in ("odebook", "notebooks", "params"):
        shutil.copytree(ROOT / part, tmp_path / part, ignore=shutil.ignore_patterns("__pycache__", "*.ipynb"))
    names = [n.stem for n in NOTEBOOKS]
    for name in names:  # a report of each study, made from this copy's code
        (tmp_path / reports.REPORTS / "cpu" / name).mkdir(parents=True)
        manifest = {"hashes": reports.hashes(tmp_path, name, "cpu")}
        (tmp_path / reports.REPORTS / "cpu" / name / "manifest.json").write_text(json.dumps(manifest))
    assert reports.stale(tmp_path, "cpu") == dict.fromkeys(names, [])
    with (tmp_path / "odebook/studies/02_time_indexed/analysis.py").open("a") as f:
        f.write("# an edit\n")
    assert reports.stale(tmp_path, "cpu") == {n: ["odebook"] if n == "02_time_indexed" else [] for n in names}
    claims = tmp_path / "odebook/study/claims.py"
    importers = {n for n in names if claims in code_hash.science_files(tmp_path, tmp_path / "notebooks" / f"{n}.py")}
    with claims.open("a") as f:
        f.write("# an edit\n")
    assert {n for n, parts in reports.stale(tmp_path, "cpu").items() if parts} == importers | {"02_time_indexed"}
    assert len(importers) >= 4  # the studies that declare claims
