"""One self-contained HTML report of one or several fits: :func:`write_report`.

The file has no external resource: the CSS is inline and every figure is a
base64 PNG.  Every name (LLM, domain, item, fit, setting) is HTML-escaped.
"""

from __future__ import annotations

import datetime as _dt
import html
import json
import math
import re
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from . import plots
from .compare import (
    compare,
    fit_diagnostics,
    fit_summary,
    fit_timings,
    load_fits,
    recorded_heldout_loglik,
)
from .plots.items import _domain_item_table

__all__ = ["DIAGNOSTIC_RULES", "render_report", "write_report"]

#: (key, comparison, threshold, meaning) of the sampler diagnostics checked when present.
DIAGNOSTIC_RULES = (
    ("max_rhat", "<=", 1.01, "largest R-hat (rank-normalised split R-hat)"),
    ("min_ess_bulk", ">=", 400, "smallest bulk effective sample size"),
    ("min_ess_tail", ">=", 400, "smallest tail effective sample size"),
    ("divergences", "<=", 0, "divergent transitions"),
    ("min_bfmi", ">=", 0.3, "smallest Bayesian fraction of missing information"),
)

_CSS = """
*{box-sizing:border-box}
body{font-family:-apple-system,BlinkMacSystemFont,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;
 margin:0;background:#f6f7f9;color:#1d2330;line-height:1.45;font-size:15px}
main{max-width:1240px;margin:0 auto;padding:24px 28px 60px;background:#fff;min-height:100vh;
 box-shadow:0 0 12px rgba(0,0,0,.06)}
h1{font-size:28px;margin:4px 0 4px}
h2{font-size:22px;margin:38px 0 10px;padding-bottom:6px;border-bottom:2px solid #e3e6eb}
h3{font-size:17px;margin:26px 0 8px}
p.meta{color:#5b6475;margin:0 0 12px;font-size:13px}
nav{background:#f1f4f8;border-radius:6px;padding:10px 14px;margin:14px 0;font-size:14px}
nav a{margin-right:14px;color:#1f5fa8;text-decoration:none}
nav div{margin:2px 0}
nav a.fitname{font-weight:600;margin-right:8px}
h4{font-size:14px;margin:14px 0 4px}
nav a:hover{text-decoration:underline}
table{border-collapse:collapse;margin:8px 0 14px;font-size:13px;font-variant-numeric:tabular-nums}
th,td{padding:4px 10px;border-bottom:1px solid #e5e8ee;text-align:left;vertical-align:top}
th{background:#f1f4f8;font-weight:600;position:sticky;top:0}
tbody tr:nth-child(even){background:#fafbfc}
td.num,th.num{text-align:right;white-space:nowrap}
td.name{max-width:420px;overflow-wrap:anywhere}
.tablewrap{max-width:100%;overflow-x:auto}
.tablewrap.tall{max-height:640px;overflow-y:auto;border:1px solid #e5e8ee}
figure{margin:14px 0 22px}
figure .imgwrap{max-width:100%;overflow:auto}
figure img{max-width:100%;height:auto;display:block;cursor:zoom-in;border:1px solid #eef0f3}
figure img.zoom{max-width:none;cursor:zoom-out}
figcaption{font-size:12.5px;color:#5b6475;margin-top:4px}
.note{font-size:13px;color:#5b6475}
.warning{background:#fdecea;border:3px solid #c62828;color:#7f1010;border-radius:8px;padding:14px 18px;
 margin:16px 0;font-size:16px}
.warning strong.big{display:block;font-size:21px;margin-bottom:4px;color:#b71c1c}
.caution{background:#fff6e0;border:2px solid #e0a000;color:#6b4e00;border-radius:8px;padding:10px 16px;margin:14px 0}
.ok{background:#e8f5e9;border:1px solid #66bb6a;color:#1b5e20;border-radius:8px;padding:8px 14px;margin:12px 0;
 display:inline-block}
.bad{color:#b71c1c;font-weight:600}
.good{color:#2e7d32}
.grid2{display:grid;grid-template-columns:1fr 1fr;gap:18px}
@media (max-width:900px){.grid2{grid-template-columns:1fr}}
code{background:#f1f4f8;padding:1px 4px;border-radius:3px;font-size:12.5px}
details summary{cursor:pointer;color:#1f5fa8;margin:6px 0}
.fit{border-top:4px solid #1f5fa8;margin-top:44px}
"""


