"""Strict, typed parameters: the floor every study's parameters stand on (each study's own are in its package,
odebook.studies).

A study's parameters are a dataclass whose fields carry their constraints (``spec``). They are read from the
notebook's parameters cell (``Params.from_namespace``) or from a profile's YAML file (``load_yaml``), and every
problem — an unknown key, a wrong type, a value out of range, data that cannot be found — is collected into one
``ParamError`` naming the source, the key and what is allowed, before any compute starts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from odebook.params.cell import injected_names
from odebook.params.lm import LMParams, TextCorpusParams
from odebook.params.schema import INT_LIMIT, ParamError, Params, load_yaml, spec
from odebook.params.seeds import SeedPlan

__all__ = ["ParamError", "Params", "LMParams", "TextCorpusParams", "SeedPlan", "spec", "INT_LIMIT", "injected_names",
           "load_yaml", "profile_chain", "parse_settings"]


def profile_chain(path: str | Path) -> tuple[dict[str, Any], list[Path]]:
    """A profile file's values over those of its ``base:`` — the same notebook's file in another profile folder
    beside it (``base: smoke`` in params/mine/<notebook>.yaml reads params/smoke/<notebook>.yaml first),
    which may have a base of its own — and the files read, its own first."""
    files = [Path(path)]
    values = load_yaml(files[0])
    while "base" in values:
        base = values.pop("base")
        found = files[0].parent.parent / str(base) / files[0].name
        if not isinstance(base, str) or not base or "/" in base or base.startswith(".") or found in files \
                or not found.is_file():
            raise ParamError(f"{files[-1]}: key 'base' = {base!r}: the name of another profile folder beside "
                             f"{files[0].parent.name} holding {files[0].name}, not one already read "
                             f"({', '.join(f.parent.name for f in files)})")
        files.append(found)
        values = {**load_yaml(found), **values}
    return values, files


def parse_settings(text: str) -> dict[str, Any]:
    """``make run-all SET="steps=40 n_seeds=2"``: each ``key=value`` (the value read as YAML, as in a profile file)."""
    settings = {}
    for item in text.split():
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ParamError(f"SET: {item!r} is not key=value (e.g. SET=\"steps=40 n_seeds=2\")")
        if key in settings:
            raise ParamError(f"SET: key {key!r} is given twice ({key}={settings[key]!r}, then {item}); give it once")
        try:
            settings[key] = yaml.safe_load(value) if value else ""
        except yaml.YAMLError as err:
            raise ParamError(f"SET: {item!r}: the value is not YAML ({getattr(err, 'problem', err)})") from None
    return settings
