"""What every importer shares: paths, text files, messages, the long table they build.

An importer reads one format into :class:`_Part` objects (the responses of one
LLM in one domain, from one file) and hands them to :func:`_assemble`, which
builds the long table ``llm, item, domain, correct``, refuses an LLM answering
one item twice and reports (:func:`_report_aliases`) the same LLM under two
spellings or the same item content under two ids.

Every input is accounted for in a :class:`_Ledger`: each source (file, run
folder, log) either gave responses, gave none (and why: the splits, metrics or
fields it has), was superseded by a later run of the same task, or was not
selected.  A source that gives none is an error naming it unless
``allow_empty`` (then a :class:`~mtlirt.data.validate.DataWarning`); the
ledger's one-line summary is what ``mtlirt convert`` prints.  Messages name an
option as the caller gives it (:func:`_opt`): ``--split valid`` on the command
line, ``split='valid'`` from Python.
"""

from __future__ import annotations

import gzip
import os
import re
import shlex
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ...errors import InputError
from ..tables import LONG_COLUMNS
from ..validate import DataWarning

#: How many offending values an error message lists before "and N more".
_SHOW = 5

PathArg = str | os.PathLike | Iterable[str | os.PathLike]

#: A run's date as harnesses write it in file names: ``2024-05-13T12-30-45.123456``.
_TS = r"\d{4}[-_]\d{2}[-_]\d{2}T\d{2}[-_:]\d{2}[-_:]\d{2}(?:\.\d+)?"
_TS_RE = re.compile(_TS)


def _listing(values: Sequence[Any], *, quote: bool = True, show: int = _SHOW) -> str:
    values = list(values)
    fmt = repr if quote else str
    shown = ", ".join(fmt(v) for v in values[:show])
    more = f" and {len(values) - show} more" if len(values) > show else ""
    return shown + more


def _plural(n: int, noun: str) -> str:
    """``"1 HELM run"``, ``"2 HELM runs"``."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


# --------------------------------------------------------------------------
# options as the caller gives them, and the summaries of a conversion


@dataclass
class _Caller:
    """How the converters were called: the command line's flags, and where summaries go."""

    flags: Mapping[str, str]  # converter keyword -> command-line flag
    summaries: list[str] = field(default_factory=list)


_CALLER: ContextVar[_Caller | None] = ContextVar("mtlirt_importer_caller", default=None)

_NO_VALUE = object()


@contextmanager
def _command_line(flags: Mapping[str, str]) -> Iterator[list[str]]:
    """Within the block, messages name options by their ``flags``; yields the conversion summaries."""
    caller = _Caller(dict(flags))
    token = _CALLER.set(caller)
    try:
        yield caller.summaries
    finally:
        _CALLER.reset(token)


def _opt(keyword: str, value: Any = _NO_VALUE) -> str:
    """An option as the caller gives it: ``--split valid`` on the command line, ``split='valid'`` in Python.

    Without ``value``, the option's name: ``--split`` or ``split``.  A keyword
    without a flag (a Python-only option) is always named in the Python form.
    """
    caller = _CALLER.get()
    flag = caller.flags.get(keyword) if caller is not None else None
    if flag is None:
        if value is _NO_VALUE:
            return keyword
        return f"{keyword}={value:g}" if isinstance(value, float) else f"{keyword}={value!r}"
    if value is _NO_VALUE or value is True:
        return flag
    if isinstance(value, float):
        return f"{flag} {value:g}"
    text = ",".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)
    return f"{flag} {shlex.quote(text)}"


def _give(keyword: str) -> str:
    """How to give an option, for "pass ..." and "choose one with ...": ``--metric`` or ``metric=``."""
    named = _opt(keyword)
    return named if named.startswith("-") else f"{keyword}="


@dataclass
class _Skip:
    """Why a source gave no responses (``why``, a phrase naming what it has) and the option that would read it."""

    why: str
    hint: str | None = None

    def __str__(self) -> str:
        return self.why + (f" ({self.hint})" if self.hint else "")


