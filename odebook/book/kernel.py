"""The kernel the runner executes a notebook in: this very interpreter, with the allocator settings, and its own
messages in the run's ``kernel.log`` rather than on the console.

A kernel's cells report through Jupyter's messages (they end up in the executed notebook); what the kernel process
itself writes to its stderr — ipykernel's log, a library's message at start-up or exit — goes to the file that
``log_to`` names for the notebook being run. On Ctrl-C the kernel is interrupted and shut down at once, and ipykernel
then logs an error of its own as it replies on a socket its shutdown already closed: on the console that read as if
the book had failed; in the log it is one more line of a run that was interrupted.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

from odebook.book.profile import MACHINE_SETTINGS, PROFILE_ENV
from odebook.params.cell import cell_groups
from odebook.training.runtime import ALLOCATOR_ENV

__all__ = ["KERNEL_NAME", "LOG_ENV", "for_this_python", "log_to", "KnownSettingsPassed"]

KERNEL_NAME = "odebook-runner"
LOG_ENV = "ODEBOOK_KERNEL_LOG"  # where a kernel started now appends its stderr
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
    """Kernels started inside append their stderr to ``path``; an empty log is removed at the end."""
    with mock.patch.dict(os.environ, {LOG_ENV: str(path)}):
        try:
            yield path
        finally:
            if path.is_file() and not path.stat().st_size:
                path.unlink()


class KnownSettingsPassed(logging.Filter):
    """papermill warns of each parameter it passes that a notebook's parameters cell does not assign ("Passed unknown
    parameter: fresh"). The runner passes the machine's settings (``output_dir``, ``checkpoint_dir``, ``fresh``),
    which no cell assigns (``spec(machine=True)``), and the settings a cell shows inside a group (``lr`` in
    ``training = {...}``); every notebook reads both by name, so those warnings are left off the console; any other
    stays (a name no study knows stops the notebook itself)."""

    UNKNOWN = "Passed unknown parameter: "

    def __init__(self) -> None:
        super().__init__()
        from odebook import studies

        grouped = {k for name in studies.names() for keys in cell_groups(studies.schema(name)).values() for k in keys}
        self.names = MACHINE_SETTINGS | grouped

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not (message.startswith(self.UNKNOWN) and message.removeprefix(self.UNKNOWN) in self.names)
