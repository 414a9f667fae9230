"""UK AISI Inspect evaluation logs: ``.eval`` archives and ``.json`` logs."""

from __future__ import annotations

import fnmatch
import json
import math
import warnings
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ...errors import InputError
from ..validate import DataWarning
from ._common import PathArg, _as_paths, _give, _Ledger, _listing, _Part, _Skip, _Threshold
from ._records import (
    _check_threshold,
    _content_hash,
    _files_under,
    _get,
    _metadata_domain,
    _metadata_field,
    _not_binary,
    _pattern_list,
    _read_json,
    _to_correct,
)

#: Inspect's letter scores (``inspect_ai.scorer``: CORRECT, INCORRECT, PARTIAL, NOANSWER).
_LETTERS = {"C": 1.0, "I": 0.0, "P": 0.5, "N": 0.0}
_WORDS = {"yes": 1.0, "true": 1.0, "no": 0.0, "false": 0.0}


@dataclass
class _Log:
    """What one log holds: its header, samples and reductions."""

    path: Path
    header: dict[str, Any]
    samples: list[tuple[str, dict[str, Any]]]  # (where, sample)
    reductions: list[dict[str, Any]]

    @property
    def task(self) -> str:
        return str(_get(self.header, "eval.task", str(self.path))).rsplit("/", 1)[-1]

    @property
    def model(self) -> str:
        return str(_get(self.header, "eval.model", str(self.path)))


