"""A fit's "Model checks" block in the report (:mod:`mtlirt.evaluate.checks`): run, given, or as recorded
in the fit; one part per check."""

from __future__ import annotations

from collections.abc import Mapping

from ..evaluate.checks import RMSEA_BOUND, ModelChecks, large_misfits, run_checks
from .html_blocks import _anchor, _csv_link, _e, _fmt, _howto, _kv_table, _slug, _table
from .html_figures import _figure


def _checks_section(name: str, est, responses, checks, replicates: int, dpi: int) -> str:
    """The "Model checks" block of a fit (:mod:`mtlirt.evaluate.checks`): run here when ``checks`` is
    ``"auto"``/``True`` and the data are given, taken from ``checks`` when it is a
    :class:`~mtlirt.evaluate.checks.ModelChecks`, else the summary recorded in the fit's diagnostics."""
    aid = _anchor(name)
    fname = _slug(name)
    out = [f'<h3 id="{_e(aid)}-checks">Model checks</h3>', _howto(
        "Whether the model reproduces the data it was fitted to: the cross-domain correlations against data "
        "sets simulated from the fit, the fit of every item (S-X2: observed against expected proportions "
        "right along the score), and how well each LLM's answers are predicted when it is left out. Among "
        "many pairs or items some misfit by chance; a global p-value under 0.05 or many misfitting items "
        "point to structure the model misses.")]
    if checks is False:
        return ""
    mc = checks if isinstance(checks, ModelChecks) else None
    if mc is None and responses is not None:
        try:
            mc = run_checks(est, responses, n_replicates=replicates, max_draws=200)
        except Exception as exc:  # noqa: BLE001 - the report must survive checks that cannot start (each
            # check that fails once started is recorded by run_checks, the others kept)
            out.append(f'<p class="note">checks not run: {_e(type(exc).__name__)}: {_e(exc)}</p>')
            return "\n".join(out)
    if mc is None:
        out.append(_recorded_checks(est, fname))
        return "\n".join(out)
    out.extend(_correlation_check_part(mc, fname, dpi))
    out.extend(_item_fit_part(mc, fname, dpi))
    out.extend(_loo_part(mc, fname, dpi))
    return "\n".join(out)


def _not_there(mc, name: str, what: str = "") -> str:
    """Why a check has no result: the error it raised (:func:`~mtlirt.evaluate.checks.run_checks` ran the
    others), or why it does not apply; ``what`` names the check where its section holds others."""
    if name in mc.failed:
        return f'<p class="note bad">{_e(what)}Failed, left out: {_e(mc.failed[name])}</p>'
    return f'<p class="note">Not applicable: {_e(mc.skipped.get(name, ""))}.</p>'


def _recorded_checks(est, fname: str) -> str:
    """Without the data: the summary of the checks recorded in the fit's diagnostics, if any."""
    rec = (est.info.get("diagnostics") or {}).get("checks")
    if isinstance(rec, Mapping):
        return ('<p class="note">Recorded in the fit (pass <code>responses=</code> for the tables '
                "and plots):</p>" + _kv_table(rec, csv=f"{fname}-checks.csv"))
    return '<p class="note">Pass <code>responses=</code> (the fit\'s data) to run the model checks.</p>'


def _correlation_check_part(mc, fname: str, dpi: int) -> list[str]:
    """The predictive check of the cross-domain correlations: its verdict, plots and every pair as CSV."""
    from . import plots_checks as pc

    cc = mc.correlation
    out = ["<h4>Cross-domain correlations: predictive check</h4>"]
    if cc is None:
        out.append(_not_there(mc, "correlation"))
        return out
    # the verdict is the global test: with many pairs, about alpha of them fall outside by chance
    verdict = ('<span class="bad">misfit</span>' if cc.global_p < cc.alpha
               else '<span class="good">no misfit found</span>')
    out.append(f"<p>{verdict} (global p = {cc.global_p:.3f} over {cc.replicated.shape[0]} replicated data "
               f"sets): {cc.n_misfit:,} of {len(cc.table):,} pairs outside the replicates (two-sided p &lt; "
               f"{cc.alpha:g}; among many pairs some fall outside by chance, so the verdict is the global test). "
               f"Statistic: the STL scores' correlations "
               f"corrected for measurement error (<code>domain_correlation.csv</code>); replicates: "
               f"{_e(cc.world)}.</p>")
    out.append(_figure(lambda: pc.correlation_check_pairs(cc), "Observed correlation of the pairs with the "
                       "smallest predictive p-values against the replicates' interval.", dpi=dpi,
                       name=f"{fname}-check-correlation-pairs"))
    if len(cc.domains) <= 80:
        out.append(_figure(lambda: pc.correlation_check_matrix(cc), "Observed against replicated "
                           "correlations, and every pair's predictive p-value.", dpi=dpi,
                           name=f"{fname}-check-correlation-matrix"))
    out.append(_csv_link(cc.table, f"{fname}-check-correlations.csv",
                         what=f"every pair's observed and replicated correlation, {len(cc.table):,} rows"))
    return out


