"""make run-all re-runs only what changed: a notebook whose published run has the same key (science code, notebook,
parameter file, data files' contents, package versions, device) is skipped in one line; FRESH=1 runs it anyway."""

import dataclasses
import json
import os
from importlib import metadata
from pathlib import Path

import pytest

from odebook import studies
from odebook.book import rerun, runner
from odebook.params import Params, spec

NOTEBOOK = '''# %% tags=["parameters"]
output_dir = ""
value = 1

# %%
import json, pathlib
from odebook.nn import gemm  # the science module this book's key hashes (its stand-in below)
pathlib.Path(output_dir, "results.json").write_text(json.dumps({"headline": {"value": value}}))
'''


@dataclasses.dataclass
class CachedParams(Params):
    study = "93_cached"
    value: int = spec(1, ge=0)
    data_file: str = spec("")

    def data_files(self) -> list:
        return [Path(self.data_file)] if self.data_file else []


@pytest.fixture
def book(tmp_path, own_studies) -> runner.Book:
    own_studies({"93_cached": CachedParams})
    b = runner.Book.at(tmp_path)
    b.notebooks.mkdir()
    (b.params / "smoke").mkdir(parents=True)
    (b.notebooks / "93_cached.py").write_text(NOTEBOOK)
    (tmp_path / "corpus.txt").write_text("the cat sat\n")
    (b.params / "smoke" / "93_cached.yaml").write_text(f"value: 7\ndata_file: {tmp_path / 'corpus.txt'}\n")
    (tmp_path / "odebook" / "nn").mkdir(parents=True)  # the science code this book's key hashes
    (tmp_path / "odebook" / "nn" / "gemm.py").write_text("WIDTH = 1\n")
    return b


def test_an_unchanged_notebook_is_skipped_in_one_line_and_fresh_runs_it(book, capsys):
    out = book.outputs / "smoke" / "93_cached"
    [first] = runner.run_book(book, "smoke")
    manifest = json.loads((out / "manifest.json").read_text())
    assert first.ok and not first.skipped and manifest[rerun.KEY_FIELD]["data"]["corpus.txt"]
    assert set(manifest[rerun.KEY_FIELD]) == {"odebook", "notebook", "parameters", "data", "environment", "device",
                                              "precision", "processor", "threads"}
    capsys.readouterr()
    [second] = runner.run_book(book, "smoke")
    printed = capsys.readouterr().out.splitlines()
    assert second.skipped and second.ok
    assert [ln for ln in printed if "93_cached" in ln] == [
        f"[1/1] 93_cached: unchanged since its run of {manifest['finished'].replace('T', ' ')[:19]} UTC (code, "
        "parameters, data, packages, device) — skipped; FRESH=1 re-runs it"]
    assert json.loads((out / "manifest.json").read_text()) == manifest  # untouched
    (book.params / "smoke" / "93_cached.yaml").write_text((book.params / "smoke" / "93_cached.yaml").read_text()
                                                          .replace("value: 7", "value: 8"))
    capsys.readouterr()
    [third] = runner.run_book(book, "smoke")  # a parameter changed: it runs, says why, and its new key is recorded
    assert third.ok and not third.skipped and json.loads((out / "results.json").read_text())["headline"]["value"] == 8
    assert f"[1/1] 93_cached (profile smoke; parameters changed since its run of " \
        f"{manifest['finished'].replace('T', ' ')[:16]}) … ok in " in capsys.readouterr().out
    [fourth] = runner.run_book(book, "smoke", fresh=True)
    assert fourth.ok and not fourth.skipped and "(profile smoke; fresh) … ok" in capsys.readouterr().out
    assert runner.run_book(book, "smoke")[0].skipped


def _published(book: runner.Book) -> tuple[Path, dict]:
    """A published successful run of the notebook, with the key of the book as it is now."""
    root, out = book.notebooks.parent, book.outputs / "smoke"
    params = studies.validate_values("93_cached", book.params / "smoke" / "93_cached.yaml")[0]
    (out / "93_cached").mkdir(parents=True)
    (out / "93_cached" / "93_cached.ipynb").write_text("{}")
    (out / "93_cached" / "manifest.json").write_text(json.dumps({"status": "ok", "finished": "2026-01-01T00:00:00"}))
    rerun.record(out / "93_cached", json.loads(json.dumps(rerun.key(root, "smoke", "93_cached", params, ("numpy",)))))
    return out, params