# ------------------------------------------------------------------ helpers
def _e(x) -> str:
    return html.escape(str(x), quote=True)


def _anchor(name: str) -> str:
    return "fit-" + (re.sub(r"[^A-Za-z0-9_-]+", "-", name).strip("-") or "x")


def _fmt(v, digits: int = 3) -> str:
    if v is None:
        return "–"
    if isinstance(v, (bool, np.bool_)):
        return "yes" if v else "no"
    if isinstance(v, (int, np.integer)):
        return f"{int(v):,}"
    if isinstance(v, (float, np.floating)):
        if not math.isfinite(float(v)):
            return "–"
        v = float(v)
        if v != 0 and (abs(v) >= 1e5 or abs(v) < 10 ** (-digits)):
            return f"{v:.{digits}g}"
        return f"{v:,.{digits}f}"
    return str(v)


def _num(v) -> str:
    """A diagnostic value: integers as integers, else 4 significant digits."""
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
        return _fmt(v) if not isinstance(v, (Mapping, list, tuple)) else json.dumps(v, default=str)
    v = float(v)
    if not math.isfinite(v):
        return str(v)
    return f"{int(v):,}" if v.is_integer() else f"{v:.4g}"


def _seconds(v) -> str:
    try:
        s = float(v)
    except (TypeError, ValueError):
        return _e(v)
    if not math.isfinite(s):
        return "–"
    if s < 60:
        return f"{s:.2f} s" if s < 10 else f"{s:.1f} s"
    m, s = divmod(s, 60)
    if m < 60:
        return f"{int(m)} min {s:.0f} s"
    h, m = divmod(m, 60)
    return f"{int(h)} h {int(m)} min"


