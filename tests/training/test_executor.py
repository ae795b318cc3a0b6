"""The executor of independent runs: one-thread workers side by side and submitit's job array give the runs of the
sequential path, a failed job's own error reaches the caller, and a finished run is not resubmitted."""

import dataclasses
import json
import os
import shutil
import sys
from pathlib import Path

import cloudpickle
import pytest
import torch

from odebook.book import notebook, runner
from odebook.data.corpus import TokenSplits
from odebook.models import lm as models
from odebook import studies
from odebook.study.experiment import run_seeds, tune_lr
from odebook.study.task import lm_task
from odebook.training.executor import JobsFailed, Local, Submitit, Workers, usable_cores
from odebook.training.runtime import precision_for
from odebook.training.train import TrainConfig

from conftest import ROOT, lean_01, runs_made

STUDIES = {name: studies.schema(name) for name in studies.names()}


# The jobs run in fresh Python processes, which cannot import this test module: its functions travel by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

CPU = precision_for(torch.device("cpu"))
gen = torch.Generator().manual_seed(0)
SPLITS = TokenSplits(*(torch.randint(0, 20, (n,), generator=gen) for n in (3000, 600, 600)), 20, "random tokens")
TASK = lm_task(SPLITS, batch_size=4, seq_len=8, eval_batches=2)
CONFIG = TrainConfig(steps=3, lr=1e-2, eval_interval=3)


def tiny():
    return models.gpt(vocab_size=20, d_model=16, n_layer=1, n_head=2, max_seq_len=8)


def broken():
    raise ValueError("this builder fails on the node")


def jobs_in(folder: Path) -> int:
    """How many jobs submitit was handed in ``folder`` (one submission pickle each, kept while the job lives; a
    finished job leaves its logs)."""
    return len({p.name.split("_log")[0] for p in folder.rglob("*_log.out")})


SLURM = notebook.slurm_options(STUDIES["01_gradient_flow"]())  # the parameters' defaults


def local_array(folder: Path) -> Submitit:
    return Submitit(folder, device="cpu", cluster="local", poll_s=0.2, progress=False, **SLURM)


@pytest.mark.slow
def test_a_submitit_job_array_gives_the_runs_of_the_sequential_path(tmp_path):
    """Two seeds of two models as four subprocesses (submitit's local executor): the same runs in the same order,
    bit for bit (the same arithmetic on the same two threads), the models back on this process's device; the
    learning-rate grid through the same executor chooses as the sequential one, a diverging rate still infinite."""
    builders = {"a": tiny, "b": lambda: models.gpt(vocab_size=20, d_model=8, n_layer=2, n_head=2, max_seq_len=8)}
    here = run_seeds(builders, TASK, CONFIG, CPU, seeds=[0, 1], progress=False)
    there = run_seeds(builders, TASK, CONFIG, CPU, seeds=[0, 1], progress=False, executor=local_array(tmp_path))
    assert [(r.model, r.seed) for r in there] == [(r.model, r.seed) for r in here]
    for t, h in zip(there, here):
        assert t.history.loss == h.history.loss and t.test_loss == h.test_loss and t.origin == "trained"
        for (name, w), w_h in zip(t.module.state_dict().items(), h.module.state_dict().values()):
            assert w.device == w_h.device and torch.equal(w, w_h), name
    assert jobs_in(tmp_path) == 4 and not list(tmp_path.rglob("*.pkl"))  # the succeeded jobs' pickles are gone
    grid = [tune_lr({"a": tiny}, TASK, CONFIG, CPU, lrs=[1e-3, 1e30], seeds=[0], progress=False, executor=e)
            for e in (None, local_array(tmp_path / "grid"))]
    assert grid[0][0] == grid[1][0] == {"a": 1e-3} and grid[1][1].loc["a", 1e30] == float("inf")


@pytest.mark.slow
def test_a_failed_jobs_own_error_reaches_the_caller_after_the_others_finish(tmp_path):
    runs = {"a": tiny, "broken": broken}
    with pytest.raises(JobsFailed) as failed:
        run_seeds(runs, TASK, CONFIG, CPU, seeds=[0], progress=False, executor=local_array(tmp_path))
    message = str(failed.value)
    assert message.startswith("1 of 2 jobs failed") and "ValueError: this builder fails on the node" in message
    assert "Traceback" in message and str(tmp_path) in message
    assert jobs_in(tmp_path) == 2


