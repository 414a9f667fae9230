"""docs/ARCHITECTURE.md's module map names every module of the package; functions and modules stay short; the stage
folders import along the flow of a results table, without cycles."""

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
# function and module length
# ---------------------------------------------------------------------------

#: Longest function allowed, in lines from its ``def`` to its last line, decorators and
#: docstring not counted (a full numpydoc docstring documents, it does not make the code
#: longer to read); blank lines and comments count.
MAX_FUNCTION_LINES = 80

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


#: Longest module allowed, in lines: a module holds one concept, and one that grows past this holds two.
MAX_MODULE_LINES = 600


def test_no_module_is_longer_than_the_limit():
    too_long = {path.relative_to(PKG).as_posix(): n for path in sorted(PKG.rglob("*.py"))
                if (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES}
    assert not too_long, (f"modules over {MAX_MODULE_LINES} lines: {too_long}; split them into modules of one "
                          "concept each")


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


# ---------------------------------------------------------------------------
# the import graph between the stage folders
# ---------------------------------------------------------------------------

#: The stages in the order a results table flows through them: a module imports its own stage and the
#: stages before it, never one after it. The last stage is the entry points built on all the others.
STAGES = (
    ("errors", "progress", "memory", "numerics"),
    ("data", "examples"),
    ("estimators",),
    ("bayes", "config"),
    ("results",),
    ("evaluate",),
    ("report",),
    ("fitting", "fit_options", "cli", "cli_commands", "demo", "__init__"),
)

#: The imports against the flow that remain, each inside the function that needs it or for annotations only (so
#: that importing the earlier module never loads the later one), except where marked "module level". Remove an
#: entry with the import.
UPWARD_ALLOWED = {
    # bayes/derived lays the posterior out by the result contract and computes the expected accuracy the
    # Estimate reports; both are declared once, in results/ (module level; results/ imports nothing of bayes/)
    ("bayes.derived", "results.schema"),
    ("bayes.derived", "results.estimate"),
    # the Bayesian diagnostics wrap a tree in an Estimate to read its draws, and leave-one-LLM-out reads the
    # per-LLM marginal likelihood of the model checks
    ("bayes.diagnostics", "results.estimate"),
    ("bayes.diagnostics", "evaluate.loo"),
    # the seed paper's simulation design centres its domain traits by the paper's own sine centre
    ("data.sim_paper", "estimators.sine_centre"),
    # held-out log-likelihood of any Estimate: an evaluation that lives with the estimators whose
    # cross-validation it also serves (and names Estimate in its annotations)
    ("estimators.heldout", "results.estimate"),
    # Estimate.score: new LLMs scored against this fit, a convenience over evaluate.scoring.score
    ("results.estimate", "evaluate.scoring"),
}


def _module_name(path: Path) -> str:
    """``src/mtlirt/data/tables.py`` -> ``data.tables``; the package's ``__init__.py`` -> ``__init__``."""
    parts = list(path.relative_to(PKG).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


def _import_edges() -> list[tuple[str, str, bool]]:
    """``(importer, imported, not at import time)`` for every import of one of the package's modules."""
    import ast

    modules = {_module_name(p) for p in PKG.rglob("*.py")}
    edges = []
    for path in sorted(PKG.rglob("*.py")):
        name = _module_name(path)
        package = name.split(".") if path.name == "__init__.py" and name != "__init__" else name.split(".")[:-1]
        tree = ast.parse(path.read_text())
        # not at import time: inside a function, or under "if TYPE_CHECKING:" (annotations only)
        local = {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                 or (isinstance(f, ast.If) and "TYPE_CHECKING" in ast.unparse(f.test)) for n in ast.walk(f)}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package[: len(package) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                elif node.module and node.module.split(".")[0] == "mtlirt":
                    target = node.module.removeprefix("mtlirt").lstrip(".")
                else:
                    continue
                for alias in node.names:
                    sub = f"{target}.{alias.name}" if target else alias.name
                    imported = sub if sub in modules else (target or "__init__")
                    edges.append((name, imported, id(node) in local))
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == "mtlirt":
                        edges.append((name, alias.name.removeprefix("mtlirt").lstrip(".") or "__init__",
                                      id(node) in local))
    return edges


def _stage(module: str) -> int:
    top = module.split(".")[0]
    return next(i for i, folders in enumerate(STAGES) if top in folders)


def _upward(edges) -> set[tuple[str, str]]:
    """The imports of a later stage's module."""
    return {(a, b) for a, b, _ in edges if _stage(b) > _stage(a)}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` (its nodes in order, the first repeated at the end), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(node, path):
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [node, nxt] if nxt in path else [node, nxt]
            if nxt not in state and (found := visit(nxt, path + [node])):
                return found
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start, [])):
            return found
    return None


def test_the_package_has_every_stage_folder():
    folders = {p.name for p in PKG.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    modules = {p.stem for p in PKG.glob("*.py")}
    staged = {f for stage in STAGES for f in stage}
    present = folders | modules
    assert present <= staged, f"modules or folders in no stage of STAGES: {sorted(present - staged)}"
    assert staged <= present, f"STAGES names what the package lacks: {sorted(staged - present)}"


def test_no_module_imports_a_later_stage_beyond_the_allow_list():
    edges = _import_edges()
    upward = _upward(edges)
    assert not upward - UPWARD_ALLOWED, (f"imports of a later stage (STAGES): {sorted(upward - UPWARD_ALLOWED)}; "
                                         "move the shared code to the earlier stage")
    stale = UPWARD_ALLOWED - upward
    assert not stale, f"UPWARD_ALLOWED lists imports that are gone (remove them from the list): {sorted(stale)}"
    module_level = {(a, b) for a, b, local in edges if not local} & UPWARD_ALLOWED
    assert module_level == {("bayes.derived", "results.schema"), ("bayes.derived", "results.estimate")}, (
        f"an allowed import against the flow moved to module level or into a function: {sorted(module_level)}")


def test_the_stage_folders_import_each_other_without_cycles():
    graph: dict[str, set[str]] = {}
    for a, b, _ in _import_edges():
        fa, fb = a.split(".")[0], b.split(".")[0]
        if fa != fb and (a, b) not in UPWARD_ALLOWED:
            graph.setdefault(fa, set()).add(fb)
    assert _cycle(graph) is None, f"stage folders that import each other: {_cycle(graph)}"


def test_the_modules_import_each_other_at_module_level_without_cycles():
    graph: dict[str, set[str]] = {}
    for a, b, local in _import_edges():
        if not local and a != b and not b.startswith(a + "."):  # a package's __init__ importing its own modules
            graph.setdefault(a, set()).add(b)
    assert _cycle(graph) is None, f"modules that import each other at import time: {_cycle(graph)}"


#: Libraries slow to import (a second or more): a module that needs one at import time is imported inside the
#: functions that use it, so that ``import mtlirt`` and ``mtlirt --help`` stay quick.
HEAVY = {"numba", "llvmlite", "pymc", "pytensor", "nutpie", "arviz", "matplotlib", "jax", "numpyro"}
#: The entry points import the stages inside each sub-command, so that one sub-command loads what it runs only.
LAZY_ENTRY_POINTS = {"cli", "cli_commands", "demo"}


def _heavy_modules(edges) -> set[str]:
    """The modules whose import loads a library of ``HEAVY``: directly, through a module they import at import
    time, or through the package ``__init__`` that importing them runs first."""
    import ast

    direct = set()
    for path in PKG.rglob("*.py"):
        tree = ast.parse(path.read_text())
        local = {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                 for n in ast.walk(f)}
        names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) and id(n) not in local for a in n.names]
        names += [n.module for n in ast.walk(tree)
                  if isinstance(n, ast.ImportFrom) and not n.level and n.module and id(n) not in local]
        if {m.split(".")[0] for m in names} & HEAVY:
            direct.add(_module_name(path))
    graph: dict[str, set[str]] = {}
    for a, b, local in edges:
        if not local:
            graph.setdefault(a, set()).add(b)
    modules = {_module_name(p) for p in PKG.rglob("*.py")}
    for m in modules:  # importing a.b.c runs a/__init__ and a/b/__init__ first
        parts = m.split(".")
        graph.setdefault(m, set()).update(".".join(parts[:i]) for i in range(1, len(parts))
                                          if ".".join(parts[:i]) in modules)
    heavy = set(direct)
    changed = True
    while changed:
        changed = False
        for m, deps in graph.items():
            if m not in heavy and deps & heavy:
                heavy.add(m)
                changed = True
    return heavy


def test_function_local_imports_of_the_package_are_lazy_for_a_reason():
    """An import inside a function hides a dependency; it is kept only for a slow library (``HEAVY``), in the
    entry points, or against the flow (``UPWARD_ALLOWED``)."""
    edges = _import_edges()
    heavy = _heavy_modules(edges)
    hidden = sorted({(a, b) for a, b, local in edges if local and a not in LAZY_ENTRY_POINTS and b not in heavy
                     and (a, b) not in UPWARD_ALLOWED and a != b and not a.startswith(b + ".")})
    assert not hidden, (f"function-local imports of modules that load no slow library: {hidden}; import them at "
                        "the top of the module")


def test_the_graph_checks_find_what_they_look_for():
    assert _upward([("data.tables", "results.estimate", True), ("results.fitdir", "data.outputs", False)]) == {
        ("data.tables", "results.estimate")}
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None
    edges = _import_edges()
    assert ("results.fitdir", "data.outputs", False) in edges  # a relative import, resolved
    assert ("bayes.derived", "results.schema", False) in edges  # "from mtlirt.results import schema": a module
    assert ("__init__", "data.importers", False) in edges  # "from .data import importers" in the package's __init__
    assert any(a == "cli_commands" and b == "evaluate.scoring" and local for a, b, local in edges)  # inside a function
    assert ("estimators.heldout", "results.estimate", True) in edges  # under "if TYPE_CHECKING:" (and in a function)
    assert ("estimators.heldout", "results.estimate", False) not in edges
