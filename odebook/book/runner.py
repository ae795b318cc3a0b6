"""Execute the book: jupytext → papermill (with a profile's parameters) → nbconvert HTML, then an index page.

``python -m odebook.book.runner --profile cpu [NOTEBOOK ...]`` (``make run-all``) validates every parameter file first
and stops before any compute if one is wrong, or if another run of the same profile and notebook holds its lock.
Each notebook then runs in a staging folder of its own; when it ran to its last cell it replaces
``outputs/<profile>/<notebook>/`` in one atomic exchange, otherwise it is rendered with its error into
``<notebook>.failed/`` and the last successful outputs stay untouched (odebook.book.publish). A failing notebook does
not stop the others; the exit status is 1 when any failed, 2 when the parameters, the profile or a notebook name are
invalid (then nothing ran). The profile must be a folder name under ``params/`` and each notebook a name under
``notebooks/``; nothing outside ``outputs/`` is ever replaced or deleted.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import difflib
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from unittest import mock
from pathlib import Path
from typing import Any

from odebook.book import index, kernel, machine_load, processor, publish, report_page, stops, wait_policy
from odebook.book import notebook, reports, rerun
from odebook.data.mirror import pin_data_dir
from odebook.params import ParamError, Params, parse_settings, profile_chain
from odebook.studies import validate_values
from odebook.book import budget
from odebook.training.runtime import device_name, resolve_device

__all__ = ["Book", "RunResult", "run_book", "main"]

RUNNER_KEYS = ("output_dir",)  # set by the runner for every notebook; a profile file may not set them
ANSI = re.compile(r"\x1b\[[0-9;]*m")  # colour codes in a kernel's traceback
PACKAGES = ("torch", "torchdiffeq", "numpy", "scipy", "pandas", "matplotlib", "datasets", "tiktoken", "papermill",
            "jupytext", "nbconvert", "fla-core")


@dataclass(frozen=True)
class Book:
    """Where notebooks, parameter files and outputs live."""

    notebooks: Path
    params: Path
    outputs: Path

    @classmethod
    def at(cls, root: Path) -> "Book":
        return cls(root / "notebooks", root / "params", root / "outputs")

    def all_notebooks(self) -> list[str]:
        return sorted(p.stem for p in self.notebooks.glob("[0-9][0-9]_*.py"))

    def profiles(self) -> list[str]:
        return sorted(p.name for p in self.params.iterdir() if p.is_dir()) if self.params.is_dir() else []

    def profile_outputs(self, profile: str) -> Path:
        """outputs/<profile>, for a profile that is a folder name under params/ (anything else is a ParamError:
        the profile becomes a path the runner writes into and ``make clean-outputs`` deletes)."""
        if profile not in self.profiles():
            raise ParamError(f"profile {profile!r}: not a folder of {self.params}; known profiles: "
                             f"{', '.join(self.profiles())}")
        return _inside(self.outputs / profile, self.outputs)


def _inside(path: Path, root: Path) -> Path:
    """``path`` itself, after checking that it lies strictly inside ``root``: nothing outside outputs/ is ever
    replaced or deleted."""
    if root.resolve() not in path.resolve().parents:
        raise ParamError(f"{path}: lies outside {root}; refusing to write or delete it")
    return path


@dataclass
class RunResult:
    name: str
    ok: bool
    seconds: float
    error: str = ""
    skipped: bool = False  # unchanged since its published run (odebook.book.rerun)


# -- validation ---------------------------------------------------------------------------------------------------
def validate(book: Book, profile: str, names: list[str], settings: dict[str, Any] | None = None
             ) -> dict[str, tuple[Params, dict]]:
    """Check every notebook exists and its parameter file, with the ``settings`` of ``SET`` that are its study's
    parameters over it, is valid; collect all problems into one ParamError."""
    book.profile_outputs(profile)
    settings = settings or {}
    problems, ok = [], {}
    for name in names:
        if name not in book.all_notebooks():  # a name, not a path: it becomes outputs/<profile>/<name>
            problems.append(f"notebook {name!r}: no such notebook in {book.notebooks}; known: "
                            f"{', '.join(book.all_notebooks())}")
            continue
        path = book.params / profile / f"{name}.yaml"
        try:
            ok[name] = validate_values(name, path)
            mine = {k: v for k, v in settings.items() if k in ok[name][0].to_dict()}
            if mine:
                values = {**ok[name][1], **mine}
                ok[name] = type(ok[name][0]).from_mapping(values, source=f"{path} with SET"), values
        except ParamError as err:
            problems.append(str(err))
            continue
        problems += [f"{path}: key {key!r} is set by the runner (outputs/{profile}/{name}); remove it from the file"
                     for key in RUNNER_KEYS if key in ok[name][1]]
    known = set().union(*(p.to_dict() for p, _ in ok.values())) if ok else set()
    problems += [f"SET: key {k!r} is a parameter of none of {', '.join(ok)}" + "".join(
        f" (did you mean '{near}'?)" for near in difflib.get_close_matches(k, sorted(known), n=1))
        for k in settings if k not in known]
    problems += [f"SET: key {k!r} is set by the runner" for k in settings if k in RUNNER_KEYS]
    if problems:
        raise ParamError("\n".join(problems))
    for name, (params, _) in ok.items():
        if ignored := params.ignored_keys():
            print(f"{book.params / profile / name}.yaml: {ignored}", flush=True)
    for line in descriptive_settings(ok, settings):
        print(line, flush=True)
    return ok


def descriptive_settings(checked: dict[str, tuple[Params, dict]], settings: dict[str, Any]) -> list[str]:
    """One line per ``SET`` key that, in a study, moves only a descriptive section (its parameters'
    ``descriptive_only``: key → the section and what the verdicts rest on instead)."""
    return [f"SET {key}={settings[key]!r}: in {name} this changes only {what}"
            for name, (params, _) in checked.items()
            for key, what in getattr(type(params), "descriptive_only", {}).items() if key in settings]


# -- execution ----------------------------------------------------------------------------------------------------
def _git(*args: str, cwd: Path) -> str:
    try:
        return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def run_notebook(book: Book, profile: str, name: str, params: Params, overrides: dict, kernel_name: str,
                 fresh: bool = False) -> RunResult:
    """Execute one notebook in a staging folder and move it into place (see the module docstring). Its runs keep
    their checkpoints in outputs/<profile>/<notebook>/checkpoints/ (unless the parameters name another folder),
    which a successful run carries into its new outputs and a failed one leaves where they are; ``fresh`` tells the
    notebook to ignore them."""
    out_root = book.profile_outputs(profile)
    out_root.mkdir(parents=True, exist_ok=True)
    stage = _inside(publish.stage(out_root, name), book.outputs)
    try:
        return _execute(book, profile, name, params, overrides, kernel_name, fresh, out_root, stage)
    finally:
        shutil.rmtree(stage, ignore_errors=True)  # published (then gone) or interrupted: never left behind


def _execute(book: Book, profile: str, name: str, params: Params, overrides: dict, kernel_name: str, fresh: bool,
             out_root: Path, stage: Path) -> RunResult:
    import jupytext
    import nbformat
    import papermill

    ipynb = stage / f"{name}.ipynb"
    checkpoints = _inside(out_root / name / "checkpoints", book.outputs)
    started, t0, error, trace = dt.datetime.now(dt.timezone.utc), time.perf_counter(), "", ""
    load_at_start, waiting = machine_load.sample(), {}
    nb = jupytext.read(book.notebooks / f"{name}.py")
    chain = [f.parent.name for f in profile_chain(book.params / profile / f"{name}.yaml")[1]]
    nb.cells.insert(1, nbformat.v4.new_markdown_cell(f"> **{index.profile_note(profile, chain)}**"))
    try:
        # the kernel's own messages and progress (odebook.book.kernel); its threads' waiting chosen for the machine
        with kernel.log_to(stage / "kernel.log"), kernel.progress(stage), wait_policy.chosen() as waiting:
            papermill.execute_notebook(nb, str(ipynb), parameters={
                "checkpoint_dir": str(checkpoints.resolve()), **overrides, "output_dir": str(stage.resolve()),
                **({"fresh": True} if fresh else {})}, kernel_name=kernel_name, language="python",
                cwd=str(book.notebooks), log_output=False, progress_bar=False)
    except papermill.PapermillExecutionError as err:  # a cell raised: record which and what, go on
        error = f"cell [{err.exec_count}] raised {err.ename}: {err.evalue}"
        trace = ANSI.sub("", "\n".join(err.traceback))
    except Exception as err:  # a dead kernel, an unreadable notebook: record it, render what ran, go on
        if stops.disk_full(err):
            raise  # the half-written notebook cannot be read: stop the book there (main says so in one line)
        error = f"{type(err).__name__}: {err}"
    error = error or publish.unfinished(ipynb)  # a run that did not reach its last cell is never "ok"
    seconds = time.perf_counter() - t0
    final = _inside(out_root / (f"{name}.failed" if error else name), book.outputs)
    publish.relabel(stage, final)  # the report names where its files end up, not the staging folder
    load = load_at_start, machine_load.sample()
    if ipynb.is_file():
        report_page.summarise_progress(ipynb)
        machine_load.annotate(ipynb, *load)
        report_page.findings_first(ipynb, stage / "results.json")
    html_error = report_page.render_html(ipynb, stage / f"{name}.html", error)
    if html_error:
        print(f"{name}: {html_error}; the executed notebook is kept", file=sys.stderr, flush=True)
    root = book.notebooks.parent
    manifest = {
        "notebook": name, "profile": profile, "status": "failed" if error else "ok", "error": error, "traceback": trace,
        "started": started.isoformat(timespec="seconds"),
        "finished": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "seconds": round(seconds, 1),
        "git_commit": _git("rev-parse", "HEAD", cwd=root), "git_dirty": bool(_git("status", "--porcelain", cwd=root)),
        "parameter_file": str(book.params / profile / f"{name}.yaml"), "profile_chain": chain,
        "parameters": params.to_dict(),
        "data": os.environ.get("ODEBOOK_DATA", "hub"), "device": device_name(resolve_device()),
        "precision": rerun.precision(), "processor": processor.describe(), "threads": notebook.layout(params),
        "packages": rerun.environment(PACKAGES),
        "hashes": reports.hashes(root, name, profile), "machine_load": {**machine_load.record(*load), **waiting},
        **({"html_error": html_error} if html_error else {}),
    }
    (stage / "manifest.json").write_text(json.dumps(manifest, indent=2))
    if not error and checkpoints.is_dir():
        checkpoints.rename(stage / "checkpoints")
    publish.exchange(stage, final)
    if not error:
        shutil.rmtree(_inside(out_root / f"{name}.failed", book.outputs), ignore_errors=True)
    return RunResult(name, not error, seconds, error)


# -- index --------------------------------------------------------------------------------------------------------
def write_index(book: Book, profile: str) -> Path:
    """outputs/<profile>/index.html, the book's front page (odebook.book.index)."""
    return index.write_index(book.profile_outputs(profile), [book.notebooks / f"{n}.py" for n in book.all_notebooks()],
                             profile)


