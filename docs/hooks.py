"""MkDocs hook and generator: the parts of the site that the code already states.

- ``docs/cli.md`` holds the ``--help`` text of ``mtlirt`` and of every
  sub-command that ``mtlirt.cli.build_parser()`` defines, one section per
  sub-command, in the order the parser lists them, below the line
  :data:`CLI_MARKER`.  It is a real file, readable without the site;
  ``python docs/hooks.py`` regenerates it, and the build warns (an error under
  ``mkdocs build --strict``; ``tests/test_docs.py`` fails too) when it is stale.
- ``<!-- mtlirt-model-specs -->`` is replaced at build time by a table of the
  Bayesian model specifications in ``models/*.toml`` (name, item
  model, traits, rank, description).

argparse formats help differently across Python versions, so the page is
compared word for word only under the Python version that wrote it (named in
the marker line); under another one, every sub-command and option must still
be on the page.

Registered in ``mkdocs.yml`` under ``hooks:``.  The package is imported from
``src/`` of this checkout (ahead of any installed copy), so the pages show the
working tree's commands.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tomllib
from pathlib import Path

#: The line of docs/cli.md below which the reference is generated (``{python}``: the version that wrote it).
CLI_MARKER = "<!-- generated below by `python docs/hooks.py` from mtlirt.cli.build_parser(), Python {python} -->"
MODELS_PLACEHOLDER = "<!-- mtlirt-model-specs -->"

#: Width of the help text, fixed so the page does not depend on the terminal.
WIDTH = 88

_ROOT = Path(__file__).resolve().parents[1]
_SRC = _ROOT / "src"
_MODELS = _ROOT / "models"
CLI_PAGE = _ROOT / "docs" / "cli.md"

log = logging.getLogger("mkdocs.hooks.mtlirt")


def _build_parser() -> argparse.ArgumentParser:
    if _SRC.is_dir() and str(_SRC) not in sys.path:
        sys.path.insert(0, str(_SRC))
    from mtlirt.cli import build_parser

    return build_parser()


def _fixed_width(parser: argparse.ArgumentParser) -> None:
    """Make ``parser`` format its help at :data:`WIDTH` columns, without colour."""
    cls = parser.formatter_class
    parser.formatter_class = lambda prog, cls=cls: cls(prog, width=WIDTH)
    if hasattr(parser, "color"):  # Python >= 3.14 colours help on a terminal
        parser.color = False


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    """``(name, one-line help, parser)`` of every sub-command, aliases once."""
    out: list[tuple[str, str, argparse.ArgumentParser]] = []
    seen: set[int] = set()
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        helps = {a.dest: a.help or "" for a in action._choices_actions}
        for name, sub in action.choices.items():
            if id(sub) in seen:
                continue
            seen.add(id(sub))
            out.append((name, helps.get(name, ""), sub))
    return out


def _help_text(parser: argparse.ArgumentParser) -> str:
    _fixed_width(parser)
    old = os.environ.get("NO_COLOR")
    os.environ["NO_COLOR"] = "1"
    try:
        return parser.format_help().rstrip()
    finally:
        if old is None:
            os.environ.pop("NO_COLOR", None)
        else:
            os.environ["NO_COLOR"] = old


def _fence(text: str) -> str:
    # a fence longer than any run of backticks in the text
    ticks = "```"
    while ticks in text:
        ticks += "`"
    return f"{ticks}text\n{text}\n{ticks}"


def cli_reference() -> str:
    """The Markdown of the command-line reference."""
    parser = _build_parser()
    commands = _subcommands(parser)
    parts = ["| command | what it does |", "| --- | --- |"]
    for name, summary, _ in commands:
        parts.append(f"| [`mtlirt {name}`](#mtlirt-{name}) | {summary} |")
    parts += ["", "## mtlirt", "", _fence(_help_text(parser))]
    for name, summary, sub in commands:
        parts += ["", f"## mtlirt {name} {{#mtlirt-{name}}}", ""]
        if summary:
            parts += [summary[0].upper() + summary[1:] + ".", ""]
        parts.append(_fence(_help_text(sub)))
    return "\n".join(parts) + "\n"


def _python() -> str:
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def _split_cli_page(text: str) -> tuple[str, str | None, str] | None:
    """``(text up to the marker line, the Python version it names, the generated part)``, or None."""
    prefix, _, suffix = CLI_MARKER.partition("{python}")
    for i, line in enumerate(text.splitlines(keepends=True)):
        if line.startswith(prefix) and line.rstrip().endswith(suffix):
            head = "".join(text.splitlines(keepends=True)[:i])
            version = line.rstrip()[len(prefix):len(line.rstrip()) - len(suffix)]
            return head, version, "".join(text.splitlines(keepends=True)[i + 1:])
    return None


def cli_page(text: str | None = None) -> str:
    """docs/cli.md with its generated part written anew (the hand-written part above the marker kept)."""
    text = CLI_PAGE.read_text(encoding="utf-8") if text is None else text
    parts = _split_cli_page(text)
    if parts is None:
        raise SystemExit(f"{CLI_PAGE}: no marker line {CLI_MARKER!r}")
    return parts[0] + CLI_MARKER.format(python=_python()) + "\n\n" + cli_reference()


def cli_page_problems(text: str) -> list[str]:
    """Why docs/cli.md does not match the parser (empty when it does)."""
    parts = _split_cli_page(text)
    if parts is None:
        return [f"docs/cli.md has no line {CLI_MARKER!r}"]
    _, version, generated = parts
    if version == _python():
        if text != cli_page(text):
            return ["docs/cli.md is not the parser's help: regenerate it with `python docs/hooks.py`"]
        return []
    problems = []  # another Python formats help differently: every command and option must be there
    for name, _, sub in _subcommands(_build_parser()):
        if f"## mtlirt {name} {{#mtlirt-{name}}}" not in generated:
            problems.append(f"docs/cli.md has no section for mtlirt {name}")
        for action in sub._actions:
            problems += [f"docs/cli.md lacks mtlirt {name} {o}" for o in action.option_strings if o not in generated]
    if problems:
        problems.append("regenerate it with `python docs/hooks.py`")
    return problems


def _cell(value) -> str:
    text = " ".join(str(value).split())
    return text.replace("|", "\\|")


def model_specs() -> str | None:
    """A Markdown table of ``models/*.toml``, or None when there is none."""
    paths = sorted(_MODELS.glob("*.toml"))
    if not paths:
        return None
    rows = ["| name | item model | traits | rank | description |", "| --- | --- | --- | --- | --- |"]
    for path in paths:
        with open(path, "rb") as fh:
            spec = tomllib.load(fh)
        item_model = str(spec.get("item_model", "2pl")).upper()
        guessing = spec.get("guessing")
        if item_model == "3PL" and guessing is not None:
            item_model += f" (guessing {guessing})"
        traits = spec.get("traits", "factor")
        rank = spec.get("rank", 1) if traits == "factor" else "-"
        rows.append(
            f"| `{path.stem}` | {_cell(item_model)} | {_cell(traits)} | {_cell(rank)} "
            f"| {_cell(spec.get('description', ''))} |"
        )
    return "\n".join(rows) + "\n"


def on_page_markdown(markdown: str, page, config, files) -> str:
    """Replace the model-specs placeholder by its table; warn when docs/cli.md is stale."""
    if page.file.src_uri == "cli.md":
        for problem in cli_page_problems(CLI_PAGE.read_text(encoding="utf-8")):
            log.warning(problem)
    if MODELS_PLACEHOLDER in markdown:
        table = model_specs()
        if table is None:
            log.warning("%s: no model specifications in %s", page.file.src_path, _MODELS)
            table = ""
        markdown = markdown.replace(MODELS_PLACEHOLDER, table)
    return markdown


if __name__ == "__main__":
    CLI_PAGE.write_text(cli_page(), encoding="utf-8")
    print(f"wrote {CLI_PAGE.relative_to(_ROOT)}")
