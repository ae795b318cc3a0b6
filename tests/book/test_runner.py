"""The runner on two tiny notebooks: one that works and one that raises."""

import dataclasses
import html
import json
import os
import subprocess
from pathlib import Path

import pytest

from odebook import params as params_mod
from odebook.book import report_page, runner, stops
from odebook.params import Params, spec

OK = '''# %% tags=["parameters"]
output_dir = ""
value = 1

# %%
import json, pathlib
pathlib.Path(output_dir, "results.json").write_text(json.dumps({"headline": {"value": value}}))
print("computed", value)
'''
FAIL = OK + '\n# %%\nraise RuntimeError("boom from the notebook")\n'


@dataclasses.dataclass
class OkParams(Params):
    study = "90_ok"
    value: int = spec(1, ge=0)


@dataclasses.dataclass
class FailParams(OkParams):
    study = "91_fail"


@pytest.fixture
def book(tmp_path, own_studies) -> runner.Book:
    own_studies({"90_ok": OkParams, "91_fail": FailParams})
    b = runner.Book(tmp_path / "notebooks", tmp_path / "params", tmp_path / "outputs")
    b.notebooks.mkdir()
    (b.params / "smoke").mkdir(parents=True)
    (b.params / "cpu").mkdir()  # a profile without parameter files
    (b.notebooks / "90_ok.py").write_text(OK)
    (b.notebooks / "91_fail.py").write_text(FAIL)
    (b.params / "smoke" / "90_ok.yaml").write_text("value: 7\n")
    (b.params / "smoke" / "91_fail.yaml").write_text("{}\n")
    return b


def test_a_failing_notebook_does_not_stop_the_others_and_is_rendered(book):
    results = runner.run_book(book, "smoke")
    assert [(r.name, r.ok) for r in results] == [("90_ok", True), ("91_fail", False)]
    ok, failed = book.outputs / "smoke" / "90_ok", book.outputs / "smoke" / "91_fail.failed"
    assert {p.name for p in ok.iterdir()} >= {"90_ok.ipynb", "90_ok.html", "manifest.json", "results.json"}
    assert json.loads((ok / "results.json").read_text()) == {"headline": {"value": 7}}  # the YAML value was used
    manifest = json.loads((ok / "manifest.json").read_text())
    assert manifest["status"] == "ok" and manifest["parameters"]["value"] == 7
    assert {"git_commit", "packages", "device", "started", "finished"} <= set(manifest)
    assert "boom from the notebook" in (failed / "91_fail.html").read_text()
    assert json.loads((failed / "manifest.json").read_text())["status"] == "failed"
    index = (book.outputs / "smoke" / "index.html").read_text()
    assert "90_ok/90_ok.html" in index and "91_fail.failed/91_fail.html" in index and "value: 7" in index
    assert not list((book.outputs / "smoke").glob(".*"))  # no staging folders left behind


def test_a_failed_rerun_keeps_the_last_successful_outputs(book):
    runner.run_book(book, "smoke", ["90_ok"])
    (book.notebooks / "90_ok.py").write_text(FAIL)
    assert runner.main(["--root", str(book.notebooks.parent), "--profile", "smoke", "90_ok"]) == 1
    out = book.outputs / "smoke"
    assert json.loads((out / "90_ok" / "results.json").read_text()) == {"headline": {"value": 7}}
    assert (out / "90_ok.failed" / "90_ok.html").is_file()
    assert "last success" in (out / "index.html").read_text()
    (book.notebooks / "90_ok.py").write_text(OK)  # a later success clears the failure
    runner.run_book(book, "smoke", ["90_ok"])
    assert not (out / "90_ok.failed").exists()


