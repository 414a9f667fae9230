"""The bad-input corpus: every misuse of the command line is refused in one line and changes no file.

Each case runs in a fresh copy of a small working folder (tables, fit folders, a score and a truth folder,
damaged fits) with relative paths; :func:`_corpus.assert_refused` checks the exit status, the one error line
and that every file and folder of the working folder is as it was, no temporary left. After the cases:
what ``--force`` may replace and the modes it leaves, a write failing half-way, the data fingerprint, and a
property-based test that mutates a valid table and feeds it to ``validate`` and a fit.
"""

import errno
import json
import os
import shutil
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from _corpus import Case, assert_refused, error_line, run
from mtlirt.cli import main
from mtlirt.data.responses import Responses


def _rows(seed=0):
    """A tiny table, 8 LLMs x 9 items in 3 domains, every item with both answers."""
    rng = np.random.default_rng(seed)
    y = (rng.random((8, 9)) < 0.6).astype(int)
    y[0], y[1] = 1, 0
    return [(f"m{i}", f"q{j}", f"d{j // 3}", y[i, j]) for i in range(8) for j in range(9)]


COLUMNS = ["llm", "item", "domain", "correct"]


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """The working folder every case starts from."""
    root = tmp_path_factory.mktemp("corpus")
    rows = _rows()
    pd.DataFrame(rows, columns=COLUMNS).to_csv(root / "t.csv", index=False)
    other = [(llm if llm == "m0" else "x" + llm, *rest) for llm, *rest in rows]
    pd.DataFrame(other, columns=COLUMNS).to_csv(root / "other.csv", index=False)
    renamed = [(llm, item, "x" + dom, y) for llm, item, dom, y in rows]
    pd.DataFrame(renamed, columns=COLUMNS).to_csv(root / "sdom.csv", index=False)
    pd.DataFrame({"llm": ["a", "b"], "alg/q1": [1, 0], "bio/q1": [1, 1]}).to_csv(root / "wide.csv", index=False)
    with _in(root), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for argv in (["fit", "t.csv", "--method", "accuracy", "--out", "fa"],
                     ["fit", "other.csv", "--method", "accuracy", "--out", "fb"],
                     ["fit", "t.csv", "--method", "stl", "--out", "fs"],
                     ["score", "fs", "t.csv", "--out", "scores"],
                     ["simulate", "--n-llms", "5", "--domain-sizes", "2,2", "--out", "sim.csv", "--truth", "truth"]):
            assert main(argv) == 0, argv
    for name, damage in (("ftrunc", "truncate"), ("fjunk", "junk"), ("fbadjson", "json"), ("ffor", "foreign"),
                         ("fc", "input")):
        shutil.copytree(root / "fa", root / name)
        nc = root / name / "posterior.nc"
        if damage == "truncate":
            nc.write_bytes(nc.read_bytes()[:3000])
        elif damage == "junk":
            nc.write_text("not a netCDF file\n")
        elif damage == "json":
            (root / name / "fit.json").write_text("{not json")
        elif damage == "foreign":
            (root / name / "notes.txt").write_text("mine\n")
        else:
            shutil.copy(root / "t.csv", root / name / "t.csv")
    (root / "notes").mkdir()
    (root / "notes" / "readme.txt").write_text("mine\n")
    (root / "empty").mkdir()
    (root / "old.html").write_text("<p>an earlier report</p>\n")
    return root


class _in:
    """Run a block with ``path`` as the working folder."""

    def __init__(self, path):
        self.path, self.old = path, None

    def __enter__(self):
        self.old = os.getcwd()
        os.chdir(self.path)

    def __exit__(self, *exc):
        os.chdir(self.old)


@pytest.fixture
def work(template, tmp_path, monkeypatch):
    """A fresh copy of the template, the working folder of the test."""
    root = tmp_path / "w"
    shutil.copytree(template, root)
    monkeypatch.chdir(root)
    return root


NEW = "new"  # a path that does not exist in the working folder

