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
    # the helper modules of the build are not published
    assert not (out / "hooks.py").exists()
    assert not (out / "griffe_sphinx_roles.py").exists()


def test_cli_page_lists_every_subcommand(site):
    from mtlirt.cli import build_parser

    out, _ = site
    html = _page(out, "cli")
    assert "<!-- mtlirt-cli-reference -->" not in html
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert sub.choices, "the parser has no sub-commands"
    for name, parser in sub.choices.items():
        assert f'id="mtlirt-{name}"' in html, f"no section for mtlirt {name}"
        assert f"usage: mtlirt {name}" in html
        for action in parser._actions:
            for option in action.option_strings:
                assert option in html, f"mtlirt {name} {option} is not on the page"


def test_api_page_renders_docstrings(site):
    out, _ = site
    html = _page(out, "api")
    for anchor in (
        "mtlirt.io.responses.Responses",
        "mtlirt.io.responses.Responses.read",
        "mtlirt.estimate.Estimate",
        "mtlirt.estimate.Estimate.domain_scores",
        "mtlirt.simulate.simulate",
        "mtlirt.io.importers.from_lm_eval",
        "mtlirt.io.tables.read_table",
        "mtlirt.io.validate.check_columns",
        "mtlirt.io.fitdir.write_fit",
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
    for spec in sorted((ROOT / "models").glob("*.toml")):
        assert f"<code>{spec.stem}</code>" in html
