"""Plots of the model checks of :mod:`mtlirt.evaluate.checks`, one function per plot.

Each function takes a check's result (not an :class:`~mtlirt.results.estimate.Estimate`),
an optional matplotlib ``ax`` (``fig`` for the two-panel plot) and returns the
:class:`matplotlib.figure.Figure`.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from .plots._common import _BLUE, _GREY, _ORANGE, _RED, _axes, _row_style, _shorten

__all__ = ["correlation_check_matrix", "correlation_check_pairs", "item_fit_plot", "loo_pareto_k"]


def correlation_check_matrix(check, *, fig=None):
    """Observed cross-domain correlations (upper triangle) beside the replicates' means (lower
    triangle) on one heatmap, and the two-sided p-value of every pair; misfitting pairs
    (``p < alpha``) are marked with a cross."""
    K = len(check.domains)
    rep = check.replicated.mean(0)
    iu = np.triu_indices(K, 1)
    both = np.full((K, K), np.nan)
    both[iu] = check.observed[iu]
    both[(iu[1], iu[0])] = rep[iu]
    p = np.full((K, K), np.nan)
    p[iu] = check.table["p_value"].to_numpy()
    p[(iu[1], iu[0])] = p[iu]
    size = min(14.0, 3.0 + 0.16 * K)
    if fig is None:
        fig, axes = plt.subplots(1, 2, figsize=(2 * size + 1.5, size), layout="constrained")
    else:
        axes = fig.subplots(1, 2)
    _, fs = _row_style(K)
    labels = [_shorten(d, 28) for d in check.domains]
    lo = float(np.nanmin(both)) if np.isfinite(both).any() else 0.0
    im = axes[0].imshow(both, vmin=min(lo, 0.0), vmax=1.0, cmap="viridis")
    fig.colorbar(im, ax=axes[0], shrink=0.7, label="correlation")
    axes[0].set_title("observed (upper) vs replicated mean (lower)", fontsize=10)
    im2 = axes[1].imshow(p, vmin=0.0, vmax=1.0, cmap="magma")
    fig.colorbar(im2, ax=axes[1], shrink=0.7, label="two-sided p-value")
    axes[1].set_title(f"predictive p-value; x: p < {check.alpha:g}", fontsize=10)
    bad = np.argwhere(p < check.alpha)
    for ax in axes:
        if len(bad):
            ax.scatter(bad[:, 1], bad[:, 0], marker="x", s=max(6, 200 / K), color=_RED, linewidths=1)
        if K <= 60:
            ax.set_xticks(range(K), labels, rotation=90, fontsize=fs)
            ax.set_yticks(range(K), labels, fontsize=fs)
        else:
            ax.set_xticks([])
            ax.set_yticks([])
    return fig


def correlation_check_pairs(check, *, n: int = 20, ax=None):
    """The ``n`` pairs with the smallest p-values: the observed correlation (dot) against
    the replicates' interval (bar); red where the pair misfits."""
    t = check.table.sort_values(["p_value", "domain_a"], kind="stable").head(n).iloc[::-1]
    m = len(t)
    h, fs = _row_style(m)
    labels = [f"{_shorten(a, 24)} – {_shorten(b, 24)}" for a, b in zip(t["domain_a"], t["domain_b"])]
    fig, ax = _axes(ax, (7.5, 1.2 + h * max(m, 1)))
    y = np.arange(m)
    ax.hlines(y, t["replicated_lower"], t["replicated_upper"], color=_GREY, lw=3, alpha=0.6,
              label=f"replicated {check.interval:.0%} interval")
    ax.plot(t["replicated_mean"], y, "|", color=_GREY, ms=10)
    colors = np.where(t["misfit"].to_numpy(), _RED, _BLUE)
    ax.scatter(t["observed"], y, color=colors, zorder=3, s=18, label="observed")
    ax.set_yticks(y, labels, fontsize=fs)
    ax.set_xlabel("cross-domain correlation (STL, corrected for measurement error)")
    ax.set_title(f"Pairs with the smallest predictive p-values (global p = {check.global_p:.3f})", fontsize=10)
    ax.legend(fontsize=8, loc="lower left")
    return fig


def item_fit_plot(items, *, alpha: float = 0.05, ax=None):
    """S-X2 item fit: ``S-X2 / df`` of every item by domain, misfitting items (adjusted p < ``alpha``)
    in red; the dashed line is the value 1 expected of a fitting item."""
    t = items[items["df"] > 0]
    doms = list(dict.fromkeys(items["domain"]))
    K = len(doms)
    h, fs = _row_style(K)
    fig, ax = _axes(ax, (8.0, 1.3 + h * max(K, 1)))
    pos = {d: i for i, d in enumerate(doms)}
    y = t["domain"].map(pos).to_numpy(float)
    jitter = (np.random.default_rng(0).random(len(t)) - 0.5) * 0.5
    ratio = (t["s_x2"] / t["df"]).to_numpy()
    bad = t["misfit"].to_numpy(bool)
    ax.scatter(ratio[~bad], (y + jitter)[~bad], s=8, color=_BLUE, alpha=0.5, label="fits")
    ax.scatter(ratio[bad], (y + jitter)[bad], s=16, color=_RED, label=f"misfit (BH-adjusted p < {alpha:g})")
    ax.axvline(1.0, color=_GREY, ls="--", lw=1)
    ax.set_yticks(range(K), [_shorten(d, 36) for d in doms], fontsize=fs)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("S-X2 / df")
    ax.set_title(f"Item fit: {int(bad.sum())} of {len(t)} tested items misfit", fontsize=10)
    ax.legend(fontsize=8)
    return fig


def loo_pareto_k(loo, *, ax=None):
    """Pareto k of every LLM's leave-one-out importance weights against its elpd; LLMs above
    ArviZ's threshold (dashed) have unreliable leave-one-out estimates."""
    t = loo.table
    fig, ax = _axes(ax, (7.0, 4.0))
    bad = ~t["k_ok"].to_numpy(bool)
    ax.scatter(t["elpd_loo"][~bad], t["pareto_k"][~bad], s=10, color=_BLUE, alpha=0.6)
    ax.scatter(t["elpd_loo"][bad], t["pareto_k"][bad], s=16, color=_ORANGE, label="k above the threshold")
    ax.axhline(loo.good_k, color=_GREY, ls="--", lw=1, label=f"threshold {loo.good_k:.2f}")
    ax.axhline(1.0, color=_RED, ls=":", lw=1)
    ax.set_xlabel("elpd_loo of the LLM (log predictive density of all its responses)")
    ax.set_ylabel("Pareto k")
    what = "overall and domain traits" if loo.overall_integrated else "domain traits"
    ax.set_title(f"Leave-one-LLM-out, {what} integrated out: {int(bad.sum())} of {len(t)} above the threshold",
                 fontsize=10)
    ax.legend(fontsize=8)
    return fig