MISUSES = {
    # options that do not fit together or lie outside their range
    "rank 0": Case(["fit", "t.csv", "--rank", "0", "--out", NEW], r"rank \(--rank\) must be an integer of at least 1"),
    "rank above the domains": Case(["fit", "t.csv", "--rank", "99", "--out", NEW], "exceeds the number of domains"),
    "one bootstrap replicate": Case(["fit", "t.csv", "--bootstrap", "1", "--out", NEW], "--bootstrap"),
    "interval above 1": Case(["fit", "t.csv", "--interval", "1.5", "--out", NEW], "--interval"),
    "items without bayes": Case(["fit", "t.csv", "--items", "fixed", "--out", NEW],
                                r"error: items \(--items\) applies to method 'bayes' only, not 'mtl'$"),
    "unknown model": Case(["fit", "t.csv", "--method", "bayes", "--algorithm", "map", "--model", "no-such",
                           "--out", NEW], "no-such"),
    "llm side without bayes": Case(["fit", "t.csv", "--llm-side", "integrated", "--thin", "2", "--out", NEW],
                                   r"llm_side \(--llm-side\), thin \(--thin\) apply to method 'bayes' only"),
    "imh without the integrated route": Case(["fit", "t.csv", "--method", "bayes", "--items", "fixed",
                                              "--llm-side", "sampled", "--sampler", "imh", "--out", NEW], "imh"),
    "missing file": Case(["fit", "absent.csv", "--out", NEW], "no such file"),
    "compare one folder": Case(["compare", "fa"], "two or more"),
    "compare without 2 shared LLMs": Case(["compare", "fa", "fb", "--allow-different-data"], "share 1 LLM"),
    "report of a non-fit folder": Case(["report", "notes", "--out", "new.html"], "not a fit folder"),
    # outputs that would destroy something
    "fit --out its input": Case(["fit", "t.csv", "--method", "accuracy", "--out", "t.csv"], "t.csv is an input"),
    "fit --out its input, forced": Case(["fit", "t.csv", "--method", "accuracy", "--out", "t.csv", "--force"],
                                        "t.csv is an input"),
    "fit --out another file, forced": Case(["fit", "t.csv", "--method", "accuracy", "--out", "other.csv",
                                            "--force"], "other.csv is an existing file, not a fit folder"),
    "fit --out a fit folder": Case(["fit", "t.csv", "--method", "accuracy", "--out", "fa"],
                                   "fa is an existing fit folder; pass --force"),
    "fit --out a folder mtlirt did not write, forced": Case(
        ["fit", "t.csv", "--method", "accuracy", "--out", "notes", "--force"], "did not write as a fit folder"),
    "fit --out a fit folder holding other files, forced": Case(
        ["fit", "t.csv", "--method", "accuracy", "--out", "ffor", "--force"], "holds notes.txt"),
    "fit --out the folder holding its input, forced": Case(
        ["fit", "fc/t.csv", "--method", "accuracy", "--out", "fc", "--force"], "would delete the input fc/t.csv"),
    "fit --out the working folder": Case(["fit", "t.csv", "--method", "accuracy", "--out", "."],
                                         "replacing . would delete the input t.csv"),
    "fit --out under a file": Case(["fit", "t.csv", "--method", "accuracy", "--out", "t.csv/fit"],
                                   "t.csv is a file, not a folder"),
    "report --out a folder": Case(["report", "fa", "--out", "notes"], "notes is a folder"),
    "report --out an empty folder": Case(["report", "fa", "--out", "empty", "--force"], "empty is a folder"),
    "report --out an existing file": Case(["report", "fa", "--out", "old.html"], "old.html exists; pass --force"),
    "report --out its data, forced": Case(["report", "fa", "--data", "t.csv", "--out", "t.csv", "--force"],
                                          "t.csv is an input"),
    "report --out a file of its fit, forced": Case(["report", "fa", "--out", "fa/fit.json", "--force"],
                                                   "is a file of the input fa"),
    "score --out a fit folder": Case(["score", "fs", "t.csv", "--out", "fa"], "no score.json"),
    "score --out its table, forced": Case(["score", "fs", "t.csv", "--out", "t.csv", "--force"], "is an input"),
    "score --out a score folder": Case(["score", "fs", "t.csv", "--out", "scores"], "score folder; pass --force"),
    "adapt --out its fit, forced": Case(["adapt", "fs", "--responses", "t.csv", "--budget", "3", "--out", "fs",
                                         "--force"], "fs is an input"),
    "adapt --out a score folder, forced": Case(["adapt", "fs", "--responses", "t.csv", "--budget", "3",
                                                "--out", "scores", "--force"], "no adapt.json"),
    "convert --out its source, forced": Case(["convert", "wide", "wide.csv", "--out", "wide.csv", "--force"],
                                             "wide.csv is an input"),
    "convert --out an existing table": Case(["convert", "wide", "wide.csv", "--out", "t.csv"],
                                            "t.csv exists; pass --force"),
    "simulate --out an existing table": Case(["simulate", "--n-llms", "5", "--domain-sizes", "2,2", "--out",
                                              "t.csv"], "t.csv exists; pass --force"),
    "simulate --truth a file": Case(["simulate", "--n-llms", "5", "--domain-sizes", "2,2", "--out", "new.csv",
                                     "--truth", "t.csv", "--force"], "t.csv is an existing file, not a truth folder"),
    "simulate --truth a truth folder": Case(["simulate", "--n-llms", "5", "--domain-sizes", "2,2", "--out",
                                             "new.csv", "--truth", "truth"], "truth folder; pass --force"),
    "simulate --out inside --truth": Case(["simulate", "--n-llms", "5", "--domain-sizes", "2,2", "--out",
                                           "tr/x.csv", "--truth", "tr"], "inside the --truth folder"),
    "demo --out a folder mtlirt did not write, forced": Case(["demo", "--out", "notes", "--force"],
                                                             "did not write as a demo folder"),
    "demo --out a file": Case(["demo", "--out", "t.csv"], "existing file, not a demo folder"),
    "demo --out the working folder": Case(["demo", "--out", "."], ". is the working folder or holds it"),
    # inputs that do not belong together
    "report --data of another table": Case(["report", "fa", "--data", "other.csv", "--out", "new.html"],
                                           "other.csv is not the table fa was fitted to"),
    "report of fits of different tables": Case(["report", "fa", "fb", "--out", "new.html"],
                                               "fa and fb were fitted to different tables"),
    "compare fits of different tables": Case(["compare", "fa", "fb"],
                                             "fa and fb were fitted to different tables.*--allow-different-data"),
    "score a table of other domains": Case(["score", "fs", "sdom.csv", "--out", NEW],
                                           r"^(?!.*np\.str_).*'q0' \('xd0', the fit: 'd0'\).*no domain 'xd0'"),
    # damaged fits
    "report a truncated posterior": Case(["report", "ftrunc", "--out", "new.html"],
                                         "cannot read ftrunc/posterior.nc: .*truncated"),
    "report a posterior that is not netCDF": Case(["report", "fjunk", "--out", "new.html"],
                                                  "cannot read fjunk/posterior.nc"),
    "compare a truncated posterior": Case(["compare", "fa", "ftrunc"], "cannot read ftrunc/posterior.nc"),
    "compare a broken fit.json": Case(["compare", "fa", "fbadjson"], "cannot read fbadjson/fit.json"),
    "score a truncated posterior": Case(["score", "ftrunc", "t.csv", "--out", NEW], "cannot read"),
    "adapt a posterior that is not netCDF": Case(["adapt", "fjunk", "--responses", "t.csv", "--budget", "3",
                                                  "--out", NEW], "cannot read fjunk/posterior.nc"),
}


