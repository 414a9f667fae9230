"""Plots of an :class:`~mtlirt.estimate.Estimate`, one function per plot.

Every function reads an :class:`~mtlirt.estimate.Estimate` (an MTL or
baseline point estimate, with or without bootstrap replicates, or a Bayesian
posterior), takes an optional matplotlib ``ax`` (``fig`` for the multi-panel
plots) and keyword options, and returns the :class:`matplotlib.figure.Figure`.
Figures grow with the number of rows (domains, LLMs) and use small fonts
from about 30 labels on, so that 56 domains stay readable.

Intervals are equal-tailed, from the estimate's uncertainty source
(posterior draws, else bootstrap replicates); a bare point estimate is drawn
without intervals.
"""

from __future__ import annotations

import base64
import io

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure

__all__ = [
    "cluster_order",
    "compare_scatter",
    "convergence",
    "correlation_heatmap",
    "domain_difficulty",
    "domain_profile",
    "figure_to_base64_png",
    "item_curves",
    "overall_forest",
    "rank_rhat",
    "rank_uncertainty",
    "scree",
]

_BLUE = "#1f5fa8"
_ORANGE = "#d9661f"
_GREY = "#7f7f7f"
_RED = "#b2182b"


# --------------------------------------------------------------------- helpers
def _row_style(n: int) -> tuple[float, float]:
    """Row height (inches) and label font size (points) for ``n`` labelled rows."""
    if n <= 15:
        return 0.30, 9.0
    if n <= 30:
        return 0.22, 8.0
    if n <= 60:
        return 0.17, 6.5
    if n <= 120:
        return 0.13, 5.0
    return 0.10, 4.0


def _shorten(name: str, width: int = 48) -> str:
    """Cut a long label inside (``abc…wxyz``, a third of the start, two thirds of the end)."""
    name = str(name)
    if len(name) <= width:
        return name
    keep = width - 1
    head = keep // 3
    return name[:head] + "…" + name[len(name) - (keep - head):]


def _label_width_in(labels, fontsize: float) -> float:
    """Rough width in inches of the longest label at ``fontsize``."""
    longest = max((len(str(s)) for s in labels), default=0)
    return longest * fontsize * 0.55 / 72


def _axes(ax, figsize) -> tuple[Figure, plt.Axes]:
    if ax is not None:
        return ax.figure, ax
    fig, ax = plt.subplots(figsize=figsize, layout="constrained")
    return fig, ax


def _interval_label(est, interval: float) -> str:
    src = est.uncertainty_source
    if src is None:
        return "no interval (point estimate without bootstrap)"
    return f"{interval:.0%} interval, {src}"


def _has_interval(lower, upper) -> bool:
    lower, upper = np.asarray(lower, float), np.asarray(upper, float)
    return bool(np.isfinite(lower).any() and np.isfinite(upper).any())


def _hbars(ax, y, lower, upper, color, lw=1.6, alpha=0.8):
    """Horizontal interval segments at heights ``y`` (NaN bounds skipped)."""
    lower, upper = np.asarray(lower, float), np.asarray(upper, float)
    ok = np.isfinite(lower) & np.isfinite(upper)
    if ok.any():
        segs = np.stack([np.c_[lower[ok], np.asarray(y)[ok]], np.c_[upper[ok], np.asarray(y)[ok]]], axis=1)
        ax.add_collection(LineCollection(segs, colors=color, linewidths=lw, alpha=alpha), autolim=True)
        ax.autoscale_view()


def cluster_order(corr, method: str = "average") -> np.ndarray:
    """Order of the domains by hierarchical clustering on ``1 - corr``.

    Parameters
    ----------
    corr
        ``K x K`` correlation matrix (NaN entries are treated as 0).
    method
        Linkage method of :func:`scipy.cluster.hierarchy.linkage`.

    Returns
    -------
    numpy.ndarray
        The leaf order (indices into the domains), strongly correlated
        domains adjacent.
    """
    from scipy.cluster.hierarchy import leaves_list, linkage, optimal_leaf_ordering
    from scipy.spatial.distance import squareform

    c = np.array(corr, dtype=float)
    k = c.shape[0]
    if k < 3:
        return np.arange(k)
    c = np.nan_to_num(c, nan=0.0)
    c = (c + c.T) / 2
    dist = np.clip(1.0 - c, 0.0, 2.0)
    np.fill_diagonal(dist, 0.0)
    cond = squareform(dist, checks=False)
    z = linkage(cond, method=method)
    try:
        z = optimal_leaf_ordering(z, cond)
    except ValueError:  # pragma: no cover - degenerate distances keep the plain linkage order
        return leaves_list(z)
    return leaves_list(z)


