"""Bootstrap replicates of a point estimate, in parallel over cores and seeded.

Parametric bootstrap (METHOD.md §4 step 6): new answers are drawn from the
fitted item model on the observed cells only, and the same estimator, with its
tuned settings held fixed (the selected rank, the chosen shrinkage), is refit
to each replicate.  Replicate ``b`` draws from
``numpy.random.default_rng(SeedSequence(seed).spawn(B)[b])``, so the result
does not depend on the number of workers.

Three worlds:

``parametric``
    The answers are redrawn from the point fit itself (STL, pooled).
``items``
    Items are resampled within domains (accuracy).
``world``
    For a shrinkage estimator (MTL) the point fit is the wrong world: it has
    no deviations from the shared structure left, so refits of it cannot see
    the shrinkage bias.  Each replicate draws a new truth
    ``theta* = centre + sqrt(psi_k) z`` (``z ~ N(0, 1)``), with the shared
    centre of the fit and each domain's deviation spread ``psi_k`` estimated
    from the data (:func:`deviation_spread`), draws answers from it and
    refits; the replicate returns its truth (``world_theta``) beside the
    refit, so the caller can form the estimation error ``refit - truth``.
    An interval of the error ``e``, applied to the point estimate, is
    ``[estimate - q_hi(e), estimate - q_lo(e)]``: an empirical-Bayes interval
    whose coverage holds on average over the LLMs.
"""

from __future__ import annotations

import os
from typing import Callable

import numpy as np

from .progress import progress_bar

Refit = Callable[[np.ndarray, "np.ndarray | None"], dict]

def draw_responses(theta, a, d, c, domain_slices, observed, rng: np.random.Generator) -> np.ndarray:
    """Draw an ``N x J`` ``int8`` answer matrix from the item model (0 where unobserved)."""
    n = theta.shape[0]
    j = len(a)
    out = np.empty((n, j), dtype=np.int8)
    a32, d32 = np.asarray(a, np.float32), np.asarray(d, np.float32)
    c32 = np.zeros(j, np.float32) if c is None else np.asarray(c, np.float32)
    for k, s in enumerate(domain_slices):
        logit = np.multiply.outer(theta[:, k].astype(np.float32), a32[s])
        logit += d32[s]
        np.negative(logit, out=logit)
        np.exp(logit, out=logit)
        logit += 1.0
        np.reciprocal(logit, out=logit)  # sigmoid
        p = logit
        if c is not None:
            p *= 1 - c32[s]
            p += c32[s]
        out[:, s] = rng.random(p.shape, dtype=np.float32) < p
    if observed is not None:
        out &= observed
    return out


def resample_items(correct, observed, domain_slices, rng: np.random.Generator):
    """Resample items with replacement within each domain (a nonparametric replicate)."""
    cols = np.concatenate([rng.integers(s.start, s.stop, s.stop - s.start) for s in domain_slices])
    return correct[:, cols], None if observed is None else observed[:, cols]


def deviation_spread(correct, observed, domain_slices, centre, a, d, c=None, floor: float = 1e-3) -> np.ndarray:
    """Variance ``psi_k`` of each domain's deviations from its centre, by moments of the score.

    With ``theta_ik = centre_ik + delta_ik``, ``delta_ik ~ N(0, psi_k)``, the
    score ``g`` and information ``I`` of the log-likelihood at the centre
    satisfy ``E[g^2] ~ I + I^2 psi_k``, so
    ``psi_k = sum_i (g_ik^2 - I_ik) / sum_i I_ik^2``.  In a short domain
    that moment is noisy (sampling variance ``2 sum_i (I_ik + I_ik^2
    psi)^2 / (sum_i I_ik^2)^2``, ``psi`` their mean), so the domains' estimates
    are partially pooled: shrunk toward their mean by the weight
    ``tau^2 / (tau^2 + variance)``, ``tau^2`` the spread of the true
    ``psi_k`` by moments (a long domain keeps its own value), then floored at
    ``floor``.  Cells without responses contribute nothing.

    Parameters
    ----------
    correct, observed, domain_slices
        The data (``observed`` None when complete).
    centre
        ``N x K`` centres, on the scale of the items ``a``, ``d``.
    a, d, c
        Item parameters (``c`` None or the lower asymptotes).

    Returns
    -------
    numpy.ndarray
        ``K`` variances.
    """
    from .irt import ResponseData

    cc = None if c is None or not np.any(np.asarray(c) > 0) else np.asarray(c, dtype=np.float64)
    lik = ResponseData(correct, observed, domain_slices, guessing=cc).theta_likelihood()
    lik.set_items(np.asarray(a, dtype=np.float64), np.asarray(d, dtype=np.float64))
    g, info = lik.theta_derivs(np.asarray(centre, dtype=np.float64))
    i2 = np.maximum((info * info).sum(axis=0), 1e-12)
    raw = (g * g - info).sum(axis=0) / i2
    var = 2.0 * ((info + info * info * max(raw.mean(), 0.0)) ** 2).sum(axis=0) / i2**2
    var = np.maximum(var, 1e-12)
    if raw.size > 1:  # random-effects moments, unweighted: weights by precision (or variances at
        # each domain's own value) favour the domains whose moment happens to come out low
        mean = raw.mean()
        tau2 = max(0.0, raw.var(ddof=1) - var.mean())
        raw = mean + (raw - mean) * tau2 / (tau2 + var)
    return np.maximum(raw, floor)


