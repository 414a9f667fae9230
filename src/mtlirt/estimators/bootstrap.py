"""Bootstrap replicates of a point estimate, in parallel over cores and seeded.

Parametric bootstrap (docs/model.md, "Uncertainty"): new answers are drawn from the
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
    the shrinkage bias.  Each replicate draws a new truth: shared traits
    ``eta* = eta + sqrt(v_i) e`` around the fitted ones with their
    approximate posterior variances (:func:`overall_spread`), and
    ``theta* = centre + (eta* - eta) W^T + sqrt(psi_k) z`` (``e, z ~ N(0,
    1)``), with the fit's centre and loadings ``W`` and each domain's
    deviation spread ``psi_k`` estimated from the data
    (:func:`deviation_spread`); it draws answers from that truth and refits,
    and returns the truth (``world_theta``, ``world_overall``) beside the
    refit, so the caller can form the estimation error ``refit - truth``.
    An interval of the error ``e``, applied to the point estimate, is
    ``[estimate - q_hi(e), estimate - q_lo(e)]``: an empirical-Bayes interval
    whose coverage holds on average over the LLMs.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np

from ..memory import small_pages
from ..progress import progress_bar
from .response_data import ResponseData, same_floors
from .trait_scoring import theta_likelihood

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


def deviation_spread(correct, observed, domain_slices, centre, a, d, c=None, floor: float = 1e-3,
                     return_info: bool = False, loadings=None, max_iter: int = 50, lik=None):
    """Variance ``psi_k`` of each domain's deviations from its centre, by moments of the score.

    With ``theta_ik = centre_ik + delta_ik``, ``delta_ik ~ N(0, psi_k)``, the
    score ``g`` and information ``I`` of the log-likelihood at the centre
    satisfy ``E[g^2] ~ I + I^2 psi_k``, so
    ``psi_k = sum_i (g_ik^2 - I_ik) / sum_i I_ik^2``.

    That holds at a centre fixed in advance. A centre *fitted to the same
    data* (MTL's ``A w_k``: the shared traits are estimated from every
    domain, this one included) follows part of the domain's own noise and
    deviation, and the score at it is smaller: for a linear model with
    efficient weights the residual's variance is ``(1 - h_ik)`` times the
    deviation's plus the noise's, with the leverage ``h_ik = sum_m w_km^2
    I_ik / (1 + psi_k I_ik) v_im`` of the cell on its centre (``v`` the
    shared traits' posterior variances, :func:`overall_spread`). Subtracting
    the full ``I`` from the shrunken ``g^2`` is what made the moments too
    small on short domains, where ``h`` is largest: on six 10-item domains
    (400 LLMs, truth 0.1) they came out 0.001-0.04. Given ``loadings`` (the
    ``K x r`` slopes ``W`` of the centre on the shared traits, which marks the
    centre as fitted), the moments are taken as ``sum_i (g_ik^2 / (1 -
    h_ik) - I_ik) / sum_i I_ik^2``, iterated with ``h`` (which depends on
    ``psi``) to a fixed point.

    In a short domain that moment is noisy (sampling variance ``2 sum_i (I_ik + I_ik^2
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
    loadings
        ``K x r`` slopes of a fitted centre on its shared traits (standardised
        over the LLMs): the leverage correction above; None for a centre
        that does not depend on the data.
    lik
        The trait evaluator of these data with the floors ``c``
        (:func:`~mtlirt.estimators.trait_scoring.theta_likelihood`), where the caller has one: with floors
        its lists of the correct cells cost seconds at the flagship shape; default: built here.

    Returns
    -------
    numpy.ndarray
        ``K`` variances (and, with ``return_info``, the ``N x K`` information at the centre).
    """
    cc = None if c is None or not np.any(np.asarray(c) > 0) else np.asarray(c, dtype=np.float64)
    if lik is None or not same_floors(lik.data.c, cc):
        lik = theta_likelihood(ResponseData(correct, observed, domain_slices, guessing=cc))
    lik.set_items(np.asarray(a, dtype=np.float64), np.asarray(d, dtype=np.float64))
    g, info = lik.theta_derivs(np.asarray(centre, dtype=np.float64))
    i2 = np.maximum((info * info).sum(axis=0), 1e-12)
    g2 = g * g
    raw = (g2 - info).sum(axis=0) / i2
    if loadings is not None:
        W = np.asarray(loadings, dtype=np.float64).reshape(info.shape[1], -1)
        for _ in range(max_iter):
            p = np.maximum(raw, floor)
            lev = np.einsum("ik,km,im->ik", info / (1.0 + p * info), W**2, overall_spread(info, p, W))
            new = (g2 / (1.0 - np.clip(lev, 0.0, 0.9)) - info).sum(axis=0) / i2
            done = np.abs(new - raw).max() < 1e-7
            raw = new
            if done:
                break
    var = 2.0 * ((info + info * info * max(raw.mean(), 0.0)) ** 2).sum(axis=0) / i2**2
    var = np.maximum(var, 1e-12)
    if raw.size > 1:  # random-effects moments, unweighted: weights by precision (or variances at
        # each domain's own value) favour the domains whose moment happens to come out low
        mean = raw.mean()
        tau2 = max(0.0, raw.var(ddof=1) - var.mean())
        raw = mean + (raw - mean) * tau2 / (tau2 + var)
    psi = np.maximum(raw, floor)
    return (psi, info) if return_info else psi


def overall_spread(info, psi, loadings) -> np.ndarray:
    """Approximate posterior variances (``N x r``) of the shared traits given all domains.

    Each LLM's shared traits have the prior ``N(0, I)`` and, through domain
    ``k``, the information ``w_km^2 I_ik / (1 + psi_k I_ik)`` (the deviation
    integrated out, as in the centre's fit); the variance of factor ``m`` is
    the inverse of their sum plus 1 (the other factors held fixed).
    """
    eff = info / (1.0 + psi * info)
    return 1.0 / (eff @ (np.asarray(loadings) ** 2) + 1.0)


def draw_world(world: dict, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """One truth of an error bootstrap's world (``kind="world"``): ``(theta*, eta*[:, 0])``, the domain traits
    ``centre + (eta* - eta) W^T + sqrt(psi_k) z`` and the first shared trait ``eta*`` (module docstring)."""
    shift = rng.standard_normal(world["eta"].shape) * np.sqrt(world["eta_var"])
    truth = world["centre"] + shift @ world["loadings"].T
    truth = truth + rng.standard_normal(world["centre"].shape) * np.sqrt(world["psi"])
    return truth, world["eta"][:, 0] + shift[:, 0]


def map_in_workers(fn, args, *, n: int, n_jobs: int | None = None, desc: str = "replicates",
                   pre_dispatch: str = "2*n_jobs") -> list:
    """``[fn(*a) for a in args]`` (``n`` of them), in order, with a progress bar: on ``n_jobs`` worker
    processes (default: every core; 1: in this process). Workers are joblib's loky processes (large
    arrays shared by memory mapping, one BLAS thread each), which also work from scripts without an
    ``if __name__ == "__main__"`` guard and from notebooks; ``pre_dispatch`` bounds how many ``args``
    are drawn ahead of them. The replicates of the bootstrap and of the correlation check run here."""
    n_jobs = min(n_jobs or os.cpu_count() or 1, n)
    out: list = []
    with progress_bar(total=n, desc=desc) as bar:
        if n_jobs == 1:
            for a in args:
                out.append(fn(*a))
                bar.update(1)
            return out
        from joblib import Parallel, delayed

        with Parallel(n_jobs=n_jobs, backend="loky", return_as="generator", pre_dispatch=pre_dispatch,
                      inner_max_num_threads=1) as parallel:
            for r in parallel(delayed(_in_small_pages)(fn, *a) for a in args):
                out.append(r)
                bar.update(1)
    return out


def _in_small_pages(fn, *args):
    """``fn(*args)`` in a worker, numpy's huge-page advice off as in the parent (:mod:`mtlirt.memory`)."""
    with small_pages():
        return fn(*args)


def _one(b: int, state: dict):
    """Replicate ``b``: new answers (parametric, world) or resampled items, then the refit."""
    rng = np.random.default_rng(state["seeds"][b])
    p = state["point"]
    if state["kind"] == "parametric":
        y = draw_responses(p["theta"], p["a"], p["d"], p.get("c"), state["slices"], state["observed"], rng)
        obs = state["observed"]
    elif state["kind"] == "world":
        truth, overall = draw_world(p, rng)
        y = draw_responses(truth, p["a"], p["d"], p.get("c"), state["slices"], state["observed"], rng)
        res = state["refit"](y, state["observed"])
        res["world_theta"] = truth
        res["world_overall"] = overall
        return res
    else:
        y, obs = resample_items(state["correct"], state["observed"], state["slices"], rng)
    return state["refit"](y, obs)


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
        (N x K), ``psi`` (K deviation variances), ``eta`` (N x r shared
        traits), ``eta_var`` (N x r their variances), ``loadings`` (K x r,
        the slopes of the centre on ``eta``), ``a``, ``d``, ``c``.
    correct
        For ``kind="items"``: the observed answers, resampled by item within domain.
    n_jobs
        Worker processes (default: the number of cores); 1 runs in-process
        (:func:`map_in_workers`).

    Returns
    -------
    dict
        Each key of ``refit``'s result stacked over replicates (leading axis
        ``n``); with ``kind="world"`` also ``world_theta`` and
        ``world_overall``, each replicate's truth.
    """
    if n < 2:
        raise ValueError("a bootstrap needs at least 2 replicates")
    state = dict(kind=kind, refit=refit, seeds=np.random.SeedSequence(seed).spawn(n), slices=domain_slices,
                 observed=observed, point=point, correct=correct)
    results = map_in_workers(_one, ((b, state) for b in range(n)), n=n, n_jobs=n_jobs, desc=desc)
    keys = results[0].keys()
    return {k: np.stack([r[k] for r in results]) for k in keys}
