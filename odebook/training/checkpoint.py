"""Checkpoints that survive interruption: written atomically, read with a clear error, keyed by what made them.

A checkpoint is one file: a first line ``odebook-checkpoint sha256=<hex>`` with the content hash of the rest, then
``torch.save``'s bytes. It is written to a temporary file in the same folder, flushed to disk and renamed over the old
one, so a run killed mid-write leaves the last good checkpoint in place and a half-written one is never read; the hash
is checked on every load, so a file changed or damaged after it was written is refused, never used. ``save`` replaces
and ``remove`` deletes only files that begin with that line: a file odebook did not write is never touched.
``fingerprint`` names a run's configuration (the parameters that affect it and the hash of the science code it runs,
``code_hash.study_hash``), so a checkpoint is only resumed or reused by the run that made it.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import random
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

__all__ = ["CheckpointError", "save", "load", "remove", "rng_state", "set_rng_state", "fingerprint"]


class CheckpointError(RuntimeError):
    """A checkpoint file that cannot be read; the message names the file."""


MAGIC = b"odebook-checkpoint sha256="


def _ours(path: Path) -> None:
    """Raise CheckpointError when ``path`` exists and odebook's ``save`` did not write it."""
    if path.exists():
        with open(path, "rb") as f:
            if f.read(len(MAGIC)) != MAGIC:
                raise CheckpointError(f"{path} is in the way of a checkpoint but was not written by odebook; it is "
                                      "neither replaced nor deleted: move it, or choose another checkpoint_dir")


def save(path: str | Path, state: dict[str, Any]) -> None:
    """Write ``state`` with its content hash to ``path`` atomically (temporary file, fsync, rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _ours(path)
    buffer = io.BytesIO()
    torch.save(state, buffer)
    payload = buffer.getvalue()
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(MAGIC + hashlib.sha256(payload).hexdigest().encode() + b"\n")
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load(path: str | Path) -> dict[str, Any]:
    """Read a checkpoint written by ``save``, checking its content hash; a file that is unreadable, not odebook's,
    or not what was written raises CheckpointError naming it."""
    afresh = "delete it to train that run afresh, or run with fresh: true"
    data = Path(path).read_bytes()
    header, _, payload = data.partition(b"\n")
    if not header.startswith(MAGIC):
        raise CheckpointError(f"checkpoint {path} has no odebook content hash (written by another program or an older "
                              f"odebook); {afresh}")
    if hashlib.sha256(payload).hexdigest().encode() != header[len(MAGIC):]:
        raise CheckpointError(f"checkpoint {path} does not hold what was written: its content hash differs from the "
                              f"one it was saved with (changed or damaged on disk); {afresh}")
    try:
        state = torch.load(io.BytesIO(payload), map_location="cpu", weights_only=False)
    except Exception as err:  # a hash that holds over bytes torch cannot read: one message that says which file
        raise CheckpointError(f"checkpoint {path} cannot be read ({type(err).__name__}: {err}); {afresh}") from err
    if not isinstance(state, dict) or "fingerprint" not in state:
        raise CheckpointError(f"checkpoint {path} is not an odebook checkpoint (no fingerprint)")
    return state


def remove(path: str | Path) -> None:
    """Delete the checkpoint at ``path`` if there is one; a file odebook did not write there raises CheckpointError."""
    path = Path(path)
    _ours(path)
    path.unlink(missing_ok=True)


def rng_state() -> dict[str, Any]:
    """Every random number generator a run draws from: Python's, numpy's, torch's CPU and CUDA generators."""
    return {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []}


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if state["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def fingerprint(*, code: str, **parts: Any) -> str:
    """A short hash of ``parts`` (JSON-able values: parameters, model name, seed, the model's repr …) and of ``code``,
    the hash of the science code the run depends on (``code_hash.study_hash``)."""
    return hashlib.sha256((json.dumps(parts, sort_keys=True, default=repr) + code).encode()).hexdigest()[:16]
