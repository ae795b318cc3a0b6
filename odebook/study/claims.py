"""Claims declared before the runs, and the verdicts they settle to.

A study declares its claims in one place: each a ``Claim`` with its kind, its margin (the smallest effect of
interest, in the claim's own units) and its role. ``settle`` turns the per-seed paired differences d = a − b (one
sequence per comparison) into verdicts:

- superiority — d lies below 0 (``direction="lower"``), above 0 ("higher"), or away from 0 ("two-sided"): held when
  the t-test rejects "no difference" — the effect is on the claimed side of 0, which need not reach the margin; the
  margin is the smallest effect of interest, which sets the power and the futility test: not held when an effect of
  the margin is ruled out (one-sided: d beyond −margin rejected; two-sided: TOST at ±margin). The words are those of
  ``stats.OUTCOMES``, and every verdict's evidence names both tests with their p.
- equivalence — TOST at ±margin (two one-sided t-tests, each at α): "equivalent"; not held when d lies outside the
  margin (the larger one-sided test, Bonferroni over the two sides).
- non-inferiority — d is not worse than the margin on the claim's bad side: held when "d ≥ margin" (lower is
  better) is rejected; not held when "d ≤ margin" is.
- exceeds — "a beats b by more than the margin" (a source's target form): held when "d ≤ margin" (for "higher") is
  rejected, not held when "d ≥ margin" is; its power is at twice the margin and at the observed effect.
- gate — a calibration: d lies on the claimed side of the threshold ``margin``, tested outside every family at its
  own level (``alpha``, else the study's). A gate is a test with error like any other: at a few seeds it can fail
  on a calibration that holds. A claim that ``rests_on`` a gate that did not hold reads "not testable at this scale"
  with the gate's estimate, p and seeds, and leaves its family.
- learned — a gate read seed by seed, no test: an arm learned (its name begins "learned:") when d lies on the claimed
  side of ``margin`` in every seed; otherwise not held, with the seeds it learned in.
- descriptive — the estimate and its interval, no test.

A claim's **negative control** (``negative_control``) is the claim's own test, at its margin, on a case built to
fail — an arm that cannot do the work, a model with the tested part switched off — and should come out "not held".
Its name begins "negative control:"; it rests on the claim's gates and is settled alone at α, outside every family
(unadjusted: the strictest reading for a control). One that holds shows a test blind to the claimed effect.

Holm's correction runs over the primary claims only; secondary claims get their own Holm family. The held and the
not-held sides are each corrected over the family. A compound claim (``parts``: several comparisons that must all
hold, "beats both Tong and the standard model") is an intersection–union test: its p is the largest of its parts',
with no adjustment between them. An inconclusive claim says how many seeds it would need for 80 % power at its margin
(for equivalence and non-inferiority: with no true difference) and, in the evidence, at the observed effect, at the
Bonferroni level of its family (study.power). Differences that do not vary at all (an ablation that changed no
answer of any seed) can fail a claim — its fail test at its limit — but never hold one (``stats.t_test_p``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from odebook.study import power as pw
from odebook.study.stats import NEEDS, Interval, Verdict, holm, mean_ci, t_test_p

__all__ = ["KINDS", "GATES", "DIRECTIONS", "Claim", "negative_control", "PartTest", "p_values", "part_test",
           "seeds_needed", "Settled", "settle", "declaration", "paired"]

KINDS = ("superiority", "equivalence", "non-inferiority", "exceeds", "gate", "learned", "descriptive")
GATES = ("gate", "learned")  # the kinds a claim may rest on
DIRECTIONS = ("lower", "higher", "two-sided")
TESTED = ("superiority", "equivalence", "non-inferiority", "exceeds")  # the kinds that belong to a family


@dataclass(frozen=True)
class Claim:
    """One declared claim about paired differences d = a − b. ``direction``: the side of the claim ("lower": a is
    below b; for non-inferiority the side that is better); ``margin`` > 0 in ``units`` (a gate's threshold may be any
    number); ``parts``: the comparisons a compound claim joins (default: one, named like the claim)."""

    name: str
    kind: str
    margin: float = 0.0
    direction: str = "lower"
    units: str = ""
    primary: bool = True
    rests_on: tuple[str, ...] = ()
    parts: tuple[str, ...] = ()
    alpha: float | None = None  # a gate's own level (None: the study's)
    controls: str = ""  # a negative control: the name of the claim whose test it repeats on a case built to fail

    def __post_init__(self):
        where = f"claim {self.name!r}"
        if self.kind not in KINDS:
            raise ValueError(f"{where}: kind must be one of {KINDS}, got {self.kind!r}")
        if self.direction not in DIRECTIONS:
            raise ValueError(f"{where}: direction must be one of {DIRECTIONS}, got {self.direction!r}")
        if self.direction == "two-sided" and self.kind not in ("superiority", "equivalence", "descriptive"):
            raise ValueError(f"{where}: a {self.kind} claim has a side; direction must be 'lower' or 'higher'")
        if not math.isfinite(self.margin) or (self.kind in TESTED and self.margin <= 0):
            raise ValueError(f"{where}: margin must be a positive number in the claim's units, got {self.margin!r}")
        if self.alpha is not None and (self.kind != "gate" or not 0 < self.alpha < 0.5):
            raise ValueError(f"{where}: only a gate declares its own alpha, in (0, 0.5); got {self.alpha!r} on a "
                             f"{self.kind} claim")
        if (self.kind == "learned") != self.name.startswith("learned:"):
            raise ValueError(f"{where}: a learned gate, and only one, has a name that begins 'learned:'")
        if self.controls and (self.kind not in TESTED or not self.name.startswith("negative control:")):
            raise ValueError(f"{where}: a negative control repeats a tested claim and its name begins 'negative "
                             f"control:'; got a {self.kind} claim controlling {self.controls!r}")

    @property
    def comparisons(self) -> tuple[str, ...]:
        return self.parts or (self.name,)

    @property
    def sign(self) -> float:
        """+1 when the claim says d is low, −1 when high: tests run on s = sign·d, whose claimed side is below."""
        return -1.0 if self.direction == "higher" else 1.0

    def hypotheses(self) -> tuple[str, str]:
        """What the test that holds the claim and the one that fails it each conclude when they reject, in words:
        ("a − b < 0", "a − b > −0.05") for a superiority claim that a is below b with margin 0.05."""
        m = f"{self.margin:g}"
        if self.kind == "equivalence":
            return f"|a − b| < {m}", f"|a − b| > {m}"
        if self.kind == "superiority":
            return {"lower": ("a − b < 0", f"a − b > −{m}"), "higher": ("a − b > 0", f"a − b < {m}"),
                    "two-sided": ("a − b ≠ 0", f"|a − b| < {m}")}[self.direction]
        if self.kind == "non-inferiority":  # the margin lies on the claim's bad side
            return (f"a − b < {m}", f"a − b > {m}") if self.sign > 0 else (f"a − b > −{m}", f"a − b < −{m}")
        t = f"−{m}" if self.kind == "exceeds" and self.sign > 0 else m  # a gate's threshold, or exceeds' margin
        return (f"a − b < {t}", f"a − b > {t}") if self.sign > 0 else (f"a − b > {t}", f"a − b < {t}")

    def describe(self) -> str:
        """The kind with its margin, as the report prints it: "equivalence at ±0.02 nats"."""
        m, u = f"{self.margin:g}", f" {self.units}" if self.units else ""
        side = {"lower": "a below b", "higher": "a above b", "two-sided": "a differs from b"}[self.direction]
        text = {"superiority": f"superiority ({side}): tested against 0, smallest effect of interest {m}{u} "
                               "(power, futility)",
                "equivalence": f"equivalence at ±{m}{u}",
                "non-inferiority": f"non-inferiority ({self.hypotheses()[0]}), margin {m}{u}",
                "exceeds": f"exceeds the margin: a − b {'below −' if self.sign > 0 else 'above '}{m}{u}",
                "learned": f"learned: a − b {'below' if self.sign > 0 else 'above'} {m}{u} in every seed",
                "gate": f"gate: a − b {'below' if self.sign > 0 else 'above'} {m}{u}"
                        + (f", at its own α = {self.alpha:g}" if self.alpha is not None else ""),
                "descriptive": "descriptive"}[self.kind]
        return text + (f"; all of {len(self.parts)} comparisons (intersection–union)" if len(self.parts) > 1 else "")


def negative_control(claim: Claim, comparison: str, what: str) -> Claim:
    """``claim``'s test, at its margin and side, on ``comparison`` (a case built to fail): "negative control: …"."""
    if claim.kind not in TESTED:
        raise ValueError(f"claim {claim.name!r}: only a tested claim has a negative control (it controls a test), "
                         f"not a {claim.kind}")
    return Claim(f"negative control: {what}", claim.kind, claim.margin, claim.direction, claim.units, primary=False,
                 rests_on=claim.rests_on, parts=(comparison,), controls=claim.name)


