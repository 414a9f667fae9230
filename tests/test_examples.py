"""The example inputs shipped in ``mtlirt.examples`` and ``mtlirt example-data DIR``, which copies them.

The worked examples of the documentation that run on them are checked in
``tests/test_docs.py``; that the wheel ships them, in ``tests/test_packaging.py``.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

import mtlirt.examples
from mtlirt.cli import main
from mtlirt.data.importers import convert
from mtlirt.data.responses import Responses
from mtlirt.errors import InputError
from mtlirt.examples import FORMATS, copy_examples, example_files

ROOT = Path(mtlirt.examples.__file__).parent


def _tree(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_every_format_has_a_folder_and_every_file_is_listed():
    folders = sorted(p.name for p in ROOT.iterdir() if p.is_dir() and p.name != "__pycache__")
    assert folders == sorted(FORMATS)
    on_disk = {rel for rel in _tree(ROOT) if not rel.endswith(".py") and "__pycache__" not in rel}
    assert set(example_files()) == on_disk
    readme = (ROOT / "README.md").read_text()
    for name in FORMATS:
        assert f"`{name}/" in readme, f"the examples' README.md does not describe {name}/"


def test_copy_examples_copies_every_file_and_refuses_to_overwrite(tmp_path):
    out = tmp_path / "ex"
    written = copy_examples(out)
    assert {p.relative_to(out).as_posix() for p in written} == set(example_files())
    copied = _tree(out)
    assert copied == {rel: h for rel, h in _tree(ROOT).items() if rel in copied}
    # one file there already: an error naming it, and no other file written
    again = tmp_path / "again"
    (again / "wide").mkdir(parents=True)
    (again / "wide" / "matrix.csv").write_text("mine\n")
    with pytest.raises(InputError, match=r"1 of the \d+ example files already exist in .*again \(wide/matrix\.csv\)"):
        copy_examples(again)
    assert _tree(again) == {"wide/matrix.csv": hashlib.sha256(b"mine\n").hexdigest()}
    # a file where a folder must go
    (tmp_path / "blocked").mkdir()
    (tmp_path / "blocked" / "helm").write_text("x")
    with pytest.raises(InputError, match="helm must be a folder but is a file: nothing written"):
        copy_examples(tmp_path / "blocked")
    assert [p.name for p in (tmp_path / "blocked").iterdir()] == ["helm"]


def test_cli_example_data_then_refuses(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["example-data", "examples"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"wrote {len(example_files())} example files to examples: long, wide, lm_eval")
    before = _tree(tmp_path)
    assert main(["example-data", "examples"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("mtlirt: error: ") and "nothing written" in err[0]
    assert _tree(tmp_path) == before


@pytest.mark.parametrize("kind, src, n", [
    ("lm-eval", "lm_eval", 5),
    ("open-llm-leaderboard", "open_llm_leaderboard", 6),
    ("open-llm-leaderboard-v2", "open_llm_leaderboard_v2", 15),
    ("helm", "helm/runs/v1", 11),
    ("inspect", "inspect/logs/2025-12-19T12-37-50+00-00_mmlu-0-shot_Dj4Li7NchTfQSiX7eKXLLN.eval", 3),
    ("every-eval-ever", "every_eval_ever/data/mmlu/openai/gpt-4o", 3),
    ("wide", "wide/matrix.csv", 5),
])
def test_each_format_converts_to_a_valid_long_table(kind, src, n):
    options = {"tasks": "mmlu"} if kind == "every-eval-ever" else {}
    df = convert(kind, ROOT / src, **options)
    assert len(df) == n
    r = Responses.from_frame(df)
    assert r.n_llms >= 1 and r.n_domains >= 1


def test_the_readme_commands_run_on_the_copied_examples(tmp_path, monkeypatch, capsys):
    """Each row of the README's table names a command that works in the folder ``example-data`` writes."""
    import re
    import shlex
    import warnings

    rows = re.findall(r"^\| `(\w+)/` \| [^|]+ \| `(mtlirt [^`]+)` \|$", (ROOT / "README.md").read_text(), re.M)
    assert sorted(name for name, _ in rows) == sorted(FORMATS)
    copy_examples(tmp_path)
    monkeypatch.chdir(tmp_path)
    for name, cmd in rows:
        argv = shlex.split(cmd.replace("OUT.csv", f"{name}.out.csv"))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert main(argv[1:]) == 0, (cmd, capsys.readouterr().err)
        if argv[1] == "convert":
            assert len(Responses.read(f"{name}.out.csv").llms) == 2, cmd

