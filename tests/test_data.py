import subprocess
import sys
import warnings

import numpy as np
import pandas as pd
import pytest

from mtlirt.cli import main
from mtlirt.data.responses import Responses
from mtlirt.data.validate import DataWarning
from mtlirt.errors import InputError


def table():
    return pd.DataFrame(
        {
            "llm": ["m1", "m1", "m1", "m2", "m2", "m3", "m3", "m3"],
            "item": ["b1", "a1", "a2", "a1", "b1", "a2", "b1", "a1"],
            "domain": ["beta", "alpha", "alpha", "alpha", "beta", "alpha", "beta", "alpha"],
            "correct": [1, 0, 1, 1, 0, 1, 1, 0],
        }
    )


def test_build_groups_items_by_domain_and_keeps_values():
    r = Responses.from_frame(table())
    assert list(r.domains) == ["alpha", "beta"]
    assert list(r.items) == ["a1", "a2", "b1"]
    assert list(r.llms) == ["m1", "m2", "m3"]
    assert r.domain_slices == [slice(0, 2), slice(2, 3)]
    assert r.correct.dtype == np.int8 and r.observed.dtype == bool
    np.testing.assert_array_equal(r.correct, [[0, 1, 1], [1, 0, 0], [0, 1, 1]])
    np.testing.assert_array_equal(r.observed, [[1, 1, 1], [1, 0, 1], [1, 1, 1]])
    assert r.n_responses == 8 and not r.complete and r.mask is r.observed
    back = r.to_frame()
    merged = back.astype({"llm": str, "item": str, "domain": str}).merge(table(), on=["llm", "item"])
    assert len(merged) == 8 and (merged["correct_x"] == merged["correct_y"]).all()
    assert (merged["domain_x"] == merged["domain_y"]).all()


def test_xarray_view_has_named_dims_and_domain_coord():
    r = Responses.from_frame(table())
    da = r.to_xarray()
    assert da.dims == ("llm", "item")
    assert list(da["domain"].values) == ["alpha", "alpha", "beta"]
    assert np.isnan(da.sel(llm="m2", item="a2").item())
    assert da.sel(llm="m1", item="b1").item() == 1


def test_summary_counts_and_accuracy():
    s = Responses.from_frame(table()).summary()
    assert s.n_llms == 3 and s.n_items == 3 and s.n_domains == 2 and s.n_responses == 8
    assert s.domains.loc["alpha", "items"] == 2 and s.domains.loc["alpha", "responses"] == 5
    assert s.accuracy.loc["m2", "alpha"] == 1.0 and s.accuracy.loc["m1", "alpha"] == 0.5
    assert s.observed_share == pytest.approx(8 / 9)
    assert "3 LLMs x 3 items in 2 domains" in str(s)


@pytest.mark.parametrize("ext", ["csv", "csv.gz", "parquet"])
def test_read_formats(tmp_path, ext):
    path = tmp_path / f"t.{ext}"
    df = table()
    if ext == "parquet":
        df.to_parquet(path)
    else:
        df.to_csv(path, index=False)
    r = Responses.read(path)
    np.testing.assert_array_equal(r.correct, Responses.from_frame(table()).correct)


def test_missing_columns():
    with pytest.raises(InputError, match="missing column correct"):
        Responses.from_frame(table().drop(columns="correct"))


def test_unknown_columns_rejected_or_ignored():
    df = table().assign(score=0.3)
    with pytest.raises(InputError, match="unknown column score"):
        Responses.from_frame(df)
    assert Responses.from_frame(df, ignore_columns=["score"]).n_responses == 8


def test_domain_column_option():
    df = table().rename(columns={"domain": "subject"})
    r = Responses.from_frame(df, domain_column="subject")
    assert list(r.domains) == ["alpha", "beta"]


def test_non_binary_correct_names_rows():
    df = table()
    df.loc[3, "correct"] = 2
    with pytest.raises(InputError, match=r"row 4 holds 2"):
        Responses.from_frame(df)
    df = table().astype({"correct": object})
    df.loc[5, "correct"] = "yes"
    with pytest.raises(InputError, match=r"row 6 holds 'yes'"):
        Responses.from_frame(df)


