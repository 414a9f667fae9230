"""MkDocs hook: generate the parts of the site that the code already states.

- ``<!-- mtlirt-cli-reference -->`` is replaced by the ``--help`` text of
  ``mtlirt`` and of every sub-command that ``mtlirt.cli.build_parser()``
  defines, one section per sub-command, in the order the parser lists them.
- ``<!-- mtlirt-model-specs -->`` is replaced by a table of the Bayesian model
  specifications in ``models/*.toml`` (name, item model, traits, rank,
  description).

The pages therefore never go stale as commands, options or models are added.
A placeholder whose source is missing is a build warning (an error under
``mkdocs build --strict``).

Registered in ``mkdocs.yml`` under ``hooks:``.  The package is imported from
``src/`` of this checkout (ahead of any installed copy), so the page shows the
working tree's commands.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tomllib
from pathlib import Path

PLACEHOLDER = "<!-- mtlirt-cli-reference -->"
MODELS_PLACEHOLDER = "<!-- mtlirt-model-specs -->"

#: Width of the help text, fixed so the page does not depend on the terminal.
WIDTH = 88

_ROOT = Path(__file__).resolve().parents[1]
_SRC = _ROOT / "src"
_MODELS = _ROOT / "models"

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
    """Replace the placeholder lines by the generated text."""
    if PLACEHOLDER in markdown:
        markdown = markdown.replace(PLACEHOLDER, cli_reference())
    if MODELS_PLACEHOLDER in markdown:
        table = model_specs()
        if table is None:
            log.warning("%s: no model specifications in %s", page.file.src_path, _MODELS)
            table = ""
        markdown = markdown.replace(MODELS_PLACEHOLDER, table)
    return markdown
