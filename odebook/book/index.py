"""The book's front page, outputs/<profile>/index.html: for every study its question, the scale it was measured at,
its findings (odebook.book.findings: each claim as one sentence with a coloured verdict badge, primary claims first,
the statistics one click away), a thumbnail of its key figure (the first it saved), run time, and a failed
notebook's whole error. Also what each profile can show (``PROFILE_NOTES``), which the runner puts at the top of
every executed report too."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

from odebook.book import findings
from odebook.params import profile_chain
from odebook.study.stats import outcome_word

FIGURE_ORDER = "order.txt"  # figures/order.txt: a study's figures in the order it saved them, its key figure first


def saved_figures(figures: Path) -> list[str]:
    """The names in ``figures``/order.txt, in the order the study saved them (none where it has no such file)."""
    order = figures / FIGURE_ORDER
    return order.read_text().split() if order.is_file() else []

__all__ = ["key_figure", "PROFILE_NOTES", "profile_note", "question_of", "inline_markdown", "write_index"]

# What a profile's numbers can show; the one place that says it (index banner and each report's banner).
PROFILE_NOTES = {
    "smoke": "Smoke profile: tiny models and a few steps, to check the mechanics (CI). The numbers and verdicts below "
             "say nothing about the questions — no verdict here counts.",
    "cpu": "CPU profile: real but small experiments (up to 20 minutes each on 2 cores). Each verdict states the scale "
           "it was measured at beside the source's; a verdict at this scale need not hold at the source's.",
    "t4": "T4 profile: the sources' configurations (a T4 GPU, as in Colab).",
}
BADGE = {"held": "#1a7f37", "equivalent": "#1a7f37", "not held": "#b42318", "inconclusive": "#6e7781",
         "not testable at this scale": "#8250df", "descriptive": "#0969da", "not run": "#9a6700"}


def profile_note(profile: str, bases: list[str] | tuple[str, ...] = ()) -> str:
    """What ``profile``'s numbers can show; a profile of one's own built on a known one (``base:``) says its base's."""
    if profile in PROFILE_NOTES:
        return PROFILE_NOTES[profile]
    known = next((b for b in bases if b in PROFILE_NOTES), None)
    own = f"Profile {profile}: parameters from params/{profile}/"
    return f"{own}, built on {known}. {PROFILE_NOTES[known]}" if known else f"{own}."


def question_of(notebook: Path) -> tuple[str, str]:
    """(title, question) from a notebook's first Markdown cell: its '# ' heading and its **Question(s).** paragraph."""
    text = notebook.read_text(encoding="utf-8") if notebook.is_file() else ""
    lines = [ln[2:] if ln.startswith("# ") else ln.lstrip("#") for ln in text.splitlines()]
    title = next((ln[2:].strip() for ln in lines if ln.startswith("# ")), notebook.stem)
    block = "\n".join(lines)
    match = re.search(r"\*\*Questions?\.\*\*(.*?)(?:\n\s*\n|$)", block, re.S)
    return title, " ".join(match.group(1).split()) if match else ""


def inline_markdown(text: str) -> str:
    """``text`` as HTML, its inline Markdown rendered — `code`, **strong**, *emphasis* — and everything else escaped:
    the front page showed a question's `*final*` and backticks literally."""
    out = html.escape(text, quote=False)
    out = re.sub(r"`([^`]+)`", r"<code>\1</code>", out)
    out = re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", out)
    return re.sub(r"(?<![\w*])\*([^*\s][^*]*?)\*(?![\w*])", r"<em>\1</em>", out)


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _when(iso: str) -> str:
    return html.escape(iso.replace("T", " ").removesuffix("+00:00") + " UTC")


def _fmt(v) -> str:
    return f"{v:.4g}" if isinstance(v, float) else html.escape(str(v))


def _findings(results: dict, smoke: bool) -> str:
    """Each claim as one sentence with its verdict's badge, primary claims first, statistics one click away."""
    return findings.html_list(results.get("verdicts", []),
                              lambda outcome: "#adb5bd" if smoke else BADGE.get(outcome_word(outcome), "#6e7781"))


def key_figure(folder: Path) -> Path | None:
    """A report's key figure: the first its study saved (figures/order.txt, odebook.book.notebook.save_figure), else
    the first by name — never by file times, which a fresh clone makes all equal; None where it saved none."""
    named = [folder / "figures" / f"{n}.png" for n in saved_figures(folder / "figures")]
    figures = [p for p in named if p.is_file()] or sorted((folder / "figures").glob("*.png"))
    return figures[0] if figures else None


