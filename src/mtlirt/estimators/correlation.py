"""Cross-domain correlations of the traits, corrected for measurement error.

The correlation of two columns of estimated domain scores understates the
correlation of the traits: each estimate carries noise (a short domain much
more than a long one).  With ``rel_k`` the reliability of domain ``k``'s
scores (the share of their variance that is trait, not noise), the classical
correction is ``corr(theta_k, theta_l) = corr(est_k, est_l) / sqrt(rel_k rel_l)``.
For MAP estimates under a ``N(0, 1)`` prior (the single-domain fits) the
same formula holds, ``rel_k`` following from their standard errors
(:func:`reliability_from_se`).  The multi-task estimates are not used for
this: their shrinkage toward the shared structure would inflate the
correlations; the corrected single-domain correlations estimate the same
population quantity without that bias.

Bootstrap intervals take the spread of the replicates' corrected
correlations around the corrected point estimate (:func:`corr_draws`).
The accuracy baseline reports the plain correlation of domain accuracies
(binomial error variances would overstate its noise: items of known
difficulty vary less than coin flips).
"""

from __future__ import annotations

import numpy as np


def reliability_from_se(theta_se: np.ndarray) -> np.ndarray:
    """Reliability of MAP scores standardised to unit variance, from their standard errors.

    A MAP score under a ``N(0, 1)`` prior has variance ``v = 1 - mean(pv)``
    (``pv`` the posterior variances); standardised by ``sqrt(v)`` its squared
    standard errors are ``pv / v``, so ``v = 1 / (1 + mean(se^2))``.
    """
    se2 = np.nanmean(np.asarray(theta_se, dtype=np.float64) ** 2, axis=0)
    return np.clip(1.0 / (1.0 + se2), 0.05, 1.0)


def column_corr(theta: np.ndarray) -> np.ndarray:
    """Correlation of the columns of ``theta`` (``... x N x K`` -> ``... x K x K``)."""
    t = theta - theta.mean(axis=-2, keepdims=True)
    cov = np.einsum("...nk,...nl->...kl", t, t)
    sd = np.sqrt(np.einsum("...kk->...k", cov))
    with np.errstate(invalid="ignore", divide="ignore"):
        return cov / sd[..., :, None] / sd[..., None, :]


def corrected_corr(theta: np.ndarray, rel: np.ndarray) -> np.ndarray:
    """Measurement-error-corrected correlation, clipped to [-1, 1], unit diagonal."""
    raw = column_corr(theta)
    out = raw / np.sqrt(np.multiply.outer(rel, rel))
    out = np.clip(out, -1.0, 1.0)
    idx = np.arange(out.shape[-1])
    out[..., idx, idx] = 1.0
    return out


def corr_draws(point_basis: np.ndarray, replicate_basis: np.ndarray, rel: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The corrected point correlation and bootstrap draws centred on it, clipped to [-1, 1].

    The replicates' spread measures the sampling variability of the
    correlation; their centre does not estimate its bias (the bootstrap
    world's traits are the fitted ones, smoother than the real ones), so the
    draws are the replicates shifted to have the point estimate as their mean.
    """
    point = corrected_corr(point_basis, rel)
    reps = corrected_corr(replicate_basis, rel)
    draws = np.clip(reps - reps.mean(axis=0) + point, -1.0, 1.0)
    idx = np.arange(draws.shape[-1])
    draws[..., idx, idx] = 1.0
    return point, draws


def principal_axes(corr: np.ndarray, rank: int, *, communality: tuple[float, float] = (0.0, 0.999),
                   n_iter: int = 200, tol: float = 1e-6) -> np.ndarray:
    """Principal-axis factoring of a correlation matrix: ``K x rank`` loadings with
    ``corr ~ L L^T`` off the diagonal.

    The communalities start at each domain's largest absolute correlation
    (at least 0.05) and are iterated, kept within ``communality``; NaN
    entries read as 0. Each column's sign makes its sum non-negative.
    """
    R = np.nan_to_num(np.array(corr, dtype=float))
    K = R.shape[0]
    lo, hi = communality
    off = np.abs(R - np.diag(np.diag(R)))
    h2 = np.clip(off.max(1), 0.05, hi)
    L = np.zeros((K, rank))
    for _ in range(n_iter):
        Rr = R.copy()
        Rr[np.diag_indices(K)] = h2
        w, v = np.linalg.eigh(Rr)
        w, v = w[::-1][:rank], v[:, ::-1][:, :rank]
        L = v * np.sqrt(np.clip(w, 0.0, None))
        new = np.clip((L**2).sum(1), lo, hi)
        if np.abs(new - h2).max() < tol:
            h2 = new
            break
        h2 = new
    L *= np.where(L.sum(0) < 0, -1.0, 1.0)
    return L
