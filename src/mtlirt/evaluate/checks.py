"""Model checks: does a fitted model reproduce the data it was fitted to?

Three checks, each for the kinds of fit where it makes sense (a point
estimate is a posterior with one draw); ``docs/checks.md`` says what each
one measures, how to read it, and what it cost on which data.

Cross-domain correlations (:func:`correlation_check`)
    A predictive check of the correlation matrix. The statistic is the one
    the package reports in ``domain_correlation.csv`` for its point fits: the
    single-domain (STL) scores' correlations corrected for their measurement
    error (:mod:`mtlirt.estimators.correlation`). It is computed on the data
    and on replicated data sets drawn from the fitted model, each refitted by
    STL with the fit's item model, and every pair gets a posterior predictive
    p-value. The replicates draw *new domain deviations*, so that they follow
    the model's correlation structure rather than the fitted scores (which
    carry the data's own correlations wherever a domain is long):

    * Bayesian factor models: per posterior draw, ``theta = Lambda eta +
      psi z`` with the draw's overall traits ``eta``, loadings ``Lambda`` and
      ``psi = sqrt(1 - |Lambda|^2)``, fresh ``z ~ N(0, 1)``, and the draw's
      items; the correlated (LKJ) model: new traits ``N(0, R)`` with the
      draw's correlation matrix ``R``;
    * MTL (and the paper's variants): the fit's structure (its overall
      scores, with loadings and deviation spreads fitted to the observed
      correlations at its rank), or with ``world="estimate"`` the very world
      its error bootstrap draws from (:func:`mtlirt.fitting.error_world`):
      the fit's centre, overall traits redrawn around the fitted ones with
      their approximate posterior variances, deviations with each domain's
      spread estimated from the data
      (:func:`~mtlirt.estimators.bootstrap.deviation_spread`);
    * pooled: the same world with no deviations (the pooled model says every
      domain trait is the overall trait);
    * STL and accuracy model no cross-domain structure: no check.

Item fit (:func:`item_fit`)
    Orlando and Thissen's (2000) S-X2 per item (for posteriors also its
    posterior predictive version, :func:`item_fit_ppc`), as ``mirt::itemfit`` computes
    it: the LLMs are grouped by their summed score in the item's domain; the
    observed proportion correct in each group is compared with the model's,
    ``E_js = int P_j(t) f_-j(s-1 | t) phi(t) dt / int f(s | t) phi(t) dt``
    (``f`` the summed-score distribution by the Lord-Wingersky recursion,
    ``f_-j`` without item ``j``, ``phi`` the population ``N(0, 1)`` on the
    items' population scale), groups with an expected count below
    ``min_expected`` merged with their neighbours, ``df`` = groups minus the
    item's free parameters. The answers an LLM left out of a domain it ran
    are imputed from the model (several times, the statistic averaged, as
    ``mirt::itemfit(impute=)`` does). For fits with item parameters: MTL,
    STL, pooled, the paper's variants and Bayes
    (fixed items; for jointly sampled items the posterior means are used).

Leave-one-LLM-out (:func:`loo_llm`)
    PSIS-LOO (``arviz.loo``) of a Bayesian factor-model fit with one
    observation per LLM: the marginal likelihood of all of the LLM's
    responses, its domain traits integrated out (and its overall trait too,
    by default where that is cheap: rank 1 or 2) by adaptive Gauss-Hermite
    quadrature around each LLM's posterior. Conditional on its own traits an
    LLM's log-likelihood moves with parameters only its own data inform, and
    importance sampling fails (Pareto k above 0.7 for most LLMs); integrated
    out, it depends on the shared parameters only.

:func:`run_checks` runs whichever checks apply; :meth:`ModelChecks.summary`
is the short record that goes into ``fit.json``'s diagnostics
(:meth:`ModelChecks.record`).
"""

from __future__ import annotations

import json
import time
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..errors import InputError
from ..estimators.bootstrap import draw_responses, draw_world
from ..estimators.correlation import error_corrected_corr, principal_axes
from ..estimators.irt import fit_stl
from ..estimators.response_data import to_internal
from ..numerics.llm_side import (
    EPS,
    curves,
    gauss_hermite,
    grid_loglik,
    log_curves,
    node_loglik,
    normal_log_weights,
    posterior,
)

__all__ = [
    "CorrelationCheck",
    "LooCheck",
    "ModelChecks",
    "correlation_check",
    "correlation_statistic",
    "item_fit",
    "item_fit_ppc",
    "llm_marginal_loglik",
    "loo_llm",
    "run_checks",
    "sx2_expected",
]

#: Default significance level of the misfit flags.
ALPHA = 0.05


