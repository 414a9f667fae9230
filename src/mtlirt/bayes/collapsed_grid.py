"""The nodes of the collapsed likelihood's two integrals, placed before sampling.

* inner, per cell: a trapezoid rule, ``Q`` equally spaced nodes ``t_ikq``
  (at most ``INNER_STEP`` conditional sds apart, at the smallest residual sd
  ``psi_k`` the structure's posterior reaches) spanning the cell's
  posterior of ``theta_ik`` (mean +- ``inner_half_width`` sds, widened by
  the reach of the outer nodes), weights ``w_ikq = exp(l_ik(t_ikq) - max_q
  l_ik)``;
* outer, per LLM: nodes ``eta_ig = mu_i + L_i u_g`` (``L_i`` the Cholesky
  factor of the LLM's posterior covariance of ``eta_i``), ``u_g`` the
  Gauss-Hermite nodes of ``N(0, I)`` (``N_OUTER`` per axis, ``N_OUTER_FEW``
  with fewer than ``FEW_DOMAINS`` domains, whose LLM posteriors are less
  Gaussian), weights ``N(eta_ig; 0, I) |L_i| w_g / phi(u_g)``. The exact
  draws need equally spaced nodes instead (:func:`draw_grid`).

The nodes are placed at the posterior mode of the structure, where the
conditionals move little over the structure's posterior. An LLM answered in
one domain only has a likelihood that does not depend on the structure
(``|Lambda_k|^2 + psi_k^2 = 1``) but a skewed posterior whose quadrature error
would move with the loadings: such LLMs are left out of the structure's
density (:func:`informative_llms`) and kept for the draws.
The trapezoid rule integrates the conditional prior ``N(theta; m, psi_k^2)``
to a relative error of about ``2 exp(-2 pi^2 psi_k^2 / h^2)`` (step ``h``):
negligible at ``h <= psi_k``, but it grows fast below, and the density's
quadrature then overstates the likelihood (by thousands of nats over
thousands of LLMs where loadings near 1 leave ``psi_k`` a fraction of the
step). So the nodes are spaced for the smallest ``psi_k`` within
``PSI_REACH`` posterior sds of the mode (:func:`psi_reach`), and the
structure's density is not evaluated where a ``psi_k`` falls below what the
nodes resolve (:meth:`CollapsedGrid.resolvable_psi`).
:func:`quadrature_check` measures what is left: the same integrals on a finer,
wider grid at posterior draws of the structure.
"""

from __future__ import annotations

import dataclasses
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from mtlirt.bayes.collapsed_kernel import _EMPTY2, _LOGW_MIN, RESOLVE, CollapsedGrid, _call, collapsed_kernel
from mtlirt.bayes.marginal import _likelihood_gaussian, quadrature_nodes
from mtlirt.numerics.llm_side import cell_quadrature, gauss_hermite

__all__ = [
    "N_INNER",
    "N_OUTER",
    "build_grid",
    "grid_subset",
    "informative_llms",
    "llm_logliks",
    "llm_posteriors",
    "llm_subset",
    "outer_axis",
    "posterior_moments",
    "psi_reach",
    "quadrature_check",
    "regrid",
    "with_outer",
]

N_INNER = 11
MAX_INNER = 91
INNER_HALF_WIDTH = 5.0
INNER_STEP = 1.0
# the nodes resolve the residual sds within this many posterior sds of the mode (in the sampling
# coordinates; CollapsedGrid.resolvable_psi bounds the density's domain beyond)
PSI_REACH = 4.0
N_OUTER = {1: 4, 2: 4}
N_OUTER_FEW = {1: 8, 2: 6}
FEW_DOMAINS = 16
N_TRAPEZOID_OUTER = {1: 9, 2: 7}
OUTER_HALF_WIDTH = {1: 4.8, 2: 4.2}


# ---------------------------------------------------------------------------
# the grid
# ---------------------------------------------------------------------------