# -- entry point --------------------------------------------------------------------------------------------------
def run_book(book: Book, profile: str, names: list[str] | None = None, fresh: bool = False,
             settings: dict[str, Any] | None = None) -> list[RunResult]:
    """Validate all, run each, write the index. Raises ParamError before any compute when parameters are wrong.
    ``settings`` (``SET``) override the profile's values in every notebook whose study has those parameters; they
    are part of each run's re-run key and manifest."""
    names, settings = names or book.all_notebooks(), settings or {}
    checked = validate(book, profile, names, settings)
    results = []
    with contextlib.ExitStack() as locks, kernel.for_this_python() as kernel_name:
        for name in names:  # all or nothing: a run that would meet another is refused before any compute
            locks.enter_context(publish.run_lock(book.profile_outputs(profile), name))
        for i, name in enumerate(names, 1):
            params, overrides = checked[name]
            mine = {k: v for k, v in settings.items() if k in params.to_dict()}
            now = {**rerun.key(book.notebooks.parent, profile, name, params, PACKAGES),
                   **({"set": mine} if mine else {})}
            same = {} if fresh else rerun.unchanged(book.profile_outputs(profile), name, now)
            if same:
                print(rerun.skipped_line(i, len(names), name, same), flush=True)
                results.append(RunResult(name, True, 0.0, skipped=True))
                continue
            # what the notebook will cost (calibrated by its earlier runs here); its kernel prints the same line
            line, handed, estimated = budget.announce(params, book.profile_outputs(profile))
            if line:
                print(line, flush=True)
            print(f"[{i}/{len(names)}] {name} (profile {profile}"
                  f"{'; fresh' if fresh else '; ' + rerun.why(book.profile_outputs(profile), name, now)}) … ",
                  end="", flush=True)
            trains_all = calibrates(book.profile_outputs(profile) / name / "checkpoints", fresh)
            with mock.patch.dict(os.environ, handed):
                res = run_notebook(book, profile, name, params, overrides, kernel_name, fresh)
            if res.ok:
                rerun.record(book.profile_outputs(profile) / name, now)
                if estimated is not None and trains_all:
                    budget.record(book.profile_outputs(profile), estimated, res.seconds)
            first, *rest = error_lines(res.error, book.profile_outputs(profile) / f"{name}.failed") if res.error \
                else [""]
            print(f"{'ok' if res.ok else 'FAILED'} in {res.seconds:.0f} s{first and ': ' + first}", flush=True)
            print("".join(f"    {line}\n" for line in rest), end="", flush=True)
            results.append(res)
    index = write_index(book, profile)
    failed, skipped = [r.name for r in results if not r.ok], sum(r.skipped for r in results)
    print(f"index: {index}\n{len(results) - len(failed)} ok{f' ({skipped} unchanged, skipped)' if skipped else ''}, "
          f"{len(failed)} failed"
          + (f": {', '.join(failed)}" if failed else ""), flush=True)
    return results


