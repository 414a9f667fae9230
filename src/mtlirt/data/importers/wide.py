"""A wide LLM x item 0/1 matrix (CSV or DataFrame)."""

from __future__ import annotations

import csv
import io
import os
import re
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ...errors import InputError
from ..tables import LONG_COLUMNS
from ..validate import DataWarning
from ._common import _SHOW, _listing, _open_text, _opt, _report_aliases, _str_column, _summarize
from ._records import _plain

_TRUE_FALSE = {"0": 0.0, "1": 1.0, "0.0": 0.0, "1.0": 1.0, "false": 0.0, "true": 1.0}


def _read_item_domain(item_domain: Any) -> dict[str, str]:
    if isinstance(item_domain, pd.Series):
        pairs = pd.DataFrame({"item": item_domain.index, "domain": item_domain.to_numpy()})
        where = "item_domain"
    elif isinstance(item_domain, pd.DataFrame):
        pairs, where = item_domain, "item_domain"
    elif isinstance(item_domain, Mapping):
        pairs = pd.DataFrame({"item": list(item_domain.keys()), "domain": list(item_domain.values())})
        where = "item_domain"
    elif isinstance(item_domain, (str, os.PathLike)):
        path = Path(item_domain)
        if not path.is_file():
            raise InputError(f"cannot read {path}: no such file")
        try:
            pairs = pd.read_csv(path, dtype=str, keep_default_na=False)
        except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as e:
            raise InputError(f"cannot read {path}: {e}") from None
        where = str(path)
    else:
        raise InputError(
            f"item_domain must be a mapping, a Series or a CSV file with columns item,domain, "
            f"not {type(item_domain).__name__}"
        )
    missing = [c for c in ("item", "domain") if c not in pairs.columns]
    if missing:
        raise InputError(
            f"{where}: missing column{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
            f"(expected item,domain; found {', '.join(map(str, pairs.columns))})"
        )
    items = pairs["item"].astype(str).to_numpy()
    domains = pairs["domain"].to_numpy(dtype=object)
    out: dict[str, str] = {}
    for k, (item, dom) in enumerate(zip(items, domains)):
        if dom is None or (isinstance(dom, float) and np.isnan(dom)) or not str(dom).strip():
            continue
        dom = str(dom)
        if item in out and out[item] != dom:
            raise InputError(
                f"{where}: item {item!r} has two domains, {out[item]!r} and {dom!r} (row {k + 1})"
            )
        out[item] = dom
    return out


_DOMAIN_IN_NAME = re.compile(r"^(?P<domain>[^/:]+)[/:].+$")


def _csv_header(path: Path) -> list[str]:
    with _open_text(path) as fh:
        return next(csv.reader(io.StringIO(fh.readline())), [])


