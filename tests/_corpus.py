"""The bad-input corpus's tools: hash a working folder, run the CLI, assert a clean refusal.

A case is an argument list run by :func:`mtlirt.cli.main` in a working folder (relative paths); a clean
refusal is the documented exit status, one line ``mtlirt: error: ...`` on stderr (warning lines before it
allowed), no traceback, and not one file of the working folder created, changed or removed. Use it from any
test file::

    from _corpus import Case, assert_refused

    CASES = {"no such table": Case(["validate", "absent.csv"], match="no such file")}

    @pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
    def test_refused(case, tmp_path, monkeypatch, capsys):
        monkeypatch.chdir(tmp_path)
        assert_refused(case, tmp_path, capsys)
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Case:
    """One misuse: the arguments, a regular expression the error line must match, the exit status."""

    argv: list[str]
    match: str | None = None
    status: int = 2


def snapshot(root: Path) -> dict[str, str]:
    """Every entry under ``root`` (hidden ones included): a file's SHA-256 and mode, a folder's mode."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames:
            p = Path(dirpath, name)
            out[str(p.relative_to(root)) + "/"] = oct(p.lstat().st_mode)
        for name in filenames:
            p = Path(dirpath, name)
            out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest() + oct(p.lstat().st_mode)
    return out


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    """``mtlirt ARGV`` in this process: exit status, stdout, stderr."""
    from mtlirt.cli import main

    capsys.readouterr()
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def error_line(err: str) -> str:
    """The one error line of a refusal's stderr (warning lines may precede it); fails on anything else."""
    lines = err.strip().splitlines()
    assert lines, "nothing on stderr"
    assert "Traceback" not in err, err
    assert all(line.startswith("mtlirt: warning: ") for line in lines[:-1]), err
    assert lines[-1].startswith("mtlirt: error: "), err
    return lines[-1]


def assert_refused(case: Case, root: Path, capsys) -> str:
    """Run ``case`` in ``root``: the documented status, one clean error line, ``root`` unchanged; the line."""
    before = snapshot(root)
    rc, out, err = run(case.argv, capsys)
    assert rc == case.status, (rc, out, err)
    line = error_line(err)
    if case.match is not None:
        assert re.search(case.match, line), line
    after = snapshot(root)
    assert after == before, {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
    return line
