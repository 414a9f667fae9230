"""Reading a long results table from CSV, gzip CSV or Parquet: whole (a DataFrame) or in batches of rows."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import InputError
from .outputs import file_output

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


def check_file(path: str | Path) -> str:
    """The table's format (:func:`table_format`) once it is known to be a file, else :class:`InputError`."""
    path = Path(path)
    kind = table_format(path)
    if not path.exists():
        raise InputError(f"cannot read {path}: no such file")
    if path.is_dir():
        raise InputError(f"cannot read {path}: it is a folder, not a table")
    return kind


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
    kind = check_file(path)
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
    never (:mod:`mtlirt.data.outputs`).
    """
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
            write_csv(df, tmp, sep="\t" if ".tsv" in path.name.lower() else ",",
                      gzip=path.name.lower().endswith(".gz"))
    return path


def write_csv(df: pd.DataFrame, path: str | Path, *, sep: str = ",", gzip: bool = False) -> None:
    """Write ``df`` (no index) as CSV, gzipped with ``gzip``: the text of ``DataFrame.to_csv`` but for the
    notation of very small or large numbers, read back to the same values.

    Arrow's multi-threaded writer, several times faster than pandas' on the fit folder's and the
    simulator's large tables; pandas writes the tables whose text needs quotes."""
    import csv
    import io

    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pacsv

    try:
        table = pa.Table.from_pandas(df, preserve_index=False)
        if table.num_columns == 1 and table.column(0).null_count:
            raise pa.ArrowInvalid("a blank line for a missing value")  # pandas writes "" there
        for i, f in enumerate(table.schema):  # pandas' text of booleans and categories
            if pa.types.is_boolean(f.type):
                table = table.set_column(i, f.name, pc.if_else(table.column(i), "True", "False"))
            elif pa.types.is_dictionary(f.type):
                table = table.set_column(i, f.name, table.column(i).cast(pa.string()))
            elif pa.types.is_floating(f.type):  # a whole number keeps its ".0", as a float column
                text = table.column(i).cast(pa.string())
                whole = pc.match_substring_regex(text, r"^-?[0-9]+$")
                table = table.set_column(i, f.name, pc.if_else(whole, pc.binary_join_element_wise(text, ".0", ""),
                                                               text))
        head = io.StringIO()
        csv.writer(head, delimiter=sep, lineterminator="\n").writerow([str(c) for c in df.columns])
        body = io.BytesIO()
        pacsv.write_csv(table, body, pacsv.WriteOptions(include_header=False, quoting_style="none", delimiter=sep))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):  # text that needs quotes
        df.to_csv(path, index=False, sep=sep, compression="gzip" if gzip else None)
        return
    with (pa.CompressedOutputStream(str(path), "gzip") if gzip else pa.OSFile(str(path), "wb")) as sink:
        sink.write(head.getvalue().encode())
        sink.write(body.getbuffer())


# ---------------------------------------------------------------------------
# reading in batches (Responses.read): label columns as codes, never a whole DataFrame
# ---------------------------------------------------------------------------
#: Rows per batch of the batched reader (a Parquet row group is read in batches of at most this many).
BATCH_ROWS = 1 << 20


class Unsupported(Exception):
    """The batched reader cannot read this table as the DataFrame path would: read it that way."""


@dataclass
class Labels:
    """One label column of one batch: its distinct names and every row's index into them (-1: missing).

    ``order`` says how the whole column's names are ordered, as the DataFrame
    path orders them: ``"dictionary"`` (Parquet dictionaries, unified in the
    order they come), ``"sorted K"`` (a CSV column read as categories, names
    of the numpy kind ``K`` sorted as such) or ``"appearance"`` (the first
    appearance of each name's text)."""

    names: object
    codes: np.ndarray
    order: str
    missing: bool = False

    def names_array(self) -> np.ndarray:
        """The names as a numpy array (a Parquet dictionary is kept as read until asked for)."""
        if not isinstance(self.names, np.ndarray):
            self.names = self.names.to_numpy(zero_copy_only=False)
        return self.names

    def same_names(self, other: Labels) -> bool:
        """Whether ``other`` has the same names in the same order."""
        if not isinstance(self.names, np.ndarray) and not isinstance(other.names, np.ndarray):
            return self.names.equals(other.names)  # two Parquet dictionaries: compared as read
        a, b = self.names_array(), other.names_array()
        return len(a) == len(b) and np.array_equal(a, b)


