"""A study's verdicts as findings: each claim as one sentence — the claim, its verdict, the effect with its interval
in the claim's units, n — primary claims first, and the statistics (tests, Holm, looks) one click away.

The effect comes from a verdict's structured ``effects`` (``stats.Verdict.to_dict``, filled by ``claims.Settled``);
a verdict of the older form has none, and its effect is read from the first intervals its evidence prints
("mean a − b = 0.017 [-0.041, 0.075] (n = 3)"); a verdict with neither (a count, a ratio) shows its evidence's first
clause. Used by the front page (odebook.book.index), the verdict page and README's table (odebook.book.reports) and the
findings that open each report (odebook.book.runner).
"""

from __future__ import annotations

import html
import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import NamedTuple

__all__ = ["SEVERAL", "Effect", "effects", "is_primary", "ordered", "study_scale", "sentence", "statistics",
           "html_list", "cell", "markdown_table"]

_NUM = r"-?(?:\d[\d,]*\.?\d*(?:e[-+]?\d+)?|nan|inf)"
_INTERVAL = re.compile(rf"mean (?P<label>a − b|log\(a/b\)) = (?P<mean>{_NUM}) "
                       rf"\[(?P<low>{_NUM}), (?P<high>{_NUM})\] \(n = (?P<n>\d+)\)")
SEVERAL = "several scales — each claim's under its statistics"
_SHORT = 90  # an evidence clause longer than this is not a sentence's effect; its statistics show it whole


class Effect(NamedTuple):
    """One comparison's effect; ``low``/``high`` None where there is no interval."""

    comparison: str
    mean: float
    low: float | None
    high: float | None
    n: int
    label: str = "a − b"


def _num(text: str) -> float:
    return float(text.replace(",", ""))


def effects(v: dict) -> list[Effect]:
    """The effects of verdict ``v`` (a results.json entry): its structured ``effects``, else the distinct intervals
    its evidence prints, else none."""
    if v.get("effects"):
        return [Effect(e.get("comparison", ""), e["mean"], e.get("low"), e.get("high"), int(e.get("n", 0)))
                for e in v["effects"] if e.get("mean") is not None]
    seen, out = set(), []
    for m in _INTERVAL.finditer(v.get("evidence", "")):
        key = m.group("mean", "low", "high", "n")
        if key not in seen:
            seen.add(key)
            out.append(Effect("", _num(m["mean"]), _num(m["low"]), _num(m["high"]), int(m["n"]), m["label"]))
    return out


def is_primary(v: dict) -> bool:
    return v.get("role", "").startswith("primary")


def ordered(verdicts: Sequence[dict]) -> list[dict]:
    """Primary claims first (in their declared order), then the rest; a study of the older form, with no roles,
    keeps its order."""
    return sorted(verdicts, key=lambda v: not is_primary(v))


def study_scale(verdicts: Sequence[dict]) -> str:
    """The scale more than half of a study's verdicts that name one were measured at; '' when none says, and
    ``SEVERAL`` when no scale is the majority (each claim's then shows under its statistics)."""
    scales = Counter(v.get("scale", "") for v in verdicts if v.get("scale"))
    if not scales:
        return ""
    scale, count = scales.most_common(1)[0]
    return scale if 2 * count > sum(scales.values()) else SEVERAL


def _g(x: float | None) -> str:
    return "?" if x is None else f"{x:.3g}"


def _effect_text(v: dict) -> str:
    found, units = effects(v), v.get("units", "")
    if found:
        many = len(found) > 1
        parts = []
        for i, e in enumerate(found, 1):
            if e.low is not None and e.high is not None and abs(e.mean) < 1e-9 * (e.high - e.low):
                e = e._replace(mean=0.0)  # rounding noise of a zero mean ("-1.85e-17") reads as 0
            ratio = e.label == "log(a/b)"  # a ratio reads in its own units: a/b = 0.996× rather than its log
            named = " − " in e.comparison and not ratio  # "hybrid − baseline = 0.77" names its a and b
            name = f"{e.comparison or f'part {i}'}: " if many and not named else ""
            show = (lambda x: None if x is None else math.exp(x)) if ratio else (lambda x: x)
            unit = "×" if ratio else f" {units}" if units else ""
            interval = f" [{_g(show(e.low))}, {_g(show(e.high))}]" if e.low is not None and e.high is not None \
                else " (no interval)"
            label = e.comparison if named else "a/b" if ratio else e.label
            parts.append(f"{name}{label} = {_g(show(e.mean))}{interval}{unit}")
        n = sorted({e.n for e in found})
        return "; ".join(parts) + f", n = {'/'.join(map(str, n))}"
    first = re.split(r";| — ", v.get("evidence", ""), maxsplit=1)[0].strip()
    return first if 0 < len(first) <= _SHORT else ""


