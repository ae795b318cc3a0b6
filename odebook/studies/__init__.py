"""The book's studies, one package each: ``odebook/studies/<NN_name>/`` beside ``notebooks/NN_name.py`` and
``params/<profile>/NN_name.yaml`` — the same name in all three places. A study's package holds what only it uses: its
parameters (``Params``), its arms, its analysis (claims declared before the runs, the values they read, tables,
verdicts) and its figures; what two studies share stays on odebook's floors (nn, data, models, params, training, study).

A study is found by its name (``load``), so nothing imports every study: a notebook's code hash
(odebook.training.code_hash) covers its own package and what that imports, and an edit to one study stales that
study's report alone. A package name starts with its number, so it is imported from a string, here and only here.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType
from typing import Any

from odebook.params import ParamError, Params, profile_chain

__all__ = ["names", "load", "schema", "validate_values", "validate_file"]

HERE = Path(__file__).resolve().parent


def names() -> list[str]:
    """Every study's name (``NN_name``), in order."""
    return sorted(p.name for p in HERE.glob("[0-9][0-9]_*") if (p / "__init__.py").is_file())


def load(name: str) -> ModuleType:
    """The package of study ``name`` (``odebook/studies/<name>/``)."""
    if name not in names():
        raise ParamError(f"no study {name!r} in {HERE} (a package per notebook); known: {', '.join(names())}")
    return importlib.import_module(f"{__name__}.{name}")


def schema(name: str) -> type[Params]:
    """The parameters of study ``name``: its package's ``Params``."""
    return load(name).Params


def validate_values(name: str, path: str | Path) -> tuple[Params, dict[str, Any]]:
    """The one check of a profile's YAML file for study ``name``: its parameters and the file's own values (the
    overrides papermill injects), its ``base:`` chain read first (odebook.params.profile_chain)."""
    values = profile_chain(path)[0]
    return schema(name).from_mapping(values, source=str(path)), values


def validate_file(name: str, path: str | Path) -> Params:
    """Validate a profile's YAML file for study ``name`` against its parameters (and the notebook's defaults)."""
    return validate_values(name, path)[0]
