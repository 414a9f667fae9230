"""The input rules for a long results table.

Each rule raises :class:`~mtlirt.errors.InputError` with a message that names
the rows, columns or values at fault.  Rows are numbered from 1 for the first
data row (a CSV file's line number is the row number plus one, for the
header).  Rules for degenerate but valid data (identical duplicates, constant
items, LLMs with all or no answers correct, constant and thin domains) warn
instead, through :class:`DataWarning`; data in which no response varies
within any domain, where nothing can be measured, are an error.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..errors import InputError

#: How many offending rows or values a message lists before "and N more".
SHOW = 5

#: A domain answered by fewer LLMs than this is *thin*: its items are calibrated, its scale set and its
#: bootstrap world drawn on too few LLMs; its scores are less accurate (``benchmarks/bench_thin.py``;
#: docs/data.md "Degenerate and tiny data").
MIN_LLMS = 20
#: A domain whose LLMs gave it fewer responses than this (the median over the LLMs with responses in it) is
#: *thin* too: its scores explain at most about 60% of its trait's variance.
MIN_RESPONSES = 5


class DataWarning(UserWarning):
    """Valid but degenerate data, and what the package does about it."""


def _rows(index: np.ndarray) -> str:
    """Format 0-based row positions as 1-based data rows, a few and a count."""
    index = np.asarray(index)
    shown = ", ".join(str(int(i) + 1) for i in index[:SHOW])
    more = f" and {len(index) - SHOW} more" if len(index) > SHOW else ""
    return f"row{'s' if len(index) > 1 else ''} {shown}{more}"


def _hold(index) -> str:
    return "holds" if len(index) == 1 else "hold"


def _values(values) -> str:
    values = [v.item() if isinstance(v, np.generic) else v for v in values]
    shown = ", ".join(repr(v) for v in values[:SHOW])
    more = f" and {len(values) - SHOW} more" if len(values) > SHOW else ""
    return shown + more


def _values_plain(values) -> str:
    """A few names, unquoted, then "and N more"."""
    shown = ", ".join(str(v) for v in values[:SHOW])
    return shown + (f" and {len(values) - SHOW} more" if len(values) > SHOW else "")


def _wide_hint(df: pd.DataFrame) -> str:
    """When a table without ``item`` and ``correct`` has 0/1 columns after the first: how to convert it."""
    cols = [str(c) for c in df.columns]
    if "item" in cols or "correct" in cols or len(cols) < 3:
        return ""
    for c in list(df.columns[1:])[:50]:
        values = pd.to_numeric(df[c], errors="coerce") if not pd.api.types.is_bool_dtype(df[c]) else df[c]
        given = df[c].notna().to_numpy()
        if not given.any() or values[given].isna().any() or not values[given].isin([0, 1]).all():
            return ""
    return (
        "; this looks like a wide LLM x item matrix (one row per LLM, one 0/1 column per item): "
        "turn it into the long table with mtlirt convert wide FILE --out LONG.csv"
    )


def check_columns(
    df: pd.DataFrame,
    *,
    domain_column: str = "domain",
    ignore_columns: tuple[str, ...] | list[str] = (),
) -> pd.DataFrame:
    """Check the columns and return the table with exactly ``llm, item, domain, correct``.

    Parameters
    ----------
    df
        The table as read.
    domain_column
        The column holding each item's domain (``domain`` by default; MMLU-Pro's
        ``subject``, say).  When it is not ``domain``, a column named
        ``domain`` is ignored.
    ignore_columns
        Further columns to drop.  Any other column is an error: a table with
        unknown columns is usually the wrong table.
    """
    cols = [str(c) for c in df.columns]
    wanted = {"llm", "item", domain_column, "correct"}
    missing = [c for c in ("llm", "item", domain_column, "correct") if c not in cols]
    if missing:
        found = f"found {len(cols)} columns: {_values_plain(cols)}" if len(cols) > SHOW else (
            f"found: {', '.join(cols) or 'none'}")
        raise InputError(
            f"missing column{'s' if len(missing) > 1 else ''} {', '.join(missing)}: "
            f"the table needs llm, item, {domain_column}, correct ({found}){_wide_hint(df)}"
        )
    ignored = set(ignore_columns)
    if domain_column != "domain":
        ignored.add("domain")
    unknown = [c for c in cols if c not in wanted and c not in ignored]
    if unknown:
        raise InputError(
            f"unknown column{'s' if len(unknown) > 1 else ''} {_values_plain(unknown)}: "
            "expected exactly llm, item, domain, correct "
            "(ignore extras with --ignore-columns, or take domains from another column with --domain-column)"
        )
    dups = sorted({c for c in cols if cols.count(c) > 1})
    if dups:
        raise InputError(f"duplicate column names: {', '.join(dups)}")
    out = df[["llm", "item", domain_column, "correct"]]
    if domain_column != "domain":
        out = out.rename(columns={domain_column: "domain"})
    return out


def check_not_empty(df: pd.DataFrame) -> None:
    """An empty table is an error."""
    if len(df) == 0:
        raise InputError("the table has no rows: there are no responses to measure")


def check_labels(df: pd.DataFrame) -> None:
    """``llm``, ``item`` and ``domain`` must be present on every row."""
    for col in ("llm", "item", "domain"):
        s = df[col]
        bad = s.isna().to_numpy().copy()
        if not isinstance(s.dtype, pd.CategoricalDtype):
            bad |= (s.astype(str).str.strip() == "").to_numpy()
        else:
            cats = s.cat.categories.astype(str)
            blank = np.flatnonzero(cats.str.strip() == "")
            if len(blank):
                bad |= np.isin(s.cat.codes.to_numpy(), blank)
        if bad.any():
            raise InputError(f"empty {col} in {_rows(np.flatnonzero(bad))}")


def to_binary(correct: pd.Series) -> np.ndarray:
    """Return ``correct`` as ``int8`` 0/1, or raise naming the rows that are not.

    Accepted: integers or floats equal to 0 or 1, booleans, and the strings
    ``0``, ``1``, ``true``, ``false`` (any case).  Missing values are errors:
    a missing response is an absent row, not a blank cell.
    """
    s = correct
    na = s.isna().to_numpy()
    if na.any():
        raise InputError(
            f"missing correct in {_rows(np.flatnonzero(na))}: "
            "leave unobserved responses out of the table instead"
        )
    if pd.api.types.is_bool_dtype(s.dtype):
        return s.to_numpy().astype(np.int8)
    if pd.api.types.is_numeric_dtype(s.dtype):
        v = s.to_numpy()
        ok = (v == 0) | (v == 1)
        if not ok.all():
            bad = np.flatnonzero(~ok)
            raise InputError(
                f"correct must be 0 or 1; {_rows(bad)} {_hold(bad)} {_values(v[bad][:SHOW])}"
            )
        return v.astype(np.int8)
    text = s.astype(str).str.strip().str.lower()
    mapping = {"0": 0, "1": 1, "0.0": 0, "1.0": 1, "true": 1, "false": 0}
    v = text.map(mapping)
    bad = v.isna().to_numpy()
    if bad.any():
        idx = np.flatnonzero(bad)
        raise InputError(
            f"correct must be 0 or 1; {_rows(idx)} {_hold(idx)} {_values(s.iloc[idx[:SHOW]].tolist())}"
        )
    return v.to_numpy().astype(np.int8)


def check_one_domain_per_item(
    item_codes: np.ndarray, domain_codes: np.ndarray, item_names, domain_names
) -> np.ndarray:
    """Return each item's domain code, or raise naming items found in two domains."""
    n_items = len(item_names)
    item_domain = np.full(n_items, -1, dtype=np.int32)
    item_domain[item_codes] = domain_codes
    clash = item_domain[item_codes] != domain_codes
    if clash.any():
        bad_items = np.unique(item_codes[clash])
        parts = []
        for it in bad_items[:SHOW]:
            doms = np.unique(domain_codes[item_codes == it])
            parts.append(f"{item_names[it]!r} ({', '.join(sorted(str(domain_names[d]) for d in doms))})")
        more = f" and {len(bad_items) - SHOW} more" if len(bad_items) > SHOW else ""
        raise InputError(
            f"item{'s' if len(bad_items) > 1 else ''} in more than one domain: {'; '.join(parts)}{more}"
        )
    return item_domain