def _corr_matrices(est, interval: float):
    """Point correlation matrix and interval-width matrix (None without draws)."""
    point = np.array(est.point("domain_corr"), dtype=float)
    np.fill_diagonal(point, 1.0)
    width = None
    if est.draws("domain_corr") is not None:
        tab = est.domain_correlation(interval)
        k = point.shape[0]
        width = np.full((k, k), np.nan)
        ia, ib = np.triu_indices(k, 1)
        w = (tab["upper"] - tab["lower"]).to_numpy()
        width[ia, ib] = w
        width[ib, ia] = w
    return point, width


# ------------------------------------------------------------------ heatmap
def correlation_heatmap(est, interval: float = 0.9, order="cluster", *, fig=None, annotate=None,
                        show_width: bool = True, layout: str = "auto") -> Figure:
    """Cross-domain correlation heatmap, with a companion panel of interval widths.

    Parameters
    ----------
    est : Estimate
        Any estimate; uses ``domain_corr``.
    interval : float
        Probability mass of the intervals whose widths fill the companion panel.
    order : {"cluster", "name", "none"} or sequence of str
        Domain order: hierarchical clustering on ``1 - corr`` (see
        :func:`cluster_order`), alphabetical, as stored, or an explicit list of
        domain names.
    fig : matplotlib.figure.Figure, optional
        An empty figure to draw into (its size is kept).
    annotate : bool, optional
        Write the correlation in each cell; default when there are at most 12 domains.
    show_width : bool
        Draw the interval-width panel when the estimate has draws.
    layout : {"auto", "row", "column"}
        Panels side by side or stacked; ``"auto"`` stacks them above 25
        domains (so that each panel keeps readable labels at page width).

    Returns
    -------
    matplotlib.figure.Figure
        Axes: the correlation panel first, then the width panel (when drawn),
        then the colour bars.  The tick labels are the domain names in the
        chosen order.
    """
    names = np.asarray(est.domains, dtype=str)
    k = len(names)
    point, width = _corr_matrices(est, interval)
    if not show_width:
        width = None
    if isinstance(order, str):
        if order == "cluster":
            idx = cluster_order(point)
        elif order == "name":
            idx = np.argsort(names, kind="stable")
        elif order in ("none", "stored"):
            idx = np.arange(k)
        else:
            raise ValueError(f"order must be 'cluster', 'name', 'none' or a list of domains, not {order!r}")
    elif order is None:
        idx = np.arange(k)
    else:
        pos = {n: i for i, n in enumerate(names)}
        missing = [o for o in order if str(o) not in pos]
        if missing or len(order) != k:
            raise ValueError(f"order must list each of the {k} domains once; unknown: {missing[:5]}")
        idx = np.asarray([pos[str(o)] for o in order])
    labels = [_shorten(n, 40) for n in names[idx]]
    cell, fs = _row_style(k)
    cell = max(cell, 0.17) if k > 30 else max(cell, 0.32)
    side = max(3.0, k * cell)
    lab = _label_width_in(labels, fs) + 0.4
    panels = 2 if width is not None else 1
    if annotate is None:
        annotate = k <= 12
    if layout not in ("auto", "row", "column"):
        raise ValueError("layout must be 'auto', 'row' or 'column'")
    column = panels == 2 and (layout == "column" or (layout == "auto" and k > 25))

    if fig is None:
        if column:
            figsize = (lab + side + 1.0, 2 * (side + 0.8 * lab + 0.5))
        else:
            figsize = (lab + panels * (side + 0.9) + (panels - 1) * 0.3, side + 0.8 * lab + 0.7)
        fig = plt.figure(figsize=figsize, layout="constrained")
    axes = fig.subplots(panels, 1, squeeze=False)[:, 0] if column else fig.subplots(1, panels, squeeze=False)[0]
    c = point[np.ix_(idx, idx)]
    ax = axes[0]
    im = ax.imshow(c, cmap="RdBu_r", vmin=-1, vmax=1, interpolation="nearest", aspect="equal")
    _matrix_ticks(ax, labels, fs, ylabels=True)
    ax.set_title(f"Cross-domain correlation ({est.method})", fontsize=10)
    cb = fig.colorbar(im, ax=ax, shrink=0.6, pad=0.01, aspect=30)
    cb.set_label("correlation", fontsize=8)
    cb.ax.tick_params(labelsize=7)
    if annotate:
        _annotate_cells(ax, c, "{:.2f}", lambda v: abs(v) > 0.6)
    if width is not None:
        w = width[np.ix_(idx, idx)]
        ax2 = axes[1]
        cmap = plt.get_cmap("viridis").with_extremes(bad="#eeeeee")
        wmax = np.nanmax(w) if np.isfinite(w).any() else 1.0
        im2 = ax2.imshow(np.ma.masked_invalid(w), cmap=cmap, vmin=0, vmax=wmax, interpolation="nearest", aspect="equal")
        _matrix_ticks(ax2, labels, fs, ylabels=column)
        ax2.set_title(f"Width of the {interval:.0%} interval ({est.uncertainty_source})", fontsize=10)
        cb2 = fig.colorbar(im2, ax=ax2, shrink=0.6, pad=0.01, aspect=30)
        cb2.set_label("interval width", fontsize=8)
        cb2.ax.tick_params(labelsize=7)
        if annotate:
            _annotate_cells(ax2, w, "{:.2f}", lambda v: v < 0.5 * wmax)
    return fig