def test_a_page_nbconvert_cannot_render_costs_no_run(book, monkeypatch, capsys):
    """On a GPU machine whose nbconvert had no HTML templates, the exporter raised after study 01's t4 notebook had
    run for 7 minutes, and the run was lost with its staging folder. Now the executed notebook, its results and
    manifest are published, the page and the manifest say why there is no rendering, and the console says it once."""
    import nbconvert

    def no_templates(*args, **kwargs):
        raise ValueError("No template sub-directory with name 'lab' found in the following paths:\n\t/tmp/x")

    monkeypatch.setattr(nbconvert, "HTMLExporter", no_templates)
    [result] = runner.run_book(book, "smoke", ["90_ok"])
    out = book.outputs / "smoke" / "90_ok"
    assert result.ok and json.loads((out / "results.json").read_text()) == {"headline": {"value": 7}}
    assert (out / "90_ok.ipynb").is_file()
    why = "nbconvert could not render 90_ok.ipynb as HTML (ValueError: No template sub-directory with name 'lab' " \
          "found in the following paths:)"
    assert json.loads((out / "manifest.json").read_text())["html_error"] == why
    assert html.escape(why) in (out / "90_ok.html").read_text()
    assert f"90_ok: {why}; the executed notebook is kept" in capsys.readouterr().err


def test_a_report_opens_on_its_findings(book):
    """A report's first cells were its code (8,500 px of it before 01's verdicts): the executed notebook now has, after
    its title, a Findings cell with each claim's verdict and effect, primary claims first, read from results.json
    — above the first code cell, in the notebook and in its HTML page."""
    import nbformat

    verdicts = [{"claim": "a side note", "verdict": "inconclusive", "evidence": "mean 0.1 [-1, 1] (n = 3)",
                 "role": "secondary"},
                {"claim": "the hybrid beats the control", "verdict": "held", "role": "primary, Holm over 1",
                 "evidence": "mean a − b = 0.46 [0.15, 0.77] (n = 5); p = 0.007", "scale": "d 64, 720 steps"}]
    (book.notebooks / "90_ok.py").write_text(OK.replace(
        'json.dumps({"headline": {"value": value}})', f'json.dumps({{"headline": {{}}, "verdicts": {verdicts!r}}})')
        .replace("# %% tags", "# %% [markdown]\n# # 90 · ok\n\n# %% tags", 1))
    [result] = runner.run_book(book, "smoke", ["90_ok"])
    assert result.ok, result.error
    out = book.outputs / "smoke" / "90_ok"
    nb = nbformat.read(out / "90_ok.ipynb", as_version=4)
    at = next(i for i, c in enumerate(nb.cells) if c.source.startswith(report_page.FINDINGS))
    assert nb.cells[0].source.startswith("# 90 · ok") and nb.cells[1].source.startswith("> **Smoke profile")
    assert at >= 2 and all(c.source.startswith(">") for c in nb.cells[1:at])  # below the banner (no verdict here
    assert all(c.cell_type == "markdown" for c in nb.cells[:at])              # counts) and a loaded machine's note
    first, second = nb.cells[at].source.split("\n")[2:4]
    assert first == "- **held** — the hybrid beats the control: a − b = 0.46 [0.15, 0.77], n = 5 *(primary)*"
    assert second.startswith("- **inconclusive** — a side note")
    body = (out / "90_ok.html").read_text().split("<body", 1)[1]  # the head's styles name every cell class
    folded, cells = body.split(report_page.FOLD, 1)  # the code folded behind a button, from the top of the page
    assert "Findings" not in folded and cells.index("Findings") < cells.index("jp-CodeCell")


def test_invalid_parameters_stop_everything_before_any_compute(book, capsys):
    (book.params / "smoke" / "91_fail.yaml").write_text("value: -1\nvalu: 2\n")
    code = runner.main(["--root", str(book.notebooks.parent), "--profile", "smoke"])
    err = capsys.readouterr().err
    assert code == 2
    assert "91_fail.yaml" in err and "key 'value' = -1: must be >= 0" in err and "unknown key 'valu'" in err
    assert not book.outputs.exists()  # nothing ran, not even the valid notebook


