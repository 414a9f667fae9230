"""Plots of items: domain difficulty against size, the item map per domain, item characteristic curves."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import PathPatch
from matplotlib.path import Path as MplPath

from ._common import (
    _BLUE,
    _GREY,
    _ORANGE,
    _RED,
    _axes,
    _label_width_in,
    _row_style,
    _shorten,
)


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
        Any estimate (item parameters from :meth:`~mtlirt.results.estimate.Estimate.item_parameters`).
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
    rows = len(idx) if len(idx) <= 6 else -(-len(idx) // 2)
    fig, ax = _axes(ax, (7.0 if len(idx) <= 6 else 9.5, 4.4 + 0.17 * rows))
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
    ax.set_title(f"Item characteristic curves ({est.method})"
                 + (f"\nbands: {interval:.0%} interval ({est.uncertainty_source})" if band else ""), fontsize=9)
    ax.grid(alpha=0.3)
    # below the axes, so that long item names neither squeeze the plot nor push the title out
    ax.legend(fontsize=6.5 if len(idx) > 6 else 7.5, loc="upper left", bbox_to_anchor=(0.0, -0.13),
              borderaxespad=0, frameon=False, ncols=1 if len(idx) <= 6 else 2)
    return fig


#: Above this many items in a domain, the item map draws their difficulties as a histogram, not as ticks.
HISTOGRAM_ABOVE = 60


def item_map(est, domains=None, *, ax=None, order: str = "difficulty", label_width: int = 40) -> Figure:
    """Item map (Wright map) per domain: the items' difficulties against the LLMs' domain scores.

    One row per domain, on the domain-score scale: a box of the LLMs' scores
    (quartiles, median, whiskers at the 5th and 95th percentiles) above a tick
    per item at its difficulty ``-d/a`` (where an LLM's chance of a correct
    answer is halfway between the guessing floor and 1).  Items far from the
    LLMs tell little apart: a domain whose ticks sit below the box is easy for
    this leaderboard, one with ticks above it hard.  Difficulties outside the
    drawn range (near-zero discriminations) are marked at its edge.  A domain
    of more than :data:`HISTOGRAM_ABOVE` items shows a histogram of the
    difficulties instead of one tick per item.

    Parameters
    ----------
    est : Estimate
        Any estimate with item parameters and domain scores.
    domains : sequence of str, optional
        The domains shown; default all.
    ax : matplotlib.axes.Axes, optional
        Axes to draw into.
    order : {"difficulty", "name", "none"}
        Rows by median item difficulty (hardest on top), by name, or as stored.
    label_width : int
        Longer domain names are cut in the middle.

    Returns
    -------
    matplotlib.figure.Figure
        One axes; the y tick labels are the domain names in row order.
    """
    chosen, diff = _item_map_domains(est, domains, order)
    k = len(chosen)
    col = {str(d): i for i, d in enumerate(est.domains)}
    th = np.asarray(est.point("theta"), float)[:, [col[d] for d in chosen]]
    all_d = np.concatenate([v for v in diff.values()]) if diff else np.array([])
    lo, hi = _item_map_range(th, all_d)
    row_h, fs = _row_style(k)
    row_h = max(row_h, 0.2)
    labels = [_shorten(d, label_width) for d in chosen]
    own = ax is None
    fig, ax = _axes(ax, (max(6.5, _label_width_in(labels, fs) + 5.5), 1.6 + row_h * (k + 1)))
    y = np.arange(k, dtype=float)
    _draw_llm_boxes(ax, th, y, k)
    handles = _draw_difficulties(ax, chosen, diff, lo, hi)
    ax.set_yticks(y)
    ax.set_yticklabels(labels, fontsize=fs)
    ax.set_ylim(k - 0.45, -0.55)
    ax.set_xlim(lo, hi)
    ax.axvline(0, color=_GREY, lw=0.6, ls=":")
    ax.set_xlabel("domain score θ / item difficulty (SD units of the LLM population)", fontsize=9)
    ax.set_title(f"Item map: item difficulty against the LLMs' domain scores\n({est.method}; {k} domains, "
                 f"{len(all_d):,} items; rows by " + ("median item difficulty, hardest on top)"
                                                     if order == "difficulty" else "name)" if order == "name"
                                                     else "stored order)"), fontsize=9)
    ax.grid(axis="x", alpha=0.3)
    ax.tick_params(axis="y", length=0)
    ax.tick_params(axis="x", labelsize=8)
    handles = ax.get_legend_handles_labels()[0][:2] + handles + ax.get_legend_handles_labels()[0][2:]
    if own:  # below the axes, where it hides no row
        fig.legend(handles=handles, fontsize=7, loc="outside lower center", ncols=2, frameon=False)
    else:
        ax.legend(handles=handles, fontsize=7, loc="best")
    return fig


def _item_map_domains(est, domains, order: str) -> tuple[list[str], dict[str, np.ndarray]]:
    """The item map's domains in row order, and every one's item difficulties."""
    names = [str(d) for d in est.domains]
    if domains is None:
        chosen = names
    else:
        chosen = [str(d) for d in ([domains] if isinstance(domains, str) else domains)]
        unknown = [d for d in chosen if d not in names]
        if unknown:
            raise KeyError(f"unknown domain(s): {', '.join(map(repr, unknown[:5]))}")
    items = est.item_parameters()
    diff = {d: items.loc[items["domain"] == d, "difficulty"].to_numpy(float) for d in chosen}
    if order == "difficulty":
        med = {d: np.nanmedian(v) if np.isfinite(v).any() else np.inf for d, v in diff.items()}
        chosen = sorted(chosen, key=lambda d: -med[d] if np.isfinite(med[d]) else np.inf)
    elif order == "name":
        chosen = sorted(chosen)
    elif order not in ("none", None):
        raise ValueError("order must be 'difficulty', 'name' or 'none'")
    if len(chosen) == 0:
        raise ValueError("no domain to show")
    return chosen, diff


def _item_map_range(th: np.ndarray, all_d: np.ndarray) -> tuple[float, float]:
    """The drawn range of the scale: every LLM's score and the middle 96% of the difficulties, within
    [-8, 8], padded."""
    fin_d = all_d[np.isfinite(all_d)]
    fin_t = th[np.isfinite(th)]
    lo = min(float(fin_t.min()) if fin_t.size else -3.0, float(np.quantile(fin_d, 0.02)) if fin_d.size else -3.0)
    hi = max(float(fin_t.max()) if fin_t.size else 3.0, float(np.quantile(fin_d, 0.98)) if fin_d.size else 3.0)
    lo, hi = max(lo, -8.0), min(hi, 8.0)
    pad = 0.04 * (hi - lo or 1.0)
    return lo - pad, hi + pad


def _draw_llm_boxes(ax, th: np.ndarray, y: np.ndarray, k: int) -> None:
    """Each row's box of the LLMs' domain scores: quartiles, median, whiskers at the 5th and 95th percentiles."""
    q = np.nanquantile(th, [0.05, 0.25, 0.5, 0.75, 0.95], axis=0) if th.size else np.full((5, k), np.nan)
    ax.hlines(y - 0.17, q[0], q[4], color=_BLUE, lw=0.9, alpha=0.9)
    ax.hlines(y - 0.17, q[1], q[3], color=_BLUE, lw=4.0 if k <= 30 else 2.6, alpha=0.55,
              label="LLMs' domain scores: quartiles, whiskers 5-95%")
    ax.scatter(q[2], y - 0.17, marker="|", s=30 if k <= 30 else 16, color="black", lw=1.0, zorder=3,
               label="median LLM")


def _draw_difficulties(ax, chosen: list[str], diff: dict[str, np.ndarray], lo: float, hi: float) -> list:
    """Each row's item difficulties: a tick per item (one path for all of them), a histogram above
    :data:`HISTOGRAM_ABOVE` items, difficulties beyond the range marked at its edge. Returns the legend
    handle of the ticks."""
    xs, ys, left, right = [], [], [], []
    edges = np.linspace(lo, hi, 49)
    dense = False
    for i, d in enumerate(chosen):
        v = diff[d][~np.isnan(diff[d])]
        inside = (v >= lo) & (v <= hi)
        left.append(np.full(int((v < lo).sum()), i + 0.2))
        right.append(np.full(int((v > hi).sum()), i + 0.2))
        if inside.sum() > HISTOGRAM_ABOVE:  # ticks would merge into a bar: a histogram instead
            counts = np.histogram(v[inside], bins=edges)[0]
            h = 0.34 * counts / max(counts.max(), 1)
            ax.fill_between(edges, i + 0.04, i + 0.04 + np.r_[h, h[-1]], step="post", color=_ORANGE, alpha=0.6,
                            lw=0, zorder=2)
            dense = True
            continue
        xs.append(v[inside])
        ys.append(np.full(inside.sum(), i + 0.2))
    xs = np.concatenate(xs) if xs else np.array([])
    ys = np.concatenate(ys) if ys else np.array([])
    many = len(xs) > 3000
    # one path of short vertical strokes: a tenth of the size of one marker per item in SVG
    verts = np.empty((2 * len(xs), 2))
    verts[0::2, 0] = verts[1::2, 0] = xs
    verts[0::2, 1], verts[1::2, 1] = ys - 0.13, ys + 0.13
    codes = np.tile([MplPath.MOVETO, MplPath.LINETO], len(xs))
    ticks = PathPatch(MplPath(verts, codes), fill=False, edgecolor=_ORANGE, lw=0.9, alpha=0.8 if not many else 0.4,
                      zorder=2, rasterized=many)
    ax.add_patch(ticks)
    handles = [Line2D([], [], ls="none", marker="|", ms=7, mew=1.2, color=_ORANGE,
                      label="item difficulty −d/a" + (f" (histogram above {HISTOGRAM_ABOVE} items)" if dense else ""))]
    left, right = np.concatenate(left), np.concatenate(right)
    edge = 0.006 * (hi - lo)
    if left.size or right.size:
        ax.scatter(np.full(left.size, lo + edge), left, marker="<", s=10, color=_RED, zorder=3, lw=0,
                   label="difficulty beyond the range")
        ax.scatter(np.full(right.size, hi - edge), right, marker=">", s=10, color=_RED, zorder=3, lw=0)
    return handles
