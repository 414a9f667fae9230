"""The spectral representation-MTL estimator with biased regularisation (docs/model.md).

Steps (*(ours)* marks a choice of the package where the method leaves it open):

1. **STL**: :func:`mtlirt.estimators.irt.fit_stl` in every domain (items by penalised
   marginal ML, traits by MAP with the ``N(0, 1)`` population prior).
2. **Robustify**: the method shrinks extreme column norms of the standardised
   STL matrix; after standardisation every column has norm ``sqrt(N)``, so the
   step is void.  Robustness to outlier domains comes from steps 4-5 instead:
   an outlier domain gets ``w_k ~ 0`` (its centre is the population mean) and
   the unsquared penalty leaves a domain with strong evidence of its own
   alone.
3. **Shared subspace and rank** *(ours)*: a rank ``r`` starts from the top
   ``r`` left singular vectors of the standardised STL matrix (unit-variance
   columns) and is refined (step 4); the tuning's rank one starts from the
   *pooled* trait (one unidimensional fit of all items,
   :func:`mtlirt.estimators.baselines.fit_pooled`), which it needs for ``C = inf``
   anyway.  The refined centre does not depend on its start, so where
   nothing is tuned the pooled fit is not run.  The rank is chosen on held-out
   responses (step 6): ``r`` is kept only if its best held-out
   log-likelihood beats that of ``r - 1`` by two paired standard errors.
   Parallel analysis (Horn) of the STL traits' correlation matrix only bounds
   the search (at most ``MTLTuning.max_rank``).  Measured on real leaderboards:
   parallel analysis alone chose rank 4 on essentially one-trait data.
4. **Refit in the subspace**: with the STL items fixed, every ``w_k``
   maximises ``loglik_k(A w_k)`` (``r``-dim Newton, plain likelihood: the
   centre ``A w_k`` is on the domain's own likelihood scale).  *(ours)* At rank
   ``r > 1`` the shared traits ``A`` are refined too, alternating with the ``w`` step:
   each LLM's ``A_i`` is its MAP given all domains (prior ``N(0, I)``), with
   each domain's deviation from the subspace, ``N(0, psi_k)``, integrated out
   (Laplace), ``psi_k`` estimated by moments from the scores at the centre;
   then the columns are whitened and rotated to the principal axes of ``W``
   (column 0 = the direction that explains the most).  This weighs domains by
   their information, loading and fit instead of equally, and outlier
   domains (``w_k ~ 0``) drop out.  Measured on ``simulate(1000, "mmlu",
   scale=0.1)``: Spearman with the true overall trait 0.9961 against 0.9954
   without the ``psi`` integration and 0.9957 for the plain first singular
   vector (macro accuracy: 0.9955).
5. **Biased regularisation**: per domain

       theta_k = argmax loglik_k(theta) - |theta|^2 / 2 - lambda_k ||theta - A w_k||_2,
       lambda_k = gamma * sqrt(J_k),  gamma = C * sqrt(N + log K),

   i.e. the method's ``-(1/J_k) loglik + (gamma / sqrt(J_k)) ||.||`` times
   ``J_k``, plus the STL's population prior so that ``gamma = 0`` is exactly
   the STL fit (items included: they stay at their STL calibration, and
   ``gamma = 0`` returns the STL arrays themselves).  The unsquared norm acts
   like a group lasso: ``theta_k = A w_k`` exactly when ``||gradient at the
   centre|| <= lambda_k``; otherwise the solution is a ridge toward the centre
   whose weight ``mu_k`` solves ``mu_k ||theta_k(mu_k) - A w_k|| = lambda_k``
   (safeguarded Newton in ``log mu``, each evaluation a vectorised 1-D Newton
   over all LLMs).  Everything on the internal (MAP) scale; the output is
   standardised per domain at the end and scaled to the spread of posterior
   means (:func:`~mtlirt.estimators.factor_scores._shrunk_outputs`), items transformed alike.
6. ``C`` (and the rank) are tuned by held-out responses: a seeded random
   share (10%, at most 300,000 cells) of the observed cells is left out; the
   items (only when ``N < 1000``: with more LLMs a held-out cell barely moves
   its item), the centre and the path over the grid
   ``0, 0.05, 0.1, 0.2, 0.4, 0.8, 1.6, inf`` (warm starts) are refitted on
   the rest, and the ``C`` with the best held-out log-likelihood is chosen
   (no significance margin over ``C = 0``: the choice maximises the expected
   held-out fit; of values within ``MTLTuning.c_tie`` per cell of the best, the
   largest, the most shrinkage).  When
   the largest finite ``C`` wins, the grid is extended by doubling it (at most
   ``MTLTuning.max_extend`` times; ``cv["at_edge"]`` and a warning if the optimum is
   still at the edge).

7. **The reported scores** *(ours; by default)*: the posterior means of the
   rank-one factor model given the items and the structure
   (``lambda_k = w_k / sqrt(|w_k|^2 + psi_k)``), after an in-sample scale step
   on the items, the structure estimated again on the in-sample items where
   that step moved a domain (:func:`structure_and_scores`), on the grid of
   :mod:`mtlirt.evaluate.scoring`, so that the scorer reproduces them.
   Steps 5-6 then serve the rank search only (a ``C`` tuned when more than
   one rank is tried); ``C`` or ``gamma`` given (``scores="shrunk"``) reports
   the biased regularisation's estimate instead (docs/model.md, "MTL's
   scores"), and so does a fit whose chosen rank exceeds one, its ``C`` tuned:
   a rank-one factor model cannot carry the second shared trait (on the
   simulation study's rank-2 designs its scores had 1.3 times the RMSE).

The two ends of the path are exact fits: ``C = 0`` is the STL fit and, at
rank one, ``C = inf`` is the pooled fit (items recalibrated by marginal ML
with one trait for all domains; traits, items and log-likelihood are
:func:`mtlirt.estimators.baselines.fit_pooled`'s).  On leaderboards of 1-5 item domains
the held-out choice is then the pooled fit, as it should be.  Between the
ends the items stay at their STL calibration, so the held-out path can jump
at ``C = inf`` (oll_v1 proxy: -0.345 per response at ``C = 1.6``, -0.326 at
``C = inf``).  Recalibrating them given the shrunk traits was measured
(``benchmarks/bench_tiny.py --recal``): worse held-out predictions at every
``C``, and short of the pooled fit with every domain on its centre.

**The overall score** (``overall[:, 0]``, any rank): the shared part of an
LLM's average domain trait, standardised over the LLMs (see ``docs/model.md``):
by default the factor model's posterior mean of ``g``; with ``scores="shrunk"``
``mean_k centre_ik`` on the calibration's population scale, at rank one the
shared trait itself.

Every LLM gets a score in every domain: without responses in a domain, its
trait is pulled from the prior mean toward its centre.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import numpy as np

from ..data.responses import Responses
from . import irt
from .baselines import fit_pooled
from .blas import blas_threads
from .centre import _centre_for_rank, _lambda, _map_centre, fit_centre, prox_step, select_rank
from .factor_scores import (
    _overall_and_loadings,
    _overall_axes,
    _shrunk_outputs,
    structure_and_scores,
)
from .mtl_tuning import DEFAULT_C_GRID, MTLTuning, _tune
from .penalties import DEFAULT_PENALTIES, Penalties
from .pointfit import PointFit
from .response_data import ResponseData
from .trait_scoring import theta_likelihood

__all__ = [
    "DEFAULT_C_GRID",
    "MTLTuning",
    "fit_centre",
    "fit_mtl",
    "prox_step",
    "select_rank",
]

Progress = Callable[[str, float], None] | None


def _mtl_fit(*, theta, overall, loadings, a, d, c, rank, singular_values, rank_evidence, C, gamma, cv, stl, seconds,
             on_centre, mu, w, centre, loglik, theta_loc, theta_scale, item_domain, theta_se, converged, n_iter,
             pooled, convergence, scores="shrunk", structure=None, theta_interval=None) -> PointFit:
    """The :class:`~mtlirt.estimators.pointfit.PointFit` of :func:`fit_mtl`.

    ``singular_values``, ``rank_evidence``, ``cv``, ``gamma`` and ``structure`` go to its ``record``;
    ``on_centre``, ``mu``, ``w``, ``pooled`` and ``theta_interval`` to its ``extra``; the guessing
    floors' decision is the single-domain fit's (``guessing="auto"``).

    Parameters
    ----------
    theta : numpy.ndarray
        ``N x K`` domain scores, each column centred over the LLMs and spread
        like posterior means (variance ``1 - mean posterior variance``, below 1;
        :func:`posterior_mean_sd`); at ``C = 0`` and ``C = inf`` the single-domain
        and pooled traits, standardised (variance 1).
    overall : numpy.ndarray
        ``N x r`` shared traits, each standardised over the LLMs (sign so that the
        loadings sum positive); column 0 is the overall score (the posterior
        mean of ``g``; with ``scores="shrunk"`` the mean over domains of the
        centres ``centre``), the others (uncorrelated with each other) span the
        rest of the shared space.
    loadings : numpy.ndarray
        ``K x r``: correlation of each domain trait ``theta_k`` with each shared trait,
        disattenuated: the correlation of the single-domain scores with the shared traits
        divided by the square root of their reliability (rows capped at norm 1), as
        ``domain_correlation.csv`` is corrected, so they estimate the Bayesian ``Lambda_k``;
        not the correlation of the shrunk scores (1 for every domain set onto its centre).
    a, d, c : numpy.ndarray
        Item parameters (``J``) on the scale of ``theta``.
    rank : int
        Number ``r`` of shared traits (selected or given).
    singular_values : numpy.ndarray
        Singular values of the standardised STL matrix divided by
        ``sqrt(N K)`` (square roots of the eigenvalues of its correlation
        matrix over ``K``).
    rank_evidence : dict
        ``method`` (``"held-out"`` or ``"given"``), ``parallel_analysis`` (the
        bound), ``eigenvalues``, ``thresholds``, ``n_perm``, ``quantile`` and,
        when selected, ``heldout``: per rank tried, its best held-out
        log-likelihood, its ``C`` and its paired gain (and standard error) over
        the previous rank.
    C, gamma : float or None
        Penalty level used (``gamma = C sqrt(N + log K)``; ``inf`` puts every
        domain on its centre). With the posterior scores no penalty shapes
        ``theta``: the held-out ``C`` of the rank search, ``None`` without one.
    cv : dict or None
        Tuning at the chosen rank: ``grid`` (extended when its edge won),
        ``heldout_loglik`` (mean per held-out cell, per C), ``gain`` and
        ``gain_se`` (paired standard error of the gain over C = 0, for
        reading; the choice is the held-out argmax), ``chosen``, ``extended`` (doublings of the grid), ``at_edge``,
        ``rank``, ``rank_path``, ``n_heldout``, ``refit_items``.
    stl : PointFit
        The single-domain fit it started from.
    seconds : dict
        Wall time per stage (``stl``, ``rank``, ``centre``, ``cv``, ``final``, ``total``).
    on_centre : numpy.ndarray
        ``K`` booleans: domains whose traits sit exactly on their centre.
    mu : numpy.ndarray
        ``K`` effective ridge weights toward the centre (``inf`` on the centre,
        0 when ``gamma = 0``).
    w : numpy.ndarray
        ``K x r`` subspace coefficients of the centres (internal scale).
    centre : numpy.ndarray
        ``N x K`` centres ``A w_k`` on the scale of ``theta``.
    loglik : float
        Log-likelihood of the observed responses at the estimate.
    theta_loc, theta_scale : numpy.ndarray
        Internal traits are ``theta * theta_scale + theta_loc``.
    item_domain : numpy.ndarray
        Domain code of every item.
    theta_se : numpy.ndarray
        ``N x K`` approximate standard errors (inverse penalised information,
        the ridge ``mu_k`` included; near 0 for domains on their centre, where
        only a bootstrap is meaningful).
    converged : bool
        The calibrations the estimate rests on converged (STL items and centre;
        the pooled items at ``C = inf``, rank one).
    n_iter : int
        EM sweeps of that item calibration.
    pooled : PointFit or None
        The pooled fit (the tuning's ``C = inf``, the estimate at ``C = inf``); None where the fit
        did not run it.
    convergence : dict
        ``stl``, ``centre`` and, where it ran, ``pooled``: whether each converged.
    scores : str
        ``"posterior"`` (default, ``C`` tuned): ``theta`` are the factor
        model's posterior means given the items and structure
        (:func:`structure_and_scores`), ``theta_se`` their posterior sds, and
        ``theta_loc = 0``, ``theta_scale = 1`` (the items are on the scores'
        scale); ``"shrunk"`` (``C`` or ``gamma`` given): the biased
        regularisation's estimate at that ``C``.
    structure : dict or None
        With ``scores="posterior"``: ``lambda`` (each domain's correlation with
        the overall score), ``psi`` (the variance of its deviations from the
        centre), the in-sample step's ``loc`` and ``scale`` (the single-domain
        calibration's traits are ``theta * scale + loc``) and ``n_iter``.
    theta_interval : numpy.ndarray or None
        With ``scores="posterior"``: ``N x K x 2``, the posterior's 5% and 95%
        quantiles of each domain score.
    """
    return PointFit(
        theta=theta, a=a, d=d, c=c, overall=overall, loadings=loadings, centre=centre, theta_se=theta_se,
        theta_loc=theta_loc, theta_scale=theta_scale, item_domain=item_domain, stl=stl, model=stl.model,
        loglik=loglik, converged=converged, n_iter=n_iter, convergence=convergence, seconds=seconds,
        scores=scores, rank=rank, C=C, floors=stl.floors,
        record={"singular_values": singular_values, "rank_evidence": rank_evidence, "cv": cv, "gamma": gamma,
                "structure": structure},
        extra={"on_centre": on_centre, "mu": mu, "w": w, "pooled": pooled, "theta_interval": theta_interval},
    )


# ---------------------------------------------------------------------------
# the estimator
# ---------------------------------------------------------------------------
def _say(verbose, msg):
    if verbose:
        print(msg, flush=True)



def fit_mtl(responses: Responses, *, rank=None, gamma=None, C=None, model="2pl",
            guessing=None, seed=0, tuning: MTLTuning | None = None, refine_overall=True, centre_prior=False,
            priors: Penalties | None = None, stl: PointFit | None = None, pooled: PointFit | None = None,
            max_iter=500, tol=1e-4, progress: Progress = None, verbose=False, scores: str | None = None) -> PointFit:
    """Fit the multi-domain IRT model by the spectral MTL estimator (docs/model.md).

    Parameters
    ----------
    responses : Responses
        The leaderboard: answers, mask (``None`` when complete) and the item columns of its ``K`` domains.
    rank : int, optional
        Number of shared traits; chosen by held-out responses when omitted
        (``r > 1`` only for a clear gain over ``r - 1``).
    gamma : float, optional
        Penalty ``gamma``; or give ``C`` (``gamma = C sqrt(N + log K)``).  When
        both are omitted ``C`` is tuned over ``tuning.C_grid`` by held-out responses.
    model : {"2pl", "1pl"}
    guessing : float or ndarray (J,) or "estimate", optional
        Fixed lower asymptotes, or one floor per domain estimated by the
        single-domain calibration (STL) and then kept fixed (pooled fit, tuning).
    seed : int
        Seed of the hold-out draw and of the rank permutations.
    tuning : MTLTuning, optional
        How the rank and ``C`` are chosen by held-out responses (grid, share held out, rules):
        :class:`~mtlirt.estimators.mtl_tuning.MTLTuning`, its defaults when omitted.
    refine_overall : bool
        Refine the shared traits of rank ``r > 1`` by likelihood (step 4
        *(ours)*); else keep the singular vectors.
    centre_prior : bool
        Fit the centre coefficients ``w_k`` with the traits' ``N(0, 1)`` prior
        (a rank-r MAP, shrunk like the STL MAP) instead of by plain likelihood
        (default).  Measured: it pulls 1-3 item domains closer to the pooled
        answer, but predicts held-out responses worse, so the tuning picks a
        smaller ``C`` and the other domains gain less (on the 10%-outlier
        simulation, inlier RMSE ratio 0.72 instead of 0.59).
    priors : Penalties, optional
    stl, pooled : PointFit, optional
        A single-domain and a pooled fit of the same data to start from.
    max_iter, tol
        Of the item calibration.
    progress : callable (stage, fraction), optional
    verbose : bool
    scores : {"posterior", "shrunk"}, optional
        What ``theta`` holds: the factor model's posterior means given the
        items and structure (``"posterior"``, the default when neither ``C``
        nor ``gamma`` is given: :func:`structure_and_scores`), or the biased
        regularisation's estimate (``"shrunk"``, the default when one is
        given; tuned over ``tuning.C_grid`` when neither is). With ``"posterior"``
        the held-out tuning only selects the rank (its ``C`` is recorded;
        ``None`` when the rank is given as one, and nothing is tuned); at a
        rank above one the scores are ``"shrunk"``, ``C`` tuned.

    Returns
    -------
    PointFit
        As :func:`_mtl_fit` lays it out.
    """
    with blas_threads(1):
        return _fit_mtl(responses, rank=rank, gamma=gamma, C=C, model=model,
                        guessing=guessing, seed=seed, tuning=tuning or MTLTuning(), refine_overall=refine_overall,
                        centre_prior=centre_prior, priors=priors or DEFAULT_PENALTIES, stl=stl, pooled=pooled,
                        max_iter=max_iter, tol=tol, progress=progress, verbose=verbose, scores=scores)


def _fit_mtl(responses, *, rank, gamma, C, model, guessing, seed, tuning, refine_overall,
             centre_prior, priors, stl, pooled, max_iter, tol, progress, verbose, scores):
    t_start = time.perf_counter()
    seconds = {}
    prog = progress or (lambda stage, frac: None)
    correct, observed, slices = responses.correct, responses.mask, responses.domain_slices
    N, K = correct.shape[0], len(slices)
    sizes = np.array([s.stop - s.start for s in slices], dtype=np.float64)
    data = ResponseData.from_responses(responses, guessing=guessing)

    # 1. STL (the pooled fit where first needed) ---------------------------------
    stl, guessing, lik = _start_fits(responses, data, stl, model=model, guessing=guessing, priors=priors,
                                     max_iter=max_iter, tol=tol, seconds=seconds, prog=prog, verbose=verbose)
    pooled = _Pooled(responses, data, pooled, seconds, verbose, model=model, guessing=guessing, priors=priors,
                     max_iter=max_iter, tol=tol)

    # 3. rank bound by parallel analysis ---------------------------------------
    t0 = time.perf_counter()
    ranks, evidence, sv, U = _rank_search(stl.theta, rank, tuning.max_rank, seed)
    eta0 = U[:, 0] * (1.0 if U[:, 0] @ stl.theta.mean(axis=1) >= 0 else -1.0)  # rank one's start, higher is better
    seconds["rank"] = time.perf_counter() - t0

    # 6. tuning of rank and C on held-out responses ----------------------------
    fixed_C = _given_C(gamma, C, N, K)
    scores = _score_kind(scores, fixed_C)
    if scores == "posterior" and len(ranks) == 1 and evidence["method"] == "held-out":
        evidence["method"] = "parallel analysis"  # it bounds the rank at one: nothing left to hold out for
    # the rank-one factor posterior cannot carry a second shared trait: where the rank may exceed one, C is
    # tuned, and at a chosen rank above one the reported scores are the shrunk ones
    tune = (fixed_C is None and scores == "shrunk") or len(ranks) > 1 or (scores == "posterior" and ranks[0] > 1)
    tuned_pooled = pooled.get() if tune else None  # its own stage, seconds["pooled"]
    t0 = time.perf_counter()
    cv = None
    if tune:
        prog("cv", 0.0)
        cv = _tune(correct, observed, slices, data, guessing, model, priors, stl, tuned_pooled, U, ranks, sizes,
                   tuning.C_grid if fixed_C is None else [fixed_C], tuning, refine_overall, centre_prior, seed,
                   max_iter, tol, prog)
        rank = cv["rank"]
        C_use = cv["chosen"] if fixed_C is None else fixed_C
        evidence["heldout"] = cv["rank_path"]
        prog("cv", 1.0)
    else:
        rank = ranks[0]
        C_use = fixed_C  # None with the posterior scores: nothing to tune
    seconds["cv"] = time.perf_counter() - t0
    if cv is not None:
        _say(verbose, f"mtl: rank {rank}; cv "
             + ", ".join(f"C={c:g}: {v:.5f}" for c, v in zip(cv["grid"], cv["heldout_loglik"]))
             + f" -> C={C_use:g} ({seconds['cv']:.2f} s)")

    selection = dict(rank=rank, sv=sv, evidence=evidence, cv=cv)
    if scores == "posterior" and rank == 1:  # the reported scores: the factor model's posterior means
        return _posterior_fit(correct, observed, slices, data, stl, pooled, lik, rank, eta0, U, refine_overall,
                              centre_prior, priors, C_use, N, K, selection, seconds, t_start, prog, verbose)
    return _shrunk_fit(correct, observed, slices, data, stl, pooled, lik, eta0, U, sizes, refine_overall,
                       centre_prior, priors, C_use, selection, seconds, t_start, prog, verbose)


def _score_kind(scores, fixed_C):
    """What ``theta`` will hold, ``"posterior"`` or ``"shrunk"`` (the default: posterior unless ``C`` is
    given), checked against the given ``C``."""
    if scores is None:
        scores = "posterior" if fixed_C is None else "shrunk"
    if scores not in ("posterior", "shrunk"):
        raise ValueError(f"scores must be 'posterior' or 'shrunk', got {scores!r}")
    if scores == "posterior" and fixed_C is not None:
        raise ValueError("the posterior scores take no C (gamma): give scores='shrunk' for the biased regularisation")
    return scores


def _shrunk_fit(correct, observed, slices, data, stl, pooled, lik, eta0, U, sizes, refine_overall, centre_prior,
                priors, C_use, selection, seconds, t_start, prog, verbose):
    """Steps 4 and 5 for the biased regularisation's scores: the centre at the chosen rank, the final fit
    toward it at ``C_use`` (the STL fit at 0, the pooled one when fused), its outputs on the reported scale;
    ``pooled`` is the :class:`_Pooled` fit, ``eta0`` rank one's start."""
    rank = selection["rank"]
    N, K = correct.shape[0], len(slices)
    th_stl, a, d = stl.internal()
    # 4. centre at the chosen rank ------------------------------------------------
    fused = (not np.isfinite(C_use)) and rank == 1
    eta_p = pooled.get().internal()[0][:, 0] if fused else eta0
    A, W, cinfo, centre = _timed_centre(lik, rank, K, fused, eta_p, U, refine_overall, centre_prior, priors,
                                        seconds, prog)

    # 5. final fit --------------------------------------------------------------
    t0 = time.perf_counter()
    prog("final", 0.0)
    lam, gamma_use = _lambda(C_use, N, K, sizes)
    convergence = _convergence(stl, pooled.fit, cinfo)
    theta, mu, on, used = _final_fit(lik, th_stl, centre, lam, C_use, fused, priors)
    seconds["final"] = time.perf_counter() - t0
    prog("final", 1.0)

    # outputs on the reported scale ---------------------------------------------
    if C_use == 0:
        th_s, a_s, d_s, loc, scale, ll, se = _own_outputs(stl)
        centre_s = (centre - loc) / scale
    elif fused:
        th_s, a_s, d_s, loc, scale, ll, se = _own_outputs(pooled.fit)
        centre_s = th_s.copy()
        A = ((eta_p - eta_p.mean()) / eta_p.std())[:, None]
        W = np.full((K, 1), float(eta_p.std()))  # A w_k = eta - mean(eta), internal scale
    else:
        th_s, a_s, d_s, loc, scale, ll, se, centre_s = _shrunk_outputs(
            lik, theta, mu, a, d, stl.c, centre, W, (correct, observed, slices), data.item_domain, priors)
    # the overall score weighs the domains' centres on the population scale (unit-variance traits,
    # as the Bayesian lbar = mean_k Lambda_k), not on the sample scale of the shrunk scores
    A_rot, W_rot = _overall_axes(A, W, loc, np.ones(K))
    overall, loadings, W_out = _overall_and_loadings(stl, A_rot, W_rot)
    seconds["total"] = time.perf_counter() - t_start
    _say(verbose, f"mtl: done in {seconds['total']:.2f} s; rank {rank}, C={C_use:g}, "
         f"{int(on.sum())}/{K} domains on the centre")
    return _mtl_fit(
        theta=th_s, overall=overall, loadings=loadings, a=a_s, d=d_s, c=stl.c.copy(), rank=rank,
        singular_values=selection["sv"], rank_evidence=selection["evidence"], C=C_use, gamma=gamma_use,
        cv=selection["cv"], stl=stl, seconds=seconds, on_centre=on, mu=mu, w=W_out, centre=centre_s, loglik=ll,
        theta_loc=loc, theta_scale=scale, item_domain=data.item_domain, theta_se=se,
        converged=all(convergence[u] for u in used), n_iter=stl.n_iter if "stl" in used else pooled.fit.n_iter,
        pooled=pooled.fit, convergence=convergence,
    )


