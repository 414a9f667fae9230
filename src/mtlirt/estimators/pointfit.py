"""The one result type of the frequentist estimators: :class:`PointFit`.

Single-domain IRT (:func:`~mtlirt.estimators.irt.fit_stl`), the pooled and
accuracy baselines (:mod:`~mtlirt.estimators.baselines`), MTL
(:func:`~mtlirt.estimators.mtl.fit_mtl`) and the seed paper's variants
(:func:`~mtlirt.estimators.paper.fit_paper`) all return it, so that
:func:`mtlirt.fitting.fit` turns any of them into an
:class:`~mtlirt.results.estimate.Estimate` by reading the same fields. A field an
estimator has no such thing for is ``None``; what only one estimator has sits
in ``record`` (its choices, written to ``fit.json``) or ``extra`` (the rest).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .response_data import to_internal

__all__ = ["PointFit"]


@dataclass
class PointFit:
    """A frequentist point estimate.

    Attributes
    ----------
    theta : numpy.ndarray
        ``N x K`` domain scores (NaN where the accuracy baseline has no response).
    a, d, c : numpy.ndarray or None
        Item discrimination, intercept and lower asymptote (``J``) on the scale of
        ``theta`` (``a theta + d`` is the linear predictor); None for the accuracy
        baseline, ``c`` None for the paper's variants (no guessing).
    overall : numpy.ndarray or None
        The overall score: ``N`` (paper variants, accuracy) or ``N x r`` shared traits whose
        column 0 is the overall score (MTL); None for single-domain IRT and pooled.
    loadings : numpy.ndarray or None
        ``K x r`` loadings of the domain traits on the shared traits (MTL, paper variants).
    centre : numpy.ndarray or None
        ``N x K``: each domain's prediction from the shared traits, on the scale of
        ``theta`` (MTL, paper variants): the score of a cell without responses.
    theta_se : numpy.ndarray or None
        ``N x K`` standard errors (posterior sds for MTL's posterior scores).
    theta_loc, theta_scale : numpy.ndarray or None
        ``K``: the item calibration's population-scale traits are ``theta * theta_scale
        + theta_loc`` (:meth:`internal`); None where the fit has no population scale.
    item_domain : numpy.ndarray or None
        Domain code of every item.
    stl : PointFit or None
        The single-domain fit the estimate started from (MTL): its scores are the
        basis of the cross-domain correlations.
    model : str
        ``"2pl"`` or ``"1pl"``.
    loglik : float or None
        Log-likelihood of the observed responses at the estimate.
    converged : bool
        The calibrations the estimate rests on converged.
    n_iter : int or None
        Iterations (EM sweeps) of that calibration or optimiser.
    convergence : dict or None
        MTL: whether each calibration it ran (``stl``, ``pooled``, ``centre``) converged.
    seconds : dict
        Wall time per stage (``total`` at least).
    scores : str or None
        MTL: ``"posterior"`` (the factor model's posterior means) or ``"shrunk"`` (the
        biased regularisation at a given ``C``).
    rank : int or None
        Number of shared traits (MTL, paper variants).
    C : float or None
        Penalty constant (MTL: the held-out one; paper variants: theirs).
    floors : dict or None
        With ``guessing="auto"``: which domains kept a guessing floor, and why
        (:func:`~mtlirt.estimators.calibration.decide_floors`).
    record : dict
        The estimator's choices, written to ``fit.json`` (MTL: ``singular_values``,
        ``rank_evidence``, ``cv``, ``gamma``, ``structure``; paper variants: ``cv``,
        ``lam``, ``objective``, ``optimizer``).
    extra : dict
        Further outputs of one estimator (single-domain IRT: ``loglik_domain``,
        ``marginal_loglik``, ``history``; MTL: ``on_centre``, ``mu``, ``w``, ``pooled``,
        ``theta_interval``; paper variants: ``variant``, ``fused``, ``dropped_items``;
        accuracy: ``accuracy``, ``n_responses``, ``overall_raw``), documented by the estimator.
    """

    theta: np.ndarray
    a: np.ndarray | None = None
    d: np.ndarray | None = None
    c: np.ndarray | None = None
    overall: np.ndarray | None = None
    loadings: np.ndarray | None = None
    centre: np.ndarray | None = None
    theta_se: np.ndarray | None = None
    theta_loc: np.ndarray | None = None
    theta_scale: np.ndarray | None = None
    item_domain: np.ndarray | None = field(default=None, repr=False)
    stl: PointFit | None = field(default=None, repr=False)
    model: str = "2pl"
    loglik: float | None = None
    converged: bool = True
    n_iter: int | None = None
    convergence: dict | None = None
    seconds: dict = field(default_factory=dict)
    scores: str | None = None
    rank: int | None = None
    C: float | None = None
    floors: dict | None = field(default=None, repr=False)
    record: dict = field(default_factory=dict, repr=False)
    extra: dict = field(default_factory=dict, repr=False)

    def internal(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(theta, a, d)`` on the population scale of the item calibration (the one the priors act on)."""
        return to_internal(self.theta, self.a, self.d, self.theta_loc, self.theta_scale, self.item_domain)
