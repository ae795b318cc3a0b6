"""What every data module shares: a corpus as three text splits, and the error that says data are missing."""

from __future__ import annotations

import stat
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Corpus", "DataError", "NOT_REGULAR", "is_special"]

NOT_REGULAR = "is not a regular file (a folder, device or pipe)"


def is_special(path: Path) -> bool:
    """True when ``path`` (links followed) exists but is not a regular file: reading a FIFO blocks for good, a device
    such as /dev/zero never ends, a folder cannot be read. Every data file is checked with this before it is read."""
    try:
        return not stat.S_ISREG(path.stat().st_mode)
    except OSError:  # missing: the callers say "no such file" in their own words
        return False


class DataError(RuntimeError):
    """Data could not be found or loaded; the message says how to provide them."""


@dataclass(frozen=True)
class Corpus:
    """Three disjoint text splits and a sentence saying where they came from."""

    name: str
    train: str
    valid: str
    test: str
    description: str