def _change_code(book, monkeypatch):
    (book.notebooks.parent / "odebook" / "nn" / "gemm.py").write_text("WIDTH = 2\n")


def _change_parameter(book, monkeypatch):
    path = book.params / "smoke" / "93_cached.yaml"
    path.write_text(path.read_text() + "# a comment is a change of the file, too\n")


def _change_data(book, monkeypatch):
    corpus = book.notebooks.parent / "corpus.txt"
    stat = corpus.stat()
    corpus.write_text("the dog sat\n")  # same size: the content is what counts
    os.utime(corpus, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))


def _change_package(book, monkeypatch):
    real = metadata.version
    monkeypatch.setattr(rerun.metadata, "version", lambda pkg: "99.0" if pkg == "numpy" else real(pkg))


def _change_processor(book, monkeypatch):
    monkeypatch.setattr(rerun.processor, "describe", lambda: "AMD EPYC (family 25, model 17; avx2 fma avx512f)")


def _change_precision(book, monkeypatch):  # the same GPU under a T4's policy (ODEBOOK_GPU_POLICY=t4)
    monkeypatch.setattr(rerun, "precision", lambda: "fp16 autocast + GradScaler on cuda (NVIDIA H100 80GB HBM3) "
                                                    "(ODEBOOK_GPU_POLICY=t4)")


def _change_layout(book, monkeypatch):  # the runs side by side in one-thread workers instead of this process
    monkeypatch.setattr(rerun.notebook, "layout", lambda params: "2 worker processes × 1 thread")


@pytest.mark.parametrize("change", [_change_code, _change_parameter, _change_data, _change_package, _change_processor,
                                    _change_precision, _change_layout],
                         ids=["code", "parameter", "data file content", "package version", "processor",
                              "precision policy", "thread layout"])
def test_a_change_to_code_a_parameter_a_data_file_a_package_or_the_processor_makes_it_run_again(book, monkeypatch,
                                                                                                 change):
    out, params = _published(book)
    root = book.notebooks.parent
    assert rerun.unchanged(out, "93_cached", rerun.key(root, "smoke", "93_cached", params, ("numpy",)))
    change(book, monkeypatch)
    params = studies.validate_values("93_cached", book.params / "smoke" / "93_cached.yaml")[0]
    assert not rerun.unchanged(out, "93_cached", rerun.key(root, "smoke", "93_cached", params, ("numpy",)))


def test_a_failure_since_or_a_missing_report_is_never_unchanged(book):
    out, params = _published(book)
    now = rerun.key(book.notebooks.parent, "smoke", "93_cached", params, ("numpy",))
    (out / "93_cached.failed").mkdir()
    assert not rerun.unchanged(out, "93_cached", now)
    (out / "93_cached.failed").rmdir()
    (out / "93_cached" / "93_cached.ipynb").unlink()
    assert not rerun.unchanged(out, "93_cached", now)


def test_the_processor_is_named_with_the_vector_instructions_that_choose_its_kernels(tmp_path):
    from odebook.book import processor

    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\n"
                    "model name\t: AMD EPYC 9B14\nflags\t\t: fpu sse avx2 fma avx512f avx512bw\n\n"
                    "processor\t: 1\nmodel name\t: AMD EPYC 9B14\n")
    assert processor.describe(info) == "AMD EPYC 9B14 (family 25, model 17; avx2 fma avx512f)"
    info.write_text("processor\t: 0\ncpu family\t: 25\nmodel\t\t: 1\nmodel name\t: AMD EPYC\nflags\t\t: sse avx2 fma\n")
    assert processor.describe(info) == "AMD EPYC (family 25, model 1; avx2 fma)"
    assert processor.describe(tmp_path / "absent")  # no /proc/cpuinfo: platform's own name


