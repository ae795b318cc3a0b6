"""Two runs of the book compared, the way a re-make is judged (on another processor, or after a refactor that must
not change a number): for each study in both folders, every verdict by its claim, and every other value of its
results.json except those that measure the machine (times, speeds, memory, load) or how a run was obtained (trained,
resumed or reused). Verdicts are matched by claim, so a claim present in one run only is listed as such; values by
their path in results.json, a verdict's fields under its claim. What one side lacks — a study, a section, a value — is
listed too, never dropped: "every one the same" means the same things on both sides.

    python -m odebook.book.compare reports/cpu outputs/cpu
    # exit status 1 when a verdict differs or either side lacks something; 2 when an input is damaged (named)
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import math
import re
from collections.abc import Iterator
from pathlib import Path

from odebook.book.profile import MACHINE_SETTINGS
from odebook.study.stats import outcome_word

__all__ = ["MACHINE", "HISTORY", "Comparison", "Damaged", "flatten", "compare_study", "compare", "read", "main"]

# a value whose path names one of these measures the machine or the run's history, not the science
MACHINE = re.compile(r"second|_s\b|ms_per|time|timing|speed|faster|tokens_per_s|memory|peak|wall|load|origin|"
                     r"resumed|crossover|kv cach|generated", re.IGNORECASE)
HISTORY = re.compile(r"^(\d+ )?(trained|resumed|reused)$")  # a run's origin, or a table's count by it ("6 reused")


def flatten(value, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], object]]:
    """Every leaf of a results.json with its path; the verdict list keyed by claim, not by position."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "verdicts" and isinstance(item, list):
                for v in item:
                    yield from flatten({k: x for k, x in v.items() if k != "claim"}, (*path, key, v["claim"]))
            else:
                yield from flatten(item, (*path, str(key)))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from flatten(item, (*path, str(i)))
    else:
        yield path, value


def _same(a, b, rtol: float) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        if math.isnan(a) and math.isnan(b):
            return True
        return a == b or abs(a - b) <= rtol * max(abs(a), abs(b))
    return a == b


@dataclasses.dataclass
class Comparison:
    """One study's two results.json compared: verdicts whose outcome (held, not held, equivalent, inconclusive, not
    testable at this scale, …) differs (claim → (old, new)), claims in one run only, how many other values were
    compared — a verdict's full text among them — which differ beyond ``rtol`` (path → (old, new)), and the values
    (a whole section, summed up by its path) in one run only."""
    study: str
    verdicts: int
    changed: dict[str, tuple[str, str]]
    only_old: list[str]
    only_new: list[str]
    values: int
    differ: dict[str, tuple[object, object]]
    values_only_old: list[str] = dataclasses.field(default_factory=list)
    values_only_new: list[str] = dataclasses.field(default_factory=list)

    @property
    def same_verdicts(self) -> bool:
        return not (self.changed or self.only_old or self.only_new)

    @property
    def complete(self) -> bool:
        """Every value of either run has its counterpart in the other."""
        return not (self.values_only_old or self.values_only_new)

    def lines(self, show: int = 10) -> list[str]:
        out = [f"{self.study}: {self.verdicts} verdicts, " + ("every one the same" if self.same_verdicts else
                                                               f"{len(self.changed)} changed"),
               *(f"  verdict changed: {c}: {a} → {b}" for c, (a, b) in self.changed.items()),
               *(f"  only in the first: {c}" for c in self.only_old),
               *(f"  only in the second: {c}" for c in self.only_new),
               f"  {self.values} other values compared (no timings, memory or run origins), {len(self.differ)} differ",
               *(f"  values only in the first: {v}" for v in self.values_only_old),
               *(f"  values only in the second: {v}" for v in self.values_only_new)]
        out += [f"    {p}: {a!r} → {b!r}" for p, (a, b) in list(self.differ.items())[:show]]
        if len(self.differ) > show:
            out.append(f"    … and {len(self.differ) - show} more")
        return out