def _matrix_ticks(ax, labels, fs, ylabels=True):
    n = len(labels)
    ax.set_xticks(np.arange(n))
    ax.set_xticklabels(labels, rotation=90, fontsize=fs)
    ax.set_yticks(np.arange(n))
    if ylabels:
        ax.set_yticklabels(labels, fontsize=fs)
    else:
        ax.set_yticklabels([])
    ax.tick_params(length=0, pad=1.5)
    for s in ax.spines.values():
        s.set_visible(False)


def _annotate_cells(ax, m, fmt, light):
    for i in range(m.shape[0]):
        for j in range(m.shape[1]):
            v = m[i, j]
            if np.isfinite(v):
                ax.text(j, i, fmt.format(v), ha="center", va="center", fontsize=7,
                        color="white" if light(v) else "black")


# ------------------------------------------------------------------- forest
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


# ------------------------------------------------------------------ profile
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


# --------------------------------------------------------------------- ranks
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
        _hbars(ax, y, tab["rank_lower"].to_numpy(float) - 0.0, tab["rank_upper"].to_numpy(float), _BLUE,
               lw=3, alpha=0.5)
    ax.scatter(tab["rank"], y, s=16, color=_BLUE, zorder=3)
    ax.set_yticks(y)
    ax.set_yticklabels(labels, fontsize=fs)
    ax.invert_yaxis()
    ax.set_xlabel("rank (1 = best)", fontsize=9)
    hi = float(max(tab["rank_upper"].max(), tab["rank"].max()))
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


# ------------------------------------------------------------------ compare
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


# -------------------------------------------------------------------- scree
def scree(est, *, ax=None) -> Figure:
    """Singular values of the MTL spectral step, with the selected rank marked.

    Parameters
    ----------
    est : Estimate
        An estimate whose ``info`` holds ``singular_values`` (and ``rank``);
        an optional ``rank_threshold`` (or ``threshold``) is drawn as a line.
    ax : matplotlib.axes.Axes, optional
        Axes to draw into.

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    ValueError
        When the estimate has no singular values (not an MTL fit).
    """
    info = est.info
    sv = info.get("singular_values")
    if sv is None or len(np.atleast_1d(sv)) == 0:
        raise ValueError(f"the {est.method!r} estimate has no singular values in its info "
                         "(the scree plot needs an MTL fit)")
    sv = np.asarray(sv, dtype=float).ravel()
    rank = info.get("rank")
    thr = info.get("rank_threshold", info.get("threshold"))
    m = len(sv)
    fig, ax = _axes(ax, (max(5.0, min(12.0, 2.5 + 0.16 * m)), 3.8))
    x = np.arange(1, m + 1)
    colors = [_BLUE if rank is not None and i <= int(rank) else "#9ecae1" for i in x]
    ax.bar(x, sv, color=colors, width=0.75)
    ax.plot(x, sv, color="black", lw=0.7, marker="o", ms=2.5)
    if rank is not None:
        ax.axvline(int(rank) + 0.5, color=_RED, ls="--", lw=1.2, label=f"selected rank r = {int(rank)}")
    if isinstance(thr, (int, float)) and np.isfinite(thr):
        ax.axhline(float(thr), color=_ORANGE, ls=":", lw=1.2, label=f"threshold {float(thr):.3g}")
    ax.set_xlabel("component", fontsize=9)
    ax.set_ylabel("singular value", fontsize=9)
    step = max(1, int(np.ceil(m / 28)))
    ax.set_xticks(x[::step])
    ax.tick_params(labelsize=7)
    ax.set_xlim(0.3, m + 0.7)
    ax.set_title(f"Scree plot of the shared representation ({est.method})", fontsize=9)
    if rank is not None or thr is not None:
        ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    return fig