def test_unknown_notebook_and_missing_parameter_file_are_reported(book, capsys):
    assert runner.main(["--root", str(book.notebooks.parent), "--profile", "smoke", "99_nope"]) == 2
    assert "no such notebook" in capsys.readouterr().err
    assert runner.main(["--root", str(book.notebooks.parent), "--profile", "cpu", "90_ok"]) == 2
    assert "parameter file not found" in capsys.readouterr().err


def test_a_full_disk_stops_the_book_with_one_line_and_keeps_what_was_published(book, capsys, monkeypatch):
    """papermill writing its notebook onto a full disk (ENOSPC): one line naming the outputs folder and the free
    space, exit 28, the earlier report untouched and no staging folder left."""
    import errno

    import papermill

    root = str(book.notebooks.parent)
    assert runner.main(["--root", root, "--profile", "smoke", "90_ok"]) == 0
    before = (book.outputs / "smoke" / "90_ok" / "results.json").read_text()
    capsys.readouterr()

    def full(nb, path, **kwargs):
        Path(path).write_text('{"cells": [')  # half written, as papermill leaves it
        raise OSError(errno.ENOSPC, "No space left on device", path)

    monkeypatch.setattr(papermill, "execute_notebook", full)
    assert runner.main(["--root", root, "--profile", "smoke", "--fresh", "90_ok"]) == stops.EXIT_DISK_FULL
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: the disk holding {book.outputs} is full (")
    assert "MiB free; writing " in err[0] and "90_ok.ipynb failed): free some space" in err[0]
    assert (book.outputs / "smoke" / "90_ok" / "results.json").read_text() == before
    assert not [p for p in (book.outputs / "smoke").iterdir() if p.name.startswith(".") and p.is_dir()]


# -- names that become paths ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("profile", ["/tmp/elsewhere", "../notebooks", "smoke/..", "", "nope"])
def test_a_profile_must_be_a_folder_name_under_params(book, capsys, tmp_path, profile):
    victim = tmp_path / "elsewhere"
    victim.mkdir(exist_ok=True)
    (victim / "keep.txt").write_text("mine")
    root = str(book.notebooks.parent)
    assert runner.main(["--root", root, "--profile", profile, "90_ok"]) == stops.EXIT_BAD_PARAMETERS
    assert runner.main(["--root", root, "--profile", profile, "--clean"]) == stops.EXIT_BAD_PARAMETERS
    err = capsys.readouterr().err
    assert f"profile {profile!r}: not a folder of" in err and "known profiles: cpu, smoke" in err
    assert (victim / "keep.txt").read_text() == "mine" and (book.notebooks / "90_ok.py").is_file()
    assert not book.outputs.exists()


@pytest.mark.parametrize("name", ["../notebooks/90_ok", "/tmp/90_ok", "90_ok.py", "."])
def test_a_notebook_must_be_a_name_under_notebooks(book, capsys, name):
    assert runner.main(["--root", str(book.notebooks.parent), "--profile", "smoke", name]) == 2
    assert f"notebook {name!r}: no such notebook in" in capsys.readouterr().err
    assert not book.outputs.exists()


def test_clean_deletes_only_the_profiles_outputs(book):
    runner.run_book(book, "smoke", ["90_ok"])
    (book.outputs / "keep.txt").write_text("x")
    assert runner.main(["--root", str(book.notebooks.parent), "--profile", "smoke", "--clean"]) == 0
    assert not (book.outputs / "smoke").exists() and (book.outputs / "keep.txt").is_file()


def test_nothing_outside_outputs_is_replaced(book, tmp_path):
    with pytest.raises(params_mod.ParamError, match="lies outside"):
        runner._inside(book.outputs / "smoke" / ".." / ".." / "notebooks", book.outputs)
    with pytest.raises(params_mod.ParamError, match="lies outside"):
        runner._inside(book.outputs, book.outputs)  # not the outputs folder itself either
    assert runner._inside(book.outputs / "smoke" / "x", book.outputs) == book.outputs / "smoke" / "x"


# -- through make --------------------------------------------------------------------------------------------------
MAKE = ["make", "--no-print-directory", "-f", str(Path(__file__).resolve().parents[2] / "Makefile")]


@pytest.mark.parametrize("status, says", [(2, "invalid parameters, profile or notebook name: nothing ran"),
                                          (1, "a notebook failed; see outputs/smoke/index.html")])
def test_make_run_all_says_whether_parameters_were_bad_or_a_notebook_failed(tmp_path, status, says):
    """GNU make exits 2 on any failed recipe; the runner's own status shows in make's 'Error N' and in one line."""
    fake = tmp_path / "bin" / "python"
    fake.parent.mkdir()
    fake.write_text(f"#!/bin/sh\nexit {status}\n")
    fake.chmod(0o755)
    done = subprocess.run(MAKE + ["run-all", "PROFILE=smoke", f"VENV={tmp_path}"], cwd=tmp_path,
                          capture_output=True, text=True)
    assert done.returncode == 2 and says in done.stderr and f"Error {status}" in done.stderr


def test_make_lab_allows_root_only_as_root_and_make_setup_registers_no_user_kernel(tmp_path):
    lab = subprocess.run(MAKE + ["-n", "lab"], cwd=tmp_path, capture_output=True, text=True).stdout
    assert ("--allow-root" in lab) == (os.getuid() == 0)
    setup = subprocess.run(MAKE + ["-n", "setup"], cwd=tmp_path, capture_output=True, text=True).stdout
    assert "pip install" in setup and "kernelspec" not in setup and "ipykernel install" not in setup


def test_the_venvs_jupyter_runs_python3_with_its_own_python(tmp_path, monkeypatch):
    """Even with a user-wide 'python3' kernel pointing elsewhere, the environment's Jupyter (make lab, papermill
    from .venv/bin) resolves the notebooks' kernel name to this interpreter."""
    import sys

    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager

    user = tmp_path / "user" / "kernels" / "python3"
    user.mkdir(parents=True)
    (user / "kernel.json").write_text(json.dumps({"argv": ["/other/checkout/.venv/bin/python", "-m",
                                                           "ipykernel_launcher", "-f", "{connection_file}"],
                                                  "display_name": "other", "language": "python"}))
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "user"))
    if sys.prefix == sys.base_prefix:
        pytest.skip("not running in a virtual environment")
    monkeypatch.delenv("JUPYTER_PREFER_ENV_PATH", raising=False)
    km = KernelManager(kernel_name="python3", kernel_spec_manager=KernelSpecManager())
    assert km.format_kernel_cmd()[0] == sys.executable


