"""What an output may replace, and writing it so that a failure leaves the old content intact.

Every writer of the package goes through :func:`folder_output` (fit, score,
adapt, truth and demo folders) or :func:`file_output` (tables, the HTML
report).  The rules, checked before any work (:func:`check_folder`,
:func:`check_file`) and again when writing:

- a new path is written; a missing parent folder is created;
- an output folder may replace only a folder of its own kind, recognised by
  its marker file (``fit.json`` for a fit folder), holding nothing but what
  that kind writes, and only with ``overwrite`` (the CLI's ``--force``); an
  empty folder counts as new; a file is never replaced by a folder;
- an output file may replace an existing file only with ``overwrite``; a
  folder never;
- an input of the command is never replaced, whatever ``overwrite`` says,
  nor a folder holding one.

The output is written into a temporary sibling (``.tmp-XXXXXXXX-NAME``) and
renamed into place; on any failure the temporary is removed and the old
output is left as it was.  Folders and files get the user's umask.
"""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError


@dataclass(frozen=True)
class FolderKind:
    """A kind of output folder: its name in messages, its marker file and every entry its writer makes."""

    name: str
    marker: str
    entries: tuple[str, ...]


def _same(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return a.resolve() == b.resolve()


def _within(path: Path, folder: Path) -> bool:
    """``path`` is ``folder`` or lies under it (links resolved)."""
    try:
        path, folder = path.resolve(), folder.resolve()
    except OSError:
        return False
    return path == folder or folder in path.parents


def _check_inputs(out: Path, inputs: Iterable) -> None:
    for given in inputs:
        if given is None:
            continue
        p = Path(given)
        if out.exists() and p.exists() and _same(out, p):
            raise InputError(f"{out} is an input of this command; write the output to another path")
        if p.exists() and out.is_dir() and _within(p, out):
            raise InputError(f"replacing {out} would delete the input {p}; write the output to another path")
        if out.is_file() and p.is_dir() and _within(out, p):
            raise InputError(f"{out} is a file of the input {p}; write the output to another path")


def _check_parent(out: Path) -> None:
    """The nearest existing ancestor of ``out`` must be a folder."""
    p = out.parent
    while not (p.exists() or p.is_symlink()) and p.parent != p:
        p = p.parent
    if p.exists() and not p.is_dir():
        raise InputError(f"cannot write {out}: {p} is a file, not a folder")


def check_folder(out, kind: FolderKind, *, overwrite: bool = False, inputs: Iterable = ()) -> Path:
    """Check that ``out`` may be written as a folder of ``kind``; raise :class:`InputError` naming why not.

    Returns the path.  See the module's rules.
    """
    out = Path(out)
    _check_inputs(out, inputs)
    _check_parent(out)
    if _within(Path.cwd(), out):
        raise InputError(f"{out} is the working folder or holds it; give the {kind.name} a new folder name")
    if not out.exists():
        if out.is_symlink():
            raise InputError(f"{out} is a broken link; give a new folder name")
        return out
    if not out.is_dir():
        raise InputError(f"{out} is an existing file, not a {kind.name}; give a new folder name "
                         "(mtlirt never replaces a file with a folder)")
    entries = sorted(os.listdir(out))
    if not entries:
        return out
    if kind.marker not in entries:
        raise InputError(f"{out} is a folder mtlirt did not write as a {kind.name} (no {kind.marker}); "
                         "give a new folder name")
    if not overwrite:
        raise InputError(f"{out} is an existing {kind.name}; pass --force to replace it")
    other = [e for e in entries if e not in kind.entries]
    if other:
        shown = ", ".join(other[:5]) + (f" and {len(other) - 5} more" if len(other) > 5 else "")
        raise InputError(f"{out} holds {shown}, which a {kind.name} does not: move them away or give a new "
                         "folder name (--force replaces only what mtlirt wrote)")
    return out


def check_file(out, *, what: str = "output", overwrite: bool = False, inputs: Iterable = ()) -> Path:
    """Check that ``out`` may be written as a file; raise :class:`InputError` naming why not.

    ``what`` names the output in messages (``"table"``, ``"HTML report"``).
    """
    out = Path(out)
    _check_inputs(out, inputs)
    _check_parent(out)
    if out.is_dir():
        raise InputError(f"{out} is a folder; give the {what} a file name")
    if out.exists() and not overwrite:
        raise InputError(f"{out} exists; pass --force to replace it")
    if not out.exists() and out.is_symlink():
        raise InputError(f"{out} is a broken link; give a new file name")
    return out


def _make_parents(folder: Path) -> list[Path]:
    """Create ``folder`` and its missing parents (umask applied); return those created, outermost first."""
    missing = []
    p = folder
    while not p.exists():
        missing.append(p)
        if p.parent == p:
            break
        p = p.parent
    created = []
    try:
        for d in reversed(missing):
            d.mkdir()
            created.append(d)
    except BaseException:
        _remove_empty(created)
        raise
    return created


def _remove_empty(created: list[Path]) -> None:
    for d in reversed(created):
        try:
            d.rmdir()
        except OSError:
            pass


def _sibling(out: Path, tag: str) -> Path:
    """A hidden sibling name that ends with ``out``'s name, so that a writer reading the format off the
    extension (``.csv.gz``, ``.parquet``) writes the temporary in the right one."""
    return out.with_name(f".{tag}-{secrets.token_hex(4)}-{out.name}")


def _new_temp(out: Path, *, folder: bool) -> Path:
    """An exclusive temporary sibling of ``out``, created with the user's umask (not mkdtemp's 0700)."""
    for _ in range(100):
        tmp = _sibling(out, "tmp")
        try:
            if folder:
                tmp.mkdir()
            else:
                os.close(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
        except FileExistsError:
            continue
        return tmp
    raise FileExistsError(f"cannot create a temporary name beside {out}")


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        try:
            path.unlink()
        except OSError:
            pass


def _write_error(out: Path, exc: OSError) -> OSError:
    """The writer's error named by the output, not by the temporary it was writing."""
    return OSError(exc.errno, f"cannot write {out}: {exc.strerror or exc}")


@contextmanager
def folder_output(out, kind: FolderKind, *, overwrite: bool = False, inputs: Iterable = ()) -> Iterator[Path]:
    """Yield a temporary folder to write ``out``'s content into; rename it into place when the block ends.

    ``out`` is checked by :func:`check_folder` first and again before the
    rename; an existing folder of ``kind`` is moved aside, replaced, then
    removed (moved back if the rename fails).  On any failure the temporary
    is removed, the old folder is left as it was and a created parent is
    removed again.  An ``OSError`` names ``out``.
    """
    out = Path(out)
    check_folder(out, kind, overwrite=overwrite, inputs=inputs)
    try:
        created = _make_parents(out.parent)
    except OSError as exc:
        raise _write_error(out, exc) from exc
    tmp = None
    try:
        tmp = _new_temp(out, folder=True)
        yield tmp
        check_folder(out, kind, overwrite=overwrite, inputs=inputs)
        if out.is_dir() and os.listdir(out):
            old = _sibling(out, "old")
            os.rename(out, old)
            try:
                os.rename(tmp, out)
            except BaseException:
                os.rename(old, out)
                raise
            _remove(old)
        else:
            if out.is_dir():
                out.rmdir()
            os.rename(tmp, out)
        tmp = None
    except OSError as exc:
        raise _write_error(out, exc) from exc
    finally:
        if tmp is not None:
            _remove(tmp)
            _remove_empty(created)


@contextmanager
def file_output(out, *, what: str = "output", overwrite: bool = False, inputs: Iterable = ()) -> Iterator[Path]:
    """Yield a temporary path to write ``out`` to; rename it into place when the block ends.

    As :func:`folder_output`, for a file (:func:`check_file`'s rules).  The
    temporary's name ends with ``out``'s, extension included.
    """
    out = Path(out)
    check_file(out, what=what, overwrite=overwrite, inputs=inputs)
    try:
        created = _make_parents(out.parent)
    except OSError as exc:
        raise _write_error(out, exc) from exc
    tmp = None
    try:
        tmp = _new_temp(out, folder=False)
        yield tmp
        check_file(out, what=what, overwrite=overwrite, inputs=inputs)
        os.replace(tmp, out)
        tmp = None
    except OSError as exc:
        raise _write_error(out, exc) from exc
    finally:
        if tmp is not None:
            _remove(tmp)
            _remove_empty(created)
