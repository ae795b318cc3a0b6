"""The kernels' OpenMP wait policy: passive on a busy machine, libgomp's spinning on an idle one, the user's own
choice left alone, and the choice recorded."""

import os
import subprocess
import sys
import time

import pytest

from odebook.book import wait_policy


def test_busy_machines_get_passive_waiting_idle_ones_spin_and_the_users_choice_stands():
    assert wait_policy.choose(1.0, {}) == {"OMP_WAIT_POLICY": "PASSIVE"}
    assert wait_policy.choose(wait_policy.BUSY, {}) == {"OMP_WAIT_POLICY": "PASSIVE"}
    assert wait_policy.choose(0.2, {}) == {}
    assert wait_policy.choose(float("nan"), {}) == {}  # unknown: libgomp's default
    assert wait_policy.choose(1.0, {"GOMP_SPINCOUNT": "0"}) == {}
    assert wait_policy.choose(1.0, {"OMP_WAIT_POLICY": "ACTIVE"}) == {}


@pytest.mark.skipif(not os.path.exists("/proc/stat") or not hasattr(os, "sched_setaffinity"), reason="Linux only")
def test_a_process_spinning_on_a_core_counts_as_busy():
    """Built to fail: the measure must see one core's worth of work that it did not do itself."""
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"], preexec_fn=lambda: os.sched_setaffinity(0, {0}))
    try:
        time.sleep(0.3)
        assert wait_policy.busy_cores() >= 0.8
    finally:
        proc.kill()
        proc.wait()


def test_kernels_started_inside_get_the_choice_and_the_manifest_says_it(monkeypatch):
    for name in wait_policy.USER_SET:
        monkeypatch.delenv(name, raising=False)
    show = [sys.executable, "-c", "import os; print(os.environ.get('OMP_WAIT_POLICY', 'unset'))"]
    monkeypatch.setattr(wait_policy, "busy_cores", lambda: 1.3)
    with wait_policy.chosen() as record:
        assert subprocess.run(show, capture_output=True, text=True).stdout.strip() == "PASSIVE"
    assert record == {"busy_cores": 1.3, "omp_wait_policy": "PASSIVE"}
    assert "OMP_WAIT_POLICY" not in os.environ  # only kernels started inside get it
    monkeypatch.setattr(wait_policy, "busy_cores", lambda: 0.1)
    with wait_policy.chosen() as record:
        assert subprocess.run(show, capture_output=True, text=True).stdout.strip() == "unset"
    assert record["omp_wait_policy"] == "spin (libgomp's default)"
    monkeypatch.setenv("GOMP_SPINCOUNT", "1000")
    monkeypatch.setattr(wait_policy, "busy_cores", lambda: 1.3)
    with wait_policy.chosen() as record:
        assert subprocess.run(show, capture_output=True, text=True).stdout.strip() == "unset"
    assert record["omp_wait_policy"] == "set by the user: {'GOMP_SPINCOUNT': '1000'}"