@pytest.mark.parametrize("case", MISUSES.values(), ids=MISUSES.keys())
def test_misuse_is_one_line_exit_2_and_changes_nothing(case, work, capsys):
    assert_refused(case, work, capsys)


def test_the_api_refuses_what_the_command_line_refuses(work, capsys):
    """The checks behind the command line's refusals live in the API: a notebook gets the same InputError,
    the command line prints its message."""
    from mtlirt import InputError, compare, read_fit, simulate, write_report

    api = {}
    with pytest.raises(InputError) as e:
        compare(["fa"])
    api["compare one folder"] = (["compare", "fa"], str(e.value))
    with pytest.raises(InputError) as e:
        simulate(5, domain_sizes=[2, 2], preset="mmlu", seed=0)
    api["simulate preset and sizes"] = (["simulate", "--n-llms", "5", "--preset", "mmlu", "--domain-sizes", "2,2",
                                         "--out", "new.csv"], str(e.value))
    with pytest.raises(InputError) as e:
        write_report([read_fit("fa")], "new.html", top_llms=0)
    api["report top llms 0"] = (["report", "fa", "--top-llms", "0", "--out", "new.html"], str(e.value))
    for name, call, argv in (
            ("report interval above 1", lambda: write_report([read_fit("fa")], "new.html", interval=1.5),
             ["report", "fa", "--interval", "1.5", "--out", "new.html"]),
            ("compare interval above 1", lambda: compare(["fa", "fs"], interval=1.5),
             ["compare", "fa", "fs", "--interval", "1.5"]),
            ("fit interval above 1", lambda: read_fit("fa").domain_scores(1.5),
             ["fit", "t.csv", "--interval", "1.5", "--out", NEW])):
        with pytest.raises(InputError) as e:
            call()
        api[name] = (argv, str(e.value))
        assert str(e.value) == "interval (--interval) must be a probability in (0, 1), got 1.5"
    assert api["compare one folder"][1] == "compare needs two or more fits (fit folders), got 1"
    assert "not both" in api["simulate preset and sizes"][1] and "at least 1, got 0" in api["report top llms 0"][1]
    for argv, message in api.values():
        line = assert_refused(Case(argv, None), work, capsys)
        assert line == f"mtlirt: error: {message}"


