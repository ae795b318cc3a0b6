"""The package's docstrings and comments give reasons, not dated timings: a time, a rate or a speed-up is a
measurement of one machine on one day, and belongs in the benchmark's output (benchmarks/), which prints it fresh."""

import re

TIMING = re.compile(r"\d[\d.,]*\s?(ms|µs|ns|GFLOP/s|s/step|s per step)\b"  # a time or a rate
                    r"|\d[\d.,]*\s?×\s?(faster|slower|longer|F\.linear)"  # a speed-up
                    r"|\d[\d.,]*\s?%\s(faster|slower)"
                    r"|\b(from|in) ~?\d[\d.,]*\s?s (to|instead|against)")  # "from 2.6 s to 1.9 s"


def test_no_timing_is_quoted_in_the_packages_docstrings_or_comments(root):
    found = [f"{path.relative_to(root)}:{n}: {line.strip()}"
             for path in sorted((root / "odebook").rglob("*.py"))
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if TIMING.search(line) and "print(" not in line and 'f"' not in line]
    assert not found, "timings in odebook's text (say why, and let make bench print the figure):\n" + "\n".join(found)


README_LINES = 250
DATED = re.compile(r"\b20\d\d-\d\d-\d\d\b|\b(this|last|previous|earlier) (session|run|re-make)\b|\bso far\b", re.I)


def _readme_prose(root) -> str:
    """README without its generated verdict tables (their evidence may quote a date a rule was adopted)."""
    text = (root / "README.md").read_text(encoding="utf-8")
    return re.sub(r"<!-- verdicts.*?<!-- end of[^>]*-->", "", text, flags=re.S)


def test_the_readme_is_short_and_undated(root):
    """A newcomer reads it in ten minutes: measurements, dated notes and recipes live in docs/."""
    lines = (root / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_LINES, \
        f"README.md has {len(lines)} lines (at most {README_LINES}); move detail to docs/"
    dated = [line for line in _readme_prose(root).splitlines() if DATED.search(line)]
    assert not dated, "dated prose in README (it belongs in docs/ or CHANGELOG.md):\n" + "\n".join(dated)


def test_the_readmes_layout_names_what_is_there(root):
    """Every module of odebook under its sub-package's line (a study's modules in brackets after its name), every
    benchmark and script, every top-level folder."""
    text = (root / "README.md").read_text(encoding="utf-8")
    layout = text.split("## Layout", 1)[1].split("```")[1]
    parts, current = {}, None
    for line in layout.splitlines():
        head = re.match(r"^\s*([\w.]+)/\s", line + " ")
        if head:
            current = head.group(1)
        if current:
            parts[current] = parts.get(current, "") + " " + line
    missing = []
    for sub in sorted(p for p in (root / "odebook").iterdir() if (p / "__init__.py").is_file()):
        words = set(re.findall(r"\w+", parts.get(sub.name, "")))
        missing += [f"odebook/{sub.name}/{m.stem}" for m in sorted(sub.glob("*.py"))
                    if m.stem != "__init__" and m.stem not in words]
        for study in sorted(p for p in sub.iterdir() if (p / "__init__.py").is_file()):  # a study's package
            listed = parts.get(sub.name, "").split(study.name, 1)  # its name, then its modules in brackets
            modules = set(re.findall(r"\w+", listed[1].split(")", 1)[0])) if len(listed) == 2 else set()
            missing += [f"odebook/{sub.name}/{study.name}/{m.stem}" for m in sorted(study.glob("*.py"))
                        if m.stem != "__init__" and m.stem not in modules]
    for folder in ("benchmarks", "scripts"):
        words = set(re.findall(r"\w+", parts.get(folder, "")))
        missing += [f"{folder}/{f.name}" for f in sorted((root / folder).iterdir())
                    if f.suffix in (".py", ".sh") and f.stem not in words]
    top = {p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith(".") and p.name != "__pycache__"
           and not p.name.endswith(".egg-info")}
    missing += [f"{name}/" for name in sorted(top) if name not in parts]
    assert not missing, "README's Layout does not name:\n" + "\n".join(missing)