# ---------------------------------------------------------------------------
# building blocks
# ---------------------------------------------------------------------------


def _check_data(est, responses) -> None:
    """The responses must be the fit's data (same LLMs, items, domains, in order)."""
    ok = (list(map(str, responses.llms)) == list(est.llms) and list(map(str, responses.items)) == list(est.items)
          and list(map(str, responses.domains)) == list(est.domains))
    if not ok:
        raise InputError("the responses are not the data of this fit (LLMs, items or domains differ); "
                         "pass the table the fit was made from")


def _spec(est):
    """The Bayesian spec of a fit (None for other methods)."""
    raw = est.tree["posterior"].attrs.get("mtlirt_spec_json")
    if raw is None:
        return None
    from ..bayes.spec import load_spec

    return load_spec(json.loads(raw) if isinstance(raw, str) else raw)


def _item_model(est) -> tuple[str, float | np.ndarray | None]:
    """``(model, guessing)`` of the single-domain refits of the correlation statistic:
    the fit's own item model (a Bayesian spec's 3PL floor as a fixed guessing, floors the
    fit estimated or decided, ``"estimate"`` or ``"auto"``, as the fitted ones fixed)."""
    spec = _spec(est)
    if spec is not None:  # the spec's item model, an estimated floor held at its prior's mean
        model, guessing = spec.point_item_model
        return model, float(spec.priors.guessing_mean) if guessing == "estimate" else guessing
    s = est.info.get("settings", {})
    g = s.get("guessing")
    if isinstance(g, str):
        c = est.point("guessing") if "guessing" in est.posterior else None
        return str(s.get("model", "2pl")), None if c is None or not np.any(c > 0) else np.asarray(c, float)
    return str(s.get("model", "2pl")), None if g is None else float(g)


def _n_item_parameters(est) -> int:
    """Free parameters of one item: 1 (1PL), 2 (2PL, 3PL with fixed guessing), 3 (estimated guessing)."""
    spec = _spec(est)
    if spec is not None:
        if spec.item_model == "1pl":
            return 1
        return 3 if spec.item_model == "3pl" and spec.estimate_guessing else 2
    return 1 if est.info.get("settings", {}).get("model") == "1pl" else 2


def _population_items(est) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Item parameters (posterior means) on the scale where every domain trait is ``N(0, 1)``
    over the population: the item calibration's scale (``info["population_scale"]``) when the
    fit records it, else the reported one (Bayesian fits are on it already)."""
    a = est.point("discrimination")
    d = est.point("intercept")
    c = est.point("guessing") if "guessing" in est.posterior else np.zeros_like(a)
    pop = est.info.get("population_scale")
    if pop is not None:
        loc, scale = np.asarray(pop["loc"], float), np.asarray(pop["scale"], float)
        _, a, d = to_internal(np.zeros((1, len(loc))), a, d, loc, scale, est.item_domain)
    return a, d, c


def _two_sided(rep: np.ndarray, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``P(rep >= obs)`` and the two-sided ``min(1, 2 min(P(rep >= obs), P(rep <= obs)))``."""
    upper = (rep >= obs[None]).mean(0)
    lower = (rep <= obs[None]).mean(0)
    return upper, np.minimum(1.0, 2.0 * np.minimum(upper, lower))


def _bh(p: np.ndarray) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values (NaN stay NaN)."""
    p = np.asarray(p, float)
    q = np.full_like(p, np.nan)
    ok = np.isfinite(p)
    m = int(ok.sum())
    if not m:
        return q
    pv = p[ok]
    order = np.argsort(pv)
    ranked = pv[order] * m / np.arange(1, m + 1)
    ranked = np.minimum.accumulate(ranked[::-1])[::-1]
    out = np.empty(m)
    out[order] = np.minimum(ranked, 1.0)
    q[ok] = out
    return q


# ---------------------------------------------------------------------------
# cross-domain correlations
# ---------------------------------------------------------------------------


def correlation_statistic(correct, observed, domain_slices, *, model: str = "2pl",
                          guessing: float | None = None) -> np.ndarray:
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
    res = fit_stl(correct, observed, domain_slices, model=model, guessing=guessing)
    seen = None if observed is None else np.column_stack([observed[:, s].any(1) for s in domain_slices])
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
    """The fit's error-bootstrap world (:func:`mtlirt.fitting.error_world`, the one its bootstrap draws
    from), rebuilt from what the estimate records: its centre, overall traits, items, population scale
    and cells without responses."""
    from ..fitting import error_world

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


def correlation_check(est, responses, *, n_replicates: int = 100, seed: int = 0, alpha: float = ALPHA,
                      interval: float = 0.9, world: str = "structure") -> CorrelationCheck | None:
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
    slices = responses.domain_slices
    obs = correlation_statistic(responses.correct, responses.mask, slices, model=model, guessing=guessing)
    what, worlds = _worlds(est, responses, n_replicates, rng, obs, world)
    if worlds is None:
        return None
    reps = []
    for theta, a, d, c in worlds:
        y = draw_responses(theta, a, d, c if np.any(c > 0) else None, slices, responses.mask, rng)
        reps.append(correlation_statistic(y, responses.mask, slices, model=model, guessing=guessing))
    rep = np.stack(reps)
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


# ---------------------------------------------------------------------------
# item fit: S-X2
# ---------------------------------------------------------------------------


def _nodes(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Trapezoid nodes on [-6, 6] and weights of the ``N(0, 1)`` population.

    The step is 0.8 / sqrt(the largest information of the summed score,
    ``sum a^2 / 4``), at most 0.1: the integrands are about as narrow as the
    posterior of a trait given its summed score, and the trapezoid rule on a
    Gaussian of sd ``sigma`` with step ``sigma`` errs by about 5e-9."""
    info = float(np.sum(np.asarray(a, float) ** 2)) / 4.0
    h = min(0.1, 0.8 / np.sqrt(max(info, 1e-12)))
    x = np.linspace(-6.0, 6.0, int(np.ceil(12.0 / h)) + 1)
    return x, np.exp(normal_log_weights(x))