# -- reports and the front page ------------------------------------------------------------------------------------
REPORT = '''# %% [markdown]
# # 92 · A study
#
# **Question.** Does the front page show what was asked?
#
# More text.

# %% tags=["parameters"]
output_dir = ""
value = 1

# %%
import json, pathlib
out = pathlib.Path(output_dir)
print("outputs:", out)
(out / "figures").mkdir(exist_ok=True)
(out / "figures" / "key.png").write_bytes(b"png")
verdicts = [{"claim": "the answer is shown", "verdict": "held", "evidence": "7 of 7 shown", "scale": "tiny"}]
(out / "results.json").write_text(json.dumps({"headline": {"value": value}, "verdicts": verdicts}))

# %%
import sys
from tqdm import tqdm
for run in ("run a", "run b"):
    bar = tqdm(range(3), desc=run, mininterval=0)
    for _ in bar:
        bar.set_postfix(loss="1.5")
print("a warning", file=sys.stderr)
'''


def test_reports_carry_the_profile_banner_and_the_final_path_and_the_index_is_a_front_page(book, own_studies):
    own_studies({"90_ok": OkParams, "91_fail": FailParams, "92_report": OkParams})
    (book.notebooks / "92_report.py").write_text(REPORT)
    (book.params / "smoke" / "92_report.yaml").write_text("{}\n")
    runner.run_book(book, "smoke", ["92_report", "91_fail"])
    out = book.outputs / "smoke"
    report = (out / "92_report" / "92_report.ipynb").read_text()
    assert "no verdict here counts" in report  # the smoke banner
    assert ".running" not in report and str((out / "92_report").resolve()) in report
    last = [(o["name"], "".join(o["text"])) for o in json.loads(report)["cells"][-1]["outputs"]]
    assert last == [("stdout", "run a: 3/3 steps in 00:00 (loss=1.5)\nrun b: 3/3 steps in 00:00 (loss=1.5)\n"),
                    ("stderr", "a warning\n")]  # one line per progress bar; other stderr kept
    page = (out / "index.html").read_text()
    assert "92 · A study" in page and "Does the front page show what was asked?" in page
    assert "the answer is shown" in page and "7 of 7 shown" in page and "measured at tiny" in page
    assert "92_report/figures/key.png" in page
    assert "RuntimeError: boom from the notebook" in page and "whole error" in page
    trace = json.loads((out / "91_fail.failed" / "manifest.json").read_text())["traceback"]
    assert 'raise RuntimeError("boom from the notebook")' in trace and "\x1b[" not in trace


