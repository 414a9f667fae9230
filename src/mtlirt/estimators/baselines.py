"""The baselines under the estimators' interface: pooled 2PL and accuracy (docs/model.md, "Baselines").

* :func:`fit_pooled` -- one unidimensional IRT model over all items
  (``theta_ik = eta_i`` for every domain), fitted exactly like one STL domain
  (:func:`mtlirt.estimators.irt.fit_stl` with a single domain spanning all items).
* :func:`fit_accuracy` -- per-domain proportion correct and its macro average.

The single-domain baseline (STL) is :func:`mtlirt.estimators.irt.fit_stl` itself;
:func:`posterior_mean_scale` puts its scores on the package's estimand scale
(``docs/model.md``, "The estimand") for reporting.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import replace

import numpy as np

from ..data.responses import Responses
from . import irt
from .blas import blas_threads
from .penalties import Penalties
from .pointfit import PointFit
from .response_data import ResponseData, item_domain_of
from .trait_scoring import theta_likelihood

__all__ = ["fit_accuracy", "fit_pooled", "pooled_penalties", "posterior_mean_scale"]


def posterior_mean_scale(res, seen=None):
    """Single-domain scores on the estimand's scale: each domain spread like posterior means.

    ``fit_stl`` reports its MAP scores standardised over the LLMs (spread 1).
    The package's domain score is a posterior-mean-like estimate of the trait
    on the population scale (``docs/model.md``, "The estimand"), whose spread
    over the LLMs is ``sqrt(1 - mean_i v_ik)``, ``v_ik`` the posterior
    variance (for a single-domain MAP under ``N(0, 1)``, ``(theta_se_ik *
    theta_scale_k)^2``, the inverse of the information plus 1), as MTL's
    scores are (:func:`mtlirt.estimators.factor_scores.posterior_mean_sd`). Each domain
    is multiplied by that spread, taken over the LLMs with responses in it
    (``seen``, ``N x K``; all when None); the items, standard errors,
    ``theta_scale`` and an MTL fit's ``centre`` follow, so ``a theta + d``
    and the population-scale traits ``theta * theta_scale + theta_loc`` are
    unchanged. Returns a copy of ``res`` (a :class:`~mtlirt.estimators.pointfit.PointFit` of
    :func:`~mtlirt.estimators.irt.fit_stl`, or of MTL at ``C = 0``, which reports the single-domain scores).
    """
    theta = np.asarray(res.theta, dtype=np.float64)
    pv = (np.asarray(res.theta_se, dtype=np.float64) * res.theta_scale) ** 2
    seen = np.ones(theta.shape, dtype=bool) if seen is None else np.asarray(seen, dtype=bool)
    cnt = np.maximum(seen.sum(axis=0), 1)
    sd = np.sqrt(np.clip(1.0 - np.where(seen, pv, 0.0).sum(axis=0) / cnt, 0.05, 1.0))
    item_domain = res.item_domain
    out = dict(theta=theta * sd, a=res.a / sd[item_domain], theta_se=res.theta_se * sd,
               theta_scale=res.theta_scale / sd)
    if res.centre is not None:
        out["centre"] = res.centre * sd
    return replace(res, **out)


def pooled_penalties(priors: Penalties | None = None) -> Penalties:
    """The pooled fit's penalties: ``priors`` on the coarsest grid (``node_sd_ratio = 0``).

    Its one domain spans every item, so a grid fine enough for its LLMs'
    posteriors has the most nodes (hundreds at the flagship shape) and costs
    about ten times the coarsest grid's time, for discriminations far closer
    to it than the pooled model's own error on multi-domain truth
    (``benchmarks/bench_calibration.py --designs flagship --pooled``)."""
    return replace(priors or Penalties(), node_sd_ratio=0.0)


def fit_pooled(responses: Responses, *, model="2pl", guessing=None, max_iter=500, tol=1e-4,
               priors: Penalties | None = None, progress=None, verbose=False,
               share: ResponseData | None = None) -> PointFit:
    """One unidimensional IRT model over all items ("pooled").

    Parameters
    ----------
    responses : Responses
        The leaderboard (its domains used only to shape the output and split the log-likelihood).
    model : {"2pl", "1pl"}
        1PL: one common discrimination for all items.
    guessing : float or ndarray (J,) or "estimate", optional
        Fixed lower asymptotes, or ``"estimate"``: one floor for all items.
    max_iter, tol, priors, progress, verbose
        As in :func:`mtlirt.estimators.irt.fit_stl`, except that the
        calibration keeps the coarsest quadrature grid (:func:`pooled_penalties`).
    share : ResponseData, optional
        Data of the same answers whose ``float32`` copies the fit may use
        (:class:`~mtlirt.estimators.response_data.ResponseData`).

    Returns
    -------
    PointFit
        ``theta`` is ``N x K`` with every column equal to the standardised
        pooled trait ``eta`` (mean 0, variance 1); ``a, d, c`` are on that
        scale; ``loglik_domain`` splits the log-likelihood by domain;
        ``theta_loc``/``theta_scale`` repeat the single standardisation.
    """
    t0 = time.perf_counter()
    J, K = responses.n_items, responses.n_domains
    with blas_threads(1):  # one domain spanning every item
        data = ResponseData(responses.correct, responses.mask, [slice(0, J)], guessing=guessing, share=share,
                            blocks=responses.domain_slices)
    one = irt.fit_stl_data(data, model=model, max_iter=max_iter, tol=tol, priors=pooled_penalties(priors),
                           progress=progress, verbose=verbose)
    eta = one.theta[:, 0]
    theta = np.repeat(eta[:, None], K, axis=1)
    item_domain = item_domain_of(responses.domain_slices, J)
    with blas_threads(1):
        data = ResponseData.from_responses(responses, guessing=one.c if np.any(one.c > 0) else None, share=data)
        lik = theta_likelihood(data)
        lik.set_items(one.a, one.d)
        ll = lik.theta_loglik(theta).sum(axis=0)
    return PointFit(
        theta=theta, a=one.a, d=one.d, c=one.c, loglik=float(ll.sum()), n_iter=one.n_iter, converged=one.converged,
        seconds={"total": time.perf_counter() - t0}, model=one.model,
        theta_loc=np.repeat(one.theta_loc, K), theta_scale=np.repeat(one.theta_scale, K),
        theta_se=np.repeat(one.theta_se, K, axis=1), item_domain=item_domain,
        extra={"loglik_domain": ll, "marginal_loglik": one.extra["marginal_loglik"], "history": one.extra["history"]},
    )


def fit_accuracy(responses: Responses) -> PointFit:
    """Per-domain proportion correct and its macro average (the leaderboard's own score).

    Parameters
    ----------
    responses : Responses
        The leaderboard.

    Returns
    -------
    PointFit
        ``theta``: ``N x K`` standardised domain accuracies (per domain, the proportion correct minus
        its mean over the LLMs, divided by its standard deviation, ``ddof=0``; NaN where an LLM has no
        response in the domain, and those LLMs left out of the mean and sd); ``overall``: the macro
        average (every domain weighs the same, whatever its size) standardised over the LLMs; no
        items (``a, d, c`` None). In ``extra``: ``accuracy`` (``N x K`` proportion correct, NaN
        without responses), ``n_responses`` (``N x K``) and ``overall_raw`` (the macro average).
    """
    t0 = time.perf_counter()
    correct, observed = responses.correct, responses.mask
    N, K = responses.n_llms, responses.n_domains
    n1 = np.empty((N, K))
    n = np.empty((N, K))
    for k, sl in enumerate(responses.domain_slices):
        n1[:, k] = correct[:, sl].sum(axis=1, dtype=np.int64)
        n[:, k] = (sl.stop - sl.start) if observed is None else observed[:, sl].sum(axis=1, dtype=np.int64)
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN rows or columns
        acc = np.where(n > 0, n1 / n, np.nan)
        mean = np.nanmean(acc, axis=0)
        sd = np.nanstd(acc, axis=0)
        theta = (acc - mean) / np.where(sd > 0, sd, 1.0)
        macro = np.nanmean(acc, axis=1)
        o_sd = np.nanstd(macro)
        overall = (macro - np.nanmean(macro)) / (o_sd if o_sd > 0 else 1.0)
    return PointFit(theta=theta, overall=overall, seconds={"total": time.perf_counter() - t0},
                    extra={"accuracy": acc, "n_responses": n, "overall_raw": macro})
