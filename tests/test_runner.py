"""The runner on two tiny notebooks: one that works and one that raises."""

import dataclasses
import json
from pathlib import Path

import pytest

from odebook import params as params_mod
from odebook import runner
from odebook.params import Params, spec

OK = '''# %% tags=["parameters"]
output_dir = ""
value = 1

# %%
import json, pathlib
pathlib.Path(output_dir, "results.json").write_text(json.dumps({"headline": {"value": value}}))
print("computed", value)
'''
FAIL = OK + '\n# %%\nraise RuntimeError("boom from the notebook")\n'


@dataclasses.dataclass
class OkParams(Params):
    study = "90_ok"
    value: int = spec(1, ge=0)


@dataclasses.dataclass
class FailParams(OkParams):
    study = "91_fail"


@pytest.fixture
def book(tmp_path, monkeypatch) -> runner.Book:
    monkeypatch.setitem(params_mod.STUDIES, "90_ok", OkParams)
    monkeypatch.setitem(params_mod.STUDIES, "91_fail", FailParams)
    b = runner.Book(tmp_path / "notebooks", tmp_path / "params", tmp_path / "outputs")
    b.notebooks.mkdir()
    (b.params / "smoke").mkdir(parents=True)
    (b.notebooks / "90_ok.py").write_text(OK)
    (b.notebooks / "91_fail.py").write_text(FAIL)
    (b.params / "smoke" / "90_ok.yaml").write_text("value: 7\n")
    (b.params / "smoke" / "91_fail.yaml").write_text("")
    return b


def test_a_failing_notebook_does_not_stop_the_others_and_is_rendered(book):
    results = runner.run_book(book, "smoke")
    assert [(r.name, r.ok) for r in results] == [("90_ok", True), ("91_fail", False)]
    ok, failed = book.outputs / "smoke" / "90_ok", book.outputs / "smoke" / "91_fail.failed"
    assert {p.name for p in ok.iterdir()} >= {"90_ok.ipynb", "90_ok.html", "manifest.json", "results.json"}
    assert json.loads((ok / "results.json").read_text()) == {"headline": {"value": 7}}  # the YAML value was used
    manifest = json.loads((ok / "manifest.json").read_text())
    assert manifest["status"] == "ok" and manifest["parameters"]["value"] == 7
    assert {"git_commit", "packages", "device", "started", "finished"} <= set(manifest)
    assert "boom from the notebook" in (failed / "91_fail.html").read_text()
    assert json.loads((failed / "manifest.json").read_text())["status"] == "failed"
    index = (book.outputs / "smoke" / "index.html").read_text()
    assert "90_ok/90_ok.html" in index and "91_fail.failed/91_fail.html" in index and "value: 7" in index
    assert not list((book.outputs / "smoke").glob(".*"))  # no staging folders left behind


def test_a_failed_rerun_keeps_the_last_successful_outputs(book):
    runner.run_book(book, "smoke", ["90_ok"])
    (book.notebooks / "90_ok.py").write_text(FAIL)
    assert runner.main(["--root", str(book.notebooks.parent), "--profile", "smoke", "90_ok"]) == 1
    out = book.outputs / "smoke"
    assert json.loads((out / "90_ok" / "results.json").read_text()) == {"headline": {"value": 7}}
    assert (out / "90_ok.failed" / "90_ok.html").is_file()
    assert "last success" in (out / "index.html").read_text()
    (book.notebooks / "90_ok.py").write_text(OK)  # a later success clears the failure
    runner.run_book(book, "smoke", ["90_ok"])
    assert not (out / "90_ok.failed").exists()


def test_invalid_parameters_stop_everything_before_any_compute(book, capsys):
    (book.params / "smoke" / "91_fail.yaml").write_text("value: -1\nvalu: 2\n")
    code = runner.main(["--root", str(book.notebooks.parent), "--profile", "smoke"])
    err = capsys.readouterr().err
    assert code == 2
    assert "91_fail.yaml" in err and "key 'value' = -1: must be >= 0" in err and "unknown key 'valu'" in err
    assert not book.outputs.exists()  # nothing ran, not even the valid notebook


def test_unknown_notebook_and_missing_parameter_file_are_reported(book, capsys):
    assert runner.main(["--root", str(book.notebooks.parent), "--profile", "smoke", "99_nope"]) == 2
    assert "no such notebook" in capsys.readouterr().err
    assert runner.main(["--root", str(book.notebooks.parent), "--profile", "cpu", "90_ok"]) == 2
    assert "parameter file not found" in capsys.readouterr().err
