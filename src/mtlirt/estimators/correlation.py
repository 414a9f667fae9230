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


def reliability_from_se(theta_se: np.ndarray, theta: np.ndarray | None = None,
                        seen: np.ndarray | None = None) -> np.ndarray:
    """Reliability of MAP scores standardised to unit variance, from their standard errors.

    A MAP score under a ``N(0, 1)`` prior has variance ``v = 1 - mean(pv)``
    (``pv`` the posterior variances); standardised by ``sqrt(v)`` its squared
    standard errors are ``pv / v``, so ``v = 1 / (1 + mean(se^2))``.

    With ``seen`` (``N x K``, False where an LLM has no responses in a
    domain) and some cell unseen, each domain's reliability is taken over
    the LLMs seen in it, ``var / (var + mean se^2)`` of their ``theta``
    (the formula above is this with ``var = 1``, the variance over all LLMs,
    whose unseen cells hold the prior's 0 with the prior's standard error).
    """
    se = np.asarray(theta_se, dtype=np.float64)
    if seen is None or np.all(seen):
        se2 = np.nanmean(se**2, axis=0)
        return np.clip(1.0 / (1.0 + se2), 0.05, 1.0)
    theta = np.asarray(theta, dtype=np.float64)
    cnt = np.maximum(seen.sum(0), 1)
    mean = np.where(seen, theta, 0.0).sum(0) / cnt
    var = np.where(seen, (theta - mean) ** 2, 0.0).sum(0) / cnt
    se2 = np.where(seen, np.nan_to_num(se) ** 2, 0.0).sum(0) / cnt
    return np.clip(var / np.maximum(var + se2, 1e-12), 0.05, 1.0)


def column_corr(theta: np.ndarray) -> np.ndarray:
    """Correlation of the columns of ``theta`` (``... x N x K`` -> ``... x K x K``)."""
    t = theta - theta.mean(axis=-2, keepdims=True)
    cov = np.einsum("...nk,...nl->...kl", t, t)
    sd = np.sqrt(np.einsum("...kk->...k", cov))
    with np.errstate(invalid="ignore", divide="ignore"):
        return cov / sd[..., :, None] / sd[..., None, :]


def pairwise_corr(theta: np.ndarray, seen: np.ndarray) -> np.ndarray:
    """Correlation of the columns of ``theta`` (``... x N x K``), each pair over the rows seen
    in both columns (``seen``: ``N x K``, shared by the leading axes); NaN for a pair with fewer
    than 3 such rows."""
    M = np.asarray(seen, dtype=np.float64)
    X = np.where(seen, theta, 0.0)
    both = M.T @ M
    n = np.maximum(both, 1.0)
    s1 = np.einsum("...nk,nl->...kl", X, M) / n  # [k, l]: mean of column k over the rows seen in k and l
    s2 = np.einsum("...nk,nl->...kl", X * X, M) / n
    cov = np.einsum("...nk,...nl->...kl", X, X) / n - s1 * np.swapaxes(s1, -1, -2)
    v = s2 - s1**2
    with np.errstate(invalid="ignore", divide="ignore"):
        out = cov / np.sqrt(v * np.swapaxes(v, -1, -2))
    return np.where(both >= 3, out, np.nan)


def corrected_corr(theta: np.ndarray, rel: np.ndarray, seen: np.ndarray | None = None) -> np.ndarray:
    """Measurement-error-corrected correlation, clipped to [-1, 1], unit diagonal.

    With ``seen`` (``N x K``) and some cell unseen, each pair is correlated
    over the LLMs seen in both domains (:func:`pairwise_corr`; NaN where
    fewer than 3 are); otherwise over all rows."""
    raw = column_corr(theta) if seen is None or np.all(seen) else pairwise_corr(theta, seen)
    out = raw / np.sqrt(np.multiply.outer(rel, rel))
    out = np.clip(out, -1.0, 1.0)
    idx = np.arange(out.shape[-1])
    out[..., idx, idx] = 1.0
    return out


def error_corrected_corr(theta: np.ndarray, theta_se: np.ndarray | None = None,
                         seen: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The package's cross-domain correlation of single-domain scores: ``(K x K corr, K reliabilities)``.

    ``theta`` and ``theta_se`` are the single-domain (MAP) scores and their
    standard errors (``theta_se`` None: reliability 1, plain correlations);
    ``seen`` (``N x K``, optional) is False where an LLM has no responses
    in a domain. With every cell seen this is the classical correction over
    all LLMs. When LLMs ran only some domains, an unseen cell holds the
    prior's 0, not a score: each pair is then correlated over the LLMs with
    responses in both domains and each domain's reliability taken over the
    LLMs with responses in it (:func:`reliability_from_se`). Over all rows
    the prior's zeros, read as scores, inflate the correlations (MMLU x 0.1,
    40% of the LLMs running half the domains: mean 0.987 where the truth is
    0.90; ``benchmarks/bench_checks.py corr``).
    """
    theta = np.nan_to_num(np.asarray(theta, dtype=np.float64))
    if theta_se is None:
        rel = np.ones(theta.shape[-1])
    else:
        rel = reliability_from_se(theta_se, theta, seen)
    return corrected_corr(theta, rel, seen), rel


def corr_draws(point_basis: np.ndarray, replicate_basis: np.ndarray, rel: np.ndarray,
               seen: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The corrected point correlation and bootstrap draws centred on it, clipped to [-1, 1].

    The replicates' spread measures the sampling variability of the
    correlation; their centre does not estimate its bias (the bootstrap
    world's traits are the fitted ones, smoother than the real ones), so the
    draws are the replicates shifted to have the point estimate as their mean.
    ``seen`` as in :func:`corrected_corr` (the replicates share the data's
    observation pattern).
    """
    point = corrected_corr(point_basis, rel, seen)
    reps = corrected_corr(replicate_basis, rel, seen)
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