def paired(a: Sequence[float], b: Sequence[float], *, log: bool = False) -> np.ndarray:
    """Per-seed differences a − b, or log(a / b) with ``log``, of values paired by seed."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.shape != y.shape:
        raise ValueError(f"paired values need equal lengths, got {len(x)} and {len(y)}")
    return np.log(x / y) if log else x - y


@dataclass(frozen=True)
class PartTest:
    """One comparison of a claim: d's mean with its t-interval, the p of the test whose rejection holds the claim
    and of the one whose rejection fails it, each a level-α test; ``sides`` = 2 where that p doubles a one-sided one
    (so a sequential look compares it with two tails of its boundary)."""

    estimate: Interval
    sd: float
    p_hold: float
    p_fail: float
    hold_sides: int = 1
    fail_sides: int = 1


def p_values(claim: Claim, d: np.ndarray) -> tuple[np.ndarray, np.ndarray, int, int]:
    """The p of holding and of failing ``claim`` on differences ``d`` (seeds along the last axis; any leading axes,
    e.g. simulated studies), and how many tails each p counts (the rules in the module's docstring)."""
    s, m, kind = claim.sign * d, claim.margin, claim.kind
    if kind == "descriptive":
        return np.full(d.shape[:-1], math.nan), np.full(d.shape[:-1], math.nan), 1, 1
    if kind == "equivalence":
        tost = np.maximum(t_test_p(d, -m, "greater"), t_test_p(d, m, "less"))
        outside = np.minimum(t_test_p(d, m, "greater", limit=True), t_test_p(d, -m, "less", limit=True))
        return tost, np.minimum(1.0, 2 * outside), 1, 2
    if claim.direction == "two-sided":  # superiority either way: the smaller tail, doubled; fails inside ±margin
        within = np.maximum(t_test_p(d, -m, "greater", limit=True), t_test_p(d, m, "less", limit=True))
        return np.minimum(1.0, 2 * np.minimum(t_test_p(d, 0.0, "less"), t_test_p(d, 0.0, "greater"))), within, 2, 1
    hold, fail = {"superiority": (0.0, -m), "non-inferiority": (m, m), "exceeds": (-m, -m),
                  "gate": (claim.sign * m,) * 2}[kind]
    return t_test_p(s, hold, "less"), t_test_p(s, fail, "greater", limit=True), 1, 1


def part_test(claim: Claim, d: Sequence[float]) -> PartTest:
    """The tests of ``claim`` on one comparison's per-seed differences ``d``."""
    d = np.asarray(d, dtype=float)
    p_hold, p_fail, hold_sides, fail_sides = p_values(claim, d)
    sd = float(d.std(ddof=1)) if len(d) > 1 else math.nan
    return PartTest(mean_ci(d), sd, float(p_hold), float(p_fail), hold_sides, fail_sides)


def seeds_needed(claim: Claim, tests: Sequence[PartTest], level: float, power: float = 0.8
                 ) -> tuple[int | None, int | None]:
    """Seeds for ``power`` at ``level`` at the margin and the observed effect, most over parts (None: none do)."""
    if claim.kind not in TESTED:
        return None, None
    per_part = [pw.claim_seeds(claim.kind, claim.direction, claim.margin, t.estimate.mean, t.sd, alpha=level,
                               target=power) for t in tests]
    return tuple(None if any(n[i] is None for n in per_part) else max(n[i] for n in per_part) for i in (0, 1))


@dataclass(frozen=True)
class Settled:
    """A claim's verdict with what it rests on: its parts' tests, the intersection–union p of holding and of
    failing, the family's adjusted p of holding, the family ("primary, Holm over 3"), and the seeds an inconclusive
    claim would need at its margin and at the observed effect."""

    claim: Claim
    outcome: str
    tests: tuple[PartTest, ...] = ()
    p_hold: float = math.nan
    p_fail: float = math.nan
    p_adjusted: float = math.nan
    family: str = ""
    p_fail_adjusted: float = math.nan
    needs: tuple[int | None, int | None] = (None, None)
    note: str = ""
    power: float = 0.8

    def evidence(self) -> str:
        c = self.claim
        parts = "; ".join(f"{name + ': ' if len(c.comparisons) > 1 else ''}mean a − b = {t.estimate}"
                          for name, t in zip(c.comparisons, self.tests))
        out = [parts] if parts else []
        if c.kind != "descriptive" and self.tests:
            hold, fail = c.hypotheses()
            adjusted = c.kind in TESTED and not c.controls and math.isfinite(self.p_adjusted)
            out.append(f"p = {self.p_hold:.3g} for {hold} (holds the claim)"
                       + (f", Holm p = {self.p_adjusted:.3g}" if adjusted else "")
                       + f", p = {self.p_fail:.3g} for {fail} (fails it)"
                       + (f", Holm p = {self.p_fail_adjusted:.3g}" if adjusted else ""))
        if self.outcome == "held" and c.direction == "two-sided":  # the sign of a two-sided test's decision
            out.append("a " + ("below" if self.tests[0].estimate.mean < 0 else "above") + " b")
        if self.outcome == "not held" and any(_constant(t) for t in self.tests):
            out.append("identical differences in every seed: failed at the t-test's limit as the spread goes to 0")
        if self.outcome.startswith("inconclusive") and c.kind in TESTED:
            margin, seen = (f"≈ {n}" if n else f"more than {pw.MAX_SEEDS:,}" for n in self.needs)
            out.append(f"{self.power:.0%} power needs {margin} seeds at the margin, {seen} at the observed effect")
        return "; ".join(out + ([self.note] if self.note else []))

    def verdict(self, scale: str = "") -> Verdict:
        role = {"gate": "gate, outside every family", "learned": "gate, seed by seed",
                "descriptive": ""}.get(self.claim.kind, self.family)
        effects = tuple((name, t.estimate) for name, t in zip(self.claim.comparisons, self.tests))
        return Verdict(self.claim.name, self.outcome, self.evidence(), scale, self.claim.describe(), role, effects,
                       self.claim.units)


def _constant(t: PartTest) -> bool:
    """The differences did not vary across seeds (up to rounding), as ``stats.t_test_p`` judges it."""
    return t.estimate.n >= 2 and not t.sd > 1e-12 * max(1.0, abs(t.estimate.mean))


def _gate_failures(claims: Sequence[Claim], gates: Mapping[str, Settled]) -> dict[str, str]:
    """For each claim resting on a gate that did not hold: which gate, and what it rests on (its estimate, the p of
    both its tests, the seeds) — a gate is a test with error, which more seeds can move."""
    out = {}
    for c in claims:
        failed = [f"gate {g!r} {gates[g].outcome}" + (f": {gates[g].evidence()}" if gates[g].evidence() else "")
                  for g in c.rests_on if gates[g].outcome != "held"]
        if failed:
            out[c.name] = "; ".join(failed)
    return out


def _test(claim: Claim, values: Mapping[str, Sequence[float]]) -> tuple[tuple[PartTest, ...], float, float] | None:
    if any(len(values.get(part, ())) == 0 for part in claim.comparisons):
        return None
    tests = tuple(part_test(claim, values[part]) for part in claim.comparisons)
    k = len(tests)  # intersection–union: holds when every part holds; fails when any part does (Bonferroni)
    return tests, float(np.max([t.p_hold for t in tests])), min(1.0, k * float(np.min([t.p_fail for t in tests])))


def _learned(claim: Claim, d: Sequence[float]) -> Settled:
    """A learned gate, seed by seed: held when every seed's d lies beyond the margin on the claimed side."""
    if not len(d):
        return Settled(claim, "not run", note="no values")
    s = claim.sign * np.asarray(d, dtype=float)
    learned = int(np.sum(s < claim.sign * claim.margin))
    return Settled(claim, "held" if learned == len(s) else "not held",
                   note=f"learned in {learned} of {len(s)} seeds (a − b per seed: {', '.join(f'{x:.3g}' for x in d)})")


def settle(claims: Sequence[Claim], values: Mapping[str, Sequence[float]], *, alpha: float = 0.05,
           power: float = 0.8) -> list[Settled]:
    """Settle ``claims`` (gates first, then the primary and the secondary family) on ``values``: per comparison
    name, the per-seed paired differences d = a − b (see ``paired``). A comparison with no values makes its claim
    'not run'. Returns one Settled per claim, in the declared order."""
    names = [c.name for c in claims]
    if len(set(names)) != len(names):
        raise ValueError(f"claims must have distinct names, got {names}")
    kinds = {c.name: c.kind for c in claims}
    for c in claims:
        bad = [g for g in c.rests_on if kinds.get(g) not in GATES]
        if bad:
            raise ValueError(f"claim {c.name!r} rests on {bad}, which are not declared gates")
    done: dict[str, Settled] = {}
    for c in claims:
        if c.kind == "learned":
            done[c.name] = _learned(c, values.get(c.comparisons[0], ()))
        elif c.kind in ("gate", "descriptive"):
            tested = _test(c, values)
            if tested is None:
                done[c.name] = Settled(c, "not run", note="no values")
                continue
            tests, p_hold, p_fail = tested
            level = c.alpha if c.alpha is not None else alpha
            outcome = ("descriptive" if c.kind == "descriptive" else "held" if p_hold < level
                       else "not held" if p_fail < level else "inconclusive")
            done[c.name] = Settled(c, outcome, tests, p_hold, p_fail)
    untestable = _gate_failures(claims, done)
    groups = [("primary", [c for c in claims if c.kind in TESTED and c.primary and not c.controls]),
              ("secondary", [c for c in claims if c.kind in TESTED and not c.primary and not c.controls]),
              *[(f"negative control of {c.controls!r}, at α alone", [c]) for c in claims if c.controls]]
    for label, family in groups:
        rows = []
        for c in family:
            tested = None if c.name in untestable else _test(c, values)
            if c.name in untestable:
                done[c.name] = Settled(c, "not testable at this scale", family=label, note=untestable[c.name])
            elif tested is None:
                done[c.name] = Settled(c, "not run", family=label, note="no values for " + ", ".join(c.comparisons))
            else:
                rows.append((c, *tested))
        held, failed = holm([r[2] for r in rows]), holm([r[3] for r in rows])
        name = label if label.startswith("negative control") else f"{label}, Holm over {len(rows)}"
        for (c, tests, p_hold, p_fail), q_hold, q_fail in zip(rows, held, failed):
            if q_hold < alpha:
                outcome, needs = ("equivalent" if c.kind == "equivalence" else "held"), (None, None)
            elif q_fail < alpha:
                outcome, needs = "not held", (None, None)
            else:
                needs = seeds_needed(c, tests, alpha / len(rows), power)  # the level wherever Holm puts it
                outcome = NEEDS.format(n=needs[0]) if needs[0] else "inconclusive"
            small = outcome == "held" and c.kind == "superiority" and q_fail < alpha  # both tests reject
            done[c.name] = Settled(c, outcome, tests, p_hold, p_fail, q_hold, name, q_fail, needs=needs, power=power,
                                   note="an effect of the margin is ruled out too: real, but smaller" if small else "")
    return [done[n] for n in names]


def declaration(claims: Sequence[Claim]) -> str:
    """The declared claims as a Markdown table (printed above a study's results): claim, kind and margin, role,
    the gates it rests on."""
    rows = ["| claim | kind and margin | role | rests on |", "|---|---|---|---|"]
    for c in claims:
        role = ("gate" if c.kind in GATES else "descriptive" if c.kind == "descriptive" else "negative control"
                if c.controls else "primary" if c.primary else "secondary")
        rows.append(f"| {c.name} | {c.describe()} | {role} | {', '.join(c.rests_on) or '—'} |")
    return "\n".join(rows)
