"""The HTML building blocks of the report: escaped text, anchors and file names, number formats, tables
(every cell escaped, numbers right-aligned) with their full content as a CSV download, recorded values as
key-value tables."""

from __future__ import annotations

import html
import json
import math
import re
from collections.abc import Mapping
from urllib.parse import quote

import numpy as np
import pandas as pd


def _e(x) -> str:
    return html.escape(str(x), quote=True)


def _anchor(name: str) -> str:
    return "fit-" + (re.sub(r"[^A-Za-z0-9_-]+", "-", name).strip("-") or "x")


def _fmt(v, digits: int = 3) -> str:
    if v is None:
        return "–"
    if isinstance(v, (bool, np.bool_)):
        return "yes" if v else "no"
    if isinstance(v, (int, np.integer)):
        return f"{int(v):,}"
    if isinstance(v, (float, np.floating)):
        if not math.isfinite(float(v)):
            return "–"
        v = float(v)
        if v != 0 and (abs(v) >= 1e5 or abs(v) < 10 ** (-digits)):
            return f"{v:.{digits}g}"
        return f"{v:,.{digits}f}"
    return str(v)


def _num(v) -> str:
    """A diagnostic value: integers as integers, else 4 significant digits."""
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
        return _fmt(v) if not isinstance(v, (Mapping, list, tuple)) else json.dumps(v, default=str)
    v = float(v)
    if not math.isfinite(v):
        return str(v)
    return f"{int(v):,}" if v.is_integer() else f"{v:.4g}"


def _seconds(v) -> str:
    try:
        s = float(v)
    except (TypeError, ValueError):
        return _e(v)
    if not math.isfinite(s):
        return "–"
    if s < 60:
        return f"{s:.2f} s" if s < 10 else f"{s:.1f} s"
    m, s = divmod(s, 60)
    if m < 60:
        return f"{int(m)} min {s:.0f} s"
    h, m = divmod(m, 60)
    return f"{int(h)} h {int(m)} min"


def _slug(text: str) -> str:
    """A file-name-safe form of a name."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", str(text)).strip("-.") or "x"


def _csv_href(df: pd.DataFrame, index: bool = False) -> str:
    """A ``data:`` URL of the table as CSV (numbers to 6 significant digits)."""
    text = df.to_csv(index=index, float_format="%.6g", lineterminator="\n")
    return "data:text/csv;charset=utf-8," + quote(text, safe=",.-_:;()+*!~@$/")


def _csv_link(df: pd.DataFrame, filename: str, *, index: bool = False, what: str = "") -> str:
    """A line under a table: its full content as a CSV download."""
    fname = _slug(filename) + ("" if filename.endswith(".csv") else ".csv")
    n = len(df)
    return (f'<p class="dl"><a class="dl csv" download="{_e(fname)}" href="{_e(_csv_href(df, index))}">'
            f"⤓ {_e(fname)}</a> ({what or f'{n:,} row' + ('s' if n != 1 else '')}, CSV)</p>")


def _howto(text: str) -> str:
    """The short "how to read this" of a section (``text`` is HTML)."""
    return f'<p class="howto"><b>How to read this.</b> {text}</p>'


def _table(df: pd.DataFrame, *, num=(), name=(), formats=None, cls="", index=False, csv=None) -> str:
    """An HTML table; every cell escaped; numeric columns right-aligned.

    ``csv``: a file name (the table itself as CSV) or ``(frame, file name)``,
    the full table behind a truncated view.
    """
    formats = formats or {}
    if index:
        df = df.reset_index()
    cols = list(df.columns)
    head = "".join(f'<th class="num">{_e(c)}</th>' if c in num else f"<th>{_e(c)}</th>" for c in cols)
    body = []
    for row in df.itertuples(index=False):
        cells = []
        for c, v in zip(cols, row):
            f = formats.get(c)
            text = f(v) if f else _fmt(v)
            klass = "num" if c in num else ("name" if c in name else "")
            cells.append(f'<td class="{klass}">{_e(text)}</td>' if klass else f"<td>{_e(text)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    out = (f'<div class="tablewrap {cls}"><table><thead><tr>{head}</tr></thead>'
           f'<tbody>{"".join(body)}</tbody></table></div>')
    if csv is not None:
        full, fname = (df, csv) if isinstance(csv, str) else csv
        out += _csv_link(full, fname)
    return out


def _readable(v) -> str:
    """A recorded value as text: numbers formatted, a list of numbers as its size and range."""
    if isinstance(v, Mapping):
        return "; ".join(f"{k}: {_readable(x)}" for k, x in v.items())
    if isinstance(v, (list, tuple)):
        vals = list(v)
        if vals and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in vals):
            if len(vals) <= 6:
                return ", ".join(_num(x) for x in vals)
            arr = np.asarray(vals, float)
            fin = arr[np.isfinite(arr)]
            rng = f": {_num(fin.min())} to {_num(fin.max())}" if fin.size else ""
            return f"{len(vals):,} values{rng}"
        text = ", ".join(_readable(x) for x in vals)
        return text if len(text) <= 300 else text[:300] + " …"
    if isinstance(v, (float, np.floating)):
        return _num(v)
    return _fmt(v)


def _flat(d: Mapping, prefix: str = "") -> list[tuple[str, object]]:
    """``(key, value)`` pairs, nested mappings as ``outer › inner`` keys."""
    out = []
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping) and v:
            out.extend(_flat(v, key + " › "))
        else:
            out.append((key, v))
    return out


def _kv_table(d: Mapping, *, seconds=False, csv=None) -> str:
    """A two-column table of recorded values, nested mappings flattened (``outer › inner``).

    ``csv``: file name of its CSV download (the values in full, lists as JSON)."""
    rows, full = [], []
    for k, v in _flat(d):
        if seconds and isinstance(v, (int, float)) and not isinstance(v, bool):
            text = _seconds(v)
        else:
            text = _readable(v)
        rows.append(f"<tr><th>{_e(k)}</th><td>{_e(text)}</td></tr>")
        full.append((k, json.dumps(v, default=str) if isinstance(v, (list, tuple)) else v))
    out = f'<div class="tablewrap"><table><tbody>{"".join(rows)}</tbody></table></div>'
    if csv is not None:
        out += _csv_link(pd.DataFrame(full, columns=["key", "value"]), csv)
    return out
