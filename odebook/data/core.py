"""What every data module shares: a corpus as three text splits, and the error that says data are missing."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Corpus", "DataError"]


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