def _zip_json(z: zipfile.ZipFile, name: str, path: Path) -> Any:
    try:
        return json.loads(z.read(name).decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: {name} is not valid JSON ({e})") from None


def _read_log(path: Path) -> _Log:
    """Read a ``.eval`` archive (``header.json``, ``samples/*.json``, ``reductions.json``) or a ``.json`` log."""
    if path.suffix == ".json":
        data = _read_json(path)
        if not isinstance(data, dict) or "eval" not in data:
            raise InputError(f"{path}: not an Inspect log (no field 'eval')")
        samples = data.get("samples") or []
        return _Log(path, data, [(f"samples[{k}]", s) for k, s in enumerate(samples)], data.get("reductions") or [])
    try:
        with zipfile.ZipFile(path) as z:
            names = z.namelist()
            if "header.json" not in names:
                raise InputError(f"{path}: no header.json in the archive (an unfinished log?)")
            header = _zip_json(z, "header.json", path)
            samples = [
                (n, _zip_json(z, n, path)) for n in sorted(names) if n.startswith("samples/") and n.endswith(".json")
            ]
            reductions = _zip_json(z, "reductions.json", path) if "reductions.json" in names else []
    except (zipfile.BadZipFile, OSError) as e:
        raise InputError(f"cannot read {path}: not an Inspect .eval archive ({e})") from None
    return _Log(path, header, samples, reductions or [])


def _score_float(value: Any) -> float | None:
    """A score value as Inspect's ``value_to_float`` reads it; None when it is not a scalar."""
    if isinstance(value, (bool, int, float)):
        return float(value)
    if isinstance(value, str):
        if value in _LETTERS:
            return _LETTERS[value]
        if value.lower() in _WORDS:
            return _WORDS[value.lower()]
        try:
            x = float(value)
        except ValueError:
            return None
        return x if math.isfinite(x) else None
    return None


def _scorers(log: _Log) -> list[str]:
    """The scorers a log names: ``eval.scorers``, then those in its samples' scores."""
    names = [str(sc["name"]) for sc in log.header.get("eval", {}).get("scorers") or []
             if isinstance(sc, dict) and sc.get("name")]
    for _, s in log.samples:
        if isinstance(s.get("scores"), dict):
            names.extend(str(k) for k in s["scores"])
    return list(dict.fromkeys(names))


def _scorer_of(log: _Log, scorer: str | None) -> str | _Skip:
    """The scorer to read (``scorer``, else the log's first); why there is none, naming the log's scorers."""
    scorers = _scorers(log)
    if scorer is None:
        return scorers[0] if scorers else _Skip("no scorer in eval.scorers and no scores in its samples")
    if not any(isinstance(s.get("scores"), dict) and scorer in s["scores"] for _, s in log.samples):
        return _Skip(f"no score from {scorer!r} (its scorers: {_listing(scorers, show=10) or 'none'})",
                     f"choose one with {_give('metric')}")
    return scorer


def _reduced(log: _Log, scorer: str) -> dict[str, Any] | None:
    """Each sample's score over its epochs as the log's reducer gave it, or None without reductions."""
    for red in log.reductions:
        if isinstance(red, dict) and red.get("scorer") == scorer:
            return {str(_get(s, "sample_id", f"{log.path}: reductions")): s.get("value") for s in red["samples"]}
    return None


def _sample_hash(sample: dict[str, Any]) -> str:
    text = sample.get("input")
    if isinstance(text, list):  # chat messages
        text = [m.get("content") if isinstance(m, dict) else m for m in text]
    return _content_hash(text, sample.get("target"), sample.get("choices"))


def _log_parts(
    log: _Log, scorer: str | None, threshold: _Threshold | None, field: str | None, llm: str | None
) -> tuple[list[_Part], int] | _Skip:
    """One part per domain of a log, and how many samples had no score (an error or no scorer); or why none."""
    if not log.samples:
        status = log.header.get("status")
        return _Skip(f"no samples of {log.model}" + (f" (status {status!r})" if status else ""))
    scorer = _scorer_of(log, scorer)
    if isinstance(scorer, _Skip):
        return scorer
    reduced = _reduced(log, scorer)
    task = log.task
    by_id: dict[str, dict[str, Any]] = {}
    values: dict[str, list[float]] = {}
    unscored = errored = 0
    for where, s in log.samples:
        where = f"{log.path}: {where}"
        sid = str(_get(s, "id", where))
        by_id.setdefault(sid, {"where": where, "sample": s})
        score = (s.get("scores") or {}).get(scorer)
        if s.get("error") or score is None:
            unscored += 1
            errored += bool(s.get("error"))
            continue
        x = _score_float(_get(score, "value", f"{where}: scores.{scorer}"))
        if x is None:
            raise _not_binary(where, f"scores.{scorer}.value", score.get("value"), threshold)
        values.setdefault(sid, []).append(x)
    if not values:
        return _Skip(f"no sample scored by {scorer!r} ({errored} of {len(log.samples)} ended in an error)")
    if reduced is not None:
        values = {sid: [x] for sid, v in reduced.items() if sid in values and (x := _score_float(v)) is not None}
    parts: dict[str, _Part] = {}
    for sid, xs in values.items():
        where, sample = by_id[sid]["where"], by_id[sid]["sample"]
        value = float(np.mean(xs))
        v = _to_correct(value, threshold)
        if v is None:
            field_name = f"scores.{scorer}.value" + (" (mean over epochs)" if len(xs) > 1 else "")
            raise _not_binary(where, field_name, value, threshold)
        domain = task if field is None else _metadata_domain(sample, field, where)
        part = parts.setdefault(domain, _Part(str(log.path), llm or log.model, domain, [], [], []))
        part.items.append(f"{task}/{sid}")
        part.correct.append(v)
        part.hashes.append(_sample_hash(sample))
    for p in parts.values():
        p.correct = np.array(p.correct, dtype=np.int8)
    return list(parts.values()), unscored


def _latest_logs(logs: Sequence[_Log]) -> list[_Log]:
    """The latest log (``eval.created``) of each (model, task)."""
    best: dict[tuple[str, str], _Log] = {}
    for log in logs:
        key = (log.model, log.task)
        created = str(log.header.get("eval", {}).get("created", ""))
        if key not in best or created > str(best[key].header.get("eval", {}).get("created", "")):
            best[key] = log
    return sorted(best.values(), key=lambda g: str(g.path))


def from_inspect(
    paths: PathArg,
    *,
    metric: str | None = None,
    threshold: float | None = None,
    tasks: str | Sequence[str] | None = None,
    domain_from: str = "task",
    llm: str | None = None,
    allow_empty: bool = False,
) -> pd.DataFrame:
    """Read UK AISI Inspect evaluation logs into the long table.

    ``inspect eval`` writes one log per task and model into ``./logs``: a
    ``.eval`` file, a zip archive holding ``header.json`` (``eval.task``,
    ``eval.model``, ``eval.scorers``, ``status``, ``results``), one
    ``samples/<id>_epoch_<n>.json`` per sample and epoch (``id``, ``epoch``,
    ``input``, ``target``, ``scores`` as ``{scorer: {"value", "answer", ...}}``,
    ``metadata``, ``error``) and ``reductions.json`` (per scorer, each sample's
    value reduced over the epochs); or, with ``--log-format json``, a ``.json``
    file holding the same with the samples in ``samples`` and the reductions in
    ``reductions``.

    Parameters
    ----------
    paths
        Log files, folders (searched recursively for ``*.eval`` and
        ``*.json`` logs) or a list of them.
    metric
        The scorer whose value says correct; by default the log's first
        (``eval.scorers[0].name``).
    threshold
        Score values are read as Inspect reads them: ``"C"`` 1, ``"I"`` 0,
        ``"P"`` (partial) 0.5, ``"N"`` 0, yes/no, true/false, numbers; over
        several epochs, the log's reduction (else the mean).  Without
        ``threshold`` the value must be 0 or 1; with it, a sample is correct
        when its value is at least ``threshold``, which must lie in ``(0, 1]``
        for such proportions (else within the values read).
    tasks
        Shell-style patterns over task names that select the logs.
    domain_from
        ``"task"`` (default): the task name (``mmlu_0_shot`` for
        ``inspect_evals/mmlu_0_shot``); ``"metadata.FIELD"``: the sample's
        metadata field, e.g. ``metadata.subject``.
    llm
        The LLM name for all logs; by default ``eval.model`` (``openai/gpt-4o``).
    allow_empty
        A log that gives no responses (no samples, as a log of an evaluation
        that failed or was cancelled; no score from the scorer) is an error
        naming it and what it has; with ``allow_empty`` it is left out with a
        :class:`~mtlirt.data.validate.DataWarning`.

    Returns
    -------
    pandas.DataFrame
        Columns ``llm, item, domain, correct``; the item is ``<task>/<sample id>``.
        A sample that errored or has no score is an absent row (counted in a
        warning naming the log); of several logs of one model and task the
        latest (``eval.created``) is read.

    Raises
    ------
    InputError
        A file that is not a log, a sample without ``id`` or with a score that
        is not 0/1 without ``threshold`` (file, sample and field named), a
        threshold outside the scores' values, a missing metadata field, a log
        without responses (unless ``allow_empty``), or no responses at all.
    """
    threshold = _check_threshold(threshold)
    field = _metadata_field(domain_from, "task", "Inspect logs")
    patterns = _pattern_list(tasks)
    roots = _as_paths(paths)
    what = ", ".join(str(p) for p in roots)
    files = _files_under(roots, lambda p: p.suffix in (".eval", ".json"), "an Inspect log (.eval or .json)")
    ledger = _Ledger("Inspect log")
    logs = []
    for log in (_read_log(p) for p in files if p.suffix == ".eval" or _is_json_log(p, roots)):
        if patterns is None or any(fnmatch.fnmatchcase(log.task, pat) for pat in patterns):
            logs.append(log)
        else:
            ledger.unselected(log.path)
    if not logs:
        sel = f" matching {_listing(patterns)}" if patterns is not None else ""
        raise InputError(f"no Inspect logs (.eval or .json){sel} found in {what}")
    latest = _latest_logs(logs)
    kept = {id(g) for g in latest}
    for log in logs:
        if id(log) not in kept:
            ledger.superseded(log.path)
    parts: list[_Part] = []
    for log in latest:
        got = _log_parts(log, metric, threshold, field, llm)
        if isinstance(got, _Skip):
            ledger.empty(log.path, got)
            continue
        log_parts, unscored = got
        parts.extend(log_parts)
        ledger.read(log.path, sum(len(p.correct) for p in log_parts))
        if unscored:
            warnings.warn(
                f"{log.path}: {unscored} sample{'s' if unscored > 1 else ''} without a score (an error, or no "
                "score from the scorer) left out as not observed",
                DataWarning,
                stacklevel=2,
            )
    metric_name = f"scores.{metric}" if metric is not None else "the scores"
    return ledger.finish(parts, what, allow_empty=allow_empty, threshold=threshold, metric=metric_name)


def _is_json_log(path: Path, roots: Sequence[Path]) -> bool:
    """A ``.json`` given by name is a log; one found in a folder only when it looks like one."""
    if any(path == r.resolve() for r in roots):
        return True
    with open(path, "rb") as fh:
        head = fh.read(4096)
    return b'"eval"' in head or b'"version"' in head
