"""The report's comparison of several fits: a summary per fit, their agreement and scatter plots."""

from __future__ import annotations

import pandas as pd

from . import plots
from .compare import compare, fit_summary
from .html_blocks import _e, _fmt, _howto, _num, _seconds, _slug, _table
from .html_figures import _figure


def _comparison_section(fits: dict, interval: float, dpi: int) -> str:
    out = ['<h2 id="comparison">Comparison of the fits</h2>', _howto(
        "How closely the fits agree: correlations of their overall and domain scores, agreement of their "
        "rankings and the overlap of their ten best. In a scatter plot each point is an LLM (or an LLM and "
        "a domain), one fit's score against the other's with both intervals; points on the dashed line "
        "agree. Scores of different methods may differ in scale: the rank agreement is the fairer test.")]
    summ = fit_summary(fits, interval=interval)
    summ = summ.rename(columns={"mean_width_overall": "mean width overall", "mean_width_domain": "mean width domain",
                                "heldout_loglik": "held-out log-lik.", "time_s": "time"})
    if summ["held-out log-lik."].isna().all():
        summ = summ.drop(columns="held-out log-lik.")
    if summ["rank"].isna().all():
        summ = summ.drop(columns="rank")
    out.append(f'<p>Interval widths: mean width of the {interval:.0%} intervals of the overall and domain scores.</p>')
    out.append(_table(summ, index=True,
                      num=[c for c in summ.columns if c not in ("method", "uncertainty", "converged")],
                      name=("fit",), formats={"time": _seconds, "converged": lambda v: "–" if v is None else _fmt(v),
                                              "rank": lambda v: "–" if pd.isna(v) else _num(v)},
                      csv=(summ.reset_index(), "comparison-fits.csv")))
    try:
        cmp = compare(fits, interval=interval)
    except ValueError as exc:
        out.append(f'<p class="note">No comparison: {_e(exc)}</p>')
        return "\n".join(out)
    labels = {
        "n_llms": "LLMs in common", "n_domains": "domains in common",
        "pearson_overall": "Pearson r, overall scores", "spearman_overall": "Spearman ρ, overall (rank agreement)",
        "kendall_overall": "Kendall τ, overall ranking", "top10_overlap": "top-10 overlap",
        "pearson_domain": "Pearson r, domain scores (mean over domains)",
        "pearson_domain_min": "Pearson r, domain scores (worst domain)",
        "spearman_domain": "Spearman ρ, domain scores (mean over domains)",
    }
    keep = [c for c in labels if c in cmp.columns]
    t = pd.DataFrame(
        {f"{r.a} vs {r.b}": [_fmt(int(getattr(r, c))) if c.startswith("n_") else _fmt(getattr(r, c), 3)
                             for c in keep] for r in cmp.itertuples(index=False)},
        index=pd.Index([labels[c] for c in keep], name="agreement"))
    out.append(_table(t, index=True, num=list(t.columns), csv=(cmp, "comparison-agreement.csv")))
    names = list(fits)
    pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1:]][:6]
    figs = [_figure(lambda a=a, b=b: plots.compare_scatter(fits[a], fits[b], "overall", interval, labels=(a, b)),
                    f"Overall scores: {b} against {a}.", dpi=dpi, name=f"compare-overall-{_slug(b)}-{_slug(a)}")
            for a, b in pairs]
    a, b = pairs[0]
    figs.append(_figure(lambda: plots.compare_scatter(fits[a], fits[b], "theta", interval, labels=(a, b)),
                        f"Domain scores (every LLM x domain): {b} against {a}.", dpi=dpi,
                        name=f"compare-domain-{_slug(b)}-{_slug(a)}"))
    out.append('<div class="grid2">' + "".join(f"<div>{f}</div>" for f in figs) + "</div>")
    return "\n".join(out)
