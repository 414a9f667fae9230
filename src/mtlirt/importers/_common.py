"""Converters from the formats LLM item-level results come in to the long table.

Every converter returns a :class:`pandas.DataFrame` with exactly the columns
``llm, item, domain, correct`` (``llm``, ``item`` and ``domain`` as strings,
``correct`` as ``int8`` 0/1), one row per observed response; a response that
was not observed is an absent row.  Malformed input raises
:class:`~mtlirt.errors.InputError` naming the file, line, row or column at
fault.  Whole files that cannot contribute (a task without the requested
metric, say) are left out with a :class:`~mtlirt.validate.DataWarning`; a
conversion that yields no responses at all is an error.

Supported sources:

- :func:`from_lm_eval`: EleutherAI lm-evaluation-harness ``--log_samples``
  output (``samples_<task>_<date>.jsonl`` beside ``results_<date>.json``, and
  the older ``<model_args>_<task>.jsonl`` JSON lists of lm-eval 0.4.0-0.4.2).
- :func:`from_open_llm_leaderboard`: the Open LLM Leaderboard v1 "details"
  Parquet files (``open-llm-leaderboard/details_<org>__<model>``), as stored in
  the dataset repositories or as exported per configuration.
- :func:`from_wide`: a wide LLM x item 0/1 matrix.
- :func:`convert`: dispatch on a kind name, for the command line.
"""

from __future__ import annotations

import csv
import fnmatch
import gzip
import io
import json
import os
import re
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .errors import InputError
from .io import LONG_COLUMNS
from .validate import DataWarning

__all__ = [
    "CONVERT_KINDS",
    "LEADERBOARD_V1_TASKS",
    "MMLU_TASKS",
    "convert",
    "from_lm_eval",
    "from_open_llm_leaderboard",
    "from_wide",
]

#: The kinds :func:`convert` accepts.
CONVERT_KINDS = ("lm-eval", "open-llm-leaderboard", "wide")

#: ``tasks`` pattern of :func:`from_open_llm_leaderboard` for MMLU as the
#: Open LLM Leaderboard v1 scored it (57 subjects, 5-shot).
MMLU_TASKS = ("harness_hendrycksTest_*_5",)

#: ``tasks`` patterns for the six benchmarks of the Open LLM Leaderboard v1
#: in the settings the leaderboard scored (TruthfulQA has no binary metric
#: and is left out with a warning when the metric is ``acc``).
LEADERBOARD_V1_TASKS = (
    "harness_arc_challenge_25",
    "harness_hellaswag_10",
    "harness_hendrycksTest_*_5",
    "harness_truthfulqa_mc_0",
    "harness_winogrande_5",
    "harness_gsm8k_5",
)

#: How many offending values an error message lists before "and N more".
_SHOW = 5

PathArg = str | os.PathLike | Iterable[str | os.PathLike]


# --------------------------------------------------------------------------
# shared helpers


def _listing(values: Sequence[Any], *, quote: bool = True) -> str:
    values = list(values)
    fmt = repr if quote else str
    shown = ", ".join(fmt(v) for v in values[:_SHOW])
    more = f" and {len(values) - _SHOW} more" if len(values) > _SHOW else ""
    return shown + more


def _as_paths(paths: PathArg) -> list[Path]:
    if isinstance(paths, (str, os.PathLike)):
        items = [paths]
    else:
        try:
            items = list(paths)
        except TypeError:
            raise InputError(f"expected a file, a folder or a list of them, got {paths!r}") from None
    if not items:
        raise InputError("no files or folders given")
    out = []
    for p in items:
        path = Path(p)
        if not path.exists():
            raise InputError(f"cannot read {path}: no such file or folder")
        out.append(path)
    return out


def _strip_suffixes(name: str, suffixes: Sequence[str]) -> str:
    lower = name.lower()
    for suffix in suffixes:
        if lower.endswith(suffix):
            return name[: -len(suffix)]
    return name


def _open_text(path: Path):
    if path.name.lower().endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def _first_char(path: Path) -> str:
    """The first non-blank character of a text file ('' when empty or unreadable)."""
    try:
        with _open_text(path) as fh:
            while True:
                chunk = fh.read(4096)
                if not chunk:
                    return ""
                stripped = chunk.lstrip()
                if stripped:
                    return stripped[0]
    except (OSError, UnicodeDecodeError, EOFError):
        return ""


