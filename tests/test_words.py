"""The repository speaks of the package only.

Every tracked text file (README, docs, source, tests, benchmarks, notebooks, model files, build files) is
searched for words about how the work on the package was organised rather than about the package: numbered
work items ("issue 16", "point 4", "#12"), sessions, helpers and roles, scratch scripts and paths under
``/tmp/``, sprints and work periods, and commit ids cited in prose. Measurements and their history belong in
``docs/results.md`` and the commit messages, not in references to how they were obtained.
"""

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

TEXT_SUFFIXES = {".md", ".py", ".ipynb", ".toml", ".yml", ".yaml", ".sh", ".cfg", ".txt", ".ini"}
TEXT_NAMES = {"Makefile", "run", ".gitignore"}
# Harness outputs kept as import fixtures are foreign data: their fields are not the package's words.
FOREIGN = ("src/mtlirt/examples/",)
FOREIGN_OK = ("src/mtlirt/examples/README.md",)
# This file quotes the words it looks for, as examples.
OWN = "tests/test_words.py"

# Each pattern names one kind of work-organisation word.  Case-insensitive unless it says otherwise.
PATTERNS = {
    "numbered issue": r"\bissues?\s*#?\d+",
    "numbered point of a work item": r"\bpoints?\s+\d+\b(?![.,]\d)",
    "#N reference": r"(?<![\w&#/\\'\"])#\d{1,4}\b",
    # pytest's fixture scope is the one legitimate use of the word here
    "session": r"(?<!scope=[\"'])\bsessions?\b",
    "helper": r"\bhelpers?\b",
    "role": r"\blead(?:s|ing)?\s+(?:engineer|developer)s?\b|\bengineers?\b",
    "scratch": r"\bscratch\b",
    "/tmp/ path": r"/tmp/",
    "work item": r"\bwork[- ]items?\b",
    "sprint": r"\bsprints?\b",
    "work period": r"\bwork[- ]periods?\b|\bphase\s+\d\b",
    # seven to twelve hex digits, at least one digit and one letter, standing alone (not inside a UUID,
    # a quoted hash value of a harness fixture, a hex colour or a longer identifier)
    "commit id": r"(?<![\w#.\-\"'/])(?=[0-9a-f]{0,11}\d)(?=[0-9a-f]{0,11}[a-f])[0-9a-f]{7,12}(?![\w\-\"/])(?!'(?!s\b))",
}
WORDS = re.compile("|".join(f"(?P<p{i}>{p})" for i, p in enumerate(PATTERNS.values())), re.IGNORECASE)
NAMES = list(PATTERNS)


def _tracked_files() -> list[str]:
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
        files = [f for f in out.decode().split("\0") if f]
    except (OSError, subprocess.CalledProcessError):  # an unpacked archive without git
        files = [str(p.relative_to(ROOT)) for p in ROOT.rglob("*") if p.is_file()
                 and not any(part in {".git", ".venv", "__pycache__", "site"} or part.endswith(".egg-info")
                             for part in p.relative_to(ROOT).parts)]
    return sorted(files)


def _is_text(path: str) -> bool:
    if path == OWN or (path.startswith(FOREIGN) and path not in FOREIGN_OK):
        return False
    name = Path(path).name
    return Path(path).suffix in TEXT_SUFFIXES or name in TEXT_NAMES


def hits(text: str) -> list[tuple[str, str]]:
    """Every (kind, matched text) of a work-organisation word in ``text``."""
    out = []
    for m in WORDS.finditer(text):
        kind = NAMES[int(m.lastgroup[1:])]
        out.append((kind, m.group()))
    return out


@pytest.mark.parametrize("text", [
    "as issue 16 asked", "Issue 13's targets", "point 4: not met", "see #12", "after session 14",
    "the helper scripts", "the lead engineer", "a scratch script", "written to /tmp/h3/flag.py",
    "work item 3", "this sprint", "in phase 2", "issue 13, part b", "run on commit 8902f47",
    "on c3e3402's code", "(`99c47dc`)",
])
def test_words_are_found(text):
    assert hits(text), text


@pytest.mark.parametrize("text", [
    "import tempfile", '@pytest.fixture(scope="session")', "floating point numbers", "color: #000000;",
    '"git_hash": "1f84a09f"', "8b2e4d17-5c3a-4f6e-a1b9-7d0c3e5f2a86", "seed 7, 1,000 LLMs", "deadbeef_x",
    "h2 = np.clip(off)", "f1b, g1b, H1b = at(c1)", "<h2 id='data'>", "the leading dimensions", "electrical_engineering",
    "one point 0.5 above", "a 1e-4 tolerance", "ab12cd3e4f5a6b7c8d", "domain scores: 0.887 / 0.893",
])
def test_package_words_are_not_found(text):
    assert not hits(text), hits(text)


def test_repository_speaks_of_the_package_only():
    files = [path for path in _tracked_files() if _is_text(path)]
    for path in ("README.md", "docs/results.md", "src/mtlirt/bayes/collapsed.py", "benchmarks/bench_bayes.py",
                 "notebooks/01-quickstart.ipynb", "Makefile", "pyproject.toml"):
        assert path in files, f"{path} is not searched"
    found = []
    for path in files:
        file = ROOT / path
        if not file.is_file():  # deleted in the work tree, not yet committed
            continue
        text = file.read_text(encoding="utf-8", errors="replace")
        for lineno, line in enumerate(text.splitlines(), 1):
            for kind, word in hits(line):
                found.append(f"{path}:{lineno}: {kind}: {word!r}")
    assert not found, "words about how the work was organised:\n" + "\n".join(found)
