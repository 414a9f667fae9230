"""The documentation site builds with ``mkdocs build --strict`` (warnings are errors).

A docstring that mkdocstrings cannot parse, a broken link or anchor, a page
missing from the navigation or a stale API reference fails the build, and so
this test.  The docs toolchain (the ``dev`` extra) is required.
"""

import re
import subprocess
import sys
from pathlib import Path

import mkdocs  # noqa: F401  (the docs toolchain, dev extra: fail here when it is missing)
import mkdocstrings  # noqa: F401
import mkdocstrings_handlers.python  # noqa: F401
import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.xdist_group("docs-site")  # one worker builds the site once for all tests here

PAGES = ("index.html", "model", "data", "cli", "api", "results", "ARCHITECTURE")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """Build the site once into a temporary folder; return (folder, build log)."""
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--clean",
         "--config-file", str(ROOT / "mkdocs.yml"), "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{log}"
    return out, log


def _page(out: Path, name: str) -> str:
    path = out / name if name.endswith(".html") else out / name / "index.html"
    assert path.is_file(), f"{path.relative_to(out)} was not built"
    return path.read_text(encoding="utf-8")


def test_site_builds_strict_with_every_page(site):
    out, log = site
    for name in PAGES:
        assert "</html>" in _page(out, name)
    assert "WARNING" not in log
    # the build's own modules are not published
    assert not (out / "hooks.py").exists()
    assert not (out / "griffe_sphinx_roles.py").exists()


def test_cli_page_lists_every_subcommand(site):
    from mtlirt.cli import build_parser

    out, _ = site
    html = _page(out, "cli")
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert sub.choices, "the parser has no sub-commands"
    for name, parser in sub.choices.items():
        assert f'id="mtlirt-{name}"' in html, f"no section for mtlirt {name}"
        assert f"usage: mtlirt {name}" in html
        for action in parser._actions:
            for option in action.option_strings:
                assert option in html, f"mtlirt {name} {option} is not on the page"


def test_index_map_lists_every_page_of_the_site():
    """docs/index.md's 'Where to go next' links every page of the navigation (harnesses.md was missing)."""
    nav = re.findall(r"^\s+- [^:]+: (\S+\.md)$", (ROOT / "mkdocs.yml").read_text(), re.M)
    assert len(nav) >= 10 and "harnesses.md" in nav
    index = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    table = index[index.index("## Where to go next"):]
    missing = [page for page in nav if page != "index.md" and f"]({page})" not in table]
    assert not missing, f"docs/index.md's map leaves out {missing}"


def _hooks():
    import importlib.util

    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cli_page_is_the_parsers_help_as_a_file():
    """docs/cli.md is readable as a file (no placeholder) and is what ``python docs/hooks.py`` writes."""
    hooks = _hooks()
    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    assert hooks.cli_page_problems(text) == []
    assert "usage: mtlirt example-data" in text and "## mtlirt fit {#mtlirt-fit}" in text
    # a stale page is found: an option the parser has and the page lacks
    stale = text.replace("--ignore-unknown-items", "--ignore-unknown")
    assert hooks.cli_page_problems(stale)
    # written under another Python (whose argparse formats differently): every option must still be there
    mark = f"Python {hooks._python()} -->"
    assert mark in text
    assert hooks.cli_page_problems(text.replace(mark, "Python 0.0 -->")) == []
    assert "docs/cli.md lacks mtlirt score --ignore-unknown-items" in hooks.cli_page_problems(
        stale.replace(mark, "Python 0.0 -->"))


def test_api_page_renders_docstrings(site):
    out, _ = site
    html = _page(out, "api")
    for anchor in (
        "mtlirt.data.responses.Responses",
        "mtlirt.data.responses.Responses.read",
        "mtlirt.results.estimate.Estimate",
        "mtlirt.results.estimate.Estimate.domain_scores",
        "mtlirt.data.simulate.simulate",
        "mtlirt.data.importers.from_lm_eval",
        "mtlirt.data.tables.read_table",
        "mtlirt.data.validate.check_columns",
        "mtlirt.results.fitdir.write_fit",
        "mtlirt.errors.InputError",
    ):
        assert f'id="{anchor}"' in html, f"{anchor} is not documented"
    # Sphinx roles in the docstrings are rendered as links or code, not literally
    roles = re.findall(r":(?:class|func|meth|data|attr|mod|exc|obj):(?:<code>|`)[^<`]*", html)
    assert not roles, f"Sphinx roles rendered literally: {roles[:5]}"


