"""Open LLM Leaderboard v1 "details" Parquet files (``open-llm-leaderboard/details_<org>__<model>``)."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ...errors import InputError
from ._common import _TS, _TS_RE, PathArg, _as_paths, _give, _Ledger, _listing, _Part, _Skip, _strip_suffixes
from ._records import _files_under, _norm_ts, _pattern_list

#: ``tasks`` pattern of :func:`from_open_llm_leaderboard` for MMLU as the
#: Open LLM Leaderboard v1 scored it (57 subjects, 5-shot).
MMLU_TASKS = ("harness_hendrycksTest_*_5",)

#: ``tasks`` patterns for the six benchmarks of the Open LLM Leaderboard v1
#: in the settings the leaderboard scored (TruthfulQA has no binary metric:
#: with the metric ``acc``, ``allow_empty=True`` leaves it out with a warning).
LEADERBOARD_V1_TASKS = (
    "harness_arc_challenge_25",
    "harness_hellaswag_10",
    "harness_hendrycksTest_*_5",
    "harness_truthfulqa_mc_0",
    "harness_winogrande_5",
    "harness_gsm8k_5",
)

#: A file as stored in a details repository:
#: ``details_harness|hendrycksTest-abstract_algebra|5_2023-08-19T16-35-46.942696``.
_OLL_RAW_RE = re.compile(
    r"^details_(?P<suite>harness|original)\|(?P<task>[^|]+)\|(?P<nshot>\d+)(?:_(?P<ts>.+))?$"
)
#: A configuration name, alone or in a longer name, optionally followed by a date.
_OLL_CFG_RE = re.compile(
    rf"(?:^|_)(?P<cfg>(?P<suite>harness|original)_(?P<task>.+?)_(?P<nshot>\d+))(?:_(?P<ts>{_TS}))?$"
)
_OLL_CFG_FULL_RE = re.compile(r"^(?P<suite>harness|original)_(?P<task>.+)_(?P<nshot>\d+)$")
#: The model in a file name ``details_<org>__<model>_harness_...``.
_OLL_MODEL_FILE_RE = re.compile(r"^details_(?P<model>.+?)_(?:harness|original)_")
#: The model in a folder: ``details_<org>__<model>``, also inside a Hugging Face
#: cache folder ``datasets--open-llm-leaderboard--details_<org>__<model>``.
_OLL_MODEL_DIR_RE = re.compile(r"(?:^|--)details_(?P<model>.+)$")
_SHARD_RE = re.compile(r"^(?:.*?[-_])?(?P<shard>\d+)(?:-of-\d+)?$")


@dataclass
class _OllFile:
    path: Path
    llm: str
    config: str
    domain: str
    rank: tuple[int, str]  # (2 latest, 1 train, 0 dated or undated; date)
    shard: int | None


def _split_rank(names: Sequence[str], ts: str | None) -> tuple[int, str]:
    """How recent a details file is, from the names of the file and its folders.

    ``(2, date)`` for the ``latest`` split, ``(1, date)`` for ``train`` (older
    repositories' name of the newest run), ``(0, date)`` otherwise; the date
    is ``ts`` or the first date in the names.
    """
    lowered = [n.lower() for n in names]
    if any(n == "latest" or n.startswith(("latest-", "latest_")) for n in lowered):
        level = 2
    elif any(n == "train" or n.startswith(("train-", "train_")) for n in lowered):
        level = 1
    else:
        level = 0
    if ts is None:
        ts = next((tm.group(0) for n in names if (tm := _TS_RE.search(n))), None)
    return level, _norm_ts(ts) or ""


def _shard(stem: str) -> int | None:
    """The shard number of a file of one split (``0000``, ``train-00001-of-00003``), if any."""
    if _TS_RE.search(stem):
        return None
    sm = _SHARD_RE.match(stem)
    return int(sm.group("shard")) if sm else None


def _latest_split(infos: Sequence[_OllFile], ledger: _Ledger) -> list[list[_OllFile]]:
    """The files of the newest split of each (LLM, configuration), shards in order.

    Two files of equal rank that are not shards of one split are an error
    naming both; the older splits are recorded in ``ledger`` as superseded.
    """
    groups: dict[tuple[str, str], list[_OllFile]] = {}
    for i in infos:
        groups.setdefault((i.llm, i.config), []).append(i)
    selected: list[list[_OllFile]] = []
    for (name, config), group in groups.items():
        best = max(g.rank for g in group)
        top = [g for g in group if g.rank == best]
        if len(top) > 1:
            if all(g.shard is not None for g in top) and len({g.shard for g in top}) == len(top):
                top.sort(key=lambda g: g.shard)
            else:
                raise InputError(
                    f"LLM {name!r} has {config} in both {top[0].path} and {top[1].path}, and neither "
                    "is the latest split nor of a later date; pass only one"
                )
        for g in group:
            if g.rank != best:
                ledger.superseded(g.path)
        selected.append(top)
    selected.sort(key=lambda fs: str(fs[0].path))
    return selected


def _oll_model(path: Path) -> str | None:
    stem = _strip_suffixes(path.name, (".parquet",))
    m = _OLL_MODEL_FILE_RE.match(stem)
    if m and not stem.startswith(("details_harness", "details_original")):
        return m.group("model").replace("__", "/", 1)
    for parent in path.parents:
        m = _OLL_MODEL_DIR_RE.search(parent.name)
        if m and not parent.name.startswith(("details_harness|", "details_original|")):
            return m.group("model").replace("__", "/", 1)
    return None


def _oll_file_info(path: Path, llm: str | None) -> _OllFile | None:
    """Describe one details Parquet file; None for aggregated results files."""
    stem = _strip_suffixes(path.name, (".parquet",))
    ts: str | None = None
    # the names that may carry the split or the date: the file's, and for the
    # folder-per-configuration layout those of the folders below the configuration
    names = [stem]
    in_folder = False
    m = _OLL_RAW_RE.match(stem) or _OLL_CFG_RE.search(stem)
    if m:
        suite, task, nshot, ts = m.group("suite"), m.group("task"), m.group("nshot"), m.group("ts")
        if m.re is _OLL_RAW_RE:
            names.append(path.parent.name)  # the stored run folder is named by its date
    else:
        between = []
        for parent in path.parents:
            m = _OLL_CFG_FULL_RE.match(parent.name)
            if m:
                break
            between.append(parent.name)
        if m is None:
            near = [stem.lower(), path.parent.name.lower(), path.parent.parent.name.lower()]
            if any(n.startswith("results") for n in near):
                return None  # aggregated results, not per-sample details
            raise InputError(
                f"{path}: cannot tell the task; expected a details file "
                "details_harness|<task>|<n-shot>_<date>.parquet or a file or folder named "
                "harness_<task>_<n-shot> (e.g. harness_hendrycksTest_abstract_algebra_5)"
            )
        suite, task, nshot = m.group("suite"), m.group("task"), m.group("nshot")
        names.extend(between)
        in_folder = True
    task = re.sub(r"\W", "_", task)
    config = f"{suite}_{task}_{nshot}"
    domain = task
    if suite == "harness" and task.startswith("hendrycksTest_") and len(task) > len("hendrycksTest_"):
        domain = task[len("hendrycksTest_") :]
    rank = _split_rank(names, ts)
    shard = _shard(stem) if in_folder else None
    name = llm if llm is not None else _oll_model(path)
    if name is None:
        raise InputError(
            f"{path}: cannot tell the model; expected a parent folder (or file name) "
            f"details_<org>__<model>, or pass {_give('llm')}"
        )
    return _OllFile(path.resolve(), name, config, domain, rank, shard)


def _oll_read(f: _OllFile, metric: str) -> tuple[np.ndarray | None, np.ndarray] | _Skip:
    """Item ids and 0/1 values of one file; why there are none, naming the metrics it has."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    try:
        schema = pq.read_schema(f.path)
    except Exception as e:  # pyarrow raises several types for a bad file
        raise InputError(f"cannot read {f.path}: not a Parquet file ({e})") from None
    names = schema.names
    id_col = next((c for c in ("idx", "doc_id") if c in names), None)
    numeric = [n for n in names if n not in ("idx", "doc_id")
               and (pa.types.is_floating(schema.field(n).type) or pa.types.is_integer(schema.field(n).type)
                    or pa.types.is_boolean(schema.field(n).type))]
    missing = _Skip(f"no metric {metric!r} (its metrics: {_listing(numeric, show=10) or 'none'})",
                    f"choose one with {_give('metric')}")
    if metric in names:
        source = metric
    elif "metrics" in names:
        source = "metrics"
        t = schema.field("metrics").type
        if pa.types.is_struct(t):
            if t.get_field_index(metric) < 0:
                fields = [t.field(k).name for k in range(t.num_fields)]
                return _Skip(f"no metric {metric!r} (its metrics: {_listing(fields, show=10) or 'none'})",
                             f"choose one with {_give('metric')}")
        elif not pa.types.is_map(t):
            raise InputError(
                f"{f.path}: column metrics has type {t}; expected a struct (or map) of metric values"
            )
    else:
        return missing
    cols = [source] + ([id_col] if id_col else [])
    table = pq.read_table(f.path, columns=cols)
    col = table.column(source)
    if source == "metrics":
        if pa.types.is_struct(col.type):
            col = pc.struct_field(col, metric)
        else:
            col = pc.map_lookup(col, pa.scalar(metric, col.type.key_type), "first")
    try:
        values = col.cast(pa.float64()).to_numpy(zero_copy_only=False)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        raise InputError(f"{f.path}: {metric} has type {col.type}, not a 0/1 number") from None
    bad = ~((values == 0) | (values == 1))  # NaN (missing) is bad too
    if bad.any():
        rows = np.flatnonzero(bad)
        raise InputError(
            f"{f.path}: {metric} must be 0 or 1; row{'s' if len(rows) > 1 else ''} "
            f"{_listing((rows + 1).tolist(), quote=False)} "
            f"hold{'s' if len(rows) == 1 else ''} {_listing(values[rows].tolist())}"
        )
    if id_col:
        ids = table.column(id_col)
        if ids.null_count:
            raise InputError(f"{f.path}: column {id_col} has missing values")
        if pa.types.is_floating(ids.type):
            try:
                ids = ids.cast(pa.int64())
            except pa.ArrowInvalid:
                raise InputError(f"{f.path}: column {id_col} holds non-integer ids") from None
        ids = np.asarray(ids.cast(pa.string()).to_numpy(zero_copy_only=False), dtype=object)
        dup = pd.Series(ids).duplicated(keep=False).to_numpy()
        if dup.any():
            raise InputError(f"{f.path}: column {id_col} repeats {_listing(pd.unique(ids[dup]).tolist())}")
    else:
        ids = None
    return ids, values.astype(np.int8)


def _oll_parts(selected: Sequence[list[_OllFile]], metric: str, ledger: _Ledger) -> list[_Part]:
    """One part per selected split (its shards joined), each recorded in ``ledger``."""
    parts: list[_Part] = []
    for files in selected:
        ids_all, vals_all = [], []
        skip = None
        for f in files:
            got = _oll_read(f, metric)
            if isinstance(got, _Skip):
                skip = got
                break
            ids_all.append(got[0])
            vals_all.append(got[1])
        if skip is not None:
            ledger.empty(files[0].path, skip)
            continue
        values = np.concatenate(vals_all)
        if any(i is None for i in ids_all):
            ids = np.arange(len(values)).astype(str).astype(object)
        else:
            ids = np.concatenate(ids_all)
        f0 = files[0]
        items = (f0.domain + "/" + pd.Series(ids, dtype=object).astype(str)).to_numpy(dtype=object)
        parts.append(_Part(str(f0.path), f0.llm, f0.domain, items, values))
        ledger.read(f0.path, len(values))
    return parts


def from_open_llm_leaderboard(
    paths: PathArg,
    *,
    metric: str = "acc",
    tasks: str | Sequence[str] | None = None,
    llm: str | None = None,
    allow_empty: bool = False,
) -> pd.DataFrame:
    """Read Open LLM Leaderboard v1 "details" Parquet files into the long table.

    The leaderboard stored each model's per-sample results in a dataset
    repository ``open-llm-leaderboard/details_<org>__<model>``, one Parquet
    file per task and run, e.g.
    ``<date>/details_harness|hendrycksTest-abstract_algebra|5_<date>.parquet``,
    exposed as the configuration ``harness_hendrycksTest_abstract_algebra_5``
    whose split ``latest`` (older repositories: ``train``) is the newest run.
    Recognised layouts, under a folder ``details_<org>__<model>`` (or a Hugging
    Face cache folder ``datasets--open-llm-leaderboard--details_<org>__<model>``):

    - the repository as stored: ``details_harness|<task>|<n-shot>_<date>.parquet``;
    - one folder per configuration: ``harness_<task>_<n-shot>/<split>.parquet``
      or ``harness_<task>_<n-shot>/<split>/0000.parquet``;
    - the configuration in the file name, optionally with the run's date:
      ``harness_<task>_<n-shot>[_<date>].parquet``, also prefixed by the model,
      ``details_<org>__<model>_harness_<task>_<n-shot>[_<date>].parquet``.

    Parameters
    ----------
    paths
        A Parquet file, a folder (searched recursively for ``*.parquet``) or
        a list of them.  Aggregated ``results_*`` files are skipped.
    metric
        The per-sample metric: a column of that name, or a field of the struct
        column ``metrics`` (``{"acc": 1.0}``).  Values must be 0 or 1.
    tasks
        Shell-style patterns over configuration names that select the files
        to read, e.g. :data:`MMLU_TASKS` (``"harness_hendrycksTest_*_5"``) or
        :data:`LEADERBOARD_V1_TASKS`.  By default all.  A repository that holds
        the same benchmark in two settings (MMLU 0-shot and 5-shot) needs one
        chosen here.
    llm
        The LLM name for all files; by default ``<org>/<model>`` from the
        nearest ``details_<org>__<model>`` in the file name or its folders.
    allow_empty
        A split without the metric (TruthfulQA's ``mc1``/``mc2`` when asking
        for ``acc``) is an error naming it and the metrics it has; with
        ``allow_empty`` it is left out with a
        :class:`~mtlirt.data.validate.DataWarning`.

    Returns
    -------
    pandas.DataFrame
        Columns ``llm, item, domain, correct``.  The domain is the MMLU
        subject for ``harness_hendrycksTest_<subject>_<n>`` (``abstract_algebra``)
        and the task name otherwise (``arc_challenge``, ``gsm8k``); the item is
        ``<domain>/<id>`` where the id is the ``idx`` or ``doc_id`` column when
        the file has one, else the row's position in the file (from 0), so
        items line up across models.

    Raises
    ------
    InputError
        A file whose task or model cannot be told, a metric that is not 0/1
        (file and rows named), an unreadable file, a split without the metric
        (unless ``allow_empty``), a model answering the same item twice (two
        settings of a task, or two runs with no date to order them), or no
        responses at all.

    Notes
    -----
    When one model has several files for a configuration, the ``latest``
    split wins, then ``train``, then the latest date.  Files numbered as
    shards of one split (``0000.parquet``, ``0001.parquet``) are read in order
    as one.  Only the needed columns are read, so the large prompt columns
    (``example``, ``full_prompt``, ``instruction``, ...) cost nothing.
    """
    patterns = _pattern_list(tasks)
    roots = _as_paths(paths)
    what = ", ".join(str(p) for p in roots)
    found = _files_under(roots, lambda p: p.name.lower().endswith(".parquet"), "a Parquet file")
    ledger = _Ledger("details split")
    infos = []
    for path in found:
        info = _oll_file_info(path, llm)
        if info is None:
            ledger.not_data(path)
        elif patterns is None or any(fnmatch.fnmatchcase(info.config, pat) for pat in patterns):
            infos.append(info)
        else:
            ledger.unselected(path)
    if not infos:
        sel = f" matching {_listing(patterns)}" if patterns is not None else ""
        raise InputError(f"no Open LLM Leaderboard details files{sel} found in {what}")

    parts = _oll_parts(_latest_split(infos, ledger), metric, ledger)
    try:
        return ledger.finish(parts, what, allow_empty=allow_empty, metric=repr(metric))
    except InputError as e:
        if "more than once" in str(e):
            raise InputError(
                f"{e}; if these are two settings of one benchmark, choose one with {_give('tasks')} "
                "(e.g. harness_hendrycksTest_*_5)"
            ) from None
        raise
