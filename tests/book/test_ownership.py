"""A run owns its outputs: concurrent runs, unfinished runs, the published paths, keys the runner owns, Ctrl-C, and
make passing names as data (issue 32)."""

import json
import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from odebook.book import publish, runner, stops, wait_policy

from test_runner import OK, OkParams, book  # noqa: F401  (the tiny book fixture)

SLOW = OK.replace('print("computed", value)', 'print("computed", value)\n\n# %%\nimport time\ntime.sleep(4)\n'
                  'print("slept")\n\n# %%\nprint("last cell")\n') + \
    '\n# %%\npathlib.Path(output_dir, "where.json").write_text(json.dumps({"output_dir": output_dir}))\n'
ROOT = Path(__file__).resolve().parents[2]


def _slow_book(book):
    (book.notebooks / "90_ok.py").write_text(SLOW)
    return ["--root", str(book.notebooks.parent), "--profile", "smoke", "90_ok"]


def _published(book) -> tuple:
    out = book.outputs / "smoke" / "90_ok"
    nb = nbformat.read(out / "90_ok.ipynb", as_version=4)
    cells = [(c.execution_count, [o.get("text", "") for o in c.outputs]) for c in nb.cells if c.cell_type == "code"]
    read = lambda name: json.loads((out / name).read_text())  # noqa: E731
    return cells, read("results.json"), read("manifest.json")["status"], read("where.json")


@pytest.mark.slow
def test_two_runs_at_once_one_is_refused_and_the_published_report_is_a_whole_run(book, capsys):
    argv = [*_slow_book(book), "--fresh"]  # run again though unchanged: the runs at once must both start
    assert runner.main(argv) == 0
    alone = _published(book)
    first = multiprocessing.get_context("fork").Process(target=lambda: os._exit(runner.main(argv)))
    first.start()
    lock = book.outputs / "smoke" / ".90_ok.lock"
    deadline = time.monotonic() + 30
    while not (lock.is_file() and lock.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)
    capsys.readouterr()
    assert runner.main(argv) == stops.EXIT_BAD_PARAMETERS  # refused before it touched anything
    err = capsys.readouterr().err
    assert f"already running (pid {first.pid}, since " in err and err.count("\n") == 1
    first.join(60)
    assert first.exitcode == 0
    assert _published(book) == alone  # the same cells, outputs, results and status as a run alone
    assert not list((book.outputs / "smoke").glob(".*"))  # no staging folder, no lock left behind


def test_a_second_run_is_refused_while_the_lock_is_held_and_outputs_stay(book, capsys):
    runner.run_book(book, "smoke", ["90_ok"])
    before = (book.outputs / "smoke" / "90_ok" / "results.json").read_text()
    with publish.run_lock(book.outputs / "smoke", "90_ok"):
        (book.params / "smoke" / "90_ok.yaml").write_text("value: 8\n")
        assert runner.main(["--root", str(book.notebooks.parent), "--profile", "smoke", "90_ok"]) == 2
        assert f"already running (pid {os.getpid()}" in capsys.readouterr().err
        assert runner.main(["--root", str(book.notebooks.parent), "--profile", "smoke", "--clean"]) == 2
    assert (book.outputs / "smoke" / "90_ok" / "results.json").read_text() == before


def test_a_run_that_stopped_before_its_last_cell_is_not_ok(book, monkeypatch):
    """papermill returned without error but a code cell never ran (e.g. its folder was taken away): not "ok"."""
    import papermill

    def partial(nb, path, **kwargs):
        for i, cell in enumerate(c for c in nb.cells if c.cell_type == "code"):
            cell.execution_count = 1 if i == 0 else None
        nbformat.write(nb, path)

    runner.run_book(book, "smoke", ["90_ok"])
    monkeypatch.setattr(papermill, "execute_notebook", partial)
    (res,) = runner.run_book(book, "smoke", ["90_ok"], fresh=True)  # unchanged inputs: only FRESH runs it again
    assert not res.ok and "stopped before its end" in res.error
    failed = json.loads((book.outputs / "smoke" / "90_ok.failed" / "manifest.json").read_text())
    assert failed["status"] == "failed"
    assert json.loads((book.outputs / "smoke" / "90_ok" / "manifest.json").read_text())["status"] == "ok"


def test_results_name_the_published_folder_not_the_staging_one(book):
    (book.notebooks / "90_ok.py").write_text(
        OK + '\n# %%\npathlib.Path(output_dir, "results.json").write_text(json.dumps({"output_dir": output_dir}))\n')
    runner.run_book(book, "smoke", ["90_ok"])
    out = book.outputs / "smoke" / "90_ok"
    assert json.loads((out / "results.json").read_text()) == {"output_dir": str(out.resolve())}


