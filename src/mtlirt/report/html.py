"""One self-contained HTML report of one or several fits: :func:`write_report`.

The file has no external resource: the CSS and a few lines of script are
inline; every figure is an inline SVG (text kept as text, dense parts as
embedded PNG) that its caption's links save as an ``.svg`` or ``.png`` file;
every table links its full content (not the truncated view) as a CSV
download (a ``data:`` URL).  Every name (LLM, domain, item, fit, setting) is
HTML-escaped.
"""

from __future__ import annotations

import datetime as _dt
import html
import itertools
import json
import math
import re
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import quote

import numpy as np
import pandas as pd

from ..data.outputs import check_file, file_output
from ..errors import InputError
from ..results.estimate import check_interval
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
from .plots.scores import _chosen_llms

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
figure .figwrap{max-width:100%;overflow:auto;cursor:zoom-in}
figure .figwrap svg{max-width:100%;height:auto;display:block;border:1px solid #eef0f3}
figure .figwrap.zoom{cursor:zoom-out}
figure .figwrap.zoom svg{max-width:none}
a.dl,span.dl a{color:#1f5fa8;text-decoration:none;font-size:12.5px}
a.dl:hover,span.dl a:hover{text-decoration:underline}
p.dl{margin:4px 0 14px;font-size:12.5px;color:#5b6475}
.tablewrap:not(.tall) + p.dl{margin-top:-8px}
.howto{background:#f4f8fd;border-left:3px solid #8fb3e0;padding:7px 12px;margin:8px 0 12px;font-size:13.5px;
 color:#2c3a4f;max-width:980px}
.howto b{color:#1f3f6e}
"""

#: Saving a figure: its inline SVG as a file, or drawn on a canvas at 200 dpi as PNG; a CSV link saved
#: through a Blob (a browser may refuse to open a data: URL over 2 MB); a click on a figure toggles its
#: full size.
_SCRIPT = """
function mtSvgText(svg){return new XMLSerializer().serializeToString(svg);}
function mtSave(url,name){var a=document.createElement('a');a.href=url;a.download=name;
 document.body.appendChild(a);a.click();a.remove();setTimeout(function(){URL.revokeObjectURL(url);},4000);}
function mtPngBlob(svg,scale,done){var vb=svg.viewBox.baseVal,w=Math.round(vb.width*scale),
 h=Math.round(vb.height*scale),img=new Image();
 img.onload=function(){var c=document.createElement('canvas');c.width=w;c.height=h;var g=c.getContext('2d');
  g.fillStyle='#fff';g.fillRect(0,0,w,h);g.drawImage(img,0,0,w,h);c.toBlob(done,'image/png');};
 img.src='data:image/svg+xml;charset=utf-8,'+encodeURIComponent(mtSvgText(svg));}
function mtCsvBlob(a){var h=a.getAttribute('href');
 return new Blob([decodeURIComponent(h.slice(h.indexOf(',')+1))],{type:'text/csv'});}
document.addEventListener('click',function(e){
 var c=e.target.closest('a.csv');
 if(c){e.preventDefault();mtSave(URL.createObjectURL(mtCsvBlob(c)),c.getAttribute('download'));return;}
 var a=e.target.closest('a[data-save]');
 if(a){e.preventDefault();var svg=a.closest('figure').querySelector('svg'),name=a.getAttribute('data-name');
  if(a.getAttribute('data-save')==='svg'){
   mtSave(URL.createObjectURL(new Blob([mtSvgText(svg)],{type:'image/svg+xml'})),name);}
  else{mtPngBlob(svg,200/72,function(b){mtSave(URL.createObjectURL(b),name);});}
  return;}
 var w=e.target.closest('.figwrap');if(w){w.classList.toggle('zoom');}
});
"""

#: LLMs in the heatmap and profiles shown when ``llms`` is not given, and the most profiles drawn.
DEFAULT_PROFILES = 3
MAX_PROFILES = 12

#: Meaning of the diagnostics a fitter records besides :data:`DIAGNOSTIC_RULES`.
_DIAG_MEANINGS = {
    "iterations": "EM sweeps of the item calibration",
    "calibrations": "calibration converged",
    "worst_rhat": "variable with the largest R-hat",
    "n_parameters": "scalars checked",
    "share_rhat_above": "share of them with R-hat above 1.01",
    "ess_threshold": "effective sample size required",
    "n_chains": "chains",
    "n_draws": "draws per chain",
    "algorithm": "algorithm",
    "pareto_khat": "Pareto k of the importance weights",
}

_FIG_IDS = itertools.count()


# ------------------------------------------------------------------ building blocks
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


def _slug(text: str) -> str:
    """A file-name-safe form of a name."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", str(text)).strip("-.") or "x"


def _csv_href(df: pd.DataFrame, index: bool = False) -> str:
    """A ``data:`` URL of the table as CSV (numbers to 6 significant digits)."""
    text = df.to_csv(index=index, float_format="%.6g", lineterminator="\n")
    return "data:text/csv;charset=utf-8," + quote(text, safe=",.-_:;()+*!~@$/")


def _csv_link(df: pd.DataFrame, filename: str, *, index: bool = False, what: str = "") -> str:
    """A line under a table: its full content as a CSV download."""
    fname = _slug(filename) + ("" if filename.endswith(".csv") else ".csv")
    n = len(df)
    return (f'<p class="dl"><a class="dl csv" download="{_e(fname)}" href="{_e(_csv_href(df, index))}">'
            f"⤓ {_e(fname)}</a> ({what or f'{n:,} row' + ('s' if n != 1 else '')}, CSV)</p>")


def _howto(text: str) -> str:
    """The short "how to read this" of a section (``text`` is HTML)."""
    return f'<p class="howto"><b>How to read this.</b> {text}</p>'


def _table(df: pd.DataFrame, *, num=(), name=(), formats=None, cls="", index=False, csv=None) -> str:
    """An HTML table; every cell escaped; numeric columns right-aligned.

    ``csv``: a file name (the table itself as CSV) or ``(frame, file name)``,
    the full table behind a truncated view.
    """
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
    out = (f'<div class="tablewrap {cls}"><table><thead><tr>{head}</tr></thead>'
           f'<tbody>{"".join(body)}</tbody></table></div>')
    if csv is not None:
        full, fname = (df, csv) if isinstance(csv, str) else csv
        out += _csv_link(full, fname)
    return out


def _readable(v) -> str:
    """A recorded value as text: numbers formatted, a list of numbers as its size and range."""
    if isinstance(v, Mapping):
        return "; ".join(f"{k}: {_readable(x)}" for k, x in v.items())
    if isinstance(v, (list, tuple)):
        vals = list(v)
        if vals and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in vals):
            if len(vals) <= 6:
                return ", ".join(_num(x) for x in vals)
            arr = np.asarray(vals, float)
            fin = arr[np.isfinite(arr)]
            rng = f": {_num(fin.min())} to {_num(fin.max())}" if fin.size else ""
            return f"{len(vals):,} values{rng}"
        text = ", ".join(_readable(x) for x in vals)
        return text if len(text) <= 300 else text[:300] + " …"
    if isinstance(v, (float, np.floating)):
        return _num(v)
    return _fmt(v)


def _flat(d: Mapping, prefix: str = "") -> list[tuple[str, object]]:
    """``(key, value)`` pairs, nested mappings as ``outer › inner`` keys."""
    out = []
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping) and v:
            out.extend(_flat(v, key + " › "))
        else:
            out.append((key, v))
    return out


def _kv_table(d: Mapping, *, seconds=False, csv=None) -> str:
    """A two-column table of recorded values, nested mappings flattened (``outer › inner``).

    ``csv``: file name of its CSV download (the values in full, lists as JSON)."""
    rows, full = [], []
    for k, v in _flat(d):
        if seconds and isinstance(v, (int, float)) and not isinstance(v, bool):
            text = _seconds(v)
        else:
            text = _readable(v)
        rows.append(f"<tr><th>{_e(k)}</th><td>{_e(text)}</td></tr>")
        full.append((k, json.dumps(v, default=str) if isinstance(v, (list, tuple)) else v))
    out = f'<div class="tablewrap"><table><tbody>{"".join(rows)}</tbody></table></div>'
    if csv is not None:
        out += _csv_link(pd.DataFrame(full, columns=["key", "value"]), csv)
    return out


def _figure(make, caption: str, *, dpi: int = 100, alt: str = "", name: str = "figure") -> str:
    """Run a plot function and embed its figure as inline SVG, with links that save it as SVG or PNG
    (file ``name``); a failing plot leaves a note, not a broken report."""
    import matplotlib.pyplot as plt

    try:
        fig = make()
    except Exception as exc:  # noqa: BLE001 - the report must survive one bad plot
        plt.close("all")
        return f'<p class="note">plot not drawn: {_e(type(exc).__name__)}: {_e(exc)}</p>'
    svg = plots.figure_to_svg(fig, close=True, salt=f"mtlirt-{next(_FIG_IDS)}", dpi=dpi)
    svg = svg.replace("<svg ", f'<svg role="img" aria-label="{_e(alt or caption)}" ', 1)
    fname = _slug(name)
    return (f'<figure class="plot"><div class="figwrap" title="click to zoom">{svg}</div>'
            f"<figcaption>{_e(caption)} <span class=\"dl\">Save: "
            f'<a href="#" data-save="svg" data-name="{_e(fname)}.svg">SVG</a> · '
            f'<a href="#" data-save="png" data-name="{_e(fname)}.png">PNG</a></span></figcaption></figure>')


# ---------------------------------------------------------------- sections
def _data_section(responses, fits: dict, records: dict) -> str:
    out = ['<h2 id="data">Data</h2>', _howto(
        "The leaderboard the fits were made from. The observed share is the part of the LLM x item matrix "
        "that holds a response: an LLM that ran only some domains gets its other domain scores predicted from "
        "the domains it ran. Constant items (every LLM right, or every LLM wrong) tell the LLMs nothing apart.")]
    if responses is not None:
        s = responses.summary()
        acc = np.nanmean(s.accuracy.to_numpy()) if s.accuracy.size else float("nan")
        out.append(_kv_table(csv="data-summary.csv", d={
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
            formats={"observed": lambda v: f"{v:.1%}", "accuracy": lambda v: f"{v:.3f}"}, cls="tall",
            csv="data-domains.csv") + "</details>")
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
        out.append('<p class="note">From the fit (pass the data, <code>--data</code> or <code>responses=</code>, '
                   "for the full data summary).</p>")
        out.append(_kv_table(d, csv="data-summary.csv"))
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
    known = {r[0] for r in DIAGNOSTIC_RULES} | {"converged", "checks"}  # the checks have their own section
    for k, v in diag.items():
        if k in known:
            continue
        meaning = _DIAG_MEANINGS.get(k, "")
        for key, val in (_flat({k: v}) if isinstance(v, Mapping) else [(k, v)]):
            rows.append({"diagnostic": key, "value": _readable(val) if not isinstance(val, (int, float)) else _num(val),
                         "rule": "", "status": "", "meaning": meaning})
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
            tab = tab[["diagnostic", "value", "meaning"]]
        if not tab["meaning"].astype(bool).any():
            tab = tab.drop(columns="meaning")
        parts.append(_table(tab, num=("value",), formats={"value": str}, csv=f"{_slug(name)}-diagnostics.csv"))
    return "\n".join(parts), warn


def _leaderboard(est, interval: float, top: int, full_table: bool, k_top: int = 10, fname: str = "fit") -> str:
    tab = est.overall_scores(interval)
    n = len(tab)
    has = est.uncertainty_source is not None
    pct = f"{interval:.0%}"
    df = pd.DataFrame({"rank": tab["rank"], "LLM": tab["llm"], "score": tab["score"]})
    full = tab.copy()
    if has:
        df[f"{pct} interval"] = [f"{lo:.3f} to {hi:.3f}" for lo, hi in zip(tab["lower"], tab["upper"])]
        df["sd"] = tab["sd"]
        df[f"rank {pct} interval"] = [f"{a}–{b}" if a != b else f"{a}"
                                      for a, b in zip(tab["rank_lower"], tab["rank_upper"])]
        p = est.prob_top(k_top)
        df[f"P(top {k_top})"] = p.reindex(tab["llm"]).to_numpy()
        full[f"p_top{k_top}"] = df[f"P(top {k_top})"].to_numpy()
    else:
        full = full.drop(columns=["sd", "lower", "upper", "rank_lower", "rank_upper"])
    if "expected_accuracy" in tab:
        df["expected accuracy"] = tab["expected_accuracy"]
    num = ("rank", "score", f"{pct} interval", "sd", f"rank {pct} interval", f"P(top {k_top})", "expected accuracy")
    fmts = {f"P(top {k_top})": lambda v: f"{v:.2f}", "expected accuracy": lambda v: f"{v:.3f}",
            "score": lambda v: f"{v:.3f}", "sd": lambda v: _fmt(v, 3)}
    csv = (full, f"{fname}-leaderboard.csv")
    out = []
    if n > top and full_table:
        out.append(_table(df.iloc[:top], num=num, name=("LLM",), formats=fmts))
        out.append(f'<p class="note">Showing the top {top} of {n:,} LLMs; all of them below.</p>')
        out.append(f"<details><summary>All {n:,} LLMs</summary>"
                   + _table(df, num=num, name=("LLM",), formats=fmts, cls="tall", csv=csv) + "</details>")
    elif n > top:
        out.append(_table(df.iloc[:top], num=num, name=("LLM",), formats=fmts, csv=csv))
        out.append(f'<p class="note">Showing the top {top} of {n:,} LLMs. The full table is the CSV above '
                   "(and <code>overall.csv</code> in the fit folder); to list every LLM here, pass "
                   "<code>--full-table</code> to <code>mtlirt report</code> (in Python, "
                   "<code>full_table=True</code>).</p>")
    else:
        out.append(_table(df, num=num, name=("LLM",), formats=fmts, csv=csv))
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


def _correlation_pairs(est, interval: float, n: int = 10, fname: str = "fit") -> str:
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
                   + "</div></div>" + _csv_link(srt[cols], f"{fname}-domain-correlations.csv",
                                                what=f"all {len(srt):,} pairs, strongest first"))


def _settings(info: Mapping) -> dict:
    """The recorded settings, each one left to the data shown with the value selected."""
    settings = dict(info.get("settings") or {})
    ev = info.get("rank_evidence")
    how = ev.get("method") if isinstance(ev, Mapping) else None
    if "rank" in settings and settings["rank"] is None and info.get("rank") is not None:
        settings["rank"] = f"{info['rank']} (selected from the data" + (f": {how})" if how else ")")
    if "gamma" in settings and settings["gamma"] is None and info.get("gamma") is not None:
        c = info.get("C")
        settings["gamma"] = (f"{_num(info['gamma'])} (tuned on held-out responses"
                             + (f": C = {_num(c)})" if c is not None else ")"))
    if "guessing" in settings and settings["guessing"] is None:
        settings["guessing"] = "none (no guessing floor)"
    ran = info.get("sampler_config")  # Bayes: the inference settings as run, every default filled in
    if isinstance(ran, Mapping):
        for name, value in ran.items():
            given = settings.get(name)
            if value is not None and value != given:
                settings[name] = f"{_num(value) if isinstance(value, float) else value} (" + (
                    "the default" if given is None else f"{given}") + ")"
    return settings


def _accuracy_section(aid: str, est, accuracy, source: str | None, interval: float, dpi: int,
                      fname: str, n_show: int = 10) -> str:
    """IRT rank against raw-accuracy rank: figure, the LLMs that move most, the CSV of all."""
    out = [f'<h3 id="{_e(aid)}-accuracy">IRT rank against raw accuracy</h3>', _howto(
        "Each point is an LLM: its place by raw accuracy (the mean of its domain accuracies, the number a "
        "leaderboard shows) against its place by the IRT overall score; points on the dashed line keep their "
        "place. The IRT score weighs each item by how well it tells LLMs apart and each domain by what it "
        "shares with the others, so an LLM moves when its right answers fall on easy, weakly discriminating "
        "items or in domains that say little about the overall ability. The grey bar is the IRT rank "
        "interval: a move that takes the accuracy rank outside it is larger than the estimation error. "
        "Labels read <i>name: accuracy rank → IRT rank</i>.")]
    if est.method == "accuracy":
        out.append('<p class="note">This fit is the raw-accuracy baseline itself: its ranks are the accuracy '
                   "ranks.</p>")
        return "\n".join(out)
    if accuracy is None:
        out.append('<p class="note">Not drawn: raw accuracy needs the data. Pass the results table the fit came '
                   "from (<code>mtlirt report ... --data TABLE</code>; in Python <code>responses=</code>), or "
                   "add a fit of the accuracy baseline (<code>mtlirt fit TABLE --method accuracy</code>).</p>")
        return "\n".join(out)
    try:
        shift = plots.rank_shift(est, accuracy, interval)
    except ValueError as exc:
        out.append(f'<p class="note">Not drawn: {_e(exc)}.</p>')
        return "\n".join(out)
    if source:
        out.append(f'<p class="note">Raw accuracy from {_e(source)}.</p>')
    from scipy.stats import spearmanr

    rho = float(spearmanr(shift["accuracy_rank"], shift["rank"]).statistic) if len(shift) > 2 else float("nan")
    moved = int((shift["shift"] != 0).sum())
    outside = int(shift["outside"].sum())
    has_int = bool(shift["rank_lower"].notna().any())
    out.append(f"<p>{moved:,} of {len(shift):,} LLMs change place (Spearman ρ between the two rankings "
               f"{rho:.3f}; median move {np.median(np.abs(shift['shift'])):.0f}, largest "
               f"{int(np.abs(shift['shift']).max())} places)"
               + (f"; for {outside:,} the accuracy rank lies outside the IRT {interval:.0%} rank interval."
                  if has_int else ".") + "</p>")
    out.append(_figure(lambda: plots.rank_vs_accuracy(est, accuracy, interval=interval),
                       "IRT rank against raw-accuracy rank; the LLMs that move most are named.", dpi=dpi,
                       name=f"{fname}-rank-vs-accuracy"))
    show = shift.head(n_show)
    tab = pd.DataFrame({"LLM": show["llm"], "IRT rank": show["rank"], "accuracy rank": show["accuracy_rank"],
                        "move": [f"{v:+d}" for v in show["shift"]], "raw accuracy": show["accuracy"],
                        "IRT score": show["score"]})
    if has_int:
        tab.insert(2, f"IRT rank {interval:.0%} interval",
                   [f"{int(a)}–{int(b)}" if a != b else f"{int(a)}" for a, b in zip(show["rank_lower"],
                                                                                     show["rank_upper"])])
        tab["outside the interval"] = show["outside"].to_numpy()
    out.append(f"<h4>The {len(show)} LLMs that move most</h4>")
    out.append(_table(tab, num=[c for c in tab.columns if c not in ("LLM", "outside the interval")], name=("LLM",),
                      formats={"raw accuracy": lambda v: f"{v:.3f}", "IRT score": lambda v: f"{v:.3f}"},
                      csv=(shift, f"{fname}-rank-vs-accuracy.csv")))
    return "\n".join(out)


def _scores_section(aid: str, est, chosen: list[str] | None, top_llms: int, interval: float, dpi: int,
                    fname: str) -> str:
    """The LLM x domain heatmap and the domain profiles of the chosen LLMs (default the best)."""
    out = [f'<h3 id="{_e(aid)}-scores">Domain scores</h3>', _howto(
        "Each cell is an LLM's score in one domain, on the domain-score scale (0 = the average LLM of this "
        "leaderboard): red above it, blue below. Columns are ordered so that correlated domains sit side by "
        "side (the order of the correlation heatmap below); a row lighter than its neighbours in some columns "
        "shows where that LLM is relatively weak. A profile shows one LLM's domain scores with their "
        "intervals: a domain whose interval lies wholly above 0 is a clear strength against the average LLM, "
        "and the dashed line is the LLM's overall score.")]
    names = {str(x) for x in est.llms}
    if chosen is None:
        rows = None
        profiles = [str(x) for x in est.overall_scores(interval)["llm"].iloc[:DEFAULT_PROFILES]]
        what = f"the {min(top_llms, len(names))} best LLMs"
    else:
        missing = [x for x in chosen if x not in names]
        rows = [x for x in chosen if x in names]
        if missing:
            more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
            out.append(f'<p class="note">Not in this fit: {_e(", ".join(missing[:5]))}{_e(more)}.</p>')
        if not rows:
            return "\n".join(out)
        order = {str(n): i for i, n in enumerate(est.overall_scores(interval)["llm"])}
        profiles = sorted(rows, key=order.__getitem__)
        what = f"{len(rows)} chosen LLM" + ("s" if len(rows) != 1 else "")
    heat = _chosen_llms(est, rows, top_llms)
    out.append(_figure(lambda: plots.domain_heatmap(est, rows, top=top_llms),
                       f"Domain scores of {what}, best on top; columns in the clustering order of the domains.",
                       dpi=dpi, name=f"{fname}-domain-heatmap"))
    pos = {str(n): i for i, n in enumerate(est.llms)}
    order = plots.domain_order(est, "cluster")
    wide = pd.DataFrame(np.asarray(est.point("theta"))[np.ix_([pos[n] for n in heat], order)],
                        columns=np.asarray(est.domains, dtype=str)[order])
    rank = est.overall_scores(interval).set_index("llm")["rank"]
    wide.insert(0, "llm", heat)
    wide.insert(1, "rank", rank.reindex(heat).to_numpy())
    out.append(_csv_link(wide, f"{fname}-domain-heatmap.csv", what=f"the heatmap's {len(heat)} LLMs x "
                         f"{wide.shape[1] - 2} domains"))
    if len(profiles) > MAX_PROFILES:
        out.append(f'<p class="note">Profiles of the first {MAX_PROFILES} of the {len(profiles)} chosen LLMs '
                   "(by overall rank); the heatmap shows all of them.</p>")
        profiles = profiles[:MAX_PROFILES]
    figs = [_figure(lambda llm=llm: plots.domain_profile(est, llm, interval=interval),
                    f"Domain profile of {llm}: its score in every domain with intervals.", dpi=dpi,
                    name=f"{fname}-profile-{llm}") for llm in profiles]
    out.append('<div class="grid2">' + "".join(f"<div>{f}</div>" for f in figs) + "</div>")
    return "\n".join(out)


def _domains_section(aid: str, est, responses, interval: float, dpi: int, fname: str) -> str:
    """Domains (table, difficulty against size) and items (item map, item curves)."""
    out = [f'<h3 id="{_e(aid)}-domains">Domains: difficulty and size</h3>']
    out.append(_howto(
        "Per domain: its items, their mean difficulty (the domain score at which an item is answered right "
        "halfway between its guessing floor and certainty) and discrimination (how sharply an item separates "
        "weaker from stronger LLMs), and how closely the domain score follows the overall score. A domain "
        "with a low correlation measures a skill of its own, or mostly noise when it is small."))
    dt = _domain_table(est, responses)
    num = [c for c in dt.columns if c != "domain"]
    fmts = {c: (lambda v: f"{v:.3f}") for c in num if c not in ("items", "observed")}
    fmts["observed"] = lambda v: "–" if not np.isfinite(v) else f"{v:.1%}"
    out.append(_table(dt, num=num, name=("domain",), formats=fmts, cls="tall" if len(dt) > 25 else "",
                      csv=f"{fname}-domains.csv"))
    sizes = responses.domain_sizes if responses is not None else None
    out.append(_figure(lambda: plots.domain_difficulty(est, sizes=sizes),
                       "Domain difficulty (mean item difficulty) against domain size; colour: mean discrimination.",
                       dpi=dpi, name=f"{fname}-domain-difficulty"))

    out.append(f'<h3 id="{_e(aid)}-items">Items: the item map</h3>')
    out.append(_howto(
        "The item map puts every item's difficulty (orange tick) on the scale of the LLMs' domain scores (blue: "
        "the middle half of the LLMs, whiskers from the 5th to the 95th percentile). Items far below the box "
        "are answered right by nearly every LLM, items far above by almost none: both tell the LLMs little "
        "apart. A domain whose ticks spread over the box measures the whole leaderboard. The curves give the "
        "probability of a right answer against the domain score: the steeper, the more discriminating."))
    out.append(_figure(lambda: plots.item_map(est),
                       "Item map: item difficulties against the LLMs' domain scores, one row per domain.",
                       dpi=dpi, name=f"{fname}-item-map"))
    items = est.item_parameters().sort_values("discrimination")
    chosen_items = list(dict.fromkeys([items["item"].iloc[0], items["item"].iloc[len(items) // 2],
                                       items["item"].iloc[-1]]))
    out.append(_figure(lambda: plots.item_curves(est, chosen_items, interval=interval),
                       "Item characteristic curves of the least, the median and the most discriminating item.",
                       dpi=dpi, name=f"{fname}-item-curves"))

    return "\n".join(out)


def _structure_section(aid: str, est, interval: float, dpi: int, fname: str) -> str:
    """The correlation structure (heatmap, strongest and weakest pairs) and MTL's scree plot."""
    out = [f'<h3 id="{_e(aid)}-correlation">Correlation structure</h3>']
    out.append(_howto(
        "The correlation of the LLMs' domain traits across each pair of domains, free of the scores' "
        "measurement noise. High everywhere: one general ability explains most of the leaderboard; blocks of "
        "higher correlation: groups of related skills; a pale row: a domain that measures something else. "
        "With draws, the second panel shows how uncertain each correlation is."))
    out.append(_figure(lambda: plots.correlation_heatmap(est, interval=interval),
                       "Cross-domain correlation, domains ordered by hierarchical clustering on 1 − correlation"
                       + ("; second panel: width of the interval of each correlation."
                          if est.draws("domain_corr") is not None else "."), dpi=dpi,
                       name=f"{fname}-domain-correlation"))
    out.append(_correlation_pairs(est, interval, fname=fname))

    if est.info.get("singular_values") is not None:
        out.append(f'<h3 id="{_e(aid)}-scree">Shared representation</h3>')
        out.append(_howto(
            "The singular values of the domain scores: one large value and a flat tail mean one overall trait. "
            "The selected rank is the number of overall traits the MTL estimator kept."))
        out.append(_figure(lambda: plots.scree(est),
                           "Singular values of the domain scores; the selected rank is marked.", dpi=dpi,
                           name=f"{fname}-scree"))

    return "\n".join(out)


def _settings_section(aid: str, info: Mapping, record: Mapping, fname: str) -> str:
    """Settings (with the values selected from the data), timings and the rest of the record."""
    out = [f'<h3 id="{_e(aid)}-settings">Settings and timings</h3>']
    out.append(_howto(
        "The options the fit ran with; a setting left to the data (the rank, the shrinkage) shows the value "
        "selected. Timings are wall-clock seconds of each stage."))
    settings = _settings(info)
    timings = fit_timings(info)
    if settings or timings:
        out.append('<div class="grid2">')
        out.append("<div><h4>Settings</h4>" + (_kv_table(settings, csv=f"{fname}-settings.csv") if settings
                                                 else '<p class="note">none recorded</p>') + "</div>")
        out.append("<div><h4>Timings</h4>" + (_kv_table(timings, seconds=True, csv=f"{fname}-timings.csv")
                                                if timings else '<p class="note">none recorded</p>') + "</div></div>")
    else:
        out.append('<p class="note">No settings or timings recorded for this fit.</p>')
    skip = {"method", "settings", "timings", "seconds", "diagnostics"}
    rest = {k: v for k, v in info.items() if k not in skip}
    for k in ("interval", "sizes", "versions"):
        if k in record and k not in rest:
            rest[k] = record[k]
    if rest:
        out.append("<details><summary>Other recorded information</summary>"
                   + _kv_table(rest, csv=f"{fname}-recorded.csv") + "</details>")
    return "\n".join(out)


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


def _checks_section(name: str, est, responses, checks, replicates: int, dpi: int) -> str:
    """The "Model checks" block of a fit (:mod:`mtlirt.evaluate.checks`): run here when ``checks`` is
    ``"auto"``/``True`` and the data are given, taken from ``checks`` when it is a
    :class:`~mtlirt.evaluate.checks.ModelChecks`, else the summary recorded in the fit's diagnostics."""
    from ..evaluate.checks import ModelChecks, run_checks
    from . import plots_checks as pc

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
        except Exception as exc:  # noqa: BLE001 - the report must survive a failing check
            out.append(f'<p class="note">checks not run: {_e(type(exc).__name__)}: {_e(exc)}</p>')
            return "\n".join(out)
    if mc is None:
        rec = (est.info.get("diagnostics") or {}).get("checks")
        if isinstance(rec, Mapping):
            out.append('<p class="note">Recorded in the fit (pass <code>responses=</code> for the tables '
                       "and plots):</p>" + _kv_table(rec, csv=f"{fname}-checks.csv"))
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
                           "smallest predictive p-values against the replicates' interval.", dpi=dpi,
                           name=f"{fname}-check-correlation-pairs"))
        if len(cc.domains) <= 80:
            out.append(_figure(lambda: pc.correlation_check_matrix(cc), "Observed against replicated "
                               "correlations, and every pair's predictive p-value.", dpi=dpi,
                               name=f"{fname}-check-correlation-matrix"))
        out.append(_csv_link(cc.table, f"{fname}-check-correlations.csv",
                             what=f"every pair's observed and replicated correlation, {len(cc.table):,} rows"))
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
            out.append(_figure(lambda: pc.item_fit_plot(it), "S-X2 / df of every item by domain.", dpi=dpi,
                               name=f"{fname}-check-item-fit"))
            worst = it.sort_values("p_value", kind="stable").head(15)
            f3 = {c: (lambda v: _fmt(v, 3)) for c in ("s_x2", "p_value", "q_value", "observed", "expected")}
            out.append("<details><summary>The 15 items with the smallest p-values</summary>" + _table(
                worst, num=("n", "groups", "s_x2", "df", "p_value", "q_value", "observed", "expected"),
                name=("item", "domain"), formats=f3,
                csv=(it.sort_values("p_value", kind="stable"), f"{fname}-check-item-fit.csv")) + "</details>")
    out.append("<h4>Leave-one-LLM-out (PSIS-LOO on the marginal likelihood)</h4>")
    lo = mc.loo
    if lo is None:
        out.append(f'<p class="note">Not applicable: {_e(mc.skipped.get("loo_llm", ""))}.</p>')
    else:
        s = lo.summary()
        out.append(_kv_table({"elpd_loo": s["elpd_loo"], "se": s["se"], "p_loo": s["p_loo"],
                              f"LLMs with Pareto k > {s['good_k']:.2f}": f"{s['high_k']} of {s['llms']}",
                              "largest Pareto k": s["max_k"], "overall traits integrated out": s["overall_integrated"],
                              "draws used": s["draws"]}, csv=f"{fname}-check-loo-summary.csv"))
        out.append(_figure(lambda: pc.loo_pareto_k(lo), "Pareto k of every LLM's leave-one-out weights.", dpi=dpi,
                           name=f"{fname}-check-loo"))
        out.append(_csv_link(lo.table, f"{fname}-check-loo.csv", what=f"every LLM's elpd and Pareto k, "
                             f"{len(lo.table):,} rows"))
    return "\n".join(out)


# ---------------------------------------------------------------- public
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
    global _FIG_IDS
    _FIG_IDS = itertools.count()  # the SVG ids of one page: unique within it, the same on every run
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
                   f'<a href="#{_e(aid)}-accuracy">IRT vs accuracy</a>'
                   f'<a href="#{_e(aid)}-scores">domain scores</a>'
                   f'<a href="#{_e(aid)}-domains">domains</a>'
                   f'<a href="#{_e(aid)}-items">item map</a>'
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
            f"<title>{_e(title)}</title><style>{_CSS}</style></head>\n<body><main>\n{body}\n</main>"
            f"<script>{_SCRIPT}</script></body></html>\n")


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
