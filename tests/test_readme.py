"""The README's commands, and those of docs/, run as written.

Every line of their ```bash blocks is a command a newcomer types; each must appear in COMMANDS, which says
how this test runs it: in a copy of the checkout that sits beside a ``shared/data`` folder (the data mirror, so the
README's relative ``ODEBOOK_DATA=../shared/data`` is exercised, not CI's absolute one), with the short profile
passed through the environment where the command itself names none (make's ``PROFILE ?=`` takes it from there).
``make test`` and ``make test-all`` collect this file, not run again (CI runs them; running them here would run this
test inside itself).
"""

import json
import os
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from conftest import ROOT

README = ROOT / "README.md"
COPY_IGNORE = shutil.ignore_patterns(".venv", ".git", "outputs", "__pycache__", "*.egg-info")
SHORT = {"PROFILE": "smoke", "NOTEBOOKS": "01_gradient_flow"}
# make test and make test-all collect this file only: collecting the whole suite took 26 s each, to show what one
# file shows (the target runs this venv's pytest with its markers)
COLLECT_ONLY = {"PYTEST_ADDOPTS": "--collect-only -q tests/test_readme.py"}


@dataclass(frozen=True)
class How:
    env: dict = field(default_factory=dict)  # added to the environment (never to the command line)
    data: str = "absolute"  # "absolute": ODEBOOK_DATA exported as CI does; "none": the command names its own
    fresh_venv: bool = False  # the command builds .venv itself
    server: bool = False  # a server: started, checked, stopped
    expect: tuple = ()  # files (relative to the copy) the command must leave
    ran_with: dict = field(default_factory=dict)  # a results.json (relative to the copy) → parameters it must hold


COMMANDS = {
    "make setup": How(fresh_venv=True),
    "make run-all": How(env=SHORT, expect=("outputs/smoke/01_gradient_flow/01_gradient_flow.html",)),
    "make run-all PROFILE=smoke": How(env={"NOTEBOOKS": "01_gradient_flow"},
                                      expect=("outputs/smoke/01_gradient_flow/results.json",)),
    "make run-all ODEBOOK_DATA=../shared/data": How(env=SHORT, data="none",
                                                     expect=("outputs/smoke/01_gradient_flow/results.json",)),
    "make run-all PROFILE=smoke ODEBOOK_DATA=../shared/data": How(env={"NOTEBOOKS": "01_gradient_flow"}, data="none",
                                                                   expect=("outputs/smoke/01_gradient_flow/results.json",)),
    "make check-reports": How(),
    "make lint": How(),
    "make test": How(env=COLLECT_ONLY),
    "make test-all": How(env=COLLECT_ONLY),
    'make run-all PROFILE=smoke NOTEBOOKS="01_gradient_flow"': How(expect=("outputs/smoke/index.html",)),
    'make run-all PROFILE=smoke SET="n_seeds=3"': How(
        env={"NOTEBOOKS": "01_gradient_flow"},
        ran_with={"outputs/smoke/01_gradient_flow/results.json": {"n_seeds": 3, "task_steps": 12}}),
    "make lab PROFILE=smoke ODEBOOK_DATA=../shared/data": How(data="none", server=True),
    "ODEBOOK_PROFILE=smoke .venv/bin/papermill notebooks/01_gradient_flow.ipynb out.ipynb --cwd notebooks -p steps 20":
        How(expect=("out.ipynb",)),
}


def readme_commands() -> list[str]:
    """The lines of every ```bash block of README and docs/, without their trailing comments, each once."""
    text = "\n".join(p.read_text(encoding="utf-8") for p in [README, *sorted((ROOT / "docs").glob("*.md"))])
    blocks = re.findall(r"^[ \t]*```bash\n(.*?)^[ \t]*```", text, re.S | re.M)
    lines = [re.sub(r"\s+#.*$", "", line).strip() for block in blocks for line in block.splitlines()]
    return list(dict.fromkeys(line for line in lines if line and not line.startswith("#")))


def test_every_readme_command_is_run_by_this_test():
    commands = readme_commands()
    assert commands, "no ```bash block in README.md"
    assert [c for c in commands if c not in COMMANDS] == [], "a README command this test does not run"
    assert [c for c in COMMANDS if c not in commands] == [], "a command this test runs that README no longer has"


