"""The variance of each domain's deviations from a centre, by its posterior mean over a uniform sine: the
spread of the seed paper's domain traits about their overall score (its error bootstrap's world)."""

from __future__ import annotations

import numpy as np
from scipy.special import log_expit


def deviation_variance(correct, observed, domain_slices, centre, a, d, *, leverage=None, nodes=15, grid=41,
                       floor=1e-3):
    """Variance ``psi_t = alpha_t^2`` of each domain's deviations from a centre: its posterior mean.

    With ``theta_it = centre_it + delta_it``, ``delta_it ~ N(0, alpha_t^2)``,
    each domain's marginal likelihood of its observed answers (the deviation
    integrated out by Gauss-Hermite quadrature over ``nodes`` points, items
    fixed at ``a``, ``d``) is evaluated on ``grid`` values of the deviation's
    sine ``alpha_t`` in ``[0, 1]``, and ``psi_t`` is the posterior mean of
    ``alpha_t^2`` under a uniform ``alpha_t`` (the paper's design draws
    ``|alpha_t|`` uniformly).  Exact where moments of the likelihood score lose
    large deviations to the logistic's curvature; near 0 for a domain that sits
    on its centre when its answers say so, and not 0 (as a maximum-likelihood
    estimate would be) when they cannot tell.  A centre fitted to the same data
    follows a share ``h_t`` of the domain's own deviations, which the estimate
    loses; given ``leverage`` (the ``h_t``) it is divided by ``(1 - h_t)^2``,
    then floored at ``floor``.

    Parameters
    ----------
    correct, observed, domain_slices
        The data (``observed`` None when complete).
    centre : ndarray (N, K)
        Centres on the scale of the items.
    a, d : ndarray (J,)
        Slope-intercept items, ``logit P = a theta + d``.

    Returns
    -------
    numpy.ndarray
        ``K`` variances.
    """
    x, w = np.polynomial.hermite_e.hermegauss(nodes)
    lw = np.log(w / w.sum())
    alpha = np.linspace(0.0, 1.0, grid)
    trap = np.full(grid, alpha[1])  # trapezoid weights of the uniform prior
    trap[[0, -1]] /= 2
    out = np.empty(len(domain_slices))
    for k, s in enumerate(domain_slices):
        y = np.asarray(correct[:, s], dtype=np.float64)
        m = np.ones(y.shape) if observed is None else np.asarray(observed[:, s], dtype=np.float64)
        ak, dk = np.asarray(a[s], dtype=np.float64), np.asarray(d[s], dtype=np.float64)
        base = np.asarray(centre, dtype=np.float64)[:, k][:, None] * ak + dk
        loglik = np.empty(grid)
        for g, al in enumerate(alpha):
            t = np.empty((y.shape[0], nodes))
            for q in range(nodes):
                z = base + ak * (al * x[q])
                t[:, q] = (m * (y * log_expit(z) + (1.0 - y) * log_expit(-z))).sum(axis=1) + lw[q]
            top = t.max(axis=1)
            loglik[g] = (top + np.log(np.exp(t - top[:, None]).sum(axis=1))).sum()
        post = trap * np.exp(loglik - loglik.max())
        out[k] = (post * alpha**2).sum() / post.sum()
    if leverage is not None:
        out = out / (1.0 - np.clip(np.asarray(leverage, dtype=np.float64), 0.0, 0.5)) ** 2
    return np.maximum(out, floor)
