"""Two runs of the book compared, the way a re-make is judged (on another processor, or after a refactor that must
not change a number): for each study in both folders, every verdict by its claim, and every other value of its
results.json except those that measure the machine (times, speeds, memory, load) or how a run was obtained (trained,
resumed or reused). Verdicts are matched by claim, so a claim present in one run only is listed as such; values by
their path in results.json, a verdict's fields under its claim.

    python -m odebook.book.compare reports/cpu outputs/cpu    # exit status 1 when any verdict differs
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import re
from collections.abc import Iterator
from pathlib import Path

from odebook.book.profile import MACHINE_SETTINGS
from odebook.study.stats import outcome_word

__all__ = ["MACHINE", "HISTORY", "Comparison", "flatten", "compare_study", "compare", "main"]

# a value whose path names one of these measures the machine or the run's history, not the science
MACHINE = re.compile(r"second|_s\b|ms_per|time|timing|speed|faster|tokens_per_s|memory|peak|wall|load|origin|"
                     r"resumed|crossover|kv cach|generated", re.IGNORECASE)
HISTORY = re.compile(r"^\d+ (trained|resumed|reused)$")  # a table's count of runs by origin, e.g. "6 reused"


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
    compared — a verdict's full text among them — and which differ beyond ``rtol`` (path → (old, new))."""
    study: str
    verdicts: int
    changed: dict[str, tuple[str, str]]
    only_old: list[str]
    only_new: list[str]
    values: int
    differ: dict[str, tuple[object, object]]

    @property
    def same_verdicts(self) -> bool:
        return not (self.changed or self.only_old or self.only_new)

    def lines(self, show: int = 10) -> list[str]:
        out = [f"{self.study}: {self.verdicts} verdicts, " + ("every one the same" if self.same_verdicts else
                                                               f"{len(self.changed)} changed"),
               *(f"  verdict changed: {c}: {a} → {b}" for c, (a, b) in self.changed.items()),
               *(f"  only in the first: {c}" for c in self.only_old),
               *(f"  only in the second: {c}" for c in self.only_new),
               f"  {self.values} other values compared (no timings, memory or run origins), {len(self.differ)} differ"]
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
                    or any(isinstance(x, str) and HISTORY.match(x) for x in (left[path], right[path])))
    paths = [p for p in left if p in right and science(p)]
    differ = {" / ".join(p): (left[p], right[p]) for p in paths if not _same(left[p], right[p], rtol)}
    return Comparison(study, len(a), changed, [c for c in a if c not in b], [c for c in b if c not in a],
                      len(paths), differ)


def compare(first: Path, second: Path, rtol: float = 0.0) -> list[Comparison]:
    """Every study with a results.json in both folders (reports/<profile> or outputs/<profile>)."""
    studies = sorted(d.name for d in first.iterdir() if (d / "results.json").is_file()
                     and (second / d.name / "results.json").is_file())
    return [compare_study(json.loads((first / s / "results.json").read_text()),
                          json.loads((second / s / "results.json").read_text()), s, rtol) for s in studies]


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
    found = compare(args.first, args.second, args.rtol)
    if not found:
        parser.error(f"no study has a results.json in both {args.first} and {args.second}")
    for c in found:
        print("\n".join(c.lines(args.show)))
    return 0 if all(c.same_verdicts for c in found) else 1


if __name__ == "__main__":
    raise SystemExit(main())
