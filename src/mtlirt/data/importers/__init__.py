"""Converters from the formats LLM item-level results come in to the long table.

Every converter returns a :class:`pandas.DataFrame` with exactly the columns
``llm, item, domain, correct`` (``llm``, ``item`` and ``domain`` as strings,
``correct`` as ``int8`` 0/1), one row per observed response; a response that
was not observed is an absent row.  Malformed input raises
:class:`~mtlirt.errors.InputError` naming the file, line, row or field at
fault.  Every source (file, run folder, log) is accounted for: one that gives
no responses (a task without the requested metric, a run without the
requested split) is an error naming it and what it has (its metrics, splits
or fields), unless ``allow_empty=True`` (``--allow-empty``) leaves it out with
a :class:`~mtlirt.data.validate.DataWarning`; a conversion that yields no
responses at all is an error.  A ``threshold`` must lie within the values of
the metric it is compared with.  The same LLM under two spellings (case,
``__`` for ``/``) and the same item content under two ids are reported with a
``DataWarning`` naming them.

Supported sources, one module each:

- :func:`from_lm_eval`: EleutherAI lm-evaluation-harness ``--log_samples``
  output (``samples_<task>_<date>.jsonl`` beside ``results_<date>.json``, and
  the older ``<model_args>_<task>.jsonl`` JSON lists of lm-eval 0.4.0-0.4.2).
- :func:`from_open_llm_leaderboard`: the Open LLM Leaderboard v1 "details"
  Parquet files (``open-llm-leaderboard/details_<org>__<model>``), as stored in
  the dataset repositories or as exported per configuration.
- :func:`from_open_llm_leaderboard_v2`: the Open LLM Leaderboard v2 details
  (``open-llm-leaderboard/<org>__<model>-details``: ``samples_leaderboard_*``
  files, or their Parquet per configuration): BBH, GPQA, MATH, MMLU-Pro, MuSR,
  IFEval.
- :func:`from_helm`: HELM run folders (``per_instance_stats.json`` with
  ``run_spec.json`` and ``scenario_state.json``).
- :func:`from_inspect`: UK AISI Inspect logs (``.eval`` archives and ``.json``
  logs).
- :func:`from_every_eval_ever`: the Every Eval Ever datastore's instance-level
  JSONL (``<uuid>_samples.jsonl``).
- :func:`from_wide`: a wide LLM x item 0/1 matrix.

:data:`IMPORTERS` is the registry: each kind's name, converter and the
command-line options it takes; :func:`convert` dispatches on a kind name and
``mtlirt convert`` builds its options from the registry
(:func:`add_convert_arguments`, :func:`convert_args`); there, messages name
the options by their flags (``--metric``, ``--split``), and each conversion
reports a one-line summary of the sources it read and left out.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pandas as pd

from ...errors import InputError
from ._common import _command_line
from .every_eval_ever import from_every_eval_ever
from .helm import from_helm
from .inspect_logs import from_inspect
from .lm_eval import from_lm_eval
from .open_llm_leaderboard import LEADERBOARD_V1_TASKS, MMLU_TASKS, from_open_llm_leaderboard
from .open_llm_leaderboard_v2 import LEADERBOARD_V2_METRICS, from_open_llm_leaderboard_v2
from .wide import from_wide

__all__ = [
    "CONVERT_KINDS",
    "IMPORTERS",
    "LEADERBOARD_V1_TASKS",
    "LEADERBOARD_V2_METRICS",
    "MMLU_TASKS",
    "Importer",
    "Option",
    "add_convert_arguments",
    "convert",
    "convert_args",
    "from_every_eval_ever",
    "from_helm",
    "from_inspect",
    "from_lm_eval",
    "from_open_llm_leaderboard",
    "from_open_llm_leaderboard_v2",
    "from_wide",
]


def _patterns(text: str) -> list[str]:
    return [t for t in text.split(",") if t]


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None


@dataclass(frozen=True)
class Option:
    """A command-line option of ``mtlirt convert``.

    Attributes
    ----------
    flag
        The option, e.g. ``"--metric"``; its value goes to the converter's
        keyword argument of the same name (``-`` read as ``_``), or ``param``.
    metavar, help
        As in :mod:`argparse`; the help says which kinds take the option.
    parse
        Turns the text into the converter's value (default: the text).
    param
        The converter's keyword, when it is not the flag's name.
    switch
        A flag without a value, giving the keyword ``True``.
    """

    flag: str
    metavar: str | None
    help: str
    parse: Callable[[str], Any] | None = None
    param: str | None = None
    switch: bool = False

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")

    @property
    def keyword(self) -> str:
        return self.param or self.dest


#: Every option of ``mtlirt convert``; each importer names the ones it takes.
OPTIONS = {
    o.flag: o
    for o in (
        Option("--metric", "NAME",
               "what says correct: lm-eval and open-llm-leaderboard, the per-sample metric (default acc); "
               "open-llm-leaderboard-v2, the metric (default: each task's leaderboard metric); helm, the "
               "per-instance stat (default exact_match); inspect, the scorer (default: the log's first); "
               "every-eval-ever, is_correct (default) or score"),
        Option("--threshold", "T",
               "count a non-binary metric (F1, a partial score, a score in [0, 1]) as correct when it is at "
               "least T (default: values must be 0 or 1); T must lie within the metric's values, in (0, 1] "
               "for a proportion; all kinds but open-llm-leaderboard and wide",
               parse=_number),
        Option("--llm", "NAME", "the LLM's name for all files (default: from each file or folder)"),
        Option("--tasks", "PATTERN,...",
               "task configurations to read, comma-separated glob patterns: open-llm-leaderboard (e.g. "
               "'harness_hendrycksTest_*_5' for 5-shot MMLU; needed when a repo holds one item in two settings), "
               "open-llm-leaderboard-v2 (e.g. 'leaderboard_bbh_*'), helm (subtasks, e.g. 'mmlu:*'), inspect "
               "(task names), every-eval-ever (evaluation names or result ids)", parse=_patterns),
        Option("--filter", "NAME",
               "lm-eval: which filter's result to keep when a task logs several (default: the first)"),
        Option("--domain-from", "HOW",
               "what becomes the domain: lm-eval, task (default) or common-prefix (mmlu_anatomy -> anatomy); "
               "open-llm-leaderboard-v2, subtask (default; bbh_navigate), benchmark (bbh) or category "
               "(MMLU-Pro's subject); helm, subtask (default: the run name without "
               "model=) or scenario (mmlu); "
               "inspect, task (default) or metadata.FIELD; every-eval-ever, evaluation (default) or "
               "metadata.FIELD"),
        Option("--split", "NAME", "helm: the instances' split, test (default) or valid"),
        Option("--item-domain", "CSV", "wide only: CSV with columns item,domain (else column names <domain>/<item>)"),
        Option("--allow-empty", None,
               "leave out, with a warning, each source that gives no responses (a file or run without the metric "
               "or split, a log without samples; wide: an LLM row or item column without a 0/1 cell) instead of "
               "stopping with an error naming it; all kinds", switch=True),
    )
}


@dataclass(frozen=True)
class Importer:
    """One input format: its converter and the options it takes.

    Attributes
    ----------
    name
        The kind, as ``mtlirt convert KIND`` and :func:`convert` take it.
    function
        The converter, called as ``function(src, **options)``.
    summary
        What it reads, one line.
    options
        The flags of :data:`OPTIONS` it takes.
    aliases
        Other accepted spellings of ``name``.
    one_source
        Whether it reads exactly one source (a matrix) rather than files and folders.
    """

    name: str
    function: Callable[..., pd.DataFrame]
    summary: str
    options: tuple[str, ...]
    aliases: tuple[str, ...] = ()
    one_source: bool = False


#: The registry of input formats, by kind name.
IMPORTERS: dict[str, Importer] = {
    i.name: i
    for i in (
        Importer("lm-eval", from_lm_eval,
                 "EleutherAI lm-evaluation-harness --log_samples JSONL (file or folder)",
                 ("--metric", "--threshold", "--llm", "--filter", "--domain-from", "--allow-empty"),
                 aliases=("lmeval", "lm-evaluation-harness")),
        Importer("open-llm-leaderboard", from_open_llm_leaderboard,
                 "Open LLM Leaderboard v1 details Parquet (details_<org>__<model> folders)",
                 ("--metric", "--llm", "--tasks", "--allow-empty"),
                 aliases=("open-llm", "openllm", "open-llm-leaderboard-v1")),
        Importer("open-llm-leaderboard-v2", from_open_llm_leaderboard_v2,
                 "Open LLM Leaderboard v2 details (<org>__<model>-details: samples_leaderboard_* JSONL or Parquet)",
                 ("--metric", "--threshold", "--llm", "--tasks", "--domain-from", "--allow-empty"),
                 aliases=("open-llm-v2",)),
        Importer("helm", from_helm,
                 "HELM run folders (per_instance_stats.json, run_spec.json, scenario_state.json)",
                 ("--metric", "--threshold", "--llm", "--tasks", "--domain-from", "--split", "--allow-empty")),
        Importer("inspect", from_inspect,
                 "UK AISI Inspect logs (.eval archives, .json logs)",
                 ("--metric", "--threshold", "--llm", "--tasks", "--domain-from", "--allow-empty"),
                 aliases=("inspect-ai",)),
        Importer("every-eval-ever", from_every_eval_ever,
                 "Every Eval Ever instance-level JSONL (<uuid>_samples.jsonl)",
                 ("--metric", "--threshold", "--llm", "--tasks", "--domain-from", "--allow-empty"),
                 aliases=("eee",)),
        Importer("wide", from_wide, "an LLM x item matrix CSV", ("--item-domain", "--allow-empty"),
                 one_source=True),
    )
}

#: The kinds :func:`convert` accepts.
CONVERT_KINDS = tuple(IMPORTERS)


def _importer(kind: str) -> Importer:
    key = str(kind).strip().lower().replace("_", "-")
    for imp in IMPORTERS.values():
        if key == imp.name or key in imp.aliases:
            return imp
    raise InputError(f"unknown kind {kind!r}: expected one of {', '.join(CONVERT_KINDS)}")


def convert(kind: str, src: Any, **kw: Any) -> pd.DataFrame:
    """Convert results of a known kind to the long table.

    Parameters
    ----------
    kind
        One of :data:`CONVERT_KINDS` (the names in :data:`IMPORTERS`), e.g.
        ``"lm-eval"`` (:func:`from_lm_eval`), ``"helm"`` (:func:`from_helm`)
        or ``"wide"`` (:func:`from_wide`); case, ``_`` for ``-`` and a few
        aliases (``lm-evaluation-harness``, ``open-llm``, ``eee``) are accepted.
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
    imp = _importer(kind)
    if imp.one_source and isinstance(src, (list, tuple)):
        if len(src) != 1:
            raise InputError(f"{imp.name} reads one matrix, got {len(src)} sources")
        src = src[0]
    return imp.function(src, **kw)


