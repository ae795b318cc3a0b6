"""A notebook's parameters cell: the settings it holds, the groups it shows them in, the names papermill injected
after it, and the values it holds, read from (and written into) the notebook's globals.

A group is one assignment of a dict whose keys are the fields' own names (``Params.groups``), e.g.
``training = {"steps": 500, "lr": 3e-4}``: the cell reads in a few lines, and every setting keeps its one name —
``papermill -p lr 0.01``, a profile file's ``lr: 0.01`` and the group's ``"lr"`` are the same setting. A name
papermill injected wins over its group's entry; an entry a group leaves out (papermill ``-y`` replaces the whole
dict) takes its default."""

from __future__ import annotations

import ast
import dataclasses
import difflib
from collections.abc import Mapping, MutableMapping
from typing import Any

__all__ = ["INJECTED_CELL_HEADER", "injected_names", "cell_groups", "cell_values", "set_cell_value"]

INJECTED_CELL_HEADER = "# Parameters"  # papermill's first line of the cell it injects after the parameters cell


def injected_names(history: Any) -> set[str]:
    """Names assigned by papermill's injected-parameters cell(s) in an IPython input history (``In``)."""
    names: set[str] = set()
    if not isinstance(history, (list, tuple)):
        return names
    for source in history:
        if not (isinstance(source, str) and source.startswith(INJECTED_CELL_HEADER)):
            continue
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        names.update(t.id for node in tree.body if isinstance(node, ast.Assign)
                     for t in node.targets if isinstance(t, ast.Name))
    return names


def cell_groups(schema: type) -> dict[str, tuple[str, ...]]:
    """Each dict of ``schema``'s parameters cell and the fields it holds, in the order they are declared: the
    ``groups`` of the class and of the classes it derives from, joined by group name."""
    member: dict[str, str] = {}
    for cls in reversed(schema.__mro__):
        for group, keys in vars(cls).get("groups", {}).items():
            member.update(dict.fromkeys(keys, group))
    fields = {f.name: f for f in dataclasses.fields(schema)}
    wrong = sorted(k for k in member if k not in fields or fields[k].metadata.get("machine")) + sorted(
        g for g in member.values() if g in fields)
    if wrong:
        raise TypeError(f"{schema.__name__}.groups: {', '.join(wrong)} (not a study field, or a group named as one)")
    groups: dict[str, tuple[str, ...]] = {}
    for name in fields:
        if name in member:
            groups[member[name]] = (*groups.get(member[name], ()), name)
    return groups


def cell_values(schema: type, namespace: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The values of ``schema``'s fields a notebook's globals hold: a grouped field from its group (a name papermill
    injected wins; an entry the group lacks is its default), any other from its own name; and the problems, one line
    each, of a group that is not a dict or names a key it does not hold."""
    injected = injected_names(namespace.get("In", ()))
    defaults = schema().to_dict()
    values = {k: namespace[k] for k in defaults if k in namespace}
    errors = []
    groups = cell_groups(schema)
    home = {k: g for g, keys in groups.items() for k in keys}
    for group, keys in groups.items():
        given = namespace.get(group)
        if given is None:
            continue  # no such cell (a script's own globals): the fields' own names, as for any other
        if not isinstance(given, Mapping):
            errors.append(f"'{group}' = {given!r}: must be a dict of the settings {', '.join(keys)} (was the name "
                          "taken by an import or an assignment before notebook.start?)")
            continue
        for key in sorted(set(given) - set(keys), key=str):
            near = difflib.get_close_matches(str(key), keys, n=1)
            hint = f" (it is in '{home[key]}')" if key in home else f" (did you mean '{near[0]}'?)" if near else ""
            errors.append(f"unknown key '{key}' in '{group}'{hint}; the group holds {', '.join(keys)}")
        for key in keys:
            if key not in injected:
                values[key] = given.get(key, defaults[key])
    return values, errors


def set_cell_value(schema: type, namespace: MutableMapping[str, Any], key: str, value: Any) -> None:
    """Put ``value`` where the parameters cell holds ``key``: in its group (a new dict: the cell's own is not
    changed in place), else under its own name."""
    group = next((g for g, keys in cell_groups(schema).items() if key in keys), None)
    if group is not None and isinstance(namespace.get(group), Mapping):
        namespace[group] = {**namespace[group], key: value}
    else:
        namespace[key] = value