def compare_study(old: dict, new: dict, study: str = "", rtol: float = 0.0) -> Comparison:
    """Compare two results.json contents (see the module docstring); numbers within ``rtol`` (relative) count as
    equal."""
    def outcomes(results):  # "inconclusive — needs ≈ 27 seeds" is inconclusive; the seeds it needs, a value
        return {v["claim"]: outcome_word(v["verdict"]) or v["verdict"] for v in results.get("verdicts", [])}
    a, b = outcomes(old), outcomes(new)
    changed = {c: (a[c], b[c]) for c in a if c in b and a[c] != b[c]}
    left, right = dict(flatten(old)), dict(flatten(new))
    def science(path: tuple[str, ...]) -> bool:
        machine_setting = path[0] == "parameters" and path[-1] in MACHINE_SETTINGS  # device, folders, fresh, …
        return not (MACHINE.search(" ".join(path)) or machine_setting
                    or any(isinstance(x, str) and HISTORY.match(x) for x in (left.get(path), right.get(path))))
    paths = [p for p in left if p in right and science(p)]
    differ = {" / ".join(p): (left[p], right[p]) for p in paths if not _same(left[p], right[p], rtol)}
    def lacking(one: dict, other: dict) -> list[str]:  # science values of one run only, a missing section named once
        present = {p[:i] for p in other for i in range(1, len(p) + 1)}
        sections: collections.Counter = collections.Counter()
        for p in (p for p in one if p not in other and science(p)):
            sections[p[: next((i for i in range(1, len(p)) if p[:i] not in present), len(p))]] += 1
        return [" / ".join(c) + (f" ({n} values)" if n > 1 else "") for c, n in sorted(sections.items())]
    return Comparison(study, len(a), changed, [c for c in a if c not in b], [c for c in b if c not in a],
                      len(paths), differ, lacking(left, right), lacking(right, left))


class Damaged(ValueError):
    """A results.json that cannot be compared: the message names the file and what is wrong, in one line."""


def read(path: Path) -> dict:
    """A results.json's contents, or ``Damaged`` naming the file: not JSON (truncated), not an object, or a verdict
    without its claim."""
    try:
        results = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise Damaged(f"{path}: cannot be read as JSON ({err})") from None
    if not isinstance(results, dict):
        raise Damaged(f"{path}: holds a {type(results).__name__}, not the object a run writes")
    verdicts = results.get("verdicts", [])
    if not isinstance(verdicts, list) or not all(isinstance(v, dict) and "claim" in v and "verdict" in v
                                                 for v in verdicts):
        raise Damaged(f"{path}: 'verdicts' must be a list of objects, each with its 'claim' and 'verdict'")
    return results


def _studies(folder: Path) -> set[str]:
    return {d.name for d in folder.iterdir() if (d / "results.json").is_file()}


def compare(first: Path, second: Path, rtol: float = 0.0) -> tuple[list[Comparison], list[str], list[str]]:
    """Every study with a results.json in both folders (reports/<profile> or outputs/<profile>), compared; and the
    studies of the first folder only and of the second only. A damaged results.json raises ``Damaged``."""
    a, b = _studies(first), _studies(second)
    return ([compare_study(read(first / s / "results.json"), read(second / s / "results.json"), s, rtol)
             for s in sorted(a & b)], sorted(a - b), sorted(b - a))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m odebook.book.compare", description=__doc__.split("\n\n")[0])
    parser.add_argument("first", type=Path)
    parser.add_argument("second", type=Path)
    parser.add_argument("--rtol", type=float, default=0.0, help="numbers this close (relative) count as equal")
    parser.add_argument("--show", type=int, default=10, help="differing values listed per study")
    args = parser.parse_args(argv)
    for folder in (args.first, args.second):
        if not folder.is_dir():
            parser.error(f"{folder} is not a folder of reports (e.g. reports/cpu or outputs/cpu)")
    try:
        found, only_first, only_second = compare(args.first, args.second, args.rtol)
    except Damaged as err:
        print(f"error: {err}")
        return 2
    if not found:
        parser.error(f"no study has a results.json in both {args.first} and {args.second}")
    for c in found:
        print("\n".join(c.lines(args.show)))
    for folder, names in ((args.first, only_first), (args.second, only_second)):
        for name in names:
            print(f"{name}: only in {folder} (not compared)")
    same = all(c.same_verdicts and c.complete for c in found) and not (only_first or only_second)
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
