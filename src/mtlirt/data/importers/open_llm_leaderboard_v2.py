"""Open LLM Leaderboard v2 details (``open-llm-leaderboard/<org>__<model>-details``).

The v2 leaderboard ran lm-evaluation-harness's ``leaderboard`` tasks and
published each model's ``--log_samples`` output: one
``samples_leaderboard_<task>_<date>.jsonl`` per task, which the dataset
repository also exposes as configurations ``<org>__<model>__leaderboard_<task>``
(splits ``latest`` and one per run date) that Hugging Face converts to Parquet.
A sample is an lm-eval sample, read by :mod:`.lm_eval`'s sample reader.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ...errors import InputError
from ._common import _TS, PathArg, _as_paths, _give, _Ledger, _listing, _opt, _Part, _Skip, _strip_suffixes, _Threshold
from ._records import _check_threshold, _iter_records, _norm_ts, _pattern_list
from .lm_eval import _latest_runs, _lm_eval_parts, _LmFile, _needed, _read_samples, _Samples
from .open_llm_leaderboard import _split_rank

#: The metric the v2 leaderboard scored each benchmark by (the first token of
#: the task after ``leaderboard_``; ``mmlu_pro`` as a whole).  IFEval's
#: ``inst_level_*`` metrics are lists (one result per instruction): read them
#: with a threshold on their mean.
LEADERBOARD_V2_METRICS = {
    "bbh": "acc_norm",
    "gpqa": "acc_norm",
    "musr": "acc_norm",
    "mmlu_pro": "acc",
    "math": "exact_match",
    "ifeval": "prompt_level_strict_acc",
    "arc": "acc_norm",
}
_FALLBACK_METRICS = ("acc_norm", "acc", "exact_match")

_RAW_RE = re.compile(rf"^samples_(?P<task>leaderboard_.+?)_(?P<ts>{_TS})$")
_CONFIG_RE = re.compile(r"^(?P<model>.+?)__(?P<task>leaderboard_.+)$")
_SUFFIXES = (".jsonl.gz", ".json.gz", ".jsonl", ".json", ".parquet")


def _benchmark(task: str) -> str:
    sub = task.removeprefix("leaderboard_")
    return "mmlu_pro" if sub.startswith("mmlu_pro") else sub.split("_", 1)[0]


def _model_from_folders(path: Path) -> str | None:
    """``org/model`` from a ``<org>__<model>-details`` repository or an ``<org>__<model>`` folder."""
    for parent in path.parents:
        name = parent.name.removeprefix("datasets--open-llm-leaderboard--")
        if name.endswith("-details") and "__" in name:
            return name.removesuffix("-details").replace("__", "/", 1)
    if "__" in path.parent.name:
        return path.parent.name.replace("__", "/", 1)
    return None


def _v2_file(path: Path, llm: str | None) -> _LmFile | None:
    """Task, run and model of one details file; None for files that are not samples."""
    stem = _strip_suffixes(path.name, _SUFFIXES)
    m = _RAW_RE.match(stem)
    model = None
    if m:
        task, ts = m.group("task"), f"0|{_norm_ts(m.group('ts'))}"
    else:
        # <org>__<model>__leaderboard_<task>/<split>/0000.parquet, or the configuration as the file name
        names = [stem] + [p.name for p in path.parents][:3]
        cm = next((c for n in names if (c := _CONFIG_RE.match(n))), None)
        if cm is None or not path.name.lower().endswith(".parquet"):
            return None
        task, model = cm.group("task"), cm.group("model").replace("__", "/", 1)
        level, date = _split_rank(names, None)
        ts = f"{level}|{date}"
    name = llm or model or _model_from_folders(path)
    if name is None:
        raise InputError(
            f"{path}: cannot tell the model; expected a folder <org>__<model> or <org>__<model>-details, "
            f"or a configuration <org>__<model>__leaderboard_<task>; pass {_give('llm')}"
        )
    return _LmFile(path.resolve(), task, ts, name)


def _parquet_records(path: Path, needed: Sequence[str], category: bool) -> list[tuple[str, dict[str, Any]]]:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    try:
        schema = pq.read_schema(path)
        cols = [c for c in needed if c in schema.names]
        table = pq.read_table(path, columns=cols)
    except (pa.ArrowException, OSError) as e:
        raise InputError(f"cannot read {path}: not a Parquet file ({e})") from None
    if category and "doc" in schema.names and pa.types.is_struct(schema.field("doc").type):
        doc = pq.read_table(path, columns=["doc"]).column("doc")
        if schema.field("doc").type.get_field_index("category") >= 0:
            table = table.append_column("doc", pc.struct_field(doc, "category"))
    rows = table.to_pylist()
    if category:
        for r in rows:
            if "doc" in r:
                r["doc"] = {"category": r["doc"]}
    return [(f"row {k + 1}", r) for k, r in enumerate(rows)]


def _read_v2_file(
    f: _LmFile,
    metrics: Sequence[str],
    filter_name: str | None,
    threshold: _Threshold | None,
    category: bool = False,
) -> _Samples | _Skip:
    needed = ("doc_id", "doc_hash", "filter", "metrics", *metrics)
    if f.path.name.lower().endswith(".parquet"):
        records = _parquet_records(f.path, needed, category)
    else:
        records = []
        for loc, r in _iter_records(f.path):
            kept = _needed(r, metrics)
            if category and isinstance(r.get("doc"), dict) and "category" in r["doc"]:
                kept["doc"] = {"category": r["doc"]["category"]}
            records.append((loc, kept))
    got = _read_samples(records, str(f.path), metrics, filter_name, threshold)
    if not isinstance(got, _Skip) and category:
        cats = {str(r.get("doc_id")): (r.get("doc") or {}).get("category") for _, r in records}
        got.domains = [str(cats[d]) if cats.get(d) is not None else None for d in got.doc_ids]
    return got


def _by_category(part: _Part, categories: Sequence[str | None]) -> list[_Part]:
    """Split a part by each sample's category (samples without one keep the part's domain)."""
    doms = np.array([c if c is not None else part.domain for c in categories], dtype=object)
    items = np.asarray(part.items, dtype=object)
    hashes = np.asarray(part.hashes if part.hashes is not None else [None] * len(items), dtype=object)
    out = []
    for d in pd.unique(doms):
        sel = doms == d
        out.append(_Part(part.source, part.llm, str(d), items[sel].tolist(), part.correct[sel], hashes[sel].tolist()))
    return out


def from_open_llm_leaderboard_v2(
    paths: PathArg,
    *,
    metric: str | Sequence[str] | None = None,
    threshold: float | None = None,
    tasks: str | Sequence[str] | None = None,
    domain_from: str = "subtask",
    llm: str | None = None,
    allow_empty: bool = False,
) -> pd.DataFrame:
    """Read Open LLM Leaderboard v2 details into the long table.

    Recognised files, under a local copy of the dataset repository
    ``open-llm-leaderboard/<org>__<model>-details`` or anywhere else:

    - the stored samples ``<org>__<model>/samples_leaderboard_<task>_<date>.jsonl``
      (older runs: ``.json``, also JSON lines), one lm-eval sample per line:
      ``doc_id``, ``doc``, ``doc_hash``, ``filter``, ``metrics`` and each metric's
      value (``acc_norm``, ``acc``, ``exact_match``, IFEval's
      ``prompt_level_strict_acc`` ...);
    - the Parquet of a configuration, ``<org>__<model>__leaderboard_<task>/<split>/0000.parquet``
      (as Hugging Face converts it) or a file named by the configuration, the
      split being ``latest`` or a run date; the same columns.

    Parameters
    ----------
    paths
        Files, folders (searched recursively) or a list of them.
    metric
        The per-sample metric, or a sequence of which each task uses the first
        it has.  By default each benchmark's leaderboard metric
        (:data:`LEADERBOARD_V2_METRICS`: ``acc_norm`` for BBH, GPQA and MuSR,
        ``acc`` for MMLU-Pro, ``exact_match`` for MATH, ``prompt_level_strict_acc``
        for IFEval).
    threshold
        For a metric that is not 0/1 (IFEval's ``inst_level_strict_acc``, a list
        counted by its mean): correct when at least ``threshold``, which must
        lie within the values read (in ``(0, 1]`` for a proportion).
    tasks
        Shell-style patterns over the task names (``leaderboard_bbh_*``,
        ``leaderboard_mmlu_pro``) that select the files.  By default all.
    domain_from
        ``"subtask"`` (default): the task without ``leaderboard_``
        (``bbh_navigate``, ``math_algebra_hard``); ``"benchmark"``: ``bbh``,
        ``gpqa``, ``math``, ``mmlu_pro``, ``musr``, ``ifeval``; ``"category"``:
        the sample's ``doc.category`` where it has one (MMLU-Pro's 14
        subjects), else the subtask.
    llm
        The LLM name for all files; by default ``<org>/<model>`` from the
        configuration name or the ``<org>__<model>`` folder.
    allow_empty
        A file without the metric (or without samples) is an error naming it
        and the metrics it has; with ``allow_empty`` it is left out with a
        :class:`~mtlirt.data.validate.DataWarning`.

    Returns
    -------
    pandas.DataFrame
        Columns ``llm, item, domain, correct``; the item is
        ``<subtask>/<doc_id>``.  When a task was run twice, the ``latest``
        split, then the latest date, wins.

    Raises
    ------
    InputError
        A line or row that is not a sample (file and line named), a metric
        that is not 0/1 without ``threshold``, a threshold outside the metric's
        values, a model that cannot be told, a file without responses (unless
        ``allow_empty``), two runs of one task that cannot be ordered, or no
        responses at all.
    """
    threshold = _check_threshold(threshold)
    if domain_from not in ("subtask", "benchmark", "category"):
        raise InputError(f"{_opt('domain_from')} must be 'subtask', 'benchmark' or 'category', not {domain_from!r}")
    patterns = _pattern_list(tasks)
    chosen = [metric] if isinstance(metric, str) else (list(metric) if metric is not None else None)
    if chosen is not None and not chosen:
        raise InputError(f"{_opt('metric')} must name at least one metric")
    roots = _as_paths(paths)
    what = ", ".join(str(p) for p in roots)
    found: list[Path] = []
    for root in roots:
        found.extend(sorted(p for p in root.rglob("*") if p.is_file()) if root.is_dir() else [root])
    ledger = _Ledger("details file")
    files = []
    for f in (_v2_file(p, llm) for p in dict.fromkeys(p.resolve() for p in found)):
        if f is None:
            continue
        if patterns is None or any(fnmatch.fnmatchcase(f.task, pat) for pat in patterns):
            files.append(f)
        else:
            ledger.unselected(f.path)
    if not files:
        sel = f" matching {_listing(patterns)}" if patterns is not None else ""
        raise InputError(
            f"no Open LLM Leaderboard v2 details (samples_leaderboard_<task>_<date>.jsonl or "
            f"<org>__<model>__leaderboard_<task> Parquet){sel} found in {what}"
        )

    def metrics_for(task: str) -> list[str]:
        if chosen is not None:
            return chosen
        default = LEADERBOARD_V2_METRICS.get(_benchmark(task))
        return [default] if default else list(_FALLBACK_METRICS)

    category = domain_from == "category"
    found_cats: dict[str, list[str | None]] = {}

    def read(f: _LmFile, metrics, filter_name, thr) -> _Samples | _Skip:
        got = _read_v2_file(f, metrics, filter_name, thr, category)
        if not isinstance(got, _Skip) and category:
            found_cats[str(f.path)] = got.domains
        return got

    parts, _ = _lm_eval_parts(_latest_runs(files, ledger), metrics_for, None, threshold, what, ledger, read=read)
    out: list[_Part] = []
    for p in parts:
        sub = p.domain.removeprefix("leaderboard_")
        p.items = [f"{sub}/{i.split('/', 1)[1]}" for i in p.items]
        p.domain = _benchmark(p.domain) if domain_from == "benchmark" else sub
        out.extend(_by_category(p, found_cats[p.source]) if category else [p])
    label = _listing(chosen) if chosen is not None else "the metric"
    return ledger.finish(out, what, allow_empty=allow_empty, threshold=threshold, metric=label)