def _offsets(rank: int, n_axis: int, half_width: float, rule: str = "trapezoid"):
    """Whitened offsets (G, r), log weights of the rule against ``N(0, I)``
    (G,) (``log w_g - log phi(u_g)``: trapezoid ``r log h``), and the step."""
    if rule == "hermite":
        x, lw = gauss_hermite(int(n_axis))
        lw1 = lw + 0.5 * x**2 + 0.5 * np.log(2 * np.pi)
        h = 0.0
    elif rule == "trapezoid":
        x = np.linspace(-half_width, half_width, n_axis)
        h = float(x[1] - x[0])
        lw1 = np.full(n_axis, np.log(h))
    else:
        raise ValueError(f"unknown outer rule {rule!r}")
    grids = np.meshgrid(*([x] * rank), indexing="ij")
    lws = np.meshgrid(*([lw1] * rank), indexing="ij")
    return np.stack([g.reshape(-1) for g in grids], axis=1), sum(g.reshape(-1) for g in lws), h


def _inner(tables, mean: np.ndarray, half: np.ndarray, n_inner: int):
    step = 2.0 * half / (int(n_inner) - 1)
    start = mean - half
    logw, logscale = cell_quadrature(tables, start, step, n_inner)
    np.maximum(logw, _LOGW_MIN, out=logw)
    return (np.ascontiguousarray(start.T), np.ascontiguousarray(step.T),
            np.ascontiguousarray(logscale.T), np.ascontiguousarray(logw.transpose(1, 2, 0), dtype=np.float32))


def _outer(mu: np.ndarray, cov: np.ndarray, n_axis: int, half_width: float, rule: str = "trapezoid"):
    """mu (N, r), cov (N, r, r) -> the outer arrays."""
    N, r = mu.shape
    offsets, lw, h = _offsets(r, n_axis, half_width, rule)
    L = np.linalg.cholesky(cov)
    eta = mu[:, None, :] + np.einsum("njl,gl->ngj", L, offsets)  # N G r
    logdet = np.log(np.abs(np.diagonal(L, axis1=1, axis2=2))).sum(1)
    logomega = (-0.5 * (eta**2).sum(-1) - 0.5 * r * np.log(2 * np.pi) + logdet[:, None] + lw[None, :])
    return (np.ascontiguousarray(mu.T), np.ascontiguousarray(L.transpose(1, 2, 0)), offsets,
            np.ascontiguousarray(logomega.T), h)


