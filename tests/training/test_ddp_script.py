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


def _script(root, env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(root / "scripts" / "train_ddp.py"), "--study", "01_gradient_flow",
                           "--profile", "smoke", "--model", "hybrid", *args], capture_output=True, text=True,
                          timeout=120, cwd=root, env={**{k: v for k, v in os.environ.items()
                                                         if k not in ("RANK", "WORLD_SIZE")},
                                                      "PYTHONPATH": str(root), **env})


def test_the_script_says_in_one_line_to_run_under_torchrun_and_when_the_batch_does_not_split(root, tmp_path):
    """Without torchrun: a 23-line "RANK expected" traceback before; a global batch that does not split was found
    after the data and the model had loaded, as one traceback per rank. Now one line each, before any work, exit 2,
    only rank 0 speaking; a damaged checkpoint is refused in the script's own words (--out, --fresh)."""
    alone = _script(root, {})
    assert alone.returncode == 2 and alone.stderr.strip().splitlines()[-1] == (
        "train_ddp.py: error: run me under torchrun (RANK and WORLD_SIZE are not set): torchrun --nproc_per_node=N "
        "scripts/train_ddp.py --study ... --model ...")
    batch = 4  # the smoke profile's batch_size
    assert f"batch_size: {batch}" in (root / "params" / "smoke" / "01_gradient_flow.yaml").read_text()
    uneven = _script(root, {"RANK": "0", "WORLD_SIZE": "3"})
    assert uneven.returncode == 2 and uneven.stderr.strip().splitlines()[-1].endswith(
        f"the global batch of {batch} rows does not split evenly over 3 processes: choose a --nproc_per_node that "
        "divides it, or --params with another batch_size")
    quiet = _script(root, {"RANK": "1", "WORLD_SIZE": "3"})
    assert quiet.returncode == 2 and quiet.stderr == ""

    out = tmp_path / "out"
    out.mkdir()
    (out / "checkpoint.pt").write_bytes(b"not a checkpoint")
    port = str(29500 + os.getpid() % 1000)
    damaged = _script(root, {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1",
                             "MASTER_PORT": port}, "--out", str(out))
    assert damaged.returncode == 2 and damaged.stderr.strip().splitlines()[-1] == (
        f"train_ddp.py: error: checkpoint {out / 'checkpoint.pt'} has no odebook content hash (written by another "
        "program or an older odebook); use another --out, or --fresh to replace it")


def test_a_wrong_parameter_file_or_profile_is_one_message_not_a_traceback(root, tmp_path):
    """A ParamError traceback before (issue 71); now the one message that names the file and the key, exit 2."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("steps: -3\n")
    done = _script(root, {}, "--params", str(bad))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.startswith(f"error: {bad}: invalid parameters for 01_gradient_flow")
    assert "key 'steps'" in done.stderr
    missing = _script(root, {}, "--profile", "nowhere")
    assert missing.returncode == 2 and "Traceback" not in missing.stderr and "nowhere" in missing.stderr
