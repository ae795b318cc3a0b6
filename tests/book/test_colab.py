"""The first cell of every notebook: one copy of odebook.book.colab.CELL, a kernel name every Jupyter knows, and a
bootstrap that installs odebook where it is missing (tested offline from a local git URL) and otherwise imports the
checkout's own code."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import jupytext
import pytest

from odebook.book import colab
from odebook.book import runner

from conftest import ROOT

BOOK = runner.Book.at(ROOT)
NOTEBOOKS = BOOK.all_notebooks()


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_the_first_code_cell_is_the_one_colab_cell_and_the_kernel_is_python3(name):
    py = (BOOK.notebooks / f"{name}.py").read_text()
    assert colab.CELL in py, f"{name}.py: its colab cell differs from odebook.book.colab.CELL: run make sync"
    nb = jupytext.read(BOOK.notebooks / f"{name}.py")
    first = next(c for c in nb.cells if c.cell_type == "code")
    assert first.metadata.get("tags") == ["colab"]
    for path in (BOOK.notebooks / f"{name}.py", BOOK.notebooks / f"{name}.ipynb"):
        assert jupytext.read(path).metadata["kernelspec"] == colab.KERNELSPEC, f"{path.name}: kernelspec"


def test_readme_links_open_every_notebook_of_the_repository_in_colab(root):
    readme = (root / "README.md").read_text()
    for name in NOTEBOOKS:
        assert colab.colab_url(name) in readme, f"README has no Open-in-Colab link for {name}"


def test_write_cells_rewrites_a_stale_cell(tmp_path):
    text = (BOOK.notebooks / f"{NOTEBOOKS[0]}.py").read_text()
    stale = tmp_path / f"{NOTEBOOKS[0]}.py"
    stale.write_text(text.replace(colab.CELL, '# %% tags=["colab"]\nprint("old")\n\n'))
    assert colab.write_cells(tmp_path) == [stale]
    assert stale.read_text() == text and colab.write_cells(tmp_path) == []


# -- the bootstrap, offline ----------------------------------------------------------------------------------------
def _cell_then(code: str) -> str:
    return colab.CELL + "\n" + code


def _fresh_venv(path: Path, with_dependencies: bool = False) -> Path:
    """A virtual environment of the interpreter behind this one, with pip and nothing of odebook's. Offline pip
    cannot fetch a build backend, so it gets this environment's setuptools (the one pyproject.toml asks for).
    ``with_dependencies``: this environment's packages are importable too (a .pth file), as Colab's own are, but
    not odebook (an editable install is found only through its own .pth file, which is not read there)."""
    import setuptools
    import sysconfig

    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", str(path)], check=True, capture_output=True)
    python = path / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    here = Path(setuptools.__file__).parent.parent
    names = ("setuptools", "pkg_resources", "_distutils_hack", "distutils-precedence.pth")
    for old in {*site.glob("setuptools*"), *(site / n for n in names)}:
        if old.is_dir():
            shutil.rmtree(old)
        elif old.exists():
            old.unlink()
    for name in (*names, *(p.name for p in here.glob(f"setuptools-{setuptools.__version__}*-info"))):
        if (here / name).is_dir():
            shutil.copytree(here / name, site / name, ignore=shutil.ignore_patterns("__pycache__"))
        elif (here / name).is_file():
            shutil.copy(here / name, site / name)
    if with_dependencies:
        (site / "colab-packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


def _source_repo(path: Path) -> Path:
    """A git repository holding this checkout's package (working tree, committed), installable with pip."""
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, path / name)
    shutil.copytree(ROOT / "odebook", path / "odebook", ignore=shutil.ignore_patterns("__pycache__"))
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(path)]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "snapshot"]):
        subprocess.run(git + args, check=True, capture_output=True)
    return path