def calibrates(checkpoints: Path, fresh: bool) -> bool:
    """Whether a run's time may calibrate the budget (odebook.book.calibration): it trains every run itself —
    ``fresh``, or no checkpoint is there to reuse. A run on its stored runs takes seconds for what the estimate
    costs in minutes (a study re-executed on its runs read 73 s, and its next estimate said 73 s for 17 minutes)."""
    return fresh or not (checkpoints.is_dir() and any(checkpoints.iterdir()))


ERROR_LINES = 40  # a failed notebook's error in the console: its first line, then at most this many more


def error_lines(text: str, folder: Path) -> list[str]:
    """A failed notebook's error for the console, as its lines (a failed job array's error holds each job's
    traceback): the first line, then up to ERROR_LINES more, the whole in ``folder``'s manifest.json."""
    lines = [line.rstrip() for line in text.strip().splitlines() if line.strip()]
    if len(lines) > ERROR_LINES + 1:
        lines = lines[:ERROR_LINES + 1] + [f"… {len(lines) - ERROR_LINES - 1} more lines: \"error\" in "
                                           f"{folder / 'manifest.json'}"]
    return lines or [""]


def clean(book: Book, profile: str) -> Path:
    """Delete outputs/<profile> (``make clean-outputs``): a known profile's folder inside outputs/, nothing else, and
    not while one of its notebooks runs."""
    out = book.profile_outputs(profile)
    with contextlib.ExitStack() as locks:
        for name in book.all_notebooks():
            locks.enter_context(publish.run_lock(out, name))
        shutil.rmtree(out, ignore_errors=True)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m odebook.book.runner", description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", help="notebook names, as notebooks/<name>.py (default: all)")
    parser.add_argument("--notebooks", dest="names", default="", help="notebook names separated by spaces, as one "
                        "argument (make run-all NOTEBOOKS=...); a name that starts with '-' is a name")
    parser.add_argument("--profile", default="cpu", help="params/<profile>/ to use (smoke, cpu, t4)")
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="the book's root folder")
    parser.add_argument("--clean", action="store_true", help="delete outputs/<profile> instead of running")
    parser.add_argument("--set", dest="settings", default="", help="key=value pairs separated by spaces, over every "
                        "notebook's parameter file where its study has the key (make run-all SET=\"steps=40\")")
    parser.add_argument("--fresh", action="store_true", help="run every notebook, changed or not, and ignore stored "
                        "checkpoints: train every run afresh")
    args = parser.parse_args(argv)
    args.root = args.root.resolve()  # paths the user typed, resolved once from where they typed them
    pin_data_dir()
    logging.basicConfig(level=logging.WARNING, format="%(message)s")  # papermill's per-cell INFO lines stay off
    logging.getLogger("traitlets").setLevel(logging.ERROR)  # nbconvert: "Alternative text is missing on N image(s)"
    logging.getLogger("papermill").addFilter(kernel.KnownSettingsPassed())
    stops.on_sigterm()
    try:
        if args.clean:
            print(f"deleted {clean(Book.at(args.root), args.profile)}")
            return 0
        results = run_book(Book.at(args.root), args.profile, [*args.notebooks, *args.names.split()] or None,
                           args.fresh, parse_settings(args.settings))
    except (ParamError, KeyboardInterrupt, OSError) as err:
        return stops.report(err, Book.at(args.root).outputs)
    return 0 if all(r.ok for r in results) else stops.EXIT_NOTEBOOK_FAILED


if __name__ == "__main__":
    sys.exit(main())
