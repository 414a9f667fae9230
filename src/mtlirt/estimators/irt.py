"""Single-domain IRT for all ``K`` domains at once (docs/model.md, "Single-domain fits (STL)").

Item model, for item ``j`` of domain ``k``::

    P(y_ij = 1) = c_j + (1 - c_j) * sigmoid(a_j * theta_ik + d_j)

with discrimination ``a_j > 0``, intercept ``d_j`` (difficulty ``-d_j / a_j``)
and a lower asymptote ``c_j`` (0 unless ``guessing`` is given: fixed, or
``"estimate"``: one floor ``c_k`` per domain, shared by its items, estimated
with the items under a weak ``Beta(2, 4)`` prior, mode 0.25).

Estimation (a MAP: without the priors the fit does not converge; choices *(ours)*):

* **Items** by penalised *marginal* maximum likelihood: every domain's
  traits follow the population prior ``N(0, 1)`` (the identification of docs/model.md),
  integrated out on a grid of equally spaced nodes on ``[-6, 6]`` (49 for
  short domains, finer for long ones: :func:`~mtlirt.estimators.em_steps.node_levels`) by EM;
  penalties ``log a_j ~ N(0, 0.5^2)`` and ``d_j ~ N(0, 3^2)`` and box bounds
  keep constant and perfectly separating items finite.  The EM is
  accelerated by parameter expansion (each domain's posterior population is
  mapped back to mean 0, variance 1 after every M-step) and SQUAREM.  A penalised *joint* ML
  (alternating Newton steps on traits and items) was tried first: on
  10-item domains the discriminations creep to their bound and it does not
  converge (JML's inconsistency for short tests), whatever the ridge on
  ``log a``; integrating the traits out removes that, and converges in tens
  of EM sweeps.
* **Traits** by MAP given the items: 1-D Newton per (LLM, domain) with the
  ``N(0, 1)`` prior (a real ridge: all-correct / all-wrong LLMs stay finite),
  bound ``|theta| <= 6``.
* Each domain's traits are then standardised (mean 0, variance 1 over the
  LLMs) and the items transformed so that every linear predictor
  ``a_j theta_ik + d_j`` -- hence the likelihood -- is unchanged.

Speed.  With no guessing the EM needs only the sufficient statistics
``s_ik = sum_j a_j y_ij`` (one matrix-vector product per domain block) for
the E-step, and ``t_j = sum_i E[theta_ik] y_ij`` (another) for the M-step:
on a complete matrix the log-partition ``G_k(t) = sum_j log(1 + exp(a_j t +
d_j))`` is the same for every LLM of a domain (docs/model.md, "Calibrate, then score"), so it is
computed once per grid node.  The MAP trait step tabulates ``G_k`` and its
derivatives on a fine grid and interpolates (cubic Hermite), so a Newton
step costs ``O(N K)``.  Missing responses: the EM uses a ``float32``
observation mask in matrix products; the trait step subtracts the unobserved
cells of observed (LLM, domain) blocks exactly (sparse correction), and an
LLM without any response in a domain drops out of that domain's partition (it
gets the prior, or the MTL centre).  A guessing floor shared by a domain is
tabulated too (:class:`~mtlirt.estimators.trait_scoring.TabulatedThetaLik`: one term per correct cell);
floors that differ within a domain, or more than a quarter of cells missing
inside observed blocks, use dense per-domain blocks for the trait step
(``O(N J)`` per Newton step).

1PL: one common discrimination per domain (estimated) -- the Rasch model on
the standardised population scale.  Fixing ``a_j = 1`` would tie the trait
variance to the logit scale instead; the fitted probabilities are the same
family.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from ..data.responses import Responses
from .blas import blas_threads
from .calibration import calibrate_items
from .em_steps import node_levels
from .penalties import DEFAULT_PENALTIES, Penalties
from .pointfit import PointFit
from .response_data import ResponseData, item_domain_of, standardise, to_internal
from .trait_scoring import DenseThetaLik, TabulatedThetaLik, score_theta, theta_likelihood, theta_step

__all__ = [
    "DEFAULT_PENALTIES",
    "DenseThetaLik",
    "Penalties",
    "ResponseData",
    "TabulatedThetaLik",
    "blas_threads",
    "calibrate_items",
    "fit_stl",
    "fit_stl_data",
    "item_domain_of",
    "node_levels",
    "score_theta",
    "standardise",
    "theta_step",
    "to_internal",
]

Progress = Callable[[str, float], None] | None


def fit_stl(responses: Responses, *, model="2pl", guessing=None, max_iter=500, tol=1e-4,
            priors: Penalties | None = None, init=None, exclude=None, progress: Progress = None,
            verbose=False) -> PointFit:
    """Fit a 2PL (or 1PL) in every domain separately (STL).

    Items by penalised marginal ML (EM), traits by MAP given the items; see
    the module docstring for the penalties.

    Parameters
    ----------
    responses : Responses
        The leaderboard: its answers, its mask (``None`` when complete: the fast path) and the
        contiguous item columns of each of its ``K`` domains.
    model : {"2pl", "1pl"}
        1PL: one common discrimination per domain.
    guessing : float or ndarray (J,) or "estimate", optional
        Fixed lower asymptotes ``c_j`` (e.g. 0.25 for four options), or
        ``"estimate"``: one floor per domain, estimated with the items
        (:func:`~mtlirt.estimators.calibration.calibrate_items`).
    max_iter, tol : int, float
        EM sweeps at most; stop when the largest change of ``log a`` or ``d``
        is below ``tol``.
    priors : Penalties, optional
        Penalties, bounds and quadrature.
    init : PointFit or tuple (theta, a, d), optional
        Warm start (a single-domain fit or internal-scale arrays).
    exclude : tuple (rows, cols), optional
        Observed cells to leave out (held-out responses).
    progress : callable (stage, fraction), optional
    verbose : bool
        Print a summary line.

    Returns
    -------
    PointFit
        ``theta`` (``N x K``, each column standardised: mean 0, variance 1 over the LLMs), the items
        ``a, d, c`` on that scale, ``theta_loc``/``theta_scale`` (the population-scale MAP traits are
        ``theta * theta_scale + theta_loc``), ``theta_se`` (inverse penalised information, on the
        standardised scale), ``loglik`` (plug-in), ``n_iter`` and ``converged`` of the EM, ``floors``
        (with ``guessing="auto"``: the decision of :func:`~mtlirt.estimators.calibration.decide_floors` and
        ``fitted``, every domain's floor); in ``extra``: ``loglik_domain`` (``K``), ``marginal_loglik`` of the
        item calibration and ``history`` (the largest item-parameter change per EM sweep).
    """
    with blas_threads(1):
        data = ResponseData.from_responses(responses, guessing=guessing, exclude=exclude)
        return fit_stl_data(data, model=model, max_iter=max_iter, tol=tol, priors=priors, init=init,
                            progress=progress, verbose=verbose)


def fit_stl_data(data: ResponseData, *, model="2pl", max_iter=500, tol=1e-4, priors: Penalties | None = None,
                 init=None, progress: Progress = None, verbose=False) -> PointFit:
    """:func:`fit_stl` on prebuilt :class:`~mtlirt.estimators.response_data.ResponseData` (its domains, floors
    and held-out cells): MTL's single-domain fit on the data it shares, the pooled fit's one domain."""
    with blas_threads(1):
        return _fit_stl(data, model=model, max_iter=max_iter, tol=tol, priors=priors, init=init,
                        progress=progress, verbose=verbose)


def _fit_stl(data, *, model, max_iter, tol, priors, init, progress, verbose):
    t0 = time.perf_counter()
    priors = priors or Penalties()
    model = model.lower()
    if model not in ("2pl", "1pl"):
        raise ValueError("model must be '2pl' or '1pl'")
    theta0 = a0 = d0 = c0 = None
    if isinstance(init, PointFit):
        theta0, a0, d0 = init.internal()
        c0 = init.c if data.estimate_floor and np.any(init.c > 0) else None
    elif init is not None:
        theta0, a0, d0 = (np.array(v, dtype=np.float64, copy=True) for v in init)
    a, d, info = calibrate_items(data, a0, d0, priors=priors, model=model, max_iter=max_iter,
                                 tol=tol, c=c0, progress=progress)
    if progress is not None:
        progress("theta", 0.0)
    theta, tinfo = score_theta(data, a, d, theta0 if theta0 is not None else info["eap"], priors=priors)
    fit = _finish(data, theta, a, d, tinfo, priors=priors, model=model, info=info, t0=t0)
    if progress is not None:
        progress("theta", 1.0)
    if verbose:
        print(f"stl: {fit.n_iter} EM sweeps, converged={fit.converged}, {fit.seconds['total']:.2f} s")
    return fit


def _finish(data, theta, a, d, tinfo, *, priors, model, info, t0, extra_precision=None):
    lik = theta_likelihood(data)
    lik.set_items(a, d)
    ll_blocks = lik.theta_loglik(theta)
    th_s, a_s, d_s, loc, scale = standardise(theta, a, d, data.item_domain)
    prec = tinfo + 1.0 / priors.theta_sd**2
    if extra_precision is not None:
        prec = prec + extra_precision
    se = 1.0 / np.sqrt(prec) / scale
    c = np.zeros(data.J) if data.c is None else data.c.copy()
    return PointFit(
        theta=th_s, a=a_s, d=d_s, c=c, loglik=float(ll_blocks.sum()),
        n_iter=int(info.get("n_iter", 0)), converged=bool(info.get("converged", True)),
        seconds={"total": time.perf_counter() - t0}, model=model, theta_loc=loc, theta_scale=scale,
        theta_se=se, item_domain=data.item_domain, floors=info.get("floors"),
        extra={"loglik_domain": ll_blocks.sum(axis=0),
               "marginal_loglik": float(info.get("marginal_loglik", np.nan)),
               "history": list(info.get("history", []))},
    )