# --------------------------------------------------------------- difficulty
def _domain_item_table(est, sizes=None, stat: str = "mean") -> pd.DataFrame:
    """Per domain: items, mean (or median) difficulty, discrimination and guessing."""
    items = est.item_parameters()
    agg = "median" if stat == "median" else "mean"
    g = items.groupby("domain", sort=False)
    tab = pd.DataFrame({
        "items": g.size(),
        "difficulty": g["difficulty"].agg(agg),
        "discrimination": g["discrimination"].agg(agg),
        "guessing": g["guessing"].agg(agg),
    })
    tab = tab.reindex(est.domains)
    tab["items"] = tab["items"].fillna(0).astype(int)
    if sizes is not None:
        s = pd.Series(sizes)
        s.index = s.index.astype(str)
        tab["items"] = s.reindex(tab.index).fillna(tab["items"]).astype(int)
    tab.index.name = "domain"
    return tab


def domain_difficulty(est, sizes=None, *, ax=None, stat: str = "mean", label: bool = True) -> Figure:
    """Domain difficulty (mean item difficulty) against domain size, labelled points.

    Parameters
    ----------
    est : Estimate
        Any estimate (item parameters from :meth:`~mtlirt.estimate.Estimate.item_parameters`).
    sizes : mapping or pandas.Series, optional
        Items per domain (e.g. ``Responses.domain_sizes``); default: counted
        from the estimate's items.
    ax : matplotlib.axes.Axes, optional
        Axes to draw into.
    stat : {"mean", "median"}
        Summary of the items' difficulties (the median resists items with a
        near-zero discrimination, whose difficulty ``-d/a`` is extreme).
    label : bool
        Label each point with its domain (placed so that labels do not overlap).

    Returns
    -------
    matplotlib.figure.Figure
        One axes, one point per domain; colour = mean discrimination.
    """
    tab = _domain_item_table(est, sizes, stat)
    k = len(tab)
    big = k > 30
    fig, ax = _axes(ax, (11.0, 7.5) if big else (7.5, 5.2))
    x = tab["items"].to_numpy(float)
    y = tab["difficulty"].to_numpy(float)
    sc = ax.scatter(x, y, c=tab["discrimination"].to_numpy(float), cmap="viridis", s=28, zorder=3,
                    edgecolor="black", linewidth=0.4)
    cb = fig.colorbar(sc, ax=ax, pad=0.01, aspect=30)
    cb.set_label(f"{stat} discrimination", fontsize=8)
    cb.ax.tick_params(labelsize=7)
    pos = x[x > 0]
    if len(pos) and pos.max() / max(pos.min(), 1) > 8:
        ax.set_xscale("log")
    ax.axhline(0, color=_GREY, lw=0.8, ls=":")
    ax.set_xlabel("domain size (items)", fontsize=9)
    ax.set_ylabel(f"{stat} item difficulty (−intercept / discrimination)", fontsize=9)
    ax.set_title(f"Domain difficulty against size ({est.method}; {k} domains)", fontsize=9)
    ax.grid(alpha=0.3)
    ax.tick_params(labelsize=8)
    if label and k:
        ax.margins(x=0.12, y=0.1)
        _place_labels(ax, x, y, [_shorten(n, 32) for n in tab.index], fontsize=6 if big else 7.5)
    return fig


