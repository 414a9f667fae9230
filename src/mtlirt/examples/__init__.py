"""Example inputs of every format ``mtlirt convert`` reads, shipped with the package.

One folder per format (``long``, ``wide``, ``lm_eval``, ``open_llm_leaderboard``,
``open_llm_leaderboard_v2``, ``helm``, ``inspect``, ``every_eval_ever``), each a few
small files in the real layout of its harness; the folder's ``README.md`` says
where each comes from and under which licence.  :func:`copy_examples` (the
command ``mtlirt example-data DIR``) copies them out, so that the worked
examples of the documentation run from an install::

    from mtlirt import importers
    from mtlirt.examples import copy_examples

    copy_examples("examples")
    df = importers.from_helm("examples/helm/runs/v1")
"""

from __future__ import annotations

from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

from ..errors import InputError

__all__ = ["FORMATS", "copy_examples", "example_files"]

#: The example folders, one per format (the ``mtlirt convert`` kind with ``_`` for ``-``).
FORMATS = ("long", "wide", "lm_eval", "open_llm_leaderboard", "open_llm_leaderboard_v2", "helm", "inspect",
           "every_eval_ever")


def _walk(node: Traversable, prefix: str) -> list[tuple[str, Traversable]]:
    out = []
    for child in sorted(node.iterdir(), key=lambda c: c.name):
        rel = f"{prefix}{child.name}"
        if child.is_dir():
            out += _walk(child, rel + "/")
        else:
            out.append((rel, child))
    return out


def example_files() -> dict[str, Traversable]:
    """Every example file, by its path relative to the examples folder (``/``-separated), README included."""
    root = resources.files(__name__)
    files = {"README.md": root / "README.md"}
    for name in FORMATS:
        files.update(_walk(root / name, f"{name}/"))
    return files


def copy_examples(dest: str | Path) -> list[Path]:
    """Copy the example inputs into the folder ``dest`` (created if need be); return the files written.

    Refuses, with an :class:`~mtlirt.errors.InputError` naming them, when any
    of the files is there already: nothing is overwritten, and then nothing is
    written.
    """
    dest = Path(dest)
    if dest.exists() and not dest.is_dir():
        raise InputError(f"cannot write the examples into {dest}: it is a file, not a folder")
    files = example_files()
    there = [rel for rel in files if (dest / rel).exists() or (dest / rel).is_symlink()]
    if there:
        shown = ", ".join(there[:5]) + (f" and {len(there) - 5} more" if len(there) > 5 else "")
        raise InputError(f"{len(there)} of the {len(files)} example files already exist in {dest} ({shown}): "
                         "nothing written; choose a new or empty folder")
    folders = {parent for rel in files for parent in (dest / rel).parents if dest in parent.parents}
    blocked = [p for p in folders if p.exists() and not p.is_dir()]
    if blocked:
        raise InputError(f"cannot write the examples into {dest}: {', '.join(map(str, sorted(blocked)))} "
                         "must be a folder but is a file: nothing written")
    written = []
    for rel, src in files.items():
        out = dest / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(src.read_bytes())
        written.append(out)
    return written
