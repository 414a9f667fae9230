"""One self-contained HTML report of one or several fits: :func:`write_report`.

The file has no external resource: the CSS and a few lines of script are
inline; every figure is an inline SVG (text kept as text, dense parts as
embedded PNG) that its caption's links save as an ``.svg`` or ``.png`` file;
every table links its full content (not the truncated view) as a CSV
download (a ``data:`` URL).  Every name (LLM, domain, item, fit, setting) is
HTML-escaped.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from ..data.outputs import check_file, file_output
from ..errors import InputError
from ..results.estimate import check_interval
from . import plots
from .compare import load_fits
from .html_checks import _checks_section
from .html_comparison import _comparison_section
from .html_data import _data_section
from .html_diagnostics import DIAGNOSTIC_RULES
from .html_figures import restart_figure_ids
from .html_fit import _fit_section
from .html_page import _document, _navigation, _top_warnings

__all__ = ["DIAGNOSTIC_RULES", "render_report", "write_report"]


def _check_llms(llms, fits: dict) -> list[str] | None:
    """The chosen LLMs as names; an :class:`~mtlirt.errors.InputError` naming those in no fit."""
    if llms is None:
        return None
    names = list(dict.fromkeys(str(x).strip() for x in ([llms] if isinstance(llms, str) else llms)))
    names = [x for x in names if x]
    if not names:
        raise InputError("no LLM given in llms (expected names of LLMs of the fits)")
    known = set()
    for est in fits.values():
        known.update(str(x) for x in est.llms)
    unknown = [x for x in names if x not in known]
    if unknown:
        more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
        raise InputError(f"llms: {len(unknown)} LLM(s) in none of the fits: "
                         f"{', '.join(repr(x) for x in unknown[:5])}{more}")
    return names


def _accuracy_source(responses, fits: dict):
    """Raw accuracies for the rank comparison and where they come from: the data, else an accuracy-baseline fit."""
    if responses is not None:
        return plots.raw_accuracy(responses), "the data (mean of each LLM's domain accuracies)"
    for name, est in fits.items():
        if est.method == "accuracy" and "accuracy" in est.posterior:
            return plots.raw_accuracy(est), f"the accuracy-baseline fit “{name}”"
    return None, None


def render_report(fit_dirs_or_estimates, responses=None, title: str = "mtlirt report", *, names=None,
                  interval: float = 0.9, top: int = 50, full_table: bool = False, dpi: int = 100,
                  checks="auto", check_replicates: int = 20, llms=None, top_llms: int = 30) -> str:
    """The report as an HTML string (see :func:`write_report` for the parameters)."""
    import matplotlib

    fits, records = load_fits(fit_dirs_or_estimates, names)
    if not fits:
        raise ValueError("no fit given")
    if int(top_llms) < 1:
        raise ValueError(f"top_llms must be at least 1, got {top_llms}")
    chosen = _check_llms(llms, fits)
    accuracy, acc_source = _accuracy_source(responses, fits)
    restart_figure_ids()
    with matplotlib.rc_context({"figure.max_open_warning": 0}):
        sections, warnings_top, with_checks = [], [], {}
        for name, est in fits.items():
            chk = checks.get(name, False) if isinstance(checks, Mapping) else checks
            checks_html = _checks_section(name, est, responses, chk, check_replicates, dpi)
            with_checks[name] = bool(checks_html)
            sec, warn = _fit_section(name, est, records.get(name, {}), responses, interval, top, full_table, dpi,
                                     checks_html, chosen=chosen, top_llms=top_llms, accuracy=accuracy,
                                     accuracy_source=acc_source)
            sections.append(sec)
            if warn:
                warnings_top.append((name, warn))
        comparison = _comparison_section(fits, interval, dpi) if len(fits) > 1 else ""
        data = _data_section(responses, fits, records)
    nav = _navigation(fits, bool(comparison), with_checks)
    return _document(title, fits, interval, _top_warnings(warnings_top), nav, [data, comparison, *sections])


def write_report(fit_dirs_or_estimates, out="report.html", responses=None, title: str = "mtlirt report", *,
                 names=None, interval: float = 0.9, top: int = 50, full_table: bool = False,
                 dpi: int = 100, checks="auto", check_replicates: int = 20, llms=None, top_llms: int = 30,
                 overwrite: bool = True) -> Path:
    """Write one self-contained HTML report of one or several fits.

    Parameters
    ----------
    fit_dirs_or_estimates : Estimate, path, sequence of them, or mapping name -> Estimate/path
        The fits: :class:`~mtlirt.results.estimate.Estimate` objects, fit folders
        (holding ``posterior.nc`` and ``fit.json``) or ``posterior.nc`` files.
    out : str or pathlib.Path
        The HTML file to write.
    responses : Responses, optional
        The data, for the data summary (sizes, observed share, accuracy per
        domain), the raw accuracies of the rank comparison and the model
        checks; without it the summary comes from the fit, and the rank
        comparison uses an accuracy-baseline fit among the fits if any.
    title : str
        Title of the page.
    names : sequence of str, optional
        Names of the fits (default: folder names, else methods).
    interval : float
        Probability mass of the equal-tailed intervals.
    top : int
        Rows of the leaderboard table.
    full_table : bool
        Add the full leaderboard (all LLMs) in a collapsed block.
    dpi : int
        Resolution of the rasterized parts of the figures (the figures are
        SVG; dense scatters inside them are PNG).
    checks : "auto", bool, ModelChecks or mapping name -> ModelChecks/bool
        The "Model checks" section (:mod:`mtlirt.evaluate.checks`): ``"auto"``/``True``
        runs them when ``responses`` is given (else shows the summary recorded
        in the fit's diagnostics, if any); ``False`` leaves the section out; a
        :class:`~mtlirt.evaluate.checks.ModelChecks` (or one per fit name) is shown as is.
    check_replicates : int
        Replicated data sets of the correlation check (each one STL fit; with
        20 a pair misfits only when every replicate lies on one side of it).
        The leave-one-LLM-out check uses 200 posterior draws.
    llms : sequence of str, optional
        The LLMs whose domain profiles and heatmap rows are shown (at most
        12 profiles); default the ``top_llms`` best in the heatmap and the
        3 best profiles.  A name in none of the fits raises
        :class:`~mtlirt.errors.InputError`.
    top_llms : int
        Rows of the LLM x domain heatmap when ``llms`` is not given.
    overwrite : bool
        Replace an existing file ``out`` (the CLI's ``--force``); a folder is
        never replaced.  The file is written to a temporary sibling and
        renamed into place (:mod:`mtlirt.data.outputs`).

    Returns
    -------
    pathlib.Path
        The written file.

    Notes
    -----
    Per fit, each section with a short "how to read this": leaderboard with
    intervals and rank intervals, forest and rank plots; IRT rank against
    raw-accuracy rank with the LLMs that move most; the LLM x domain heatmap
    and domain profiles; domain difficulty and size; the item map per
    domain and item curves; correlation heatmap with the strongest and
    weakest pairs; scree plot (MTL); diagnostics (a red warning box when
    ``info["diagnostics"]["converged"]`` is False, and at the top of the
    page), rank plots for a multi-chain posterior; model checks; settings
    (with the values selected from the data) and timings.  With several
    fits, a comparison section (see :func:`mtlirt.report.compare.compare`).
    Every figure is an inline SVG that its caption saves as SVG or PNG, and
    every table links its full content as CSV.
    """
    check_interval(interval)
    if isinstance(top_llms, bool) or not isinstance(top_llms, (int, np.integer)) or top_llms < 1:
        raise InputError(f"top_llms (--top-llms) must be an integer of at least 1, got {top_llms!r}")
    out = Path(out)
    check_file(out, what="HTML report", overwrite=overwrite)  # before the minutes of rendering
    text = render_report(fit_dirs_or_estimates, responses, title, names=names, interval=interval, top=top,
                         full_table=full_table, dpi=dpi, checks=checks, check_replicates=check_replicates,
                         llms=llms, top_llms=top_llms)
    with file_output(out, what="HTML report", overwrite=overwrite) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return out
