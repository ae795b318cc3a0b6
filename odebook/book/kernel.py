"""The kernel the runner executes a notebook in: this very interpreter, with the allocator settings, and its own
messages in the run's ``kernel.log`` rather than on the console.

A kernel's cells report through Jupyter's messages (they end up in the executed notebook); what the kernel process
itself writes to its stderr — ipykernel's log, a library's message at start-up or exit — goes to the file that
``log_to`` names for the notebook being run. On Ctrl-C the kernel is interrupted and shut down at once, and ipykernel
then logs an error of its own as it replies on a socket its shutdown already closed: on the console that read as if
the book had failed; in the log it is one more line of a run that was interrupted.

``progress`` shows what the kernel's training loops report (odebook.training.train, ``PROGRESS_ENV``), in the kernel or
in its worker processes: on a terminal, the latest report after the notebook's console line, rewritten every few
seconds; in a log (``ODEBOOK_PROGRESS=1``), each new report on a line of its own; elsewhere (CI) nothing. In a kernel
no runner follows (JupyterLab, Colab, papermill by hand) the training loop's own bars show what runs in the kernel,
but not what runs in workers or jobs: there ``show_in_cell`` has them report to a file, and a few lines under the
running cell show each run in progress.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import tempfile
import threading
from collections.abc import Iterator
from typing import TextIO
from pathlib import Path
from unittest import mock

from odebook.book.profile import PROFILE_ENV, outside_cell
from odebook.params.cell import cell_groups
from odebook.training.runtime import ALLOCATOR_ENV
from odebook.training.train import PROGRESS_ENV

__all__ = ["KERNEL_NAME", "LOG_ENV", "SHOW_ENV", "for_this_python", "log_to", "settled", "progress", "show_in_cell",
           "running", "KnownSettingsPassed", "AccountingOff"]

KERNEL_NAME = "odebook-runner"
LOG_ENV = "ODEBOOK_KERNEL_LOG"  # where a kernel started now appends its stderr
SHOW_ENV = "ODEBOOK_PROGRESS"  # "1": show progress where the console is no terminal (a log); "0": nowhere
# The kernel's stderr appended to $ODEBOOK_KERNEL_LOG; exec keeps the pid, so Jupyter's interrupt reaches Python.
_LAUNCH = 'exec "$0" -m ipykernel_launcher -f "$1" --log-level=ERROR 2>>"${%s:-/dev/null}"' % LOG_ENV


@contextlib.contextmanager
def for_this_python() -> Iterator[str]:
    """A temporary kernelspec that runs this very interpreter, found first on JUPYTER_PATH, so the book always
    executes in the environment the runner was started from (not whatever 'python3' kernel is registered). The
    kernels also get the allocator settings of ALLOCATOR_ENV unless the caller set them, log only errors (to
    ``log_to``'s file), and never see $ODEBOOK_PROFILE: the runner's profile is the only one."""
    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / "kernels" / KERNEL_NAME
        spec.mkdir(parents=True)
        (spec / "kernel.json").write_text(json.dumps({
            "argv": ["/bin/sh", "-c", _LAUNCH, sys.executable, "{connection_file}"],
            "display_name": "odebook (runner)", "language": "python"}))
        env = {k: v for k, v in ALLOCATOR_ENV.items() if k not in os.environ}
        env["JUPYTER_PATH"] = tmp + os.pathsep + os.environ.get("JUPYTER_PATH", "")
        with mock.patch.dict(os.environ, env):
            os.environ.pop(PROFILE_ENV, None)
            yield KERNEL_NAME


@contextlib.contextmanager
def log_to(path: Path) -> Iterator[Path]:
    """Kernels started inside append their stderr to ``path``; at the end an empty log is removed, and progress bars
    redrawn in place are kept as a terminal would show them (``settled``)."""
    with mock.patch.dict(os.environ, {LOG_ENV: str(path)}):
        try:
            yield path
        finally:
            if path.is_file() and not path.stat().st_size:
                path.unlink()
            elif path.is_file():
                settled(path)


def settled(path: Path) -> None:
    """Rewrite the log ``path`` as a terminal shows it: of each line's carriage-return redraws (tqdm's bars, a few a
    second for every run), the last one only — a cpu run's log otherwise holds thousands of them."""
    with path.open(encoding="utf-8", errors="replace", newline="") as f:  # newline="": keep the carriage returns
        text = f.read()
    lines = [next((part for part in reversed(line.split("\r")) if part), "") for line in text.split("\n")]
    path.write_text("\n".join(lines), encoding="utf-8")


@contextlib.contextmanager
def progress(folder: Path, out: TextIO | None = None, every: float = 5.0) -> Iterator[None]:
    """Kernels started inside report their training's progress to ``folder``/progress.log; the latest report is shown
    on ``out`` (the console) every ``every`` seconds while the block runs (module docstring). The file goes at the
    end."""
    out, path = out or sys.stdout, folder / "progress.log"
    terminal = out.isatty() and os.environ.get(SHOW_ENV) != "0"
    stop, shown = threading.Event(), [""]

    def follow() -> None:
        while not stop.wait(every):
            latest = _last_line(path)
            if latest and latest != shown[0]:
                out.write(("\x1b7" if not shown[0] else "\x1b8\x1b[K") + latest if terminal else f"\n    {latest}")
                out.flush()
                shown[0] = latest

    follower = threading.Thread(target=follow, daemon=True) if terminal or os.environ.get(SHOW_ENV) == "1" else None
    with mock.patch.dict(os.environ, {PROGRESS_ENV: str(path)}):
        try:
            if follower:
                follower.start()
            yield
        finally:
            stop.set()
            if follower:
                follower.join()
                out.write(("\x1b8\x1b[K" if terminal else "\n    ") if shown[0] else "")  # the result follows here
                out.flush()
            path.unlink(missing_ok=True)


