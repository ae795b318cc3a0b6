"""The science code a result depends on, and its hash: the one rule for a stored run (its checkpoint's fingerprint)
and for a report (stale or not, run again or skipped).

A notebook runs its own study's package (``odebook/studies/<NN_name>/``, which it loads by name,
``studies.load("NN_name")``), the odebook modules it and that package import, the modules those import, and so on, with
the ``__init__`` of every package on the way. ``science_files`` follows the import statements (anywhere in a file, a
function's lazy import included) through the whole package, and keeps the files of the SCIENCE sub-packages: the book's
machinery (runner, front page, budget) does not decide a number. An edit to one study's package then leaves the reports
and the stored runs of the other studies current, and ``make run-all`` runs that study alone; an edit to a shared floor
stales the studies that import it. ``study_hash`` is that hash for a study's runs, from its notebook in the checkout
this package was imported from. The walk is static: an import made from a string (``importlib``) would be missed, and
odebook makes one only, ``studies.load``, whose call with a literal name the walk reads as the import of that study's
package (a test holds that).
"""

from __future__ import annotations

import ast
import hashlib
from functools import lru_cache
from pathlib import Path

__all__ = ["PACKAGE", "SCIENCE", "module_file", "imported", "modules_of", "science_files", "code_hash", "files_hash",
           "study_hash"]

PACKAGE = "odebook"
# The sub-packages whose code decides a study's numbers; book/ (runner, front page, reports, Colab cell) is machinery.
SCIENCE = ("nn", "models", "data", "training", "study", "params", "studies")
STUDIES = "studies"  # odebook/studies/<NN_name>/: a study's package, loaded by its name (``studies.load``)


def module_file(root: Path, module: str) -> Path | None:
    """The source file of odebook module ``module`` (dotted) in the book at ``root``; None when it is not one."""
    base = root.joinpath(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _package_of(root: Path, path: Path) -> list[str]:
    """The package a relative import in ``path`` starts from: a module's package, or an ``__init__``'s own."""
    return list(path.relative_to(root).with_suffix("").parts)[:-1]


def imported(root: Path, path: Path) -> set[str]:
    """The odebook modules a file's import statements name, with each one's parent packages (importing a module
    runs them). ``from odebook.a import b`` names ``odebook.a`` and, where ``b`` is a module, ``odebook.a.b``;
    ``studies.load("NN_name")`` names ``odebook.studies.NN_name``."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from the file's own package, up level - 1
                package = _package_of(root, path) if path.is_relative_to(root) else []
                base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            names = [base] + [f"{base}.{alias.name}" for alias in node.names]
        elif _loads_a_study(node):  # studies.load("NN_name"): the import of that study's package
            names = [f"{PACKAGE}.{STUDIES}.{node.args[0].value}"]
        else:
            continue
        for name in names:
            if name == PACKAGE or name.startswith(PACKAGE + "."):
                parts = name.split(".")
                found.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
    return {m for m in found if module_file(root, m) is not None}


def _loads_a_study(node: ast.AST) -> bool:
    """``studies.load("NN_name")``: a call of odebook.studies.load with a literal name."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "load"
            and isinstance(node.func.value, ast.Name) and node.func.value.id == STUDIES and len(node.args) == 1
            and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str))


def modules_of(root: Path, source: Path) -> set[str]:
    """Every odebook module that running ``source`` imports, directly or through other odebook modules (a study's
    package it loads by name included)."""
    seen: set[str] = set()
    todo = sorted(imported(root, source))
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo += sorted(imported(root, module_file(root, module)) - seen)
    return seen


def science_files(root: Path, source: Path) -> list[Path]:
    """The files of the SCIENCE sub-packages among ``modules_of(root, source)``, sorted."""
    files = (module_file(root, m) for m in modules_of(root, source))
    return sorted(f for f in files if f.relative_to(root / PACKAGE).parts[0] in SCIENCE)


def code_hash(root: Path, source: Path) -> str:
    """sha256 (16 hex digits) of the science files ``source`` runs: their paths in the package and their bytes."""
    return files_hash(root, science_files(root, source))


def files_hash(root: Path, files: list[Path]) -> str:
    """``code_hash`` of files already found (``science_files``): their paths under ``root`` and their bytes."""
    h = hashlib.sha256()
    for f in files:
        h.update(str(f.relative_to(root)).encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


@lru_cache(maxsize=None)
def study_hash(study: str | None) -> str:
    """``code_hash`` of study ``study``'s notebook (notebooks/<study>.py in the checkout this package was imported
    from), once a process: what a stored run of the study depends on, by the rule its report uses. Where there is no
    such notebook (a package installed without the book, a study run from a script or a notebook of one's own), every
    science file counts: a superset, so a stored run never outlives a change it could depend on."""
    root = Path(__file__).resolve().parents[2]
    notebook = root / "notebooks" / f"{study}.py"
    if study and notebook.is_file():
        return code_hash(root, notebook)
    package = Path(__file__).resolve().parents[1]
    return files_hash(package.parent, sorted(f for part in SCIENCE for f in (package / part).rglob("*.py")))