@pytest.mark.slow
def test_a_finished_run_is_not_resubmitted(tmp_path):
    """With checkpoints, a second call finds both runs finished: nothing is submitted, the runs are reused."""
    options = dict(seeds=[0], progress=False, checkpoints=tmp_path / "ckpt", key={"test": 1})
    first = run_seeds({"a": tiny}, TASK, CONFIG, CPU, executor=local_array(tmp_path / "jobs"), **options)
    again = run_seeds({"a": tiny}, TASK, CONFIG, CPU, executor=local_array(tmp_path / "jobs2"), **options)
    assert [r.origin for r in first] == ["trained"] and [r.origin for r in again] == ["reused"]
    assert again[0].history.loss == first[0].history.loss and not (tmp_path / "jobs2").exists()


def test_a_run_stored_under_one_layout_is_not_reused_under_another(tmp_path, monkeypatch):
    schema = STUDIES["01_gradient_flow"]
    p = schema(checkpoint_interval=10)
    monkeypatch.setattr("odebook.book.notebook.usable_cores", lambda: 2)
    side, here = (notebook.checkpointing(p, tmp_path)["key"],
                  notebook.checkpointing(schema(checkpoint_interval=10, executor="local"), tmp_path)["key"])
    assert side["threads"] == "2 worker processes × 1 thread" and here["threads"].startswith("this process")
    assert {k: v for k, v in side.items() if k != "threads"} == {k: v for k, v in here.items() if k != "threads"}


def test_submitit_takes_the_parameters_slurm_options_by_their_names_and_has_no_default_of_its_own():
    """Each SLURM option is declared, with its default, once (odebook.params); Submitit names it the same."""
    own = {f.name: f.default for f in dataclasses.fields(Submitit) if f.name.startswith("slurm_")}
    assert set(own) == set(SLURM) == {"slurm_partition", "slurm_time_min", "slurm_gpus_per_job",
                                      "slurm_array_parallelism"}
    assert all(default is dataclasses.MISSING for default in own.values())


def test_workers_side_by_side_give_the_runs_of_one_thread_in_this_process_and_again_on_a_rerun():
    """Two seeds of two models in two one-thread workers: the runs of the sequential path on one thread here, bit
    for bit, in the same order, their models back here; a second call gives the same numbers again; the grid
    chooses as the sequential one, a diverging rate still infinite."""
    builders = {"a": tiny, "b": lambda: models.gpt(vocab_size=20, d_model=8, n_layer=2, n_head=2, max_seq_len=8)}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        here = run_seeds(builders, TASK, CONFIG, CPU, seeds=[0, 1], progress=False)
    finally:
        torch.set_num_threads(threads)
    for _ in range(2):
        there = run_seeds(builders, TASK, CONFIG, CPU, seeds=[0, 1], progress=False, executor=Workers(2))
        assert [(r.model, r.seed) for r in there] == [(r.model, r.seed) for r in here]
        for t, h in zip(there, here):
            assert t.history.loss == h.history.loss and t.test_loss == h.test_loss and t.origin == "trained"
            for (name, w), w_h in zip(t.module.state_dict().items(), h.module.state_dict().values()):
                assert w.device == w_h.device and torch.equal(w, w_h), name
    grid = tune_lr({"a": tiny}, TASK, CONFIG, CPU, lrs=[1e-3, 1e30], seeds=[0], progress=False, executor=Workers(2))
    assert grid[0] == {"a": 1e-3} and grid[1].loc["a", 1e30] == float("inf")


def test_a_workers_jobs_own_error_reaches_the_caller_and_each_worker_has_one_thread():
    with pytest.raises(ValueError, match="this builder fails on the node"):
        run_seeds({"a": tiny, "broken": broken}, TASK, CONFIG, CPU, seeds=[0], progress=False, executor=Workers(2))
    assert Workers(2).run([lambda prec: (torch.get_num_threads(), str(prec.device))] * 3, CPU) == [(1, "cpu")] * 3


def test_a_finished_run_is_not_given_to_a_worker(tmp_path, monkeypatch):
    options = dict(seeds=[0], progress=False, checkpoints=tmp_path / "ckpt", key={"test": 1}, executor=Workers(2))
    first = run_seeds({"a": tiny}, TASK, CONFIG, CPU, **options)
    monkeypatch.setattr("odebook.training.executor._pool", None)  # no worker may be asked
    again = run_seeds({"a": tiny}, TASK, CONFIG, CPU, **options)
    assert [r.origin for r in first] == ["trained"] and [r.origin for r in again] == ["reused"]
    assert again[0].history.loss == first[0].history.loss