def _table(df: pd.DataFrame, *, num=(), name=(), formats=None, cls="", index=False) -> str:
    """An HTML table; every cell escaped; numeric columns right-aligned."""
    formats = formats or {}
    if index:
        df = df.reset_index()
    cols = list(df.columns)
    head = "".join(f'<th class="num">{_e(c)}</th>' if c in num else f"<th>{_e(c)}</th>" for c in cols)
    body = []
    for row in df.itertuples(index=False):
        cells = []
        for c, v in zip(cols, row):
            f = formats.get(c)
            text = f(v) if f else _fmt(v)
            klass = "num" if c in num else ("name" if c in name else "")
            cells.append(f'<td class="{klass}">{_e(text)}</td>' if klass else f"<td>{_e(text)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return (f'<div class="tablewrap {cls}"><table><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table></div>')


def _kv_table(d: Mapping, *, seconds=False) -> str:
    rows = []
    for k, v in d.items():
        if seconds and isinstance(v, (int, float)) and not isinstance(v, bool):
            text = _seconds(v)
        elif isinstance(v, (Mapping, list, tuple)):
            text = json.dumps(v, default=str)
            if len(text) > 400:
                text = text[:400] + " …"
        else:
            text = _fmt(v)
        rows.append(f"<tr><th>{_e(k)}</th><td>{_e(text)}</td></tr>")
    return f'<div class="tablewrap"><table><tbody>{"".join(rows)}</tbody></table></div>'


def _figure(make, caption: str, *, dpi: int = 100, alt: str = "") -> str:
    """Run a plot function and embed its figure; a failing plot leaves a note, not a broken report."""
    import matplotlib.pyplot as plt

    try:
        fig = make()
    except Exception as exc:  # noqa: BLE001 - the report must survive one bad plot
        plt.close("all")
        return f'<p class="note">plot not drawn: {_e(type(exc).__name__)}: {_e(exc)}</p>'
    b64 = plots.figure_to_base64_png(fig, dpi=dpi, close=True)
    return (f'<figure><div class="imgwrap"><img alt="{_e(alt or caption)}" src="data:image/png;base64,{b64}" '
            f'onclick="this.classList.toggle(\'zoom\')"></div>'
            f"<figcaption>{_e(caption)} <span class=\"note\">(click the image to see it at full size)</span>"
            f"</figcaption></figure>")


# ---------------------------------------------------------------- sections
def _data_section(responses, fits: dict, records: dict) -> str:
    out = ['<h2 id="data">Data</h2>']
    if responses is not None:
        s = responses.summary()
        acc = np.nanmean(s.accuracy.to_numpy()) if s.accuracy.size else float("nan")
        out.append(_kv_table({
            "LLMs": s.n_llms, "items": s.n_items, "domains": s.n_domains, "responses": s.n_responses,
            "observed share of the LLM x item matrix": f"{s.observed_share:.1%}",
            "mean accuracy (over LLMs and domains)": f"{acc:.3f}",
            "domain sizes (items)": f"{int(s.domains['items'].min())}–{int(s.domains['items'].max())}",
            "constant items (all responses equal)": len(s.constant_items),
            "LLMs with every answer correct": len(s.perfect_llms),
            "LLMs with no answer correct": len(s.zero_llms),
        }))
        dom = s.domains.copy()
        dom.index.name = "domain"
        dom = dom.reset_index()
        out.append("<details><summary>Responses per domain</summary>" + _table(
            dom, num=("items", "responses", "observed", "accuracy"), name=("domain",),
            formats={"observed": lambda v: f"{v:.1%}", "accuracy": lambda v: f"{v:.3f}"}, cls="tall") + "</details>")
    else:
        name, est = next(iter(fits.items()))
        p = est.posterior
        info = est.info
        extra = {}
        for src in (records.get(name, {}).get("sizes"), info.get("sizes"), info.get("data")):
            if isinstance(src, Mapping):
                extra.update(src)
        d = {"LLMs": p.sizes["llm"], "items": p.sizes["item"], "domains": p.sizes["domain"]}
        for k, v in extra.items():
            if k not in ("llms", "items", "domains", "draws") and not isinstance(v, (Mapping, list)):
                d[str(k).replace("_", " ")] = v
        items = est.item_parameters().groupby("domain").size()
        if len(items):
            d["domain sizes (items)"] = f"{int(items.min())}–{int(items.max())}"
        out.append('<p class="note">From the fit (pass <code>responses=</code> for the full data summary).</p>')
        out.append(_kv_table(d))
    return "\n".join(out)


def _diagnostics(name: str, diag: dict) -> tuple[str, str | None]:
    """The diagnostics block of a fit, and the warning line for the report's top (None if fine)."""
    if not isinstance(diag, Mapping) or not diag:
        return '<p class="note">No diagnostics recorded for this fit.</p>', None
    failing = []
    rows = []
    for key, op, thr, meaning in DIAGNOSTIC_RULES:
        if key not in diag:
            continue
        v = diag[key]
        if key.startswith("min_ess") and isinstance(diag.get("ess_threshold"), (int, float)):
            thr = diag["ess_threshold"]
        try:
            fv = float(v)
            ok = (fv <= thr if op == "<=" else fv >= thr) if math.isfinite(fv) else None
        except (TypeError, ValueError):
            ok = None
        if ok is False:
            failing.append(f"{key} = {_num(v)} (should be {op} {thr})")
        status = "–" if ok is None else ("OK" if ok else "FAIL")
        rows.append({"diagnostic": key, "value": _num(v), "rule": f"{op} {thr}", "status": status, "meaning": meaning})
    known = {r[0] for r in DIAGNOSTIC_RULES} | {"converged"}
    for k, v in diag.items():
        if k not in known:
            rows.append({"diagnostic": k, "value": _num(v), "rule": "", "status": "", "meaning": ""})
    parts = []
    converged = diag.get("converged")
    warn = None
    if converged is False or (isinstance(converged, str) and converged.lower() in ("false", "no")):
        detail = "; ".join(failing) if failing else "the fitter reported non-convergence"
        parts.append('<div class="warning" role="alert"><strong class="big">⚠ NOT CONVERGED — '
                     f"do not trust the numbers of “{_e(name)}”</strong>{_e(detail)}. Run longer chains, "
                     "reparameterise or check the model before using these scores.</div>")
        warn = f"{name}: not converged ({detail})"
    elif converged is None and failing:
        parts.append('<div class="caution"><strong>Check the diagnostics:</strong> '
                     f"{_e('; '.join(failing))}.</div>")
        warn = f"{name}: diagnostics outside the usual thresholds ({'; '.join(failing)})"
    elif converged is True or converged in ("true", "yes"):
        parts.append('<div class="ok">✓ converged (by the fitter\'s criteria)</div>')
    if rows:
        tab = pd.DataFrame(rows)
        if not tab["rule"].astype(bool).any():
            tab = tab[["diagnostic", "value"]]
        parts.append(_table(tab, num=("value",), formats={"value": str}))
    return "\n".join(parts), warn


def _leaderboard(est, interval: float, top: int, full_table: bool, k_top: int = 10) -> str:
    tab = est.overall_scores(interval)
    n = len(tab)
    has = est.uncertainty_source is not None
    pct = f"{interval:.0%}"
    df = pd.DataFrame({"rank": tab["rank"], "LLM": tab["llm"], "score": tab["score"]})
    if has:
        df[f"{pct} interval"] = [f"{lo:.3f} to {hi:.3f}" for lo, hi in zip(tab["lower"], tab["upper"])]
        df["sd"] = tab["sd"]
        df[f"rank {pct} interval"] = [f"{a}–{b}" if a != b else f"{a}"
                                      for a, b in zip(tab["rank_lower"], tab["rank_upper"])]
        p = est.prob_top(k_top)
        df[f"P(top {k_top})"] = p.reindex(tab["llm"]).to_numpy()
    if "expected_accuracy" in tab:
        df["expected accuracy"] = tab["expected_accuracy"]
    num = ("rank", "score", f"{pct} interval", "sd", f"rank {pct} interval", f"P(top {k_top})", "expected accuracy")
    fmts = {f"P(top {k_top})": lambda v: f"{v:.2f}", "expected accuracy": lambda v: f"{v:.3f}",
            "score": lambda v: f"{v:.3f}", "sd": lambda v: _fmt(v, 3)}
    out = []
    shown = df.iloc[:top]
    out.append(_table(shown, num=num, name=("LLM",), formats=fmts))
    if n > top:
        out.append(f'<p class="note">Showing the top {top} of {n:,} LLMs. The full table is '
                   "<code>overall.csv</code> in the fit folder"
                   + (", and below." if full_table else " (or pass <code>full_table=True</code>).") + "</p>")
        if full_table:
            out.append(f"<details><summary>All {n:,} LLMs</summary>"
                       + _table(df, num=num, name=("LLM",), formats=fmts, cls="tall") + "</details>")
    if not has:
        out.append('<p class="note">This is a point estimate without bootstrap replicates: no intervals.</p>')
    return "\n".join(out)


def _domain_table(est, responses) -> pd.DataFrame:
    tab = _domain_item_table(est, None, "mean")
    tab = tab.rename(columns={"difficulty": "mean difficulty", "discrimination": "mean discrimination",
                              "guessing": "mean guessing"})
    if not (tab["mean guessing"].fillna(0) != 0).any():
        tab = tab.drop(columns="mean guessing")
    theta = est.point("theta")
    overall = est.point("overall")
    with np.errstate(invalid="ignore", divide="ignore"):
        tc = theta - theta.mean(0)
        oc = overall - overall.mean()
        corr = (tc * oc[:, None]).sum(0) / np.sqrt((tc ** 2).sum(0) * (oc ** 2).sum())
    tab["corr. with overall"] = corr
    if "loadings" in est.posterior:
        tab["loading (factor 1)"] = est.point("loadings")[:, 0]
    if responses is not None:
        s = responses.summary().domains
        s.index = s.index.astype(str)
        tab["accuracy"] = s["accuracy"].reindex(tab.index)
        tab["observed"] = s["observed"].reindex(tab.index)
    return tab.reset_index()


def _correlation_pairs(est, interval: float, n: int = 10) -> str:
    tab = est.domain_correlation(interval)
    if tab.empty:
        return '<p class="note">Only one domain: no correlations.</p>'
    has = est.draws("domain_corr") is not None
    cols = ["domain_a", "domain_b", "estimate"] + (["lower", "upper"] if has else [])
    srt = tab.sort_values("estimate", ascending=False, kind="stable")
    m = min(n, len(tab))
    f = {c: (lambda v: f"{v:.3f}") for c in ("estimate", "lower", "upper")}
    num = ("estimate", "lower", "upper")
    off = tab["estimate"].to_numpy()
    head = (f'<p>Mean cross-domain correlation {np.nanmean(off):.3f} (range {np.nanmin(off):.3f} to '
            f"{np.nanmax(off):.3f}) over {len(tab):,} pairs"
            + (f"; lower/upper: {interval:.0%} interval ({_e(est.uncertainty_source)})." if has else ".") + "</p>")
    return head + ('<div class="grid2"><div><h3>Strongest pairs</h3>'
                   + _table(srt.iloc[:m][cols], num=num, name=("domain_a", "domain_b"), formats=f)
                   + "</div><div><h3>Weakest pairs</h3>"
                   + _table(srt.iloc[::-1].iloc[:m][cols], num=num, name=("domain_a", "domain_b"), formats=f)
                   + "</div></div>")


def _fit_section(name: str, est, record: dict, responses, interval: float, top: int, full_table: bool,
                 dpi: int, checks_html: str = "") -> tuple[str, str | None]:
    info = est.info
    p = est.posterior
    aid = _anchor(name)
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
    out.append(_leaderboard(est, interval, top, full_table))
    out.append(_figure(lambda: plots.overall_forest(est, interval=interval),
                       "Overall score of the best and worst LLMs with their intervals.", dpi=dpi))
    if src is not None:
        out.append(_figure(lambda: plots.rank_uncertainty(est, interval=interval),
                           "Rank of the best LLMs with rank intervals and the probability of a top-10 place.",
                           dpi=dpi))

    best = str(est.overall_scores(interval)["llm"].iloc[0])
    out.append(_figure(lambda: plots.domain_profile(est, best, interval=interval),
                       f"Domain profile of the top LLM, {_e(best)}: its score in every domain with intervals.",
                       dpi=dpi))

    out.append(f'<h3 id="{_e(aid)}-domains">Domains: difficulty and size</h3>')
    dt = _domain_table(est, responses)
    num = [c for c in dt.columns if c != "domain"]
    fmts = {c: (lambda v: f"{v:.3f}") for c in num if c not in ("items", "observed")}
    fmts["observed"] = lambda v: "–" if not np.isfinite(v) else f"{v:.1%}"
    out.append(_table(dt, num=num, name=("domain",), formats=fmts, cls="tall" if len(dt) > 25 else ""))
    sizes = responses.domain_sizes if responses is not None else None
    out.append(_figure(lambda: plots.domain_difficulty(est, sizes=sizes),
                       "Domain difficulty (mean item difficulty) against domain size; colour: mean discrimination.",
                       dpi=dpi))

    items = est.item_parameters().sort_values("discrimination")
    chosen = list(dict.fromkeys([items["item"].iloc[0], items["item"].iloc[len(items) // 2], items["item"].iloc[-1]]))
    out.append(_figure(lambda: plots.item_curves(est, chosen, interval=interval),
                       "Item characteristic curves of the least, the median and the most discriminating item.",
                       dpi=dpi))

    out.append(f'<h3 id="{_e(aid)}-correlation">Correlation structure</h3>')
    out.append(_figure(lambda: plots.correlation_heatmap(est, interval=interval),
                       "Cross-domain correlation, domains ordered by hierarchical clustering on 1 − correlation"
                       + ("; right: width of the interval of each correlation." if est.draws("domain_corr") is not None
                          else "."), dpi=dpi))
    out.append(_correlation_pairs(est, interval))

    if info.get("singular_values") is not None:
        out.append(f'<h3 id="{_e(aid)}-scree">Shared representation</h3>')
        out.append(_figure(lambda: plots.scree(est),
                           "Singular values of the domain scores; the selected rank is marked.", dpi=dpi))

    out.append(f'<h3 id="{_e(aid)}-diagnostics">Diagnostics</h3>')
    if diag_html_later is not None:
        out.append(diag_html_later)
    else:
        out.append('<p class="bad">Not converged: see the warning at the top of this fit.</p>')
    if src == "posterior" and p.sizes["chain"] > 1 and p.sizes["draw"] >= 4:
        out.append(_figure(lambda: plots.convergence(est, kind="rank"),
                           "Rank plots of the overall scores with the largest R-hat (uniform = chains agree).",
                           dpi=dpi))
        out.append(_figure(lambda: plots.convergence(est, kind="ess"),
                           "Effective sample size of the overall scores with the largest R-hat.", dpi=dpi))
    h = recorded_heldout_loglik(info)
    if np.isfinite(h):
        out.append(f"<p>Held-out log-likelihood: <strong>{h:.4f}</strong></p>")

    out.append(checks_html)
    out.append(f'<h3 id="{_e(aid)}-settings">Settings and timings</h3>')
    has_settings = isinstance(info.get("settings"), Mapping) and bool(info["settings"])
    timings = fit_timings(info)
    has_timings = bool(timings)
    if has_settings or has_timings:
        out.append('<div class="grid2">')
        out.append("<div><h4>Settings</h4>" + (_kv_table(info["settings"]) if has_settings
                                                 else '<p class="note">none recorded</p>') + "</div>")
        out.append("<div><h4>Timings</h4>" + (_kv_table(timings, seconds=True) if has_timings
                                                else '<p class="note">none recorded</p>') + "</div></div>")
    else:
        out.append('<p class="note">No settings or timings recorded for this fit.</p>')
    skip = {"method", "settings", "timings", "seconds", "diagnostics"}
    rest = {k: v for k, v in info.items() if k not in skip}
    for k in ("interval", "sizes", "versions"):
        if k in record and k not in rest:
            rest[k] = record[k]
    if rest:
        out.append("<details><summary>Other recorded information</summary>" + _kv_table(rest) + "</details>")
    out.append("</section>")
    return "\n".join(out), warn


def _comparison_section(fits: dict, interval: float, dpi: int) -> str:
    out = ['<h2 id="comparison">Comparison of the fits</h2>']
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
                                              "rank": lambda v: "–" if pd.isna(v) else _num(v)}))
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
    out.append(_table(t, index=True, num=list(t.columns)))
    names = list(fits)
    pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1:]][:6]
    figs = [_figure(lambda a=a, b=b: plots.compare_scatter(fits[a], fits[b], "overall", interval, labels=(a, b)),
                    f"Overall scores: {b} against {a}.", dpi=dpi) for a, b in pairs]
    a, b = pairs[0]
    figs.append(_figure(lambda: plots.compare_scatter(fits[a], fits[b], "theta", interval, labels=(a, b)),
                        f"Domain scores (every LLM x domain): {b} against {a}.", dpi=dpi))
    out.append('<div class="grid2">' + "".join(f"<div>{f}</div>" for f in figs) + "</div>")
    return "\n".join(out)