def _str_column(names: Sequence[str] | np.ndarray, codes: np.ndarray) -> pd.Series:
    """A string column taking ``names[codes]`` (built in Arrow: fast for millions of rows)."""
    import pyarrow as pa

    labels = pa.array([str(n) for n in names], type=pa.large_string())
    out = labels.take(pa.array(np.asarray(codes, dtype=np.int64))).to_pandas()
    if not pd.api.types.is_string_dtype(out.dtype):  # pragma: no cover - older pandas
        out = out.astype(str)
    return out.reset_index(drop=True)


@dataclass
class _Part:
    """The responses read from one file: one LLM, one domain."""

    source: str
    llm: str
    domain: str
    items: list[str] | np.ndarray
    correct: np.ndarray


def _assemble(parts: list[_Part], what: str) -> pd.DataFrame:
    """Concatenate file parts into the long table, refusing duplicate (llm, item)."""
    if not parts or sum(len(p.correct) for p in parts) == 0:
        raise InputError(f"no responses found in {what}")
    llms = pd.Index([p.llm for p in parts]).unique()
    domains = pd.Index([p.domain for p in parts]).unique()
    sizes = np.array([len(p.correct) for p in parts])
    part_of_row = np.repeat(np.arange(len(parts)), sizes)
    llm_codes = llms.get_indexer([p.llm for p in parts])[part_of_row]
    domain_codes = domains.get_indexer([p.domain for p in parts])[part_of_row]
    items = np.concatenate([np.asarray(p.items, dtype=object) for p in parts])
    item_codes, item_names = pd.factorize(items)
    correct = np.concatenate([p.correct for p in parts]).astype(np.int8)

    key = llm_codes.astype(np.int64) * len(item_names) + item_codes
    dup = pd.Series(key).duplicated(keep=False).to_numpy()
    if dup.any():
        rows = np.flatnonzero(dup)
        first = key[rows[0]]
        same = rows[key[rows] == first]
        sources = sorted({parts[part_of_row[r]].source for r in same})
        n_pairs = len(np.unique(key[rows]))
        raise InputError(
            f"LLM {llms[llm_codes[rows[0]]]!r} answers item {item_names[item_codes[rows[0]]]!r} "
            f"more than once ({n_pairs} such pair{'s' if n_pairs > 1 else ''} in all), "
            f"from {_listing(sources, quote=False)}; pass only one run of each task per LLM"
        )
    df = pd.DataFrame(
        {
            "llm": _str_column(llms, llm_codes),
            "item": _str_column(item_names, item_codes),
            "domain": _str_column(domains, domain_codes),
            "correct": correct,
        }
    )
    return df[list(LONG_COLUMNS)]