def add_convert_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the kind, the sources and every importer's options to ``mtlirt convert``."""
    parser.add_argument("kind", choices=list(CONVERT_KINDS), help="input format")
    parser.add_argument("src", nargs="+", metavar="SRC", help="input file(s) or folder(s)")
    parser.add_argument("--out", required=True, metavar="FILE", help="output table (.parquet, .csv or .csv.gz)")
    for opt in OPTIONS.values():
        if opt.switch:
            parser.add_argument(opt.flag, action="store_const", const=True, default=None, help=opt.help)
        else:
            parser.add_argument(opt.flag, default=None, metavar=opt.metavar, help=opt.help,
                                type=opt.parse or str)


def convert_args(args: argparse.Namespace) -> tuple[pd.DataFrame, list[str]]:
    """Run the importer ``args.kind`` on ``args.src`` with the options given on the command line.

    An option the kind does not take is an error naming the options it takes.
    Messages name options by their flags (``--split valid``, not
    ``split='valid'``).  Returns the long table and the conversion's summary
    lines: what was read, and each source left out and why.
    """
    imp = _importer(args.kind)
    kw = {}
    for opt in OPTIONS.values():
        value = getattr(args, opt.dest, None)
        if value is None:
            continue
        if opt.flag not in imp.options:
            takes = ", ".join(imp.options) or "none"
            raise InputError(f"{opt.flag} does not apply to {imp.name} (its options: {takes})")
        kw[opt.keyword] = value
    src = args.src if len(args.src) > 1 else args.src[0]
    with _command_line({opt.keyword: opt.flag for opt in OPTIONS.values()}) as summaries:
        df = convert(imp.name, src, **kw)
    return df, summaries
