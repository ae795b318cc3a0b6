"""Strict, typed parameters for each study.

A study's parameters are a dataclass whose fields carry their constraints (``spec``). They are read from the
notebook's parameters cell (``Params.from_namespace``) or from a profile's YAML file (``load_yaml``), and every
problem — an unknown key, a wrong type, a value out of range, data that cannot be found — is collected into one
``ParamError`` naming the source, the key and what is allowed, before any compute starts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from odebook.params.lm import LMParams
from odebook.params.ode import GradientFlowParams, ODEHybridParams, ODESolverParams
from odebook.params.retrieval import SERIES, GDNScalingParams, MixedTrainingParams, RetrievalParams
from odebook.params.cell import injected_names
from odebook.params.schema import INT_LIMIT, ParamError, Params, load_yaml, spec
from odebook.params.seeds import SeedPlan
from odebook.params.time_indexed import TIME_INDEXED_MODELS, TimeIndexedParams

__all__ = ["ParamError", "Params", "LMParams", "ODEHybridParams", "GradientFlowParams", "ODESolverParams",
           "TimeIndexedParams", "TIME_INDEXED_MODELS", "RetrievalParams", "GDNScalingParams", "MixedTrainingParams",
           "SERIES", "SeedPlan", "STUDIES", "spec", "INT_LIMIT", "injected_names", "load_yaml", "validate_file",
           "validate_values", "profile_chain", "parse_settings"]

STUDIES: dict[str, type[Params]] = {cls.study: cls for cls in (GradientFlowParams, TimeIndexedParams,
                                                               GDNScalingParams, MixedTrainingParams,
                                                               ODESolverParams)}


def validate_values(study: str, path: str | Path) -> tuple[Params, dict[str, Any]]:
    """The one check of a profile's YAML file for ``study``: its schema's parameters and the file's own values
    (the overrides papermill injects)."""
    if study not in STUDIES:
        raise ParamError(f"{path}: no parameter schema for study '{study}' in odebook.params.STUDIES; known: "
                         f"{', '.join(STUDIES)}")
    values = profile_chain(path)[0]
    return STUDIES[study].from_mapping(values, source=str(path)), values


def profile_chain(path: str | Path) -> tuple[dict[str, Any], list[Path]]:
    """A profile file's values over those of its ``base:`` — the same notebook's file in another profile folder
    beside it (``base: smoke`` in params/mine/01_gradient_flow.yaml reads params/smoke/01_gradient_flow.yaml first),
    which may have a base of its own — and the files read, its own first."""
    files = [Path(path)]
    values = load_yaml(files[0])
    while "base" in values:
        base = values.pop("base")
        found = files[0].parent.parent / str(base) / files[0].name
        if not isinstance(base, str) or not base or "/" in base or found in files or not found.is_file():
            raise ParamError(f"{files[-1]}: key 'base' = {base!r}: the name of another profile folder beside "
                             f"{files[0].parent.name} holding {files[0].name}, not one already read "
                             f"({', '.join(f.parent.name for f in files)})")
        files.append(found)
        values = {**load_yaml(found), **values}
    return values, files


def validate_file(study: str, path: str | Path) -> Params:
    """Validate a profile's YAML file for ``study`` against its schema (and the notebook's defaults)."""
    return validate_values(study, path)[0]


def parse_settings(text: str) -> dict[str, Any]:
    """``make run-all SET="steps=40 n_seeds=2"``: each ``key=value`` (the value read as YAML, as in a profile file)."""
    settings = {}
    for item in text.split():
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ParamError(f"SET: {item!r} is not key=value (e.g. SET=\"steps=40 n_seeds=2\")")
        try:
            settings[key] = yaml.safe_load(value) if value else ""
        except yaml.YAMLError as err:
            raise ParamError(f"SET: {item!r}: the value is not YAML ({getattr(err, 'problem', err)})") from None
    return settings
