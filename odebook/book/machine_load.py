"""How busy the machine was while a notebook ran: its step times and throughputs are only as good as that.

``sample`` reads the 1-minute load average, ``busy_cores`` what other processes take now; ``record`` says it for
the manifest; ``note`` is the sentence a report gets when the machine was busier than its cores (then every timing in
it is slower than on an idle machine), which ``annotate`` puts below the report's profile banner."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

__all__ = ["sample", "record", "note", "annotate", "busy_cores", "others"]


def sample() -> float:
    """The 1-minute load average (runnable processes), NaN where the system does not report it."""
    try:
        return os.getloadavg()[0]
    except OSError:
        return float("nan")


def _busy_total(stat: Path) -> tuple[int, int]:
    """(busy, all) clock ticks of every core since boot (Linux's /proc/stat)."""
    user, nice, system, idle, iowait, irq, softirq, steal = map(int, stat.read_text().split()[1:9])
    busy = user + nice + system + irq + softirq + steal
    return busy, busy + idle + iowait


def busy_cores(window: float = 2.0, stat: Path = Path("/proc/stat")) -> float:
    """How many cores other processes keep busy now: the machine's busy share over ``window`` seconds in which this
    process sleeps, times its cores; NaN where there is no /proc/stat. Unlike the load average, this process's own
    recent work does not count."""
    import time

    try:
        b0, t0 = _busy_total(stat)
        time.sleep(window)
        b1, t1 = _busy_total(stat)
    except (OSError, ValueError):
        return float("nan")
    return (b1 - b0) / max(t1 - t0, 1) * (os.cpu_count() or 1)


@contextlib.contextmanager
def others(stat: Path = Path("/proc/stat")) -> Iterator[dict]:
    """How many cores other processes took while the block ran: the machine's busy CPU time less this process's and
    its finished children's (a notebook's kernel), over the block's wall time; ``{"cores": …}`` once it ends (NaN
    where there is no /proc/stat)."""
    import resource
    import time

    def own() -> float:
        return sum(getattr(resource.getrusage(who), f) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
                   for f in ("ru_utime", "ru_stime"))

    seen: dict = {"cores": float("nan")}
    try:
        start = _busy_total(stat)[0], own(), time.perf_counter()
    except (OSError, ValueError):
        yield seen
        return
    yield seen
    busy = (_busy_total(stat)[0] - start[0]) / os.sysconf("SC_CLK_TCK")
    seen["cores"] = max(0.0, busy - (own() - start[1])) / max(time.perf_counter() - start[2], 1e-9)


def record(start: float, end: float) -> dict:
    return {"cores": os.cpu_count(), "load_at_start": round(start, 2), "load_at_end": round(end, 2)}


def note(start: float, end: float) -> str:
    """'' on a machine no busier than its cores, else one Markdown line saying the timings were taken under load."""
    cores = os.cpu_count() or 1
    if not max(start, end) > cores:
        return ""
    return (f"> **Timings taken on a loaded machine.** Load average {start:.1f} when this run started and {end:.1f} "
            f"when it ended, on {cores} cores: other processes shared them, so the step times and throughputs here are "
            "slower than this machine gives when idle. The losses and verdicts do not depend on it.")


def annotate(ipynb: Path, start: float, end: float) -> None:
    """Insert ``note(start, end)``, if any, below the executed notebook's title and profile banner."""
    import nbformat

    text = note(start, end)
    if text:
        nb = nbformat.read(ipynb, as_version=4)
        nb.cells.insert(2, nbformat.v4.new_markdown_cell(text))
        nbformat.write(nb, ipynb)