def test_set_changes_one_value_for_the_whole_run_and_is_part_of_the_key(book, capsys):
    """make run-all SET="value=9": over the profile file's value in every notebook whose study has the key, in its
    results and its re-run key; the same SET again is unchanged, dropping it runs again. A key no study has, a bad
    pair and a value the study refuses stop the run before anything runs."""
    out = book.outputs / "smoke" / "93_cached"
    [first] = runner.run_book(book, "smoke", settings=runner.parse_settings("value=9"))
    manifest = json.loads((out / "manifest.json").read_text())
    assert first.ok and json.loads((out / "results.json").read_text())["headline"]["value"] == 9
    assert manifest[rerun.KEY_FIELD]["set"] == {"value": 9} and manifest["parameters"]["value"] == 9
    assert runner.run_book(book, "smoke", settings={"value": 9})[0].skipped
    capsys.readouterr()
    assert not runner.run_book(book, "smoke")[0].skipped  # the file's own value 7 again
    assert "(profile smoke; set changed since its run of" in capsys.readouterr().out
    with pytest.raises(runner.ParamError, match="SET: key 'stepz' is a parameter of none of 93_cached$"):
        runner.run_book(book, "smoke", settings={"stepz": 3})
    with pytest.raises(runner.ParamError, match="SET: key 'valeu' is a parameter of none of 93_cached "
                                                r"\(did you mean 'value'\?\)"):  # issue 71
        runner.run_book(book, "smoke", settings={"valeu": 3})
    with pytest.raises(runner.ParamError, match=r"SET: 'steps' is not key=value"):
        runner.parse_settings("steps")
    with pytest.raises(runner.ParamError,
                       match=r"SET: key 'steps' is given twice \(steps=14, then steps=16\); give it once"):
        runner.parse_settings("steps=14 steps=16")  # ran with 16 (issue 71)
    with pytest.raises(runner.ParamError, match=r"93_cached.yaml with SET: invalid parameters (.|\n)*key 'value' = -1"):
        runner.run_book(book, "smoke", settings={"value": -1})


def test_a_profile_built_on_another_reads_its_base_under_its_own_values_and_keeps_its_warning(book, capsys):
    """params/mine/93_cached.yaml with `base: smoke`: the smoke file's values under its own; the report's banner
    and the front page say it is built on smoke (no finding shown as one); editing the base runs it again."""
    mine = book.params / "mine"
    mine.mkdir()
    (mine / "93_cached.yaml").write_text("base: smoke\nvalue: 3\n")
    out = book.outputs / "mine" / "93_cached"
    assert runner.run_book(book, "mine")[0].ok
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["parameters"]["value"] == 3 and manifest["profile_chain"] == ["mine", "smoke"]
    assert manifest["parameters"]["data_file"].endswith("corpus.txt")  # the base's value
    assert "Profile mine: parameters from params/mine/, built on smoke. Smoke profile:" in \
        (out / "93_cached.ipynb").read_text()
    front = (book.outputs / "mine" / "index.html").read_text()  # its banner kept smoke's warning too (issue 71)
    assert "Profile mine: parameters from params/mine/, built on smoke. Smoke profile:" in front
    assert "no verdict here counts" in front
    smoke = book.params / "smoke" / "93_cached.yaml"
    smoke.write_text(smoke.read_text() + "# edited\n")
    assert not runner.run_book(book, "mine")[0].skipped  # its base changed
    (mine / "93_cached.yaml").write_text("base: mine\nvalue: 3\n")
    with pytest.raises(runner.ParamError, match=r"key 'base' = 'mine': the name of another profile folder"):
        runner.run_book(book, "mine")
    (book.params / "93_cached.yaml").write_text("value: 4\n")  # a file at the top of params/, not a profile's
    for base in ("..", "."):  # '..' read params/93_cached.yaml as if it were a profile (issue 71)
        (mine / "93_cached.yaml").write_text(f"base: '{base}'\nvalue: 3\n")
        with pytest.raises(runner.ParamError, match=rf"key 'base' = '\{base}': the name of another profile folder"):
            runner.run_book(book, "mine")