def sentence(v: dict) -> str:
    """One line of plain text: "claim — verdict: effect [low, high] units, n = N"."""
    effect = _effect_text(v)
    return f"{v.get('claim', '')} — {v.get('verdict', '')}" + (f": {effect}" if effect else "")


def statistics(v: dict, scale: str = "") -> list[tuple[str, str]]:
    """What a sentence rests on, as (label, text): the test (kind and margin), its family (Holm, looks), the
    evidence, and the scale when it differs from the study's ``scale``."""
    rows = [("test", v.get("kind", "")), ("family", v.get("role", "")), ("evidence", v.get("evidence", ""))]
    if v.get("scale") and v.get("scale") != scale:
        rows.append(("measured at", v["scale"]))
    return [(k, t) for k, t in rows if t]


def _item(v: dict, colour, scale: str) -> str:
    effect = _effect_text(v)
    stats = "".join(f"<b>{html.escape(k)}</b>: {html.escape(t)}<br>" for k, t in statistics(v, scale))
    return (f"<li><span class='badge' style='background:{colour(v.get('verdict', ''))}'>"
            f"{html.escape(v.get('verdict', ''))}</span> <span class='claim'>{html.escape(v.get('claim', ''))}</span>"
            + (f": <span class='effect'>{html.escape(effect)}</span>" if effect else "")
            + f"<details><summary>statistics</summary><small>{stats}</small></details></li>")


def html_list(verdicts: Sequence[dict], colour) -> str:
    """The findings as HTML: a badge for the verdict (``colour(verdict)``), the sentence, the statistics in a
    <details> beneath; a study with declared claims shows "Primary claims" first, then "Other claims"."""
    scale = study_scale(verdicts)
    if not any(v.get("role") for v in verdicts):
        groups = [("", list(verdicts))]
    else:
        groups = [("Primary claims", [v for v in verdicts if is_primary(v)]),
                  ("Other claims", [v for v in verdicts if not is_primary(v)])]
    return "".join((f"<h3>{title}</h3>" if title else "") + "<ul class='verdicts'>"
                   + "".join(_item(v, colour, scale) for v in group) + "</ul>" for title, group in groups if group)


def markdown_list(verdicts: Sequence[dict]) -> str:
    """The findings as a Markdown list, primary claims first: "- **verdict** — claim: effect" (a report's first
    cell, odebook.book.runner)."""
    lines = []
    for v in ordered(verdicts):
        effect = _effect_text(v)
        lines.append(f"- **{v.get('verdict', '')}** — {v.get('claim', '')}" + (f": {effect}" if effect else "")
                     + (" *(primary)*" if is_primary(v) else ""))
    return "\n".join(lines)


def cell(text: str) -> str:
    """``text`` as one Markdown table cell: its pipes escaped, its lines joined."""
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_table(verdicts: Sequence[dict], link: str, beside: Mapping[str, str] | None = None) -> list[str]:
    """Rows of the verdict page's table for one study (``link`` its Markdown link): finding, verdict, (with ``beside``,
    claim → verdict in another profile's report: that verdict, "—" where it has none,) effect, the statistics in a
    <details> (GitHub renders it in a cell); primary claims first."""
    rows = []
    for i, v in enumerate(ordered(verdicts)):
        role = "primary" if is_primary(v) else (v.get("role", "").split(",")[0] or "")
        stats = "<br>".join(f"{k}: {html.escape(t)}" for k, t in statistics(v, study_scale(verdicts)))
        rows.append("| " + " | ".join(cell(c) for c in (
            link if i == 0 else "", v.get("claim", "") + (f" ({role})" if role else ""), f"**{v.get('verdict', '')}**",
            *([beside.get(v.get("claim", "")) or "—"] if beside is not None else []), _effect_text(v) or "—",
            f"<details><summary>statistics</summary>{stats}</details>")) + " |")
    return rows