def test_corpus_catches_a_changed_file(work, capsys):
    """The check itself: a command that writes is not a clean refusal."""
    with pytest.raises(AssertionError):
        assert_refused(Case(["fit", "t.csv", "--method", "accuracy", "--out", NEW], status=0), work, capsys)


# ------------------------------------------------------------------ --force, modes, failures
def _modes(folder: Path) -> set[str]:
    return {oct(folder.stat().st_mode & 0o777)} | {oct(p.stat().st_mode & 0o777) for p in folder.iterdir()}


@pytest.mark.parametrize("umask, folder_mode, file_mode", [(0o022, 0o755, 0o644), (0o077, 0o700, 0o600)])
def test_force_replaces_a_fit_folder_with_the_users_umask(work, capsys, umask, folder_mode, file_mode):
    old = os.umask(umask)
    try:
        rc, _, err = run(["fit", "t.csv", "--method", "stl", "--out", "fa", "--force"], capsys)
        assert rc == 0, err
        rc, _, err = run(["fit", "t.csv", "--method", "accuracy", "--out", "deep/er/fit"], capsys)
        assert rc == 0, err
    finally:
        os.umask(old)
    assert json.loads((work / "fa" / "fit.json").read_text())["method"] == "stl"
    for folder in (work / "fa", work / "deep", work / "deep" / "er" / "fit"):
        assert folder.stat().st_mode & 0o777 == folder_mode, folder
    assert {p.stat().st_mode & 0o777 for p in (work / "fa").iterdir()} == {file_mode}
    assert not [p for p in work.rglob(".*")], "a temporary was left behind"