OFFLINE_PIP = {"PIP_NO_INDEX": "1", "PIP_NO_DEPS": "1", "PIP_NO_BUILD_ISOLATION": "0",
               "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


def _run_cell(python: Path, cwd: Path, source: str, code: str, **env) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run([str(python), "-c", _cell_then(code)], cwd=cwd, capture_output=True, text=True,
                          env={**clean, **OFFLINE_PIP, "ODEBOOK_SOURCE": source, **env}, timeout=300)


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
@pytest.mark.slow
def test_the_first_cell_installs_odebook_from_a_git_url_into_a_fresh_environment(tmp_path):
    python = _fresh_venv(tmp_path / "venv", with_dependencies=True)
    (tmp_path / "repo").mkdir()
    repo = _source_repo(tmp_path / "repo")
    elsewhere = tmp_path / "content"  # like Colab's /content: no checkout one folder up
    elsewhere.mkdir()
    check = "import odebook.book.colab as c; print('imported', c.__file__, c.SOURCE)"
    missing = subprocess.run([str(python), "-c", "import odebook"], cwd=elsewhere, capture_output=True,
                             env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert missing.returncode != 0, "the fresh environment already sees odebook"
    done = _run_cell(python, elsewhere, f"git+file://{repo}", check)
    assert done.returncode == 0, done.stderr
    assert f"odebook is not installed: pip install --no-deps git+file://{repo}" in done.stdout
    assert "odebook's dependencies are all installed already" in done.stdout  # nothing reinstalled over them
    assert f"imported {tmp_path / 'venv'}" in done.stdout and colab.SOURCE in done.stdout
    again = _run_cell(python, elsewhere, f"git+file://{repo}", check)  # installed now: no second install
    assert "not installed" not in again.stdout and "imported" in again.stdout


@pytest.mark.slow
def test_an_install_that_fails_says_why_and_what_to_do(tmp_path):
    python = _fresh_venv(tmp_path / "venv")
    done = _run_cell(python, tmp_path, f"git+file://{tmp_path}/no-such-repo", "")
    assert done.returncode != 0
    assert f"RuntimeError: pip could not install odebook from git+file://{tmp_path}/no-such-repo" in done.stderr
    assert "no-such-repo" in done.stderr.split("RuntimeError")[1] and "ODEBOOK_SOURCE" in done.stderr


def test_only_what_is_missing_is_installed_and_never_the_jupyter_tooling():
    requires = ["torch>=2.7", "numpy", "scipy>=1.10", "papermill>=2.5", "jupyterlab>=4.0", "fla-core>=0.6",
                'pytest>=7.4; extra == "dev"']
    have = {"torch": "2.9.0+cu126", "numpy": "2.0.2", "scipy": "1.9.3"}.get
    assert colab.missing_requirements(requires, have) == ["scipy>=1.10", "fla-core>=0.6"]
    assert set(colab.TOOLING) == {"jupyterlab", "ipykernel", "papermill", "jupytext", "nbformat", "nbconvert"}


def test_pips_conflict_report_is_found_although_pip_exits_0():
    stderr = ("ERROR: pip's dependency resolver does not currently take into account all the packages that are "
              "installed. This behaviour is the source of the following dependency conflicts.\n"
              "google-colab 1.0.0 requires pandas==2.2.2, but you have pandas 2.3.1 which is incompatible.\n")
    assert colab.pip_conflicts(stderr) == ["google-colab 1.0.0 requires pandas==2.2.2, but you have pandas 2.3.1 "
                                           "which is incompatible."]
    assert colab.pip_conflicts("Successfully installed torchdiffeq-0.2.5\n") == []


# -- two checkouts: each notebook runs its own checkout's code -----------------------------------------------------
PROBE = '''# %%
import odebook
print("odebook from", odebook.__file__)
'''


def _checkout(path: Path) -> Path:
    (path / "odebook").mkdir(parents=True)
    (path / "odebook" / "__init__.py").write_text("")
    (path / "notebooks").mkdir()
    nb = jupytext.reads(colab.CELL + "\n" + PROBE, fmt="py:percent")
    nb.metadata["kernelspec"] = colab.KERNELSPEC
    jupytext.write(nb, path / "notebooks" / "probe.ipynb")
    return path


@pytest.mark.slow
def test_two_checkouts_each_run_their_own_code_through_the_python3_kernel(tmp_path):
    """papermill with the notebook's own kernel name (python3), as JupyterLab or a user would run it, while another
    odebook is importable (PYTHONPATH here): the notebook still imports its checkout's package."""
    import papermill

    a, b = _checkout(tmp_path / "a"), _checkout(tmp_path / "b")
    for mine, other in ((a, b), (b, a)):
        out = tmp_path / f"{mine.name}.ipynb"
        old = os.environ.get("PYTHONPATH")
        os.environ["PYTHONPATH"] = str(other)
        try:
            papermill.execute_notebook(str(mine / "notebooks" / "probe.ipynb"), str(out),
                                       cwd=str(mine / "notebooks"), progress_bar=False)
        finally:
            os.environ["PYTHONPATH"] = old if old is not None else ""
            if old is None:
                del os.environ["PYTHONPATH"]
        text = "".join("".join(o.get("text", "")) for c in json.loads(out.read_text())["cells"]
                       for o in c.get("outputs", []))
        assert f"odebook from {mine / 'odebook' / '__init__.py'}" in text