def _last_line(path: Path) -> str:
    """The last whole line of ``path`` ('' where there is none yet)."""
    try:
        with path.open("rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - 4096))
            lines = f.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return ""
    return lines[-1].strip() if lines else ""


_SHOWN: list[threading.Event] = []  # the follower of the cell that called ``show_in_cell`` last


def show_in_cell(folder: Path, every: float = 5.0) -> bool:
    """Where a notebook runs in a kernel that no runner follows, its runs in workers or jobs report their progress to
    ``folder``/progress.log (odebook.training.train: the processes they start inherit the setting), and a display
    under the cell that called this shows ``running``'s lines every ``every`` seconds, until the next call. Nothing
    under the runner (it shows the same reports on the console: ``progress``) or outside a kernel. Whether it shows."""
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:
        return False
    shell = get_ipython()
    runner = os.environ.get(PROGRESS_ENV, "").strip() and not _SHOWN  # set, and not by an earlier call here
    if shell is None or getattr(shell, "kernel", None) is None or runner:
        return False
    for stop in _SHOWN:
        stop.set()
    path, stop = folder / "progress.log", threading.Event()
    path.unlink(missing_ok=True)
    os.environ[PROGRESS_ENV], _SHOWN[:] = str(path), [stop]
    handle = display({"text/plain": "waiting for the first report of a run …"}, raw=True, display_id=True)

    def follow() -> None:
        shown = ""
        while not stop.wait(every):
            lines = "\n".join(running(path))
            if lines and lines != shown:
                handle.update({"text/plain": lines}, raw=True)
                shown = lines
    threading.Thread(target=follow, daemon=True).start()
    return True


def running(path: Path, width: int = 24) -> list[str]:
    """The runs of ``path``'s reports (odebook.training.train) not yet at their last step, each its latest report
    behind a bar of ``width`` characters, then how many have finished."""
    try:
        with path.open("rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - 16384))
            lines = f.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return []
    latest = {}
    for line in lines:
        desc, sep, rest = line.rpartition(": step ")
        done, slash, steps = rest.partition(",")[0].partition("/")
        if sep and slash and done.isdigit() and steps.isdigit():
            latest[desc] = (int(done), int(steps), line)
    out = [f"{'█' * round(width * d / max(n, 1)):·<{width}} {line}" for d, n, line in latest.values() if d < n]
    finished = sum(d >= n for d, n, _ in latest.values())
    return out + [f"{finished} run{'s' * (finished != 1)} finished"] * bool(finished)


class KnownSettingsPassed(logging.Filter):
    """papermill warns of each parameter it passes that a notebook's parameters cell does not assign ("Passed unknown
    parameter: fresh"). The runner passes the machine's settings (``output_dir``, ``checkpoint_dir``, ``fresh``)
    and 02's ``models``, which no cell assigns (``profile.outside_cell``), and the settings a cell shows inside a
    group (``lr`` in ``training = {...}``); every notebook reads both by name, so those warnings are left off the
    console; any other stays (a name no study knows stops the notebook itself)."""

    UNKNOWN = "Passed unknown parameter: "

    def __init__(self) -> None:
        super().__init__()
        from odebook import studies

        schemas = [studies.schema(name) for name in studies.names()]
        self.names = {k for schema in schemas for keys in cell_groups(schema).values() for k in keys}.union(
            *map(outside_cell, schemas))

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not (message.startswith(self.UNKNOWN) and message.removeprefix(self.UNKNOWN) in self.names)


class AccountingOff(logging.Filter):
    """Where SLURM keeps no accounting (a one-node cluster, e.g. scripts/slurm_one_node.sh), ``sacct`` fails at every
    poll of submitit's jobs and submitit warns each time ("Bypassing sacct error …, status may be inaccurate"), then
    reads each job's state from its own files — which is how the runs come back. Those warnings would fill a report
    in red; the filter keeps them off it and says once, on the cell's standard output, what they meant. Any other
    message of submitit stays. ``install`` puts it on submitit's logger once per process."""

    MESSAGE = "Bypassing sacct error"

    def __init__(self) -> None:
        super().__init__()
        self.seen = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if self.MESSAGE not in record.getMessage():
            return True
        self.seen += 1
        if self.seen == 1:
            print("SLURM's accounting (sacct) does not answer here: submitit reads each job's state from its own files "
                  "(its warnings of this are left out)", flush=True)
        return False

    @classmethod
    def install(cls) -> AccountingOff:
        logger = logging.getLogger("submitit")
        found = next((f for f in logger.filters if isinstance(f, cls)), None)
        if found is None:
            found = cls()
            logger.addFilter(found)
        return found
