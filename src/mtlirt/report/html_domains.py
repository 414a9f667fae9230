"""A fit's domain sections in the report: the LLM x domain scores (heatmap, profiles), the domains and
their items (difficulty, item map, item curves), and the correlation structure (heatmap, pairs, scree)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from . import plots
from .html_blocks import _csv_link, _e, _howto, _table
from .html_figures import _figure
from .plots.items import _domain_item_table
from .plots.scores import _chosen_llms

#: LLMs in the heatmap and profiles shown when ``llms`` is not given, and the most profiles drawn.
DEFAULT_PROFILES = 3


MAX_PROFILES = 12


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