def test_force_replaces_a_table_and_a_report_file(work, capsys):
    before = (work / "old.html").read_bytes()
    rc, _, err = run(["convert", "wide", "wide.csv", "--out", "old.html.csv", "--force"], capsys)
    assert rc == 0, err
    rc, _, err = run(["simulate", "--n-llms", "6", "--domain-sizes", "2,3", "--out", "sim.csv", "--truth", "truth",
                      "--force"], capsys)
    assert rc == 0, err
    assert Responses.read(work / "sim.csv").n_llms == 6
    assert len(pd.read_csv(work / "truth" / "overall.csv")) == 6
    assert (work / "old.html").read_bytes() == before
    assert not [p for p in work.rglob(".*")]


def test_a_write_failing_half_way_leaves_the_old_fit_and_no_temporary(work, capsys, monkeypatch):
    """A full disk while writing posterior.nc over an existing fit: one line, exit 2, every file as it was."""
    from mtlirt.results.estimate import Estimate

    def full_disk(self, path):
        Path(path).write_bytes(b"\x89HDF partial")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    monkeypatch.setattr(Estimate, "save", full_disk)
    line = assert_refused(Case(["fit", "t.csv", "--method", "stl", "--out", "fa", "--force"],
                               "cannot write fa: No space left on device"), work, capsys)
    assert ".tmp" not in line


def test_a_table_write_failing_half_way_leaves_nothing(work, capsys, monkeypatch):
    import mtlirt.data.tables

    def full_disk(df, path, *args, **kwargs):
        Path(path).write_text("llm,item\n")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(mtlirt.data.tables, "write_csv", full_disk)
    assert_refused(Case(["convert", "wide", "wide.csv", "--out", "sub/long.csv"],
                        "cannot write sub/long.csv: No space left"), work, capsys)


# ------------------------------------------------------------------ fingerprints
def test_fingerprint_is_the_content_not_the_file(tmp_path):
    rows = pd.DataFrame(_rows(), columns=COLUMNS)
    rows.to_csv(tmp_path / "a.csv", index=False)
    rows.sample(frac=1, random_state=1)[["correct", "domain", "item", "llm"]].to_parquet(tmp_path / "b.parquet")
    flipped = rows.copy()
    flipped.loc[5, "correct"] = 1 - flipped.loc[5, "correct"]
    flipped.to_csv(tmp_path / "c.csv", index=False)
    fewer = rows.drop(index=7)
    fewer.to_csv(tmp_path / "d.csv", index=False)
    prints = [Responses.read(tmp_path / n).fingerprint() for n in ("a.csv", "b.parquet", "c.csv", "d.csv")]
    assert prints[0] == prints[1] and len(set(prints)) == 3
    assert len(prints[0]) == 16 and int(prints[0], 16) >= 0


def test_fits_record_the_fingerprint_and_heldout_records_the_whole_table(work, capsys):
    fp = Responses.read(work / "t.csv").fingerprint()
    assert json.loads((work / "fa" / "fit.json").read_text())["data"]["fingerprint"] == fp
    rc, _, err = run(["fit", "t.csv", "--method", "accuracy", "--heldout", "0.2", "--out", "fh"], capsys)
    assert rc == 0, err
    data = json.loads((work / "fh" / "fit.json").read_text())["data"]
    assert data == {"fingerprint": fp, "llms": 8, "items": 9, "domains": 3, "responses": 72}
    from mtlirt.results.fitdir import read_fit

    assert read_fit(work / "fh").info["data"]["fingerprint"] == fp  # posterior.nc's info too


def test_compare_of_different_tables_on_request(work, capsys):
    """--allow-different-data compares the LLMs two tables share; the library refuses as the CLI does."""
    from mtlirt.errors import InputError
    from mtlirt.report.compare import compare

    rows = pd.DataFrame(_rows(), columns=COLUMNS)
    rows.loc[0, "correct"] = 0
    rows.to_csv(work / "t2.csv", index=False)
    assert run(["fit", "t2.csv", "--method", "accuracy", "--out", "f2"], capsys)[0] == 0
    rc, _, err = run(["compare", "fa", "f2"], capsys)
    assert rc == 2 and "different tables" in error_line(err)
    rc, out, err = run(["compare", "fa", "f2", "--allow-different-data"], capsys)
    assert rc == 0, err
    assert "n_llms" in out and " 8" in out
    with pytest.raises(InputError, match="allow_different_data=True"):
        compare([work / "fa", work / "f2"])
    assert compare([work / "fa", work / "f2"], allow_different_data=True)["n_llms"].iloc[0] == 8


