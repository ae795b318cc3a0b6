import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = ROOT.parent / "shared" / "data"

# Tests read real data from a local mirror; CI sets ODEBOOK_DATA, a checkout beside ../shared finds it there.
if "ODEBOOK_DATA" not in os.environ and SHARED_DATA.is_dir():
    os.environ["ODEBOOK_DATA"] = str(SHARED_DATA)


@pytest.fixture
def root() -> Path:
    return ROOT
