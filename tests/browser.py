"""What a reader's browser shows: a page opened in headless Chromium (Debian's ``chromium``; CI installs it), with a
JavaScript expression evaluated at the end of its body, after the page's own scripts there. The page is a copy with a
probe script added; the answer comes back as JSON through the DOM Chromium prints (``--dump-dom``)."""

import html
import json
import re
import shutil
import subprocess
from pathlib import Path

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")

PROBE = """<script>(() => {{ const out = document.createElement('pre'); out.id = 'odebook-probe';
  try {{ out.textContent = JSON.stringify(({expression})); }}
  catch (err) {{ out.textContent = JSON.stringify({{error: String(err)}}); }}
  document.body.appendChild(out); }})();</script>"""


def evaluate(page: Path, expression: str, size: tuple[int, int] = (1280, 900)) -> object:
    """The value of ``expression`` (JavaScript, JSON-able) in ``page`` as headless Chromium lays it out in a window of
    ``size`` pixels; the page's own files (figures) are found beside it."""
    probe = page.with_name(f".probe-{page.name}")
    text = page.read_text(encoding="utf-8")
    end = text.rindex("</body>")
    probe.write_text(text[:end] + PROBE.format(expression=expression) + text[end:], encoding="utf-8")
    try:
        done = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                               f"--window-size={size[0]},{size[1]}", "--virtual-time-budget=10000", "--dump-dom",
                               probe.as_uri()],
                              capture_output=True, text=True, timeout=120)
    finally:
        probe.unlink()
    found = re.search(r'<pre id="odebook-probe">(.*?)</pre>', done.stdout, re.S)
    assert found, f"Chromium gave no answer (exit {done.returncode}): {done.stderr[-2000:]}"
    return json.loads(html.unescape(found.group(1)))
