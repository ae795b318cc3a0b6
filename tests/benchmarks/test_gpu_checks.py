"""The GPU checks' one script (benchmarks.gpu_checks) end to end on the CPU with the smoke profile: the CUDA tests
skip, the benchmark is skipped for want of CUDA, the notebooks run in the order of their estimates, and everything
lands in one folder with a summary that says what each step did."""

import json
import shutil

import pytest

from benchmarks import gpu_checks


@pytest.mark.slow
def test_the_gpu_checks_run_end_to_end_on_the_cpu_with_the_smoke_profile(root, tmp_path, monkeypatch):
    book, out = tmp_path / "book", tmp_path / "out"
    for folder in ("notebooks", "params"):
        shutil.copytree(root / folder, book / folder)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    names = ["05_ode_solvers", "01_gradient_flow"]
    assert gpu_checks.main(["--out", str(out), "--profile", "smoke", "--root", str(book), "--tests", "tests/gpu",
                            "--notebooks", " ".join(names)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    steps = {row["step"]: row for row in summary["steps"]}
    assert summary["device"].startswith("cpu") and steps["tests"]["status"] == "passed"
    assert steps["bench"]["status"] == "skipped: no CUDA device"
    run = [row for row in summary["steps"] if row["step"] in names]
    assert [r["status"] for r in run] == ["passed", "passed"]
    assert [r["estimate_s"] for r in run] == sorted(r["estimate_s"] for r in run)  # smallest first
    for name in names:
        report = out / "reports" / name
        assert (report / f"{name}.html").is_file() and (report / "manifest.json").is_file()
        assert not (report / "checkpoints").exists() and (out / f"{name}.log").is_file()
    assert "skipped" in (out / "tests.log").read_text()  # the CUDA cases skip here
