"""HELM run folders: ``per_instance_stats.json`` beside ``run_spec.json`` and ``scenario_state.json``."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Sequence
from dataclasses import dataclass
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
    _not_binary,
    _pattern_list,
    _read_json,
    _to_correct,
)

_STATS = "per_instance_stats.json"
#: Run-name arguments that name the model rather than the task.
_MODEL_ARGS = ("model", "model_deployment")


@dataclass
class _HelmRun:
    folder: Path
    llm: str
    subtask: str  # the run name without the model: the task, in one setting
    scenario: str


#: A run name: the scenario, then ``:`` (``-`` in folder names where ``:`` is not allowed) and its arguments.
_RUN_NAME_RE = re.compile(r"^(?P<head>.+?)[:-](?P<tail>\w+=.*)$")


def _split_run_name(name: str) -> tuple[str, list[tuple[str, str]]]:
    """``"mmlu:subject=anatomy,model=openai_gpt2"`` -> ``("mmlu", [("subject", "anatomy"), ("model", ...)])``."""
    m = _RUN_NAME_RE.match(name)
    if m is None:
        return name, []
    args = [tuple(kv.split("=", 1)) for kv in m.group("tail").split(",") if "=" in kv]
    return m.group("head"), args  # type: ignore[return-value]


def _helm_run(folder: Path, llm: str | None) -> _HelmRun:
    """Name, model and task of one run folder, from ``run_spec.json`` (else the folder name)."""
    spec_path = folder / "run_spec.json"
    spec = _read_json(spec_path) if spec_path.is_file() else {}
    if not isinstance(spec, dict):
        raise InputError(f"{spec_path}: expected a JSON object (a HELM RunSpec)")
    name = spec.get("name") or folder.name
    head, args = _split_run_name(str(name))
    kept = [f"{k}={v}" for k, v in args if k not in _MODEL_ARGS]
    subtask = head + (":" + ",".join(kept) if kept else "")
    groups = spec.get("groups")
    scenario = str(groups[0]) if isinstance(groups, list) and groups else head
    if llm is None:
        llm = _get(spec, "adapter_spec.model", str(spec_path), required=False)
    if llm is None:
        state_path = folder / "scenario_state.json"
        if state_path.is_file():
            llm = _get(_read_json(state_path), "adapter_spec.model", str(state_path), required=False)
    if not isinstance(llm, str) or not llm.strip():
        raise InputError(
            f"{folder}: cannot tell the model; run_spec.json (field adapter_spec.model) is missing or has none; "
            f"pass {_give('llm')}"
        )
    return _HelmRun(folder, llm.strip(), subtask, scenario)


def _instance_hashes(folder: Path) -> dict[str, str]:
    """Each instance's content key (input text and correct references) from ``scenario_state.json``."""
    path = folder / "scenario_state.json"
    if not path.is_file():
        return {}
    states = _get(_read_json(path), "request_states", str(path))
    if not isinstance(states, list):
        raise InputError(f"{path}: request_states is not a list")
    out: dict[str, str] = {}
    for k, state in enumerate(states):
        inst = _get(state, "instance", f"{path}: request_states[{k}]")
        if not isinstance(inst, dict) or inst.get("perturbation") or "id" not in inst:
            continue
        refs = [
            _get(r, "output.text", f"{path}: request_states[{k}].instance.references", required=False)
            for r in inst.get("references", [])
            if isinstance(r, dict) and "correct" in (r.get("tags") or [])
        ]
        text = _get(inst, "input.text", f"{path}: request_states[{k}].instance", required=False)
        out.setdefault(str(inst["id"]), _content_hash(text, refs))
    return out


def _stat_value(stat: dict[str, Any]) -> float | None:
    """A per-instance stat's value: its mean (sum / count), None when it counted nothing."""
    count = stat.get("count", 0)
    if not count:
        return None
    if "mean" in stat:
        return stat["mean"]
    return stat.get("sum", 0) / count


