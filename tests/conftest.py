import os
from pathlib import Path

import pytest

from odebook.data.mirror import pin_data_dir

ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = ROOT.parent / "shared" / "data"

# Tests read real data from a local mirror; CI sets ODEBOOK_DATA, a checkout beside ../shared finds it there.
if "ODEBOOK_DATA" not in os.environ and SHARED_DATA.is_dir():
    os.environ["ODEBOOK_DATA"] = str(SHARED_DATA)
pin_data_dir()  # `make test ODEBOOK_DATA=../shared/data`: the notebooks' kernels run in notebooks/


@pytest.fixture
def root() -> Path:
    return ROOT
