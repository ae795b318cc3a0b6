"""A profile inside JupyterLab and Colab: with ``ODEBOOK_PROFILE=cpu`` a notebook's "Run all" uses
params/cpu/<notebook>.yaml, as ``make run-all PROFILE=cpu`` does.

A notebook's parameters cell holds the t4 values (the sources' scale, for Colab's GPU). When ``$ODEBOOK_PROFILE``
names a profile, ``notebook.start`` replaces each value that is still the parameters cell's own by the profile
file's; a value changed in the cell, or injected by papermill (``-p``), is kept, and the notebook prints which.
The file comes from the checkout's params/ folder, or outside a checkout (Colab's pip install) from the repository
(``odebook.book.colab.PARAMS_URL``). The runner clears the variable for its kernels: its own profile arrives through
papermill.
"""

from __future__ import annotations

import dataclasses
import os
import urllib.request
from collections.abc import Mapping, MutableMapping
from pathlib import Path
from typing import Any

from odebook.book import colab
from odebook.params import LMParams, ParamError, Params, injected_names, profile_chain
from odebook.params.cell import cell_values, set_cell_value
from odebook.params.schema import yaml_mapping

__all__ = ["PROFILE_ENV", "APPLIED", "apply_profile", "profile_values", "outside_cell", "MACHINE_SETTINGS"]

PROFILE_ENV = "ODEBOOK_PROFILE"
APPLIED = "_odebook_profile_applied"  # in a notebook's globals: the settings outside its cell the last profile set


def profile_values(profile: str, study: str, root: Path | None) -> tuple[str, dict[str, Any]]:
    """(where it was read, its values) of params/<profile>/<study>.yaml: in the checkout at ``root``, else from the
    repository's address (colab.PARAMS_URL)."""
    if root is not None:
        params = root / "params"
        if not profile or not (params / profile).is_dir():  # a folder name, as the runner requires
            known = sorted(p.name for p in params.iterdir() if p.is_dir()) if params.is_dir() else []
            raise ParamError(f"{PROFILE_ENV}={profile!r}: not a folder of {params}; known profiles: {', '.join(known)}")
        path = params / profile / f"{study}.yaml"
        return str(path), profile_chain(path)[0]
    url = f"{colab.PARAMS_URL}/{profile}/{study}.yaml"
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            data = response.read()
    except OSError as err:
        raise ParamError(f"{PROFILE_ENV}={profile!r}: could not read {url} ({err}); unset {PROFILE_ENV} to run the "
                         "parameters cell's values, or open the notebook from a checkout") from None
    return url, yaml_mapping(data, source=url)


def outside_cell(schema: type[Params]) -> frozenset[str]:
    """The fields of ``schema`` its parameters cell does not hold (``Params.cell_fields``): the machine's settings,
    and any the study declares elsewhere (02's ``models``, its arms module's)."""
    return frozenset(f.name for f in dataclasses.fields(schema)) - frozenset(schema.cell_fields())


# every study's machine settings, declared once on LMParams, which every study's parameters derive from (a test holds
# it): what papermill may be passed for any notebook and what no result depends on
MACHINE_SETTINGS = outside_cell(LMParams)


def apply_profile(schema: type[Params], namespace: MutableMapping[str, Any] | Mapping[str, Any],
                  root: Path | None) -> str:
    """Apply ``$ODEBOOK_PROFILE``'s file to a notebook's globals (``namespace``) where they still hold the parameters
    cell's values; return a line saying what was applied and kept ("" when the variable is unset). The file is
    validated on its own first, so a wrong value names the file. No parameters cell assigns a machine setting
    (``spec(machine=True)``) or 02's ``models`` (``outside_cell``), so "Run all" does not put one back: a value the
    last run's profile set there, and nothing has changed since, goes back to its default first (it was the
    profile's, not the user's)."""
    cell = schema().to_dict()  # the parameters cell's values (a test holds them to the schema's defaults)
    for k, v in namespace.pop(APPLIED, {}).items():  # type: ignore[union-attr]
        if namespace.get(k) == v:
            namespace[k] = cell[k]  # type: ignore[index]
    profile = os.environ.get(PROFILE_ENV, "").strip()
    if not profile:
        return ""
    source, values = profile_values(profile, schema.study, root)
    checked = schema.from_mapping(values, source=source)
    injected = injected_names(namespace.get("In", ()))
    holds, problems = cell_values(schema, namespace)
    if problems:
        schema.from_mapping(holds, "parameters cell", problems)  # raises: one message naming every problem
    kept = sorted(k for k in values if k in injected or (k in holds and holds[k] != cell[k]))
    applied = {k: getattr(checked, k) for k in values if k not in kept}
    for k, v in applied.items():
        set_cell_value(schema, namespace, k, v)  # type: ignore[arg-type]  # a notebook's globals()
    outside = outside_cell(schema)
    namespace[APPLIED] = {k: v for k, v in applied.items() if k in outside}  # type: ignore[index]
    return (f"profile {profile} ({source}): {len(applied)} values applied"
            + (f"; kept your own {', '.join(kept)}" if kept else ""))