def _convergence(stl, pooled, cinfo) -> dict:
    """Whether each calibration the fit ran converged (the pooled fit where it ran)."""
    return {"stl": bool(stl.converged), "centre": bool(cinfo["converged"])} | (
        {} if pooled is None else {"pooled": bool(pooled.converged)})


def _timed_centre(lik, rank, K, fused, eta_p, U, refine_overall, centre_prior, priors, seconds, prog):
    """:func:`_centre_at` with its progress and seconds recorded; also returns the centre ``A W'``."""
    t0 = time.perf_counter()
    prog("centre", 0.0)
    A, W, cinfo = _centre_at(lik, rank, K, fused, eta_p, U, refine_overall, centre_prior, priors)
    seconds["centre"] = time.perf_counter() - t0
    prog("centre", 1.0)
    return A, W, cinfo, A @ W.T


def _posterior_fit(correct, observed, slices, data, stl, pooled, lik, rank, eta0, U, refine_overall, centre_prior,
                   priors, C_use, N, K, selection, seconds, t_start, prog, verbose):
    """Steps 4 and 7: the centre at the chosen rank on the single-domain items, its structure and the
    factor model's posterior means (:func:`structure_and_scores`); ``pooled``, ``eta0`` as :func:`_shrunk_fit`."""
    A, W, cinfo, centre = _timed_centre(lik, rank, K, False, eta0, U, refine_overall, centre_prior, priors,
                                        seconds, prog)
    t0 = time.perf_counter()
    prog("final", 0.0)
    axes = [_overall_axes(A, W, None, np.ones(K))]

    def recentre(lik):  # the centre again, on the in-sample items (started from the last one's shared trait)
        A2, W2, _ = _centre_at(lik, rank, K, False, axes[-1][0][:, 0], U, refine_overall, centre_prior, priors)
        axes.append(_overall_axes(A2, W2, None, np.ones(K)))
        return A2 @ W2.T, axes[-1][1]

    fs, lam, psi, centre_out, rounds = structure_and_scores(
        correct, observed, slices, *stl.internal()[1:], stl.c, centre, axes[0][1], lik, recentre, stl.theta_se)
    overall, loadings, W_out = _overall_and_loadings(stl, *axes[-1])
    # the overall score: E[g | answers] standardised over the LLMs (the scorer's overall_loc, overall_scale)
    g = fs["g"] - (g_loc := float(fs["g"].mean()))
    g_scale = max(float(g.std()), 1e-12)
    overall[:, 0] = g / g_scale
    lik_out = theta_likelihood(data)
    lik_out.set_items(fs["a"], fs["d"])
    ll = float(lik_out.theta_loglik(fs["theta"]).sum())
    seconds["final"] = time.perf_counter() - t0
    prog("final", 1.0)
    seconds["total"] = time.perf_counter() - t_start
    convergence = _convergence(stl, pooled.fit, cinfo)
    _say(verbose, f"mtl: done in {seconds['total']:.2f} s; rank {rank}, posterior means "
         f"({fs['n_iter']} in-sample passes)")
    structure = {"lambda": lam.tolist(), "psi": psi.tolist(), "loc": fs["loc"].tolist(),
                 "scale": fs["scale"].tolist(), "n_iter": int(fs["n_iter"]), "rounds": rounds, "overall_loc": g_loc,
                 "overall_scale": g_scale}
    gamma = None if C_use is None else _lambda(C_use, N, K, np.ones(K))[1]
    return _mtl_fit(
        theta=fs["theta"], overall=overall, loadings=loadings, a=fs["a"], d=fs["d"], c=stl.c.copy(), rank=rank,
        singular_values=selection["sv"], rank_evidence=selection["evidence"], C=C_use, gamma=gamma, cv=selection["cv"],
        stl=stl, seconds=seconds, on_centre=np.zeros(K, dtype=bool), mu=np.zeros(K), w=W_out,
        centre=centre_out, loglik=ll, theta_loc=np.zeros(K), theta_scale=np.ones(K),
        item_domain=data.item_domain, theta_se=fs["theta_sd"], converged=convergence["stl"] and convergence["centre"],
        n_iter=stl.n_iter, pooled=pooled.fit, convergence=convergence, scores="posterior", structure=structure,
        theta_interval=np.stack([fs["lower"], fs["upper"]], axis=-1),
    )