def _read_helm_run(
    run: _HelmRun, metric: str, split: str, threshold: _Threshold | None, trial: int
) -> tuple[list[str], np.ndarray, list[str | None]] | _Skip:
    """Instance ids, 0/1 results and content keys of one run; why it has none, naming what it has."""
    path = run.folder / _STATS
    entries = _read_json(path)
    if not isinstance(entries, list):
        raise InputError(f"{path}: expected a JSON list of per-instance stats")
    hashes = _instance_hashes(run.folder)
    ids: list[str] = []
    values: list[int] = []
    stat_names: set[str] = set()
    splits: set[str] = set()  # the splits with the metric, in the trial
    trials: set[int] = set()  # the trials with the metric in the split
    counted = False
    for k, entry in enumerate(entries):
        where = f"{path}: entry {k + 1}"
        iid = str(_get(entry, "instance_id", where))
        stats = _get(entry, "stats", where)
        if entry.get("perturbation"):
            continue  # a perturbed copy (robustness, fairness)
        this_trial = entry.get("train_trial_index", 0)
        for stat in stats:
            name = _get(stat, "name", where)
            if name.get("perturbation"):
                continue
            stat_names.add(str(name.get("name")))
            if name.get("name") != metric:
                continue
            if this_trial == trial:
                splits.add(str(name.get("split")))
            if name.get("split") == split:
                trials.add(this_trial)
            if this_trial != trial or name.get("split") != split:
                continue
            value = _stat_value(stat)
            if value is None:
                continue
            counted = True
            v = _to_correct(value, threshold)
            if v is None:
                raise _not_binary(f"{where} (instance {iid})", metric, value, threshold)
            if iid in ids:
                raise InputError(f"{where}: instance {iid} has {metric} twice for split {split!r}")
            ids.append(iid)
            values.append(v)
    if not counted:
        if not entries:
            return _Skip(f"no instances in {_STATS}")
        if metric not in stat_names:
            return _Skip(f"no stat {metric!r} (its stats: {_listing(sorted(stat_names), show=10)})",
                         f"choose one with {_give('metric')}")
        if split not in splits and splits:
            listed = sorted(splits)
            return _Skip(f"{metric!r} only in split{'s' if len(listed) > 1 else ''} {_listing(listed)}",
                         f"use {_opt('split', listed[0])}")
        if trial not in trials and trials:
            listed = sorted(trials)
            return _Skip(f"{metric!r} in split {split!r} only in train trial{'s' if len(listed) > 1 else ''} "
                         f"{_listing(listed, quote=False)}", f"use {_opt('trial', listed[0])}")
        if split in splits:
            return _Skip(f"no value of {metric!r} in split {split!r} (every count is 0)")
        return _Skip(f"no {metric!r} in split {split!r} of train trial {trial}")
    return ids, np.array(values, dtype=np.int8), [hashes.get(i) for i in ids]


