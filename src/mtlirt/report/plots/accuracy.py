"""IRT ranks against raw accuracy: the accuracy of a results table, the rank shift, the rank-vs-accuracy
plot."""

from __future__ import annotations

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
    _shorten,
)


def raw_accuracy(source) -> pd.Series:
    """Each LLM's raw accuracy: the mean of its domain accuracies (domains it has no response in skipped).

    Parameters
    ----------
    source : Responses, Estimate or pandas.Series
        The data; an estimate of the ``accuracy`` baseline (which stores the
        accuracies); or accuracies indexed by LLM name, returned as they are.

    Returns
    -------
    pandas.Series
        Accuracy per LLM (index: names), the leaderboard's usual average.
    """
    if isinstance(source, pd.Series):
        out = source.astype(float).copy()
        out.index = out.index.astype(str)
        return out
    if hasattr(source, "accuracy") and callable(source.accuracy):  # Responses
        acc = source.accuracy()
        with np.errstate(invalid="ignore"):
            vals = np.nanmean(acc.to_numpy(float), axis=1) if acc.shape[1] else np.full(len(acc), np.nan)
        return pd.Series(vals, index=acc.index.astype(str), name="accuracy")
    post = getattr(source, "posterior", None)
    if post is not None and "accuracy" in post:
        acc = np.asarray(source.point("accuracy"), float)
        with np.errstate(invalid="ignore"):
            return pd.Series(np.nanmean(acc, axis=1), index=[str(x) for x in source.llms], name="accuracy")
    raise TypeError("accuracy needs the data (Responses), an accuracy-baseline estimate or a Series by LLM")


def rank_shift(est, accuracy, interval: float = 0.9) -> pd.DataFrame:
    """The LLMs' IRT ranks against their raw-accuracy ranks, the largest moves first.

    Parameters
    ----------
    est : Estimate
        Any estimate.
    accuracy : Responses, Estimate or pandas.Series
        The raw accuracies (see :func:`raw_accuracy`).
    interval : float
        Probability mass of the IRT rank intervals.

    Returns
    -------
    pandas.DataFrame
        ``llm, rank, rank_lower, rank_upper, score, accuracy, accuracy_rank,
        shift, outside``, sorted by ``|shift|`` (then rank): ``shift`` is the
        accuracy rank minus the IRT rank (positive: the IRT model places the
        LLM higher than raw accuracy does); ``outside`` says whether the
        accuracy rank lies outside the IRT rank interval (never, for an
        estimate without draws: it has no rank interval).  Accuracy ties
        share the best rank.  Only the LLMs in both are compared; when some
        of the fit's LLMs lack an accuracy, both rankings are taken over the
        common LLMs and the IRT rank interval is left out.
    """
    from scipy.stats import rankdata

    acc = raw_accuracy(accuracy)
    tab = est.overall_scores(interval)
    tab = tab.assign(llm=tab["llm"].astype(str))
    acc = acc[acc.notna() & acc.index.isin(tab["llm"])]
    acc = acc[~acc.index.duplicated()]
    if len(acc) < 2:
        raise ValueError(f"raw accuracies of {len(acc)} of the fit's LLMs: need at least 2 in common")
    common = tab[tab["llm"].isin(acc.index)].reset_index(drop=True)
    if len(common) < len(tab) or est.rank_draws() is None:  # no (comparable) rank interval
        if len(common) < len(tab):
            common["rank"] = rankdata(-common["score"].to_numpy(), method="ordinal").astype(int)
        common["rank_lower"] = np.nan
        common["rank_upper"] = np.nan
    out = pd.DataFrame({
        "llm": common["llm"], "rank": common["rank"].astype(int), "rank_lower": common["rank_lower"],
        "rank_upper": common["rank_upper"], "score": common["score"],
        "accuracy": acc.reindex(common["llm"]).to_numpy(),
    })
    out["accuracy_rank"] = rankdata(-out["accuracy"].to_numpy(), method="min").astype(int)
    out["shift"] = out["accuracy_rank"] - out["rank"]
    lo, hi = out["rank_lower"].to_numpy(float), out["rank_upper"].to_numpy(float)
    ar = out["accuracy_rank"].to_numpy(float)
    out["outside"] = np.where(np.isfinite(lo) & np.isfinite(hi), (ar < lo) | (ar > hi), False)
    key = -np.abs(out["shift"].to_numpy())
    return out.iloc[np.lexsort((out["rank"].to_numpy(), key))].reset_index(drop=True)