def _thumbnail(folder: Path, href: str) -> str:
    """The study's key figure (``key_figure``) on its card, linked to its report."""
    figure = key_figure(folder)
    if figure is None:
        return ""
    rel = f"{folder.name}/figures/{figure.name}"
    return f"<a href='{href}'><img class='thumb' src='{rel}' alt='{figure.stem}'></a>"


def _card(out_root: Path, notebook: Path, profile: str) -> str:
    name = notebook.stem
    title, question = question_of(notebook)
    good = _read_json(out_root / name / "manifest.json")
    bad = _read_json(out_root / f"{name}.failed" / "manifest.json")
    latest, folder = (bad, out_root / f"{name}.failed") if bad else (good, out_root / name)
    smoke = "smoke" in (latest or {}).get("profile_chain", [profile])  # a profile built on smoke shows no finding
    head = f"<h2>{inline_markdown(title)}</h2><p class='q'>{inline_markdown(question)}</p>"
    results = _read_json(folder / "results.json") if latest else {}
    scale = findings.study_scale(results.get("verdicts", []))
    head += f"<p class='scale'>measured at {html.escape(scale)}</p>" if scale else ""
    if not latest:
        return f"<section class='card'>{head}<p class='status'>not run</p></section>"
    href = f"{folder.name}/{name}.html"
    status = (f"<span class='{latest['status']}'>{latest['status']}</span> in {latest['seconds']:.0f} s, "
              f"finished {_when(latest['finished'])} — <a href='{href}'>report</a>")
    if bad and good:
        status += f" (last success {_when(good['finished'])} kept: <a href='{name}/{name}.html'>report</a>)"
    error = ""
    if latest.get("error"):
        trace = html.escape(latest.get("traceback") or latest["error"])
        error = f"<p class='failed'>{html.escape(latest['error'])}</p><details><summary>whole error</summary>" \
                f"<pre>{trace}</pre></details>"
    numbers = "<br>".join(f"{html.escape(k)}: {_fmt(v)}"
                          for k, v in results.get("headline", {}).items() if not k.startswith("verdict: "))
    numbers = f"<details><summary>headline numbers</summary><p>{numbers}</p></details>" if numbers else ""
    return (f"<section class='card'>{_thumbnail(folder, href)}{head}<p class='status'>{status}</p>{error}"
            f"{_findings(results, smoke)}{numbers}</section>")


STYLE = """body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#1f2328}
.banner{background:#fff8c5;border:1px solid #d4a72c;padding:.6em 1em;border-radius:6px}
.card{border:1px solid #d0d7de;border-radius:8px;padding:1em 1.2em;margin:1.2em 0;overflow:hidden}
.card h2{margin:.1em 0 .3em}.q{color:#424a53}
.thumb{float:right;width:min(560px,45%);margin:0 0 .5em 1em;border:1px solid #eee}
.badge{color:#fff;border-radius:1em;padding:.1em .6em;font-size:.85em;white-space:nowrap}
.verdicts{list-style:none;padding-left:0}.verdicts li{margin:.4em 0}.ok{color:#1a7f37;font-weight:bold}
.failed{color:#b42318;font-weight:bold}.scale{color:#57606a;font-size:.9em}
.claim{font-weight:600}.verdicts details{margin:.1em 0 0 1.5em;color:#57606a}h3{font-size:1em;margin:.8em 0 .2em}
pre{white-space:pre-wrap;background:#f6f8fa;padding:.6em}"""


def write_index(out_root: Path, notebooks: list[Path], profile: str) -> Path:
    """Write ``out_root``/index.html for ``notebooks`` (their .py files) run with ``profile``."""
    out_root.mkdir(parents=True, exist_ok=True)
    cards = "\n".join(_card(out_root, nb, profile) for nb in notebooks)
    files = [nb.parent.parent / "params" / profile / f"{nb.stem}.yaml" for nb in notebooks]  # their base: chains
    bases = [f.parent.name for path in files if path.is_file() for f in profile_chain(path)[1]]
    page = (f"<!doctype html><html><head><meta charset='utf-8'><title>odebook — {html.escape(profile)}</title>"
            f"<style>{STYLE}</style></head><body><h1>odebook — profile <code>{html.escape(profile)}</code></h1>"
            f"<p class='banner'>{html.escape(profile_note(profile, bases))}</p>\n{cards}\n</body></html>")
    path = out_root / "index.html"
    path.write_text(page, encoding="utf-8")
    return path
