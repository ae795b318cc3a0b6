import os
from pathlib import Path

import pytest

from odebook.data.mirror import pin_data_dir

ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = ROOT.parent / "shared" / "data"


def runs_made(results: dict) -> int:
    """Every run a study's results.json accounts for: the runs it records, and the learning-rate grid's runs on the
    tuning seed (its ``lr_selection`` table: one value per model and rate tried)."""
    grid = sum(1 for row in results.get("lr_selection", []) for k, v in row.items()
               if k not in ("model", "chosen lr", "tuning") and v == v)
    return len(results["runs"]) + grid

# Tests read real data from a local mirror; CI sets ODEBOOK_DATA, a checkout beside ../shared finds it there.
if "ODEBOOK_DATA" not in os.environ and SHARED_DATA.is_dir():
    os.environ["ODEBOOK_DATA"] = str(SHARED_DATA)
pin_data_dir()  # `make test ODEBOOK_DATA=../shared/data`: the notebooks' kernels run in notebooks/


@pytest.fixture
def root() -> Path:
    return ROOT
