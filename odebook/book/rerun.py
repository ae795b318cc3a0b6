"""Re-run only what changed: a notebook whose published outputs were made from the same inputs is skipped.

A notebook's ``key`` is everything its numbers depend on: the science code it imports (the modules of odebook's
SCIENCE sub-packages it reaches, ``reports.odebook_hash``), the notebook's own source, its parameter file's contents,
the content hash of every data and tokenizer file its parameters make it read (``fingerprint.content_hashes``; data
from the hub: its source), the environment (the versions of the packages the runner records), the device, its
precision policy (``precision``: ODEBOOK_GPU_POLICY=t4 runs another policy on the same GPU) and the processor
(odebook.book.processor: another CPU rounds differently) and the runs' layout over processes and threads
(``notebook.layout``: it orders the sums). The runner writes the key into the published
manifest.json (``record``) and skips a notebook whose last run succeeded with the same key (``unchanged``), saying
so in one line; ``make run-all FRESH=1`` (``--fresh``) runs everything. Execution caches that key on code cells alone
(jupyter-cache, MyST-NB) reuse a stale result when a data file or a package changes; this key does not.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path

from odebook.book import notebook, processor, reports
from odebook.params import ParamError, Params, profile_chain
from odebook.training.fingerprint import content_hashes
from odebook.training.runtime import GPU_POLICY, device_name, precision_for, resolve_device

__all__ = ["KEY_FIELD", "key", "environment", "data_key", "unchanged", "why", "record", "skipped_line"]

KEY_FIELD = "run_key"  # where the manifest keeps it


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16] if path.is_file() else "missing"


def environment(packages: Iterable[str]) -> dict[str, str]:
    """Python's version and each package's installed version ('not installed' where it is absent)."""
    out = {"python": platform.python_version()}
    for pkg in packages:
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = "not installed"
    return out


def data_key(params: Params) -> dict[str, str]:
    """The content hash of each local file ``params`` make a run read, and where data comes from otherwise."""
    files = params.data_files() if hasattr(params, "data_files") else []
    try:
        hashes = content_hashes(files)
    except OSError as err:  # a missing file: the run will say so; never a match
        hashes = {"unreadable": f"{type(err).__name__}: {err}"}
    return {"source": os.environ.get("ODEBOOK_DATA", "hub"), **hashes}


def key(root: Path, profile: str, name: str, params: Params, packages: Iterable[str]) -> dict:
    """What notebook ``name``'s outputs under ``profile`` depend on (module docstring)."""
    return {"odebook": reports.odebook_hash(root, name), "notebook": _sha(root / "notebooks" / f"{name}.py"),
            "parameters": _parameters_sha(root / "params" / profile / f"{name}.yaml"), "data": data_key(params),
            "environment": environment(packages), "device": device_name(resolve_device()),
            "precision": precision(), "processor": processor.describe(), "threads": notebook.layout(params)}


def _parameters_sha(path: Path) -> str:
    """The parameter file's hash, with those of the files it builds on (``base:``; odebook.params.profile_chain)."""
    try:
        files = profile_chain(path)[1]
    except ParamError:  # the runner refuses it before any run
        files = [path]
    return "+".join(_sha(f) for f in files)


def precision() -> str:
    """The precision policy the notebooks run under, in words, with ODEBOOK_GPU_POLICY where it chose it (a T4's
    policy on an H100 computes other numbers than the H100's own bf16)."""
    device = resolve_device()
    try:
        text = str(precision_for(device))
    except ValueError as err:  # a wrong ODEBOOK_GPU_POLICY: the notebook raises it; never a match
        return str(err)
    policy = os.environ.get(GPU_POLICY, "")
    return f"{text} ({GPU_POLICY}={policy})" if policy and device.type == "cuda" else text


def _manifest(folder: Path) -> dict:
    try:
        return json.loads((folder / "manifest.json").read_text())
    except (OSError, ValueError):
        return {}


def unchanged(out_root: Path, name: str, now: dict) -> dict:
    """The published manifest of ``name`` when its last run succeeded with key ``now`` (nothing to re-run), else {}.
    A failure since (a ``<name>.failed`` folder) or a report that is missing is never unchanged."""
    manifest = _manifest(out_root / name)
    if (manifest.get("status") != "ok" or manifest.get(KEY_FIELD) != now or (out_root / f"{name}.failed").exists()
            or not (out_root / name / f"{name}.ipynb").is_file()):
        return {}
    return manifest


def why(out_root: Path, name: str, now: dict) -> str:
    """Why ``name`` runs (``unchanged`` found it not so), in a few words for the console: no earlier run, a failed
    or unfinished one, or the parts of the key that changed since the published run (e.g. "parameters, data")."""
    manifest = _manifest(out_root / name)
    if (out_root / f"{name}.failed").exists():
        return "its last run failed"
    if not manifest or not (out_root / name / f"{name}.ipynb").is_file():
        return "no earlier run here"
    before = manifest.get(KEY_FIELD) or {}
    changed = [part for part in [*now, *(k for k in before if k not in now)] if before.get(part) != now.get(part)]
    return f"{', '.join(changed)} changed since its run of {manifest.get('finished', '?')[:16].replace('T', ' ')}" \
        if changed else "its last run did not finish"


def record(folder: Path, now: dict) -> None:
    """Write key ``now`` into the manifest.json of a run just published in ``folder``."""
    manifest = _manifest(folder)
    if manifest:
        (folder / "manifest.json").write_text(json.dumps({**manifest, KEY_FIELD: now}, indent=2))


def skipped_line(i: int, total: int, name: str, manifest: dict) -> str:
    """The one line the runner prints for a notebook it skips."""
    when = manifest.get("finished", "?").replace("T", " ").removesuffix("+00:00")
    return (f"[{i}/{total}] {name}: unchanged since its run of {when} UTC (code, parameters, data, packages, "
            f"device) — skipped; FRESH=1 re-runs it")
