"""Reading the importers' records: answers turned into 0/1 (with a threshold), JSON and JSON-lines
records, fields by path, timestamps, the domain taken from a record's metadata."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import InputError
from ._common import _first_char, _give, _open_text, _opt, _Threshold


def _content_hash(*content: Any) -> str:
    """A key of an item's content (prompt, reference), equal for equal content."""
    text = json.dumps(content, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _to_correct(value: Any, threshold: _Threshold | None) -> int | None:
    """0 or 1 for a metric value, or None when it cannot be read as one.

    Without ``threshold`` the value must be binary (a bool, or a number equal
    to 0 or 1); with it, any finite number (or bool) counts as correct when it
    is at least ``threshold`` (which records the value's range).
    """
    if threshold is None:
        return _binary_or_none(value)
    if isinstance(value, (bool, np.bool_)):
        return threshold.correct(float(value))
    if isinstance(value, (int, float, np.integer, np.floating)) and np.isfinite(value):
        return threshold.correct(float(value))
    return None


def _check_threshold(threshold: float | None) -> _Threshold | None:
    if threshold is None:
        return None
    try:
        t = float(threshold)
    except (TypeError, ValueError):
        raise InputError(f"{_opt('threshold')} must be a number, not {threshold!r}") from None
    if not np.isfinite(t):
        raise InputError(f"{_opt('threshold')} must be finite, not {threshold!r}")
    return _Threshold(t)


def _not_binary(where: str, field: str, value: Any, threshold: _Threshold | None) -> InputError:
    """The error for a metric value that is not 0/1 (or not a number, with a threshold)."""
    if threshold is None:
        return InputError(
            f"{where}: {field} is {_plain(value)!r}, not 0 or 1; give {_give('threshold')} to count "
            f"values at or above it as correct, or choose a binary metric with {_give('metric')}"
        )
    return InputError(f"{where}: {field} is {_plain(value)!r}, not a number to compare with threshold {threshold}")


def _read_json(path: Path) -> Any:
    """A JSON file's content (``.gz`` too); InputError naming the file and line."""
    try:
        with _open_text(path) as fh:
            return json.load(fh)
    except json.JSONDecodeError as e:
        raise InputError(f"{path}: line {e.lineno} is not valid JSON ({e.msg})") from None
    except UnicodeDecodeError as e:
        raise InputError(f"cannot read {path}: not UTF-8 text ({e.reason})") from None
    except (OSError, EOFError) as e:
        raise InputError(f"cannot read {path}: {e}") from None


def _files_under(roots: Sequence[Path], match, what: str) -> list[Path]:
    """The files among ``roots`` and (recursively) in the folders among them that ``match(path)``.

    A file given by name that does not match is an error naming ``what`` it
    should be; the same file reached twice counts once.
    """
    found: list[Path] = []
    for root in roots:
        if root.is_dir():
            found.extend(sorted(p for p in root.rglob("*") if p.is_file() and match(p)))
        elif match(root):
            found.append(root)
        else:
            raise InputError(f"cannot read {root}: not {what}")
    return list(dict.fromkeys(p.resolve() for p in found))


def _get(record: Any, path: str, where: str, *, required: bool = True) -> Any:
    """``record["a"]["b"]`` for ``path="a.b"``; InputError naming ``where`` and the field when absent."""
    value = record
    for key in path.split("."):
        if not isinstance(value, dict) or key not in value:
            if required:
                raise InputError(f"{where}: no field {path!r}")
            return None
        value = value[key]
    return value


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


def _pattern_list(tasks: str | Sequence[str] | None) -> list[str] | None:
    """Shell-style patterns as a list (a string is one pattern); None selects everything."""
    return [tasks] if isinstance(tasks, str) else (list(tasks) if tasks is not None else None)


def _metadata_field(domain_from: str, default: str, fmt: str) -> str | None:
    """The FIELD of ``domain_from="metadata.FIELD"``, None for ``default``; else an error naming ``fmt``."""
    if domain_from == default:
        return None
    if domain_from.startswith("metadata.") and len(domain_from) > len("metadata."):
        return domain_from.removeprefix("metadata.")
    raise InputError(
        f"{_opt('domain_from')} must be {default!r} or 'metadata.FIELD' for {fmt}, not {domain_from!r}"
    )


def _metadata_domain(record: Any, field: str, where: str) -> str:
    """A record's ``metadata.<field>`` as its domain; an error naming ``where`` when absent or empty."""
    value = _get(record, f"metadata.{field}", where)
    if value is None or not str(value).strip():
        raise InputError(f"{where}: metadata.{field} is empty")
    return str(value)
