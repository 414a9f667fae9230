"""The Every Eval Ever datastore's instance-level records (``<uuid>_samples.jsonl``)."""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ...errors import InputError
from ._common import PathArg, _as_paths, _give, _Ledger, _listing, _opt, _Part, _Skip, _Threshold
from ._records import (
    _check_threshold,
    _content_hash,
    _files_under,
    _get,
    _iter_records,
    _metadata_domain,
    _metadata_field,
    _not_binary,
    _pattern_list,
    _to_correct,
)

_SUFFIXES = (".jsonl", ".jsonl.gz")


def _selected(record: dict[str, Any], patterns: Sequence[str] | None) -> bool:
    if patterns is None:
        return True
    names = [str(record.get(k)) for k in ("evaluation_name", "evaluation_result_id") if record.get(k) is not None]
    return any(fnmatch.fnmatchcase(n, pat) for n in names for pat in patterns)


def _record_hash(record: dict[str, Any]) -> str:
    if record.get("sample_hash"):
        return str(record["sample_hash"])
    inp = record.get("input") or {}
    return _content_hash(inp.get("raw"), inp.get("reference"))


def _read_eee_file(
    path: Path,
    metric: str,
    threshold: _Threshold | None,
    patterns: Sequence[str] | None,
    field: str | None,
    llm: str | None,
) -> tuple[list[_Part], int]:
    """One part per (model, domain) of one instance-level file, and how many records it holds."""
    parts: dict[tuple[str, str], _Part] = {}
    seen: dict[tuple[str, str, str], tuple[str, Any]] = {}
    n_records = 0
    for loc, r in _iter_records(path):
        where = f"{path}: {loc}"
        n_records += 1
        if not _selected(r, patterns):
            continue
        model = llm or str(_get(r, "model_id", where))
        evaluation = str(_get(r, "evaluation_name", where))
        sample = str(_get(r, "sample_id", where))
        key = (model, evaluation, sample)
        if key in seen:
            first, result = seen[key]
            raise InputError(
                f"{where} repeats sample {sample!r} of {evaluation!r} for {model!r} ({first}; evaluation results "
                f"{result!r} and {r.get('evaluation_result_id')!r}); select one result with {_give('tasks')}"
            )
        seen[key] = (loc, r.get("evaluation_result_id"))
        value = _get(r, f"evaluation.{metric}", where)
        v = _to_correct(value, threshold)
        if v is None:
            raise _not_binary(where, f"evaluation.{metric}", value, threshold)
        domain = evaluation if field is None else _metadata_domain(r, field, where)
        part = parts.setdefault((model, domain), _Part(str(path), model, domain, [], [], []))
        part.items.append(f"{evaluation}/{sample}")
        part.correct.append(v)
        part.hashes.append(_record_hash(r))
    for p in parts.values():
        p.correct = np.array(p.correct, dtype=np.int8)
    return list(parts.values()), n_records


def from_every_eval_ever(
    paths: PathArg,
    *,
    metric: str = "is_correct",
    threshold: float | None = None,
    tasks: str | Sequence[str] | None = None,
    domain_from: str = "evaluation",
    llm: str | None = None,
    allow_empty: bool = False,
) -> pd.DataFrame:
    """Read Every Eval Ever instance-level records into the long table.

    The datastore (``evaleval/every_eval_ever``) keeps, beside each aggregate
    log ``data/<benchmark>/<developer>/<model>/<uuid>.json``, the per-item
    results in ``<uuid>_samples.jsonl``: one JSON object per line in the
    instance-level schema (``instance_level_eval.schema.json``), with
    ``model_id``, ``evaluation_name``, ``evaluation_result_id``, ``sample_id``,
    ``sample_hash``, ``input`` (``raw``, ``reference``), ``evaluation``
    (``score``, ``is_correct``) and ``metadata``.  Its converters write these
    from HELM, Inspect and lm-eval runs.

    Parameters
    ----------
    paths
        JSONL files, folders (searched recursively for ``*.jsonl``) or a list
        of them.
    metric
        ``"is_correct"`` (default; a boolean) or ``"score"`` (any number; needs
        ``threshold`` unless it is 0/1).
    threshold
        With ``metric="score"``: correct when the score is at least
        ``threshold``, which must lie within the scores read (in ``(0, 1]``
        when they are proportions).
    tasks
        Shell-style patterns over ``evaluation_name`` or
        ``evaluation_result_id`` that select the records.  A sample scored by
        several aggregate results (one record each, e.g. HELM's
        ``exact_match:test`` and ``f1_score:test``) needs one chosen here.
    domain_from
        ``"evaluation"`` (default): the ``evaluation_name``;
        ``"metadata.FIELD"``: that metadata field of each record.
    llm
        The LLM name for all records; by default ``model_id``.
    allow_empty
        A file without records is an error naming it; with ``allow_empty`` it
        is left out with a :class:`~mtlirt.data.validate.DataWarning`.  (A file
        none of whose records match ``tasks`` is not selected, not empty.)

    Returns
    -------
    pandas.DataFrame
        Columns ``llm, item, domain, correct``; the item is
        ``<evaluation_name>/<sample_id>``.  ``sample_hash`` (else a hash of
        ``input.raw`` and ``input.reference``) finds one item under two ids.

    Raises
    ------
    InputError
        A line that is not JSON or lacks a required field (file, line and field
        named), a score that is not 0/1 without ``threshold``, a threshold
        outside the scores' values, a sample repeated for one model, a file
        without records (unless ``allow_empty``), or no responses at all.
    """
    threshold = _check_threshold(threshold)
    if metric not in ("is_correct", "score"):
        raise InputError(
            f"{_opt('metric')} must be 'is_correct' or 'score' for Every Eval Ever records, not {metric!r}"
        )
    field = _metadata_field(domain_from, "evaluation", "Every Eval Ever records")
    patterns = _pattern_list(tasks)
    roots = _as_paths(paths)
    what = ", ".join(str(p) for p in roots)
    files = _files_under(roots, lambda p: p.name.lower().endswith(_SUFFIXES), "an instance-level .jsonl file")
    if not files:
        raise InputError(f"no instance-level files (*_samples.jsonl) found in {what}")
    ledger = _Ledger("instance-level file")
    parts: list[_Part] = []
    for f in files:
        got, n_records = _read_eee_file(f, metric, threshold, patterns, field, llm)
        if not n_records:
            ledger.empty(f, _Skip("no records"))
        elif got:
            parts.extend(got)
            ledger.read(f, sum(len(p.correct) for p in got))
        else:
            ledger.unselected(f)
    if not parts and patterns is not None and not ledger.of("empty"):
        raise InputError(f"no records matching {_listing(patterns)} found in {what}")
    return ledger.finish(parts, what, allow_empty=allow_empty, threshold=threshold, metric=f"evaluation.{metric}")
