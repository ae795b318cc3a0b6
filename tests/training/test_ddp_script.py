"""The ready torchrun entry (scripts/train_ddp.py): two gloo processes train a study-01 arm like one process."""

import json
import os
import subprocess
import sys

import pytest


@pytest.mark.slow
def test_the_torchrun_script_trains_an_arm_with_two_processes_as_one_process_does(tmp_path, root):
    def launch(nprocs: int) -> dict:
        out = tmp_path / f"procs{nprocs}"
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nprocs}",
               str(root / "scripts" / "train_ddp.py"), "--study", "01_gradient_flow", "--profile", "smoke",
               "--model", "hybrid", "--steps", "4", "--out", str(out)]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=root,
                              env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(root)})
        assert done.returncode == 0, done.stderr[-3000:]
        assert f"hybrid seed 0: {nprocs} processes, held-out loss" in done.stdout
        return json.loads((out / "history.json").read_text())

    one, two = launch(1), launch(2)
    assert len(two["loss"]) == 4
    assert two["loss"] == pytest.approx(one["loss"], rel=1e-5)  # the same global batch: equal up to summation order
    assert two["eval_loss"] == pytest.approx(one["eval_loss"], rel=1e-5)