def _binary_or_none(value: Any) -> int | None:
    """0 or 1 for a 0/1 metric value (bool, int or float), else None."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float, np.integer, np.floating)):
        if value == 0:
            return 0
        if value == 1:
            return 1
    return None


def _plain(value: Any) -> Any:
    """A numpy scalar as the Python value, for messages."""
    return value.item() if isinstance(value, np.generic) else value


def _norm_ts(ts: str | None) -> str | None:
    """A timestamp in the form ``YYYY-MM-DDTHH-MM-SS.ffffff``, for comparing."""
    if ts is None:
        return None
    return ts.replace("_", "-").replace(":", "-")


# --------------------------------------------------------------------------
# lm-evaluation-harness

_TS = r"\d{4}[-_]\d{2}[-_]\d{2}T\d{2}[-_:]\d{2}[-_:]\d{2}(?:\.\d+)?"
_TS_RE = re.compile(_TS)
_LM_SAMPLES_RE = re.compile(rf"^samples_(?P<task>.+?)(?:_(?P<ts>{_TS}))?$")
_LM_SUFFIXES = (".jsonl.gz", ".json.gz", ".jsonl", ".json")
#: lm-eval's own order of model_args keys naming the model (peft and delta
#: come with pretrained, and win).
_MODEL_ARG_KEYS = ("peft", "delta", "pretrained", "model", "path", "engine")


@dataclass
class _ResultsInfo:
    """What a results JSON of lm-eval says about its run."""

    path: Path
    ts: str | None
    model: str | None
    args_prefix: str | None  # model_args as lm-eval 0.4.0 put it in sample file names
    tasks: set[str] = field(default_factory=set)


def _model_from_args(model_args: Any) -> str | None:
    if isinstance(model_args, Mapping):
        args = {str(k): v for k, v in model_args.items()}
    elif isinstance(model_args, str):
        args = dict(kv.split("=", 1) for kv in model_args.split(",") if "=" in kv)
    else:
        return None
    for key in _MODEL_ARG_KEYS:
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def _read_results_info(path: Path) -> _ResultsInfo | None:
    try:
        with _open_text(path) as fh:
            data = json.load(fh)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, EOFError):
        return None
    if not isinstance(data, dict) or not ({"results", "config", "configs"} & data.keys()):
        return None
    config = data.get("config") if isinstance(data.get("config"), dict) else {}
    model = data.get("model_name") or config.get("model_name")
    model = model.strip() if isinstance(model, str) and model.strip() else None
    model_args = config.get("model_args")
    if model is None:
        model = _model_from_args(model_args)
    prefix = re.sub("/|=", "__", model_args) if isinstance(model_args, str) else None
    tasks = set()
    for key in ("configs", "results"):
        if isinstance(data.get(key), dict):
            tasks.update(str(t) for t in data[key])
    m = _TS_RE.search(path.name)
    return _ResultsInfo(path, _norm_ts(m.group(0)) if m else None, model, prefix, tasks)


@dataclass
class _LmFile:
    path: Path
    task: str
    ts: str | None
    llm: str


def _folder_results(folder: Path, cache: dict[Path, list[_ResultsInfo]]) -> list[_ResultsInfo]:
    if folder not in cache:
        infos = []
        for p in sorted(folder.iterdir()):
            name = p.name.lower()
            if p.is_file() and name.endswith((".json", ".json.gz")) and _first_char(p) == "{":
                info = _read_results_info(p)
                if info is not None:
                    infos.append(info)
        cache[folder] = infos
    return cache[folder]


def _lm_eval_candidates(paths: list[Path]) -> list[Path]:
    """Sample files among the given files and (recursively) folders."""
    found: list[Path] = []
    for path in paths:
        files = (
            sorted(p for p in path.rglob("*") if p.is_file())
            if path.is_dir()
            else [path]
        )
        for p in files:
            name = p.name.lower()
            if not name.endswith(_LM_SUFFIXES):
                if not path.is_dir():
                    raise InputError(f"cannot read {p}: not an lm-eval samples file (.jsonl or .json)")
                continue
            if name.startswith("samples_"):
                found.append(p)
                continue
            first = _first_char(p)
            # a JSON list is a sample file of lm-eval <= 0.4.2; a .jsonl of
            # objects is samples too; a .json object is a results file (metadata)
            if first == "[" or (first == "{" and name.endswith((".jsonl", ".jsonl.gz"))):
                found.append(p)
    # the same file given twice (a folder and a file in it) counts once
    unique = list(dict.fromkeys(p.resolve() for p in found))
    return unique


def _lm_eval_file_info(
    path: Path, llm: str | None, cache: dict[Path, list[_ResultsInfo]]
) -> _LmFile:
    infos = _folder_results(path.parent, cache)
    stem = _strip_suffixes(path.name, _LM_SUFFIXES)
    m = _LM_SAMPLES_RE.match(stem)
    if m:
        task, ts = m.group("task"), _norm_ts(m.group("ts"))
    else:
        ts = None
        task = None
        for info in infos:
            if info.args_prefix and stem.startswith(info.args_prefix + "_"):
                task = stem[len(info.args_prefix) + 1 :]
                break
        if task is None:
            known = [t for info in infos for t in info.tasks if stem.endswith("_" + t) or stem == t]
            if known:
                task = max(known, key=len)
        if task is None:
            raise InputError(
                f"{path}: cannot tell the task from the file name; lm-eval names sample files "
                "samples_<task>_<date>.jsonl (lm-eval 0.4.0-0.4.2: <model_args>_<task>.jsonl, "
                "beside the results JSON that lists the tasks, which was not found)"
            )
    if llm is not None:
        name = llm
    else:
        exact = [i.model for i in infos if ts is not None and i.ts == ts and i.model]
        names = sorted({i.model for i in infos if i.model})
        if exact:
            name = exact[0]
        elif len(names) == 1:
            name = names[0]
        elif len(names) > 1:
            raise InputError(
                f"{path}: the results files beside it name several models ({_listing(names)}); "
                "pass llm= to say which LLM these samples belong to"
            )
        else:
            name = path.parent.name
    return _LmFile(path.resolve(), task, ts, name)


def _iter_records(path: Path):
    """Yield (location, record) from a JSONL file or a JSON list file."""
    try:
        if _first_char(path) == "[":
            # lm-eval 0.4.0-0.4.2 wrote samples as json.dumps(list, indent=2)
            with _open_text(path) as fh:
                try:
                    data = json.load(fh)
                except json.JSONDecodeError as e:
                    raise InputError(f"{path}: line {e.lineno} is not valid JSON ({e.msg})") from None
            if not isinstance(data, list):
                raise InputError(f"{path}: expected a JSON list of samples or JSON lines")
            for k, record in enumerate(data, start=1):
                if not isinstance(record, dict):
                    raise InputError(f"{path}: record {k} of the JSON list is not a JSON object")
                yield f"record {k}", record
            return
        with _open_text(path) as fh:
            for lineno, line in enumerate(fh, start=1):
                stripped = line.strip()
                if not stripped:
                    continue
                try:
                    record = json.loads(stripped)
                except json.JSONDecodeError as e:
                    raise InputError(f"{path}: line {lineno} is not valid JSON ({e.msg})") from None
                if not isinstance(record, dict):
                    raise InputError(f"{path}: line {lineno} is not a JSON object")
                yield f"line {lineno}", record
    except UnicodeDecodeError as e:
        raise InputError(f"cannot read {path}: not UTF-8 text ({e.reason})") from None
    except (OSError, EOFError) as e:
        raise InputError(f"cannot read {path}: {e}") from None


def _read_lm_eval_file(
    f: _LmFile, metrics: Sequence[str], filter_name: str | None
) -> tuple[list[str], np.ndarray, str | None, str, bool] | None:
    """Read one samples file.

    Returns (doc_ids, correct, metric used, filter used, filter found) or None
    when the file has none of the metrics.
    """
    # keep only the fields needed: a sample's doc, prompts and responses can be large
    needed = ("doc_id", "filter", "metrics", *metrics)
    records = [
        (loc, {k: r[k] for k in needed if k in r}) for loc, r in _iter_records(f.path)
    ]
    if not records:
        raise InputError(f"{f.path}: no samples in the file")
    filters = list(dict.fromkeys(str(r.get("filter", "none")) for _, r in records))
    found = filter_name is not None and filter_name in filters
    chosen = filter_name if found else filters[0]
    kept = [(loc, r) for loc, r in records if str(r.get("filter", "none")) == chosen]
    first = kept[0][1]
    metric = next((m for m in metrics if m in first), None)
    if metric is None:
        return None
    doc_ids: list[str] = []
    values = np.empty(len(kept), dtype=np.int8)
    seen: dict[str, str] = {}
    for k, (loc, r) in enumerate(kept):
        if "doc_id" not in r:
            raise InputError(f"{f.path}: {loc} has no doc_id field")
        doc = str(r["doc_id"])
        if doc in seen:
            raise InputError(
                f"{f.path}: {loc} repeats doc_id {doc} of {seen[doc]} (filter {chosen!r})"
            )
        seen[doc] = loc
        if metric not in r:
            listed = r.get("metrics")
            extra = f" (its metrics: {_listing(listed)})" if isinstance(listed, list) else ""
            raise InputError(f"{f.path}: {loc} has no {metric!r} field{extra}")
        v = _binary_or_none(r[metric])
        if v is None:
            raise InputError(
                f"{f.path}: {loc}: {metric} is {r[metric]!r}, not 0 or 1; "
                "choose a binary metric with metric= (e.g. acc, acc_norm, exact_match)"
            )
        doc_ids.append(doc)
        values[k] = v
    return doc_ids, values, metric, chosen, found


def _domain_mapper(
    domain_from: str | Mapping[str, str] | Callable[[str], str], tasks: Sequence[str]
) -> dict[str, str]:
    tasks = list(dict.fromkeys(tasks))
    if callable(domain_from):
        out = {}
        for t in tasks:
            d = domain_from(t)
            if not isinstance(d, str) or not d.strip():
                raise InputError(f"domain_from gave {d!r} for task {t!r}; expected a non-empty string")
            out[t] = d
        return out
    if isinstance(domain_from, Mapping):
        missing = [t for t in tasks if t not in domain_from]
        if missing:
            raise InputError(f"domain_from has no domain for task{'s' if len(missing) > 1 else ''} {_listing(missing)}")
        return {t: str(domain_from[t]) for t in tasks}
    if domain_from == "task":
        return {t: t for t in tasks}
    if domain_from == "common-prefix":
        if len(tasks) < 2:
            return {t: t for t in tasks}
        split = [t.split("_") for t in tasks]
        k = 0
        while all(len(s) > k + 1 for s in split) and len({s[k] for s in split}) == 1:
            k += 1
        return {t: "_".join(s[k:]) for t, s in zip(tasks, split)}
    raise InputError(
        f"domain_from must be 'task', 'common-prefix', a mapping or a function, not {domain_from!r}"
    )


def from_lm_eval(
    paths: PathArg,
    *,
    metric: str | Sequence[str] = "acc",
    llm: str | None = None,
    domain_from: str | Mapping[str, str] | Callable[[str], str] = "task",
    filter: str | None = None,  # noqa: A002 - the name lm-eval uses
) -> pd.DataFrame:
    """Read lm-evaluation-harness ``--log_samples`` output into the long table.

    lm-eval (0.4.3 and later) writes, for ``--output_path results``, one folder
    per model, ``results/<model_name_sanitized>/``, holding
    ``results_<date>.json`` (``model_name``, ``config.model_args``, ...) and one
    ``samples_<task>_<date>.jsonl`` per task, ``<date>`` like
    ``2024-05-13T12-30-45.123456``.  Each line is one sample: ``doc_id``,
    ``doc``, ``target``, ``arguments``, ``resps``, ``filtered_resps``,
    ``filter``, ``metrics`` (the metric names) and each metric's value as a
    top-level key (``"acc": 1.0``).  lm-eval 0.4.0-0.4.2 wrote instead
    ``<model_args>_<task>.jsonl`` files holding one JSON list, beside the
    results JSON; those are read too (the task is found from the results JSON).
    ``.gz``-compressed files are read as well.

    Parameters
    ----------
    paths
        A samples file, a folder (searched recursively) or a list of them.
        Results JSON files met on the way are read for the model name only.
    metric
        The per-sample metric that says whether the answer is correct, e.g.
        ``"acc"``, ``"acc_norm"``, ``"exact_match"``; or a sequence of names,
        of which each file uses the first it has.  Values must be 0 or 1
        (``0.0``/``1.0`` and booleans are accepted).  A file whose samples
        have none of the metrics (a generative task when asking for ``acc``)
        is left out with a warning.
    llm
        The LLM name for all the files.  By default it is ``model_name`` from
        the results JSON of the same run (same ``<date>``, else the only model
        named in the folder's results files; else the ``pretrained=`` part of
        ``config.model_args``), and failing that the folder name.
    domain_from
        How a task name becomes a domain: ``"task"`` (default) keeps it;
        ``"common-prefix"`` strips the ``_``-separated prefix shared by all
        tasks read (``mmlu_abstract_algebra``, ``mmlu_anatomy`` become
        ``abstract_algebra``, ``anatomy``); a mapping task -> domain; or a
        function of the task name.
    filter
        lm-eval logs a sample once per filter of its task (generative tasks
        may have several, e.g. ``strict-match`` and ``flexible-extract``).
        By default each file keeps the first filter in it; with ``filter``
        given, files that have that filter keep it and the others keep their
        first one (with a warning).  Samples without a ``filter`` field count
        as filter ``"none"``, lm-eval's name for no filter.

    Returns
    -------
    pandas.DataFrame
        Columns ``llm, item, domain, correct``; the item is
        ``<task>/<doc_id>``, so items line up across LLMs.  Rows come file by
        file (sorted paths), in the order of the samples.

    Raises
    ------
    InputError
        A line that is not JSON (file and line named), a sample without
        ``doc_id`` or without the metric, a metric that is not 0/1, a doc
        repeated within a file, an LLM answering the same item from two
        files, a task that cannot be told from a legacy file name, or no
        samples at all.

    Notes
    -----
    When the same LLM and task occur in several files (a task rerun into the
    same output folder), the file with the latest ``<date>`` is used, as
    lm-eval itself does; files without a date in their name then count as
    oldest.
    """
    metrics = [metric] if isinstance(metric, str) else list(metric)
    if not metrics:
        raise InputError("metric must name at least one metric")
    roots = _as_paths(paths)
    what = ", ".join(str(p) for p in roots)
    candidates = _lm_eval_candidates(roots)
    if not candidates:
        raise InputError(f"no lm-eval samples files (samples_<task>_<date>.jsonl) found in {what}")
    cache: dict[Path, list[_ResultsInfo]] = {}
    files = [_lm_eval_file_info(p, llm, cache) for p in candidates]

    # keep the latest run of each (llm, task)
    by_key: dict[tuple[str, str], list[_LmFile]] = {}
    for f in files:
        by_key.setdefault((f.llm, f.task), []).append(f)
    chosen: list[_LmFile] = []
    for (name, task), group in by_key.items():
        if len(group) > 1:
            group = sorted(group, key=lambda f: (f.ts is not None, f.ts or ""))
            a, b = group[-2], group[-1]
            if (a.ts is not None, a.ts) == (b.ts is not None, b.ts):
                raise InputError(
                    f"LLM {name!r} has task {task!r} in both {a.path} and {b.path}, "
                    "and their dates do not say which is newer; pass only one"
                )
        chosen.append(group[-1])
    chosen.sort(key=lambda f: str(f.path))

    parts: list[_Part] = []
    tasks: list[str] = []
    no_metric: list[str] = []
    no_filter: list[str] = []
    filter_seen = False
    for f in chosen:
        got = _read_lm_eval_file(f, metrics, filter)
        if got is None:
            no_metric.append(str(f.path))
            continue
        doc_ids, values, _, _, found = got
        filter_seen |= found
        if filter is not None and not found:
            no_filter.append(str(f.path))
        parts.append(_Part(str(f.path), f.llm, f.task, [f"{f.task}/{d}" for d in doc_ids], values))
        tasks.append(f.task)
    if no_metric:
        if not parts:
            raise InputError(
                f"no samples file in {what} has the metric {_listing(metrics)} "
                f"(e.g. {no_metric[0]}); choose the metric with metric="
            )
        warnings.warn(
            f"left out {len(no_metric)} samples file{'s' if len(no_metric) > 1 else ''} without "
            f"the metric {_listing(metrics)}: {_listing(no_metric, quote=False)}",
            DataWarning,
            stacklevel=2,
        )
    if filter is not None:
        if not filter_seen:
            raise InputError(f"no samples file in {what} has the filter {filter!r}")
        if no_filter:
            warnings.warn(
                f"filter {filter!r} is not in {len(no_filter)} file{'s' if len(no_filter) > 1 else ''}, "
                f"which keep their first filter: {_listing(no_filter, quote=False)}",
                DataWarning,
                stacklevel=2,
            )
    domains = _domain_mapper(domain_from, tasks)
    for p, task in zip(parts, tasks):
        p.domain = domains[task]
    return _assemble(parts, what)


# --------------------------------------------------------------------------
# Open LLM Leaderboard v1 details

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
    lowered = [n.lower() for n in names]
    if any(n == "latest" or n.startswith(("latest-", "latest_")) for n in lowered):
        level = 2
    elif any(n == "train" or n.startswith(("train-", "train_")) for n in lowered):
        level = 1
    else:
        level = 0
    if ts is None:
        ts = next((tm.group(0) for n in names if (tm := _TS_RE.search(n))), None)
    shard = None
    if in_folder and not _TS_RE.search(stem):
        sm = _SHARD_RE.match(stem)
        if sm:
            shard = int(sm.group("shard"))
    name = llm if llm is not None else _oll_model(path)
    if name is None:
        raise InputError(
            f"{path}: cannot tell the model; expected a parent folder (or file name) "
            "details_<org>__<model>, or pass llm="
        )
    return _OllFile(path.resolve(), name, config, domain, (level, _norm_ts(ts) or ""), shard)


def _oll_read(f: _OllFile, metric: str) -> tuple[np.ndarray, np.ndarray] | None:
    """Item ids and 0/1 values of one file; None when it lacks the metric."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    try:
        schema = pq.read_schema(f.path)
    except Exception as e:  # pyarrow raises several types for a bad file
        raise InputError(f"cannot read {f.path}: not a Parquet file ({e})") from None
    names = schema.names
    id_col = next((c for c in ("idx", "doc_id") if c in names), None)
    if metric in names:
        source = metric
    elif "metrics" in names:
        source = "metrics"
        t = schema.field("metrics").type
        if pa.types.is_struct(t):
            if t.get_field_index(metric) < 0:
                return None
        elif not pa.types.is_map(t):
            raise InputError(
                f"{f.path}: column metrics has type {t}; expected a struct (or map) of metric values"
            )
    else:
        return None
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


