"""The seed paper's own estimator (docs/model.md), with its global and local baselines.

Model and constraints, as published: per domain ``t`` a slope-intercept 2PL
``logit P = a_j theta_it + d_j`` with ``a_j in [0, 4]`` and ``d_j in [-4, 4]``;
every domain trait ``theta_t`` (length N) is centred, has norm ``sqrt(N)``
and ``|theta_it| <= 4``; one general trait ``theta_G`` (centred, norm
``sqrt(N)``, sign so that ``theta_G . sum_t theta_t >= 0``) is the overall
score.  Items constant over all observed responses are dropped first.  The
estimate minimises

    F = sum_t L_t / J_t  +  lambda * sum_t sin angle(theta_G, theta_t)

over items, domain traits and ``theta_G`` jointly, ``L_t`` the Bernoulli
negative log-likelihood of domain ``t`` over its observed responses and
``J_t`` its number of (kept) items, with
``lambda = C * max_t N / sqrt(min(N, J_t))`` (the largest term is that of the
smallest domain).  ``C`` is chosen by 5-fold cross-validation over
:data:`C_GRID`: folds split each LLM's observed responses within each domain
(shuffled, then cut into 5 near-equal parts, seed ``seed + 100003``); the
score of a fold is the held-out mean negative log-likelihood of each domain,
averaged over domains; a ``C`` counts only if its fits converged in every
fold; the smallest mean score wins, ties (means within a relative
:data:`~mtlirt.estimators.paper_cv.TIE_RTOL`) to the smaller ``C``; the final fit uses all responses.
The start is spectral (``paper_objective._spectral_start``).

Variants (``fit_paper(variant=...)``):

* ``"paper"`` -- the estimator above.
* ``"paper-global"`` -- ``lambda = inf``: one trait for all domains, each
  domain's loss still weighted by ``1 / J_t``; that trait is a domain trait,
  so it lies in the box.
* ``"paper-local"`` -- ``lambda = 0``: every domain alone; the overall score
  is the *sine centre*, the centred unit vector minimising
  ``sum_t sin angle(theta_G, theta_t)``.

Optimisers.  ``optimizer="adam"`` is the paper's, and gives the paper's
output: full-batch projected Adam (learning rate 0.01 halved every 200
steps, at most 10,000 steps, stop when the relative change of ``F`` falls
below 1e-7, gradients divided by the ``1/J_t``-weighted number of observed
responses, the best iterate kept; after every step each ``theta_t`` is
mapped back onto {mean 0, norm ``sqrt(N)``, box}, items clipped, ``theta_G``
re-normalised and oriented; the local baseline fits each domain by its own
Adam run and its sine centre by Adam with learning rate 0.03).  Every fit,
in every fold and for every ``C``, starts from the spectral start of its
own training responses, as the paper's code does.  Its stopping rule fires
early (on the paper's design after about a hundred steps, while ``F`` still
falls): the paper's estimates are those of an early-stopped Adam, not the
minimiser of ``F``.

``optimizer="fast"`` (default) *(ours)* reaches the exact minimiser of ``F``
(an Adam run without the early stop ends there: ``tests/test_paper.py``;
``docs/results.md``) far faster: each trait is written ``sqrt(N) Pz /
||Pz||`` (``P`` centres) so the sphere constraint disappears, and L-BFGS-B
minimises ``F`` over the ``z`` and the boxed items; entries of a trait that
reach the box are held at it and released when their Lagrangian gradient
points inward.  The sine penalty has a kink where a domain fuses onto
``theta_G`` (its group-lasso-like effect); the fast optimiser treats the
fused domains as an active set: a fused domain *is* ``theta_G`` (its
likelihood then moves ``theta_G``), a free domain whose sine falls below
1e-4 is fused when that does not raise ``F``, and a fused domain is split off
again when the tangent gradient of its loss exceeds ``lambda`` (the exact
optimality condition) unless a split from that same fused set already came
back to it without lowering ``F``.  Its departures from the paper's
procedure, which change where it starts, not the minimiser it reaches: it
starts with every domain fused (from the spectral ``theta_G`` and items),
and within each fold every ``C`` of the grid starts from the solution at
the previous ``C``.  Where ``theta_G`` (which the paper leaves unboxed)
leaves the box with domains fused on it, which their box forbids, it hands
over to the projected Adam on the same objective.

Deviation forced by real data: the paper's fold maker refuses an LLM with
fewer observed responses in a domain than folds; here such responses are
still dealt out (the first folds get them), and a fold's score averages over
the domains that have held-out responses in it.

The pieces, one module each: ``paper_objective`` (the data, ``F`` and the
start), ``paper_adam`` (the paper's optimiser), ``paper_fast`` (ours),
``sine_centre``, ``paper_variants`` (one fit of a variant at a ``lambda``),
``paper_cv`` (the choice of ``C``).
"""

