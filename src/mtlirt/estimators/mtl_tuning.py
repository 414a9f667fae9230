"""MTL's held-out tuning: its settings (:class:`MTLTuning`), the rank and ``C`` chosen by the log-likelihood of
held-out responses (:func:`_tune`) on cells held out by :func:`mtlirt.data.cells.held_out_cells`."""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

from ..data.cells import held_out_cells
from ..errors import InputError
from .baselines import pooled_penalties
from .calibration import calibrate_items
from .centre import _centre_for_rank, _lambda, _map_centre, prox_step
from .heldout import cell_loglik
from .response_data import ResponseData
from .trait_scoring import score_theta, theta_likelihood, theta_step

__all__ = ["DEFAULT_C_GRID", "MTLTuning"]

DEFAULT_C_GRID = (0.0, 0.05, 0.1, 0.2, 0.4, 0.8, 1.6, math.inf)


@dataclass(frozen=True)
class MTLTuning:
    """How :func:`~mtlirt.estimators.mtl.fit_mtl` chooses its rank and ``C`` by held-out responses.

    Parameters
    ----------
    C_grid : sequence of float
        Candidates (``0`` is the STL fit, ``inf`` the fused fit: at rank one the
        pooled fit).  When the largest finite ``C`` wins the grid is extended
        (doubling, up to ``max_extend`` times); ``cv["at_edge"]`` records an
        optimum still at the edge (and a warning is issued).
    holdout_share : float
        Share of observed responses held out for tuning ...
    max_heldout : int
        ... but at most this many cells.
    min_gain_se : float
        A rank ``r > 1`` must beat the rank ``r - 1`` by this many paired
        standard errors of the held-out gain.
    c_tie : float
        ``C`` is the held-out argmax; values whose held-out log-likelihood per
        cell is within ``c_tie`` of the best count as tied (the solver's
        tolerances move it by less than ``1e-6``), and the largest of them is
        taken.
    cv_refit_items : bool or "auto"
        Recalibrate the items on the training responses during tuning
        (``"auto"``: when ``N < 1000``; with more LLMs a held-out cell barely
        moves its item and the full-data items are reused).
    max_rank : int
        Largest rank the held-out selection tries (also capped by parallel
        analysis of the STL traits, which only bounds the search).
    max_extend : int
        Doublings of the grid's largest finite ``C`` at most.

    Raises
    ------
    InputError
        A setting out of its range, named.
    """

    C_grid: tuple = DEFAULT_C_GRID
    holdout_share: float = 0.1
    max_heldout: int = 300_000
    min_gain_se: float = 2.0
    c_tie: float = 1e-5
    cv_refit_items: bool | str = "auto"
    max_rank: int = 4
    max_extend: int = 6

    def __post_init__(self):
        grid = tuple(self.C_grid)
        if not grid or any(isinstance(c, bool) or not isinstance(c, (int, float, np.number)) or not c >= 0
                           for c in grid):
            raise InputError(f"C_grid must hold one or more numbers >= 0 (inf allowed), got {self.C_grid!r}")
        object.__setattr__(self, "C_grid", grid)
        if not _number(self.holdout_share) or not 0 < self.holdout_share < 1:
            raise InputError(f"holdout_share must be a number in (0, 1), got {self.holdout_share!r}")
        for name, low in (("max_heldout", 1), ("max_rank", 1), ("max_extend", 0)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < low:
                raise InputError(f"{name} must be an integer >= {low}, got {v!r}")
        for name in ("min_gain_se", "c_tie"):
            v = getattr(self, name)
            if not _number(v) or not 0 <= v < math.inf:
                raise InputError(f"{name} must be a finite number >= 0, got {v!r}")
        refit = self.cv_refit_items
        if not (isinstance(refit, (bool, np.bool_)) or (isinstance(refit, str) and refit == "auto")):
            raise InputError(f"cv_refit_items must be True, False or 'auto', got {self.cv_refit_items!r}")


def _number(v) -> bool:
    return not isinstance(v, bool) and isinstance(v, (int, float, np.number))



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


class _HeldOut:
    """The held-out problem of the tuning: the cells held out, the items and traits fitted without them, and
    the held-out log-likelihood of those cells along a grid of ``C`` at a rank (:meth:`path`)."""

    def __init__(self, correct, observed, slices, data, guessing, model, priors, stl, pooled, U, sizes,
                 tuning: MTLTuning, refine_overall, centre_prior, seed, max_iter, tol, prog):
        N, J = correct.shape
        rng = np.random.default_rng(seed)
        n_obs = N * J if observed is None else int(np.count_nonzero(observed))
        n_held = int(min(round(tuning.holdout_share * n_obs), tuning.max_heldout))
        self.rows, self.cols = held_out_cells(observed, (N, J), rng, n=n_held)
        held = (self.rows, self.cols)
        train = ResponseData(correct, observed, slices, guessing=guessing, exclude=held)
        one = ResponseData(correct, observed, [slice(0, J)], guessing=guessing, exclude=held, share=train)
        refit = (N < 1000) if tuning.cv_refit_items == "auto" else bool(tuning.cv_refit_items)
        a_tr, d_tr, a_ptr, d_ptr = _training_items(train, one, stl, pooled, priors, model, refit, max_iter, tol)
        prog("cv", 0.2)
        self.lik = theta_likelihood(train)
        self.lik.set_items(a_tr, d_tr)
        self.th0 = theta_step(self.lik, stl.internal()[0], priors=priors)
        eta_tr, _ = score_theta(one, a_ptr, d_ptr, pooled.internal()[0][:, 0][:, None], priors=priors)
        self.eta_tr = eta_tr[:, 0]
        c = data.c
        self.pooled_cells = _pooled_cells((self.eta_tr, a_ptr, d_ptr, None if c is None else c), correct,
                                          self.rows, self.cols)
        self.cell_args = (correct, self.rows, self.cols, a_tr, d_tr, c, data.item_domain)
        self.base = self.cells(self.th0)
        self.refit, self.U, self.sizes, self.N, self.K = refit, U, sizes, N, len(slices)
        self.priors, self.refine_overall, self.centre_prior, self.c_tie = (priors, refine_overall, centre_prior,
                                                                           tuning.c_tie)

    def cells(self, theta):
        """Held-out log-likelihood of every held-out cell at the traits ``theta`` (training items)."""
        correct, rows, cols, a, d, c, item_domain = self.cell_args
        return cell_loglik(correct, rows, cols, theta, a, d, c, item_domain)

    def path(self, r, grid):
        """Held-out cells' log-likelihood at each ``C`` of ``grid`` (ascending) at rank ``r``, each ``C``'s
        traits from the previous one's."""
        # the alternating refinement of rank r > 1 converges slowly (oll_v1 proxy, rank 2:
        # 88 sweeps, 19 s); after 20 its centre is within 0.01 of the limit, far below what
        # moves a held-out comparison, so the tuning stops there
        A_tr, W_tr, _ = _centre_for_rank(self.lik, r, self.eta_tr, self.U, self.refine_overall, max_iter=20)
        if self.centre_prior:
            W_tr = _map_centre(self.lik, A_tr, W_tr, self.priors)
        centre = A_tr @ W_tr.T
        cells = {}
        th = self.th0
        for Cv in grid:
            if Cv == 0:
                cells[Cv] = self.base
                continue
            if not np.isfinite(Cv) and r == 1:
                cells[Cv] = self.pooled_cells
                continue
            lam, _ = _lambda(Cv, self.N, self.K, self.sizes)
            th, _, _ = prox_step(self.lik, th, centre, lam, priors=self.priors, tol=1e-5, psi_tol=1e-3)
            cells[Cv] = self.cells(th)
        return cells

    def choose(self, grid, cells):
        """The chosen ``C`` (:func:`_best_C`), the mean held-out log-likelihood per ``C``, its gain over
        ``C = 0`` and the gain's paired standard error."""
        means = np.array([cells[Cv].mean() for Cv in grid])
        se = np.array([_se(cells[Cv] - self.base) for Cv in grid])
        gain = means - self.base.mean()
        return grid[_best_C(grid, means, self.c_tie)], means, gain, se


def _training_items(train, one, stl, pooled, priors, model, refit, max_iter, tol):
    """The items of the domains (``a, d``) and of the pooled fit without the held-out cells: recalibrated
    on the training responses from the full-data items when ``refit``, else the full-data items."""
    _, a, d = stl.internal()
    _, a_p, d_p = pooled.internal()
    if not refit:
        return a, d, a_p, d_p
    a_tr, d_tr, _ = calibrate_items(train, a, d, priors=priors, model=model, max_iter=max_iter, tol=tol)
    a_ptr, d_ptr, _ = calibrate_items(one, a_p, d_p, priors=pooled_penalties(priors), model=model,
                                      max_iter=max_iter, tol=tol)
    return a_tr, d_tr, a_ptr, d_ptr


def _se(x):
    """Standard error of the mean of ``x`` (inf for fewer than two values)."""
    return x.std(ddof=1) / math.sqrt(len(x)) if len(x) > 1 else np.inf


def _rank_grid(held: _HeldOut, r, C_grid, max_extend):
    """The held-out choice of ``C`` at rank ``r``: along ``C_grid`` (with 0), extended beyond its largest
    finite ``C`` while that wins, at most ``max_extend`` doublings (then flagged ``at_edge`` and warned)."""
    g = sorted({float(c) for c in C_grid} | {0.0})
    cells = held.path(r, g)
    chosen, means, gain, se = held.choose(g, cells)
    # the grid must not stop at its edge: extend beyond the largest finite C
    finite = [Cv for Cv in g if np.isfinite(Cv)]
    n_ext = 0
    at_edge = False
    while len(finite) > 1 and chosen == finite[-1]:
        if n_ext == max_extend:
            at_edge = True
            warnings.warn(f"mtl: the held-out optimum of C is still at the edge of the grid "
                          f"(C = {finite[-1]:g} after {n_ext} doublings); cv['at_edge'] is set",
                          RuntimeWarning, stacklevel=6)  # fit_mtl's caller
            break
        Cn = 2.0 * finite[-1]
        cells.update(held.path(r, [Cn]))
        g = sorted(cells)
        finite.append(Cn)
        n_ext += 1
        chosen, means, gain, se = held.choose(g, cells)
    return {"rank": r, "grid": g, "heldout_loglik": means, "gain": gain, "gain_se": se, "chosen": chosen,
            "at_edge": at_edge, "extended": n_ext, "cells": cells[chosen]}


def _tune(correct, observed, slices, data, guessing, model, priors, stl, pooled, U, ranks, sizes, C_grid,
          tuning: MTLTuning, refine_overall, centre_prior, seed, max_iter, tol, prog):
    """Held-out choice of the rank and of ``C`` (see :func:`~mtlirt.estimators.mtl.fit_mtl`): each rank in
    turn at its best ``C`` (:func:`_rank_grid`), a rank above the previous one kept only for a gain of
    ``tuning.min_gain_se`` paired standard errors; ``C_grid`` is ``tuning.C_grid`` or the one given ``C``."""
    held = _HeldOut(correct, observed, slices, data, guessing, model, priors, stl, pooled, U, sizes, tuning,
                    refine_overall, centre_prior, seed, max_iter, tol, prog)
    rank_path = []
    best = None
    for n, r in enumerate(ranks):
        res = _rank_grid(held, r, C_grid, tuning.max_extend)
        step = {"rank": r, "heldout_loglik": float(res["cells"].mean()), "C": res["chosen"],
                "gain_over_previous": None, "gain_se": None}
        rank_path.append(step)
        if best is None:
            best = res
        else:
            diff = res["cells"] - best["cells"]
            step["gain_over_previous"], step["gain_se"] = float(diff.mean()), float(_se(diff))
            if not step["gain_over_previous"] > tuning.min_gain_se * step["gain_se"]:
                break
            best = res
        prog("cv", 0.2 + 0.8 * (n + 1) / len(ranks))
    out = {k: v for k, v in best.items() if k != "cells"}
    out.update(n_heldout=len(held.rows), refit_items=held.refit, seed=seed, rank_path=rank_path)
    return out
