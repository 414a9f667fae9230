import os
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")

SHARED = Path(__file__).resolve().parents[1].parent / "shared"


@pytest.fixture
def shared_data():
    """Path to ../shared/data; the test is skipped where it is absent."""
    path = Path(os.environ.get("MTLIRT_SHARED", SHARED)) / "data"
    if not path.exists():
        pytest.skip("../shared/data is not present")
    return path