def test_empty_correct_names_rows():
    df = table().astype({"correct": float})
    df.loc[[1, 6], "correct"] = np.nan
    with pytest.raises(InputError, match=r"missing correct in rows 2, 7"):
        Responses.from_frame(df)


def test_item_in_two_domains():
    df = table()
    df.loc[3, "domain"] = "beta"
    with pytest.raises(InputError, match=r"'a1' \(alpha, beta\)"):
        Responses.from_frame(df)


def test_conflicting_duplicates_name_pair_and_rows():
    df = pd.concat([table(), table().iloc[[1]].assign(correct=1)], ignore_index=True)
    with pytest.raises(InputError, match=r"conflicting duplicate.*\('m1', 'a1'\).*rows 2, 9"):
        Responses.from_frame(df)


def test_identical_duplicates_warn_and_keep_one():
    df = pd.concat([table(), table().iloc[[1, 2]]], ignore_index=True)
    with pytest.warns(DataWarning, match="2 identical duplicate rows"):
        r = Responses.from_frame(df)
    assert r.n_responses == 8


def test_empty_table():
    with pytest.raises(InputError, match="no rows"):
        Responses.from_frame(table().iloc[:0])


def test_empty_labels():
    df = table()
    df.loc[2, "llm"] = None
    with pytest.raises(InputError, match="empty llm in row 3"):
        Responses.from_frame(df)


def test_empty_domain():
    with pytest.raises(InputError, match="empty domain with no responses: gamma"):
        Responses.from_frame(table(), domains=["alpha", "beta", "gamma"])


def test_unreadable_files(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        Responses.read(tmp_path / "nope.csv")
    bad = tmp_path / "bad.parquet"
    bad.write_text("not parquet")
    with pytest.raises(InputError, match="cannot read"):
        Responses.read(bad)
    gz = tmp_path / "bad.csv.gz"
    gz.write_bytes(b"not gzip at all")
    with pytest.raises(InputError, match="cannot read"):
        Responses.read(gz)
    with pytest.raises(InputError, match="unknown file type"):
        Responses.read(tmp_path / "x.xlsx")


def test_degenerate_data_warns_and_is_kept():
    df = pd.DataFrame(
        {"llm": ["a", "a", "b", "b"], "item": ["i", "j", "i", "j"], "domain": "d", "correct": [1, 1, 0, 1]}
    )
    with pytest.warns(DataWarning, match="1 constant items.*1 LLMs with every answer correct"):
        r = Responses.from_frame(df)
    constant, perfect, zero = r.degenerate()
    assert list(constant.index) == ["j"] and perfect == ["a"] and zero == []


def test_from_wide_matches_long():
    m = pd.DataFrame({"a1": [0, 1, 0], "a2": [1, np.nan, 1], "b1": [1, 0, 1]}, index=["m1", "m2", "m3"])
    r = Responses.from_wide(m, {"a1": "alpha", "a2": "alpha", "b1": "beta"})
    ref = Responses.from_frame(table())
    np.testing.assert_array_equal(r.correct, ref.correct)
    np.testing.assert_array_equal(r.observed, ref.observed)
    with pytest.raises(InputError, match="without a domain: 'b1'"):
        Responses.from_wide(m, {"a1": "alpha", "a2": "alpha"})


def test_holdout_and_subset():
    r = Responses.from_frame(table())
    train, held = r.holdout(0.5, seed=1)
    assert not (train.observed & held).any()
    assert (train.observed | held).sum() == r.n_responses
    train2, held2 = r.holdout(0.5, seed=1)
    np.testing.assert_array_equal(held, held2)
    sub = r.subset(items=["b1"])
    assert list(sub.domains) == ["beta"] and sub.shape == (3, 1)


def _cli(args, capsys):
    rc = main(args)
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda d: d.drop(columns="item"), "missing column item"),
        (lambda d: d.assign(correct=d["correct"].replace(0, 3)), "correct must be 0 or 1"),
        (lambda d: d.assign(extra=1), "unknown column extra"),
        (lambda d: d.assign(domain=["x"] + list(d["domain"][1:])), "more than one domain"),
        (lambda d: pd.concat([d, d.iloc[[0]].assign(correct=0)]), "conflicting duplicate"),
        (lambda d: d.iloc[:0], "no rows"),
        (lambda d: d.assign(correct=d["correct"].astype(float).where(d.index != 2)), "missing correct in row 3"),
    ],
)
def test_cli_validate_bad_input_one_line_no_traceback(tmp_path, capsys, mutate, message):
    path = tmp_path / "t.csv"
    mutate(table()).to_csv(path, index=False)
    rc, out, err = _cli(["validate", str(path)], capsys)
    assert rc == 2
    lines = [line for line in err.splitlines() if line.startswith("mtlirt: error")]
    assert len(lines) == 1 and message in lines[0]
    assert "Traceback" not in err


