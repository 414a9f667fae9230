"""Execute the example notebooks in ``notebooks/`` at their reduced size.

Each notebook runs top to bottom in a fresh kernel (``python3`` of the
environment running the tests, from ipykernel), with ``notebooks/`` as the
working directory, ``MTLIRT_FULL`` and ``MTLIRT_DATA`` unset (reduced size,
simulated data) and ``MTLIRT_OUTPUT`` pointing to a temporary folder, so that
nothing is written into the repository.  A cell that raises fails the test.
The committed notebooks must carry no outputs.
"""

from __future__ import annotations

import json
from pathlib import Path

import ipykernel  # noqa: F401  (the notebooks' kernel: fail here when it is missing)
import nbclient
import nbformat
import pytest

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
CELL_TIMEOUT = 600  # seconds per cell

FAST = ["02-simulation-study.ipynb", "05-new-llms.ipynb"]
SLOW = ["01-quickstart.ipynb", "03-mmlu-case-study.ipynb", "04-bayes-vs-mtl.ipynb"]  # minutes each


def _execute(name: str, output: Path, monkeypatch) -> nbformat.NotebookNode:
    monkeypatch.delenv("MTLIRT_FULL", raising=False)
    monkeypatch.delenv("MTLIRT_DATA", raising=False)
    monkeypatch.delenv("MTLIRT_DOMAIN_COLUMN", raising=False)
    monkeypatch.setenv("MTLIRT_OUTPUT", str(output))
    monkeypatch.delenv("MPLBACKEND", raising=False)  # the notebooks select the inline backend themselves
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=CELL_TIMEOUT, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS)}}
    )
    client.execute()  # raises CellExecutionError (with the cell and traceback) on the first failing cell
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error"]
    assert not errors, errors
    return nb


@pytest.mark.parametrize("name", FAST + [pytest.param(n, marks=pytest.mark.slow) for n in SLOW])
def test_notebook_runs(name, tmp_path, monkeypatch):
    nb = _execute(name, tmp_path, monkeypatch)
    assert any(o.output_type == "display_data" and "image/png" in o.get("data", {})
               for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])), "no figure drawn"
    if name == "01-quickstart.ipynb":
        fit_dir = tmp_path / "01-quickstart" / "fit-mtl"
        assert (fit_dir / "posterior.nc").exists() and (fit_dir / "overall.csv").exists()
        assert (tmp_path / "01-quickstart" / "report.html").stat().st_size > 0


def test_every_notebook_is_tested_and_committed_without_outputs():
    names = sorted(p.name for p in NOTEBOOKS.glob("*.ipynb"))
    assert names == sorted(FAST + SLOW)
    for name in names:
        raw = json.loads((NOTEBOOKS / name).read_text(encoding="utf-8"))
        nb = nbformat.reads(json.dumps(raw), as_version=4)
        nbformat.validate(nb)
        first = nb.cells[1] if nb.cells[0].cell_type == "markdown" else nb.cells[0]
        assert "MTLIRT_FULL" in first.source and "parameters" in first.metadata.get("tags", []), name
        for cell in nb.cells:
            if cell.cell_type == "code":
                assert cell.outputs == [] and cell.execution_count is None, f"{name}: outputs not cleared"