def _start_fits(responses, data, stl, *, model, guessing, priors, max_iter, tol, seconds, prog, verbose):
    """Step 1: the single-domain (STL) fit, unless given.

    With ``guessing="estimate"`` the STL calibration's floors are set on ``data`` and kept from here
    on (the pooled fit, the tuning). Returns the fit, the guessing to use from here on and the trait
    likelihood of ``data`` at the STL items (internal scale); records ``seconds["stl"]``.
    """
    t0 = time.perf_counter()
    prog("stl", 0.0)
    if stl is None:
        stl = irt.fit_stl_data(data, model=model, priors=priors, max_iter=max_iter, tol=tol)
    if data.estimate_floor:  # the single-domain calibration's floors, kept from here on
        data.set_floor(stl.c)
        data.estimate_floor, data.floor_mode = False, None
        guessing = data.c
    _, a, d = stl.internal()
    lik = theta_likelihood(data)
    lik.set_items(a, d)
    seconds["stl"] = time.perf_counter() - t0
    _say(verbose, f"mtl: stl {seconds['stl']:.2f} s ({stl.n_iter} EM sweeps)")
    prog("stl", 1.0)
    return stl, guessing, lik


class _Pooled:
    """The pooled fit, run on first use (the tuning's ``C = inf`` and the fused estimate need it; the
    posterior scores at rank one do not: their centre starts from the STL matrix), or the one given."""

    def __init__(self, responses, data, fit, seconds, verbose, **kw):
        self.fit, self._args, self._seconds, self._verbose = fit, (responses, data, kw), seconds, verbose

    def get(self) -> PointFit:
        if self.fit is None:
            responses, data, kw = self._args
            t0 = time.perf_counter()
            self.fit = fit_pooled(responses, share=data, **kw)
            self._seconds["pooled"] = time.perf_counter() - t0
            _say(self._verbose, f"mtl: pooled {self._seconds['pooled']:.2f} s ({self.fit.n_iter} EM sweeps)")
        return self.fit