class _Threshold:
    """A ``threshold`` and the range of the metric values it was compared with.

    :meth:`check` refuses a threshold outside the metric's scale, which would
    make every response correct or every one incorrect: ``(0, 1]`` when every
    value read lies in ``[0, 1]`` (a proportion: F1, a partial score, a mean of
    0/1 results), else above the smallest value and at most the largest.
    """

    def __init__(self, value: float) -> None:
        self.value = value
        self.low = np.inf
        self.high = -np.inf

    def __format__(self, spec: str) -> str:
        return format(self.value, spec or "g")

    def __str__(self) -> str:
        return format(self)

    def correct(self, x: float) -> int:
        self.low = min(self.low, x)
        self.high = max(self.high, x)
        return int(x >= self.value)

    def check(self, metric: str) -> None:
        if self.low > self.high:
            return  # nothing was compared
        t = self.value
        span = f"{self.low:g} to {self.high:g}"
        if 0 <= self.low and self.high <= 1:
            if not 0 < t <= 1:
                every = "incorrect" if t > 1 else "correct"
                raise InputError(
                    f"{_opt('threshold', t)} is outside (0, 1]: the values of {metric} read are proportions "
                    f"({span}), so every response would count as {every}"
                )
        elif self.low == self.high:
            raise InputError(
                f"every value of {metric} read is {self.low:g}: no threshold tells the responses apart "
                f"(choose another metric with {_give('metric')})"
            )
        elif not self.low < t <= self.high:
            every = "incorrect" if t > self.high else "correct"
            raise InputError(
                f"{_opt('threshold', t)} is outside the values of {metric} read ({span}): every response would "
                f"count as {every}; give a threshold above {self.low:g} and at most {self.high:g}"
            )
        if t > self.high or t <= self.low:
            every = "incorrect" if t > self.high else "correct"
            warnings.warn(
                f"{_opt('threshold', t)} is {'above' if t > self.high else 'at or below'} every value of {metric} "
                f"read ({span}): every response counts as {every}",
                DataWarning,
                stacklevel=4,
            )


@dataclass
class _Source:
    name: str
    state: str  # "read", "empty", "superseded", "unselected", "not-data"
    responses: int = 0
    skip: _Skip | None = None


class _Ledger:
    """The account of one conversion: what each source (file, run folder, log) gave, or why it gave nothing.

    ``noun`` names a source in messages (``"HELM run"``, ``"samples file"``).
    The importer records every source it finds once: :meth:`read` (with the
    number of responses; 0 counts as empty), :meth:`empty` (with the reason),
    :meth:`superseded` (a later run of the same LLM and task is read instead),
    :meth:`unselected` (not matching ``tasks``) or :meth:`not_data` (a file
    of the format that holds no per-item results); :meth:`finish` then checks
    and builds the table.
    """

    def __init__(self, noun: str) -> None:
        self.noun = noun
        self.sources: dict[str, _Source] = {}

    def _add(self, name: Any, state: str, responses: int = 0, skip: _Skip | None = None) -> None:
        self.sources[str(name)] = _Source(str(name), state, responses, skip)

    def read(self, name: Any, responses: int, *, empty: _Skip | None = None) -> None:
        """``name`` gave ``responses`` (``empty`` says why, when they are 0)."""
        if responses:
            self._add(name, "read", responses)
        else:
            self.empty(name, empty or _Skip("no responses"))

    def empty(self, name: Any, skip: _Skip) -> None:
        self._add(name, "empty", skip=skip)

    def superseded(self, name: Any) -> None:
        self._add(name, "superseded")

    def unselected(self, name: Any) -> None:
        self._add(name, "unselected")

    def not_data(self, name: Any) -> None:
        self._add(name, "not-data")

    def of(self, state: str) -> list[_Source]:
        return [s for s in self.sources.values() if s.state == state]

    def _reasons(self, empty: Sequence[_Source]) -> str:
        """The empty sources grouped by reason: ``A and B: no stat 'x' (...); C: ...``."""
        groups: dict[str, list[str]] = {}
        for s in empty:
            groups.setdefault(str(s.skip), []).append(s.name)
        shown = [f"{_listing(names, quote=False)}: {why}" for why, names in list(groups.items())[:_SHOW]]
        more = f"; and {len(groups) - _SHOW} more reasons" if len(groups) > _SHOW else ""
        return "; ".join(shown) + more

    def summary(self) -> str:
        """One line: how many sources gave responses, and what became of the others."""
        read, empty = self.of("read"), self.of("empty")
        total = len(read) + len(empty) + len(self.of("superseded")) + len(self.of("unselected"))
        n = sum(s.responses for s in read)
        head = f"read {len(read)} of {_plural(total, self.noun)}" if total != len(read) else (
            f"read {_plural(total, self.noun)}")
        clauses = [f"{head} ({n:,} responses)"]
        if empty:
            names = [Path(e.name).name for e in empty]
            clauses.append(f"left out {len(empty)} that give{'s' if len(empty) == 1 else ''} no responses "
                           f"({_listing(names, quote=False)})")
        if sup := self.of("superseded"):
            clauses.append(f"{len(sup)} superseded by the latest run of the same LLM and task")
        if uns := self.of("unselected"):
            clauses.append(f"{len(uns)} not matching {_opt('tasks')}")
        if nd := self.of("not-data"):
            clauses.append(f"skipped {len(nd)} aggregated results file{'' if len(nd) == 1 else 's'}")
        return "; ".join(clauses)

    def finish(
        self,
        parts: list[_Part],
        what: str,
        *,
        allow_empty: bool,
        threshold: _Threshold | None = None,
        metric: str = "the metric",
    ) -> pd.DataFrame:
        """Refuse sources without responses (unless ``allow_empty``), check the threshold, build the table."""
        read, empty = self.of("read"), self.of("empty")
        if empty and not read:
            raise InputError(f"no responses found in {what}: {self._reasons(empty)}")
        if empty:
            if not allow_empty:
                them = "it" if len(empty) == 1 else "them"
                gives = "gives" if len(empty) == 1 else "give"
                raise InputError(
                    f"{len(empty)} of {_plural(len(read) + len(empty), self.noun)} {gives} no responses: "
                    f"{self._reasons(empty)}; pass {_opt('allow_empty', True)} to leave {them} out"
                )
            groups: dict[str, list[str]] = {}
            for s in empty:
                groups.setdefault(str(s.skip), []).append(s.name)
            for why, names in groups.items():
                warnings.warn(
                    f"left out {_plural(len(names), self.noun)} that give{'s' if len(names) == 1 else ''} "
                    f"no responses: {_listing(names, quote=False)}: {why}",
                    DataWarning,
                    stacklevel=3,
                )
        if threshold is not None:
            threshold.check(metric)
        df = _assemble(parts, what)
        _summarize(self.summary())
        return df