@pytest.fixture(scope="module")
def beside_the_mirror(tmp_path_factory) -> Path:
    """<tmp>/odebook, a copy of this checkout (the shared environment as its .venv), beside <tmp>/shared/data."""
    data = Path(os.environ.get("ODEBOOK_DATA", ROOT.parent / "shared" / "data")).resolve()
    if not data.is_dir():
        pytest.skip("needs the data mirror ($ODEBOOK_DATA or ../shared/data)")
    tmp = tmp_path_factory.mktemp("newcomer")
    (tmp / "shared").mkdir()
    (tmp / "shared" / "data").symlink_to(data)
    book = tmp / "odebook"
    shutil.copytree(ROOT, book, ignore=COPY_IGNORE, symlinks=True)
    venv = Path(os.environ.get("VIRTUAL_ENV") or ROOT / ".venv").resolve()
    (book / ".venv").symlink_to(venv)
    return book


def environment(how: How) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "ODEBOOK_DATA", "PROFILE",
                                                            "NOTEBOOKS", "ODEBOOK_PROFILE")}
    if how.data == "absolute":
        env["ODEBOOK_DATA"] = str(Path(os.environ.get("ODEBOOK_DATA", ROOT.parent / "shared" / "data")).resolve())
    return {**env, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", **how.env}


def start_server(command: str, cwd: Path, env: dict) -> str:
    """Start the server, wait until it says where it listens, stop it (its whole process group); return its log."""
    proc = subprocess.Popen(["bash", "-c", command], cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    log, deadline = [], time.monotonic() + 240
    try:
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            log.append(line)
            if re.search(r"http://(localhost|127\.0\.0\.1):\d+/lab", line):
                break
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
    return "".join(log)


@pytest.mark.slow
@pytest.mark.parametrize("command", [c for c in COMMANDS if not COMMANDS[c].fresh_venv])
def test_the_readme_command_runs_as_written(command, beside_the_mirror):
    how = COMMANDS[command]
    env = environment(how)
    if how.server:
        log = start_server(command, beside_the_mirror, env)
        assert re.search(r"http://(localhost|127\.0\.0\.1):\d+/lab", log), log
        return
    done = subprocess.run(["bash", "-c", command], cwd=beside_the_mirror, env=env, capture_output=True, text=True,
                          timeout=1200)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for path in how.expect:
        assert (beside_the_mirror / path).is_file(), f"{command}: no {path}\n{done.stdout[-2000:]}"
    for path, values in how.ran_with.items():  # what the command changed, and only that
        ran = json.loads((beside_the_mirror / path).read_text())["parameters"]
        assert {k: ran[k] for k in values} == values, f"{command}: {path} ran with {ran}"


@pytest.mark.slow
def test_make_setup_builds_the_environment_and_says_which_torch_it_holds(tmp_path):
    """``make setup`` in a copy of the checkout with no .venv. CI's own first step is that command in a fresh clone;
    where it names its output (ODEBOOK_SETUP_LOG, written by .ci/run), the same checks read that run instead of
    building a second environment (two minutes of CI)."""
    if logged := os.environ.get("ODEBOOK_SETUP_LOG"):
        book, output = ROOT, Path(logged).read_text(encoding="utf-8")
    else:
        book = tmp_path / "odebook"
        shutil.copytree(ROOT, book, ignore=COPY_IGNORE, symlinks=True)
        done = subprocess.run(["bash", "-c", "make setup"], cwd=book, env=environment(How()), capture_output=True,
                              text=True, timeout=1800)
        output = done.stdout + done.stderr
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert re.search(r"^torch 2\.\d+\.\d+\S*: (the CPU-only build|a CUDA \S+ build)", output, re.M), output[-3000:]
    assert "SetuptoolsDeprecationWarning" not in output
    python = book / ".venv" / "bin" / "python"
    elsewhere = tmp_path / "elsewhere"  # not beside the copy's folder, which `import odebook` would find first
    elsewhere.mkdir()
    check = subprocess.run([str(python), "-c", "import odebook, torch; print(odebook.__file__)"], cwd=elsewhere,
                           env=environment(How()), capture_output=True, text=True)
    assert check.stdout.strip() == str(book / "odebook" / "__init__.py"), check.stderr