def _place_labels(ax, x, y, labels, fontsize=7.0):
    """Label points without overlaps: greedy choice among candidate offsets in display space."""
    fig = ax.figure
    fig.canvas.draw()  # settles the layout and the limits
    renderer = fig.canvas.get_renderer()
    pts = ax.transData.transform(np.c_[x, y])
    r = 3.5
    point_boxes = [(px - r, py - r, px + r, py + r) for px, py in pts]
    axbox = ax.get_window_extent(renderer)
    d = 4
    cands = [(d, d, "left", "bottom"), (d, -d, "left", "top"), (-d, d, "right", "bottom"),
             (-d, -d, "right", "top"), (0, d + 2, "center", "bottom"), (0, -d - 2, "center", "top"),
             (d + 2, 0, "left", "center"), (-d - 2, 0, "right", "center"),
             (2 * d, 3 * d, "left", "bottom"), (-2 * d, -3 * d, "right", "top"),
             (2 * d, -3 * d, "left", "top"), (-2 * d, 3 * d, "right", "bottom")]
    placed: list[tuple[float, float, float, float]] = []

    def overlap(b, boxes):
        tot = 0.0
        for q in boxes:
            w = min(b[2], q[2]) - max(b[0], q[0])
            h = min(b[3], q[3]) - max(b[1], q[1])
            if w > 0 and h > 0:
                tot += w * h
        return tot

    order = np.argsort(-pts[:, 1])
    for i in order:
        best, best_cost = None, np.inf
        others = point_boxes[:i] + point_boxes[i + 1:]
        for dx, dy, ha, va in cands:
            t = ax.annotate(labels[i], (x[i], y[i]), xytext=(dx, dy), textcoords="offset points",
                            ha=ha, va=va, fontsize=fontsize, zorder=4)
            bb = t.get_window_extent(renderer)
            b = (bb.x0, bb.y0, bb.x1, bb.y1)
            out = max(0, axbox.x0 - b[0]) + max(0, b[2] - axbox.x1) + max(0, axbox.y0 - b[1]) + max(0, b[3] - axbox.y1)
            cost = overlap(b, placed) + 0.5 * overlap(b, others) + 50 * out * (b[3] - b[1])
            if cost < best_cost:
                if best is not None:
                    best[0].remove()
                best, best_cost = (t, b), cost
            else:
                t.remove()
            if cost == 0:
                break
        placed.append(best[1])


# -------------------------------------------------------------- item curves
def item_curves(est, items, theta_range=(-3.0, 3.0), *, ax=None, interval: float = 0.9,
                n_points: int = 200) -> Figure:
    """Item characteristic curves ``P(correct) = c + (1 - c) sigmoid(a theta + d)``.

    Parameters
    ----------
    est : Estimate
        Any estimate with item parameters.
    items : str, int or sequence of str/int
        Item names, or positions in ``est.items``.
    theta_range : (float, float)
        Range of the domain score.
    ax : matplotlib.axes.Axes, optional
        Axes to draw into.
    interval : float
        Probability mass of the band drawn around each curve when the item
        parameters have draws.
    n_points : int
        Points per curve.

    Returns
    -------
    matplotlib.figure.Figure
        One axes, one line per item (legend: name, domain, a, b, c).
    """
    if isinstance(items, (str, int, np.integer)):
        items = [items]
    names = list(est.items)
    pos = {n: i for i, n in enumerate(names)}
    idx = []
    for it in items:
        if isinstance(it, (int, np.integer)) and not isinstance(it, bool):
            if not -len(names) <= it < len(names):
                raise IndexError(f"item position {it} out of range (0..{len(names) - 1})")
            idx.append(int(it) % len(names))
        elif str(it) in pos:
            idx.append(pos[str(it)])
        else:
            raise KeyError(f"unknown item {it!r}")
    if not idx:
        raise ValueError("no items given")
    par = est.item_parameters().iloc[idx]
    t = np.linspace(theta_range[0], theta_range[1], n_points)
    fig, ax = _axes(ax, (7.5 if len(idx) <= 10 else 9.5, 4.8))
    cmap = plt.get_cmap("tab10" if len(idx) <= 10 else "tab20")
    da, dd, dc = (est.draws(v) for v in ("discrimination", "intercept", "guessing"))
    lo_q = (1 - interval) / 2
    for n, (j, row) in enumerate(zip(idx, par.itertuples(index=False))):
        col = cmap(n % cmap.N)
        a, d, c = row.discrimination, row.intercept, row.guessing
        p = c + (1 - c) / (1 + np.exp(-(a * t + d)))
        lab = f"{_shorten(row.item, 30)} [{_shorten(row.domain, 24)}]  a={a:.2f} b={row.difficulty:.2f}" + (
            f" c={c:.2f}" if c > 0 else "")
        ax.plot(t, p, color=col, lw=1.6, label=lab)
        if da is not None and dd is not None and np.ptp(da[:, j]) > 0:
            cc = dc[:, j] if dc is not None else np.zeros(da.shape[0])
            pd_ = cc[:, None] + (1 - cc[:, None]) / (1 + np.exp(-(da[:, j, None] * t + dd[:, j, None])))
            q = np.quantile(pd_, [lo_q, 1 - lo_q], axis=0)
            ax.fill_between(t, q[0], q[1], color=col, alpha=0.15, lw=0)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlim(*theta_range)
    ax.set_xlabel("domain score θ", fontsize=9)
    ax.set_ylabel("P(correct)", fontsize=9)
    band = da is not None and dd is not None and bool(np.ptp(da, axis=0).max() > 0)
    ax.set_title(f"Item characteristic curves ({est.method}"
                 + (f"; bands: {interval:.0%} interval, {est.uncertainty_source})" if band else ")"), fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=6.5 if len(idx) > 6 else 7.5, loc="upper left", bbox_to_anchor=(1.01, 1.0),
              borderaxespad=0, frameon=False)
    return fig