def test_output_dir_in_a_profile_file_is_refused(book, capsys):
    (book.params / "smoke" / "90_ok.yaml").write_text("value: 7\noutput_dir: /tmp/elsewhere\n")
    monkey = OkParams  # the schema has output_dir (every study does); the runner owns it
    assert "output_dir" in {f for f in monkey.__dataclass_fields__}
    assert runner.main(["--root", str(book.notebooks.parent), "--profile", "smoke", "90_ok"]) == 2
    err = capsys.readouterr().err
    assert "90_ok.yaml: key 'output_dir' is set by the runner" in err
    assert not (book.outputs / "smoke" / "90_ok").exists()


def test_ctrl_c_ends_with_one_line_and_keeps_earlier_outputs(book, capsys, monkeypatch):
    runner.run_book(book, "smoke", ["90_ok"])
    before = (book.outputs / "smoke" / "90_ok" / "results.json").read_text()

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    import papermill
    monkeypatch.setattr(papermill, "execute_notebook", interrupted)
    assert runner.main(["--root", str(book.notebooks.parent), "--profile", "smoke", "--fresh", "90_ok"]) == 130
    err = capsys.readouterr().err
    assert err.strip() == ("interrupted; resume with the same command (finished runs and checkpoints are kept)")
    assert (book.outputs / "smoke" / "90_ok" / "results.json").read_text() == before
    assert not list((book.outputs / "smoke").glob(".*"))


# The tiny study registered in a runner of its own, for a real signal to its process group (what Ctrl-C sends)
RUNNER_SCRIPT = """import dataclasses, sys
from odebook import params, studies
from odebook.book import runner

@dataclasses.dataclass
class OkParams(params.Params):
    study = "90_ok"
    value: int = params.spec(1, ge=0)

studies.schema = lambda name: OkParams
sys.exit(runner.main(sys.argv[1:]))
"""
SLEEPING = OK.replace('value = 1', 'checkpoint_dir = ""\nvalue = 1') + \
    '\n# %%\nimport os, time\npathlib.Path(os.environ["SLEEPING"]).write_text("")\ntime.sleep(120)\n'