CKPT = '''# %% tags=["parameters"]
output_dir = ""
checkpoint_dir = ""
fresh = False
fail = False

# %%
import json, pathlib
folder = pathlib.Path(checkpoint_dir)
folder.mkdir(parents=True, exist_ok=True)
with open(folder / "runs.txt", "a") as f:
    f.write(f"fresh={fresh}\\n")
pathlib.Path(output_dir, "results.json").write_text(json.dumps({"headline": {"fresh": fresh}}))
assert not fail, "failed after writing a checkpoint"
'''


@dataclasses.dataclass
class CkptParams(Params):
    study = "92_ckpt"
    checkpoint_dir: str = spec("")
    fresh: bool = spec(False)
    fail: bool = spec(False)


def test_checkpoints_survive_reruns_and_failures_and_fresh_reaches_the_notebook(book, own_studies):
    """Runs keep checkpoints in outputs/<profile>/<notebook>/checkpoints/: a successful re-run carries them into its
    new outputs, a failed one leaves them in place, and --fresh (make run-all FRESH=1) sets the notebook's fresh."""
    own_studies({"92_ckpt": CkptParams})
    (book.notebooks / "92_ckpt.py").write_text(CKPT)
    (book.params / "smoke" / "92_ckpt.yaml").write_text("{}\n")
    log = book.outputs / "smoke" / "92_ckpt" / "checkpoints" / "runs.txt"
    runner.run_book(book, "smoke", ["92_ckpt"])
    runner.run_book(book, "smoke", ["92_ckpt"], fresh=True)
    assert log.read_text() == "fresh=False\nfresh=True\n"
    (book.params / "smoke" / "92_ckpt.yaml").write_text("fail: true\n")
    assert not runner.run_book(book, "smoke", ["92_ckpt"])[0].ok
    assert log.read_text() == "fresh=False\nfresh=True\nfresh=False\n"  # the failed run's checkpoint is kept


def test_a_failed_notebooks_error_is_shown_as_its_lines_not_joined_into_one(tmp_path):
    """A failed job array's error holds each job's traceback; the console shows it as lines (the first beside
    FAILED), cut after ERROR_LINES with where the whole is."""
    from odebook.book.runner import ERROR_LINES, error_lines

    trace = "\n".join(f'  File "x.py", line {i}, in f' for i in range(100))
    text = f"cell [7] raised JobsFailed: 1 of 3 jobs failed (logs in /j):\n\njob 5 (run 2 of this array): boom\n{trace}"
    lines = error_lines(text, tmp_path / "01.failed")
    assert lines[0] == "cell [7] raised JobsFailed: 1 of 3 jobs failed (logs in /j):"
    assert lines[1] == "job 5 (run 2 of this array): boom" and lines[2] == '  File "x.py", line 0, in f'
    assert len(lines) == ERROR_LINES + 2 and lines[-1].startswith("… 61 more lines")
    assert str(tmp_path / "01.failed" / "manifest.json") in lines[-1]
    assert error_lines("cell [3] raised ValueError: bad", tmp_path) == ["cell [3] raised ValueError: bad"]