def check_duplicates(
    lin: np.ndarray, y: np.ndarray, size: int, llm_codes, item_codes, llm_names, item_names
) -> tuple[np.ndarray, np.ndarray, int]:
    """Scatter responses into a dense matrix and check duplicate (llm, item) rows.

    Returns the flat ``int8`` answers, the flat observation mask and the number
    of duplicate rows dropped.  Conflicting duplicates (same LLM and item,
    different ``correct``) raise; identical ones are counted so the caller can
    warn and keep one.
    """
    correct = np.zeros(size, dtype=np.int8)
    observed = np.zeros(size, dtype=bool)
    observed[lin] = True
    correct[lin] = y
    n_obs = int(np.count_nonzero(observed))
    n_dup = len(lin) - n_obs
    if n_dup:
        conflict = correct[lin] != y
        if conflict.any():
            cells = np.unique(lin[conflict])
            rows = np.flatnonzero(np.isin(lin, cells))
            first = rows[:SHOW]
            pairs = sorted({(str(llm_names[llm_codes[r]]), str(item_names[item_codes[r]])) for r in first})
            raise InputError(
                f"conflicting duplicate responses for {len(cells)} (llm, item) pair"
                f"{'s' if len(cells) > 1 else ''}, e.g. {_values(pairs)}: {_rows(rows)}"
            )
    return correct, observed, n_dup


