import dataclasses
import os
from pathlib import Path

import pytest
import yaml

from odebook.book import budget, machine_load, runner
from odebook.data.mirror import pin_data_dir

ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = ROOT.parent / "shared" / "data"
# Study 01's smoke profile with one tuning seed, a grid of one rate and one confirmatory seed, for the tests that send
# each run through a process of its own (submitit, SLURM) or run the notebook three times: they test where runs go and
# what they reuse, which the number of runs does not change.
LEAN_01 = {"tuning_seeds": 1, "lr_extensions": 0, "lr_grid": [1.0e-3], "n_seeds": 1}


def lean_01(profile_text: str) -> str:
    """A profile file's text for study 01 with LEAN_01's values over its own."""
    return yaml.safe_dump({**yaml.safe_load(profile_text), **LEAN_01}, sort_keys=False)


def runs_made(results: dict) -> int:
    """Every run a study's results.json accounts for: the runs it records, and the learning-rate grid's runs on each
    tuning seed (its ``lr_selection`` table: one value per model and rate tried, a mean over ``tuning_seeds``)."""
    grid = sum(1 for row in results.get("lr_selection", []) for k, v in row.items()
               if k not in ("model", "chosen lr", "tuning") and v == v)
    return len(results["runs"]) + grid * results.get("parameters", {}).get("tuning_seeds", 1)

# Tests read real data from a local mirror; CI sets ODEBOOK_DATA, a checkout beside ../shared finds it there.
if "ODEBOOK_DATA" not in os.environ and SHARED_DATA.is_dir():
    os.environ["ODEBOOK_DATA"] = str(SHARED_DATA)
pin_data_dir()  # `make test ODEBOOK_DATA=../shared/data`: the notebooks' kernels run in notebooks/
if os.environ.get("PYTEST_XDIST_WORKER"):  # one of TEST_WORKERS processes (Makefile): its share of the cores
    import torch

    from odebook.training.executor import usable_cores

    threads = max(1, usable_cores() // int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
    os.environ["OMP_NUM_THREADS"] = str(threads)  # and that of the kernels and scripts it starts
    torch.set_num_threads(threads)


def pytest_collection_modifyitems(items):
    """Every test that reads the smoke book runs alone (marker ``alone``): the book's wall-clock times are compared
    with their estimates, and one run of it serves them all (with the parallel workers, each worker would run it).
    The slow tests go first, so that the parallel workers start on the long ones and end on short ones together (in
    collection order the longest, training/'s and test_readme's, came last)."""
    for item in items:
        if "smoke_book" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.alone)
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)  # stable: the order within each stays


@pytest.fixture
def root() -> Path:
    return ROOT


@dataclasses.dataclass(frozen=True)
class SmokeBook:
    """The whole book run once on the smoke profile: its outputs folder, the runner's results, the estimate the
    runner printed before each study (uncalibrated: a fresh outputs folder), and how many cores other processes kept
    busy just before and during the runs (wall-clock comparisons mean nothing where they did)."""
    out: Path
    results: list
    estimates: dict
    others_before: float
    others_during: float


@pytest.fixture(scope="session")
def smoke_book(tmp_path_factory) -> SmokeBook:
    """The whole book on the smoke profile through the runner (as make run-all), once for every test that reads it,
    into a temporary outputs folder, with MPLBACKEND=Agg exported as CI does."""
    out, estimates, estimate = tmp_path_factory.mktemp("outputs"), {}, budget.estimate

    def recorded(p, precision):
        estimates[p.study] = estimate(p, precision)
        return estimates[p.study]
    before = min(machine_load.busy_cores(3.0) for _ in range(2))
    with pytest.MonkeyPatch.context() as mp, machine_load.others() as during:
        mp.setenv("MPLBACKEND", "Agg")
        mp.setattr(budget, "estimate", recorded)
        results = runner.run_book(runner.Book(ROOT / "notebooks", ROOT / "params", out), "smoke")
    return SmokeBook(out, results, estimates, before, during["cores"])


@pytest.fixture
def own_studies(monkeypatch):
    """Register tiny studies of a test's own by name (``own_studies({"90_ok": OkParams})``): the runner finds a
    study's parameters by its name (odebook.studies.schema), these first."""
    from odebook import studies

    def register(schemas: dict) -> None:
        found = studies.schema
        monkeypatch.setattr(studies, "schema", lambda name: schemas[name] if name in schemas else found(name))
    return register