def rank_vs_accuracy(est, accuracy, interval: float = 0.9, *, label: int = 8, ax=None,
                     label_width: int = 28) -> Figure:
    """IRT rank against raw-accuracy rank, one point per LLM; the LLMs that move most are named.

    Parameters
    ----------
    est : Estimate
        Any estimate.
    accuracy : Responses, Estimate or pandas.Series
        The raw accuracies (see :func:`raw_accuracy` and :func:`rank_shift`).
    interval : float
        Probability mass of the IRT rank intervals (grey bars), when the
        estimate has draws.
    label : int
        Number of LLMs named: those with the largest ``|shift|``, one per
        place (one name, ``(+k nearby)``, stands for the LLMs within 1% of
        the ranks, at least 2, on both axes: copies of one model).
    ax : matplotlib.axes.Axes, optional
        Axes to draw into.
    label_width : int
        Longer names are cut in the middle.

    Returns
    -------
    matplotlib.figure.Figure
        One axes; x the raw-accuracy rank, y the IRT rank (1 = best, at the
        top right), the identity line, and one text per named LLM
        (``name (+shift)``).
    """
    from scipy.stats import spearmanr

    t = rank_shift(est, accuracy, interval)
    n = len(t)
    own = ax is None
    fig, ax = _axes(ax, (6.4, 6.4))
    x, y = t["accuracy_rank"].to_numpy(float), t["rank"].to_numpy(float)
    lo, hi = t["rank_lower"].to_numpy(float), t["rank_upper"].to_numpy(float)
    ok = np.isfinite(lo) & np.isfinite(hi) & (hi > lo)
    if ok.any() and n <= 5000:
        segs = np.stack([np.c_[x[ok], lo[ok]], np.c_[x[ok], hi[ok]]], axis=1)
        ax.add_collection(LineCollection(segs, colors=_GREY, linewidths=0.8 if n <= 300 else 0.4,
                                         alpha=0.35, rasterized=n > 2000,
                                         label=f"IRT {interval:.0%} rank interval"), autolim=True)
    shift = t["shift"].to_numpy()
    # the `label` largest moves, one name per place: LLMs with the same answers (copies, merges) share
    # nearly the same two ranks, and one name stands for those within `tol` ranks on both axes
    tol = max(2.0, 0.01 * n)
    chosen, near = [], np.zeros(n, bool)
    for i in np.flatnonzero(shift != 0):
        if len(chosen) >= max(int(label), 0):
            break
        if near[i]:
            continue
        chosen.append(i)
        near |= (np.abs(x - x[i]) <= tol) & (np.abs(y - y[i]) <= tol)
    named = near & (shift != 0)
    small = 14 if n <= 300 else (6 if n <= 3000 else 3)
    ax.scatter(x[~named], y[~named], s=small, color=_GREY, alpha=0.6 if n <= 3000 else 0.3, lw=0, zorder=3,
               rasterized=n > 2000)
    cols = np.where(shift > 0, _BLUE, _ORANGE)
    for col, what in ((_BLUE, "IRT ranks it higher"), (_ORANGE, "IRT ranks it lower")):
        sel = named & (cols == col)
        if sel.any():
            ax.scatter(x[sel], y[sel], s=30, color=col, zorder=4, edgecolor="black", linewidth=0.4, label=what)
    ax.plot([1, n], [1, n], color=_RED, lw=0.9, ls="--", zorder=2, label="same rank")
    pad = max(1.0, 0.03 * n)
    ax.set_xlim(n + pad, 1 - pad)
    ax.set_ylim(n + pad, 1 - pad)
    step = _nice_step(n / 6)
    ticks = [1] + [v for v in range(step, n + 1, step) if v - 1 >= step / 2]
    ax.set_xticks(ticks)
    ax.set_yticks(ticks)
    ax.set_aspect("equal", adjustable="box")
    ax.set_xlabel("raw-accuracy rank (mean of the domain accuracies; 1 = best)", fontsize=9)
    ax.set_ylabel(f"IRT rank ({est.method}; 1 = best)", fontsize=9)
    rho = float(spearmanr(x, y).statistic) if n > 2 else np.nan
    ax.set_title(f"IRT rank against raw-accuracy rank, {n:,} LLMs\nSpearman ρ = {rho:.3f}; median |shift| "
                 f"{np.median(np.abs(shift)):.0f}, largest {np.abs(shift).max():.0f} places", fontsize=9)
    ax.grid(alpha=0.3)
    ax.tick_params(labelsize=8)
    if own:  # under the plot: the largest moves sit in its corners
        fig.legend(fontsize=7, loc="outside lower center", ncols=2, frameon=False)
    else:
        ax.legend(fontsize=7, loc="lower right", framealpha=0.9)
    if chosen:
        idx = np.asarray(chosen)
        labels = []
        for i in idx:
            more = int(((np.abs(x - x[i]) <= tol) & (np.abs(y - y[i]) <= tol)).sum()) - 1
            labels.append(f"{_shorten(t['llm'].iloc[i], label_width)}" + (f" (+{more} nearby)" if more else "")
                          + f": {int(x[i])} → {int(y[i])}")
        _label_off_diagonal(ax, x[idx], y[idx], shift[idx], labels, list(cols[idx]))
    return fig