# -------------------------------------------------------------- convergence
def _split_rhat(x: np.ndarray) -> np.ndarray:
    """Classic split R-hat of ``x`` (``chain x draw x m``), vectorised over the last axis."""
    n = x.shape[1]
    half = n // 2
    if half < 2:
        return np.full(x.shape[2:], np.nan)
    s = np.concatenate([x[:, :half], x[:, n - half:]], axis=0)  # (2c, half, m)
    means = s.mean(axis=1)
    w = s.var(axis=1, ddof=1).mean(axis=0)
    b = half * means.var(axis=0, ddof=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.sqrt(((half - 1) / half * w + b / half) / w)


def rank_rhat(x: np.ndarray) -> np.ndarray:
    """Rank-normalised split R-hat (bulk and folded, the larger), vectorised.

    Parameters
    ----------
    x : numpy.ndarray
        Draws ``chain x draw x m``.

    Returns
    -------
    numpy.ndarray
        ``m`` values (Vehtari et al. 2021); used to pick the elements shown
        by :func:`convergence`.
    """
    from scipy.special import ndtri

    x = np.asarray(x)
    c, n = x.shape[:2]
    m = int(np.prod(x.shape[2:], dtype=int))
    flat_all = x.reshape(c * n, m)
    out = np.empty(m)
    step = max(1, 4_000_000 // max(c * n, 1))  # bounded memory
    scores = ndtri((np.arange(1.0, c * n + 1) - 0.375) / (c * n + 0.25))
    for s in range(0, m, step):
        flat = np.asarray(flat_all[:, s:s + step], dtype=float)

        def z(v):
            # normal scores of the ranks (ties broken by order): sort rows, scatter the scores
            vt = np.ascontiguousarray(v.T)
            order = np.argsort(vt, axis=1)
            r = np.empty(vt.shape)
            np.put_along_axis(r, order, scores[None], axis=1)
            return r.T.reshape(c, n, -1)

        bulk = _split_rhat(z(flat))
        fold = _split_rhat(z(np.abs(flat - np.median(flat, axis=0))))
        out[s:s + step] = np.fmax(bulk, fold)
    return out.reshape(x.shape[2:])


def _worst(rhat: np.ndarray, max_panels: int) -> np.ndarray:
    flat = np.nan_to_num(np.asarray(rhat, float).ravel(), nan=np.inf)
    return np.argsort(-flat, kind="stable")[:max_panels]


def convergence(est, var_names=None, kind: str = "rank", *, max_panels: int = 8, coords=None,
                **kwargs) -> Figure:
    """ArviZ convergence plot (rank, trace or ESS) of a posterior with several chains.

    Variables with more than one element (``overall`` has one per LLM) are
    cut to the ``max_panels`` elements with the largest R-hat, each drawn as
    its own panel titled ``var[label]``.

    Parameters
    ----------
    est : Estimate
        A posterior with at least two chains.
    var_names : str or sequence of str, optional
        Variables; default ``["overall"]``.
    kind : {"rank", "trace", "ess"}
        :func:`arviz_plots.plot_rank`, :func:`~arviz_plots.plot_trace` or
        :func:`~arviz_plots.plot_ess`.
    max_panels : int
        Elements per variable (those with the worst R-hat).
    coords : dict, optional
        Selection applied before (e.g. ``{"domain": ["anatomy"]}``).
    **kwargs
        Passed to the ArviZ function.

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    ValueError
        For a point estimate (one chain) or an unknown ``kind`` or variable.
    """
    import xarray as xr

    funcs = {"rank": "plot_rank", "trace": "plot_trace", "ess": "plot_ess"}
    if kind not in funcs:
        raise ValueError(f"kind must be one of {sorted(funcs)}, not {kind!r}")
    post = est.posterior
    if post.sizes["chain"] < 2 or post.sizes["draw"] < 4:
        raise ValueError(f"convergence plots need a posterior with several chains; the {est.method!r} estimate has "
                         f"{post.sizes['chain']} chain(s) x {post.sizes['draw']} draw(s)")
    if var_names is None:
        var_names = ["overall"]
    elif isinstance(var_names, str):
        var_names = [var_names]
    if coords:
        post = post.sel({k: v for k, v in coords.items() if k in post.dims})
    data = {}
    for v in var_names:
        if v not in post:
            raise ValueError(f"unknown variable {v!r}; the posterior has {sorted(post.data_vars)}")
        da = post[v].transpose("chain", "draw", ...)
        extra = [d for d in da.dims if d not in ("chain", "draw")]
        if not extra:
            data[v] = (("chain", "draw"), da.values)
            continue
        vals = da.values
        flat = vals.reshape(vals.shape[:2] + (-1,))
        rh = rank_rhat(flat)
        grid = np.meshgrid(*[da[d].values.astype(str) for d in extra], indexing="ij")
        labels = [", ".join(str(x) for x in combo) for combo in np.array(grid).reshape(len(extra), -1).T]
        for j in _worst(rh, max_panels):
            data[f"{v}[{labels[j]}]"] = (("chain", "draw"), flat[:, :, j])
    ds = xr.Dataset(data, coords={"chain": post["chain"].values, "draw": post["draw"].values})
    tree = xr.DataTree.from_dict({"posterior": ds})
    import arviz_plots as azp

    n_panels = len(data)
    fkw = dict(kwargs.pop("figure_kwargs", {}) or {})
    fkw.setdefault("layout", "constrained")
    cols = min(4, n_panels)
    rows = -(-n_panels // 4)
    fkw.setdefault("figsize", (3.4 * cols + 0.4, 2.6 * rows + 0.6))
    pc = getattr(azp, funcs[kind])(tree, backend="matplotlib", figure_kwargs=fkw, **kwargs)
    fig = pc.get_viz("figure")
    if hasattr(fig, "item") and not isinstance(fig, Figure):
        fig = fig.item()
    what = {"rank": "Rank plots", "trace": "Traces", "ess": "Local ESS"}[kind]
    cut = any(np.prod([post.sizes[d] for d in post[v].dims if d not in ("chain", "draw")]) > max_panels
              for v in var_names)
    fig.suptitle(f"{what} of {', '.join(var_names)} ({est.method}; {post.sizes['chain']} chains x "
                 f"{post.sizes['draw']} draws)" + (f"; per variable the {max_panels} elements with the largest R-hat"
                                                   if cut else ""), fontsize=9)
    return fig


# ------------------------------------------------------------------- export
def figure_to_base64_png(fig, dpi: int = 100, close: bool = False) -> str:
    """Render a figure as PNG and return it base64-encoded (ASCII, no ``data:`` prefix).

    Parameters
    ----------
    fig : matplotlib.figure.Figure
        The figure.
    dpi : int
        Resolution.
    close : bool
        Close the figure afterwards (frees pyplot's memory in long reports).

    Returns
    -------
    str
        The base64 text, ready for ``<img src="data:image/png;base64,...">``.
    """
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, facecolor="white")
    if close:
        plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")
