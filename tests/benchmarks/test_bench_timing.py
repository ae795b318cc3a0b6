"""The bench's guard against "alone" figures that another process shared (benchmarks/timing.py)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.timing import CONTAMINATED, contaminated

ROOT = Path(__file__).resolve().parents[2]


def test_a_figure_is_alone_only_with_its_threads_on_their_cores_and_no_other_process_busy():
    assert contaminated(0.97, 0.1) == ""
    assert contaminated(0.5, 0.0) == "its threads on a core 50% of the time"
    assert contaminated(0.97, 1.2) == "1.2 cores busy with other processes"
    assert "busy" in contaminated(0.4, 0.9) and "50%" not in contaminated(0.97, 0.0)


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="pins processes to a core (Linux)")
def test_timing_beside_a_process_on_the_same_core_is_flagged():
    # a spinning process and the timed one pinned to the same core share it about half and half
    pin = "import os; os.sched_setaffinity(0, {0}); "
    spinner = subprocess.Popen([sys.executable, "-c", pin + "\nwhile True: pass"])
    try:
        timed = subprocess.run([sys.executable, "-c", pin + "from benchmarks.timing import timed; "
                                "print(timed(lambda: sum(range(300_000)), 40)[1])"],
                               cwd=ROOT, capture_output=True, text=True, check=True)
    finally:
        spinner.kill()
        spinner.wait()
    share = float(timed.stdout)
    assert share < CONTAMINATED and contaminated(share, 0.0), share


def test_a_failing_bench_worker_stops_with_one_line_naming_it():
    from benchmarks import cpu_profile

    line = r"bench: the worker for step no_such_study 1 1 0 failed: .*ParamError: .*no_such_study"
    with pytest.raises(SystemExit, match=line):
        cpu_profile._in_worker(["step", "no_such_study", "1", "1", "0"], {})
