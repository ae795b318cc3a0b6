"""Every notebook: paired and in sync, no committed outputs, defaults equal to its schema, and it runs (smoke)."""

import json

import jupytext
import pytest

from odebook import runner
from odebook.params import STUDIES

from conftest import ROOT

BOOK = runner.Book.at(ROOT)
NOTEBOOKS = BOOK.all_notebooks()


def cells(nb):
    return [(c.cell_type, c.source.strip()) for c in nb.cells]


def test_the_book_has_notebooks():
    assert "01_gradient_flow" in NOTEBOOKS


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_py_and_ipynb_are_in_sync_and_the_ipynb_has_no_outputs(name):
    py, ipynb = BOOK.notebooks / f"{name}.py", BOOK.notebooks / f"{name}.ipynb"
    assert ipynb.is_file(), f"{ipynb} missing: run make sync"
    assert cells(jupytext.read(py)) == cells(jupytext.read(ipynb)), f"{name}: .py and .ipynb differ: run make sync"
    raw = json.loads(ipynb.read_text())
    assert all(not c.get("outputs") and not c.get("execution_count") for c in raw["cells"] if c["cell_type"] == "code")


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_parameters_cell_holds_the_schema_defaults(name):
    nb = jupytext.read(BOOK.notebooks / f"{name}.py")
    (cell,) = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    namespace: dict = {}
    exec(cell.source, namespace)
    values = {k: v for k, v in namespace.items() if not k.startswith("__")}
    assert values == STUDIES[name]().to_dict(), "the notebook's parameters cell and odebook.params disagree"


@pytest.mark.parametrize("name", NOTEBOOKS)
@pytest.mark.parametrize("profile", ["smoke", "cpu", "t4"])
def test_every_profile_has_a_parameter_file(name, profile):
    assert (BOOK.params / profile / f"{name}.yaml").is_file()


@pytest.mark.slow
def test_every_notebook_runs_with_the_smoke_profile(tmp_path):
    """The same runner as make run-all, writing to a temporary outputs folder."""
    book = runner.Book(BOOK.notebooks, BOOK.params, tmp_path)
    results = runner.run_book(book, "smoke")
    assert [r.name for r in results] == NOTEBOOKS
    assert all(r.ok for r in results), [r.error for r in results if not r.ok]
    for name in NOTEBOOKS:
        out = tmp_path / "smoke" / name
        results_json = json.loads((out / "results.json").read_text())
        assert results_json["headline"], f"{name} wrote no headline numbers"
        assert list((out / "figures").glob("*.png")), f"{name} saved no figure"
        assert (out / f"{name}.html").stat().st_size > 10_000
    assert (tmp_path / "smoke" / "index.html").is_file()