def _read_wide_csv(path: Path, llm_column: str) -> pd.DataFrame:
    """Read a wide CSV with pyarrow (fast on thousands of columns), LLM names as text."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    try:
        table = pacsv.read_csv(
            path, convert_options=pacsv.ConvertOptions(column_types={llm_column: pa.string()})
        )
    except (pa.ArrowInvalid, OSError, UnicodeDecodeError) as e:
        raise InputError(f"cannot read {path}: {e}") from None
    return table.to_pandas()


def _wide_frame(path_or_frame: str | os.PathLike | pd.DataFrame, llm_column: str | None):
    """The matrix as a DataFrame with its name in messages and its LLM column (None: the first)."""
    if isinstance(path_or_frame, pd.DataFrame):
        frame = path_or_frame
        where = "the table"
        if llm_column is None and not (
            isinstance(frame.index, pd.RangeIndex) and frame.index.name is None
        ):
            frame = frame.reset_index()
            llm_column = str(frame.columns[0])
        dup_cols = frame.columns[frame.columns.duplicated()].unique().tolist()
    else:
        path = Path(path_or_frame)
        where = str(path)
        if not path.is_file():
            raise InputError(f"cannot read {path}: no such file")
        try:
            header = _csv_header(path)
        except (UnicodeDecodeError, OSError, EOFError) as e:
            raise InputError(f"cannot read {path}: {e}") from None
        if not header:
            raise InputError(f"cannot read {path}: the file is empty")
        seen: set[str] = set()
        dup_cols = []
        for h in header:
            if h in seen and h not in dup_cols:
                dup_cols.append(h)
            seen.add(h)
        if not dup_cols:
            frame = _read_wide_csv(path, llm_column if llm_column is not None else header[0])
    if dup_cols:
        raise InputError(f"{where}: repeated column name{'s' if len(dup_cols) > 1 else ''} {_listing(dup_cols)}")
    return frame, where, llm_column


def _wide_items(frame: pd.DataFrame, where: str, llm_column: str | None) -> tuple[pd.DataFrame, str, list[str]]:
    """The frame with text column names, its LLM column and its item columns (checked)."""
    columns = [str(c) for c in frame.columns]
    frame = frame.set_axis(columns, axis=1)
    if not columns:
        raise InputError(f"{where}: no columns")
    if llm_column is None:
        llm_column = columns[0]
    elif llm_column not in columns:
        raise InputError(f"{where}: no column {llm_column!r} for the LLM names (columns: {_listing(columns)})")
    items = [c for c in columns if c != llm_column]
    if not items:
        raise InputError(f"{where}: no item columns besides {llm_column!r}")
    blank_items = [
        k + 1
        for k, c in enumerate(columns)
        if c != llm_column and (not c.strip() or re.fullmatch(r"Unnamed: \d+", c))
    ]
    if blank_items:
        raise InputError(
            f"{where}: column{'s' if len(blank_items) > 1 else ''} "
            f"{_listing(blank_items, quote=False)} {'have' if len(blank_items) > 1 else 'has'} no item name"
        )

    return frame, llm_column, items


def _wide_llms(frame: pd.DataFrame, where: str, llm_column: str) -> np.ndarray:
    """The LLM names, one per row: none blank, none repeated."""
    llm_raw = frame[llm_column]
    llm_blank = llm_raw.isna().to_numpy() | (llm_raw.astype(str).str.strip() == "").to_numpy()
    if llm_blank.any():
        rows = np.flatnonzero(llm_blank) + 1
        raise InputError(f"{where}: no LLM name in {llm_column!r} on row{'s' if len(rows) > 1 else ''} "
                         f"{_listing(rows.tolist(), quote=False)}")
    llms = llm_raw.astype(str).to_numpy(dtype=object)
    dup = pd.Series(llms).duplicated()
    if dup.any():
        raise InputError(f"{where}: LLM{'s' if dup.sum() > 1 else ''} "
                         f"{_listing(pd.unique(llms[dup.to_numpy()]).tolist())} appear on more than one row")

    return llms


def _wide_domains(items: list[str], item_domain: Any, where: str) -> np.ndarray:
    """Each item's domain, from ``item_domain`` or the item's name."""
    mapped = _read_item_domain(item_domain) if item_domain is not None else {}
    domains = np.empty(len(items), dtype=object)
    no_domain = []
    for k, item in enumerate(items):
        d = mapped.get(item)
        if d is None:
            m = _DOMAIN_IN_NAME.match(item)
            d = m.group("domain") if m else None
        if d is None:
            no_domain.append(item)
        domains[k] = d
    if no_domain:
        how = (f"{_opt('item_domain')} does not list them" if item_domain is not None
               else f"{_opt('item_domain')} was not given")
        raise InputError(
            f"{where}: no domain for item{'s' if len(no_domain) > 1 else ''} {_listing(no_domain)} "
            f"({len(no_domain)} in all; {how} and their names are not <domain>/<item> or <domain>:<item>)"
        )

    return domains


def _wide_values(frame: pd.DataFrame, items: list[str], llms: np.ndarray, where: str) -> np.ndarray:
    """The cells as floats: 0, 1 or NaN (not observed); any other cell is an error."""
    block = frame[items]
    kinds = [pd.api.types.is_bool_dtype(t) or pd.api.types.is_numeric_dtype(t) for t in block.dtypes]
    if all(kinds):
        values = block.to_numpy(dtype=np.float64, na_value=np.nan)
    else:
        values = np.empty((len(frame), len(items)), dtype=np.float64)
        for k, item in enumerate(items):
            s = block[item]
            if kinds[k]:
                values[:, k] = s.to_numpy(dtype=np.float64, na_value=np.nan)
                continue
            text = s.astype(str).str.strip().str.lower()
            v = np.array(text.map(_TRUE_FALSE).to_numpy(dtype=np.float64, na_value=np.nan))
            blank = s.isna().to_numpy() | text.isin(["", "na", "nan", "none", "null"]).to_numpy()
            v[np.isnan(v) & ~blank] = 2.0  # not readable as 0/1: flagged below
            values[:, k] = v
    observed = ~np.isnan(values)
    bad = observed & (values != 0) & (values != 1)
    if bad.any():
        r, c = np.nonzero(bad)
        cells = [
            f"LLM {llms[i]!r} item {items[j]!r} = {_plain(block.iat[i, j])!r}"
            for i, j in zip(r[:_SHOW], c[:_SHOW])
        ]
        more = f" and {len(r) - _SHOW} more" if len(r) > _SHOW else ""
        raise InputError(f"{where}: cells must be 0, 1 or blank; {'; '.join(cells)}{more}")

    return values


def _empty_lines(values: np.ndarray, llms: np.ndarray, items: list[str], where: str, allow_empty: bool) -> None:
    """Refuse LLM rows and item columns without a 0/1 cell (unless ``allow_empty``: then warn), naming them."""
    observed = ~np.isnan(values)
    rows = np.flatnonzero(~observed.any(axis=1))
    cols = np.flatnonzero(~observed.any(axis=0))
    found = []
    if len(rows):
        found.append(f"{len(rows)} of {len(llms)} LLM row{'s' if len(llms) > 1 else ''} "
                     f"({_listing(llms[rows].tolist())})")
    if len(cols):
        found.append(f"{len(cols)} of {len(items)} item column{'s' if len(items) > 1 else ''} "
                     f"({_listing([items[c] for c in cols])})")
    if not found:
        return
    what = " and ".join(found)
    if not allow_empty:
        raise InputError(
            f"{where}: {what} have no 0/1 cell, so they would vanish from the long table; fill them in, delete "
            f"them, or pass {_opt('allow_empty', True)} to leave them out"
        )
    warnings.warn(f"{where}: left out {what} without a 0/1 cell", DataWarning, stacklevel=3)


def from_wide(
    path_or_frame: str | os.PathLike | pd.DataFrame,
    item_domain: Mapping[str, str] | pd.Series | str | os.PathLike | None = None,
    *,
    llm_column: str | None = None,
    allow_empty: bool = False,
) -> pd.DataFrame:
    """Turn a wide LLM x item 0/1 matrix into the long table.

    Parameters
    ----------
    path_or_frame
        A CSV file (``.csv`` or ``.csv.gz``) or a DataFrame: one row per LLM,
        one column per item, cells 0 or 1 (also ``0.0``/``1.0``,
        ``true``/``false``); a blank or ``NA`` cell is a response not
        observed, which becomes an absent row.
    item_domain
        Each item's domain: a mapping item -> domain, a Series indexed by
        item, or a CSV file with columns ``item,domain``.  Items it does not
        list, or all items when it is not given, take their domain from their
        column name when it has the form ``<domain>/<item>`` or
        ``<domain>:<item>`` (the domain is the part before the first ``/`` or
        ``:``).
    llm_column
        The column holding the LLM names.  By default the first column; for a
        DataFrame with a named or non-default index and no ``llm_column``, the
        index.
    allow_empty
        An LLM row or an item column without a single 0/1 cell would vanish
        from the long table: it is an error naming them, unless
        ``allow_empty`` leaves them out with a
        :class:`~mtlirt.data.validate.DataWarning`.

    Returns
    -------
    pandas.DataFrame
        Columns ``llm, item, domain, correct``; the item is the column name
        as it stands.  Rows go LLM by LLM (in the order of the matrix), items
        in column order.

    Raises
    ------
    InputError
        A cell that is not 0, 1 or blank (LLM and item named), items without
        a domain (named), a missing or repeated LLM name, a repeated or empty
        item name, an ``llm_column`` that does not exist, LLM rows or item
        columns without a 0/1 cell (unless ``allow_empty``), or no responses.
    """
    frame, where, llm_column = _wide_frame(path_or_frame, llm_column)
    frame, llm_column, items = _wide_items(frame, where, llm_column)
    llms = _wide_llms(frame, where, llm_column)
    _report_aliases([], llms.tolist())
    domains = _wide_domains(items, item_domain, where)  # a cheap check before the big conversion
    values = _wide_values(frame, items, llms, where)
    observed = ~np.isnan(values)
    r, c = np.nonzero(observed)
    if len(r) == 0:
        raise InputError(f"no responses found in {where}: every cell is blank")
    _empty_lines(values, llms, items, where, allow_empty)
    dom_codes, dom_names = pd.factorize(domains)
    df = pd.DataFrame(
        {
            "llm": _str_column(llms, r),
            "item": _str_column(np.asarray(items, dtype=object), c),
            "domain": _str_column(np.asarray(dom_names, dtype=object), dom_codes[c]),
            "correct": values[r, c].astype(np.int8),
        }
    )
    blank = values.size - len(df)
    _summarize(f"read {len(llms):,} LLM rows x {len(items):,} item columns of {where} ({len(df):,} responses, "
               f"{blank:,} blank cell{'' if blank == 1 else 's'})")
    return df[list(LONG_COLUMNS)]


