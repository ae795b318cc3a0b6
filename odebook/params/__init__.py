"""Strict, typed parameters for each study.

A study's parameters are a dataclass whose fields carry their constraints (``spec``). They are read from the
notebook's parameters cell (``Params.from_namespace``) or from a profile's YAML file (``load_yaml``), and every
problem — an unknown key, a wrong type, a value out of range, data that cannot be found — is collected into one
``ParamError`` naming the source, the key and what is allowed, before any compute starts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from odebook.params.lm import LMParams
from odebook.params.ode import GradientFlowParams, ODEHybridParams, ODESolverParams
from odebook.params.retrieval import SERIES, GDNScalingParams, MixedTrainingParams, RetrievalParams
from odebook.params.schema import INT_LIMIT, ParamError, Params, injected_names, load_yaml, spec
from odebook.params.time_indexed import TIME_INDEXED_MODELS, TimeIndexedParams

__all__ = ["ParamError", "Params", "LMParams", "ODEHybridParams", "GradientFlowParams", "ODESolverParams",
           "TimeIndexedParams", "TIME_INDEXED_MODELS", "RetrievalParams", "GDNScalingParams", "MixedTrainingParams",
           "SERIES", "STUDIES", "spec", "INT_LIMIT", "injected_names", "load_yaml", "validate_file",
           "validate_values"]

STUDIES: dict[str, type[Params]] = {cls.study: cls for cls in (GradientFlowParams, TimeIndexedParams,
                                                               GDNScalingParams, MixedTrainingParams,
                                                               ODESolverParams)}


def validate_values(study: str, path: str | Path) -> tuple[Params, dict[str, Any]]:
    """The one check of a profile's YAML file for ``study``: its schema's parameters and the file's own values
    (the overrides papermill injects)."""
    if study not in STUDIES:
        raise ParamError(f"{path}: no parameter schema for study '{study}' in odebook.params.STUDIES; known: "
                         f"{', '.join(STUDIES)}")
    values = load_yaml(path)
    return STUDIES[study].from_mapping(values, source=str(path)), values


def validate_file(study: str, path: str | Path) -> Params:
    """Validate a profile's YAML file for ``study`` against its schema (and the notebook's defaults)."""
    return validate_values(study, path)[0]