def _summarize(line: str) -> None:
    """Hand a conversion's summary line to the command line (nothing from Python)."""
    caller = _CALLER.get()
    if caller is not None:
        caller.summaries.append(line)


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
    """The responses read from one file: one LLM, one domain.

    ``hashes``, when the format records the content of each item (its prompt
    and reference, or a hash of them), holds one key per item (``None`` where
    unknown); :func:`_report_aliases` uses it to find one item under two ids.
    """

    source: str
    llm: str
    domain: str
    items: list[str] | np.ndarray
    correct: np.ndarray
    hashes: list[str | None] | None = None


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
    _report_aliases(parts, list(llms))
    df = pd.DataFrame(
        {
            "llm": _str_column(llms, llm_codes),
            "item": _str_column(item_names, item_codes),
            "domain": _str_column(domains, domain_codes),
            "correct": correct,
        }
    )
    return df[list(LONG_COLUMNS)]


def _llm_key(name: str) -> str:
    """An LLM name with the spellings of one model made equal.

    Case is ignored and ``__`` (how Hugging Face repositories and harness
    folders write the ``/`` of ``org/model``) counts as ``/``;
    ``Org__Model-7B`` and ``org/model-7b`` have the same key.
    """
    return re.sub(r"\s+", " ", name.strip()).lower().replace("__", "/")


def _same_llm_names(names: Sequence[str]) -> list[list[str]]:
    """Groups of two or more distinct LLM names with the same :func:`_llm_key`."""
    groups: dict[str, list[str]] = {}
    for name in dict.fromkeys(names):
        groups.setdefault(_llm_key(name), []).append(name)
    return [g for g in groups.values() if len(g) > 1]


def _report_aliases(parts: Sequence[_Part], llms: Sequence[str]) -> None:
    """Warn about one LLM under two names and one item's content under two ids.

    Both are left as read (a warning, not an error): two names may be two
    checkpoints a user wants apart, and a benchmark may hold one question
    twice; but a fit would silently treat them as different LLMs or items, so
    each case is named, with the files it came from.
    """
    same = _same_llm_names(llms)
    if same:
        sources: dict[str, str] = {}
        for p in parts:
            sources.setdefault(p.llm, p.source)
        shown = "; ".join(
            " and ".join(f"{n!r} (from {sources[n]})" if n in sources else repr(n) for n in g) for g in same[:_SHOW]
        )
        more = f" and {len(same) - _SHOW} more" if len(same) > _SHOW else ""
        warnings.warn(
            f"{len(same)} LLM{'s appear' if len(same) > 1 else ' appears'} under two or more names that differ "
            f"only in case or in '__' for '/': {shown}{more}; they are kept apart: rename them ({_give('llm')}) "
            "if they are one model",
            DataWarning,
            stacklevel=4,
        )
    ids_of: dict[str, dict[str, str]] = {}
    for p in parts:
        if p.hashes is None:
            continue
        for item, h in zip(p.items, p.hashes):
            if h is not None:
                ids_of.setdefault(h, {}).setdefault(str(item), p.source)
    twice = [ids for ids in ids_of.values() if len(ids) > 1]
    if twice:
        shown = "; ".join(" and ".join(repr(i) for i in ids) for ids in twice[:_SHOW])
        more = f" and {len(twice) - _SHOW} more" if len(twice) > _SHOW else ""
        files = sorted({src for ids in twice for src in ids.values()})
        warnings.warn(
            f"{len(twice)} item content{'s appear' if len(twice) > 1 else ' appears'} under two or more ids "
            f"(same prompt and reference): {shown}{more}, in {_listing(files, quote=False)}; they are kept as "
            "separate items (a benchmark may repeat a question; a renumbered copy of a task would count twice)",
            DataWarning,
            stacklevel=4,
        )
