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