def _nice_step(x: float) -> int:
    """The smallest of 1, 2, 5, 10, 20, 50, ... at least ``x``."""
    for mag in 10 ** np.arange(0, 9):
        for m in (1, 2, 5):
            if m * mag >= x:
                return int(m * mag)
    return int(10 ** 9)


def _label_off_diagonal(ax, x, y, shift, labels, colors, fontsize=7.0):
    """Name points away from the identity line (up or left above it, down or right below; the other side
    when that side is full), each with a leader line: the first candidate offset whose text lies inside
    the axes and overlaps no earlier text nor named point.  A point with no such place stays unnamed
    (the table beside the figure names it); the texts never resize the axes."""
    from matplotlib.text import Text

    fig = ax.figure
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    axbox = ax.get_window_extent(renderer)
    pts = ax.transData.transform(np.c_[x, y])
    taken = [(px - 4, py - 4, px + 4, py + 4) for px, py in pts]
    steps = [(28, 18), (18, 28), (40, 0), (0, 40), (45, 10), (10, 45), (60, 30), (30, 60), (70, 0), (0, 70),
             (80, 12), (12, 80), (95, 45), (45, 95)]
    for i in range(len(x)):
        side = 1 if shift[i] > 0 else -1  # above the line: text up or left; below: down or right
        others = taken[:i] + taken[i + 1:]
        for sign, (dx, dy) in [(side, st) for st in steps] + [(-side, st) for st in steps]:
            ox, oy = -sign * dx, sign * dy
            t = ax.annotate(labels[i], (x[i], y[i]), xytext=(ox, oy), textcoords="offset points",
                            ha="center" if ox == 0 else ("right" if ox < 0 else "left"),
                            va="center" if oy == 0 else ("bottom" if oy > 0 else "top"),
                            fontsize=fontsize, color=colors[i], zorder=5,
                            bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.85},
                            arrowprops={"arrowstyle": "-", "color": colors[i], "lw": 0.6, "shrinkA": 0,
                                        "shrinkB": 3})
            t.set_in_layout(False)
            t.update_positions(renderer)
            bb = Text.get_window_extent(t, renderer)
            box = (bb.x0, bb.y0, bb.x1, bb.y1)
            inside = box[0] >= axbox.x0 and box[2] <= axbox.x1 and box[1] >= axbox.y0 and box[3] <= axbox.y1
            if inside and all(box[2] < q[0] or box[0] > q[2] or box[3] < q[1] or box[1] > q[3] for q in others):
                taken.append(box)
                break
            t.remove()
