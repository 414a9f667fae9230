"""MTL's held-out tuning: the rank and ``C`` chosen by the log-likelihood of held-out responses
(:func:`_tune`), the cells held out (:func:`sample_cells`)."""

from __future__ import annotations

import math
import warnings

import numpy as np

from .calibration import calibrate_items
from .centre import _centre_for_rank, _lambda, _map_centre, prox_step
from .heldout import cell_loglik
from .response_data import ResponseData
from .trait_scoring import score_theta, theta_step

__all__ = ["sample_cells"]


def sample_cells(observed, shape, n, rng):
    """Draw ``n`` distinct observed cells at random (rows, cols)."""
    N, J = shape
    n_obs = N * J if observed is None else int(np.count_nonzero(observed))
    n = int(min(n, n_obs))
    if n <= 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    if n > 0.3 * n_obs:
        flat = np.flatnonzero(observed) if observed is not None else np.arange(N * J)
        pick = np.sort(rng.choice(flat, size=n, replace=False))
        return pick // J, pick % J
    out = np.zeros(0, np.int64)
    while len(out) < n:
        m = int((n - len(out)) * 1.3 * (N * J) / n_obs) + 16
        cand = rng.integers(0, N * J, size=m)
        if observed is not None:
            cand = cand[observed.ravel()[cand]]
        out = np.concatenate([out, cand])
        out.sort()  # (np.unique by sorting: its hash table was the slower at 4e5 cells)
        out = out[np.concatenate(([True], out[1:] != out[:-1]))]
    pick = np.sort(rng.choice(out, size=n, replace=False))
    return pick // J, pick % J



def _pooled_cells(pooled_internal, correct, rows, cols):
    """Held-out log-likelihood of the cells under a pooled fit ``(eta, a, d, c)`` (internal scale)."""
    eta, a, d, c = pooled_internal
    return cell_loglik(correct, rows, cols, eta[:, None], a, d, c, np.zeros(len(a), dtype=np.int64))



def _best_C(grid, means, tie):
    """Index of the ``C`` with the best held-out log-likelihood per cell ``means``; of those within
    ``tie`` of the best, the largest (the most shrinkage: at equal predictions the estimate with
    fewer free domain deviations)."""
    means = np.asarray(means, dtype=np.float64)
    near = np.flatnonzero(means >= means.max() - tie)
    return int(near[np.argmax(np.asarray(grid, dtype=np.float64)[near])])