def domain_counts(correct, observed, domain_slices) -> np.ndarray:
    """Per domain (``4 x K``): responses, correct ones, LLMs with responses, and the median number of
    responses of those LLMs (``correct`` is 0 where unobserved; ``observed`` None when complete)."""
    n_llms = correct.shape[0]
    out = np.zeros((4, len(domain_slices)))
    for k, sl in enumerate(domain_slices):
        seen = np.full(n_llms, sl.stop - sl.start) if observed is None else observed[:, sl].sum(axis=1)
        ran = seen[seen > 0]
        out[:, k] = seen.sum(), correct[:, sl].sum(dtype=np.int64), len(ran), np.median(ran) if len(ran) else 0
    return out


def constant_domains(correct, observed, domain_slices, domain_names) -> dict[str, int]:
    """The domains whose responses are all the same, each with that answer (1 or 0).

    Raises :class:`~mtlirt.errors.InputError` when every domain is constant:
    no response varies within any domain, so nothing tells the LLMs apart.
    """
    n, right, _, _ = domain_counts(correct, observed, domain_slices)
    const = (right == 0) | (right == n)
    out = {str(domain_names[k]): int(right[k] > 0) for k in np.flatnonzero(const & (n > 0))}
    if const.all():
        if (right == n).all() or (right == 0).all():
            what = "correct" if (right == n).all() else "wrong"
            raise InputError(f"every response is {what} ({int(n.sum()):,} responses): no response varies, "
                             "so nothing tells the LLMs apart and nothing can be measured")
        raise InputError(f"no response varies within any domain ({describe_constant(out)}): nothing tells "
                         "the LLMs apart "
                         "and nothing can be measured")
    return out


def thin_domains(correct, observed, domain_slices, domain_names) -> dict[str, tuple[int, float]]:
    """The domains answered by fewer than :data:`~mtlirt.data.validate.MIN_LLMS` LLMs, or by LLMs with fewer
    than :data:`~mtlirt.data.validate.MIN_RESPONSES` responses in them (the median), each with these two
    numbers."""
    _, _, llms, per_llm = domain_counts(correct, observed, domain_slices)
    thin = (llms < MIN_LLMS) | (per_llm < MIN_RESPONSES)
    return {str(domain_names[k]): (int(llms[k]), float(per_llm[k])) for k in np.flatnonzero(thin)}


def describe_constant(domains: dict[str, int]) -> str:
    """``a (all correct), b (all wrong)``, the first few and a count."""
    return _values([f"{d} (all {'correct' if v else 'wrong'})" for d, v in domains.items()]).replace("'", "")


def describe_thin(domains: dict[str, tuple[int, float]]) -> str:
    """``a (3 LLMs, 2 responses each)``, the first few and a count."""
    return _values([f"{d} ({n} LLM{'s' if n != 1 else ''}, {r:g} response{'s' if r != 1 else ''} each)"
                    for d, (n, r) in domains.items()]).replace("'", "")
