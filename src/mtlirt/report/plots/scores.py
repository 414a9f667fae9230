"""Plots of scores: the overall forest, one LLM's domain profile, the LLM x domain heatmap, rank uncertainty,
two fits side by side."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure

from ._common import (
    _BLUE,
    _GREY,
    _ORANGE,
    _RED,
    _axes,
    _has_interval,
    _hbars,
    _interval_label,
    _label_width_in,
    _row_style,
    _shorten,
)
from .structure import domain_order


def overall_forest(est, top: int = 20, bottom: int = 10, interval: float = 0.9, *, ax=None,
                   label_width: int = 48) -> Figure:
    """Overall score of the best and worst LLMs with their intervals.

    Parameters
    ----------
    est : Estimate
        Any estimate.
    top, bottom : int
        Numbers of best and worst LLMs shown (all LLMs when there are no more
        than ``top + bottom``).
    interval : float
        Probability mass of the intervals.
    ax : matplotlib.axes.Axes, optional
        Axes to draw into.
    label_width : int
        Longer LLM names are cut in the middle.

    Returns
    -------
    matplotlib.figure.Figure
        One axes; one y tick label per LLM shown (``rank. name``), best on top.
    """
    tab = est.overall_scores(interval)
    n = len(tab)
    if top < 0 or bottom < 0:
        raise ValueError("top and bottom must be >= 0")
    if top + bottom >= n:
        rows = tab
        gap_after = None
    else:
        rows = pd.concat([tab.iloc[:top], tab.iloc[n - bottom:]]) if bottom else tab.iloc[:top]
        gap_after = top if bottom else None
    m = len(rows)
    if m == 0:
        raise ValueError("nothing to plot: top + bottom is 0")
    row_h, fs = _row_style(m)
    labels = [f"{int(r)}. {_shorten(nm, label_width)}" for r, nm in zip(rows["rank"], rows["llm"])]
    # leave a visible gap between the two groups
    y = np.arange(m, dtype=float)
    if gap_after is not None:
        y[gap_after:] += 1.0
    fig, ax = _axes(ax, (max(5.5, _label_width_in(labels, fs) + 4.5), 1.3 + row_h * (m + 1)))
    colors = np.where(np.arange(m) < (gap_after if gap_after is not None else m), _BLUE, _ORANGE)
    lo, hi = rows["lower"].to_numpy(), rows["upper"].to_numpy()
    for col in (_BLUE, _ORANGE):
        sel = colors == col
        if sel.any():
            _hbars(ax, y[sel], lo[sel], hi[sel], col)
            ax.scatter(rows["score"].to_numpy()[sel], y[sel], s=14, color=col, zorder=3)
    ax.set_yticks(y)
    ax.set_yticklabels(labels, fontsize=fs)
    ax.invert_yaxis()
    ax.axvline(0, color=_GREY, lw=0.8, ls=":")
    if gap_after is not None:
        ax.axhline(gap_after, color=_GREY, lw=0.6, ls="--")
        ax.text(0.99, gap_after, f"{n - m:,} LLMs not shown", transform=ax.get_yaxis_transform(),
                ha="right", va="center", fontsize=7, color=_GREY,
                bbox={"facecolor": "white", "edgecolor": "none", "pad": 1})
    ax.set_xlabel("overall score (SD units of the LLM population)", fontsize=9)
    what = f"top {top} and bottom {bottom}" if gap_after is not None else f"all {n}"
    ax.set_title(f"Overall score, {what} of {n:,} LLMs\n({est.method}; {_interval_label(est, interval)})",
                 fontsize=9)
    ax.grid(axis="x", alpha=0.3)
    ax.tick_params(axis="y", length=0)
    return fig


def domain_profile(est, llm, interval: float = 0.9, *, ax=None, sort: str = "score") -> Figure:
    """One LLM's domain scores with their intervals, one row per domain.

    Parameters
    ----------
    est : Estimate
        Any estimate.
    llm : str or int
        The LLM's name, or its position in ``est.llms``.
    interval : float
        Probability mass of the intervals.
    ax : matplotlib.axes.Axes, optional
        Axes to draw into.
    sort : {"score", "name", "none"}
        Row order: by score (best on top), by domain name, or as stored.

    Returns
    -------
    matplotlib.figure.Figure
        One axes; the y tick labels are the domain names in the chosen order.
    """
    llms = est.llms
    if isinstance(llm, (int, np.integer)) and not isinstance(llm, bool):
        if not -len(llms) <= llm < len(llms):
            raise IndexError(f"LLM position {llm} out of range (0..{len(llms) - 1})")
        name = str(llms[llm])
    else:
        name = str(llm)
        if name not in set(llms):
            raise KeyError(f"unknown LLM {name!r}")
    tab = est.domain_scores(interval)
    rows = tab[tab["llm"] == name].reset_index(drop=True)
    if sort == "score":
        rows = rows.sort_values("score", ascending=False, kind="stable")
    elif sort == "name":
        rows = rows.sort_values("domain", kind="stable")
    elif sort not in ("none", None):
        raise ValueError("sort must be 'score', 'name' or 'none'")
    k = len(rows)
    row_h, fs = _row_style(k)
    labels = [_shorten(d, 40) for d in rows["domain"]]
    fig, ax = _axes(ax, (max(5.5, _label_width_in(labels, fs) + 4.5), 1.3 + row_h * (k + 1)))
    y = np.arange(k)
    lo, hi, sc = rows["lower"].to_numpy(), rows["upper"].to_numpy(), rows["score"].to_numpy()
    if _has_interval(lo, hi):
        color = np.where(lo > 0, _BLUE, np.where(hi < 0, _RED, _GREY))
        for col, what in ((_BLUE, "interval above 0"), (_GREY, "interval covers 0"), (_RED, "interval below 0")):
            sel = color == col
            if sel.any():
                _hbars(ax, y[sel], lo[sel], hi[sel], col)
                ax.scatter(sc[sel], y[sel], s=16, color=col, zorder=3, label=what)
    else:
        ax.scatter(sc, y, s=16, color=_BLUE, zorder=3, label="domain score")
    overall = float(est.point("overall")[list(llms).index(name)])
    ax.axvline(0, color=_GREY, lw=0.8, ls=":")
    ax.axvline(overall, color=_ORANGE, lw=1.0, ls="--", label=f"overall score {overall:.2f}")
    ax.set_yticks(y)
    ax.set_yticklabels(labels, fontsize=fs)
    ax.invert_yaxis()
    ax.set_xlabel("domain score (SD units of the LLM population)", fontsize=9)
    ax.set_title(f"{_shorten(name, 60)}: domain scores\n({est.method}; {_interval_label(est, interval)})", fontsize=9)
    ax.grid(axis="x", alpha=0.3)
    ax.tick_params(axis="y", length=0)
    ax.legend(fontsize=7, loc="lower right", framealpha=0.9)
    return fig


def rank_uncertainty(est, top: int = 30, interval: float = 0.9, *, k: int = 10, fig=None,
                     label_width: int = 48) -> Figure:
    """Rank intervals of the best LLMs and, with draws, their probability of a top-``k`` place.

    Parameters
    ----------
    est : Estimate
        Any estimate.
    top : int
        Number of LLMs shown (best by point rank).
    interval : float
        Probability mass of the rank intervals.
    k : int
        The ``k`` of P(top-k) in the companion panel.
    fig : matplotlib.figure.Figure, optional
        An empty figure to draw into.
    label_width : int
        Longer LLM names are cut in the middle.

    Returns
    -------
    matplotlib.figure.Figure
        Axes: rank intervals, then P(top-k) when the estimate has draws.
    """
    tab = est.overall_scores(interval).iloc[:top]
    m = len(tab)
    has_draws = est.rank_draws() is not None
    row_h, fs = _row_style(m)
    labels = [_shorten(nm, label_width) for nm in tab["llm"]]
    panels = 2 if has_draws else 1
    if fig is None:
        fig = plt.figure(figsize=(_label_width_in(labels, fs) + 4.0 + 2.5 * (panels - 1), 1.3 + row_h * (m + 1)),
                         layout="constrained")
    axes = fig.subplots(1, panels, squeeze=False, sharey=True,
                        gridspec_kw={"width_ratios": [3, 1.4][:panels]})[0]
    ax = axes[0]
    y = np.arange(m)
    if has_draws:
        lo, hi = (tab[c].to_numpy(float, na_value=np.nan) for c in ("rank_lower", "rank_upper"))
        _hbars(ax, y, lo, hi, _BLUE, lw=3, alpha=0.5)
    ax.scatter(tab["rank"], y, s=16, color=_BLUE, zorder=3)
    ax.set_yticks(y)
    ax.set_yticklabels(labels, fontsize=fs)
    ax.invert_yaxis()
    ax.set_xlabel("rank (1 = best)", fontsize=9)
    hi = float(np.nanmax(np.r_[tab["rank_upper"].to_numpy(float, na_value=np.nan), tab["rank"].to_numpy(float)]))
    ax.set_xlim(0.3, hi + 0.7 + 0.03 * hi)
    ax.grid(axis="x", alpha=0.3)
    ax.tick_params(axis="y", length=0)
    n = len(est.llms)
    ax.set_title(f"Rank of the top {m} of {n:,} LLMs\n({est.method}; "
                 + (f"{interval:.0%} rank interval, {est.uncertainty_source})" if has_draws else "no rank interval)"),
                 fontsize=9)
    if has_draws:
        p = est.prob_top(k).reindex(tab["llm"]).to_numpy()
        ax2 = axes[1]
        ax2.barh(y, p, color=_ORANGE, height=0.6)
        ax2.set_xlim(0, 1)
        ax2.set_xlabel(f"P(top {k})", fontsize=9)
        ax2.grid(axis="x", alpha=0.3)
        ax2.tick_params(axis="y", length=0, labelleft=False)
        ax2.set_title(f"Probability of\na top-{k} rank", fontsize=9)
    return fig


def _comparable(est_a, est_b, var: str, interval: float, domain=None) -> pd.DataFrame:
    if var == "overall":
        a = est_a.overall_scores(interval).set_index("llm")
        b = est_b.overall_scores(interval).set_index("llm")
    elif var == "theta":
        a = est_a.domain_scores(interval).set_index(["llm", "domain"])
        b = est_b.domain_scores(interval).set_index(["llm", "domain"])
        if domain is not None:
            a = a.xs(str(domain), level="domain", drop_level=False)
            b = b.xs(str(domain), level="domain", drop_level=False)
    else:
        raise ValueError("var must be 'overall' or 'theta'")
    cols = ["score", "lower", "upper"]
    both = a[cols].add_suffix("_a").join(b[cols].add_suffix("_b"), how="inner")
    if both.empty:
        raise ValueError("the two estimates have no LLM (and domain) in common")
    return both


def compare_scatter(est_a, est_b, var: str = "overall", interval: float = 0.9, *, ax=None, labels=None,
                    domain=None, max_intervals: int = 20000, seed: int = 0) -> Figure:
    """Scores of one estimate against another, with both intervals and the identity line.

    Parameters
    ----------
    est_a, est_b : Estimate
        The two estimates (e.g. MTL and Bayes); matched by LLM (and domain) name.
    var : {"overall", "theta"}
        Overall scores, or domain scores (every LLM x domain pair).
    interval : float
        Probability mass of the intervals drawn as error bars.
    ax : matplotlib.axes.Axes, optional
        Axes to draw into.
    labels : (str, str), optional
        Axis names; default the methods.
    domain : str, optional
        With ``var="theta"``, one domain only.
    max_intervals : int
        Above this many points, the error bars of a random subset are drawn
        (all points are drawn).
    seed : int
        Seed of that subset.

    Returns
    -------
    matplotlib.figure.Figure
        One axes; the title gives Pearson and Spearman correlations.
    """
    from scipy.stats import spearmanr

    both = _comparable(est_a, est_b, var, interval, domain)
    la, lb = labels or (est_a.method, est_b.method)
    x, y = both["score_a"].to_numpy(), both["score_b"].to_numpy()
    n = len(both)
    fig, ax = _axes(ax, (5.6, 5.4))
    alpha = 0.8 if n <= 200 else (0.4 if n <= 5000 else 0.15)
    sel = np.arange(n)
    if n > max_intervals:
        sel = np.sort(np.random.default_rng(seed).choice(n, max_intervals, replace=False))
    lw = 0.8 if n <= 500 else 0.4
    xa, xb = both["lower_a"].to_numpy()[sel], both["upper_a"].to_numpy()[sel]
    ya, yb = both["lower_b"].to_numpy()[sel], both["upper_b"].to_numpy()[sel]
    ok = np.isfinite(xa) & np.isfinite(xb)
    if ok.any():
        segs = np.stack([np.c_[xa[ok], y[sel][ok]], np.c_[xb[ok], y[sel][ok]]], axis=1)
        ax.add_collection(LineCollection(segs, colors=_GREY, linewidths=lw, alpha=alpha * 0.6, rasterized=n > 2000))
    ok = np.isfinite(ya) & np.isfinite(yb)
    if ok.any():
        segs = np.stack([np.c_[x[sel][ok], ya[ok]], np.c_[x[sel][ok], yb[ok]]], axis=1)
        ax.add_collection(LineCollection(segs, colors=_GREY, linewidths=lw, alpha=alpha * 0.6, rasterized=n > 2000))
    ax.scatter(x, y, s=12 if n <= 500 else 4, color=_BLUE, alpha=alpha, lw=0, zorder=3, rasterized=n > 2000)
    vals = np.concatenate([x, y, both[["lower_a", "upper_a", "lower_b", "upper_b"]].to_numpy().ravel()])
    vals = vals[np.isfinite(vals)]
    lo, hi = float(vals.min()), float(vals.max())
    pad = 0.04 * (hi - lo or 1.0)
    ax.plot([lo - pad, hi + pad], [lo - pad, hi + pad], color=_RED, lw=1, ls="--", label="identity", zorder=4)
    ax.set_xlim(lo - pad, hi + pad)
    ax.set_ylim(lo - pad, hi + pad)
    ax.set_aspect("equal", adjustable="box")
    r = float(np.corrcoef(x, y)[0, 1]) if n > 2 else np.nan
    rho = float(spearmanr(x, y).statistic) if n > 2 else np.nan
    what = "overall score" if var == "overall" else ("domain score" + (f" ({domain})" if domain else "s"))
    ax.set_xlabel(f"{la}: {what}", fontsize=9)
    ax.set_ylabel(f"{lb}: {what}", fontsize=9)
    sub = "" if n <= max_intervals else f"; intervals of {max_intervals:,} random points"
    ax.set_title(f"{what}: {lb} against {la}\nPearson r = {r:.3f}, Spearman ρ = {rho:.3f}\n"
                 f"n = {n:,}; {interval:.0%} intervals{sub}", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")
    return fig


def _chosen_llms(est, llms, top: int) -> list[str]:
    """The LLMs to show in overall-rank order: ``llms`` (names), else the ``top`` best."""
    ranked = [str(x) for x in est.overall_scores()["llm"]]
    if llms is None:
        return ranked[:max(int(top), 0)]
    if isinstance(llms, str):
        llms = [llms]
    names = list(dict.fromkeys(str(x) for x in llms))
    known = set(ranked)
    unknown = [n for n in names if n not in known]
    if unknown:
        more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
        raise KeyError(f"unknown LLM(s): {', '.join(repr(n) for n in unknown[:5])}{more}")
    pos = {n: i for i, n in enumerate(ranked)}
    return sorted(names, key=pos.__getitem__)


def domain_heatmap(est, llms=None, top: int = 30, *, order="cluster", fig=None, annotate=None,
                   label_width: int = 40) -> Figure:
    """Heatmap of the domain scores, one row per LLM (best on top) and one column per domain.

    Parameters
    ----------
    est : Estimate
        Any estimate.
    llms : sequence of str, optional
        The LLMs shown (by name); default the ``top`` best by overall score.
        Rows follow the overall rank either way.
    top : int
        Rows when ``llms`` is not given.
    order : {"cluster", "name", "none"} or sequence of str
        Column order (see :func:`~mtlirt.report.plots.structure.domain_order`):
        by default the clustering of the correlation heatmap, so that
        correlated domains sit side by side.
    fig : matplotlib.figure.Figure, optional
        An empty figure to draw into.
    annotate : bool, optional
        Write the score in each cell; default when there are at most 15
        domains and 30 LLMs.
    label_width : int
        Longer names are cut in the middle.

    Returns
    -------
    matplotlib.figure.Figure
        Axes: the heatmap (y tick labels ``rank. name``, x tick labels the
        domains in the chosen order), then the colour bar.  Cells of a domain
        in which the LLM has no response (scores predicted from its other
        domains) carry a dot.

    Raises
    ------
    KeyError
        For a name that is not one of the estimate's LLMs.
    """
    rows = _chosen_llms(est, llms, top)
    if not rows:
        raise ValueError("no LLM to show")
    rank = dict(zip(est.overall_scores()["llm"].astype(str), est.overall_scores()["rank"]))
    pos = {str(n): i for i, n in enumerate(est.llms)}
    ri = np.asarray([pos[n] for n in rows])
    ci = domain_order(est, order)
    vals = np.asarray(est.point("theta"), float)[np.ix_(ri, ci)]
    names = np.asarray(est.domains, dtype=str)[ci]
    m, k = vals.shape
    ylabels = [f"{int(rank[n])}. {_shorten(n, label_width)}" for n in rows]
    xlabels = [_shorten(d, label_width) for d in names]
    _, fs_y = _row_style(m)
    _, fs_x = _row_style(k)
    if annotate is None:
        annotate = k <= 15 and m <= 30
    cw = 0.5 if annotate else (0.19 if k > 30 else 0.3)
    ch = 0.3 if annotate else max(_row_style(m)[0], 0.16)
    if fig is None:
        width = _label_width_in(ylabels, fs_y) + 0.5 + k * cw + 1.1
        height = 1.0 + m * ch + _label_width_in(xlabels, fs_x) + 0.3
        fig = plt.figure(figsize=(max(width, 5.0), max(height, 2.5)), layout="constrained")
    ax = fig.add_subplot()
    finite = np.abs(vals[np.isfinite(vals)])
    lim = float(np.ceil(2 * np.quantile(finite, 0.99)) / 2) if finite.size else 1.0
    im = ax.imshow(vals, cmap="RdBu_r", vmin=-max(lim, 0.5), vmax=max(lim, 0.5), interpolation="nearest",
                   aspect="auto")
    ax.set_xticks(np.arange(k))
    ax.set_xticklabels(xlabels, rotation=90, fontsize=fs_x)
    ax.set_yticks(np.arange(m))
    ax.set_yticklabels(ylabels, fontsize=fs_y)
    ax.tick_params(length=0, pad=1.5)
    for sp in ax.spines.values():
        sp.set_visible(False)
    if annotate:
        for i in range(m):
            for j in range(k):
                if np.isfinite(vals[i, j]):
                    ax.text(j, i, f"{vals[i, j]:.1f}".replace("-0.0", "0.0"), ha="center", va="center", fontsize=6.5,
                            color="white" if abs(vals[i, j]) > 0.6 * lim else "black")
    pred = est.predicted
    note = ""
    if pred is not None:
        miss = np.asarray(pred)[np.ix_(ri, ci)]
        if miss.any():
            yy, xx = np.nonzero(miss)
            ax.scatter(xx, yy, s=4, color="black", marker="o", lw=0, zorder=3)
            note = "\ndot: no response in the domain (score predicted)"
    cb = fig.colorbar(im, ax=ax, shrink=min(1.0, 4.0 / max(fig.get_size_inches()[1], 1.0)) if m > 8 else 1.0,
                      pad=0.01, aspect=30)
    cb.set_label("domain score (SD units)", fontsize=8)
    cb.ax.tick_params(labelsize=7)
    what = f"the {m} best" if llms is None else f"{m} chosen"
    ax.set_title(f"Domain scores of {what} of {len(est.llms):,} LLMs ({est.method}){note}", fontsize=9)
    return fig