def _rank_search(theta_stl, rank, max_rank, seed):
    """Step 3: the ranks to try (``[rank]`` when given, else ``1 ..`` the parallel-analysis bound,
    at most ``max_rank``), the rank evidence, the singular values and the left singular vectors of the
    standardised STL matrix ``theta_stl`` (``N x K``)."""
    N, K = theta_stl.shape
    pa_rank, evidence = select_rank(theta_stl, seed=seed)
    sv = np.sqrt(np.maximum(evidence["eigenvalues"], 0) / K)
    U, _, _ = np.linalg.svd(theta_stl / math.sqrt(N * K), full_matrices=False)
    if rank is not None:
        rank = int(rank)
        if not 1 <= rank <= K:
            raise ValueError(f"rank must be in 1..{K}")
        return [rank], dict(evidence, method="given", parallel_analysis=pa_rank), sv, U
    ranks = list(range(1, max(1, min(pa_rank, max_rank, K)) + 1))
    return ranks, dict(evidence, method="held-out", parallel_analysis=pa_rank), sv, U


def _given_C(gamma, C, N, K):
    """``C`` as given (``gamma`` first, as ``gamma / sqrt(N + log K)``), or ``None`` to tune it."""
    if gamma is not None:
        return float(gamma) / math.sqrt(N + math.log(max(K, 1)))
    return None if C is None else float(C)


