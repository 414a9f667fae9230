"""Plots of the structure: cross-domain correlations (clustered heatmap) and the scree of the domain scores."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from ._common import (
    _BLUE,
    _ORANGE,
    _RED,
    _axes,
    _label_width_in,
    _row_style,
    _shorten,
)


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


def domain_order(est, order="cluster") -> np.ndarray:
    """Positions of the domains in display order.

    Parameters
    ----------
    est : Estimate
        Any estimate.
    order : {"cluster", "name", "none"} or sequence of str
        Hierarchical clustering of the cross-domain correlations (see
        :func:`cluster_order`; the order of :func:`correlation_heatmap`),
        alphabetical, as stored, or an explicit list of every domain.

    Returns
    -------
    numpy.ndarray
        Indices into ``est.domains``.
    """
    names = np.asarray(est.domains, dtype=str)
    k = len(names)
    if isinstance(order, str):
        if order == "cluster":
            point = np.array(est.point("domain_corr"), dtype=float)
            np.fill_diagonal(point, 1.0)
            return cluster_order(point)
        if order == "name":
            return np.argsort(names, kind="stable")
        if order in ("none", "stored"):
            return np.arange(k)
        raise ValueError(f"order must be 'cluster', 'name', 'none' or a list of domains, not {order!r}")
    if order is None:
        return np.arange(k)
    pos = {n: i for i, n in enumerate(names)}
    missing = [o for o in order if str(o) not in pos]
    if missing or len(order) != k:
        raise ValueError(f"order must list each of the {k} domains once; unknown: {missing[:5]}")
    return np.asarray([pos[str(o)] for o in order])


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
    idx = domain_order(est, order)
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