def test_cli_validate_prints_summary(tmp_path, capsys):
    path = tmp_path / "t.parquet"
    table().to_parquet(path)
    rc, out, err = _cli(["validate", str(path)], capsys)
    assert rc == 0 and "3 LLMs x 3 items in 2 domains" in out


def test_cli_as_a_process_has_no_traceback(tmp_path):
    path = tmp_path / "t.csv"
    table().assign(correct=5).to_csv(path, index=False)
    proc = subprocess.run([sys.executable, "-m", "mtlirt.cli", "validate", str(path)], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("mtlirt: error: correct must be 0 or 1")
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_real_data_reads(shared_data):
    r = Responses.read(shared_data / "mmlu_pro" / "responses.csv.gz", ignore_columns=["subject"])
    assert r.n_llms == 29 and r.n_domains == 14 and r.n_items == 12032
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataWarning)
        s = Responses.read(shared_data / "mmlu_pro" / "responses.csv.gz", domain_column="subject",
                           drop_unassigned=True)
    assert s.n_domains == 56 and s.n_items == 6810


def _long(seed=0):
    """A shuffled long table with unsorted names, missing cells and five domains."""
    rng = np.random.default_rng(seed)
    items = [f"q{rng.integers(1000)}_{i}" for i in range(23)]
    domain = {it: rng.choice(["zeta", "alpha", "Beta", "beta", "ä"]) for it in items}
    rows = [(f"m{rng.integers(1000)}_{i}", it, domain[it], int(rng.random() < 0.6))
            for i in range(37) for it in items if rng.random() < 0.8]
    return pd.DataFrame([rows[i] for i in rng.permutation(len(rows))], columns=["llm", "item", "domain", "correct"])


def _write(df, path):
    if path.name.endswith(".parquet"):
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pandas(df, preserve_index=False), path, row_group_size=50)
    else:
        df.to_csv(path, index=False, sep="\t" if ".tsv" in path.name else ",")
    return path


def _same(a, b):
    assert list(a.llms) == list(b.llms) and list(a.items) == list(b.items) and list(a.domains) == list(b.domains)
    np.testing.assert_array_equal(a.item_domain, b.item_domain)
    np.testing.assert_array_equal(a.correct, b.correct)
    np.testing.assert_array_equal(a.observed, b.observed)


