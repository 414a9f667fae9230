"""Plots of an :class:`~mtlirt.results.estimate.Estimate`, one function per plot.

Every function reads an :class:`~mtlirt.results.estimate.Estimate` (an MTL or
baseline point estimate, with or without bootstrap replicates, or a Bayesian
posterior), takes an optional matplotlib ``ax`` (``fig`` for the multi-panel
plots) and keyword options, and returns the :class:`matplotlib.figure.Figure`.
Figures grow with the number of rows (domains, LLMs) and use small fonts
from about 30 labels on, so that 56 domains stay readable.

Intervals are equal-tailed, from the estimate's uncertainty source
(posterior draws, else bootstrap replicates); a bare point estimate is drawn
without intervals.
"""

from ._common import figure_to_base64_png, figure_to_svg
from .accuracy import rank_shift, rank_vs_accuracy, raw_accuracy
from .diagnostics import convergence, rank_rhat
from .items import domain_difficulty, item_curves, item_map
from .scores import compare_scatter, domain_heatmap, domain_profile, overall_forest, rank_uncertainty
from .structure import cluster_order, correlation_heatmap, domain_order, scree

__all__ = [
    "cluster_order",
    "compare_scatter",
    "convergence",
    "correlation_heatmap",
    "domain_difficulty",
    "domain_heatmap",
    "domain_order",
    "domain_profile",
    "figure_to_base64_png",
    "figure_to_svg",
    "item_curves",
    "item_map",
    "overall_forest",
    "rank_rhat",
    "rank_shift",
    "rank_uncertainty",
    "rank_vs_accuracy",
    "raw_accuracy",
    "scree",
]
