"""Where the book lives, and the first cell every notebook starts with.

``REPOSITORY`` and ``BRANCH`` are the one place that says where odebook is installed from outside a checkout (Colab)
and where README's "Open in Colab" links point. The notebooks' first code cell (tag ``colab``) must run before
odebook is importable, so each notebook holds a copy of ``CELL``; ``python -m odebook.book.colab`` (run by
``make sync``) rewrites those copies from here, and tests/book/test_colab.py checks they are identical.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

__all__ = ["REPOSITORY", "BRANCH", "SOURCE", "KERNELSPEC", "CELL", "colab_url", "write_cells"]

REPOSITORY = "odebook/odebook"  # GitHub owner/name of the book
BRANCH = "main"                 # the branch the Colab links open and the first cell installs: they match
SOURCE = f"git+https://github.com/{REPOSITORY}@{BRANCH}"

# Every Jupyter (JupyterLab, Colab, plain papermill) knows "python3": the environment the notebook is opened from.
# The runner executes with its own kernel (odebook.book.runner.KERNEL_NAME), so this name only matters elsewhere.
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}

CELL = f'''# %% tags=["colab"]
# Run this cell first. In a checkout it imports the checkout's own odebook (../odebook), whatever is installed;
# elsewhere (Colab) it installs odebook from ODEBOOK_SOURCE, the repository and branch this notebook comes from
# (set the environment variable ODEBOOK_SOURCE, e.g. with %env, to install a fork or a local copy instead).
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

ODEBOOK_SOURCE = os.environ.get("ODEBOOK_SOURCE", "{SOURCE}")
if (Path.cwd().parent / "odebook" / "__init__.py").is_file():
    sys.path.insert(0, str(Path.cwd().parent))
elif importlib.util.find_spec("odebook") is None:
    print(f"odebook is not installed: pip install {{ODEBOOK_SOURCE}}", flush=True)
    pip = subprocess.run([sys.executable, "-m", "pip", "install", ODEBOOK_SOURCE], capture_output=True, text=True)
    if pip.returncode != 0:
        raise RuntimeError(f"pip could not install odebook from {{ODEBOOK_SOURCE}}:\\n{{pip.stdout[-2000:]}}"
                           f"{{pip.stderr[-4000:]}}\\nUpload the repository (this notebook in its notebooks/ folder) or "
                           "set ODEBOOK_SOURCE to an address pip can install, then run this cell again.")
    importlib.invalidate_caches()
'''

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