@pytest.mark.parametrize("name,change", [
    ("t.csv", None), ("t.csv.gz", None), ("t.tsv", None), ("t.parquet", None),
    ("cat.parquet", lambda d: d.astype({"llm": "category", "item": "category", "domain": "category"})),
    ("int.parquet", lambda d: d.assign(item=d["item"].str.replace(r"\D", "", regex=True).astype(int))),
    ("int.csv", lambda d: d.assign(item=d["item"].str.replace(r"\D", "", regex=True).astype(int))),
    ("bool.parquet", lambda d: d.assign(correct=d["correct"].astype(bool))),
    ("text.csv", lambda d: d.assign(correct=d["correct"].map({0: "false", 1: "TRUE"}))),
])
def test_read_in_batches_is_the_frame_path(tmp_path, monkeypatch, name, change):
    """A valid table is read in batches of rows (here 41; Parquet row groups of 50) straight into the
    matrix, never as a whole DataFrame, with the DataFrame path's LLMs, items, domains and answers."""
    import mtlirt.data.responses as responses
    from mtlirt.data import tables

    df = _long() if change is None else change(_long())
    path = _write(df, tmp_path / name)
    expected = Responses.from_frame(tables.read_table(path))
    monkeypatch.setattr(tables, "BATCH_ROWS", 41)
    monkeypatch.setattr(responses, "read_table", lambda *a, **k: pytest.fail("read as a DataFrame"))
    _same(Responses.read(path), expected)


def test_read_in_batches_duplicates_and_rows_without_a_domain(tmp_path, monkeypatch):
    """Across batches: identical duplicates are counted and kept once, rows without a domain dropped
    (``drop_unassigned``), a conflicting duplicate gets the DataFrame path's message."""
    from mtlirt.data import tables

    monkeypatch.setattr(tables, "BATCH_ROWS", 41)
    df = _long()
    dup = pd.concat([df, df.iloc[:30]], ignore_index=True)
    path = _write(dup, tmp_path / "dup.parquet")
    with pytest.warns(DataWarning, match="30 identical duplicate rows"):
        r = Responses.read(path)
    with pytest.warns(DataWarning, match="30 identical duplicate rows"):
        _same(r, Responses.from_frame(tables.read_table(path)))
    nodom = df.astype({"domain": object})
    nodom.loc[[7, 100], "domain"] = None
    path = _write(nodom, tmp_path / "nodom.csv")
    with pytest.warns(DataWarning, match="dropped 2 rows without a domain"):
        r = Responses.read(path, drop_unassigned=True)
    _same(r, Responses.from_frame(tables.read_table(path).dropna()))
    late = pd.concat([df, df.iloc[[3]].assign(correct=1 - df["correct"].iloc[3])], ignore_index=True)
    message = rf"conflicting duplicate responses for 1 \(llm, item\) pair.*rows 4, {len(df) + 1}"
    with pytest.raises(InputError, match=message):
        Responses.read(_write(late, tmp_path / "late.csv"))


def test_from_arrays_builds_and_checks_a_matrix():
    """Responses.from_arrays: contiguous domain blocks, unobserved cells 0 whatever they held, default
    names; answers other than 0/1, domains that skip columns or names that repeat are named errors."""
    y = np.array([[1, 0, np.nan], [0, 1, 1]])
    obs = ~np.isnan(y)
    r = Responses.from_arrays(y, obs, [slice(0, 2), slice(2, 3)], domains=["x", "y"])
    assert list(r.llms) == ["llm0", "llm1"] and list(r.items) == ["item0", "item1", "item2"]
    assert list(r.domains) == ["x", "y"] and r.domain_slices == [slice(0, 2), slice(2, 3)]
    np.testing.assert_array_equal(r.correct, [[1, 0, 0], [0, 1, 1]])
    assert r.n_responses == 5 and not r.complete
    assert Responses.from_arrays(np.ones((2, 3))).complete
    with pytest.raises(InputError, match="only 0 and 1"):
        Responses.from_arrays(np.full((2, 2), 2))
    with pytest.raises(InputError, match="not contiguous"):
        Responses.from_arrays(np.ones((2, 3)), None, [slice(0, 1), slice(2, 3)])
    with pytest.raises(InputError, match="cover 2 columns"):
        Responses.from_arrays(np.ones((2, 3)), None, [slice(0, 2)])
    with pytest.raises(InputError, match="llms names are not unique"):
        Responses.from_arrays(np.ones((2, 3)), llms=["a", "a"])