from __future__ import annotations

import math
import time

import numpy as np

from ..data.responses import Responses
from ..errors import InputError
from .blas import blas_threads
from .paper_adam import AdamSettings
from .paper_cv import _tune
from .paper_objective import _Problem, _spectral_start
from .paper_variants import _solve
from .pointfit import PointFit

__all__ = ["C_GRID", "VARIANTS", "AdamSettings", "fit_paper"]

#: The paper's grid of ``C`` (its MMLU application).
C_GRID = (0.001, 0.005, 0.01, 0.02, 0.05, 0.075, 0.09, 0.1, 0.11, 0.125, 0.2, 0.5, 1.0, 1.5)
VARIANTS = ("paper", "paper-global", "paper-local")


def fit_paper(responses: Responses, *, variant="paper", C=None, grid=C_GRID, n_folds=5, seed=0,
              optimizer="fast", adam: AdamSettings = AdamSettings(), n_jobs=1) -> PointFit:
    """Fit the paper's estimator or one of its baselines.

    Parameters
    ----------
    responses : Responses
        The leaderboard: answers, mask (``None`` when complete) and the item blocks of its domains; the
        loss runs over observed cells only.
    variant : {"paper", "paper-global", "paper-local"}
    C : float, optional
        Penalty constant of ``paper``; tuned by 5-fold cross-validation over
        ``grid`` when None.
    grid : sequence of float
        Candidate ``C`` (ascending), default the paper's :data:`C_GRID`.
    n_folds, seed
        Folds and the seed of their split (``default_rng(seed + 100003)``, as the paper's code).
    optimizer : {"fast", "adam"}
        Ours (default: the exact minimiser of ``F``) or the paper's projected
        Adam with its early stop (the paper's output).
    adam : AdamSettings
        Settings of the projected Adam.
    n_jobs : int
        Folds fitted in parallel (joblib processes; 1: in this process).

    Returns
    -------
    PointFit
        ``theta``: ``N x K`` domain traits ``theta_t``, each centred with norm ``sqrt(N)`` (mean 0,
        variance 1 over LLMs); a domain left without informative items takes the overall score.
        ``overall``: ``N`` general trait ``theta_G`` (mean 0, variance 1; for ``paper-local`` the
        sine centre of the domain traits). ``loadings``: ``K x 1``, ``cos angle(theta_G, theta_t)``
        (= their correlation, both being centred; 1 for fused domains). ``a, d``: items (``J``) on
        the scale of ``theta``; a dropped item that every observed LLM answered right gets ``a = 0,
        d = 4`` (the bound), all wrong ``a = 0, d = -4``, one nobody answered ``a = d = 0``; ``c``
        None (no guessing). ``centre``: ``theta_G`` in every column, the prediction for an LLM
        without responses in a domain (what a fused domain gets). ``C`` the penalty constant,
        ``rank`` 1, ``converged`` (the final fit and, with ``C`` tuned, at least one ``C`` in every
        fold), ``n_iter`` (of the final fit), ``seconds`` (``cv``, ``final``, ``total``).
        ``record``: ``lam`` (``lambda``: ``inf`` for ``paper-global``, 0 for ``paper-local``),
        ``cv`` (None, or ``grid``, ``loss``: mean held-out NLL per ``C``, NaN where a fold did not
        converge, ``fold_loss`` and ``converged``: folds x grid, ``chosen``, ``n_folds``,
        ``seed``), ``objective`` (``F`` at the estimate), ``optimizer``. ``extra``: ``variant``,
        ``fused`` (``K`` booleans: domain traits equal to ``theta_G``, fused by the fast optimiser;
        with Adam: sine below 1e-7, the round-off floor of ``sqrt(1 - cos^2)``) and
        ``dropped_items`` (the indices of the items left out: constant or never answered).
    """
    with blas_threads(1):  # small matrix products: threads cost more than they give
        return _fit_paper(responses, variant=variant, C=C, grid=grid, n_folds=n_folds,
                          seed=seed, optimizer=optimizer, adam=adam, n_jobs=n_jobs)


