"""A notebook run in JupyterLab or Colab, not by the runner, showed nothing while its runs trained in worker
processes (issue 72): their bars went to the workers' stderr. Now the runs report to a file and a display under the
running cell shows each run in progress."""

import sys
import time
import types

from odebook.book import kernel
from odebook.training.train import PROGRESS_ENV


def test_running_shows_each_unfinished_run_behind_a_bar_and_counts_the_finished(tmp_path):
    log = tmp_path / "progress.log"
    log.write_text("baseline seed 1 lr 0.001: step 500/2000, 00:20 taken, 01:00 left\n"
                   "hybrid seed 1 lr 0.001: step 100/400, 00:05 taken, 00:15 left\n"
                   "baseline seed 1 lr 0.001: step 1000/2000, 00:40 taken, 00:40 left\n"
                   "null seed 1 lr 0.001: step 400/400, 00:10 taken, 00:00 left\n"
                   "a line cut off by a writer: step 3\n")
    lines = kernel.running(log, width=10)
    assert lines == ["█████····· baseline seed 1 lr 0.001: step 1000/2000, 00:40 taken, 00:40 left",
                     "██········ hybrid seed 1 lr 0.001: step 100/400, 00:05 taken, 00:15 left",
                     "1 run finished"]
    assert kernel.running(tmp_path / "none.log") == []


class _Handle:
    def __init__(self):
        self.shown = []

    def update(self, obj, raw=False):
        self.shown.append(obj["text/plain"])


def test_in_a_kernel_no_runner_follows_the_runs_report_to_a_file_and_the_cell_shows_them(tmp_path, monkeypatch):
    handle = _Handle()
    shell = types.SimpleNamespace(kernel=object())
    monkeypatch.setitem(sys.modules, "IPython", types.SimpleNamespace(get_ipython=lambda: shell))
    monkeypatch.setitem(sys.modules, "IPython.display",
                        types.SimpleNamespace(display=lambda *a, **k: handle))
    monkeypatch.setenv(PROGRESS_ENV, "")  # unset (and restored after the test, whatever the call sets)
    monkeypatch.setattr(kernel, "_SHOWN", [])
    assert kernel.show_in_cell(tmp_path, every=0.05)
    report = tmp_path / "progress.log"
    assert kernel.os.environ[PROGRESS_ENV] == str(report)  # what the workers it starts inherit
    report.write_text("hybrid seed 3 lr 0.001: step 10/20, 00:01 taken, 00:01 left\n")
    deadline = time.monotonic() + 5
    while not handle.shown and time.monotonic() < deadline:
        time.sleep(0.05)
    assert handle.shown and "step 10/20" in handle.shown[-1]
    assert kernel.show_in_cell(tmp_path, every=0.05)  # a later cell takes it over: the report file is the same
    kernel._SHOWN[0].set()


def test_under_the_runner_or_outside_a_kernel_nothing_is_shown(tmp_path, monkeypatch):
    monkeypatch.setattr(kernel, "_SHOWN", [])
    monkeypatch.setenv(PROGRESS_ENV, str(tmp_path / "runner.log"))  # the runner follows it on the console
    shell = types.SimpleNamespace(kernel=object())
    monkeypatch.setitem(sys.modules, "IPython", types.SimpleNamespace(get_ipython=lambda: shell))
    assert not kernel.show_in_cell(tmp_path)
    monkeypatch.setenv(PROGRESS_ENV, "")
    monkeypatch.setitem(sys.modules, "IPython", types.SimpleNamespace(get_ipython=lambda: None))
    assert not kernel.show_in_cell(tmp_path) and not kernel.os.environ[PROGRESS_ENV]
