"""Where a study may write: the one rule for every folder parameter it writes into (``spec(path="writes")``): not
the file system's root or a system folder, and inside the checkout only under its outputs/ (the rest is the book's
source: tracked files, docs, a virtual environment)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["SYSTEM_FOLDERS", "checkout_root", "written_folder_problem"]

SYSTEM_FOLDERS = ("bin", "boot", "dev", "etc", "lib", "lib32", "lib64", "proc", "run", "sbin", "sys", "usr")


def checkout_root() -> Path | None:
    """The odebook checkout this package was imported from, if it is one (None when pip-installed)."""
    root = Path(__file__).resolve().parents[2]
    return root if (root / "notebooks").is_dir() and (root / "pyproject.toml").is_file() else None


def written_folder_problem(folder: Path) -> str | None:
    """Why a study may not write into ``folder`` (resolved): the file system's root or a system folder, or a folder of
    the checkout other than its outputs/ (outputs/ and a folder outside the checkout are fine)."""
    if folder == Path(folder.anchor) or folder.parts[1] in SYSTEM_FOLDERS:
        return f"a system folder; give a folder of your own (e.g. under {Path.home()} or /tmp)"
    root = checkout_root()
    if root is not None and folder.is_relative_to(root) and not folder.is_relative_to(root / "outputs"):
        return (f"inside the checkout ({root}) but not under its outputs/; give a folder under {root / 'outputs'} or "
                "outside the checkout")
    return None
