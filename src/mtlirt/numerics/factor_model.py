"""The rank-one factor model of the scorer and of MTL's reported scores, tabulated on fixed grids.

A fit's structure (each domain's loading on the overall score, its items' curves) is tabulated
once on the grids (``_tabulate``); ``factor_posterior`` then gives the grid posterior of the
overall score and of every domain score for any number of LLMs (the fit's every LLM, MTL;
one new LLM, :class:`mtlirt.evaluate.scoring.Scorer`), so a fitted LLM re-scored with its own
answers gets the fit's numbers. ``refined_posterior`` recomputes one LLM's posterior on grids
about its mass where the fixed spacing is too coarse.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .factor_grid import _moments, factor_grid_posterior
from .llm_side import EPS, curves, log_curves, normal_log_weights

__all__ = ["G_GRID", "LOG_PRIOR_G", "PSI_MIN", "T_GRID", "domain_sums", "factor_posterior", "grid_posterior",
           "overall_loadings", "overall_standardisation", "refined_posterior"]

#: Grid over the overall score (population scale).
G_GRID = np.linspace(-6.0, 6.0, 97)
#: Grid over each domain score (population scale).
T_GRID = np.linspace(-7.0, 7.0, 113)
#: Smallest domain-specific sd: a loading of 1 (a pooled structure) is kept just below it.
PSI_MIN = 0.15


def overall_loadings(L: np.ndarray) -> np.ndarray:
    """Correlation of each domain score with the overall score from factor loadings ``L`` (K, r) of
    unit-variance traits: ``L[:, 0]`` at rank one, else ``L lbar / |lbar|`` with ``lbar`` the mean
    loading row (the overall score is the shared part of the average domain trait, as
    :func:`mtlirt.bayes.derived.overall_score` defines it)."""
    L = np.asarray(L, dtype=np.float64)
    return L @ _overall_direction(L)


def _overall_direction(L: np.ndarray) -> np.ndarray:
    """The unit vector of the overall score among the factors of loadings ``L`` (K, r): ``lbar / |lbar|``, the
    first factor at rank one (or where the mean loading row vanishes)."""
    lbar = L.mean(axis=0)
    norm = np.linalg.norm(lbar)
    return lbar / norm if L.shape[1] > 1 and norm > 1e-12 else np.eye(L.shape[1])[0]


def domain_sums(dom: np.ndarray, rows: np.ndarray, K: int) -> np.ndarray:
    """``(K, ...)``: the sum of ``rows`` (n, ...) by their domains ``dom`` (n,), each run of one domain summed by
    one ``reduceat`` (``np.add.at`` row by row was most of a scoring pass's time)."""
    out = np.zeros((K,) + rows.shape[1:])
    if len(dom):
        starts = np.flatnonzero(np.r_[True, dom[1:] != dom[:-1]])
        np.add.at(out, dom[starts], np.add.reduceat(rows, starts, axis=0))  # runs of one domain apart add up
    return out


def overall_standardisation(eta: np.ndarray, L: np.ndarray) -> np.ndarray:
    """Per draw ``s`` the mean and sd over the LLMs of ``g``, the traits ``eta[s]`` (N, r) on the overall
    direction of the loadings ``L[s]`` (K, r) (that of :func:`overall_loadings`), (S, 2): a Bayesian fit's
    overall scores are ``g`` standardised by them draw by draw (:func:`mtlirt.bayes.derived.overall_score`),
    so a new LLM's ``g`` under draw ``s`` goes onto the fit's scale by the same two."""
    out = np.empty((len(eta), 2))
    for s, (e, Ls) in enumerate(zip(eta, L, strict=True)):
        g = e @ _overall_direction(Ls)
        out[s] = g.mean(), max(float(g.std()), 1e-12)
    return out


@dataclass
class _Structure:
    """One draw of the fixed structure, tabulated on the grids."""

    lam: np.ndarray  # (K,)
    psi: np.ndarray  # (K,)
    p: np.ndarray  # (J, Q) P(correct) on T_GRID
    logp: np.ndarray  # (J, Q)
    log1mp: np.ndarray  # (J, Q)
    acc: np.ndarray  # (K, Q): sum over the domain's items of P_j(t) / J
    pq: np.ndarray  # (K, Q): sum over the domain's items of P_j(t) (1 - P_j(t)) (Bernoulli variances)
    _W: np.ndarray | None = None
    items: tuple | None = None  # (a, d, c) on the population scale: the refined grid's curves

    @property
    def W(self) -> np.ndarray:
        """(K, G, Q): the conditional prior of each domain score given g, normalised over t."""
        if self._W is None:
            z = (T_GRID[None, None, :] - self.lam[:, None, None] * G_GRID[None, :, None]) / self.psi[:, None, None]
            W = np.exp(-0.5 * z * z)
            W /= W.sum(axis=-1, keepdims=True)
            self._W = W
        return self._W


def _tabulate(a, d, c, item_domain, lam, n_domains) -> _Structure:
    lam = np.clip(np.nan_to_num(np.asarray(lam, dtype=np.float64)), -np.sqrt(1 - PSI_MIN**2),
                  np.sqrt(1 - PSI_MIN**2))
    psi = np.sqrt(1.0 - lam**2)
    p = np.clip(curves(a, d, c, T_GRID), EPS, 1 - EPS)
    onehot = np.zeros((n_domains, len(a)))  # the sums over each domain's items as one matrix product
    onehot[item_domain, np.arange(len(a))] = 1.0
    acc = onehot @ p / len(a)
    pq = onehot @ (p * (1.0 - p))
    logp, log1mp = log_curves(p)
    items = tuple(np.asarray(x, dtype=np.float64) for x in (a, d, c))
    return _Structure(lam=lam, psi=psi, p=p, logp=logp, log1mp=log1mp, acc=acc, pq=pq, items=items)


# ------------------------------------------------------------------ posterior on the grid
LOG_PRIOR_G = normal_log_weights(G_GRID)


def factor_posterior(st: _Structure, logL: np.ndarray, answered: np.ndarray | None = None, *,
                     cond: bool = False):
    """The grid posterior of the rank-one factor model, for any number of LLMs at once.

    ``logL`` (N, K, Q) holds each LLM's log-likelihood of its answers in each
    domain on ``T_GRID``; ``answered`` (N, K) marks the cells with responses
    (the others' likelihood is 1: their posterior is the prior predictive given
    the other domains, through ``g``). Returns ``pg`` (N, G), the posterior of
    ``g``, and ``pt`` (N, K, Q), each domain score's marginal posterior; with
    ``cond`` also the conditionals given ``g`` (N, K, G, Q). The fit (every
    LLM of the leaderboard) and the :class:`Scorer` (one LLM) both call it, so
    a fitted LLM re-scored with its own answers gets the fit's numbers
    (:func:`mtlirt.numerics.factor_grid.factor_grid_posterior` computes them).
    """
    logL = np.asarray(logL, dtype=np.float64)
    N, K, Q = logL.shape
    seen = np.ones((N, K), dtype=bool) if answered is None else np.asarray(answered, dtype=bool)
    pg, pt = factor_grid_posterior(logL, seen, st.W, LOG_PRIOR_G)
    if not cond:
        return pg, pt
    L = np.where(seen[..., None], np.exp(logL - logL.max(axis=-1, keepdims=True)), 1.0)
    Z = np.maximum(np.matmul(L.transpose(1, 0, 2), st.W.transpose(0, 2, 1)).transpose(1, 0, 2), 1e-300)
    return pg, pt, st.W[None] * L[:, :, None, :] / Z[..., None]


def grid_posterior(st: _Structure, logL: np.ndarray, answered: np.ndarray | None = None):
    """One LLM's posterior of ``g`` (G,) and the conditionals of its domain scores given ``g`` (K, G, Q)
    (:func:`factor_posterior` for one LLM). ``logL`` (K, Q) is each domain's log-likelihood on
    ``T_GRID``; ``answered`` (K,) marks domains with responses."""
    pg, _, cond = factor_posterior(st, logL[None], None if answered is None else np.asarray(answered)[None],
                                   cond=True)
    return pg[0], cond[0]


def refined_posterior(st: _Structure, item_domain: np.ndarray, pos: np.ndarray, y: np.ndarray,
                      g_grid: np.ndarray, t_grids: np.ndarray):
    """One LLM's posterior on grids of its own: ``g_grid`` (G,) over the overall score, ``t_grids``
    (K, Q) one equally spaced grid per domain (population scale), each narrower than the fixed grids.

    The same model as :func:`factor_posterior`, its integrals over ``theta_k`` as sums of the density
    ``N(t; lambda_k g, psi_k^2)`` times the spacing (the windows need not hold the whole conditional
    prior, only the posterior's mass); a domain without answers keeps ``Z_k(g) = 1`` (its conditional,
    the prior, normalised over its grid). Returns ``pg`` (G,) and the domains' marginals ``pt`` (K, Q).
    """
    a, d, c = st.items
    K = len(t_grids)
    logL = np.zeros(t_grids.shape)
    if len(pos):
        p = c[pos, None] + (1 - c[pos, None]) / (1 + np.exp(-(a[pos, None] * t_grids[item_domain[pos]] + d[pos, None])))
        lp, l1p = log_curves(p)
        logL = domain_sums(item_domain[pos], np.where(np.asarray(y)[:, None] > 0, lp, l1p), K)
    answered = np.bincount(item_domain[pos], minlength=K) > 0
    z = (t_grids[:, None, :] - st.lam[:, None, None] * g_grid[None, :, None]) / st.psi[:, None, None]
    dens = np.exp(-0.5 * z * z) * ((t_grids[:, 1] - t_grids[:, 0]) / st.psi)[:, None, None]  # (K, G, Q)
    L = np.exp(logL - logL.max(axis=1, keepdims=True))
    WL = dens * L[:, None, :]
    Z = WL.sum(axis=-1)  # (K, G)
    prior = dens.sum(axis=-1)
    Z = np.where(answered[:, None], Z, prior)
    lp = -0.5 * g_grid**2 + np.log(np.maximum(Z[answered], 1e-300)).sum(axis=0)
    pg = np.exp(lp - lp.max())
    pg /= pg.sum()
    pt = np.einsum("g,kgq->kq", pg, WL / np.maximum(Z, 1e-300)[..., None])
    return pg, pt / pt.sum(axis=-1, keepdims=True)


def _windows(pg: np.ndarray, pt: np.ndarray, n_g: int, n_t: int):
    """Grids about the mass of a posterior (``pg`` on ``G_GRID``, ``pt`` on ``T_GRID``): the mean
    plus or minus eight sds and a spacing of the fixed grids, within the fixed grids' range."""
    def grid(mass, base, n):
        m, sd = _moments(mass, base)
        h = base[1] - base[0]
        lo, hi = np.maximum(m - 8 * sd - h, base[0]), np.minimum(m + 8 * sd + h, base[-1])
        return np.linspace(lo, hi, n, axis=-1)
    return grid(pg, G_GRID, n_g), grid(pt, T_GRID, n_t)