def from_open_llm_leaderboard(
    paths: PathArg,
    *,
    metric: str = "acc",
    tasks: str | Sequence[str] | None = None,
    llm: str | None = None,
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
        column ``metrics`` (``{"acc": 1.0}``).  Values must be 0 or 1.  A file
        without the metric (TruthfulQA's ``mc1``/``mc2`` when asking for
        ``acc``) is left out with a warning.
    tasks
        Shell-style patterns over configuration names that select the files
        to read, e.g. :data:`MMLU_TASKS` (``"harness_hendrycksTest_*_5"``) or
        :data:`LEADERBOARD_V1_TASKS`.  By default all.  A repository that holds
        the same benchmark in two settings (MMLU 0-shot and 5-shot) needs one
        chosen here.
    llm
        The LLM name for all files; by default ``<org>/<model>`` from the
        nearest ``details_<org>__<model>`` in the file name or its folders.

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
        (file and rows named), an unreadable file, a model answering the same
        item twice (two settings of a task, or two runs with no date to order
        them), or no responses at all.

    Notes
    -----
    When one model has several files for a configuration, the ``latest``
    split wins, then ``train``, then the latest date.  Files numbered as
    shards of one split (``0000.parquet``, ``0001.parquet``) are read in order
    as one.  Only the needed columns are read, so the large prompt columns
    (``example``, ``full_prompt``, ``instruction``, ...) cost nothing.
    """
    patterns = [tasks] if isinstance(tasks, str) else (list(tasks) if tasks is not None else None)
    roots = _as_paths(paths)
    what = ", ".join(str(p) for p in roots)
    found: list[Path] = []
    for root in roots:
        if root.is_dir():
            found.extend(sorted(p for p in root.rglob("*.parquet") if p.is_file()))
        elif root.name.lower().endswith(".parquet"):
            found.append(root)
        else:
            raise InputError(f"cannot read {root}: not a Parquet file")
    found = list(dict.fromkeys(p.resolve() for p in found))
    infos = [i for i in (_oll_file_info(p, llm) for p in found) if i is not None]
    if patterns is not None:
        infos = [i for i in infos if any(fnmatch.fnmatchcase(i.config, pat) for pat in patterns)]
    if not infos:
        sel = f" matching {_listing(patterns)}" if patterns is not None else ""
        raise InputError(f"no Open LLM Leaderboard details files{sel} found in {what}")

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
        selected.append(top)
    selected.sort(key=lambda fs: str(fs[0].path))

    parts: list[_Part] = []
    no_metric: list[str] = []
    for files in selected:
        ids_all, vals_all = [], []
        missing = False
        for f in files:
            got = _oll_read(f, metric)
            if got is None:
                missing = True
                break
            ids_all.append(got[0])
            vals_all.append(got[1])
        if missing:
            no_metric.append(str(files[0].path))
            continue
        values = np.concatenate(vals_all)
        if any(i is None for i in ids_all):
            ids = np.arange(len(values)).astype(str).astype(object)
        else:
            ids = np.concatenate(ids_all)
        f0 = files[0]
        items = (f0.domain + "/" + pd.Series(ids, dtype=object).astype(str)).to_numpy(dtype=object)
        parts.append(_Part(str(f0.path), f0.llm, f0.domain, items, values))
    if no_metric:
        if not parts:
            raise InputError(
                f"no details file in {what} has the metric {metric!r} "
                f"(e.g. {no_metric[0]}); choose it with metric="
            )
        warnings.warn(
            f"left out {len(no_metric)} details file{'s' if len(no_metric) > 1 else ''} without "
            f"the metric {metric!r}: {_listing(no_metric, quote=False)}",
            DataWarning,
            stacklevel=2,
        )
    try:
        return _assemble(parts, what)
    except InputError as e:
        if "more than once" in str(e):
            raise InputError(
                f"{e}; if these are two settings of one benchmark, choose one with tasks= "
                "(e.g. tasks='harness_hendrycksTest_*_5')"
            ) from None
        raise


# --------------------------------------------------------------------------
# wide matrix

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


def from_wide(
    path_or_frame: str | os.PathLike | pd.DataFrame,
    item_domain: Mapping[str, str] | pd.Series | str | os.PathLike | None = None,
    *,
    llm_column: str | None = None,
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
        item name, an ``llm_column`` that does not exist, or no responses.
    """
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

    # domains first: a cheap check before the big conversion
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
        how = "item_domain does not list them" if item_domain is not None else "item_domain was not given"
        raise InputError(
            f"{where}: no domain for item{'s' if len(no_domain) > 1 else ''} {_listing(no_domain)} "
            f"({len(no_domain)} in all; {how} and their names are not <domain>/<item> or <domain>:<item>)"
        )

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

    r, c = np.nonzero(observed)
    if len(r) == 0:
        raise InputError(f"no responses found in {where}: every cell is blank")
    dom_codes, dom_names = pd.factorize(domains)
    df = pd.DataFrame(
        {
            "llm": _str_column(llms, r),
            "item": _str_column(np.asarray(items, dtype=object), c),
            "domain": _str_column(np.asarray(dom_names, dtype=object), dom_codes[c]),
            "correct": values[r, c].astype(np.int8),
        }
    )
    return df[list(LONG_COLUMNS)]


# --------------------------------------------------------------------------
# dispatch

_ALIASES = {
    "lm-eval": "lm-eval",
    "lmeval": "lm-eval",
    "lm-evaluation-harness": "lm-eval",
    "open-llm-leaderboard": "open-llm-leaderboard",
    "open-llm": "open-llm-leaderboard",
    "openllm": "open-llm-leaderboard",
    "wide": "wide",
}


def convert(kind: str, src: Any, **kw: Any) -> pd.DataFrame:
    """Convert results of a known kind to the long table.

    Parameters
    ----------
    kind
        One of :data:`CONVERT_KINDS`: ``"lm-eval"`` (:func:`from_lm_eval`),
        ``"open-llm-leaderboard"`` (:func:`from_open_llm_leaderboard`) or
        ``"wide"`` (:func:`from_wide`); case, ``_`` for ``-`` and a few
        aliases (``lm-evaluation-harness``, ``open-llm``) are accepted.
    src
        What the converter reads: a file, a folder or a list of them, or for
        ``"wide"`` one CSV file (or a one-element list) or a DataFrame.
    **kw
        Passed on to the converter (``metric=``, ``llm=``, ``tasks=``,
        ``item_domain=``, ...).

    Returns
    -------
    pandas.DataFrame
        The long table ``llm, item, domain, correct``.

    Raises
    ------
    InputError
        An unknown kind, or whatever the converter raises.
    """
    key = _ALIASES.get(str(kind).strip().lower().replace("_", "-"))
    if key is None:
        raise InputError(f"unknown kind {kind!r}: expected one of {', '.join(CONVERT_KINDS)}")
    if key == "lm-eval":
        return from_lm_eval(src, **kw)
    if key == "open-llm-leaderboard":
        return from_open_llm_leaderboard(src, **kw)
    if isinstance(src, (list, tuple)):
        if len(src) != 1:
            raise InputError(f"wide reads one matrix, got {len(src)} sources")
        src = src[0]
    return from_wide(src, **kw)