def _checks_section(name: str, est, responses, checks, replicates: int, dpi: int) -> str:
    """The "Model checks" block of a fit (:mod:`mtlirt.checks`): run here when ``checks`` is
    ``"auto"``/``True`` and the data are given, taken from ``checks`` when it is a
    :class:`~mtlirt.checks.ModelChecks`, else the summary recorded in the fit's diagnostics."""
    from ..checks import ModelChecks, run_checks
    from . import plots_checks as pc

    aid = _anchor(name)
    out = [f'<h3 id="{_e(aid)}-checks">Model checks</h3>']
    if checks is False:
        return ""
    mc = checks if isinstance(checks, ModelChecks) else None
    if mc is None and responses is not None:
        try:
            mc = run_checks(est, responses, n_replicates=replicates, max_draws=200)
        except Exception as exc:  # noqa: BLE001 - the report must survive a failing check
            out.append(f'<p class="note">checks not run: {_e(type(exc).__name__)}: {_e(exc)}</p>')
            return "\n".join(out)
    if mc is None:
        rec = (est.info.get("diagnostics") or {}).get("checks")
        if isinstance(rec, Mapping):
            out.append('<p class="note">Recorded in the fit (pass <code>responses=</code> for the tables '
                       "and plots):</p>" + _kv_table(rec))
        else:
            out.append('<p class="note">Pass <code>responses=</code> (the fit\'s data) to run the model checks.</p>')
        return "\n".join(out)
    cc = mc.correlation
    out.append("<h4>Cross-domain correlations: predictive check</h4>")
    if cc is None:
        out.append(f'<p class="note">Not applicable: {_e(mc.skipped.get("correlation", ""))}.</p>')
    else:
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
                           "smallest predictive p-values against the replicates' interval.", dpi=dpi))
        if len(cc.domains) <= 80:
            out.append(_figure(lambda: pc.correlation_check_matrix(cc), "Observed against replicated "
                               "correlations, and every pair's predictive p-value.", dpi=dpi))
    out.append("<h4>Item fit (S-X2)</h4>")
    it = mc.items
    if it is None:
        out.append(f'<p class="note">Not applicable: {_e(mc.skipped.get("item_fit", ""))}.</p>')
    else:
        tested = int(it["p_value"].notna().sum())
        out.append(f"<p>{int(it['misfit'].sum()):,} of {tested:,} tested items misfit (Benjamini-Hochberg "
                   f"adjusted p &lt; 0.05); share with unadjusted p &lt; 0.05: "
                   f"{float((it['p_value'] < 0.05).sum()) / max(tested, 1):.3f} (about 0.05 when the model "
                   "fits). Answers missing inside a domain an LLM ran are imputed from the model "
                   "(5 times, the statistic averaged).</p>")
        if mc.items_ppc is not None:
            pp = mc.items_ppc
            out.append(f"<p>Posterior predictive S-X2 (the data against answers replicated from each of 50 "
                       f"draws, at the draw's items): {int((pp['ppp'] < 0.05).sum()):,} of {len(pp):,} items have "
                       f"ppp &lt; 0.05 (the data's S-X2 above nearly every replicate's).</p>")
        if tested:
            out.append(_figure(lambda: pc.item_fit_plot(it), "S-X2 / df of every item by domain.", dpi=dpi))
            worst = it.sort_values("p_value", kind="stable").head(15)
            f3 = {c: (lambda v: _fmt(v, 3)) for c in ("s_x2", "p_value", "q_value", "observed", "expected")}
            out.append("<details><summary>The 15 items with the smallest p-values</summary>" + _table(
                worst, num=("n", "groups", "s_x2", "df", "p_value", "q_value", "observed", "expected"),
                name=("item", "domain"), formats=f3) + "</details>")
    out.append("<h4>Leave-one-LLM-out (PSIS-LOO on the marginal likelihood)</h4>")
    lo = mc.loo
    if lo is None:
        out.append(f'<p class="note">Not applicable: {_e(mc.skipped.get("loo_llm", ""))}.</p>')
    else:
        s = lo.summary()
        out.append(_kv_table({"elpd_loo": s["elpd_loo"], "se": s["se"], "p_loo": s["p_loo"],
                              f"LLMs with Pareto k > {s['good_k']:.2f}": f"{s['high_k']} of {s['llms']}",
                              "largest Pareto k": s["max_k"], "overall traits integrated out": s["overall_integrated"],
                              "draws used": s["draws"]}))
        out.append(_figure(lambda: pc.loo_pareto_k(lo), "Pareto k of every LLM's leave-one-out weights.", dpi=dpi))
    return "\n".join(out)


