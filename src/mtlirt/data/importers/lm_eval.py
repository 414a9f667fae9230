"""EleutherAI lm-evaluation-harness ``--log_samples`` output."""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ...errors import InputError
from ..validate import DataWarning
from ._common import (
    _TS,
    _TS_RE,
    PathArg,
    _as_paths,
    _first_char,
    _give,
    _Ledger,
    _listing,
    _open_text,
    _opt,
    _Part,
    _Skip,
    _strip_suffixes,
    _Threshold,
)
from ._records import _check_threshold, _iter_records, _norm_ts, _not_binary, _to_correct

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
                f"pass {_give('llm')} to say which LLM these samples belong to"
            )
        else:
            name = path.parent.name
    return _LmFile(path.resolve(), task, ts, name)


@dataclass
class _Samples:
    """The 0/1 results read from one task's samples (one filter)."""

    doc_ids: list[str]
    correct: np.ndarray
    hashes: list[str | None]
    metric: str
    filter: str
    filter_found: bool
    domains: list[str | None] | None = None  # per sample, where the format gives one (MMLU-Pro's category)
    filters: list[str] = field(default_factory=list)  # the filters in the file


def _sample_value(value: Any, threshold: _Threshold | None) -> int | None:
    """0/1 of a sample's metric; a list (IFEval's per-instruction results) counts by its mean."""
    if isinstance(value, (list, tuple)) and value and threshold is not None:
        if all(isinstance(v, (bool, int, float)) and v is not None for v in value):
            return _to_correct(float(np.mean([float(v) for v in value])), threshold)
        return None
    return _to_correct(value, threshold)


def _metric_names(record: Mapping[str, Any]) -> list[str]:
    """The metrics a sample has: its ``metrics`` list, else its numeric fields."""
    listed = record.get("metrics")
    if isinstance(listed, (list, tuple)) and listed:
        return [str(m) for m in listed]
    return [str(k) for k, v in record.items()
            if k not in ("doc_id", "filter") and isinstance(v, (bool, int, float)) and v is not None]


def _read_samples(
    records: Sequence[tuple[str, Mapping[str, Any]]],
    where: str,
    metrics: Sequence[str],
    filter_name: str | None,
    threshold: _Threshold | None = None,
) -> _Samples | _Skip:
    """The results of one task's samples as lm-eval logs them (one record per doc and filter).

    ``records`` are (location, sample) pairs; ``where`` names their file in
    messages.  Why there are none (no samples, none of the ``metrics``),
    naming the metrics the samples have.
    """
    if not records:
        return _Skip("no samples")
    filters = list(dict.fromkeys(str(r.get("filter", "none")) for _, r in records))
    found = filter_name is not None and filter_name in filters
    chosen = filter_name if found else filters[0]
    kept = [(loc, r) for loc, r in records if str(r.get("filter", "none")) == chosen]
    metric = next((m for m in metrics if m in kept[0][1]), None)
    if metric is None:
        has = _metric_names(kept[0][1])
        return _Skip(f"no metric {_listing(metrics)} (its metrics: {_listing(has, show=10) or 'none'})",
                     f"choose one with {_give('metric')}")
    doc_ids: list[str] = []
    hashes: list[str | None] = []
    values = np.empty(len(kept), dtype=np.int8)
    seen: dict[str, str] = {}
    for k, (loc, r) in enumerate(kept):
        if "doc_id" not in r:
            raise InputError(f"{where}: {loc} has no doc_id field")
        doc = str(r["doc_id"])
        if doc in seen:
            raise InputError(f"{where}: {loc} repeats doc_id {doc} of {seen[doc]} (filter {chosen!r})")
        seen[doc] = loc
        if metric not in r:
            listed = r.get("metrics")
            extra = f" (its metrics: {_listing(listed)})" if isinstance(listed, list) else ""
            raise InputError(f"{where}: {loc} has no {metric!r} field{extra}")
        v = _sample_value(r[metric], threshold)
        if v is None:
            err = _not_binary(f"{where}: {loc}", metric, r[metric], threshold)
            hint = " (e.g. acc, acc_norm, exact_match)" if threshold is None else ""
            raise InputError(f"{err}{hint}")
        doc_ids.append(doc)
        hashes.append(str(r["doc_hash"]) if r.get("doc_hash") else None)
        values[k] = v
    return _Samples(doc_ids, values, hashes, metric, chosen, found, filters=filters)


def _needed(record: Mapping[str, Any], metrics: Sequence[str]) -> dict[str, Any]:
    """The fields of a sample that are read: ids, filter, the metrics (and the numeric ones, for messages)."""
    needed = ("doc_id", "doc_hash", "filter", "metrics", *metrics)
    return {k: v for k, v in record.items() if k in needed or isinstance(v, (bool, int, float))}


def _read_lm_eval_file(
    f: _LmFile, metrics: Sequence[str], filter_name: str | None, threshold: _Threshold | None = None
) -> _Samples | _Skip:
    """Read one samples file (or why it gives nothing)."""
    # keep only the fields needed: a sample's doc, prompts and responses can be large
    records = [(loc, _needed(r, metrics)) for loc, r in _iter_records(f.path)]
    return _read_samples(records, str(f.path), metrics, filter_name, threshold)


def _latest_runs(files: Sequence[_LmFile], ledger: _Ledger) -> list[_LmFile]:
    """The latest run of each (LLM, task), in path order; two runs without an order are an error.

    The older runs are recorded in ``ledger`` as superseded.
    """
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
            for older in group[:-1]:
                ledger.superseded(older.path)
        chosen.append(group[-1])
    return sorted(chosen, key=lambda f: str(f.path))


