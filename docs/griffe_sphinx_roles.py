"""Griffe extension: render the reStructuredText bits of numpy docstrings.

The package's docstrings follow the numpy convention, which writes
cross-references as Sphinx roles (``:class:`Responses```,
``:func:`~mtlirt.data.validate.check_columns```, ``:meth:`read```).  Markdown has
no such syntax, so mkdocstrings would print the role literally.  This
extension rewrites every role, before rendering, into an *optional*
mkdocs-autorefs reference: a link when the target is documented on the site,
plain code otherwise, and never a build warning.

Names are resolved the way Python would see them from the docstring's object
(its members, its class, its module and the module's imports), so
``:meth:`read``` in the docstring of ``Responses`` links to
``mtlirt.data.responses.Responses.read``.  The Sphinx conventions ``~`` (show the last
component only), ``!`` (no link) and ``title <target>`` are honoured.

It also applies reST's rule for literal blocks, which numpy docstrings use
for formulas and file layouts: a paragraph ending in ``::`` followed by an
indented block ends in ``:`` (``text ::`` and a lone ``::`` vanish), and the
indented block is a code block in Markdown as it is in reST.

Registered in ``mkdocs.yml`` under the python handler's ``extensions``.
"""

from __future__ import annotations

import html
import re
from typing import Any

import griffe

_ROLE = re.compile(
    r":(?:py:)?(?P<role>class|func|meth|data|attr|mod|exc|obj|const|term):"
    r"`(?P<body>[^`]+)`"
)
_TITLED = re.compile(r"^(?P<title>.*?)\s*<(?P<target>[^<>]+)>$", re.S)


def _resolve(obj: griffe.Object, name: str) -> str:
    """The full path of ``name`` seen from ``obj``, or ``name`` itself when unknown."""
    name = name.strip().rstrip("()")
    head, _, rest = name.partition(".")
    try:
        base = obj.resolve(head)
    except Exception:  # griffe.NameResolutionError, or an alias that cannot be followed
        return name
    return f"{base}.{rest}" if rest else base


def _rewrite(obj: griffe.Object, text: str) -> str:
    def repl(match: re.Match) -> str:
        body = match["body"].strip()
        if match["role"] == "term":
            return f"*{html.escape(body)}*"
        titled = _TITLED.match(body)
        if titled:
            title, target = titled["title"], titled["target"]
        else:
            title = target = body
        no_link = target.startswith("!")
        short = target.startswith("~")
        target = target.lstrip("~!")
        if not titled:
            title = target.rsplit(".", 1)[-1] if short else target
        code = f"<code>{html.escape(title)}</code>"
        if no_link:
            return code
        path = _resolve(obj, target)
        return f'<autoref identifier="{html.escape(path, quote=True)}" optional>{code}</autoref>'

    return _ROLE.sub(repl, text)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _literal_blocks(text: str) -> str:
    """Apply reST's ``::`` rule where an indented block follows."""
    lines = text.split("\n")
    for n, line in enumerate(lines):
        stripped = line.rstrip()
        if not stripped.endswith("::"):
            continue
        following = next((x for x in lines[n + 1 :] if x.strip()), None)
        if following is None or _indent(following) <= _indent(line):
            continue
        body = stripped[:-2]
        if not body.strip():
            lines[n] = ""
        elif body.endswith(" "):
            lines[n] = body.rstrip()
        else:
            lines[n] = body + ":"
    return "\n".join(lines)


def _walk(obj: griffe.Object, seen: set[int]) -> None:
    if id(obj) in seen:
        return
    seen.add(id(obj))
    if obj.docstring is not None and ":" in obj.docstring.value:
        obj.docstring.value = _literal_blocks(_rewrite(obj, obj.docstring.value))
    for member in obj.members.values():
        if member.is_alias:
            continue
        _walk(member, seen)


class SphinxRoles(griffe.Extension):
    """Rewrite Sphinx roles and ``::`` in every docstring of a loaded package."""

    def on_package(self, *, pkg: griffe.Module, loader: Any = None, **kwargs: Any) -> None:
        _walk(pkg, set())
