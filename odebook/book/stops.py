"""How a run of the book stops: its exit codes, and the one line it prints for each way it can stop early — a wrong
parameter, Ctrl-C, SIGTERM, a full disk — with nothing published replaced and every checkpoint kept, so the same
command resumes (odebook.book.runner's ``main``)."""

from __future__ import annotations

import errno
import logging
import shutil
import signal
import sys
from pathlib import Path

from odebook.params import ParamError

__all__ = ["EXIT_NOTEBOOK_FAILED", "EXIT_BAD_PARAMETERS", "EXIT_INTERRUPTED", "EXIT_TERMINATED", "EXIT_DISK_FULL",
           "Terminated", "on_sigterm", "disk_full", "report"]

EXIT_NOTEBOOK_FAILED = 1  # a notebook raised: the others ran, the failed one is rendered with its error
EXIT_BAD_PARAMETERS = 2   # a parameter file, profile or notebook name is wrong, or it is already running: nothing ran
EXIT_INTERRUPTED = 130    # Ctrl-C: the checkpoints written so far stay, the same command resumes
EXIT_TERMINATED = 143     # SIGTERM (timeout, systemd, a SLURM pre-emption): handled as Ctrl-C is
EXIT_DISK_FULL = 28       # the disk filled up (ENOSPC): the run stopped there, earlier outputs and checkpoints kept


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the run is, so that it unwinds as Ctrl-C does: the kernel shut down, the staging folder
    and the lock released, the published outputs and the checkpoints kept."""


def _terminate(signum, frame) -> None:
    raise Terminated


def on_sigterm() -> None:
    """From now on SIGTERM stops this process as Ctrl-C does (``Terminated``)."""
    signal.signal(signal.SIGTERM, _terminate)


def disk_full(err: BaseException) -> bool:
    return isinstance(err, OSError) and err.errno == errno.ENOSPC


def report(err: BaseException, outputs: Path) -> int:
    """Print ``err``'s one line and return the exit code; an error that is none of these is raised again."""
    if isinstance(err, ParamError):
        print(f"error: {err}", file=sys.stderr)
        return EXIT_BAD_PARAMETERS
    if disk_full(err):
        where = next((p for p in (outputs, *outputs.parents) if p.is_dir()), Path.cwd())
        print(f"error: the disk holding {outputs} is full ({shutil.disk_usage(where).free / 2**20:.0f} MiB free; "
              f"writing {err.filename or 'a file'} failed): free some space and run the same command again "
              "(finished runs and checkpoints are kept)", file=sys.stderr)
        return EXIT_DISK_FULL
    if isinstance(err, KeyboardInterrupt):
        # nbclient's cell task, interrupted with the kernel, ends with an exception no one retrieves: at exit asyncio
        # would log it, a dump of 145-230 lines after this one (issue 71). The run has stopped; its line says it all.
        logging.getLogger("asyncio").disabled = True
        what = "terminated (SIGTERM)" if isinstance(err, Terminated) else "interrupted"
        print(f"\n{what}; resume with the same command (finished runs and checkpoints are kept)", file=sys.stderr)
        return EXIT_TERMINATED if isinstance(err, Terminated) else EXIT_INTERRUPTED
    raise err
