"""The budget's records in a profile's outputs folder: what this processor took for a study's earlier runs over what
was estimated (``CALIBRATION``: ``record`` keeps them, ``calibrated`` scales the next estimate by them), and the JSON
files the budget keeps (``kept``, ``keep``: read whole, written whole, started again where damaged or of another
shape). A ratio outside ``PLAUSIBLE`` is no calibration — a run that reused its stored runs, or a machine that stalled —
and is neither kept nor used (the budget line says how many it left out)."""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
from pathlib import Path
from typing import Any

from odebook.book import processor

__all__ = ["CALIBRATION", "KEEP", "PLAUSIBLE", "calibrated", "record", "kept", "keep"]

CALIBRATION = ".budget-calibration.json"  # in a profile's outputs folder: {processor: {study: [ratios]}}
KEEP = 5  # the latest ratios a factor is the median of
PLAUSIBLE = (0.05, 20.0)  # measured over estimated: outside this, the estimate is not what went wrong


def calibrated(budget: Any, folder: Path) -> Any:
    """``budget`` (odebook.book.budget.Budget) scaled by the median of the last ``KEEP`` measured-over-estimated
    ratios of its study's runs on this processor recorded in ``folder`` (``record``); as it is where there are
    none."""
    recorded = _ratios(kept(folder / CALIBRATION)).get(processor.describe(), {}).get(budget.study, [])
    ratios = [r for r in recorded if _plausible(r)]
    budget = dataclasses.replace(budget, implausible=len(recorded) - len(ratios))
    return dataclasses.replace(budget, factor=statistics.median(ratios), calibrations=len(ratios)) if ratios else budget


def record(folder: Path, budget: Any, seconds: float) -> None:
    """Keep a finished run's measured ``seconds`` over its uncalibrated estimate, for this processor and study."""
    ratio = round(seconds / budget.seconds, 4)
    if not _plausible(ratio):
        return
    table = _ratios(kept(folder / CALIBRATION))
    ratios = table.setdefault(processor.describe(), {}).setdefault(budget.study, [])
    ratios[:] = (ratios + [ratio])[-KEEP:]
    keep(folder / CALIBRATION, table)


def _plausible(ratio: Any) -> bool:
    return isinstance(ratio, (int, float)) and PLAUSIBLE[0] <= ratio <= PLAUSIBLE[1]


def _ratios(table: Any) -> dict:
    """A calibration record as {processor: {study: [ratios]}}; {} where it has another shape (started again)."""
    ok = isinstance(table, dict) and all(isinstance(studies, dict) and all(
        isinstance(ratios, list) and all(isinstance(r, (int, float)) for r in ratios) for ratios in studies.values())
        for studies in table.values())
    return table if ok else {}


def kept(path: Path) -> dict:
    """A JSON record the budget keeps in the outputs folder (calibrations, probes); {} where there is none yet or it
    is damaged: it is started again."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def keep(path: Path, table: dict) -> None:
    """Write a record ``kept`` reads, whole or not at all (a temporary file renamed over it): notebooks of one
    profile run side by side, and one must never read another's half-written record."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(table, indent=1))
    os.replace(tmp, path)
