"""A first run as a newcomer types it: the runner from a shell, with a relative ODEBOOK_DATA, MPLBACKEND=Agg and an
ODEBOOK_PROFILE exported (as CI and a JupyterLab user might have them), on two tiny studies — one that works and
draws a figure through ``notebook.start``, one that raises a two-line error."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

STUDY = '''
import dataclasses
from odebook import studies
from odebook.params import Params, spec

@dataclasses.dataclass
class Tiny(Params):
    study = "90_ok"
    value: int = spec(1, ge=0)
    checkpoint_dir: str = spec("")
    fresh: bool = spec(False)

studies.schema = lambda name: Tiny
'''
OK = '''# %% tags=["parameters"]
output_dir = ""
value = 1
checkpoint_dir = ""
fresh = False

# %%
import os, pathlib
import tinystudy
from odebook.book import notebook
p, out, _ = notebook.start(tinystudy.Tiny, globals())
assert pathlib.Path(os.environ["ODEBOOK_DATA"]).is_dir(), os.environ["ODEBOOK_DATA"]

# %%
import matplotlib.pyplot as plt
fig, ax = plt.subplots()
ax.plot([1, 2, 3])
notebook.save_figure(fig, out, "line")
'''
FAIL = OK + '\n# %%\nraise RuntimeError("boom\\n  on a second line")\n'


def run_shell(tmp: Path) -> subprocess.CompletedProcess:
    (tmp / "tinystudy.py").write_text(STUDY)
    (tmp / "notebooks").mkdir()
    (tmp / "notebooks" / "90_ok.py").write_text(OK)
    (tmp / "notebooks" / "91_fail.py").write_text(FAIL)
    (tmp / "params" / "smoke").mkdir(parents=True)
    for name in ("90_ok", "91_fail"):
        (tmp / "params" / "smoke" / f"{name}.yaml").write_text("value: 7\n")
    (tmp / "data").mkdir()
    env = {**os.environ, "PYTHONPATH": f"{tmp}{os.pathsep}{ROOT}", "ODEBOOK_DATA": "data", "MPLBACKEND": "Agg",
           "ODEBOOK_PROFILE": "cpu"}  # no params/cpu here: a kernel that saw it would fail
    code = "import sys, tinystudy; from odebook.book import runner; sys.exit(runner.main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, "--profile", "smoke", "90_ok", "91_fail"], cwd=tmp, env=env,
                          capture_output=True, text=True, timeout=600)


def test_the_runner_from_a_shell_is_quiet_resolves_the_data_path_and_reports_shows_figures(tmp_path):
    done = run_shell(tmp_path)
    console = done.stdout + done.stderr
    assert done.returncode == 1, console
    progress = [line for line in done.stdout.splitlines() if line.startswith("[")]
    assert len(progress) == 2, console  # one line per notebook: progress and result
    assert progress[0].startswith("[1/2] 90_ok") and " ok in " in progress[0], console
    assert progress[1].endswith("raised RuntimeError: boom"), console  # the reason's first line, the rest below it
    assert any(line.startswith("    ") and line.strip() == "on a second line" for line in done.stdout.splitlines())
    for noise in ("Executing Cell", "Ending Cell", "without encryption", "Unable to parse", "Input Notebook",
                  "Alternative text"):
        assert noise not in console, console
    assert done.stderr == "", done.stderr
    out = tmp_path / "outputs" / "smoke" / "90_ok"
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["data"] == str(tmp_path / "data")  # resolved where it was typed, passed on absolute
    figures = list((out / "figures").glob("*.png"))
    assert len(figures) == 1 and (out / "90_ok.html").read_text().count("<img") == len(figures)


def test_make_lab_passes_the_data_mirror_on_absolute_and_the_profile(tmp_path):
    make = ["make", "--no-print-directory", "-n", "-f", str(ROOT / "Makefile"), "lab"]
    lab = subprocess.run(make + ["ODEBOOK_DATA=../shared/data", "PROFILE=smoke"], cwd=tmp_path, capture_output=True,
                         text=True).stdout
    assert f"ODEBOOK_DATA={(tmp_path / '../shared/data').resolve()}" in lab and "ODEBOOK_PROFILE=smoke" in lab, lab
    bare = subprocess.run(make, cwd=tmp_path, capture_output=True, text=True, env={
        k: v for k, v in os.environ.items() if k not in ("ODEBOOK_DATA", "PROFILE")}).stdout
    assert "ODEBOOK_DATA" not in bare and "ODEBOOK_PROFILE=cpu" in textwrap.dedent(bare), bare


def test_make_setup_offers_pytorchs_cpu_wheels_and_keeps_the_default_path(tmp_path):
    make = ["make", "--no-print-directory", "-n", "-f", str(ROOT / "Makefile"), "setup"]
    default = subprocess.run(make, cwd=tmp_path, capture_output=True, text=True).stdout
    cpu = subprocess.run(make + ["TORCH_BUILD=cpu"], cwd=tmp_path, capture_output=True, text=True).stdout
    assert '-m pip install  "torch==2.13.0"' in default and "--index-url" not in default
    assert '-m pip install --index-url https://download.pytorch.org/whl/cpu "torch==2.13.0"' in cpu
    assert "torch_build()" in default  # the last step says which build it got


def test_make_run_all_passes_set_to_the_runner_as_data():
    """SET reaches the runner as one argument, its text never pasted into the shell: a key no notebook has stops the
    run before anything runs (exit 2, the runner's line)."""
    def run_all(settings: str) -> subprocess.CompletedProcess:
        return subprocess.run(["make", "--no-print-directory", "-C", str(ROOT), "run-all", "PROFILE=smoke",
                               "NOTEBOOKS=01_gradient_flow", f"SET={settings}"], capture_output=True, text=True,
                              timeout=300)

    done = run_all("steps=3 stepz=3")
    assert done.returncode == 2 and "SET: key 'stepz' is a parameter of none of 01_gradient_flow" in done.stderr
    done = run_all("$(shell touch hacked) `touch hacked`")
    assert done.returncode == 2 and "SET: '$(shell' is not key=value" in done.stderr
    assert not (ROOT / "hacked").exists()
