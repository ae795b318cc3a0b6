"""An executed notebook made into a report: each progress bar summarised in one line, the findings first (after
its title, read from the run's results.json), and its HTML page — question, then result, then evidence: the title
and the question's first paragraph, the profile's banner, the findings beside the study's key figure, then the rest
of the introduction and the notebook, with the code folded behind a button — a page that, when nbconvert cannot
render it, says why and never costs the run (odebook.book.runner calls these on the staging folder before
publication; ``render_html`` again re-renders a committed report's page from its executed notebook)."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

from odebook.book import findings
from odebook.book.index import key_figure

__all__ = ["FINDINGS", "render_html", "lead", "fold_code", "summarise_progress", "findings_first"]


def render_html(ipynb: Path, html_path: Path, error: str) -> str:
    """The notebook's HTML page; returns "" or why nbconvert could not render it. A page that cannot be rendered (no
    HTML templates installed, say) never costs the run: the executed notebook is published all the same, and the
    page says what went wrong and where the notebook is."""
    import nbconvert
    import nbformat

    if not ipynb.is_file():  # the kernel never started: still leave a page that says why
        body = f"<html><body><h1>{ipynb.stem} failed before executing</h1><pre>{html.escape(error)}</pre></body></html>"
        html_path.write_text(body, encoding="utf-8")
        return ""
    try:
        nb = lead(nbformat.read(ipynb, as_version=4), key_figure(ipynb.parent))
        body, _ = nbconvert.HTMLExporter().from_notebook_node(nb)
    except Exception as err:  # noqa: BLE001 — any exporter failure; the notebook itself stays
        why = f"nbconvert could not render {ipynb.name} as HTML ({type(err).__name__}: {str(err).splitlines()[0]})"
        html_path.write_text(f"<html><body><h1>{ipynb.stem}</h1><p>{html.escape(why)}; the executed notebook "
                             f"{html.escape(ipynb.name)} beside this page holds every output.</p></body></html>",
                             encoding="utf-8")
        return why
    html_path.write_text(fold_code(body), encoding="utf-8")
    return ""


def lead(nb, figure: Path | None):
    """The page's order (module docstring), on the notebook as read — the executed notebook itself keeps the
    notebook's: its title cell cut after the question's first paragraph, the rest of it moved below the findings
    (``findings_first``), and the key figure floated beside them. A notebook without a findings cell is as it was."""
    import nbformat

    cells = nb.cells
    at = next((i for i, c in enumerate(cells) if c.cell_type == "markdown" and c.source.startswith(FINDINGS)), None)
    if at is None:
        return nb
    if figure is not None:
        img = (f'<img src="figures/{figure.name}" alt="{html.escape(figure.stem)}" '
               'style="float:right;width:46%;margin:0 0 1em 1.5em">')
        cells[at].source = (cells[at].source.replace(FINDINGS, f"{FINDINGS}\n\n{img}", 1)
                            + '\n\n<div style="clear:both"></div>')
    first = cells[0]
    if at > 0 and first.cell_type == "markdown" and first.source.startswith("# "):
        paragraphs = first.source.split("\n\n")
        if len(paragraphs) > 2:
            first.source = "\n\n".join(paragraphs[:2])
            cells.insert(at + 1, nbformat.v4.new_markdown_cell("\n\n".join(paragraphs[2:])))
    return nb


FOLD = """<style>.odebook-code-hidden .jp-CodeCell .jp-Cell-inputWrapper{display:none}
#odebook-code{position:fixed;top:.5em;right:.5em;z-index:10;padding:.3em .7em;font:13px sans-serif}</style>
<button id="odebook-code" type="button" onclick="var b=document.body;b.classList.toggle('odebook-code-hidden');
this.textContent=b.classList.contains('odebook-code-hidden')?'show code':'hide code'">show code</button>
<script>document.body.classList.add('odebook-code-hidden')</script>"""


def fold_code(page: str) -> str:
    """The report page with its code folded: hidden until its button shows it (without JavaScript the code stays
    shown), so a reader meets the findings, tables and figures first."""
    head, sep, rest = page.partition("<body")
    if not sep:
        return page
    tag, close, body = rest.partition(">")
    return f"{head}<body{tag}{close}\n{FOLD}{body}"


# A finished tqdm bar, as the last carriage-return segment of a line: "desc: 100%|███| 4/4 [00:01<00:00, 3.3it/s, …]"
_BAR = re.compile(r"^(?P<desc>.*?):\s+\d+%\|[^|]*\|\s*(?P<n>\d+)/(?P<total>\d+)\s*\[(?P<elapsed>[^<\]]*)<[^,\]]*"
                  r"(?:,\s*[^,\]]*(?:it/s|s/it)\]?)?(?:,\s*(?P<post>[^\]]*))?\]?$")


def summarise_progress(ipynb: Path) -> None:
    """A report reads like results: each progress bar a cell printed (tqdm on stderr, redrawn with \\r) becomes one
    line "desc: n/total steps in elapsed (postfix)"; other stderr text is kept."""
    import nbformat

    nb = nbformat.read(ipynb, as_version=4)
    for cell in nb.cells:
        errs = [o for o in cell.get("outputs", []) if o.get("output_type") == "stream" and o.get("name") == "stderr"]
        if not errs:
            continue
        summaries, kept = [], []
        for line in "".join(o["text"] for o in errs).split("\n"):
            last = line.split("\r")[-1].rstrip()
            bar = _BAR.match(last)
            if bar:
                post = f" ({bar['post'].strip()})" if bar["post"] else ""
                summaries.append(f"{bar['desc']}: {bar['n']}/{bar['total']} steps in {bar['elapsed'].strip()}{post}")
            elif last:
                kept.append(last)
        first = cell.outputs.index(errs[0])
        out = [nbformat.v4.new_output("stream", name="stdout", text="".join(f"{x}\n" for x in summaries))]
        err = [nbformat.v4.new_output("stream", name="stderr", text="\n".join(kept) + "\n")]
        new = out * bool(summaries) + err * bool(kept)
        rest = [o for o in cell.outputs if all(o is not e for e in errs)]
        cell.outputs = rest[:first] + new + rest[first:]
    nbformat.write(nb, ipynb)


FINDINGS = "## Findings"


def findings_first(ipynb: Path, results: Path) -> None:
    """A report opens on what it found: after its title (its first cell, where that is Markdown) and the notes the
    runner quotes below it (the profile's banner, a loaded machine), a Markdown cell with each claim's verdict and
    effect (primary claims first; odebook.book.findings) and the scale once, read from the run's results.json — the
    statistics stay where the notebook computed them. Nothing where there are no verdicts."""
    import nbformat

    verdicts = json.loads(results.read_text()).get("verdicts", []) if results.is_file() else []
    if not verdicts:
        return
    nb = nbformat.read(ipynb, as_version=4)
    scale = findings.study_scale(verdicts)
    lines = [FINDINGS, "", findings.markdown_list(verdicts)]
    if scale:
        lines += ["", f"Measured at {scale}. What each verdict rests on (tests, families, looks) is in the "
                  "report's last section."]
    at = 1 if nb.cells and nb.cells[0].cell_type == "markdown" else 0
    while at < len(nb.cells) and nb.cells[at].cell_type == "markdown" and nb.cells[at].source.startswith(">"):
        at += 1  # below the profile's banner ("no verdict here counts" on smoke) and the machine-load note
    nb.cells.insert(at, nbformat.v4.new_markdown_cell("\n".join(lines)))
    nbformat.write(nb, ipynb)
