"""docs/ARCHITECTURE.md's module map names every module of the package."""

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "src" / "mtlirt"
DOC = (ROOT / "docs" / "ARCHITECTURE.md").read_text()


def _rows() -> dict[str, str]:
    """First cell (without backticks) -> the whole row of the module map."""
    table = DOC[DOC.index("## Module map") :]
    rows = {}
    for line in table.splitlines():
        if line.startswith("| `"):
            first = line.split("|")[1].strip().strip("`")
            rows[first] = line
    return rows


def _modules() -> list[str]:
    out = []
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG).as_posix()
        if path.name == "__init__.py" and rel != "__init__.py":
            continue  # a subpackage is listed by its folder or its modules
        out.append(rel)
    return out


def _listed(rel: str, rows: dict[str, str]) -> bool:
    if rel in rows:
        return True
    parts = rel.split("/")
    # a folder row ("bayes/", "io/importers/") that names the module in backticks
    for depth in range(len(parts) - 1, 0, -1):
        folder = "/".join(parts[:depth]) + "/"
        if folder in rows:
            stem = "/".join(parts[depth:]).removesuffix(".py")
            return f"`{stem}`" in rows[folder]
    return False


def test_every_module_is_in_the_module_map():
    rows = _rows()
    missing = [m for m in _modules() if not _listed(m, rows)]
    assert not missing, f"modules missing from docs/ARCHITECTURE.md's module map: {missing}"


def test_the_map_names_no_module_that_is_gone():
    rows = _rows()
    gone = [r for r in rows if r.endswith(".py") and not (PKG / r).exists()]
    gone += [r for r in rows if r.endswith("/") and not (PKG / r).is_dir()]
    assert not gone, f"docs/ARCHITECTURE.md lists modules that do not exist: {gone}"


@pytest.mark.parametrize("rel", ["io/tables.py", "bayes/marginal.py", "report/plots/scores.py"])
def test_the_check_itself_finds_listed_modules(rel):
    assert _listed(rel, _rows())
    assert not _listed(rel.replace(".py", "_nonexistent.py"), _rows())