def test_a_fit_without_a_fingerprint_is_accepted_with_a_warning(work, capsys):
    shutil.copytree(work / "fa", work / "fold")
    record = json.loads((work / "fold" / "fit.json").read_text())
    del record["data"]
    (work / "fold" / "fit.json").write_text(json.dumps(record))
    with warnings.catch_warnings():
        warnings.simplefilter("always")  # the CLI prints it
        rc, out, err = run(["compare", "fa", "fold"], capsys)
    assert rc == 0, err
    assert err.splitlines() == ["mtlirt: warning: fold: no fingerprint of the fitted table recorded (a fit of an older "
                                "mtlirt), so mtlirt cannot check that the inputs belong together"]
    assert "n_llms" in out


# ------------------------------------------------------------------ property-based
hypothesis = pytest.importorskip("hypothesis")
st = hypothesis.strategies

MUTATIONS = ("shuffle_rows", "permute_columns", "correct_as_text", "correct_as_float", "correct_as_bool",
             "nan_cells", "duplicate_rows", "conflicting_duplicates", "unicode_names", "extra_column",
             "drop_column", "header_only", "truncate", "latin1", "utf16", "bom", "tsv", "gzip", "parquet",
             "empty_file", "blank_names", "bad_correct")
NAMES = st.text(st.characters(blacklist_categories=("Cs",)), min_size=0, max_size=6)