def _parquet_labels(arr, name: str) -> Labels:
    """A Parquet label column of one batch (a dictionary of strings, or integers) as :class:`Labels`."""
    import pyarrow as pa

    if pa.types.is_dictionary(arr.type):
        if not (pa.types.is_string(arr.type.value_type) or pa.types.is_large_string(arr.type.value_type)):
            raise Unsupported(f"{name}: dictionary of {arr.type.value_type}")
        codes = arr.indices.fill_null(-1) if arr.null_count else arr.indices
        return Labels(arr.dictionary, codes.to_numpy(), "dictionary", bool(arr.null_count))
    if pa.types.is_integer(arr.type) and not arr.null_count:  # the DataFrame path: the text, as it comes
        codes, uniques = pd.factorize(arr.to_numpy(), sort=False)
        return Labels(np.asarray([str(v) for v in uniques], dtype=object), codes, "appearance")
    raise Unsupported(f"{name}: {arr.type}")


def _frame_labels(s: pd.Series, name: str) -> Labels:
    """A label column of one CSV chunk as :class:`Labels`."""
    if isinstance(s.dtype, pd.CategoricalDtype):  # pandas sorts the categories (numbers as numbers)
        cats, codes = s.cat.categories, s.cat.codes.to_numpy()
        return Labels(np.asarray(cats, dtype=object), codes, f"sorted {cats.dtype.kind}", bool(np.any(codes < 0)))
    na = s.isna().to_numpy()
    if pd.api.types.is_integer_dtype(s.dtype) or (pd.api.types.is_string_dtype(s.dtype) and not na.all()):
        codes = np.full(len(s), -1, dtype=np.int64)
        found, uniques = pd.factorize(s[~na].astype(str), sort=False)
        codes[~na] = found
        return Labels(np.asarray(uniques, dtype=object), codes, "appearance", bool(na.any()))
    raise Unsupported(f"{name}: {s.dtype}")


def _binary(values, name: str = "correct") -> np.ndarray:
    """``correct`` of one batch as int8 0/1 (numbers or booleans; anything else: :class:`Unsupported`)."""
    v = np.asarray(values)
    if v.dtype == bool:
        return v.astype(np.int8)
    if v.dtype.kind not in "iuf":
        raise Unsupported(f"{name}: {v.dtype}")
    ok = (v == 0) | (v == 1)
    if not ok.all():
        raise Unsupported(f"{name}: not 0 or 1")
    return v.astype(np.int8)


def table_columns(path: str | Path) -> list[str]:
    """The column names of a table file (the Parquet schema, or the CSV header)."""
    path = Path(path)
    if table_format(path) == "parquet":
        import pyarrow.parquet as pq

        return list(pq.read_schema(path).names)
    sep = "\t" if ".tsv" in path.name.lower() else ","
    return [str(c) for c in pd.read_csv(path, sep=sep, nrows=0).columns]


def iter_batches(path: str | Path, labels: tuple[str, ...], correct: str = "correct",
                 *, batch_rows: int | None = None):
    """Yield ``({label column: Labels}, correct as int8)`` for every batch of rows of a table file.

    Parquet is read in batches of its row groups (string columns as
    dictionaries), CSV in chunks: no DataFrame of the whole table.  Raises
    :class:`Unsupported` where a batch is not plainly valid (missing labels,
    ``correct`` not 0/1 numbers or booleans, label types the DataFrame path
    reads otherwise): the caller then reads the table as a DataFrame, whose
    rules name the rows at fault.
    """
    path = Path(path)
    batch_rows = batch_rows or BATCH_ROWS
    if table_format(path) == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        schema = pq.read_schema(path)
        strings = [f.name for f in schema if f.name in labels
                   and (pa.types.is_string(f.type) or pa.types.is_large_string(f.type))]
        pf = pq.ParquetFile(path, read_dictionary=strings)
        for batch in pf.iter_batches(batch_size=batch_rows, columns=[*labels, correct]):
            y = batch.column(correct)
            if y.null_count:
                raise Unsupported("missing correct")
            if not (pa.types.is_integer(y.type) or pa.types.is_floating(y.type) or pa.types.is_boolean(y.type)):
                raise Unsupported(f"correct: {y.type}")
            yield ({c: _parquet_labels(batch.column(c), c) for c in labels},
                   _binary(y.to_numpy(zero_copy_only=False)))
    else:
        sep = "\t" if ".tsv" in path.name.lower() else ","
        dtypes = {c: "category" for c in ("llm", "item", "domain")}
        with pd.read_csv(path, sep=sep, dtype=dtypes, keep_default_na=True, usecols=[*labels, correct],
                         chunksize=batch_rows) as chunks:
            for df in chunks:
                y = df[correct]
                if y.isna().any():
                    raise Unsupported("missing correct")
                yield {c: _frame_labels(df[c], c) for c in labels}, _binary(y.to_numpy())