def from_helm(
    paths: PathArg,
    *,
    metric: str = "exact_match",
    threshold: float | None = None,
    split: str = "test",
    tasks: str | Sequence[str] | None = None,
    domain_from: str = "subtask",
    llm: str | None = None,
    trial: int = 0,
    allow_empty: bool = False,
) -> pd.DataFrame:
    """Read HELM run folders into the long table.

    ``helm-run --suite S`` writes ``benchmark_output/runs/S/<run>/`` per run,
    ``<run>`` being the run spec's name such as
    ``mmlu:subject=philosophy,method=multiple_choice_joint,model=openai_gpt2``.
    A run folder holds ``run_spec.json`` (``name``, ``adapter_spec.model``,
    ``groups``), ``scenario_state.json`` (``request_states``, each with its
    ``instance``: ``id``, ``input.text``, ``references``, ``split``) and
    ``per_instance_stats.json``: a list of ``{"instance_id", "train_trial_index",
    "stats"}`` (and ``"perturbation"`` for perturbed copies), each stat a
    ``{"name": {"name", "split"}, "count", "sum", "mean", ...}``.

    Parameters
    ----------
    paths
        Run folders, a suite folder holding them (searched recursively for
        ``per_instance_stats.json``), or such files; a list of them.
    metric
        The per-instance stat that says whether the answer is correct, e.g.
        ``exact_match`` (default), ``quasi_exact_match``, ``f1_score``.
    threshold
        For a stat that is not 0/1 (``f1_score``, ``rouge_l``): an instance is
        correct when the stat is at least ``threshold``, which must lie within
        the stat's values (in ``(0, 1]`` for a proportion).  By default values
        must be 0 or 1.
    split
        The instances' split: ``test`` (default) or ``valid``.
    tasks
        Shell-style patterns over the subtask names (see ``domain_from``) that
        select the runs, e.g. ``"mmlu:*"``.  By default all.
    domain_from
        ``"subtask"`` (default): the run's name without its ``model=``
        argument, e.g. ``mmlu:subject=philosophy,method=multiple_choice_joint``;
        ``"scenario"``: the run's first group (``mmlu``), else the scenario's
        name (the run name before ``:``).
    llm
        The LLM name for all runs; by default ``adapter_spec.model`` of the
        run spec (``openai/gpt2``).
    trial
        The train trial (HELM repeats a run with other in-context examples
        when ``num_train_trials`` > 1); default 0.
    allow_empty
        A run without the stat in the split and trial is an error naming what
        it has (its stats, the stat's splits); with ``allow_empty`` it is left
        out with a :class:`~mtlirt.data.validate.DataWarning`.

    Returns
    -------
    pandas.DataFrame
        Columns ``llm, item, domain, correct``; the item is
        ``<subtask>/<instance_id>``, so items line up across models.  Perturbed
        copies of instances (robustness and fairness runs) are left out.  An
        instance without the stat in the split is an absent row.

    Raises
    ------
    InputError
        A file that is not JSON or lacks a field (file, entry and field named),
        a stat that is not 0/1 without ``threshold``, a threshold outside the
        stat's values, a run whose model cannot be told, a run without
        responses (unless ``allow_empty``), an LLM with two runs of one
        subtask, or no responses at all.
    """
    threshold = _check_threshold(threshold)
    if domain_from not in ("subtask", "scenario"):
        raise InputError(f"{_opt('domain_from')} must be 'subtask' or 'scenario' for HELM, not {domain_from!r}")
    patterns = _pattern_list(tasks)
    roots = _as_paths(paths)
    what = ", ".join(str(p) for p in roots)
    stats_files = _files_under(roots, lambda p: p.name == _STATS, f"a HELM {_STATS}")
    ledger = _Ledger("HELM run")
    runs = []
    for run in (_helm_run(p.parent, llm) for p in stats_files):
        if patterns is None or any(fnmatch.fnmatchcase(run.subtask, pat) for pat in patterns):
            runs.append(run)
        else:
            ledger.unselected(run.folder)
    if not runs:
        sel = f" matching {_listing(patterns)}" if patterns is not None else ""
        raise InputError(f"no HELM runs ({_STATS}){sel} found in {what}")
    parts: list[_Part] = []
    for run in runs:
        got = _read_helm_run(run, metric, split, threshold, trial)
        if isinstance(got, _Skip):
            ledger.empty(run.folder, got)
            continue
        ids, values, hashes = got
        domain = run.subtask if domain_from == "subtask" else run.scenario
        items = [f"{run.subtask}/{i}" for i in ids]
        parts.append(_Part(str(run.folder / _STATS), run.llm, domain, items, values, hashes))
        ledger.read(run.folder, len(ids))
    return ledger.finish(parts, what, allow_empty=allow_empty, threshold=threshold, metric=repr(metric))
