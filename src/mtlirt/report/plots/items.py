"""Plots of items: domain difficulty against size, item characteristic curves."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from ._common import (
    _GREY,
    _axes,
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
