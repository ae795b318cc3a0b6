"""The fingerprint of a training run: what a checkpoint must match to be resumed or reused.

``run_fingerprint`` is the one rule, used by ``odebook.study.experiment.train_once`` (the notebooks) and by
``scripts/train_ddp.py``: the model's architecture, the training configuration, the content hash of every data file
the run read (corpus files, mirror files, the tokenizer's files: a file changed in place, or another mirror, is
another run), the parameters that change the arithmetic (``arithmetic``: all but where outputs go, which seeds,
logging and checkpoint cadence), whatever else the caller names, and the science code the study runs
(``code_hash.study_hash``: the rule its report's staleness follows too).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from torch import nn

from odebook.training import checkpoint as ckpt
from odebook.training.code_hash import study_hash

__all__ = ["not_arithmetic", "arithmetic", "content_hashes", "run_key", "stored_key", "run_fingerprint"]


def not_arithmetic(params: Any) -> tuple[str, ...]:
    """The fields of a study's parameters (a dataclass) marked operational where they are declared
    (``odebook.params.spec(operational=True)``): where outputs go, which seeds run (the seed is in each run's tag),
    logging, checkpoint cadence and where the runs execute — not one number of a run."""
    return tuple(f.name for f in dataclasses.fields(params) if f.metadata.get("operational"))


def arithmetic(params: Any) -> dict[str, Any]:
    """A study's parameters (a dataclass) but its operational ones (``not_arithmetic``)."""
    skip = set(not_arithmetic(params))
    return {k: v for k, v in dataclasses.asdict(params).items() if k not in skip}


def run_key(params: Any) -> dict[str, Any]:
    """What a study's parameters contribute to each of its runs' fingerprints: the study, its ``arithmetic``
    parameters and the content hashes of the data files they name (``params.data_files()``)."""
    files = params.data_files() if hasattr(params, "data_files") else []
    return {"study": params.study, **arithmetic(params), "data": content_hashes(files)}


def stored_key(key: Mapping[str, Any] | None, task: Mapping[str, Any], *, scored: bool) -> dict[str, Any]:
    """The key a run's checkpoint is saved and looked up under (study.experiment.run_one): the study's ``run_key``
    (its parameters and the content hashes of every data file), the task's own description under its own name, and
    whether the run is scored on the test split. The task's description never replaces the study's entries: its
    "data" names the corpus and its token counts, which an edit in place of the same size leaves unchanged."""
    return {**(key or {}), "task": dict(task), "scored": scored}


def content_hashes(files: Iterable[str | Path]) -> dict[str, str]:
    """sha256 of each file (a folder: of each file in it), keyed by its name, not its folder: the same data in
    another place is the same data."""
    out = {}
    for f in map(Path, files):
        for item in sorted(f.iterdir()) if f.is_dir() else [f]:
            st = item.stat()
            out[item.name if item == f else f"{f.name}/{item.name}"] = _sha256(str(item.resolve()), st.st_size,
                                                                               st.st_ctime_ns, st.st_ino)
    return out


@functools.lru_cache(maxsize=64)
def _sha256(path: str, size: int, ctime_ns: int, inode: int) -> str:
    """Read once per change of the file: its size, inode and status-change time are the key (every write moves the
    ctime, which, unlike the modification time, no tool can set back)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def run_fingerprint(*, model: nn.Module, config: Any, data_files: Iterable[str | Path] = (),
                    key: Mapping[str, Any] | None = None, **parts: Any) -> str:
    """The fingerprint of training ``model`` with ``config`` on ``data_files`` (module docstring) for the study whose
    ``run_key`` is ``key``; ``parts`` are JSON-able values the caller adds (its run's tag, the batch shape …)."""
    return ckpt.fingerprint(**parts, key=key, arch=repr(model), train=config, data=content_hashes(data_files),
                            code=study_hash((key or {}).get("study")))
