"""Reading a long results table from CSV, gzip CSV or Parquet."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..errors import InputError

#: The columns of the long table, in order.
LONG_COLUMNS = ("llm", "item", "domain", "correct")

_PARQUET = (".parquet", ".pq")
_CSV = (".csv", ".csv.gz", ".tsv", ".tsv.gz", ".txt", ".txt.gz")


def table_format(path: str | Path) -> str:
    """Return ``"parquet"`` or ``"csv"`` from a file name, or raise :class:`InputError`."""
    name = Path(path).name.lower()
    if name.endswith(_PARQUET):
        return "parquet"
    if name.endswith(_CSV):
        return "csv"
    raise InputError(
        f"cannot read {path}: unknown file type (expected .csv, .csv.gz, .tsv or .parquet)"
    )


def read_table(path: str | Path) -> pd.DataFrame:
    """Read a results table into a DataFrame, string columns as categoricals.

    Parameters
    ----------
    path
        A ``.csv``, ``.csv.gz``, ``.tsv`` or ``.parquet`` file.

    Returns
    -------
    pandas.DataFrame
        The table as stored; ``llm``, ``item`` and ``domain`` (when present)
        are ``category`` columns so that large tables stay small.

    Raises
    ------
    InputError
        When the file is missing, of an unknown type, or cannot be parsed.
    """
    path = Path(path)
    kind = table_format(path)
    if not path.exists():
        raise InputError(f"cannot read {path}: no such file")
    if path.is_dir():
        raise InputError(f"cannot read {path}: it is a folder, not a table")
    try:
        if kind == "parquet":
            import pyarrow.parquet as pq

            schema = pq.read_schema(path)
            strings = [
                f.name
                for f in schema
                if f.name in ("llm", "item", "domain")
                and (str(f.type).startswith("string") or str(f.type).startswith("large_string"))
            ]
            table = pq.read_table(path, read_dictionary=strings)
            df = table.to_pandas()
        else:
            sep = "\t" if ".tsv" in path.name.lower() else ","
            dtypes = {c: "category" for c in ("llm", "item", "domain")}
            df = pd.read_csv(path, sep=sep, dtype=dtypes, keep_default_na=True)
    except InputError:
        raise
    except Exception as exc:  # pyarrow, gzip, csv parser errors
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(f"cannot read {path}: {msg}") from exc
    return df


def write_table(df: pd.DataFrame, path: str | Path, *, overwrite: bool = True) -> Path:
    """Write a long table to ``.parquet``, ``.csv`` or ``.csv.gz`` by its extension.

    Written to a temporary sibling and renamed into place; an existing file
    is replaced only when ``overwrite`` (the CLI's ``--force``), a folder
    never (:mod:`mtlirt.io.outputs`).
    """
    from .outputs import file_output

    path = Path(path)
    kind = table_format(path)
    with file_output(path, what="table", overwrite=overwrite) as tmp:
        if kind == "parquet":
            out = df.copy()
            for c in ("llm", "item", "domain"):
                if c in out and not isinstance(out[c].dtype, pd.CategoricalDtype):
                    out[c] = out[c].astype("category")
            out.to_parquet(tmp, index=False)
        else:
            sep = "\t" if ".tsv" in path.name.lower() else ","
            df.to_csv(tmp, index=False, sep=sep)
    return path