def test_model_page_lists_the_model_specs(site):
    out, _ = site
    html = _page(out, "model")
    assert "<!-- mtlirt-model-specs -->" not in html
    specs = sorted((ROOT / "models").glob("*.toml"))
    assert specs
    for spec in specs:
        assert f"<code>{spec.stem}</code>" in html


# --------------------------------------------------------------------------- worked examples

WORKED_PAGES = ("harnesses.md", "data.md")


def _blocks(page: str) -> list[tuple[str, str]]:
    """The fenced code blocks of a docs page: ``(language, text)`` in page order."""
    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    return [(m["lang"], m["body"]) for m in re.finditer(r"^```(?P<lang>\w*)\n(?P<body>.*?)^```$", text, re.M | re.S)]


def _commands(body: str) -> list[tuple[str, list[str]]]:
    """``(command, quoted output lines)`` of a ``text`` block of ``$ command`` lines and their output."""
    out: list[tuple[str, list[str]]] = []
    lines = body.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        assert line.startswith("$ "), f"output before any command: {line!r}"
        cmd = line[2:]
        while cmd.endswith("\\"):
            i += 1
            cmd = cmd[:-1].rstrip() + " " + lines[i].strip()
        i += 1
        quoted = []
        while i < len(lines) and not lines[i].startswith("$ "):
            quoted.append(lines[i].rstrip())
            i += 1
        out.append((cmd, quoted))
    return out


def _matches(quoted: str, actual: str) -> bool:
    """``...`` in a quoted line stands for any text (a long path cut short on the page)."""
    pattern = ".*".join(re.escape(part) for part in quoted.split("..."))
    return re.fullmatch(pattern, actual) is not None


def _run(cmd: str, capsys) -> tuple[int, list[str], list[str]]:
    """Run a documented command in the current folder: ``mtlirt ...`` in process, ``cat``, ``head -N``."""
    import shlex
    import warnings

    from mtlirt.cli import main

    argv = shlex.split(cmd)
    if argv[0] == "mtlirt":
        with warnings.catch_warnings():
            warnings.simplefilter("default")  # as on the command line: warnings shown, not raised
            try:
                rc = main(argv[1:])
            except SystemExit as exc:  # a usage error
                rc = exc.code
    elif argv[0] == "cat" and len(argv) == 2:
        print(Path(argv[1]).read_text(), end="")
        rc = 0
    elif argv[0] == "head" and len(argv) == 3 and re.fullmatch(r"-\d+", argv[1]):
        print("".join(Path(argv[2]).read_text().splitlines(keepends=True)[: int(argv[1][1:])]), end="")
        rc = 0
    else:
        raise AssertionError(f"a worked example runs a command the docs test cannot: {cmd!r}")
    captured = capsys.readouterr()
    return rc, [s.rstrip() for s in captured.out.splitlines()], [s.rstrip() for s in captured.err.splitlines()]


@pytest.mark.parametrize("page", WORKED_PAGES)
def test_worked_examples_run_on_the_shipped_examples(page, tmp_path, monkeypatch, capsys):
    """Every ``$ command`` of the page runs, in page order, in an empty folder where the page itself copies
    the examples out (``mtlirt example-data``); what it prints is what the page quotes (``mtlirt:`` lines
    are stderr, the others stdout; ``...`` stands for any text), and an error exits 2.  The page's
    Python blocks run there too."""
    import warnings

    monkeypatch.chdir(tmp_path)
    n_commands = 0
    for lang, body in _blocks(page):
        if lang == "python":
            with warnings.catch_warnings():
                exec(compile(body, f"{page} python block", "exec"), {"__name__": "docs_example"})
            capsys.readouterr()
            continue
        if lang != "text" or not body.startswith("$ "):
            continue
        for cmd, quoted in _commands(body):
            n_commands += 1
            rc, out, err = _run(cmd, capsys)
            want_err = [q for q in quoted if q.startswith("mtlirt: ")]
            want_out = [q for q in quoted if not q.startswith("mtlirt: ")]
            context = f"{page}: $ {cmd}\nprinted:\n" + "\n".join(err + out)
            assert rc == (2 if any(q.startswith("mtlirt: error:") for q in quoted) else 0), context
            assert len(out) == len(want_out) and all(map(_matches, want_out, out)), context
            assert len(err) == len(want_err) and all(map(_matches, want_err, err)), context
    assert n_commands >= 5, f"{page} has only {n_commands} worked commands"