def _lm_eval_parts(
    files: Sequence[_LmFile],
    metrics_for: Callable[[str], Sequence[str]],
    filter_name: str | None,
    threshold: _Threshold | None,
    what: str,
    ledger: _Ledger,
    read: Callable[..., _Samples | _Skip] = _read_lm_eval_file,
) -> tuple[list[_Part], list[str]]:
    """Read the samples files into parts (domain = task), with each task's metrics ``metrics_for(task)``.

    Each file is recorded in ``ledger``: its responses, or why it has none
    (no samples, none of its metrics).  With ``filter_name``, files without
    that filter keep their first one, with a warning naming them.
    """
    parts: list[_Part] = []
    tasks: list[str] = []
    no_filter: list[str] = []
    filters: list[str] = []
    filter_seen = False
    for f in files:
        got = read(f, metrics_for(f.task), filter_name, threshold)
        if isinstance(got, _Skip):
            ledger.empty(f.path, got)
            continue
        filters.extend(got.filters)
        filter_seen |= got.filter_found
        if filter_name is not None and not got.filter_found:
            no_filter.append(str(f.path))
        items = [f"{f.task}/{d}" for d in got.doc_ids]
        parts.append(_Part(str(f.path), f.llm, f.task, items, got.correct, got.hashes))
        tasks.append(f.task)
        ledger.read(f.path, len(items))
    if filter_name is not None and parts:
        if not filter_seen:
            raise InputError(
                f"no samples file in {what} has the filter {filter_name!r} (their filters: "
                f"{_listing(list(dict.fromkeys(filters)), show=10)}); choose one with {_give('filter')}"
            )
        if no_filter:
            warnings.warn(
                f"filter {filter_name!r} is not in {len(no_filter)} file{'s' if len(no_filter) > 1 else ''}, "
                f"which keep their first filter: {_listing(no_filter, quote=False)}",
                DataWarning,
                stacklevel=3,
            )
    return parts, tasks


def _domain_mapper(
    domain_from: str | Mapping[str, str] | Callable[[str], str], tasks: Sequence[str]
) -> dict[str, str]:
    tasks = list(dict.fromkeys(tasks))
    if callable(domain_from):
        out = {}
        for t in tasks:
            d = domain_from(t)
            if not isinstance(d, str) or not d.strip():
                raise InputError(f"{_opt('domain_from')} gave {d!r} for task {t!r}; expected a non-empty string")
            out[t] = d
        return out
    if isinstance(domain_from, Mapping):
        missing = [t for t in tasks if t not in domain_from]
        if missing:
            raise InputError(
                f"{_opt('domain_from')} has no domain for task{'s' if len(missing) > 1 else ''} {_listing(missing)}"
            )
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
        f"{_opt('domain_from')} must be 'task', 'common-prefix', a mapping or a function, not {domain_from!r}"
    )


def from_lm_eval(
    paths: PathArg,
    *,
    metric: str | Sequence[str] = "acc",
    llm: str | None = None,
    domain_from: str | Mapping[str, str] | Callable[[str], str] = "task",
    filter: str | None = None,  # noqa: A002 - the name lm-eval uses
    threshold: float | None = None,
    allow_empty: bool = False,
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
        (``0.0``/``1.0`` and booleans are accepted).
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
    threshold
        For a metric that is not 0/1 (``f1``, ``bleu``, or a list such as
        IFEval's ``inst_level_strict_acc``, which counts by its mean): a
        sample is correct when its value is at least ``threshold``, which
        must lie within the values read (in ``(0, 1]`` for a proportion).  By
        default values must be 0 or 1.
    allow_empty
        A file whose samples have none of the metrics (a generative task when
        asking for ``acc``) or no samples is an error naming it and the
        metrics it has; with ``allow_empty`` it is left out with a
        :class:`~mtlirt.data.validate.DataWarning`.

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
        ``doc_id`` or without the metric, a metric that is not 0/1, a
        threshold outside the metric's values, a file without responses
        (unless ``allow_empty``), a doc repeated within a file, an LLM
        answering the same item from two files, a task that cannot be told
        from a legacy file name, or no samples at all.

    Notes
    -----
    When the same LLM and task occur in several files (a task rerun into the
    same output folder), the file with the latest ``<date>`` is used, as
    lm-eval itself does; files without a date in their name then count as
    oldest.
    """
    metrics = [metric] if isinstance(metric, str) else list(metric)
    threshold = _check_threshold(threshold)
    if not metrics:
        raise InputError(f"{_opt('metric')} must name at least one metric")
    roots = _as_paths(paths)
    what = ", ".join(str(p) for p in roots)
    candidates = _lm_eval_candidates(roots)
    if not candidates:
        raise InputError(f"no lm-eval samples files (samples_<task>_<date>.jsonl) found in {what}")
    cache: dict[Path, list[_ResultsInfo]] = {}
    files = [_lm_eval_file_info(p, llm, cache) for p in candidates]

    ledger = _Ledger("samples file")
    parts, tasks = _lm_eval_parts(_latest_runs(files, ledger), lambda task: metrics, filter, threshold, what,
                                  ledger)
    domains = _domain_mapper(domain_from, tasks)
    for p, task in zip(parts, tasks):
        p.domain = domains[task]
    return ledger.finish(parts, what, allow_empty=allow_empty, threshold=threshold, metric=_listing(metrics))