def _tune(correct, observed, slices, data, guessing, model, priors, stl, pooled, a, d, th_stl, eta_p, U,
          ranks, sizes, C_grid, holdout_share, max_heldout, min_gain_se, c_tie, cv_refit_items, refine_overall,
          centre_prior, seed, max_iter, tol, prog, max_extend):
    """Held-out choice of the rank and of ``C`` (see :func:`~mtlirt.estimators.mtl.fit_mtl`)."""
    from .baselines import pooled_penalties

    N, J = correct.shape
    K = len(slices)
    rng = np.random.default_rng(seed)
    n_obs = N * J if observed is None else int(np.count_nonzero(observed))
    n_held = int(min(round(holdout_share * n_obs), max_heldout))
    rows, cols = sample_cells(observed, (N, J), n_held, rng)
    held = (rows, cols)
    train = ResponseData(correct, observed, slices, guessing=guessing, exclude=held)
    one = ResponseData(correct, observed, [slice(0, J)], guessing=guessing, exclude=held, share=train)
    _, a_p, d_p = pooled.internal()
    refit = (N < 1000) if cv_refit_items == "auto" else bool(cv_refit_items)
    if refit:
        a_tr, d_tr, _ = calibrate_items(train, a, d, priors=priors, model=model,
                                            max_iter=max_iter, tol=tol)
        a_ptr, d_ptr, _ = calibrate_items(one, a_p, d_p, priors=pooled_penalties(priors), model=model,
                                              max_iter=max_iter, tol=tol)
    else:
        a_tr, d_tr = a, d
        a_ptr, d_ptr = a_p, d_p
    prog("cv", 0.2)
    lik = train.theta_likelihood()
    lik.set_items(a_tr, d_tr)
    th0 = theta_step(lik, th_stl, priors=priors)
    eta_tr, _ = score_theta(one, a_ptr, d_ptr, eta_p[:, None], priors=priors)
    eta_tr = eta_tr[:, 0]
    c = data.c
    pooled_cells = _pooled_cells((eta_tr, a_ptr, d_ptr, None if c is None else c), correct, rows, cols)
    item_domain = data.item_domain
    base = cell_loglik(correct, rows, cols, th0, a_tr, d_tr, c, item_domain)

    def se_of(x):
        return x.std(ddof=1) / math.sqrt(len(x)) if len(x) > 1 else np.inf

    def path(r, grid):
        # the alternating refinement of rank r > 1 converges slowly (oll_v1 proxy, rank 2:
        # 88 sweeps, 19 s); after 20 its centre is within 0.01 of the limit, far below what
        # moves a held-out comparison, so the tuning stops there
        A_tr, W_tr, _ = _centre_for_rank(lik, r, eta_tr, U, refine_overall, max_iter=20)
        if centre_prior:
            W_tr = _map_centre(lik, A_tr, W_tr, priors)
        centre = A_tr @ W_tr.T
        cells = {}
        th = th0
        for Cv in grid:
            if Cv == 0:
                cells[Cv] = base
                continue
            if not np.isfinite(Cv) and r == 1:
                cells[Cv] = pooled_cells
                continue
            lam, _ = _lambda(Cv, N, K, sizes)
            th, _, _ = prox_step(lik, th, centre, lam, priors=priors, tol=1e-5, psi_tol=1e-3)
            cells[Cv] = cell_loglik(correct, rows, cols, th, a_tr, d_tr, c, item_domain)
        return cells, (lik, centre, th)

    def choose(grid, cells):
        means = np.array([cells[Cv].mean() for Cv in grid])
        se = np.array([se_of(cells[Cv] - base) for Cv in grid])
        gain = means - base.mean()
        return grid[_best_C(grid, means, c_tie)], means, gain, se

    grid = sorted({float(c) for c in C_grid} | {0.0})
    rank_path = []
    best = None
    for n, r in enumerate(ranks):
        g = list(grid)
        cells, _ = path(r, g)
        chosen, means, gain, se = choose(g, cells)
        # the grid must not stop at its edge: extend beyond the largest finite C
        finite = [Cv for Cv in g if np.isfinite(Cv)]
        n_ext = 0
        at_edge = False
        while len(finite) > 1 and chosen == finite[-1]:
            if n_ext == max_extend:
                at_edge = True
                warnings.warn(f"mtl: the held-out optimum of C is still at the edge of the grid "
                              f"(C = {finite[-1]:g} after {n_ext} doublings); cv['at_edge'] is set",
                              RuntimeWarning, stacklevel=4)
                break
            Cn = 2.0 * finite[-1]
            c_extra, _ = path(r, [Cn])
            cells.update(c_extra)
            g = sorted(cells)
            finite.append(Cn)
            n_ext += 1
            chosen, means, gain, se = choose(g, cells)
        res = {"rank": r, "grid": g, "heldout_loglik": means, "gain": gain, "gain_se": se, "chosen": chosen,
               "at_edge": at_edge, "extended": n_ext, "cells": cells[chosen]}
        if best is None:
            best = res
            rank_path.append({"rank": r, "heldout_loglik": float(cells[chosen].mean()), "C": chosen,
                              "gain_over_previous": None, "gain_se": None})
        else:
            diff = cells[chosen] - best["cells"]
            gain_r, se_r = float(diff.mean()), float(se_of(diff))
            rank_path.append({"rank": r, "heldout_loglik": float(cells[chosen].mean()), "C": chosen,
                              "gain_over_previous": gain_r, "gain_se": se_r})
            if not gain_r > min_gain_se * se_r:
                break
            best = res
        prog("cv", 0.2 + 0.8 * (n + 1) / len(ranks))
    out = {k: v for k, v in best.items() if k != "cells"}
    out.update(n_heldout=len(rows), refit_items=refit, seed=seed, rank_path=rank_path)
    return out