def test_the_parameters_choose_the_executor(tmp_path, monkeypatch):
    """'auto' is one-thread workers, one per usable core, on a CPU with several for runs long enough to pay for
    them, else this process; 'local' is
    this process; 'submitit' carries the SLURM options, the device each node resolves, and keeps its jobs beside
    the checkpoints unless a shared folder is named. The layout is said in words."""
    schema = STUDIES["01_gradient_flow"]
    cores = usable_cores()
    assert notebook.executor(schema(), tmp_path) == (Workers(cores) if cores > 1 else Local())
    assert isinstance(notebook.executor(schema(steps=notebook.SIDE_BY_SIDE_STEPS - 1), tmp_path), Local)
    assert notebook.executor(schema(executor="workers"), tmp_path) == Workers(cores)
    assert isinstance(notebook.executor(schema(executor="local"), tmp_path), Local)
    monkeypatch.setattr("odebook.book.notebook.usable_cores", lambda: 1)
    assert isinstance(notebook.executor(schema(), tmp_path), Local)
    monkeypatch.setattr("odebook.book.notebook.usable_cores", lambda: 2)
    assert notebook.layout(schema()) == "2 worker processes × 1 thread"
    assert notebook.layout(schema(executor="local")) == f"this process × {torch.get_num_threads()} threads"
    p = schema(executor="submitit", slurm_partition="gpu", slurm_time_min=30, slurm_gpus_per_job=2,
               slurm_array_parallelism=4, checkpoint_dir=str(tmp_path / "ck"))
    ex = notebook.executor(p, tmp_path)
    assert ex == Submitit(tmp_path / "ck" / "jobs", device="auto", slurm_partition="gpu", slurm_time_min=30,
                          slurm_gpus_per_job=2, slurm_array_parallelism=4)
    shared = schema(executor="submitit", executor_folder=str(tmp_path / "shared"))
    assert notebook.executor(shared, tmp_path).folder == tmp_path / "shared"
    assert notebook.run_options(p, tmp_path)["executor"] == ex


@pytest.mark.slow
def test_local_jobs_wait_passively_and_resolve_their_device_on_the_node(tmp_path, monkeypatch):
    """Without SLURM every job starts at once on this machine: each waits passively (unless the user chose a wait
    policy) and trains on the device its parameters name, resolved where it runs."""
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    seen = local_array(tmp_path).run([lambda prec: (os.environ.get("OMP_WAIT_POLICY"), str(prec.device))] * 2, CPU)
    assert seen == [("PASSIVE", "cpu")] * 2


@pytest.mark.slow
def test_a_notebook_with_executor_submitit_gives_the_local_runs_results(tmp_path, monkeypatch):
    """Study 01's smoke profile through the runner twice — as it is, and with ``executor: submitit`` (submitit's
    local executor, as on a machine without SLURM): its runs went to subprocesses, and every run's history and test
    loss, and every verdict, are those of the runs in the notebook's own process."""
    monkeypatch.setenv("MPLBACKEND", "Agg")
    without_slurm(monkeypatch)
    here, there = smoke_then_cluster(tmp_path, f"executor: submitit\nexecutor_folder: {tmp_path / 'jobs'}\n")
    assert jobs_in(tmp_path / "jobs") == runs_made(there) > len(there["runs"]) > 0
    assert untimed(there["runs"]) == untimed(here["runs"]) and there["verdicts"] == here["verdicts"]
    report = (tmp_path / "outputs" / "cluster" / "01_gradient_flow" / "01_gradient_flow.ipynb").read_text()
    assert "Bypassing sacct error" not in report  # a cluster without accounting: submitit's warnings stay off it


def smoke_then_cluster(tmp_path: Path, cluster: str) -> tuple[dict, dict]:
    """Study 01's smoke profile (with conftest.LEAN_01's values) through the runner, then as profile "cluster" with
    ``cluster`` added to it; both must finish. Their results.json: (smoke, cluster)."""
    params = tmp_path / "params"
    shutil.copytree(ROOT / "params" / "smoke", params / "smoke")
    (params / "cluster").mkdir()
    smoke_file = lean_01((params / "smoke" / "01_gradient_flow.yaml").read_text())
    (params / "smoke" / "01_gradient_flow.yaml").write_text(smoke_file)
    (params / "cluster" / "01_gradient_flow.yaml").write_text(smoke_file + cluster)
    book = runner.Book(ROOT / "notebooks", params, tmp_path / "outputs")
    ran = [runner.run_book(book, profile, ["01_gradient_flow"])[0] for profile in ("smoke", "cluster")]
    assert all(r.ok for r in ran), [r.error for r in ran]
    return tuple(json.loads((tmp_path / "outputs" / p / "01_gradient_flow" / "results.json").read_text())
                 for p in ("smoke", "cluster"))


def without_slurm(monkeypatch) -> None:
    """PATH without the folders that hold ``srun``: submitit then takes its local executor on any machine (on one
    with SLURM this test submitted to the cluster and failed)."""
    path = os.environ.get("PATH", "").split(os.pathsep)
    monkeypatch.setenv("PATH", os.pathsep.join(d for d in path if not (Path(d) / "srun").exists()))