def test_held_out_cells_draws_observed_cells_only():
    """The one split of the cells: exactly n distinct observed cells in row-major order (from the list of
    observed cells or by rejection, whichever n calls for), or each observed cell with probability share."""
    from mtlirt.data.cells import held_out_cells

    rng = np.random.default_rng(0)
    observed = rng.random((200, 50)) < 0.6
    for n in (40, 5000):  # rejection from uniform draws; a large share: from the observed cells' list
        rows, cols = held_out_cells(observed, observed.shape, np.random.default_rng(1), n=n)
        flat = rows * 50 + cols
        assert len(flat) == n and (np.diff(flat) > 0).all() and observed[rows, cols].all()
    rows, cols = held_out_cells(None, (30, 20), np.random.default_rng(1), n=10**6)
    assert len(rows) == 600  # at most every cell
    rows, cols = held_out_cells(observed, observed.shape, np.random.default_rng(2), share=0.25)
    assert observed[rows, cols].all() and abs(len(rows) / observed.sum() - 0.25) < 0.03
    with pytest.raises(ValueError, match="share or n"):
        held_out_cells(observed, observed.shape, rng, share=0.1, n=5)


def test_with_answers_keeps_the_layout():
    """Responses.with_answers (a bootstrap replicate): other answers on the same LLMs, items and domains, taken
    as given; without a mask every cell is observed, sharing a complete leaderboard's own mask."""
    y = np.array([[1, 0, np.nan], [0, 1, 1]])
    obs = ~np.isnan(y)
    r = Responses.from_arrays(y, obs, [slice(0, 2), slice(2, 3)], domains=["x", "y"])
    new = np.array([[0, 1, 1], [1, 1, 0]], dtype=np.int8)
    rep = r.with_answers(new, r.observed)
    assert rep.llms.equals(r.llms) and rep.items.equals(r.items) and rep.domains.equals(r.domains)
    assert rep.domain_slices == r.domain_slices
    np.testing.assert_array_equal(rep.correct, new)  # the unobserved cell's 1 kept: not validated again
    np.testing.assert_array_equal(rep.mask, obs)
    assert r.with_answers(new).mask is None and r.with_answers(new).n_responses == 6
    full = Responses.from_arrays(np.ones((2, 3)))
    assert full.with_answers(new).observed is full.observed and full.with_answers(new).mask is None


@pytest.mark.parametrize("name", ["t.csv", "t.csv.gz"])
def test_write_csv_reads_back_as_pandas_writes(tmp_path, name):
    """The fast CSV writer: the same columns, dtypes and values back as pandas' own writer gives, whole
    floats still floats, booleans as True/False, text that needs quotes quoted (pandas writes it)."""
    from mtlirt.data.tables import write_csv

    rng = np.random.default_rng(0)
    frames = [
        pd.DataFrame({"llm": [f"m{i}" for i in range(50)],
                      "score": rng.normal(size=50) * 10.0 ** rng.integers(-9, 9, 50),
                      "whole": np.arange(50.0), "sd": np.where(np.arange(50) % 3, 0.5, np.nan),
                      "flag": np.arange(50) % 2 == 0, "n": np.arange(50),
                      "domain": pd.Categorical(["a b", "c"] * 25)}, index=np.arange(50) + 7),
        pd.DataFrame({"item": ['say "hi"', "x,y", "z"], "v": [1.0, np.nan, 3.5]}),
        pd.DataFrame({"only": [1.0, np.nan, 2.0]}),
    ]
    for df in frames:
        write_csv(df, tmp_path / name, gzip=name.endswith(".gz"))
        df.to_csv(tmp_path / ("pandas_" + name), index=False)
        ours, theirs = pd.read_csv(tmp_path / name), pd.read_csv(tmp_path / ("pandas_" + name))
        pd.testing.assert_frame_equal(ours, theirs, check_exact=True)
    write_csv(frames[0].iloc[:2], tmp_path / "two.csv")
    assert (tmp_path / "two.csv").read_text().splitlines() == frames[0].iloc[:2].to_csv(index=False).splitlines()
