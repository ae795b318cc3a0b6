"""Where the book lives, and the first cell every notebook starts with.

``REPOSITORY`` and ``BRANCH`` are the one place that says where odebook is installed from outside a checkout (Colab)
and where README's "Open in Colab" links point. The notebooks' first code cell (tag ``colab``) must run before
odebook is importable, so each notebook holds a copy of ``CELL``; ``python -m odebook.book.colab`` (run by
``make sync``) rewrites those copies from here, and tests/book/test_colab.py checks they are identical.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

__all__ = ["REPOSITORY", "BRANCH", "SOURCE", "PARAMS_URL", "KERNELSPEC", "CELL", "TOOLING", "missing_requirements",
           "pip_conflicts", "install_missing", "colab_url", "write_cells"]

REPOSITORY = "odebook/odebook"  # GitHub owner/name of the book
BRANCH = "main"                 # the branch the Colab links open and the first cell installs: they match
SOURCE = f"git+https://github.com/{REPOSITORY}@{BRANCH}"
PARAMS_URL = f"https://raw.githubusercontent.com/{REPOSITORY}/{BRANCH}/params"  # profiles outside a checkout

# Every Jupyter (JupyterLab, Colab, plain papermill) knows "python3": the environment the notebook is opened from.
# The runner executes with its own kernel (odebook.book.kernel.KERNEL_NAME), so this name only matters elsewhere.
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}

CELL = f'''# %% tags=["colab"]
# Run this cell first: in a checkout it imports the checkout's own odebook; elsewhere (Colab) it installs odebook
# from ODEBOOK_SOURCE and only what this Python lacks. "%env ODEBOOK_PROFILE=cpu" (or ODEBOOK_SOURCE=<a fork>) in a
# cell above it runs a profile's values instead of the t4 ones below (docs/running.md, Colab).
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

ODEBOOK_SOURCE = os.environ.get("ODEBOOK_SOURCE", "{SOURCE}")
if (Path.cwd().parent / "odebook" / "__init__.py").is_file():
    sys.path.insert(0, str(Path.cwd().parent))
elif importlib.util.find_spec("odebook") is None:
    print(f"odebook is not installed: pip install --no-deps {{ODEBOOK_SOURCE}}", flush=True)
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", ODEBOOK_SOURCE], capture_output=True,
                         text=True)
    if pip.returncode != 0:
        raise RuntimeError(f"pip could not install odebook from {{ODEBOOK_SOURCE}}:\\n{{pip.stdout[-2000:]}}"
                           f"{{pip.stderr[-4000:]}}\\nUpload the repository (this notebook in its notebooks/ folder) or "
                           "set ODEBOOK_SOURCE to an address pip can install, then run this cell again.")
    importlib.invalidate_caches()
    from odebook.book.colab import install_missing

    install_missing()
'''

# The book's own tooling (make run-all, make lab): a notebook host such as Colab runs the notebook itself and pins its
# Jupyter packages, which pip would otherwise upgrade under it.
TOOLING = ("jupyterlab", "ipykernel", "papermill", "jupytext", "nbformat", "nbconvert")


def missing_requirements(requires: list[str], version: Callable[[str], str | None]) -> list[str]:
    """The requirements (``importlib.metadata.requires`` strings) that ``version`` (installed version or None) does
    not satisfy, leaving out extras and TOOLING."""
    try:
        from packaging.requirements import Requirement
    except ImportError:  # a bare environment: pip's own copy
        from pip._vendor.packaging.requirements import Requirement
    missing = []
    for text in requires:
        req = Requirement(text)
        if req.name.lower() in TOOLING or (req.marker is not None and not req.marker.evaluate({"extra": ""})):
            continue
        have = version(req.name)
        if have is None or not req.specifier.contains(have, prereleases=True):
            missing.append(str(req))
    return missing


def pip_conflicts(stderr: str) -> list[str]:
    """The lines of pip's "dependency conflicts" report: pip prints it and still exits 0."""
    lines = stderr.splitlines()
    start = next((i for i, line in enumerate(lines) if "dependency conflicts" in line), None)
    return [] if start is None else [line for line in lines[start + 1:] if " requires " in line]


def _installed(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def install_missing() -> list[str]:
    """Install with pip the dependencies of odebook that this Python lacks (never TOOLING), say which, and say so
    when pip reports a conflict with what was already installed; return the requirements installed."""
    missing = missing_requirements(metadata.requires("odebook") or [], _installed)
    if not missing:
        print("odebook's dependencies are all installed already", flush=True)
        return []
    print(f"installing what this Python lacks: pip install {' '.join(missing)}", flush=True)
    pip = subprocess.run([sys.executable, "-m", "pip", "install", *missing], capture_output=True, text=True)
    if pip.returncode != 0:
        raise RuntimeError(f"pip could not install {' '.join(missing)}:\n{pip.stderr[-4000:]}")
    conflicts = pip_conflicts(pip.stderr)
    if conflicts:
        print("pip installed them but reports conflicts with packages that were here before (it exits 0 all the same);"
              " restart the runtime if one of them was in use:\n  " + "\n  ".join(conflicts), flush=True)
    return missing


_CELL_RE = re.compile(r'^# %% tags=\["colab"\]\n.*?(?=^# %%)', re.S | re.M)


def colab_url(notebook: str) -> str:
    """The address that opens ``notebooks/<notebook>.ipynb`` of the repository in Colab."""
    return f"https://colab.research.google.com/github/{REPOSITORY}/blob/{BRANCH}/notebooks/{notebook}.ipynb"


def write_cells(notebooks: Path) -> list[Path]:
    """Replace the colab cell of every ``notebooks/NN_*.py`` by ``CELL``; return the files that changed."""
    changed = []
    for path in sorted(notebooks.glob("[0-9][0-9]_*.py")):
        text = path.read_text(encoding="utf-8")
        if not _CELL_RE.search(text):
            raise ValueError(f"{path}: no cell tagged 'colab' followed by another cell")
        new = _CELL_RE.sub(lambda _: CELL + "\n", text, count=1)
        if new != text:
            path.write_text(new, encoding="utf-8")
            changed.append(path)
    return changed


if __name__ == "__main__":
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("notebooks")
    for p in write_cells(root):
        print(f"{p}: colab cell rewritten from odebook.book.colab")
