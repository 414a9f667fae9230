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
    # a folder row ("bayes/", "data/importers/") that names the module in backticks
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


@pytest.mark.parametrize("rel", ["data/tables.py", "bayes/marginal.py", "report/plots/scores.py"])
def test_the_check_itself_finds_listed_modules(rel):
    assert _listed(rel, _rows())
    assert not _listed(rel.replace(".py", "_nonexistent.py"), _rows())


# ---------------------------------------------------------------------------
# function length
# ---------------------------------------------------------------------------

#: Longest function allowed, in lines from its ``def`` to its last line, decorators and
#: docstring not counted (a full numpydoc docstring documents, it does not make the code
#: longer to read); blank lines and comments count.
MAX_FUNCTION_LINES = 120

def _function_lengths(source: str) -> dict[str, int]:
    """``qualified name -> lines without decorators and docstring`` of every function in ``source``
    (nested ones too; a nested function's lines also count for the function around it)."""
    import ast

    out = {}

    def visit(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = child.end_lineno - child.lineno + 1
                first = child.body[0]
                if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                        and isinstance(first.value.value, str):
                    lines -= first.end_lineno - first.lineno + 1
                out[prefix + child.name] = lines
                visit(child, prefix + child.name + ".")
            elif isinstance(child, ast.ClassDef):
                visit(child, prefix + child.name + ".")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return out


def _long_functions() -> dict[str, int]:
    out = {}
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG).as_posix()
        for name, lines in _function_lengths(path.read_text()).items():
            if lines > MAX_FUNCTION_LINES:
                out[f"{rel}:{name}"] = lines
    return out


def test_no_function_is_longer_than_the_limit():
    too_long = _long_functions()
    assert not too_long, (f"functions over {MAX_FUNCTION_LINES} lines (docstring not counted): {too_long}; "
                          "split them into steps named for what they do")


def test_function_length_counts_code_not_docstring_or_decorators():
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES - 1))
    doc = '    """Doc.\n\n    More doc.\n    """\n'
    source = (f"@decorator\ndef fits():\n{doc}{body}\n\n"
              f"def too_long():\n{doc}{body}\n    x = 0\n\n"
              f"class C:\n    def method(self):\n        def inner():\n            pass\n        return inner\n")
    lengths = _function_lengths(source)
    assert lengths["fits"] == MAX_FUNCTION_LINES
    assert lengths["too_long"] == MAX_FUNCTION_LINES + 1
    assert lengths["C.method"] == 4 and lengths["C.method.inner"] == 2