def _item_fit_part(mc, fname: str, dpi: int) -> list[str]:
    """The S-X2 item fit (and its posterior predictive version): the misfit counts, the plot, the worst items."""
    from . import plots_checks as pc

    out = ["<h4>Item fit (S-X2)</h4>"]
    it = mc.items
    if it is None:
        out.append(_not_there(mc, "item_fit"))
        return out
    tested = int(it["p_value"].notna().sum())
    big = large_misfits(it)
    out.append(f"<p>{int(it['misfit'].sum()):,} of {tested:,} tested items misfit (Benjamini-Hochberg "
               f"adjusted p &lt; 0.05); share with unadjusted p &lt; 0.05: "
               f"{float((it['p_value'] < 0.05).sum()) / max(tested, 1):.3f} (about 0.05 when the model "
               f"fits). {big:,} of the misfitting items misfit by an RMSEA above {RMSEA_BOUND:g} (the misfit's "
               "size: with thousands of LLMs, departures too small to matter are significant; with a few dozen, "
               "the RMSEA of a fitting item is noise). "
               "Answers missing inside a domain an LLM ran are imputed from the model "
               "(5 times, the statistic averaged).</p>")
    if "item_fit_ppc" in mc.failed:
        out.append(_not_there(mc, "item_fit_ppc", "Posterior predictive S-X2: "))
    if mc.items_ppc is not None:
        pp = mc.items_ppc
        out.append(f"<p>Posterior predictive S-X2 (the data against answers replicated from each of 50 "
                   f"draws, at the draw's items): {int((pp['ppp'] < 0.05).sum()):,} of {len(pp):,} items have "
                   f"ppp &lt; 0.05 (the data's S-X2 above nearly every replicate's).</p>")
    if tested:
        out.append(_figure(lambda: pc.item_fit_plot(it), "S-X2 / df of every item by domain.", dpi=dpi,
                           name=f"{fname}-check-item-fit"))
        worst = it.sort_values("p_value", kind="stable").head(15)
        f3 = {c: (lambda v: _fmt(v, 3)) for c in ("s_x2", "p_value", "q_value", "rmsea", "observed", "expected")}
        out.append("<details><summary>The 15 items with the smallest p-values</summary>" + _table(
            worst, num=("n", "groups", "s_x2", "df", "p_value", "q_value", "rmsea", "observed", "expected"),
            name=("item", "domain"), formats=f3,
            csv=(it.sort_values("p_value", kind="stable"), f"{fname}-check-item-fit.csv")) + "</details>")
    return out


def _loo_part(mc, fname: str, dpi: int) -> list[str]:
    """Leave-one-LLM-out: its summary, the Pareto k of every LLM and the table as CSV."""
    from . import plots_checks as pc

    out = ["<h4>Leave-one-LLM-out (PSIS-LOO on the marginal likelihood)</h4>"]
    lo = mc.loo
    if lo is None:
        out.append(_not_there(mc, "loo_llm"))
        return out
    s = lo.summary()
    out.append(_kv_table({"elpd_loo": s["elpd_loo"], "se": s["se"], "p_loo": s["p_loo"],
                          f"LLMs with Pareto k > {s['good_k']:.2f}": f"{s['high_k']} of {s['llms']}",
                          "largest Pareto k": s["max_k"], "overall traits integrated out": s["overall_integrated"],
                          "draws used": s["draws"]}, csv=f"{fname}-check-loo-summary.csv"))
    out.append(_figure(lambda: pc.loo_pareto_k(lo), "Pareto k of every LLM's leave-one-out weights.", dpi=dpi,
                       name=f"{fname}-check-loo"))
    out.append(_csv_link(lo.table, f"{fname}-check-loo.csv", what=f"every LLM's elpd and Pareto k, "
                         f"{len(lo.table):,} rows"))
    return out
