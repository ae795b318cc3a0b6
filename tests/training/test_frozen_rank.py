"""A frozen data-parallel rank ends the job with a message naming it (issue 32): ``kill -STOP`` on rank 1 used to
leave rank 0 and torchrun waiting forever."""

import os
import re
import subprocess
import sys
import time

import pytest

TIMEOUT_S = 4  # the collective timeout the job runs with (ODEBOOK_COLLECTIVE_TIMEOUT_S)
LIMIT_S = TIMEOUT_S + 12  # stated bound from the stop to the job's end: the timeout, three heartbeats, the exits


@pytest.mark.slow
def test_a_stopped_rank_ends_the_job_with_a_message_naming_it(root):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           "--monitor-interval=0.5", "-m", "ddp_worker"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "ODEBOOK_COLLECTIVE_TIMEOUT_S": str(TIMEOUT_S),
           "PYTHONPATH": os.pathsep.join([str(root), str(root / "tests")])}
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=180, cwd=root, env=env)
    seconds = time.time() - float(re.search(r"stopping rank 1 at ([0-9.]+)", done.stdout).group(1))
    assert done.returncode != 0
    assert f"a collective waited {TIMEOUT_S} s (ODEBOOK_COLLECTIVE_TIMEOUT_S)" in done.stderr, done.stderr[-3000:]
    assert "stopped answering: rank 1 (pid " in done.stderr
    assert seconds < LIMIT_S, f"the job ended {seconds:.0f} s after rank 1 stopped"


def test_the_heartbeat_advances_and_stops_cleanly(monkeypatch):
    """A live rank's count must advance (a count that stays put names a healthy rank as frozen, and watched() would
    end it), and the thread must leave the store when told to stop (a thread inside the store's client at exit
    aborts the process)."""
    import datetime as dt
    import socket
    import time

    import torch.distributed as dist

    from odebook.training import distributed

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    master = dist.TCPStore("127.0.0.1", port, is_master=True, timeout=dt.timedelta(seconds=10))
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(port))
    monkeypatch.setattr(distributed, "HEARTBEAT_S", 0.05)
    monkeypatch.setattr(distributed, "rank", lambda: 0)
    distributed._start_heartbeat()
    try:
        store = dist.PrefixStore("odebook/heartbeat/", master)
        first = int(store.get("0").decode().split()[0])
        time.sleep(0.3)
        assert int(store.get("0").decode().split()[0]) > first
    finally:
        (_, thread), = distributed._BEATING
        distributed._stop_heartbeat()
    assert not thread.is_alive() and distributed._BEATING == []