def test_only_a_run_that_trains_everything_calibrates_the_budget(tmp_path):
    checkpoints = tmp_path / "01_x" / "checkpoints"
    assert runner.calibrates(checkpoints, fresh=False)  # nothing stored: every run trains
    checkpoints.mkdir(parents=True)
    assert runner.calibrates(checkpoints, fresh=False)  # an empty folder: the same
    (checkpoints / "run.pt").write_bytes(b"")
    assert not runner.calibrates(checkpoints, fresh=False)  # runs it may reuse: seconds for minutes
    assert runner.calibrates(checkpoints, fresh=True)  # fresh: they are ignored


def test_papermills_warning_for_a_machine_or_grouped_setting_stays_off_the_console(caplog):
    """The runner passes output_dir, checkpoint_dir, fresh and 02's models, which no parameters cell assigns, and
    settings a cell shows in a group (steps, in training): papermill's "Passed unknown parameter" for them is noise;
    for any other name it stays."""
    import logging

    from odebook.book.kernel import KnownSettingsPassed

    logger, quiet = logging.getLogger("papermill"), KnownSettingsPassed()  # the logger papermill.execute warns on
    logger.addFilter(quiet)
    try:
        with caplog.at_level(logging.WARNING, logger="papermill"):
            for name in ("output_dir", "checkpoint_dir", "fresh", "steps", "models", "stepz"):
                logger.warning(f"Passed unknown parameter: {name}")
    finally:
        logger.removeFilter(quiet)
    assert [r.getMessage() for r in caplog.records] == ["Passed unknown parameter: stepz"]



def test_submitits_sacct_warnings_stay_off_the_report_with_one_line_that_says_what_they_meant(caplog, capsys):
    """On a cluster without accounting submitit warns at every poll that sacct failed; the book's Submitit executor
    installs a filter (once) that drops those, says once what they meant, and lets any other message through."""
    import logging

    from odebook.book.kernel import AccountingOff

    logger = logging.getLogger("submitit")
    quiet = AccountingOff.install()
    try:
        assert AccountingOff.install() is quiet and logger.filters.count(quiet) == 1
        with caplog.at_level(logging.WARNING, logger="submitit"):
            for call in range(1, 4):
                logger.warning(f"Call #{call} - Bypassing sacct error Command '['sacct', '-j', '7']' returned non-zero "
                               "exit status 1., status may be inaccurate.")
            logger.warning("Job 7 failed")
    finally:
        logger.removeFilter(quiet)
    assert [r.getMessage() for r in caplog.records] == ["Job 7 failed"]
    assert capsys.readouterr().out.count("SLURM's accounting (sacct) does not answer here") == 1

TRAINS = OK + '''
# %%
import time, torch
from odebook.training.runtime import Precision
from odebook.training.train import TrainConfig, train

def slow_loss(model, batch):  # a step of 20 ms: a run of 5 s
    time.sleep(0.02)
    return model(batch).pow(2).mean()

batch = torch.ones(4, 2)
train(torch.nn.Linear(2, 1), iter(lambda: batch, None), [batch], TrainConfig(steps=250, lr=1e-3, eval_interval=250),
      Precision(torch.device("cpu"), None), loss_fn=slow_loss, desc="tiny seed 0", progress=False)
'''


