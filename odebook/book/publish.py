"""A run owns its outputs: one run at a time per profile and notebook, a staging folder of its own, and publication
by one atomic exchange only after the notebook ran to its last cell.

``run_lock`` takes ``outputs/<profile>/.<notebook>.lock`` (an flock; the file says which process holds it and since
when): a second run is refused with "already running (pid …, since …)" before it touches anything; the one that takes it
removes a dead run's staging folders (a killed process leaves its own), whether the notebook then runs or is skipped as
unchanged. ``stage`` makes a folder no other run shares. ``unfinished`` says whether an executed notebook stopped before
its last code cell (such a run is never "ok"). ``relabel`` rewrites the staging folder's path to the published one in
the notebook and in results.json. ``exchange`` swaps the staging folder with the published one in one rename
(``renameat2``), so a reader sees either the old outputs or the new, never a half.
"""

from __future__ import annotations

import contextlib
import ctypes
import datetime as dt
import fcntl
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from odebook.params import ParamError

__all__ = ["AlreadyRunning", "run_lock", "stage", "unfinished", "relabel", "exchange"]

RELABELLED = ("*.ipynb", "*.json")  # the records (notebook, results.json, …) that name their folder


class AlreadyRunning(ParamError):
    """Another run of the same profile and notebook holds its lock: nothing was touched."""


@contextlib.contextmanager
def run_lock(folder: Path, name: str) -> Iterator[Path]:
    """Hold ``folder/.<name>.lock`` for the duration, or raise AlreadyRunning naming the holder. The file is removed
    on release while still held; a run that opened it just before checks it is still the file at that path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f".{name}.lock"
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "pid unknown"
            os.close(fd)
            raise AlreadyRunning(f"{folder.name}/{name}: already running ({holder}); wait for it to finish or stop "
                                 f"it, then run again (nothing was touched)") from None
        if _same_file(fd, path):
            break
        os.close(fd)  # the holder released and removed it between our open and our lock: take the new one
    since = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"pid {os.getpid()}, since {since}".encode(), 0)
    for dead in folder.glob(f".{name}.running-*"):  # under the lock, no other run's: a killed run's leftovers
        shutil.rmtree(dead, ignore_errors=True)
    try:
        yield path
    finally:
        path.unlink(missing_ok=True)
        os.close(fd)


def _same_file(fd: int, path: Path) -> bool:
    try:
        return os.stat(path).st_ino == os.fstat(fd).st_ino
    except FileNotFoundError:
        return False


def stage(folder: Path, name: str) -> Path:
    """A new, empty staging folder ``folder/.<name>.running-<unique>`` that no other run shares, readable as the
    user's umask says (as the rest of the checkout; mkdtemp's is the owner's alone, and it became the published
    folder). Called under the notebook's ``run_lock``, which removed a dead run's staging folders."""
    path = Path(tempfile.mkdtemp(prefix=f".{name}.running-", dir=folder))
    umask = os.umask(0)
    os.umask(umask)
    path.chmod(0o777 & ~umask)
    return path


def unfinished(ipynb: Path) -> str:
    """'' when every code cell of the executed notebook ran, else which one it stopped at."""
    import nbformat

    if not ipynb.is_file():
        return "the executed notebook was not written"
    cells = [c for c in nbformat.read(ipynb, as_version=4).cells if c.cell_type == "code" and c.source.strip()]
    pending = [i for i, c in enumerate(cells, 1) if c.get("execution_count") is None]
    if pending:
        return f"the notebook stopped before its end: code cell {pending[0]} of {len(cells)} and {len(pending) - 1} " \
               "more did not run"
    return ""


def relabel(stage_dir: Path, final: Path) -> None:
    """The published files name where they end up, not the staging folder they were written in."""
    old, new = str(stage_dir.resolve()), str(final.resolve())
    for pattern in RELABELLED:
        for f in stage_dir.glob(pattern):
            f.write_text(f.read_text(encoding="utf-8").replace(old, new), encoding="utf-8")


_RENAME_EXCHANGE = 2


def exchange(src: Path, dst: Path) -> None:
    """Put ``src`` at ``dst`` in one step: swap the two folders atomically (Linux renameat2), then delete the old
    one; where the exchange is not available, the old folder moves aside first and is deleted after."""
    if dst.exists() and _renameat2(src, dst):
        shutil.rmtree(src)  # src now holds the old outputs
        return
    old = dst.with_name(f".{dst.name}.old-{os.getpid()}")
    if dst.exists():
        dst.rename(old)
    src.rename(dst)
    shutil.rmtree(old, ignore_errors=True)


def _renameat2(src: Path, dst: Path) -> bool:
    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return False
    at_cwd = -100
    return fn(at_cwd, os.fsencode(src), at_cwd, os.fsencode(dst), _RENAME_EXCHANGE) == 0
