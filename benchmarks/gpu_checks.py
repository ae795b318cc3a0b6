"""Every check that needs a GPU, in one call, smallest first, each under its own timeout, everything it measured in
one folder (``python -m benchmarks.gpu_checks --out DIR``; on a lent device: ``--out $OUT``):

1. ``tests``: the CUDA test cases (``CUDA_TESTS``; they skip without CUDA) — DIR/tests.log, DIR/tests.xml;
2. ``bench``: ``benchmarks.gpu`` (the matmul rate, 01's step and MFU, the KV cache, the delta rule) — DIR/bench.log;
3. the profile's notebooks (t4 by default) through the runner, in the order of their estimated GPU time
   (odebook.book.passes, counted on this machine's CPU; ``--order`` names it instead) — DIR/<notebook>.log and the
   report, its checkpoints left out, in DIR/reports/<notebook>.

DIR/summary.json says, for each step, whether it passed, failed, timed out or was skipped (and why), its seconds, and
for a notebook its estimate, so that a run cut short still says what it did. A step that fails does not stop the next.
Where there is no CUDA device the tests skip, the benchmark is skipped, and the notebooks run on the CPU: the smoke
profile checks the script itself (tests/benchmarks/test_gpu_checks.py).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import torch

from odebook import studies

ROOT = Path(__file__).resolve().parent.parent
CUDA_TESTS = ("tests/gpu", "tests/nn/test_delta_rule.py", "tests/nn/test_linear_ce.py", "tests/training/test_train.py",
              "tests/training/test_precision_policies.py")


def _step(out: Path, name: str, command: list[str], timeout: float, env: dict | None = None) -> dict:
    """Run ``command`` in the book's root, its output to ``out``/``name``.log, under ``timeout`` seconds."""
    t0 = time.perf_counter()
    with open(out / f"{name}.log", "w") as log:
        try:
            rc = subprocess.run(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, timeout=timeout,
                                env={**os.environ, **(env or {})}).returncode
            status = "passed" if rc == 0 else "failed"
        except subprocess.TimeoutExpired:
            rc, status = None, "timed out"
    return {"step": name, "status": status, "rc": rc, "seconds": round(time.perf_counter() - t0, 1),
            "timeout": timeout}


def estimates(root: Path, profile: str, names: list[str]) -> dict[str, float]:
    """Each notebook's estimated seconds on a T4 at ``profile`` (odebook.book.passes), its passes counted on this
    machine's GPU where there is one (seconds; on 2 CPU cores the t4 profiles' take minutes each)."""
    from odebook.book import budget, passes
    from odebook.training.runtime import precision_for, resolve_device

    precision = precision_for(resolve_device("auto"))
    out = {}
    for name in names:
        params = studies.validate_file(name, root / "params" / profile / f"{name}.yaml")
        out[name] = round(passes.seconds(*passes.gpu_work(budget.plan(params), precision)), 1)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gpu_checks", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="the folder everything measured is written to")
    parser.add_argument("--profile", default="t4", help="the notebooks' profile (t4; smoke checks the script)")
    parser.add_argument("--notebooks", default="", help="names separated by spaces (default: every study)")
    parser.add_argument("--order", default="", help="the notebooks' order, names separated by spaces (default: by "
                                                    "their estimated GPU time, counted here first)")
    parser.add_argument("--tests", default=" ".join(CUDA_TESTS), help="the test paths of step 1")
    parser.add_argument("--root", type=Path, default=ROOT, help="the book's root folder (its notebooks, params and "
                                                                "outputs)")
    parser.add_argument("--timeouts", default="240,240,600",
                        help="seconds for the tests, the benchmark, and each notebook")
    args = parser.parse_args(argv)
    out = args.out.resolve()
    (out / "reports").mkdir(parents=True, exist_ok=True)
    t_tests, t_bench, t_notebook = (float(t) for t in args.timeouts.split(","))
    cuda = torch.cuda.is_available()
    summary = {"device": torch.cuda.get_device_name() if cuda else "cpu (no CUDA device)", "profile": args.profile,
               "torch": torch.__version__, "steps": []}

    def done(row: dict) -> None:
        summary["steps"].append(row)
        (out / "summary.json").write_text(json.dumps(summary, indent=1))
        print(f"{row['step']}: {row['status']} in {row['seconds']} s", flush=True)

    done(_step(out, "tests", [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
                              f"--junitxml={out / 'tests.xml'}", *args.tests.split()], t_tests))
    if cuda:
        done(_step(out, "bench", [sys.executable, "-m", "benchmarks.gpu"], t_bench))
    else:
        done({"step": "bench", "status": "skipped: no CUDA device", "seconds": 0.0})

    names = args.notebooks.split() or studies.names()
    root = args.root.resolve()
    guessed = {} if args.order else estimates(root, args.profile, names)
    order = args.order.split() or sorted(names, key=guessed.get)
    for name in order:
        row = _step(out, name, [sys.executable, "-m", "odebook.book.runner", f"--profile={args.profile}",
                                f"--root={root}", "--notebooks", name], t_notebook, env={"ODEBOOK_GPU_POLICY": "t4"})
        report = root / "outputs" / args.profile / name
        if report.is_dir():
            shutil.copytree(report, out / "reports" / name, dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns("checkpoints", ".*"))
        done({**row, "estimate_s": guessed.get(name)})
    return 0 if all(r["status"] in ("passed", "skipped: no CUDA device") for r in summary["steps"]) else 1


if __name__ == "__main__":
    sys.exit(main())