def _centre_at(lik, rank, K, fused, eta_p, U, refine_overall, centre_prior, priors):
    """Step 4: shared traits ``A``, coefficients ``W`` (``K x rank``) and the fit's record of the centre at
    the chosen rank, rank one started from ``eta_p``; when ``fused`` (rank one, ``C = inf``) the pooled
    trait ``eta_p`` itself."""
    if fused:  # the pooled fit is the estimate: its trait is the centre
        return eta_p[:, None], np.ones((K, 1)), {"converged": True}
    A, W_lik, cinfo = _centre_for_rank(lik, rank, eta_p, U, refine_overall, max_iter=200)
    W = _map_centre(lik, A, W_lik, priors) if centre_prior else W_lik
    return A, W, cinfo


def _final_fit(lik, th_stl, centre, lam, C_use, fused, priors):
    """Step 5: the domain traits (internal scale; ``None`` when fused), the ridge weights ``mu``, the
    domains on their centre and the fits the estimate rests on: the STL traits at ``C = 0``, the pooled
    fit when fused, else the proximal step from the STL traits toward ``centre``."""
    K = centre.shape[1]
    if C_use == 0:
        return th_stl.copy(), np.zeros(K), np.zeros(K, dtype=bool), ("stl",)
    if fused:  # rank one, C = inf: the pooled fit itself
        return None, np.full(K, np.inf), np.ones(K, dtype=bool), ("pooled",)
    theta, mu, on = prox_step(lik, th_stl, centre, lam, priors=priors)
    return theta, mu, on, ("stl", "centre")


def _own_outputs(f):
    """A fit's own reported traits, items, trait location and scale, log-likelihood and standard errors (copies)."""
    return *(x.copy() for x in (f.theta, f.a, f.d, f.theta_loc, f.theta_scale)), f.loglik, f.theta_se.copy()