def test_the_console_shows_the_training_progress_of_a_running_notebook(book, own_studies, monkeypatch, capsys):
    """Nothing moved on the console between a notebook's start and its end (issue 72): now the training loop reports
    to a file the runner follows, and the console shows the latest report — each on a line of its own where asked
    for in a log (ODEBOOK_PROGRESS=1; on a terminal, rewritten in place), advancing to the run's last step."""
    import functools

    from odebook.book import kernel

    own_studies({"92_trains": OkParams})
    (book.notebooks / "92_trains.py").write_text(TRAINS)
    (book.params / "smoke" / "92_trains.yaml").write_text("{}\n")
    monkeypatch.setenv(kernel.SHOW_ENV, "1")
    monkeypatch.setattr(kernel, "progress", functools.partial(kernel.progress, every=0.5))
    [result] = runner.run_book(book, "smoke", ["92_trains"])
    out = capsys.readouterr().out
    steps = [int(line.split("step ")[1].split("/")[0]) for line in out.splitlines()
             if line.startswith("    tiny seed 0: step ")]
    assert result.ok and len(steps) >= 2 and steps == sorted(steps) and steps[-1] == 250, out
    assert "    ok in " in out and not list((book.outputs / "smoke").rglob("progress.log"))
    monkeypatch.setenv(kernel.SHOW_ENV, "0")  # CI's log: nothing
    runner.run_book(book, "smoke", ["92_trains"], fresh=True)
    assert "tiny seed 0" not in capsys.readouterr().out


def test_an_interrupted_run_says_one_line_and_no_asyncio_task_dump_follows(tmp_path, capsys, caplog):
    """A signal that arrives while a cell runs with worker processes left nbclient's cell task with an exception no
    one retrieved; at exit asyncio logged it — a 145-line dump after the one-line message (issue 71). Once the run
    stops, the asyncio logger is off: the one line is all."""
    import asyncio
    import gc
    import logging

    async def cell():
        raise RuntimeError("the kernel was interrupted")

    loop = asyncio.new_event_loop()
    task = loop.create_task(cell())
    loop.run_until_complete(asyncio.sleep(0.01))  # the task ends with its exception, never retrieved
    asyncio_log = logging.getLogger("asyncio")
    try:
        assert stops.report(stops.Terminated(), tmp_path) == stops.EXIT_TERMINATED
        del task
        gc.collect()  # where asyncio says "Task exception was never retrieved"
        loop.close()
        assert not [r for r in caplog.records if r.name == "asyncio"]
        err = capsys.readouterr().err.strip().splitlines()
        assert err == ["terminated (SIGTERM); resume with the same command (finished runs and checkpoints are kept)"]
    finally:
        asyncio_log.disabled = False


def test_a_set_key_that_moves_only_a_descriptive_section_is_said_before_anything_runs(capsys):
    """01's ``steps`` trains only its WikiText section: SET steps=40 runs, and the runner says that its verdicts rest
    on the task's settings instead; a key the verdicts rest on gets no such line."""
    book = runner.Book.at(Path(__file__).resolve().parents[2])
    runner.validate(book, "smoke", ["01_gradient_flow", "05_ode_solvers"], {"steps": 40, "task_steps": 6})
    out = capsys.readouterr().out
    assert "SET steps=40: in 01_gradient_flow this changes only the WikiText section, which is descriptive" in out
    assert "task_steps" in out and "SET task_steps" not in out and "in 05_ode_solvers" not in out


def test_a_kernel_log_keeps_each_progress_bar_as_a_terminal_shows_it(tmp_path):
    """tqdm redraws a bar in place with carriage returns; the log a run leaves keeps the last drawing of each line,
    and every other line as it was."""
    from odebook.book import kernel

    log = tmp_path / "kernel.log"
    with kernel.log_to(log):
        log.write_text("run a:  0%| 0/9\rrun a: 50%| 4/9\rrun a: 100%| 9/9\nwarning: kept\r\nlast words\n")
    assert log.read_text() == "run a: 100%| 9/9\nwarning: kept\nlast words\n"
