"""One fit's section of the report: its sections in reading order, the warning of a fit that did not
converge first."""

from __future__ import annotations

import numpy as np

from . import plots
from .compare import fit_diagnostics, recorded_heldout_loglik
from .html_blocks import _anchor, _e, _howto, _slug
from .html_diagnostics import _diagnostics
from .html_domains import _domains_section, _scores_section, _structure_section
from .html_figures import _figure
from .html_leaderboard import _accuracy_section, _leaderboard
from .html_settings import _settings_section


def _fit_section(name: str, est, record: dict, responses, interval: float, top: int, full_table: bool,
                 dpi: int, checks_html: str = "", *, chosen: list[str] | None = None, top_llms: int = 30,
                 accuracy=None, accuracy_source: str | None = None) -> tuple[str, str | None]:
    info = est.info
    p = est.posterior
    aid = _anchor(name)
    fname = _slug(name)
    out = [f'<section class="fit" id="{_e(aid)}"><h2>Fit: {_e(name)}</h2>']
    src = est.uncertainty_source
    if src == "posterior":
        unc = f"posterior ({p.sizes['chain']} chains x {p.sizes['draw']} draws)"
    elif src == "bootstrap":
        unc = f"parametric bootstrap ({est.tree['bootstrap'].to_dataset().sizes.get('draw', 0)} replicates)"
    else:
        unc = "none (point estimate)"
    out.append(f'<p class="meta">method <code>{_e(est.method)}</code> · {p.sizes["llm"]:,} LLMs · '
               f'{p.sizes["domain"]} domains · {p.sizes["item"]:,} items · uncertainty: {_e(unc)}'
               + (f" · rank r = {_e(info['rank'])}" if "rank" in info else "") + "</p>")
    diag_html, warn = _diagnostics(name, fit_diagnostics(est))
    if warn and "NOT CONVERGED" in diag_html:
        out.append(diag_html)  # the warning comes first, before any number
        diag_html_later = None
    else:
        diag_html_later = diag_html

    out.append(f'<h3 id="{_e(aid)}-leaderboard">Leaderboard</h3>')
    out.append(_howto(
        "The overall score is in SD units of the LLM population (0 = an average LLM of this leaderboard, 1 = "
        "one SD above). An interval holds the score with the stated probability: LLMs whose intervals overlap "
        "widely are not clearly ordered, and the rank interval gives the places an LLM could hold. P(top 10) "
        "is the share of the draws (posterior or bootstrap) in which it ranks among the ten best. Expected "
        "accuracy is the share of the benchmark's items the model expects the LLM to get right."))
    out.append(_leaderboard(est, interval, top, full_table, fname=fname))
    out.append(_figure(lambda: plots.overall_forest(est, interval=interval),
                       "Overall score of the best and worst LLMs with their intervals.", dpi=dpi,
                       name=f"{fname}-overall-scores"))
    if src is not None:
        out.append(_figure(lambda: plots.rank_uncertainty(est, interval=interval),
                           "Rank of the best LLMs with rank intervals and the probability of a top-10 place.",
                           dpi=dpi, name=f"{fname}-ranks"))

    out.append(_accuracy_section(aid, est, accuracy, accuracy_source, interval, dpi, fname))
    out.append(_scores_section(aid, est, chosen, top_llms, interval, dpi, fname))

    out.append(_domains_section(aid, est, responses, interval, dpi, fname))
    out.append(_structure_section(aid, est, interval, dpi, fname))

    out.append(f'<h3 id="{_e(aid)}-diagnostics">Diagnostics</h3>')
    out.append(_howto(
        "Whether the fitter converged. For a sampled posterior: R-hat at most 1.01 means the chains agree, "
        "the effective sample sizes should reach the threshold (400, or 100 per chain with fewer than 4 "
        "chains), and there should be no divergent transitions. Do not use the numbers of a fit that fails "
        "these."))
    if diag_html_later is not None:
        out.append(diag_html_later)
    else:
        out.append('<p class="bad">Not converged: see the warning at the top of this fit.</p>')
    if src == "posterior" and p.sizes["chain"] > 1 and p.sizes["draw"] >= 4:
        out.append(_figure(lambda: plots.convergence(est, kind="rank"),
                           "Rank plots of the overall scores with the largest R-hat (uniform = chains agree).",
                           dpi=dpi, name=f"{fname}-rank-plots"))
        out.append(_figure(lambda: plots.convergence(est, kind="ess"),
                           "Effective sample size of the overall scores with the largest R-hat.", dpi=dpi,
                           name=f"{fname}-ess"))
    h = recorded_heldout_loglik(info)
    if np.isfinite(h):
        out.append(f"<p>Held-out log-likelihood: <strong>{h:.4f}</strong></p>")

    out.append(checks_html)
    out.append(_settings_section(aid, info, record, fname))
    out.append("</section>")
    return "\n".join(out), warn