def _mutated(draw_ops, names, cut) -> tuple[pd.DataFrame, dict]:
    df = pd.DataFrame(_rows(seed=3), columns=COLUMNS)
    how = {"ext": ".csv", "encoding": "utf-8", "truncate": None, "empty": False}
    for op in draw_ops:
        if op == "shuffle_rows":
            df = df.sample(frac=1, random_state=0).reset_index(drop=True)
        elif op == "permute_columns":
            df = df[list(reversed(df.columns))]
        elif op == "correct_as_text" and "correct" in df:
            df["correct"] = df["correct"].astype(str).replace({"0": "false", "1": "true"})
        elif op == "correct_as_float" and "correct" in df:
            df["correct"] = pd.to_numeric(df["correct"], errors="coerce").astype(float)
        elif op == "correct_as_bool" and "correct" in df:
            df["correct"] = pd.to_numeric(df["correct"], errors="coerce") == 1
        elif op == "nan_cells":
            col = df.columns[len(df.columns) // 2]
            df.loc[df.index[::7], col] = np.nan
        elif op == "duplicate_rows":
            df = pd.concat([df, df.head(4)], ignore_index=True)
        elif op == "conflicting_duplicates" and "correct" in df:
            dup = df.head(2).copy()
            dup["correct"] = dup["correct"].map(lambda v: 0 if v in (1, "true", True, 1.0) else 1)
            df = pd.concat([df, dup], ignore_index=True)
        elif op == "unicode_names" and "llm" in df:
            mapping = {old: new for old, new in zip(sorted(df["llm"].dropna().unique()), names)}
            df["llm"] = df["llm"].map(lambda v, m=mapping: m.get(v, v))
        elif op == "extra_column":
            df["score"] = 0.5
        elif op == "drop_column":
            df = df.drop(columns=df.columns[-1])
        elif op == "header_only":
            df = df.head(0)
        elif op == "truncate":
            how["truncate"] = cut
        elif op in ("latin1", "utf16"):
            how["encoding"] = {"latin1": "latin-1", "utf16": "utf-16"}[op]
        elif op == "bom":
            how["encoding"] = "utf-8-sig"
        elif op in ("tsv", "gzip", "parquet"):
            how["ext"] = {"tsv": ".tsv", "gzip": ".csv.gz", "parquet": ".parquet"}[op]
        elif op == "empty_file":
            how["empty"] = True
        elif op == "blank_names" and "item" in df:
            df.loc[df.index[:3], "item"] = "  "
        elif op == "bad_correct" and "correct" in df:
            df["correct"] = df["correct"].astype(object)
            df.loc[df.index[0], "correct"] = "maybe"
    return df, how


def _write(df: pd.DataFrame, how: dict, folder: Path) -> Path:
    path = folder / f"t{how['ext']}"
    if how["empty"]:
        path.write_bytes(b"")
        return path
    if how["ext"] == ".parquet":
        df.astype({c: str for c in df.columns if df[c].dtype == object}).to_parquet(path, index=False)
    else:
        sep = "\t" if how["ext"] == ".tsv" else ","
        try:
            df.to_csv(path, index=False, sep=sep, encoding=how["encoding"])
        except UnicodeEncodeError:  # a name latin-1 cannot hold
            df.to_csv(path, index=False, sep=sep, encoding="utf-8")
    if how["truncate"] is not None:
        data = path.read_bytes()
        path.write_bytes(data[: int(len(data) * how["truncate"])])
    return path


def _validate_and_fit(table: Path) -> None:
    """``validate`` then an accuracy fit of ``table``: exit 0 with a valid fit folder, or exit 2 with one clean
    error line and no output; never a traceback."""
    import contextlib
    import io

    from mtlirt.results.fitdir import FILES

    folder = table.parent
    with warnings.catch_warnings():
        warnings.simplefilter("always")  # printed as 'mtlirt: warning:' lines, not raised
        for argv in (["validate", str(table)], ["fit", str(table), "--method", "accuracy", "--out", str(folder / "f")]):
            err = io.StringIO()
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                rc = main(argv)
            assert rc in (0, 2), (argv, rc, err.getvalue())
            if rc == 2:
                error_line(err.getvalue())
                assert sorted(p.name for p in folder.iterdir()) == [table.name], "an output after an error"
                return
            assert all(line.startswith("mtlirt: warning: ") for line in err.getvalue().splitlines())
        r = Responses.read(table)
    record = json.loads((folder / "f" / "fit.json").read_text())
    assert record["data"] == {"fingerprint": r.fingerprint(), "llms": r.n_llms, "items": r.n_items,
                              "domains": r.n_domains, "responses": r.n_responses}
    overall = pd.read_csv(folder / "f" / "overall.csv", keep_default_na=False, dtype={"llm": str})
    assert sorted(overall["llm"]) == sorted(map(str, r.llms))
    assert sorted(p.name for p in (folder / "f").iterdir()) == sorted(FILES)


UNICODE = ["Ünï", "模型", "a,b", 'q"t', "x\ny", " sp ", "🙂", "ß"]


@pytest.mark.parametrize("op", MUTATIONS)
def test_each_mutation_gives_a_clean_error_or_a_valid_fit(op, tmp_path):
    df, how = _mutated([op], UNICODE, 0.5)
    _validate_and_fit(_write(df, how, tmp_path))


@hypothesis.settings(max_examples=15, deadline=None, derandomize=True, database=None,
                     suppress_health_check=[hypothesis.HealthCheck.too_slow])
@hypothesis.given(ops=st.lists(st.sampled_from(MUTATIONS), min_size=2, max_size=4, unique=True),
                  names=st.lists(NAMES, min_size=8, max_size=8, unique=True), cut=st.floats(0.05, 0.95))
def test_mutated_tables_give_a_clean_error_or_a_valid_fit(ops, names, cut):
    """Mutations combined, names drawn: as :func:`test_each_mutation_gives_a_clean_error_or_a_valid_fit`."""
    df, how = _mutated(ops, names, cut)
    with tempfile.TemporaryDirectory() as tmp:
        _validate_and_fit(_write(df, how, Path(tmp)))