def test_slurm_jobs_ask_for_a_gpu_only_when_the_profile_says_so(tmp_path, monkeypatch):
    """A CPU partition refuses a GPU request ("Invalid generic resource (gres) specification"): by default the
    jobs ask for none; slurm_gpus_per_job asks for that many. (A stand-in ``srun`` lets submitit build its SLURM
    executor here; nothing is submitted.)"""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "srun").write_text("#!/bin/sh\nexit 1\n")
    (fake / "srun").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}{os.pathsep}{os.environ.get('PATH', '')}")

    def gpus(ex: Submitit) -> dict:
        return {k: v for k, v in ex._executor()._executor.parameters.items() if "gpu" in k or "gres" in k}

    assert SLURM["slurm_gpus_per_job"] == 0
    assert gpus(Submitit(tmp_path / "jobs", cluster="slurm", **SLURM)) == {}
    assert gpus(Submitit(tmp_path / "jobs", cluster="slurm", **{**SLURM, "slurm_gpus_per_job": 1})) == {
        "gpus_per_node": 1}


def untimed(runs: list[dict]) -> list[dict]:
    """Run records without their step times (the one thing two runs of the same arithmetic do not share)."""
    return [{**r, "history": {k: v for k, v in r["history"].items() if k != "step_time"}} for r in runs]


def slurm_is_up() -> bool:
    """A SLURM cluster answers here with an idle or mixed node (CI starts one: scripts/slurm_one_node.sh)."""
    import subprocess

    if shutil.which("sinfo") is None or shutil.which("sbatch") is None:
        return False
    done = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, timeout=30)
    return done.returncode == 0 and bool({"idle", "mix"} & set(done.stdout.split()))


def readme_cluster_recipe() -> str:
    """The YAML block of the cluster recipe (docs/running.md), as written there."""
    text = (ROOT / "docs" / "running.md").read_text()
    start = text.index("```yaml\n  executor: submitit") + len("```yaml\n")
    return "\n".join(line.strip() for line in text[start:text.index("```", start)].splitlines()) + "\n"


@pytest.mark.slow
@pytest.mark.skipif(not slurm_is_up(),
                    reason="no SLURM cluster answers here (CI starts one: scripts/slurm_one_node.sh)")
def test_readmes_cluster_recipe_runs_a_notebook_as_slurm_job_arrays_with_the_local_runs_results(tmp_path, monkeypatch):
    """The cluster recipe of docs/running.md, as written (only its example folder replaced), added to 01's smoke
    profile: every run goes to SLURM through sbatch (each job's submission script is an sbatch script) and comes back
    equal to the runs of the notebook's own process."""
    monkeypatch.setenv("MPLBACKEND", "Agg")
    recipe = readme_cluster_recipe()
    assert "executor: submitit" in recipe and "slurm_gpus_per_job: 0" in recipe
    here, there = smoke_then_cluster(tmp_path, recipe.replace("/shared/you/odebook-jobs", str(tmp_path / "jobs")))
    scripts = list((tmp_path / "jobs").rglob("*_submission.sh"))
    assert scripts and all("#SBATCH" in s.read_text() for s in scripts)
    assert jobs_in(tmp_path / "jobs") == runs_made(there) > len(there["runs"]) > 0
    assert untimed(there["runs"]) == untimed(here["runs"]) and there["verdicts"] == here["verdicts"]


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's (prctl)")
def test_a_worker_stops_when_the_process_that_started_it_is_killed(tmp_path):
    """A notebook kernel killed outright (SIGKILL: no atexit, no terminate) leaves no worker training on: each worker
    asks Linux for SIGTERM when its parent dies, and a worker that finds its parent already gone stops at once."""
    import signal
    import subprocess
    import time

    pids = tmp_path / "worker.pid"
    parent = subprocess.Popen([sys.executable, "-c", f"""
import os, time
from odebook.training.executor import Workers
from odebook.training.runtime import precision_for
import torch

def job(precision):
    open({str(pids)!r}, "w").write(str(os.getpid()))
    time.sleep(120)

Workers(1).run([job], precision_for(torch.device("cpu")))
"""], cwd=ROOT)
    try:
        deadline = time.monotonic() + 60
        while not (pids.exists() and pids.read_text()) and time.monotonic() < deadline:
            time.sleep(0.2)
        worker = int(pids.read_text())
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        deadline = time.monotonic() + 10
        while _alive(worker) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _alive(worker), f"worker {worker} still runs after its parent was killed"
    finally:
        parent.kill()


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, dead but not yet reaped by its new parent, counts as stopped)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False
