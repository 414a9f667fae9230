"""The predictive check of the cross-domain correlations (:func:`correlation_check`, the model checks of
:mod:`mtlirt.evaluate.checks`): the statistic on the data and on data sets replicated from the fit's world,
and every pair's predictive p-value."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..data.responses import Responses
from ..errors import InputError
from ..estimators.bootstrap import draw_responses, draw_world, map_in_workers
from ..estimators.correlation import error_corrected_corr, principal_axes
from ..estimators.error_world import error_world
from ..estimators.irt import fit_stl
from .check_inputs import ALPHA, _check_data, _item_model, _population_items, _two_sided


def correlation_statistic(responses: Responses, *, model: str = "2pl", guessing: float | None = None) -> np.ndarray:
    """The package's cross-domain correlation of a data set (``K x K``): single-domain fits
    (:func:`~mtlirt.estimators.irt.fit_stl`), their correlations corrected for measurement error.

    It is ``domain_correlation.csv``'s statistic. An LLM without responses
    in a domain (a leaderboard whose LLMs ran only some of its domains) has
    no score there, only the prior's 0 with the prior's standard error; each
    pair is correlated over the LLMs with responses in both domains and each
    domain's reliability, ``var / (var + mean se^2)`` of the scores, taken
    over the LLMs with responses in it (the same function as the fit's
    ``domain_correlation.csv``, :func:`~mtlirt.estimators.correlation.error_corrected_corr`).
    A pair with fewer than 3 LLMs in both domains reads 0."""
    res = fit_stl(responses, model=model, guessing=guessing)
    observed = responses.mask
    seen = None if observed is None else np.column_stack([observed[:, s].any(1) for s in responses.domain_slices])
    corr, _ = error_corrected_corr(res.theta, res.theta_se, seen)
    return np.nan_to_num(corr)


@dataclass
class CorrelationCheck:
    """Result of :func:`correlation_check`.

    Attributes
    ----------
    domains : list of str
    observed : numpy.ndarray
        ``K x K`` statistic of the data.
    replicated : numpy.ndarray
        ``R x K x K`` statistics of the replicated data sets.
    table : pandas.DataFrame
        One row per pair ``a < b``: ``domain_a, domain_b, observed,
        replicated_mean, replicated_lower, replicated_upper`` (the equal-tailed
        ``interval`` of the replicates), ``ppp`` (``P(replicated >=
        observed)``), ``p_value`` (two-sided), ``misfit`` (``p_value <
        alpha``).
    global_p : float
        Omnibus p-value: the share of replicates whose mean squared
        standardised distance from the replicates' mean, over all pairs, is at
        least the data's.
    world : str
        How the replicates were drawn.
    alpha, interval : float
    seconds : float
    """

    domains: list
    observed: np.ndarray
    replicated: np.ndarray
    table: pd.DataFrame
    global_p: float
    world: str
    alpha: float
    interval: float
    seconds: float

    @property
    def n_misfit(self) -> int:
        """Pairs flagged."""
        return int(self.table["misfit"].sum())

    def summary(self) -> dict:
        """Short JSON-ready record."""
        return {"pairs": len(self.table), "misfit_pairs": self.n_misfit, "alpha": self.alpha,
                "global_p": self.global_p, "replicates": int(self.replicated.shape[0]), "world": self.world,
                "seconds": self.seconds}


def _worlds(est, responses, n: int, rng: np.random.Generator, _observed: np.ndarray, world: str):
    """``(description, generator of (theta, a, d, c))`` of replicate worlds, or ``(reason, None)``."""
    method = est.method
    post = est.posterior
    if method == "bayes" or est.n_draws > 1:
        S = est.n_draws
        take = rng.choice(S, size=n, replace=S < n)
        a, d = est.draws("discrimination", source="posterior"), est.draws("intercept", source="posterior")
        c = est.draws("guessing", source="posterior") if "guessing" in post else np.zeros_like(a)
        if "eta" in post and "loadings" in post:
            eta, lam = est.draws("eta", source="posterior"), est.draws("loadings", source="posterior")

            def gen():
                for s in take:
                    psi = np.sqrt(np.clip(1.0 - (lam[s] ** 2).sum(-1), 1e-8, None))
                    z = rng.standard_normal((eta.shape[1], lam.shape[1]))
                    yield eta[s] @ lam[s].T + z * psi, a[s], d[s], c[s]

            return "posterior draws: the draw's overall traits and loadings, new domain deviations", gen()
        R = est.draws("domain_corr", source="posterior")

        def gen_corr():
            for s in take:
                w, v = np.linalg.eigh(R[s])
                L = v * np.sqrt(np.clip(w, 0.0, None))
                yield rng.standard_normal((post.sizes["llm"], R.shape[-1])) @ L.T, a[s], d[s], c[s]

        return "posterior draws: new traits N(0, R) with the draw's correlation matrix", gen_corr()
    if method not in ("mtl", "pooled"):
        return f"the {method} fit models no cross-domain structure", None
    a, d = _population_items(est)[:2]
    c = est.point("guessing") if "guessing" in post else np.zeros_like(a)
    eta = est.point("eta") if "eta" in post else est.point("overall")[:, None]
    eta = (eta - eta.mean(0)) / np.where(eta.std(0) > 1e-12, eta.std(0), 1.0)
    K = len(est.domains)
    if method == "pooled":  # every domain trait is the overall trait
        lam, psi = np.ones((K, 1)), np.zeros(K)
        eta = eta[:, :1]
        what = "the pooled model: every domain trait is the fit's overall score"
    elif world == "estimate":
        return _error_world(est, responses, n, rng)
    else:
        r = eta.shape[1]
        theta = est.point("theta")
        X = np.column_stack([np.ones(len(eta)), eta])
        W = np.linalg.lstsq(X, theta, rcond=None)[0][1:].T  # K x r: the scores' slopes on the overall traits
        lam = principal_axes(_observed, r)
        u, _, vt = np.linalg.svd(lam.T @ W)  # rotate the loadings onto the fit's overall traits
        lam = lam @ (u @ vt)
        psi = np.clip(1.0 - (lam**2).sum(1), 0.0, 1.0)
        what = (f"the fit's structure: its overall scores, rank-{r} loadings and deviation spreads fitted to "
                "the observed correlations (principal axes)")

    def gen():
        for _ in range(n):
            yield eta @ lam.T + rng.standard_normal((len(eta), K)) * np.sqrt(psi), a, d, c

    return what, gen()


def _error_world(est, responses, n, rng):
    """The fit's error-bootstrap world (:func:`mtlirt.estimators.error_world.error_world`, the one its bootstrap draws
    from), rebuilt from what the estimate records: its centre, overall traits, items, population scale
    and cells without responses."""
    post = est.posterior
    if "centre" not in post:
        raise InputError("this MTL fit records no centre (an older fit folder): refit it to check it "
                         "against its error bootstrap's world")
    variant = est.info.get("settings", {}).get("variant", "default")
    c = est.point("guessing")
    arr = {"theta": est.point("theta"), "overall": est.point("overall"), "centre": est.point("centre"),
           "eta": est.point("eta") if "eta" in post else None, "a": est.point("discrimination"),
           "d": est.point("intercept"), "c": c if variant == "default" else None}
    empty = est.predicted
    w = error_world(responses, arr, method="mtl", variant=variant, pop=est.info.get("population_scale"),
                    empty=np.zeros(arr["theta"].shape, dtype=bool) if empty is None else empty)
    c = np.zeros_like(w["a"]) if w["c"] is None else w["c"]

    def gen():
        for _ in range(n):
            yield draw_world(w, rng)[0], w["a"], w["d"], c

    what = ("MTL's error-bootstrap world: its centre, overall traits redrawn around the fitted ones, deviations "
            "with each domain's spread by moments") if variant == "default" else (
            f"the {variant} variant's error-bootstrap world: the paper's model around the fit")
    return what, gen()


def _statistic_of(y, responses, model, guessing) -> np.ndarray:
    """:func:`correlation_statistic` of ``responses`` with the answers ``y`` (one replicate)."""
    return correlation_statistic(responses.with_answers(y, responses.mask), model=model, guessing=guessing)


def correlation_check(est, responses, *, n_replicates: int = 100, seed: int = 0, alpha: float = ALPHA,
                      interval: float = 0.9, world: str = "structure",
                      n_jobs: int | None = None) -> CorrelationCheck | None:
    """Predictive check of the cross-domain correlation matrix (module docstring).

    Parameters
    ----------
    est : Estimate
    responses : Responses
        The fit's data.
    n_replicates : int
        Replicated data sets (each costs one single-domain fit).
    seed : int
    alpha : float
        A pair is flagged when its two-sided p-value is below ``alpha``.
    interval : float
        Mass of the replicates' interval in the table.
    world : {"structure", "estimate"}
        MTL only: replicate from the fit's structure (default: its overall
        scores, loadings and deviation spreads fitted to the observed
        correlations at the fit's rank) or from its error bootstrap's world.
    n_jobs : int, optional
        Worker processes that refit the replicates (default: every core; 1
        in this process); the numbers do not depend on it.

    Returns
    -------
    CorrelationCheck or None
        None for fits that model no cross-domain structure (STL, accuracy)
        or with a single domain.
    """
    check_replicates(n_replicates)
    _check_data(est, responses)
    if responses.n_domains < 2:
        return None
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    if est.n_draws < 2 and est.method not in ("mtl", "pooled", "bayes"):
        return None
    model, guessing = _item_model(est)
    obs = correlation_statistic(responses, model=model, guessing=guessing)
    what, worlds = _worlds(est, responses, n_replicates, rng, obs, world)
    if worlds is None:
        return None
    answers = (draw_responses(theta, a, d, c if np.any(c > 0) else None, responses.domain_slices, responses.mask, rng)
               for theta, a, d, c in worlds)  # drawn in order in this process: the same seed, the same replicates
    # a few replicates drawn ahead of the workers at most; a replicate's single-domain fits give the same
    # numbers in any process and on any number of threads
    rep = np.stack(map_in_workers(_statistic_of, ((y, responses, model, guessing) for y in answers), n=n_replicates,
                                  n_jobs=n_jobs, desc="correlation check", pre_dispatch="n_jobs"))
    K = obs.shape[0]
    ia, ib = np.triu_indices(K, 1)
    o, r = obs[ia, ib], rep[:, ia, ib]
    upper, p = _two_sided(r, o)
    lo = (1 - interval) / 2
    q = np.quantile(r, [lo, 1 - lo], axis=0)
    names = list(est.domains)
    table = pd.DataFrame({
        "domain_a": [names[i] for i in ia], "domain_b": [names[j] for j in ib], "observed": o,
        "replicated_mean": r.mean(0), "replicated_lower": q[0], "replicated_upper": q[1],
        "ppp": upper, "p_value": p, "misfit": p < alpha,
    })
    mu, sd = r.mean(0), np.maximum(r.std(0), 1e-3)
    D_obs = np.mean(((o - mu) / sd) ** 2)
    D_rep = np.mean(((r - mu) / sd) ** 2, axis=1)
    return CorrelationCheck(domains=names, observed=obs, replicated=rep, table=table,
                            global_p=float(np.mean(D_rep >= D_obs)), world=what, alpha=alpha, interval=interval,
                            seconds=time.perf_counter() - t0)


def check_replicates(n_replicates) -> None:
    """The correlation check's replicated data sets: an integer of at least 2. Checked by
    :func:`correlation_check` and :func:`~mtlirt.evaluate.checks.run_checks`, and by ``mtlirt fit --checks``
    before it fits."""
    if isinstance(n_replicates, bool) or not isinstance(n_replicates, (int, np.integer)) or n_replicates < 2:
        raise InputError(f"n_replicates (--check-replicates) must be an integer of at least 2, got {n_replicates!r}")