# ---------------------------------------------------------------- public
def render_report(fit_dirs_or_estimates, responses=None, title: str = "mtlirt report", *, names=None,
                  interval: float = 0.9, top: int = 50, full_table: bool = False, dpi: int = 100,
                  checks="auto", check_replicates: int = 20) -> str:
    """The report as an HTML string (see :func:`write_report` for the parameters)."""
    import matplotlib

    fits, records = load_fits(fit_dirs_or_estimates, names)
    if not fits:
        raise ValueError("no fit given")
    with matplotlib.rc_context({"figure.max_open_warning": 0}):
        sections, warnings_top, with_checks = [], [], {}
        for name, est in fits.items():
            chk = checks.get(name, False) if isinstance(checks, Mapping) else checks
            checks_html = _checks_section(name, est, responses, chk, check_replicates, dpi)
            with_checks[name] = bool(checks_html)
            sec, warn = _fit_section(name, est, records.get(name, {}), responses, interval, top, full_table, dpi,
                                     checks_html)
            sections.append(sec)
            if warn:
                warnings_top.append((name, warn))
        comparison = _comparison_section(fits, interval, dpi) if len(fits) > 1 else ""
        data = _data_section(responses, fits, records)
    try:
        from importlib.metadata import version

        ver = version("mtlirt")
    except ImportError:  # pragma: no cover - PackageNotFoundError is an ImportError
        ver = "?"
    now = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    nav = ['<a href="#data">Data</a>'] + (['<a href="#comparison">Comparison</a>'] if comparison else [])
    for name in fits:
        aid = _anchor(name)
        nav.append(f'<span class="navfit"><a class="fitname" href="#{_e(aid)}">{_e(name)}:</a>'
                   f'<a href="#{_e(aid)}-leaderboard">leaderboard</a>'
                   f'<a href="#{_e(aid)}-domains">domains</a>'
                   f'<a href="#{_e(aid)}-correlation">correlation</a>'
                   f'<a href="#{_e(aid)}-diagnostics">diagnostics</a>'
                   + (f'<a href="#{_e(aid)}-checks">model checks</a>' if with_checks[name] else "") + "</span>")
    top_warn = ""
    for name, w in warnings_top:
        if "not converged" in w:
            top_warn += ('<div class="warning" role="alert"><strong class="big">⚠ Fit “' + _e(name)
                         + "” did NOT converge</strong>" + _e(w) + f'. <a href="#{_e(_anchor(name))}-diagnostics">'
                         "See its diagnostics.</a></div>")
        else:
            top_warn += f'<div class="caution">{_e(w)}</div>'
    body = "\n".join([
        f"<h1>{_e(title)}</h1>",
        (f'<p class="meta">Generated {now} by mtlirt {_e(ver)} · fits: {_e(", ".join(fits))} · '
         f"intervals: {interval:.0%} equal-tailed</p>"),
        top_warn,
        "<nav>" + "".join(f"<div>{x}</div>" for x in nav) + "</nav>",
        data,
        comparison,
        *sections,
    ])
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{_e(title)}</title><style>{_CSS}</style></head>\n<body><main>\n{body}\n</main></body></html>\n")