def _fit_paper(responses, *, variant, C, grid, n_folds, seed, optimizer, adam, n_jobs):
    t0 = time.perf_counter()
    if variant not in VARIANTS:
        raise InputError(f"unknown paper variant {variant!r}: expected one of {', '.join(VARIANTS)}")
    if optimizer not in ("fast", "adam"):
        raise InputError(f"unknown optimizer {optimizer!r}: expected 'fast' or 'adam'")
    prob = _Problem(responses.correct, responses.mask, responses.domain_slices)
    if prob.K < (2 if variant == "paper" else 1):
        raise InputError(f"the {variant} estimator needs at least {2 if variant == 'paper' else 1} domains "
                         f"with non-constant items, got {prob.K}")
    if variant == "paper" and C is not None and (not np.isfinite(C) or C < 0):
        raise InputError(f"C must be a finite number >= 0, got {C}")
    grid = tuple(sorted(float(c) for c in grid))
    cv = None
    secs = {}
    if variant == "paper-global":
        C, lam = math.inf, math.inf
    elif variant == "paper-local":
        C, lam = 0.0, 0.0
    else:
        if C is None:
            t1 = time.perf_counter()
            C, cv = _tune(prob, variant, grid, n_folds, seed, optimizer, adam, n_jobs)
            secs["cv"] = time.perf_counter() - t1
        lam = C * prob.lam_scale
    t2 = time.perf_counter()
    mask = prob.mask()
    if variant == "paper-global":  # the start of one domain spanning all items
        start = _spectral_start(prob, mask, dom=np.zeros(len(prob.dom), dtype=np.int64), K=1)
    else:
        start = _spectral_start(prob, mask)
    theta, a, d, g, F, n_iter, ok, fused = _solve(prob, mask, variant, lam, optimizer, start, adam=adam)
    secs["final"] = time.perf_counter() - t2
    if cv is not None and cv["all_failed"]:
        ok = False
    return _assemble(prob, variant, C, lam, cv, theta, a, d, g, F, n_iter, ok, fused, optimizer,
                     {**secs, "total": time.perf_counter() - t0})


def _assemble(prob, variant, C, lam, cv, theta, a, d, g, F, n_iter, ok, fused, optimizer, secs) -> PointFit:
    """Back to all domains and items (the left-out ones filled in as documented), as a
    :class:`~mtlirt.estimators.pointfit.PointFit` (:func:`fit_paper`'s Returns)."""
    N = prob.N
    full = np.repeat(g[:, None], prob.K_all, axis=1)
    full[:, prob.domains] = theta.T
    fz = np.ones(prob.K_all, dtype=bool)
    fz[prob.domains] = fused
    a_all = np.zeros(prob.J_all)
    d_all = np.zeros(prob.J_all)
    a_all[prob.kept], d_all[prob.kept] = a, d
    d_all[prob.dropped] = prob.d_dropped
    cos = np.clip(full.T @ g / N, -1.0, 1.0)
    return PointFit(theta=full, overall=g.copy(), loadings=cos[:, None], a=a_all, d=d_all, c=None,
                    centre=np.repeat(g[:, None], prob.K_all, axis=1), converged=bool(ok), n_iter=int(n_iter),
                    seconds=secs, rank=1, C=float(C),
                    record={"cv": cv, "lam": float(lam), "objective": float(F), "optimizer": optimizer},
                    extra={"variant": variant, "fused": fz, "dropped_items": prob.dropped})