def sx2_expected(a, d, c=None, *, nodes: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Model-implied proportions correct of every item by summed score, for one domain.

    Parameters
    ----------
    a, d, c : ndarray (J,)
        Items on the population scale (traits ``N(0, 1)``).
    nodes : (x, w), optional
        Quadrature nodes and weights of the population (default :func:`_nodes`).

    Returns
    -------
    expected : ndarray (J, J + 1)
        ``E[j, s]``: probability that item ``j`` is correct given the summed
        score ``s`` (NaN at ``s = 0`` and ``s = J``, where it is 0 and 1).
    score_prob : ndarray (J + 1,)
        The marginal probability of each summed score.
    """
    a, d = np.asarray(a, float), np.asarray(d, float)
    c = np.zeros_like(a) if c is None else np.asarray(c, float)
    x, w = nodes if nodes is not None else _nodes(a)
    J, Q = len(a), len(x)
    P = np.clip(curves(a, d, c, x), EPS, 1 - EPS)
    f = np.zeros((J + 1, Q))
    f[0] = 1.0
    for j in range(J):  # Lord-Wingersky
        f[1:j + 2] = f[1:j + 2] * (1 - P[j]) + f[:j + 1] * P[j]
        f[0] *= 1 - P[j]
    den = f @ w
    num = np.zeros((J, J + 1))
    # leave item j out by deconvolution, forward where P <= 1/2 and backward elsewhere (both stable:
    # every step divides by at least 1/2); num[j, s] = sum_q w_q P_jq f_-j(s - 1 | x_q)
    fwd = P <= 0.5
    Pw = P * w[None, :]
    g = np.zeros((J, Q))
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        for s in range(J):
            g = (f[s][None, :] - P * g) / (1 - P)
            g = np.where(fwd, np.maximum(g, 0.0), 0.0)
            num[:, s + 1] += (Pw * g).sum(1)
        g = np.zeros((J, Q))
        for s in range(J, 0, -1):  # g = f_-j(s - 1) from f(s) and f_-j(s)
            g = (f[s][None, :] - (1 - P) * g) / P
            g = np.where(fwd, 0.0, np.maximum(g, 0.0))
            num[:, s] += (Pw * g).sum(1)
    with np.errstate(invalid="ignore", divide="ignore"):
        E = num / den[None, :]
    E[:, 0] = np.nan
    E[:, J] = np.nan
    return E, den


def _collapse(n: np.ndarray, o: np.ndarray, e: np.ndarray, min_expected: float):
    """Merge adjacent score groups until each has expected counts of correct and of wrong
    answers of at least ``min_expected`` (a short last run joins the group before it)."""
    groups = []
    acc = [0.0, 0.0, 0.0]
    for ni, oi, ei in zip(n, o, e):
        acc[0] += ni
        acc[1] += oi
        acc[2] += ei
        if acc[2] >= min_expected and acc[0] - acc[2] >= min_expected:
            groups.append(acc)
            acc = [0.0, 0.0, 0.0]
    if acc[0] > 0:
        if groups:
            groups[-1] = [x + y for x, y in zip(groups[-1], acc)]
        else:
            groups.append(acc)
    return np.array(groups, dtype=float).reshape(-1, 3)


def _sx2_block(y: np.ndarray, E: np.ndarray, n_par: int, min_expected: float):
    """S-X2, df, groups and the model's proportion correct of every item of one complete block
    ``y`` (n x J) given the expected proportions ``E`` (J x J+1) of :func:`sx2_expected`."""
    N, J = y.shape
    S = y.sum(1)
    Ns = np.bincount(S, minlength=J + 1).astype(float)
    Os = np.zeros((J, J + 1))
    np.add.at(Os.T, S, y)  # Os[j, s]: correct answers to item j in score group s
    inner = slice(1, J)
    sx2, df, groups, expected = np.full(J, np.nan), np.zeros(J, int), np.zeros(J, int), np.full(J, np.nan)
    for j in range(J):
        g = _collapse(Ns[inner], Os[j, inner], np.nan_to_num(E[j, inner]) * Ns[inner], min_expected)
        g = g[g[:, 0] > 0]
        groups[j] = len(g)
        df[j] = len(g) - n_par
        if len(g):
            nn, oo, ee = g.T
            with np.errstate(divide="ignore", invalid="ignore"):
                sx2[j] = float(np.nansum((oo - ee) ** 2 / (ee * (1 - ee / nn))))
            expected[j] = (ee.sum() + Ns[J]) / N
    return sx2, df, groups, expected


def _impute(y: np.ndarray, obs: np.ndarray, a, d, c, rng: np.random.Generator, n_nodes: int = 121) -> np.ndarray:
    """One completion of a block: each row's trait drawn from its posterior given its observed
    answers (``N(0, 1)`` population, on a grid), its missing answers drawn from the model."""
    x = np.linspace(-6.0, 6.0, n_nodes)
    P = curves(a, d, c, x)
    L = grid_loglik((y * obs).astype(float), obs.astype(float), *log_curves(P))
    cdf = np.cumsum(posterior(L, -0.5 * x**2)[0], 1)
    node = (cdf < rng.random(len(y))[:, None] * cdf[:, -1:]).sum(1)
    draw = (rng.random(y.shape) < P[:, node].T).astype(y.dtype)
    return np.where(obs, y, draw)


def item_fit(est, responses, *, alpha: float = ALPHA, min_expected: float = 1.0, impute: int = 5,
             seed: int = 0) -> pd.DataFrame | None:
    """S-X2 item fit of every item (module docstring).

    Parameters
    ----------
    est : Estimate
        A fit with item parameters.
    responses : Responses
        The fit's data.
    alpha : float
        Items with a Benjamini-Hochberg adjusted p-value below ``alpha`` are
        flagged (``misfit``).
    min_expected : float
        Smallest expected count of correct and of wrong answers in a score group.
    impute : int
        LLMs that answered only part of a domain: their missing answers in it
        are imputed this many times (each LLM's trait drawn from its posterior
        given its observed answers, the answers from the model) and the S-X2
        averaged over the completed data sets, as ``mirt::itemfit(impute=)``
        does; 0 uses the LLMs that answered the whole domain only. LLMs without
        any answer in a domain are left out of it either way.
    seed : int
        Seed of the imputations.

    Returns
    -------
    pandas.DataFrame or None
        ``item, domain, n`` (LLMs used), ``imputed`` (share of the used
        answers that were imputed), ``groups, s_x2, df, p_value, q_value``
        (BH), ``misfit``, and ``observed`` / ``expected`` (proportion correct
        among the LLMs used: observed answers only, and the model's). None for
        the accuracy baseline (no item model).
    """
    from scipy.stats import chi2

    _check_data(est, responses)
    if est.method == "accuracy":
        return None
    a, d, c = _population_items(est)
    n_par = _n_item_parameters(est)
    rng = np.random.default_rng(seed)
    rows = []
    for k, sl in enumerate(responses.domain_slices):
        J = sl.stop - sl.start
        y = responses.correct[:, sl].astype(np.int64)
        obs = np.ones(y.shape, bool) if responses.mask is None else responses.mask[:, sl]
        keep = obs.all(1) if impute <= 0 else obs.any(1)
        y, obs = y[keep], obs[keep]
        N = len(y)
        partial = not obs.all()
        sx2, df, groups, expected = np.full(J, np.nan), np.zeros(J, int), np.zeros(J, int), np.full(J, np.nan)
        if J >= 2 and N > 0:
            E, _ = sx2_expected(a[sl], d[sl], c[sl])
            if not partial:
                sx2, df, groups, expected = _sx2_block(y, E, n_par, min_expected)
            else:
                runs = [_sx2_block(_impute(y, obs, a[sl], d[sl], c[sl], rng), E, n_par, min_expected)
                        for _ in range(impute)]
                sx2 = np.mean([r[0] for r in runs], axis=0)
                df = np.rint(np.mean([r[1] for r in runs], axis=0)).astype(int)
                groups = np.rint(np.mean([r[2] for r in runs], axis=0)).astype(int)
                expected = np.mean([r[3] for r in runs], axis=0)
        with np.errstate(invalid="ignore", divide="ignore"):
            observed = (y * obs).sum(0) / obs.sum(0)
        share_imputed = 1.0 - obs.mean() if N else 0.0
        for j in range(J):
            df_j = int(df[j])
            ok = df_j > 0 and np.isfinite(sx2[j])
            rows.append({"item": responses.items[sl.start + j], "domain": responses.domains[k], "n": N,
                         "imputed": float(share_imputed), "groups": int(groups[j]),
                         "s_x2": float(sx2[j]) if ok else np.nan, "df": df_j,
                         "p_value": float(chi2.sf(sx2[j], df_j)) if ok else np.nan,
                         "observed": float(observed[j]) if N else np.nan, "expected": float(expected[j])})
    out = pd.DataFrame(rows)
    out["item"] = out["item"].astype(str)
    out["domain"] = out["domain"].astype(str)
    out["q_value"] = _bh(out["p_value"].to_numpy())
    out["misfit"] = out["q_value"] < alpha
    return out[["item", "domain", "n", "imputed", "groups", "s_x2", "df", "p_value", "q_value", "misfit",
                "observed", "expected"]]


def item_fit_ppc(est, responses, *, n_draws: int = 50, seed: int = 0, min_expected: float = 1.0) -> pd.DataFrame | None:
    """Posterior predictive S-X2: for each of ``n_draws`` posterior draws, the S-X2 of the data
    and of answers replicated from the draw (its traits and items), both at the draw's items;
    ``ppp = P(S-X2(replicated) >= S-X2(data))`` per item. Answers missing inside a domain an LLM
    ran are completed from the same draw in both. A point estimate is one draw (``ppp`` 0 or 1).

    Returns
    -------
    pandas.DataFrame or None
        ``item, domain, s_x2_data, s_x2_replicated`` (means over the draws), ``ppp``; None for
        the accuracy baseline.
    """
    _check_data(est, responses)
    if est.method == "accuracy":
        return None
    n_par = _n_item_parameters(est)
    rng = np.random.default_rng(seed)
    S = est.n_draws
    take = np.sort(rng.choice(S, size=min(n_draws, S), replace=False))
    theta, a_all, d_all, c_all = est.item_model_draws()
    # replicates from the reported scores and items; the expected proportions on the population
    # scale (a point fit's items mapped there; a posterior's items are on it)
    fixed = all(np.ptp(v, axis=0).max() == 0 for v in (a_all, d_all, c_all))
    J = responses.n_items
    obs_all = np.ones((responses.n_llms, J), bool) if responses.mask is None else responses.mask
    sx_d, sx_r, exceed = np.zeros(J), np.zeros(J), np.zeros(J)
    cache: dict = {}
    for s in take:
        a, d, c = a_all[s], d_all[s], c_all[s]
        rep = draw_responses(theta[s], a, d, c if np.any(c > 0) else None, responses.domain_slices, None, rng)
        for k, sl in enumerate(responses.domain_slices):
            if sl.stop - sl.start < 2:
                continue
            obs = obs_all[:, sl]
            rows = obs.any(1)
            key = k if fixed else (k, s)
            if key not in cache:
                E, _ = sx2_expected(a[sl], d[sl], c[sl]) if S > 1 or est.info.get("population_scale") is None \
                    else sx2_expected(*(v[sl] for v in _population_items(est)))
                cache[key] = E
            E = cache[key]
            y_rep = rep[rows][:, sl].astype(np.int64)
            y_dat = np.where(obs[rows], responses.correct[rows][:, sl], y_rep).astype(np.int64)
            if not fixed:
                cache.pop(key)
            t_d = _sx2_block(y_dat, E, n_par, min_expected)[0]
            t_r = _sx2_block(y_rep, E, n_par, min_expected)[0]
            sx_d[sl] += np.nan_to_num(t_d)
            sx_r[sl] += np.nan_to_num(t_r)
            exceed[sl] += np.nan_to_num(t_r) >= np.nan_to_num(t_d)
    m = len(take)
    return pd.DataFrame({"item": [str(x) for x in responses.items],
                         "domain": [str(responses.domains[k]) for k in responses.item_domain],
                         "s_x2_data": sx_d / m, "s_x2_replicated": sx_r / m, "ppp": exceed / m})


# ---------------------------------------------------------------------------
# leave one LLM out
# ---------------------------------------------------------------------------


def llm_marginal_loglik(est, responses, *, integrate_overall: bool = True, n_theta_nodes: int = 32,
                        n_eta_nodes: int = 12, max_draws: int = 400, max_elems: float = 2e7) -> dict:
    """Per draw and LLM, the log-likelihood of all of the LLM's responses with its domain traits
    (and, with ``integrate_overall``, its overall traits) integrated out.

    Adaptive Gauss-Hermite quadrature: the domain trait of cell ``(i, k)`` on
    ``n_theta_nodes`` nodes around its posterior mean with its posterior sd,
    the overall traits on ``n_eta_nodes`` per factor around theirs; with the
    draw's loadings ``Lambda`` and ``psi = sqrt(1 - |Lambda|^2)``::

        log p(y_i | eta_i, draw) = sum_k log int exp(l_ik(t)) N(t; Lambda_k eta_i, psi_k^2) dt
        log p(y_i | draw)        = log int p(y_i | eta, draw) N(eta; 0, I) d eta

    Cells without responses contribute 0.

    Returns
    -------
    dict
        ``loglik`` (chain, draw', llm) over the draws kept (every ``t``-th
        draw of each chain, at most ``max_draws`` in all), ``draws`` (their
        indices), ``overall_integrated`` (bool).
    """
    post = est.posterior
    if "eta" not in post or "loadings" not in post:
        raise InputError("the leave-one-LLM-out check needs a factor-model fit (overall traits and loadings)")
    C, D = post.sizes["chain"], post.sizes["draw"]
    step = max(1, int(np.ceil(C * D / max_draws)))
    keep = np.arange(0, D, step)
    th_all, eta_all, lam, a_all, d_all = (est.draws(v, source="posterior", by_chain=True).astype(np.float64)
                                          for v in ("theta", "eta", "loadings", "discrimination", "intercept"))
    c_all = est.draws("guessing", source="posterior", by_chain=True) if "guessing" in post else np.zeros_like(a_all)
    theta, eta, lam, a_all, d_all, c_all = (v[:, keep] for v in (th_all, eta_all, lam, a_all, d_all, c_all))
    Dk = len(keep)
    N, K = theta.shape[2:]
    r = eta.shape[-1]
    mu = th_all.mean((0, 1))
    sd = np.maximum(th_all.std((0, 1)), 0.02)
    xq, lwq = gauss_hermite(n_theta_nodes)
    nodes = mu[..., None] + sd[..., None] * xq  # N K Q
    # importance form: int f(t) dt = sum_q w_q f(t_q) / N(x_q; 0, 1) / sd
    lbase = lwq + 0.5 * xq**2 + 0.5 * np.log(2 * np.pi)  # Q
    lsd = np.log(sd)
    empty = np.zeros((N, K), bool)
    if responses.mask is not None:
        empty = np.column_stack([~responses.mask[:, s].any(1) for s in responses.domain_slices])
    fixed = all(np.ptp(v.reshape(-1, v.shape[-1]), axis=0).max() == 0 for v in (a_all, d_all, c_all))
    L = None
    if fixed:
        L = node_loglik(responses.correct, responses.mask, responses.domain_slices, a_all[0, 0], d_all[0, 0],
                        c_all[0, 0], nodes, max_elems=max_elems)

    def cell_terms(Ln, m, psi):
        """log int exp(l(t)) N(t; m, psi^2) dt per cell; m (..., N, K), psi (K,)."""
        e = (Ln + lbase - 0.5 * ((nodes - m[..., None]) / psi[:, None]) ** 2
             - np.log(psi)[:, None] - 0.5 * np.log(2 * np.pi))
        mx = e.max(-1)
        out = mx + np.log(np.exp(e - mx[..., None]).sum(-1)) + lsd
        return np.where(empty, 0.0, out)

    overall = integrate_overall and r <= 2
    if overall:
        xe, lwe = gauss_hermite(n_eta_nodes)
        grids = np.stack(np.meshgrid(*([xe] * r), indexing="ij"), -1).reshape(-1, r)  # P r
        lw_grid = np.stack(np.meshgrid(*([lwe] * r), indexing="ij"), -1).reshape(-1, r).sum(-1)
        nu = eta_all.mean((0, 1))  # N r
        tau = np.maximum(eta_all.std((0, 1)), 0.02)
        eta_nodes = nu[:, None, :] + tau[:, None, :] * grids[None]  # N P r
        # importance form against N(nu, tau^2) per factor, prior N(0, I)
        lprior = -0.5 * (eta_nodes**2).sum(-1) + 0.5 * (grids**2).sum(-1)[None] + np.log(tau).sum(-1)[:, None]
        lweta = lw_grid[None] + lprior  # N P
    out = np.empty((C, Dk, N))
    for ch in range(C):
        for t in range(Dk):
            Ln = L if fixed else node_loglik(responses.correct, responses.mask, responses.domain_slices,
                                             a_all[ch, t], d_all[ch, t], c_all[ch, t], nodes, max_elems=max_elems)
            lm = lam[ch, t]
            psi = np.sqrt(np.clip(1.0 - (lm**2).sum(-1), 1e-8, None))
            if not overall:
                out[ch, t] = cell_terms(Ln, eta[ch, t] @ lm.T, psi).sum(-1)
                continue
            P = eta_nodes.shape[1]
            per = max(1, int(max_elems // max(N * K * n_theta_nodes, 1)))
            acc = np.empty((N, P))
            for p0 in range(0, P, per):
                ps = slice(p0, min(P, p0 + per))
                m = np.einsum("npr,kr->pnk", eta_nodes[:, ps], lm)  # p N K
                acc[:, ps] = cell_terms(Ln[None], m, psi).sum(-1).T
            e = acc + lweta
            mx = e.max(-1)
            out[ch, t] = mx + np.log(np.exp(e - mx[:, None]).sum(-1))
    return {"loglik": out, "draws": keep, "overall_integrated": bool(overall)}


@dataclass
class LooCheck:
    """Result of :func:`loo_llm`.

    Attributes
    ----------
    elpd : arviz ELPDData
        ``arviz.loo``'s result (pointwise).
    table : pandas.DataFrame
        Per LLM: ``llm, elpd_loo, pareto_k, k_ok`` (``pareto_k <= good_k``).
    good_k : float
        ArviZ's threshold of a reliable importance-sampling estimate.
    overall_integrated : bool
        Whether the overall traits were integrated out too.
    n_draws : int
    seconds : float
    """

    elpd: Any
    table: pd.DataFrame
    good_k: float
    overall_integrated: bool
    n_draws: int
    seconds: float

    def summary(self) -> dict:
        """Short JSON-ready record."""
        e = self.elpd
        return {"elpd_loo": float(e.elpd), "se": float(e.se), "p_loo": float(e.p),
                "llms": len(self.table), "high_k": int((~self.table["k_ok"]).sum()),
                "max_k": float(self.table["pareto_k"].max()), "good_k": self.good_k,
                "overall_integrated": self.overall_integrated, "draws": self.n_draws, "seconds": self.seconds}


def loo_llm(est, responses, *, integrate_overall: bool = True, max_draws: int = 400, **quadrature) -> LooCheck | None:
    """PSIS-LOO with one observation per LLM on its marginal likelihood (module docstring).

    Parameters
    ----------
    est : Estimate
        A Bayesian factor-model fit with several draws.
    responses : Responses
        The fit's data.
    integrate_overall : bool
        Integrate each LLM's overall traits out too (rank 1 or 2); else they
        are given (conditional on the draw).
    max_draws : int
        Posterior draws used at most (every ``t``-th draw of each chain).
    **quadrature
        ``n_theta_nodes``, ``n_eta_nodes`` of :func:`llm_marginal_loglik`.

    Returns
    -------
    LooCheck or None
        None for point fits and models without overall traits.
    """
    _check_data(est, responses)
    post = est.posterior
    if est.n_draws < 2 or "eta" not in post or "loadings" not in post:
        return None
    import arviz as az
    import xarray as xr

    t0 = time.perf_counter()
    ml = llm_marginal_loglik(est, responses, integrate_overall=integrate_overall, max_draws=max_draws,
                             **quadrature)
    ll = ml["loglik"]
    C, Dk, N = ll.shape
    coords = {"chain": np.arange(C), "draw": np.arange(Dk), "llm": list(est.llms)}
    tree = xr.DataTree.from_dict({
        "posterior": xr.Dataset({"overall": (("chain", "draw", "llm"),
                                             post["overall"].values[:, ml["draws"]].astype(np.float64))},
                                coords=coords),
        "log_likelihood": xr.Dataset({"llm_marginal": (("chain", "draw", "llm"), ll)}, coords=coords),
    })
    with warnings.catch_warnings():  # high Pareto k are reported in the table, not warned about
        warnings.filterwarnings("ignore", message="Estimated shape parameter of Pareto", category=UserWarning)
        res = az.loo(tree, var_name="llm_marginal", pointwise=True)
    k = np.asarray(res.pareto_k.values, float).reshape(-1)
    good = float(getattr(res, "good_k", 0.7))
    table = pd.DataFrame({"llm": list(est.llms), "elpd_loo": np.asarray(res.elpd_i.values, float).reshape(-1),
                          "pareto_k": k, "k_ok": k <= good})
    return LooCheck(elpd=res, table=table, good_k=good, overall_integrated=ml["overall_integrated"],
                    n_draws=C * Dk, seconds=time.perf_counter() - t0)


# ---------------------------------------------------------------------------
# all of them
# ---------------------------------------------------------------------------


@dataclass
class ModelChecks:
    """The checks of one fit (None where a check does not apply), and why some were skipped."""

    correlation: CorrelationCheck | None = None
    items: pd.DataFrame | None = None
    loo: LooCheck | None = None
    items_ppc: pd.DataFrame | None = None
    skipped: dict = field(default_factory=dict)
    seconds: dict = field(default_factory=dict)
    alpha: float = ALPHA

    def summary(self) -> dict:
        """Short JSON-ready record of every check (for ``fit.json``'s diagnostics)."""
        out: dict[str, Any] = {}
        if self.correlation is not None:
            out["correlation"] = self.correlation.summary()
        if self.items is not None:
            t = self.items
            out["item_fit"] = {"items": len(t), "tested": int(t["p_value"].notna().sum()),
                               "misfit_items": int(t["misfit"].sum()),
                               "share_p_below_alpha": float((t["p_value"] < self.alpha).sum()
                                                            / max(int(t["p_value"].notna().sum()), 1)),
                               "alpha": self.alpha, "seconds": self.seconds.get("item_fit")}
        if self.items_ppc is not None:
            out["item_fit_ppc"] = {"items": len(self.items_ppc),
                                   "ppp_below_alpha": int((self.items_ppc["ppp"] < self.alpha).sum()),
                                   "seconds": self.seconds.get("item_fit_ppc")}
        if self.loo is not None:
            out["loo_llm"] = self.loo.summary()
        if self.skipped:
            out["skipped"] = dict(self.skipped)
        return out

    def record(self, est) -> None:
        """Put :meth:`summary` into ``est.info["diagnostics"]["checks"]`` (written to ``fit.json``)."""
        diag = dict(est.info.get("diagnostics") or {})
        diag["checks"] = self.summary()
        est.update_info(diagnostics=diag)


def check_replicates(n_replicates) -> None:
    """The correlation check's replicated data sets: an integer of at least 2. Checked by
    :func:`correlation_check` and :func:`run_checks`, and by ``mtlirt fit --checks`` before it fits."""
    if isinstance(n_replicates, bool) or not isinstance(n_replicates, (int, np.integer)) or n_replicates < 2:
        raise InputError(f"n_replicates (--check-replicates) must be an integer of at least 2, got {n_replicates!r}")


def run_checks(est, responses, *, correlation: bool = True, items: bool = True, loo: bool = True,
               n_replicates: int = 100, seed: int = 0, alpha: float = ALPHA, max_draws: int = 400) -> ModelChecks:
    """Run the checks that apply to a fit (see the module docstring).

    Parameters
    ----------
    est : Estimate
    responses : Responses
        The fit's data.
    correlation, items, loo : bool
        Which checks to run (``items`` with several posterior draws adds the
        posterior predictive S-X2, :func:`item_fit_ppc`, on 50 draws).
    n_replicates : int
        Replicated data sets of the correlation check.
    seed : int
    alpha : float
    max_draws : int
        Posterior draws used by the leave-one-LLM-out check.

    Returns
    -------
    ModelChecks
    """
    if correlation:
        check_replicates(n_replicates)
    _check_data(est, responses)
    out = ModelChecks(alpha=alpha)
    if correlation:
        t0 = time.perf_counter()
        out.correlation = correlation_check(est, responses, n_replicates=n_replicates, seed=seed, alpha=alpha)
        out.seconds["correlation"] = time.perf_counter() - t0
        if out.correlation is None:
            out.skipped["correlation"] = (f"the {est.method} fit models no cross-domain structure"
                                          if responses.n_domains > 1 else "one domain")
    if items:
        t0 = time.perf_counter()
        out.items = item_fit(est, responses, alpha=alpha)
        out.seconds["item_fit"] = time.perf_counter() - t0
        if out.items is None:
            out.skipped["item_fit"] = f"the {est.method} fit has no item model"
    if items and est.n_draws > 1 and est.method != "accuracy":
        t0 = time.perf_counter()
        out.items_ppc = item_fit_ppc(est, responses, seed=seed)
        out.seconds["item_fit_ppc"] = time.perf_counter() - t0
    if loo:
        t0 = time.perf_counter()
        out.loo = loo_llm(est, responses, max_draws=max_draws)
        out.seconds["loo_llm"] = time.perf_counter() - t0
        if out.loo is None:
            out.skipped["loo_llm"] = ("a point estimate (one draw)" if est.n_draws < 2
                                      else "a model without overall traits and loadings")
    return out