def write_report(fit_dirs_or_estimates, out="report.html", responses=None, title: str = "mtlirt report", *,
                 names=None, interval: float = 0.9, top: int = 50, full_table: bool = False,
                 dpi: int = 100, checks="auto", check_replicates: int = 20, overwrite: bool = True) -> Path:
    """Write one self-contained HTML report of one or several fits.

    Parameters
    ----------
    fit_dirs_or_estimates : Estimate, path, sequence of them, or mapping name -> Estimate/path
        The fits: :class:`~mtlirt.estimate.Estimate` objects, fit folders
        (holding ``posterior.nc`` and ``fit.json``) or ``posterior.nc`` files.
    out : str or pathlib.Path
        The HTML file to write.
    responses : Responses, optional
        The data, for the data summary (sizes, observed share, accuracy per
        domain); without it the summary comes from the fit.
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
        Resolution of the figures.
    checks : "auto", bool, ModelChecks or mapping name -> ModelChecks/bool
        The "Model checks" section (:mod:`mtlirt.checks`): ``"auto"``/``True``
        runs them when ``responses`` is given (else shows the summary recorded
        in the fit's diagnostics, if any); ``False`` leaves the section out; a
        :class:`~mtlirt.checks.ModelChecks` (or one per fit name) is shown as is.
    check_replicates : int
        Replicated data sets of the correlation check (each one STL fit; with
        20 a pair misfits only when every replicate lies on one side of it).
        The leave-one-LLM-out check uses 200 posterior draws.
    overwrite : bool
        Replace an existing file ``out`` (the CLI's ``--force``); a folder is
        never replaced.  The file is written to a temporary sibling and
        renamed into place (:mod:`mtlirt.io.outputs`).

    Returns
    -------
    pathlib.Path
        The written file.

    Notes
    -----
    Per fit: leaderboard with intervals and rank intervals, forest and rank
    plots, domain difficulty and size, correlation heatmap with the
    strongest and weakest pairs, scree plot (MTL), diagnostics (a red
    warning box when ``info["diagnostics"]["converged"]`` is False, and at
    the top of the page), rank plots for a multi-chain posterior, settings
    and timings.  With several fits, a comparison section (see
    :func:`mtlirt.report.compare.compare`).
    """
    from ..io.outputs import check_file, file_output

    out = Path(out)
    check_file(out, what="HTML report", overwrite=overwrite)  # before the minutes of rendering
    text = render_report(fit_dirs_or_estimates, responses, title, names=names, interval=interval, top=top,
                         full_table=full_table, dpi=dpi, checks=checks, check_replicates=check_replicates)
    with file_output(out, what="HTML report", overwrite=overwrite) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return out