# --------------------------------------------------------------------------- output columns


@pytest.fixture(scope="module")
def written_outputs(tmp_path_factory):
    """Files written by the real writers on tiny data: ``{file label: column or key names}``."""
    import json
    import warnings

    import pandas as pd

    from mtlirt import Responses, fit, simulate, write_fit
    from mtlirt.evaluate.adaptive import replay
    from mtlirt.evaluate.scoring import Scorer
    from mtlirt.report.compare import compare

    out = tmp_path_factory.mktemp("outputs")
    sim = simulate(40, domain_sizes=[5, 6, 7], seed=3, missing=0.1)
    data = Responses.from_frame(sim.responses)
    bayes_data = Responses.from_frame(simulate(120, domain_sizes=[4, 6, 30], seed=5).responses)  # test_bayes_items'
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fits = {
            "mtl": fit(data, "mtl", bootstrap=2, n_jobs=1),
            "paper": fit(data, "mtl", variant="paper", gamma=0.05),
            "accuracy": fit(data, "accuracy"),
            "bayes": fit(bayes_data, "bayes", items="fixed", algorithm="map", progress=False),
        }
    names: dict[str, set[str]] = {}

    def add(label, columns):
        names.setdefault(label, set()).update(map(str, columns))

    for method, est in fits.items():
        folder = write_fit(est, out / method)
        for table in ("domain_scores", "overall", "items", "domain_correlation"):
            add(f"{table}.csv", pd.read_csv(folder / f"{table}.csv").columns)
        add("fit.json", json.loads((folder / "fit.json").read_text()))
        add("posterior.nc", est.posterior.data_vars)
    scorer = Scorer(fits["mtl"])
    new = sim.responses[sim.responses["llm"].isin(["llm0001", "llm0002"])]
    scored = scorer.score(new, seed=0).write(out / "scored")
    replay(scorer, new, budget=3, seed=0).write(out / "adapted")
    for file in ("overall.csv", "domain_scores.csv"):
        add(f"score {file}", pd.read_csv(scored / file).columns)
        add(f"adapt {file}", pd.read_csv(out / "adapted" / file).columns)
    add("administered.csv", pd.read_csv(out / "adapted" / "administered.csv").columns)
    truth = simulate(40, domain_sizes=[5, 6, 7], seed=3, scenario="realistic").write_truth(out / "truth")
    for file in ("domain_scores.csv", "overall.csv", "items.csv", "domains.csv", "llms.csv"):
        add(f"truth {file}", pd.read_csv(truth / file).columns)
    add("truth.json", json.loads((truth / "truth.json").read_text()))
    add("compare", compare([fits["mtl"], fits["accuracy"]], names=["mtl", "accuracy"]).columns)
    return names


def test_every_output_column_is_documented(written_outputs):
    """Each column (and fit.json key) the writers write is named, in backticks, on docs/outputs.md."""
    page = (ROOT / "docs" / "outputs.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"`([^`\s]+)`", page))
    missing = {label: sorted(cols - documented) for label, cols in written_outputs.items() if cols - documented}
    assert not missing, f"columns written but not documented on docs/outputs.md: {missing}"
    # the fixture saw what it should: MTL's bootstrap, the paper's variant, the Bayesian fit, the new-LLM tables
    assert {"predicted"} <= written_outputs["domain_scores.csv"]
    assert {"lam", "optimizer", "rank_evidence", "mtl_rank", "spec", "reliability"} <= written_outputs["fit.json"]
    assert {"accuracy_upper", "n_responses"} <= written_outputs["score overall.csv"]
    assert written_outputs["administered.csv"] == {"llm", "step", "item", "domain", "correct"}