def _one(b: int, state: dict):
    """Replicate ``b``: new answers (parametric, world) or resampled items, then the refit."""
    rng = np.random.default_rng(state["seeds"][b])
    p = state["point"]
    if state["kind"] == "parametric":
        y = draw_responses(p["theta"], p["a"], p["d"], p.get("c"), state["slices"], state["observed"], rng)
        obs = state["observed"]
    elif state["kind"] == "world":
        truth = p["centre"] + rng.standard_normal(p["centre"].shape) * np.sqrt(p["psi"])
        y = draw_responses(truth, p["a"], p["d"], p.get("c"), state["slices"], state["observed"], rng)
        res = state["refit"](y, state["observed"])
        res["world_theta"] = truth
        return b, res
    else:
        y, obs = resample_items(state["correct"], state["observed"], state["slices"], rng)
    return b, state["refit"](y, obs)


def run_bootstrap(
    refit: Refit,
    *,
    n: int,
    seed: int,
    domain_slices,
    observed: np.ndarray | None,
    point: dict | None = None,
    correct: np.ndarray | None = None,
    kind: str = "parametric",
    n_jobs: int | None = None,
    desc: str = "bootstrap",
) -> dict:
    """Run ``n`` bootstrap replicates and stack their results.

    Parameters
    ----------
    refit
        ``refit(correct, observed) -> dict of arrays``: the estimator with its
        tuned settings fixed (a picklable function, e.g. a ``functools.partial``
        of a module-level function).
    n, seed
        Number of replicates and the seed.
    domain_slices, observed
        The data's layout and observation mask (``None`` when complete).
    point
        For ``kind="parametric"``: the point estimate's ``theta`` (N x K),
        ``a``, ``d`` and optionally ``c``; for ``kind="world"``: ``centre``
        (N x K), ``psi`` (K deviation variances), ``a``, ``d``, ``c``.
    correct
        For ``kind="items"``: the observed answers, resampled by item within domain.
    n_jobs
        Worker processes (default: the number of cores); 1 runs in-process.
        Workers are joblib's loky processes (large arrays are shared by memory
        mapping; each worker uses one BLAS thread), which also work from
        scripts without an ``if __name__ == "__main__"`` guard and from notebooks.

    Returns
    -------
    dict
        Each key of ``refit``'s result stacked over replicates (leading axis
        ``n``); with ``kind="world"`` also ``world_theta``, each replicate's truth.
    """
    if n < 2:
        raise ValueError("a bootstrap needs at least 2 replicates")
    state = dict(kind=kind, refit=refit, seeds=np.random.SeedSequence(seed).spawn(n), slices=domain_slices,
                 observed=observed, point=point, correct=correct)
    n_jobs = min(n_jobs or os.cpu_count() or 1, n)
    results: list = [None] * n
    with progress_bar(total=n, desc=desc) as bar:
        if n_jobs == 1:
            for b in range(n):
                results[b] = _one(b, state)[1]
                bar.update(1)
        else:
            from joblib import Parallel, delayed

            with Parallel(n_jobs=n_jobs, backend="loky", return_as="generator_unordered",
                          inner_max_num_threads=1) as parallel:
                for b, res in parallel(delayed(_one)(b, state) for b in range(n)):
                    results[b] = res
                    bar.update(1)
    keys = results[0].keys()
    return {k: np.stack([r[k] for r in results]) for k in keys}
