"""The seed paper's cross-validation of ``C`` (:mod:`mtlirt.estimators.paper`): its folds, the held-out
losses along the grid, the choice among the ``C`` whose fits converged."""

from __future__ import annotations

import warnings

import numpy as np

from ..errors import InputError
from .paper_objective import _domain_nll, _spectral_start
from .paper_variants import _solve

#: Relative tolerance within which two C's mean held-out losses tie (the smaller C wins).
TIE_RTOL = 1e-6


def make_folds(mask, dom, K, n_folds=5, seed=0):
    """Fold of every observed cell (``-1`` elsewhere): each LLM's observed
    responses within each domain are shuffled and cut into ``n_folds``
    near-equal consecutive parts (``numpy.array_split``), domain by domain,
    LLM by LLM, from ``default_rng(seed + 100003)``."""
    rng = np.random.default_rng(seed + 100_003)
    fold = np.full(mask.shape, -1, dtype=np.int8)
    for t in range(K):
        cols = np.flatnonzero(dom == t)
        for i in range(mask.shape[0]):
            items = cols[mask[i, cols]]
            if items.size == 0:
                continue
            for f, part in enumerate(np.array_split(rng.permutation(items), n_folds)):
                fold[i, part] = f
    return fold


def _fold_path(prob, fold, f, variant, grid, optimizer, adam):
    """Held-out scores of one fold along the grid (warm starts with the fast optimiser)."""
    train = prob.mask(fold != f) & (fold >= 0)
    test = fold == f
    start = _spectral_start(prob, train)
    losses, oks = [], []
    cur, fz = start, None
    for C in grid:
        res = _solve(prob, train, variant, C * prob.lam_scale, optimizer, cur if optimizer == "fast" else start,
                     fused=fz, adam=adam, tol="cv")
        theta, a, d, g = res[:4]
        if optimizer == "fast":
            cur, fz = (theta, a, d, g), res[7]
        s, n = _domain_nll(prob.y, test, np.ascontiguousarray(theta.T), a, d, prob.dom, prob.K)
        has = n > 0
        losses.append(float(np.mean(s[has] / n[has])) if has.any() else np.nan)  # nothing held out: no loss
        oks.append(bool(res[6]))
    return losses, oks


def _choose(loss, converged, rtol=TIE_RTOL):
    """Index of the chosen C (grid ascending) from folds x grid held-out losses:
    among the C whose fits converged in every fold (all C when none did), the
    smallest C whose mean over the folds is within ``rtol`` (relative) of the
    smallest mean: fits that agree to the optimiser's precision (fused fits
    of neighbouring C, say) tie, and the tie goes to the smaller C.
    Returns (index, mean losses with NaN for the C left out, whether none converged)."""
    with warnings.catch_warnings():  # a fold that held nothing out (tiny data) has no loss and counts for nothing
        warnings.simplefilter("ignore", RuntimeWarning)
        fold_mean = np.nanmean(loss, axis=0)
    if np.isnan(fold_mean).all():
        raise InputError("too few responses to cross-validate the paper variant's C (no fold holds a response "
                         "out); fix C with --gamma")
    mean = np.where(converged.all(axis=0), fold_mean, np.nan)
    all_failed = bool(np.isnan(mean).all())
    if all_failed:
        mean = fold_mean
    best = np.nanmin(mean)
    return int(np.flatnonzero(mean <= best + rtol * abs(best))[0]), mean, all_failed


def _tune(prob, variant, grid, n_folds, seed, optimizer, adam, n_jobs):
    fold = make_folds(prob.mask(), prob.dom, prob.K, n_folds, seed)
    args = [(prob, fold, f, variant, grid, optimizer, adam) for f in range(n_folds)]
    if n_jobs == 1:
        out = [_fold_path(*x) for x in args]
    else:
        from joblib import Parallel, delayed

        out = Parallel(n_jobs=min(n_jobs, n_folds), backend="loky", inner_max_num_threads=1)(
            delayed(_fold_path)(*x) for x in args)
    loss = np.array([o[0] for o in out])
    conv = np.array([o[1] for o in out])
    chosen, mean, all_failed = _choose(loss, conv)
    return float(grid[chosen]), {
        "grid": [float(c) for c in grid], "loss": [None if np.isnan(v) else float(v) for v in mean],
        "fold_loss": loss.tolist(), "converged": conv.tolist(), "chosen": float(grid[chosen]),
        "n_folds": n_folds, "seed": seed, "all_failed": all_failed,
    }