def _gaussian_cov(info: np.ndarray, lam: np.ndarray, psi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The cells' weights (N, K) and each LLM's posterior covariance of ``eta_i`` (N, r, r) from the
    cells' Gaussian likelihoods of information ``info``: ``that_ik ~ N(Lambda_k eta, psi_k^2 + 1 / I_ik)``."""
    with np.errstate(divide="ignore"):
        wgt = np.where(info > 1e-8, 1.0 / (psi[None, :] ** 2 + 1.0 / np.maximum(info, 1e-300)), 0.0)
    prec = np.eye(lam.shape[1])[None] + np.einsum("nk,kj,kl->njl", wgt, lam, lam)
    return wgt, np.linalg.inv(prec)


def _gaussian_start(tables, quad: dict, lam: np.ndarray, psi: np.ndarray):
    """Gaussian approximation of each LLM's posterior of ``eta_i`` and of each
    cell's posterior of ``theta_ik`` from the cells' own Gaussian likelihoods."""
    info, that = _likelihood_gaussian(quad)
    wgt, cov = _gaussian_cov(info, lam, psi)
    mu = np.einsum("njl,nl->nj", cov, np.einsum("nk,kj->nj", wgt * that, lam))
    return mu, cov


def build_grid(tables, lam: np.ndarray, psi: np.ndarray, *, quad: dict | None = None,
               mu: np.ndarray | None = None, cov: np.ndarray | None = None,
               theta_mean: np.ndarray | None = None, theta_sd: np.ndarray | None = None,
               info: np.ndarray | None = None,
               n_inner: int = N_INNER, inner_half_width: float = INNER_HALF_WIDTH,
               n_outer: int | None = None, outer_half_width: float | None = None,
               outer_rule: str = "hermite", psi_low: np.ndarray | None = None) -> CollapsedGrid:
    """The nodes of the two integrals at the structure ``(lam, psi)``.

    Parameters
    ----------
    tables : LikelihoodTables
    lam : ndarray (K, r)
    psi : ndarray (K,)
    quad : dict, optional
        :func:`mtlirt.bayes.marginal.quadrature_nodes` at a start point (for
        the Gaussian approximations placing a first grid).
    mu, cov : ndarray (N, r), (N, r, r), optional
        Posterior moments of the overall traits (else Gaussian approximations).
    theta_mean, theta_sd : ndarray (N, K), optional
        Posterior moments of the domain scores (else Gaussian approximations).
    n_inner, inner_half_width, n_outer, outer_half_width
        Nodes per cell (at least: the cell's nodes are at most
        ``INNER_STEP`` conditional sds apart) and per axis, and the spans in
        sds (the outer span sets the inner nodes' reach and bounds the
        draws of the overall traits).
    outer_rule : {"hermite", "trapezoid"}
        Gauss-Hermite nodes (the likelihood: by default 4 per axis with
        ``FEW_DOMAINS`` domains or more, else 8 at rank 1 and 6 at rank 2:
        with few domains an LLM's posterior of its overall trait is further
        from Gaussian) or equally spaced nodes (``N_TRAPEZOID_OUTER`` per
        axis: the quadrature check's fine grid).
    psi_low : ndarray (K,), optional
        The smallest residual sds the grid will be evaluated at
        (:func:`psi_reach`): the inner nodes are spaced for the conditional
        sds there (default ``psi``).

    Returns
    -------
    CollapsedGrid
    """
    r = lam.shape[1]
    K = lam.shape[0]
    table = (N_OUTER if K >= FEW_DOMAINS else N_OUTER_FEW) if outer_rule == "hermite" else N_TRAPEZOID_OUTER
    n_outer = table.get(r, 7) if n_outer is None else int(n_outer)
    outer_half_width = OUTER_HALF_WIDTH.get(r, 4.2) if outer_half_width is None else float(outer_half_width)
    if info is None or mu is None or cov is None or theta_mean is None:
        if quad is None:
            quad = quadrature_nodes(tables, np.zeros(tables.s.shape), psi)
        info, that = _likelihood_gaussian(quad)
        g_mu, g_cov = _gaussian_start(tables, quad, lam, psi)
        mu = g_mu if mu is None else mu
        cov = g_cov if cov is None else cov
        if theta_mean is None:
            pp = 1.0 / psi[None, :] ** 2
            theta_mean = (info * that + (mu @ lam.T) * pp) / (info + pp)
    # inner nodes: the cell's conditional given the overall trait (sd sd_c)
    # wherever the outer nodes put its prior mean, +- inner_half_width sd_c
    pp = 1.0 / psi[None, :] ** 2
    sd_c = 1.0 / np.sqrt(info + pp)
    shift = (pp / (info + pp)) * np.sqrt(np.maximum(np.einsum("kj,njl,kl->nk", lam, cov, lam), 0.0))
    half = inner_half_width * sd_c + outer_half_width * shift
    if theta_sd is not None:  # explicit spans (the fine grid of the check)
        half = inner_half_width * theta_sd
    else:
        psi_use = psi if psi_low is None else np.minimum(psi, psi_low)
        sd_low = sd_c if psi_low is None else 1.0 / np.sqrt(info + 1.0 / psi_use[None, :] ** 2)
        need = int(np.ceil(np.quantile(half / sd_low, 0.99) / INNER_STEP))  # steps per half span
        # and every domain's residual sd resolved (CollapsedGrid.resolvable_psi), which the quantile over
        # all cells misses where one domain's spans are the widest (few items, loadings near 1)
        need = max(need, int(np.ceil(RESOLVE * np.max(np.quantile(half, 0.99, axis=0) / psi_use))))
        n_inner = int(min(max(n_inner, 2 * need + 1), MAX_INNER))
    start, step, logscale, logw = _inner(tables, theta_mean, half, n_inner)
    mu_t, chol, offsets, logomega, h = _outer(mu, cov, n_outer, outer_half_width, outer_rule)
    return CollapsedGrid(start=start, step=step, logscale=logscale, logw=logw, mu=mu_t, chol=chol,
                         offsets=offsets, logomega=logomega, n_axis=int(n_outer), outer_step=h, info=info,
                         rule=outer_rule, outer_half_width=float(outer_half_width))


def outer_axis(grid: CollapsedGrid) -> tuple[np.ndarray, np.ndarray]:
    """One axis of the grid's outer rule: its whitened nodes ``x`` (n,) and log
    weights ``lw`` against ``N(0, 1)`` (``int f(u) phi(u) du ~ sum exp(lw) f(x)``)."""
    offsets, lw1, _ = _offsets(1, grid.n_axis, grid.outer_half_width, grid.rule)
    x = offsets[:, 0]
    return x, lw1 - 0.5 * x**2 - 0.5 * np.log(2 * np.pi)


def with_outer(grid: CollapsedGrid, n_outer: int, rule: str = "trapezoid") -> CollapsedGrid:
    """The grid with ``n_outer`` outer nodes per axis around the same centres, with the same inner
    nodes: equally spaced over its own span (a fine reference for the outer integral and the overall
    traits' draws), or ``rule="hermite"``: Gauss-Hermite."""
    Lc = grid.chol.transpose(2, 0, 1)
    mu, chol, offsets, logomega, h = _outer(grid.mu.T, Lc @ Lc.transpose(0, 2, 1), int(n_outer),
                                            grid.outer_half_width, rule)
    return dataclasses.replace(grid, mu=mu, chol=chol, offsets=offsets, logomega=logomega, n_axis=int(n_outer),
                               outer_step=h, rule=rule)


def posterior_moments(grid: CollapsedGrid, lam: np.ndarray, psi: np.ndarray):
    """Posterior mean and covariance of every ``eta_i`` and mean and sd of every
    ``theta_ik`` given the structure, by the grid's quadrature:
    ``mu`` (N, r), ``cov`` (N, r, r), ``theta_mean``, ``theta_sd`` (N, K)."""
    N, K = grid.shape
    G = grid.offsets.shape[0]
    nodes = np.empty((G, N))
    _, m1, m2 = _call(grid, lam, psi, mode=2, node_out=nodes, moments=True)
    w = np.exp(nodes - nodes.max(0))
    w /= w.sum(0)
    eta = grid.mu[None] + np.einsum("jln,gl->gjn", grid.chol, grid.offsets)  # G r N
    mu = np.einsum("gn,gjn->nj", w, eta)
    dev = eta - mu.T[None]
    cov = np.einsum("gn,gjn,gln->njl", w, dev, dev)
    sd = np.sqrt(np.maximum(m2 - m1**2, 1e-12))
    return mu, cov, m1.T, sd.T


def llm_logliks(grid: CollapsedGrid, lam: np.ndarray, psi: np.ndarray) -> np.ndarray:
    """``log p(y_i | Lambda)`` per LLM (N,) by the grid's quadrature (the kernel)."""
    from scipy.special import logsumexp

    nodes = np.empty((grid.offsets.shape[0], grid.shape[0]))
    _call(grid, lam, psi, mode=0, node_out=nodes)
    return logsumexp(nodes, axis=0)


def informative_llms(tables) -> np.ndarray:
    """The LLMs answered in two domains or more (indices). An LLM answered in
    one domain (or none) has the likelihood ``integral exp(l_ik(t)) N(t; 0, 1)
    dt`` whatever the structure (``|Lambda_k|^2 + psi_k^2 = 1``): it says
    nothing about the loadings, and its quadrature could only add an error
    that moves with them (on the Open LLM Leaderboard the GSM8K-only LLMs,
    all wrong, whose posterior of ``eta_i`` is skewed: 0.01-0.09 each)."""
    flat = ~np.any(tables.F != 0, axis=1)
    answered = ~((tables.s == 0) & flat[tables.table])
    return np.flatnonzero(answered.sum(1) >= 2)


def grid_subset(grid: CollapsedGrid, idx: np.ndarray) -> CollapsedGrid:
    """The grid of the LLMs ``idx`` only."""
    c = np.ascontiguousarray
    return dataclasses.replace(grid, start=c(grid.start[:, idx]), step=c(grid.step[:, idx]),
                               logscale=c(grid.logscale[:, idx]), logw=c(grid.logw[:, :, idx]),
                               expw=c(grid.expw[:, :, idx]), deep=c(grid.deep[:, idx]), mu=c(grid.mu[:, idx]),
                               chol=c(grid.chol[:, :, idx]),
                               logomega=c(grid.logomega[:, idx]), info=None if grid.info is None else grid.info[idx])


def llm_subset(grid: CollapsedGrid, tables, idx: np.ndarray):
    """The grid and tables of the LLMs ``idx`` only: ``(grid, tables)``."""
    t = dataclasses.replace(tables, s=tables.s[idx], const=tables.const[idx], table=tables.table[idx])
    return grid_subset(grid, idx), t


def psi_reach(xc: np.ndarray, sd: np.ndarray, K: int, layout, reach: float = PSI_REACH) -> np.ndarray:
    """The smallest residual sd of each domain (K,) over the box ``xc +-
    reach sd`` of the structure's sampling coordinates (the Laplace
    approximation's centre and sds): ``psi_k = (1 + |V_k|^2)^(-1/2)`` is
    smallest where every ``|V_kj|`` is largest, at a corner of the box."""
    rows, cols, drows = layout
    r = len(drows)
    n_free = len(rows)
    lo, hi = xc - reach * sd, xc + reach * sd
    V = np.zeros((K, r))
    V[rows, cols] = np.sinh(np.maximum(np.abs(lo[:n_free]), np.abs(hi[:n_free])))
    V[drows, np.arange(r)] = np.sinh(np.exp(hi[n_free:]))
    return 1.0 / np.sqrt(1.0 + (V**2).sum(-1))


def _placement(grid: CollapsedGrid) -> tuple:
    """Where ``grid`` is placed: the overall traits' centres (N, r) and covariances (N, r, r), the cells'
    centres and half spans (N, K)."""
    half = 0.5 * grid.step.T * (grid.logw.shape[1] - 1)
    Lc = grid.chol.transpose(2, 0, 1)
    return grid.mu.T, Lc @ Lc.transpose(0, 2, 1), grid.start.T + half, half


def _respaced(grid: CollapsedGrid, tables, lam, psi, **kw) -> CollapsedGrid:
    """``grid``, or where its inner nodes do not resolve a residual sd of ``psi``
    (:meth:`~mtlirt.bayes.collapsed_kernel.CollapsedGrid.resolvable_psi`) the same placement with its
    inner nodes spaced for ``psi``. Below what they resolve, the nodes' sum overstates the likelihood
    wherever an overall trait's node puts a cell's prior mean on an inner node: the LLM's posterior
    weights pile onto one outer node, and moments read there collapse (on a leaderboard of one-item
    pseudo-domains, a mode search from residual sds of 0.31 to 0.034 left a fifth of the LLMs with
    posterior sds of their overall trait below 0.02 where brute force gives 0.28-0.48, and their
    likelihoods up to 12 nats short in every later grid)."""
    if np.all(psi >= grid.resolvable_psi()):
        return grid
    mu, cov, centre, _ = _placement(grid)
    return build_grid(tables, lam, psi, mu=mu, cov=cov, theta_mean=centre, info=grid.info, **kw)


def regrid(grid: CollapsedGrid, tables, lam, psi, **kw) -> CollapsedGrid:
    """A grid re-centred on the exact posterior moments at ``(lam, psi)``.

    The moments are the quadrature's on ``grid``. Where an LLM's posterior
    lies beyond ``grid``'s nodes for it, they are wrong, and the grid built
    from them too: on the Open LLM Leaderboard (4 domains) a grid placed by
    the start point's Gaussian approximations (loadings 0.95, a domain
    answered all right pulling the LLM's overall trait up) left 6 LLMs with a
    posterior sd of 0.005 at the structure's mode (by brute force: 0.12),
    their likelihood 2.4 too small, by amounts that moved with the structure.
    So the moments are also computed on a fresh grid placed by the cells'
    Gaussian approximations at ``(lam, psi)``, and each LLM keeps those of the
    grid that integrates its likelihood to more (a quadrature placed away
    from the mass misses some of it). Both are read only at residual sds
    their inner nodes resolve: a grid placed where the residual sds were
    larger is first spaced again for ``psi`` (:func:`_respaced`)."""
    r = lam.shape[1]
    grid = _respaced(grid, tables, lam, psi, **kw)
    mu, cov, tm, _ = posterior_moments(grid, lam, psi)
    info = grid.info
    fresh = build_grid(tables, lam, psi, quad=quadrature_nodes(tables, mu @ lam.T, psi), **kw)
    better = llm_logliks(fresh, lam, psi) > llm_logliks(grid, lam, psi)
    if better.any():
        mu_f, cov_f, tm_f, _ = posterior_moments(fresh, lam, psi)
        mu[better], cov[better], tm[better] = mu_f[better], cov_f[better], tm_f[better]
        info = np.where(better[:, None], fresh.info, info)
    cov = cov + 1e-10 * np.eye(r)[None]
    return build_grid(tables, lam, psi, mu=mu, cov=cov, theta_mean=tm, info=info, **kw)


def llm_posteriors(tables, quad: dict, lam: np.ndarray, psi: np.ndarray):
    """Every LLM's posterior mean (N, r) and covariance (N, r, r) of its overall
    trait under the population prior ``N(0, I)`` at the structure ``(lam, psi)``:
    the quadrature of a grid placed by the cells' Gaussian approximations
    (``quad``: :func:`mtlirt.bayes.marginal.quadrature_nodes` at a start point),
    re-centred on its own moments (:func:`regrid`)."""
    grid = regrid(build_grid(tables, lam, psi, quad=quad), tables, lam, psi)
    mu, cov, _, _ = posterior_moments(grid, lam, psi)
    return mu, cov


# ---------------------------------------------------------------------------
# accuracy
# ---------------------------------------------------------------------------


def quadrature_check(grid: CollapsedGrid, tables, lam: np.ndarray, psi: np.ndarray, *,
                     n_draws: int = 8, fine: dict | None = None, cores: int = 1) -> dict:
    """The working grid against a finer and wider one at posterior draws of the
    structure.

    Parameters
    ----------
    grid : CollapsedGrid
    tables : LikelihoodTables
    lam, psi : ndarray (S, K, r), (S, K)
        Structure draws (a spread subset is used).
    n_draws : int
    fine : dict, optional
        Settings of the fine grid (default: equally spaced outer nodes, twice
        as many per unit as ``N_TRAPEZOID_OUTER`` and half as wide again;
        inner nodes twice as dense and half as wide again: steps of at most
        half a conditional sd, whose own error is negligible; three times as
        dense gave the same figures to 1e-4 nats at three times the cost).
        Its outer nodes cover each LLM's overall trait where the working grid
        placed it, or wider where the cells' Gaussian approximations spread it
        more (:func:`_covering`): a placement that collapsed is checked too.
    cores : int
        Draws checked at a time (the kernel releases the GIL).

    Returns
    -------
    dict
        ``max_abs_diff`` (largest |fine - working| of the total
        log-likelihood over the draws), ``spread_diff`` (its max - min over
        the draws: what could move the posterior), ``max_abs_diff_per_llm``,
        ``n_draws``, ``llms_placed_wider`` (by :func:`_covering`), ``seconds``.
    """
    t0 = time.perf_counter()
    S = lam.shape[0]
    pick = np.unique(np.linspace(0, S - 1, min(n_draws, S)).round().astype(int))
    Q = grid.logw.shape[1]
    n_out = N_TRAPEZOID_OUTER.get(grid.rank, 7)
    fine = fine or {"n_inner": 2 * (Q - 1) + 1, "inner_half_width": 1.5, "outer_rule": "trapezoid",
                    "n_outer": 2 * (n_out - 1) + 1, "outer_half_width": 1.5 * grid.outer_half_width}
    # the fine grid around the same centres, wider, with steps half as long or less
    N, K = grid.shape
    mu, cov, mean, half = _placement(grid)
    cov, half, n_wider = _covering(grid, lam[0], psi[0], cov, half, fine)
    fg = build_grid(tables, lam[0], psi[0], mu=mu, cov=cov, theta_mean=mean, theta_sd=half,
                    info=grid.info, **fine)
    kern = collapsed_kernel()
    from scipy.special import logsumexp

    def at(s):
        """The working and the fine grid's total log-likelihood at draw ``s``, and their largest gap for one
        LLM."""
        nodes_w = np.empty((grid.offsets.shape[0], N))
        nodes_f = np.empty((fg.offsets.shape[0], N))
        lw = np.ascontiguousarray(lam[s], dtype=np.float64)
        pw = np.ascontiguousarray(psi[s], dtype=np.float64)
        vw = kern(*grid.arrays, lw, pw, 0, nodes_w, _EMPTY2, _EMPTY2)[0]
        vf = kern(*fg.arrays, lw, pw, 0, nodes_f, _EMPTY2, _EMPTY2)[0]
        return vf - vw, float(np.abs(logsumexp(nodes_f, axis=0) - logsumexp(nodes_w, axis=0)).max())

    with ThreadPoolExecutor(max(1, int(cores))) as pool:
        got = list(pool.map(at, pick))
    diffs = np.asarray([g[0] for g in got])
    per = max(g[1] for g in got)
    return {"max_abs_diff": float(np.abs(diffs).max()), "spread_diff": float(np.ptp(diffs)),
            "max_abs_diff_per_llm": per, "n_draws": len(pick), "fine_grid": fine, "llms_placed_wider": n_wider,
            "seconds": time.perf_counter() - t0}


def _covering(grid: CollapsedGrid, lam: np.ndarray, psi: np.ndarray, cov: np.ndarray, half: np.ndarray,
              fine: dict) -> tuple:
    """The fine grid's covariances of the overall traits and the cells' half spans (in units of
    ``fine["inner_half_width"]``): the working grid's, or for an LLM whose overall trait the cells'
    Gaussian approximations (the grid's information) spread more than twice as wide (an sd ratio),
    the sum of both covariances and spans that cover the fine outer nodes' reach. A grid whose
    placement collapsed (posterior weights piled onto one outer node) would otherwise be checked
    against a fine grid of the same placement, and agree with it. Returns ``(cov, half, number of
    LLMs placed wider)``."""
    info = grid.info
    _, g_cov = _gaussian_cov(info, lam, psi)
    var = np.diagonal(cov, axis1=1, axis2=2)
    wider = np.any(np.diagonal(g_cov, axis1=1, axis2=2) > 4.0 * var, axis=1)
    if not wider.any():
        return cov, half, 0
    cov, half = cov.copy(), half.copy()
    cov[wider] += g_cov[wider]
    sd_c = 1.0 / np.sqrt(info[wider] + 1.0 / psi[None, :] ** 2)
    reach = np.sqrt(np.maximum(np.einsum("kj,njl,kl->nk", lam, cov[wider], lam), 0.0))
    need = INNER_HALF_WIDTH * sd_c + fine.get("outer_half_width", grid.outer_half_width) * reach
    half[wider] = np.maximum(half[wider], need / fine.get("inner_half_width", INNER_HALF_WIDTH))
    return cov, half, int(wider.sum())