@pytest.mark.parametrize("sig, code, line", [
    ("SIGINT", stops.EXIT_INTERRUPTED, "interrupted"),
    ("SIGTERM", stops.EXIT_TERMINATED, "terminated (SIGTERM)"),  # timeout, systemd, a SLURM pre-emption
])
def test_ctrl_c_or_sigterm_in_a_running_notebook_ends_with_one_line_and_keeps_earlier_outputs(book, tmp_path, sig,
                                                                                              code, line):
    """SIGINT to the runner's process group while a cell runs, as a terminal's Ctrl-C: the kernel (in a session of its
    own) is interrupted and shut down; ipykernel's error about its closed socket went to the console before. SIGTERM
    ended with no runner line (make's "wait: No child processes"); it now unwinds the same way."""
    import signal

    runner.run_book(book, "smoke", ["90_ok"])
    published = {f.name: f.read_bytes() for f in (book.outputs / "smoke" / "90_ok").iterdir() if f.is_file()}
    (book.notebooks / "90_ok.py").write_text(SLEEPING)
    (tmp_path / "run.py").write_text(RUNNER_SCRIPT)
    sleeping = tmp_path / "sleeping"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SLEEPING": str(sleeping)}
    # as a terminal starts it: SIGINT at its default, even where this test runs under a shell that ignores it (a
    # background job of a script: Python then installs no KeyboardInterrupt, and the run would sleep on)
    run = subprocess.Popen([sys.executable, str(tmp_path / "run.py"), "--root", str(book.notebooks.parent),
                            "--profile", "smoke", "90_ok"], start_new_session=True, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, env=env,
                           preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 120
    while not sleeping.exists() and time.monotonic() < deadline and run.poll() is None:
        time.sleep(0.05)
    time.sleep(1)
    os.killpg(run.pid, getattr(signal, sig))
    out, err = run.communicate(timeout=120)
    assert run.returncode == code, (out, err)
    assert err.strip() == f"{line}; resume with the same command (finished runs and checkpoints are kept)"
    assert out.startswith("[1/1] 90_ok (profile smoke; notebook changed since its run of ") and out.endswith(") … ")
    assert {f.name: f.read_bytes() for f in (book.outputs / "smoke" / "90_ok").iterdir() if f.is_file()} == published
    assert not list((book.outputs / "smoke").glob(".*"))  # no staging folder, no lock


def test_the_kernels_own_messages_go_to_its_log_not_the_console(book, capfd):
    (book.notebooks / "90_ok.py").write_text(
        OK + '\n# %%\nimport atexit, os\natexit.register(os.write, 2, b"kernel: last words at exit\\n")\n')
    runner.run_book(book, "smoke", ["90_ok"])
    assert "last words" not in capfd.readouterr().err
    # the kernel's line is in its log; ipykernel may add its own at shutdown ("KeyboardInterrupt caught in kernel"
    # when jupyter_client interrupts a kernel slow to exit, as on a busy machine), which belongs there too
    assert "kernel: last words at exit\n" in (book.outputs / "smoke" / "90_ok" / "kernel.log").read_text()


# -- make passes names as data -------------------------------------------------------------------------------------
def _make(book, *args) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(["make", "--no-print-directory", "-f", str(ROOT / "Makefile"), f"PY={sys.executable}",
                           *args], cwd=book.notebooks.parent, capture_output=True, text=True, env=env, timeout=120)


def test_a_notebook_name_that_looks_like_an_option_is_a_name(book):
    (book.params / "zz").mkdir()
    (book.outputs / "zz").mkdir(parents=True)
    (book.outputs / "zz" / "keep.txt").write_text("earlier outputs")
    done = _make(book, "run-all", "PROFILE=zz", "NOTEBOOKS=--clean")
    assert done.returncode == 2 and "notebook '--clean': no such notebook" in done.stderr
    assert (book.outputs / "zz" / "keep.txt").read_text() == "earlier outputs"


@pytest.mark.parametrize("variable", ["NOTEBOOKS", "PROFILE"])
@pytest.mark.parametrize("text", ["x; touch hacked; echo", "x\"; touch hacked; echo \"", "$(shell touch hacked)",
                                  "`touch hacked`", "--clean", "a  b"])
def test_make_passes_names_to_the_runner_verbatim_and_never_runs_them(tmp_path, variable, text):
    """A stand-in python records the arguments it gets and exits 2 as the runner does for an unknown name."""
    fake = tmp_path / "bin" / "python"
    fake.parent.mkdir()
    fake.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {tmp_path}/argv\nexit 2\n')
    fake.chmod(0o755)
    done = subprocess.run(["make", "--no-print-directory", "-f", str(ROOT / "Makefile"), f"VENV={tmp_path}", "run-all",
                           f"{variable}={text}"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert not (tmp_path / "hacked").exists()
    argv = (tmp_path / "argv").read_text().splitlines()
    assert (f"--profile={text}" if variable == "PROFILE" else f"--notebooks={text}") in argv
    assert done.returncode == 2 and "Error 2" in done.stderr and "nothing ran" in done.stderr


@pytest.mark.parametrize("load, says", [(9.0, True), (0.5, False)])
def test_a_report_says_when_its_timings_were_taken_on_a_loaded_machine(book, monkeypatch, load, says):
    monkeypatch.setattr(os, "getloadavg", lambda: (load, load, load))
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(wait_policy, "busy_cores", lambda: 2.0 if says else 0.1)
    for name in wait_policy.USER_SET:
        monkeypatch.delenv(name, raising=False)
    runner.run_book(book, "smoke", ["90_ok"])
    out = book.outputs / "smoke" / "90_ok"
    assert ("Timings taken on a loaded machine" in (out / "90_ok.html").read_text()) == says
    assert json.loads((out / "manifest.json").read_text())["machine_load"] == {
        "cores": 2, "load_at_start": load, "load_at_end": load, "busy_cores": 2.0 if says else 0.1,
        "omp_wait_policy": "PASSIVE" if says else "spin (libgomp's default)"}


def test_a_dead_runs_staging_folder_goes_with_the_next_run_and_outputs_are_readable_as_the_umask_says(book):
    """A killed run (SIGKILL) leaves its staging folder; the next run of that notebook, holding its lock, removes it.
    Published folders were mode 0700 (mkdtemp's); they now follow the umask like the rest of the checkout."""
    out = book.outputs / "smoke"
    dead = out / ".90_ok.running-killed"
    (dead / "figures").mkdir(parents=True)
    other = out / ".91_fail.running-alive"  # another notebook's: not this run's to remove
    other.mkdir()
    umask = os.umask(0o022)
    try:
        [result] = runner.run_book(book, "smoke", ["90_ok"])
    finally:
        os.umask(umask)
    assert result.ok and not dead.exists() and other.exists()
    assert (out / "90_ok").stat().st_mode & 0o777 == 0o755
    (dead / "figures").mkdir(parents=True)  # killed again; the next run finds the notebook unchanged (issue 71)
    [skipped] = runner.run_book(book, "smoke", ["90_ok"])
    assert skipped.skipped and not dead.exists() and other.exists()
