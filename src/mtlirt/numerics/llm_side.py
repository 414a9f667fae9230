"""The likelihood of an LLM's responses on a grid of trait values, its tables and its integrals.

With the items fixed, the log-likelihood of LLM ``i``'s responses in domain
``k`` is a function of the one trait ``t``::

    l_ik(t) = sum_j o_ij [y_ij log P_j(t) + (1 - y_ij) log(1 - P_j(t))],
    P_j(t)  = c_j + (1 - c_j) sigmoid(a_j t + d_j),

over the items ``j`` of the domain (``o_ij`` 1 where observed). Every part of
the package that integrates an LLM's traits out uses these functions: the
items' EM (:mod:`mtlirt.estimators.irt`), the fixed-items tables and the
Bayesian routes that integrate over them (:mod:`mtlirt.bayes.fixed_items`,
:mod:`~mtlirt.bayes.marginal`, :mod:`~mtlirt.bayes.collapsed`), the model
checks (:mod:`mtlirt.evaluate.checks`) and the scorer of new LLMs
(:mod:`mtlirt.evaluate.scoring`).

The likelihood
    :func:`curves` (``P`` on a grid) and :func:`log_curves` (its logs, the
    probabilities kept inside ``[lower, upper]``); :func:`grid_loglik`, all
    LLMs at once on one grid, ``Y (log P - log(1 - P)) + O log(1 - P)`` as two
    matrix products; :func:`partition`, the same without a floor, where the
    correct answers enter through ``s = Y a`` alone and the grid sees
    ``O log(1 + exp(a t + d))``; :func:`node_loglik`, each (LLM, domain) at its
    own nodes, with the exact per-cell :func:`bernoulli_loglik`.
The tables
    :func:`tabulate` tabulates ``l_ik`` and its derivative on a fine grid (one
    table per observation pattern without a floor, one per cell with one),
    :class:`LikelihoodTables`; :func:`loglik_at` interpolates them
    (:mod:`mtlirt.numerics.hermite`), :func:`loglik_points` is the same
    compiled, for a fit's draws.
The integrals
    :func:`normal_log_weights` (equally spaced nodes) and :func:`gauss_hermite`
    for a ``N(0, 1)`` trait; :func:`posterior`, the posterior over the nodes
    and each LLM's marginal likelihood; :func:`conditional_moments`, the
    tables integrated against ``N(m_ik, psi_k^2)``; :func:`cell_quadrature`,
    the per-cell nodes and weights of the integrated routes; and
    :func:`numba_log_domain`, their compiled kernels' sums in the log domain
    where a cell's scaled sum would leave the float range.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from functools import cache

import numpy as np
from scipy.special import expit, log_expit

from .hermite import hermite_np, numba_versions

__all__ = [
    "EPS",
    "GRID_HI",
    "GRID_LO",
    "LikelihoodTables",
    "bernoulli_loglik",
    "cell_quadrature",
    "conditional_moments",
    "curves",
    "gauss_hermite",
    "grid_loglik",
    "log_curves",
    "logits",
    "log_domain",
    "loglik_at",
    "loglik_points",
    "node_loglik",
    "normal_log_weights",
    "numba_log_domain",
    "table_value_kernel",
    "partition",
    "posterior",
    "softplus",
    "tabulate",
]

#: Probabilities are kept in ``[EPS, 1 - EPS]`` before their logs are taken (the EM, the checks, the scorer).
EPS = 1e-12
#: The span of the fixed-items tables' grid.
GRID_LO = -10.0
GRID_HI = 10.0


# ---------------------------------------------------------------------------
# the likelihood
# ---------------------------------------------------------------------------
def logits(a, d, x) -> np.ndarray:
    """``a_j x_q + d_j`` (J x Q)."""
    Z = np.multiply.outer(a, x)
    Z += d[:, None]
    return Z


def softplus(z, out=None):
    """``log(1 + exp(z))``, stable; ``out`` may be ``z`` itself."""
    tmp = np.abs(z)
    np.negative(tmp, out=tmp)
    np.exp(tmp, out=tmp)
    np.log1p(tmp, out=tmp)
    out = np.maximum(z, 0.0, out=out)
    out += tmp
    return out


def curves(a, d, c, x, *, slope: bool = False):
    """The items' probabilities of a correct answer at the nodes ``x``, ``P`` (J x Q); with ``slope``
    also ``dP / dt``."""
    sig = expit(logits(a, d, x))
    ck = np.asarray(c, dtype=np.float64)[:, None]
    P = ck + (1 - ck) * sig
    if not slope:
        return P
    return P, (1 - ck) * sig * (1 - sig) * np.asarray(a, dtype=np.float64)[:, None]


def log_curves(P, lower: float = EPS, upper: float = 1 - EPS, dP=None):
    """``log P`` and ``log(1 - P)`` with ``P`` kept in ``[lower, upper]``; with ``dP`` (the slope of
    ``P``) also their derivatives."""
    Pc = np.clip(P, lower, upper)
    lp, l1p = np.log(Pc), np.log1p(-Pc)
    if dP is None:
        return lp, l1p
    return lp, l1p, dP / Pc, -dP / (1 - Pc)


def grid_loglik(Y, O, lp, l1p, dtype=np.float64, matmul=operator.matmul) -> np.ndarray:
    """Each row's log-likelihood at every node: ``Y (lp - l1p) + O l1p`` (n x Q, float64).

    ``Y`` (n x J) holds the answers (0 where unobserved), ``O`` the observed
    cells (None: all), ``lp``, ``l1p`` (J x Q) the logs of :func:`log_curves`
    (or their derivatives: the result is then the derivative). The products
    run in ``dtype`` (``Y`` and ``O`` in it already; float32 halves the
    EM's memory traffic) by ``matmul`` (the E-step's runs on every core);
    either may be a scipy sparse matrix with the default."""
    L = matmul(Y, _normal(lp - l1p, dtype)).astype(np.float64, copy=False)
    L += l1p.sum(axis=0) if O is None else matmul(O, _normal(l1p, dtype))
    return L


def _normal(M, dtype):
    """``M`` in ``dtype``; in float32 its entries below ``1e-30`` in magnitude as 0: a subnormal float32
    operand made the matrix products several times slower (their sums move by less than 1e-25)."""
    if np.dtype(dtype) != np.float32:
        return M.astype(dtype, copy=False)
    return np.where(np.abs(M) < 1e-30, 0.0, M).astype(np.float32)


def partition(O, a, d, x, dtype=np.float64) -> np.ndarray:
    """``sum_j o_ij log(1 + exp(a_j x_q + d_j))`` (n x Q; ``O`` None: over all items, one row).

    Without a floor ``l(t) = s t + sum_j y_j d_j - partition(t)`` with ``s =
    sum_j y_j a_j``: the answers enter through ``s`` alone, the grid through
    which cells are observed."""
    sp = softplus(logits(np.asarray(a, dtype=np.float64), np.asarray(d, dtype=np.float64), x))
    return sp.sum(axis=0) if O is None else O @ _normal(sp, dtype)


def bernoulli_loglik(x, y, c=None):
    """``log p(y | logit x, guessing c)`` elementwise: ``p(1) = c + (1 - c) expit(x)``, exact in both tails.

    ``c`` None or all zero is the 2PL (no guessing term). One ``log expit`` per element, of ``x`` where
    ``y`` is 1 and of ``-x`` where it is 0.
    """
    t = log_expit(np.where(y > 0, x, -x))
    if c is None or not np.any(c):
        return t
    l1c = np.log1p(-c)
    return np.where(y > 0, np.logaddexp(np.log(np.maximum(c, 1e-300)), l1c + t), l1c + t)


def node_loglik(correct, observed, domain_slices, a, d, c, nodes, *, max_elems: float = 2e7) -> np.ndarray:
    """``l_ik(t)`` at per-cell nodes ``t`` (N, K, Q): each LLM's log-likelihood in each domain, cell by
    cell (:func:`bernoulli_loglik`); 0 where the LLM has no response in the domain."""
    N, K, Q = nodes.shape
    out = np.zeros((N, K, Q))
    guess = np.any(c > 0)
    for k, sl in enumerate(domain_slices):
        Jk = sl.stop - sl.start
        per = max(1, int(max_elems // max(Jk * Q, 1)))
        for r0 in range(0, N, per):
            rs = slice(r0, min(N, r0 + per))
            x = nodes[rs, k, :, None] * a[sl] + d[sl]  # n Q J
            y = correct[rs, sl][:, None, :] > 0
            ll = bernoulli_loglik(x, y, c[sl] if guess else None)
            if observed is not None:
                ll = np.where(observed[rs, sl][:, None, :], ll, 0.0)
            out[rs, k] = ll.sum(-1)
    return out


# ---------------------------------------------------------------------------
# the tables
# ---------------------------------------------------------------------------
@dataclass
class LikelihoodTables:
    """Tabulated per-(LLM, domain) log-likelihoods on a uniform theta grid.

    ``loglik_ik(theta) = s[i, k] * theta + const[i, k] - F[table[i, k]](theta)``,
    ``F`` and its derivative ``dF`` tabulated at ``lo + h * arange(G)``.
    ``A``/``dA`` (K x G): sum over *all* items of domain ``k`` of ``P_j(theta)``
    (for the expected accuracy).
    """

    s: np.ndarray
    const: np.ndarray
    table: np.ndarray
    F: np.ndarray
    dF: np.ndarray
    A: np.ndarray
    dA: np.ndarray
    lo: float
    h: float
    kind: str  # "pattern" or "cell"

    @property
    def n_grid(self) -> int:
        return self.F.shape[1]

    @property
    def nbytes(self) -> int:
        return sum(getattr(self, k).nbytes for k in ("s", "const", "table", "F", "dF", "A", "dA"))


def _table_grid(step: float) -> tuple[np.ndarray, float]:
    G = int(round((GRID_HI - GRID_LO) / step)) + 1
    g = np.linspace(GRID_LO, GRID_HI, G)
    return g, g[1] - g[0]


def _observation_patterns(observed, domain_slices, n: int) -> tuple[np.ndarray, list[np.ndarray]]:
    """The observation patterns of every domain: each LLM's pattern id (n, K),
    numbered across domains, and per domain the patterns as a P_k x J_k bool mask."""
    K = len(domain_slices)
    pat_ids = np.zeros((n, K), dtype=np.int64)
    pat_masks: list[np.ndarray] = []
    total = 0
    for k, s in enumerate(domain_slices):
        if observed is None:
            masks = np.ones((1, s.stop - s.start), dtype=bool)
            inv = np.zeros(n, dtype=np.int64)
        else:
            packed = np.packbits(observed[:, s], axis=1)
            _, first, inv = np.unique(packed, axis=0, return_index=True, return_inverse=True)
            masks = observed[first][:, s]
            inv = inv.reshape(-1)
        pat_ids[:, k] = total + inv
        total += len(masks)
        pat_masks.append(masks)
    return pat_ids, pat_masks


def _table_step(step: float | None, use_cells: bool, n_cells: int, max_cell_bytes: float) -> float:
    """The grid step: the one given, else 0.025 for pattern tables and 0.05 for
    per-cell tables, made coarser (up to 0.2) until they fit ``max_cell_bytes``."""
    if step is not None:
        return step
    if not use_cells:
        return 0.025
    step = 0.05
    while n_cells * (int((GRID_HI - GRID_LO) / step) + 1) * 16 > max_cell_bytes and step < 0.2:
        step *= 1.25
    return step


def tabulate(correct, observed, domain_slices, a, d, c=0.0, *, step: float | None = None,
             max_cell_bytes: float = 2e9) -> LikelihoodTables:
    """Tabulate every (LLM, domain) log-likelihood and its derivative on an equally spaced grid on
    ``[GRID_LO, GRID_HI]``.

    Without a floor one table per observation pattern of a domain, ``F = O
    log(1 + exp(a t + d))`` (:func:`partition`), with the answers in ``s = Y a``
    and ``const = Y d``; with one (or more distinct patterns than half the
    cells) one table per cell, ``F = -l_ik`` (:func:`grid_loglik` on
    :func:`log_curves`, probabilities kept in ``[1e-300, 1 - 1e-16]``).

    Parameters
    ----------
    correct : ndarray (N, J)
        0/1 answers (0 where unobserved).
    observed : ndarray (N, J) of bool or None
    domain_slices : list of slice
    a, d : ndarray (J,)
        Discrimination and intercept.
    c : float or ndarray (J,)
        Lower asymptote.
    step : float, optional
        Grid step; default 0.025 for pattern tables, 0.05 (or coarser to fit
        ``max_cell_bytes``) for per-cell tables.
    max_cell_bytes : float
        Memory budget for per-cell tables.
    """
    a = np.asarray(a, float)
    d = np.asarray(d, float)
    n, J = correct.shape
    K = len(domain_slices)
    c = np.broadcast_to(np.asarray(c, float), (J,))
    use_cells = bool(np.any(c > 0))
    if not use_cells:
        pat_ids, pat_masks = _observation_patterns(observed, domain_slices, n)
        if sum(len(m) for m in pat_masks) > 0.5 * n * K:
            use_cells = True
    grid, h = _table_grid(_table_step(step, use_cells, n * K, max_cell_bytes))
    G = len(grid)
    s_stat = np.zeros((n, K))
    const = np.zeros((n, K))
    A = np.zeros((K, G))
    dA = np.zeros((K, G))
    if use_cells:
        F = np.zeros((n * K, G))
        dF = np.zeros((n * K, G))
        table = (np.arange(n)[:, None] * K + np.arange(K)[None, :]).astype(np.int64)
    else:
        F = np.zeros((int(pat_ids.max()) + 1, G))
        dF = np.zeros_like(F)
        table = pat_ids
    for k, s in enumerate(domain_slices):
        ak, dk, ck = a[s], d[s], c[s]
        P, dP = curves(ak, dk, ck, grid, slope=True)
        A[k] = P.sum(0)
        dA[k] = dP.sum(0)
        Y = correct[:, s].astype(np.float64)
        O = None if observed is None else observed[:, s].astype(np.float64)
        if O is not None:
            Y *= O
        if not use_cells:
            s_stat[:, k] = Y @ ak
            const[:, k] = Y @ dk
            masks = pat_masks[k].astype(np.float64)
            rows = slice(int(pat_ids[:, k].min()), int(pat_ids[:, k].min()) + len(masks))
            F[rows] = partition(masks, ak, dk, grid)
            dF[rows] = masks @ (P * ak[:, None])  # P is the sigmoid here
        else:
            lp, l1p, dlp, dl1p = log_curves(P, 1e-300, 1 - 1e-16, dP)
            F[table[:, k]] = -grid_loglik(Y, O, lp, l1p)
            dF[table[:, k]] = -grid_loglik(Y, O, dlp, dl1p)
    return LikelihoodTables(s=s_stat, const=const, table=table, F=F, dF=dF, A=A, dA=dA,
                            lo=float(grid[0]), h=float(h), kind="cell" if use_cells else "pattern")


def loglik_at(tables: LikelihoodTables, x: np.ndarray, llms: slice | None = None) -> np.ndarray:
    """``l_ik(x)`` by the tables' cubic Hermite interpolation, up to the per-cell constant ``const``;
    ``x`` is (n, K, ...) for the LLMs ``llms`` (default all)."""
    llms = slice(None) if llms is None else llms
    extra = (None,) * (x.ndim - 2)
    rows = tables.table[llms][(...,) + extra]
    s = tables.s[llms][(...,) + extra]
    return s * x - hermite_np(tables.F, tables.dF, rows, x, tables.lo, tables.h)


# ---------------------------------------------------------------------------
# the integrals
# ---------------------------------------------------------------------------
def normal_log_weights(x: np.ndarray, sd: float = 1.0) -> np.ndarray:
    """Log weights of equally spaced nodes ``x`` for a ``N(0, sd^2)`` trait, normalised to sum to 1."""
    logw = -0.5 * (x / sd) ** 2
    logw -= np.log(np.exp(logw).sum())
    return logw


def gauss_hermite(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Gauss-Hermite nodes and log weights for ``int f(t) N(t; 0, 1) dt = sum w f``."""
    x, w = np.polynomial.hermite_e.hermegauss(n)
    return x, np.log(w / np.sqrt(2 * np.pi))


def posterior(L: np.ndarray, logw: np.ndarray):
    """The posterior over the nodes of every row from its log-likelihood ``L`` (n x Q, overwritten)
    and the nodes' log prior weights ``logw``; returns it (n x Q) and each row's log marginal
    likelihood (n,)."""
    L += logw
    m = L.max(axis=1, keepdims=True)
    L -= m
    P = np.exp(L, out=L)
    z = P.sum(axis=1, keepdims=True)
    P /= z
    return P, np.log(z[:, 0]) + m[:, 0]


def conditional_moments(tables: LikelihoodTables, m: np.ndarray, psi: np.ndarray, *, max_elems: float = 2e7):
    """Mean and sd of each cell's conditional posterior of ``theta_ik`` under
    the prior ``N(m_ik, psi_k^2)``, and the log of the integral (exact on the
    table grid, trapezoid rule).

    Compiled (:func:`_moments_kernel`, LLMs in parallel): at leaderboard scale
    (4,272 LLMs x 57 domains on the 801-node grid) the former numpy version
    took about 10 CPU seconds per call, which the integrated route makes
    twice. Grid nodes whose term lies below ``exp(-46)`` times the largest
    (a relative 1e-20) are skipped, far below rounding.

    Parameters
    ----------
    tables : LikelihoodTables
    m : ndarray (N, K)
    psi : ndarray (K,)
    max_elems : float
        Unused; kept for callers of the former blocked numpy version.

    Returns
    -------
    mean, sd, log_integral : ndarray (N, K)
    """
    m = np.ascontiguousarray(m, dtype=np.float64)
    N, K = m.shape
    psi = np.asarray(psi, dtype=np.float64).reshape(-1)
    grid = tables.lo + tables.h * np.arange(tables.n_grid)
    mean = np.empty((N, K))
    sd = np.empty((N, K))
    logi = np.empty((N, K))
    inv2 = 1.0 / (2.0 * psi**2)
    _moments_kernel()(np.ascontiguousarray(tables.s, dtype=np.float64), np.ascontiguousarray(tables.table),
                      np.ascontiguousarray(tables.F, dtype=np.float64), grid, m, inv2, mean, sd, logi)
    sd = np.sqrt(np.maximum(sd, (0.25 * tables.h) ** 2))  # the kernel leaves the variance there
    logi += np.log(tables.h) - np.log(psi)[None, :] - 0.5 * np.log(2 * np.pi)
    return mean, sd, logi


def _moments_cells(s, table, F, grid, m, inv2, mean, var, logz):
    """Per cell (i, k): the weights ``w_g = exp(lp_g - max lp)`` of ``lp_g = s_ik x_g - F[table_ik, g] -
    (x_g - m_ik)^2 inv2_k`` on the table grid ``x``; their mean, variance and ``log sum w + max lp``."""
    N, K = m.shape
    G = grid.shape[0]
    for i in numba.prange(N):
        lp = np.empty(G)
        for k in range(K):
            t = table[i, k]
            si = s[i, k]
            mi = m[i, k]
            a = inv2[k]
            mx = -np.inf
            for g in range(G):
                x = grid[g]
                d = x - mi
                v = si * x - F[t, g] - d * d * a
                lp[g] = v
                if v > mx:
                    mx = v
            z = 0.0
            z1 = 0.0
            for g in range(G):
                e = lp[g] - mx
                if e > -46.0:
                    w = math.exp(e)
                    z += w
                    z1 += w * grid[g]
            mu = z1 / z
            z2 = 0.0
            for g in range(G):
                e = lp[g] - mx
                if e > -46.0:
                    dd = grid[g] - mu
                    z2 += math.exp(e) * dd * dd
            mean[i, k] = mu
            var[i, k] = z2 / z
            logz[i, k] = math.log(z) + mx


@cache
def _moments_kernel():
    """:func:`_moments_cells` compiled by numba, the LLMs in parallel."""
    global numba
    import numba

    return numba.njit(parallel=True, nogil=True, boundscheck=False, cache=True)(_moments_cells)


def cell_quadrature(tables: LikelihoodTables, start: np.ndarray, step: np.ndarray, n: int):
    """Every cell's trapezoid rule on ``n`` equally spaced nodes ``start + q step`` (start, step (N, K)):
    the nodes' log weights ``l_ik(t_q) - max_q l_ik`` (N, K, n) and the log scale ``max_q l_ik + log
    step - log(2 pi) / 2`` (N, K), so that ``int exp(l(t)) N(t; m, psi^2) dt`` is about
    ``exp(logscale) sum_q exp(logw_q - (t_q - m)^2 / (2 psi^2)) / psi``."""
    N, K = start.shape
    ll = np.empty((N, K, int(n)))
    mx = np.empty((N, K))
    _table_kernels()[0](np.ascontiguousarray(tables.s, dtype=np.float64), np.ascontiguousarray(tables.table),
                        np.ascontiguousarray(tables.F, dtype=np.float64),
                        np.ascontiguousarray(tables.dF, dtype=np.float64), float(tables.lo), float(tables.h),
                        np.ascontiguousarray(start, dtype=np.float64), np.ascontiguousarray(step, dtype=np.float64),
                        ll, mx)
    return ll, mx + np.log(step) - 0.5 * np.log(2 * np.pi)


def loglik_points(tables: LikelihoodTables, x: np.ndarray) -> np.ndarray:
    """``l_ik(x) + const_ik`` at points ``x`` (..., N, K), every LLM and domain (compiled :func:`loglik_at`:
    the pointwise log-likelihood of a fit's draws)."""
    N, K = tables.s.shape
    flat = np.ascontiguousarray(x, dtype=np.float64).reshape(-1, N, K)
    out = np.empty_like(flat)
    _table_kernels()[1](np.ascontiguousarray(tables.s, dtype=np.float64),
                        np.ascontiguousarray(tables.const, dtype=np.float64), np.ascontiguousarray(tables.table),
                        np.ascontiguousarray(tables.F, dtype=np.float64),
                        np.ascontiguousarray(tables.dF, dtype=np.float64), float(tables.lo), float(tables.h), flat, out)
    return out.reshape(np.shape(x))


def _table_value(F, dF, t, x, lo, h):
    """``F[t]`` at ``x`` by cubic Hermite interpolation, continued linearly outside the table (as
    :func:`mtlirt.numerics.hermite.hermite_np`)."""
    G = F.shape[1]
    hi = lo + h * (G - 1)
    xc = min(max(x, lo), hi)
    u = (xc - lo) / h
    j = min(max(int(math.floor(u)), 0), G - 2)
    v = _hermite_combine(_hermite_weights(u - j, h), F[t, j], F[t, j + 1], dF[t, j], dF[t, j + 1])
    if x > hi:
        v += (x - xc) * dF[t, G - 1]
    elif x < lo:
        v += (x - xc) * dF[t, 0]
    return v


def _cell_nodes(s, table, F, dF, lo, h, start, step, ll, mx):
    """Per cell (i, k): ``l_ik`` at the nodes ``start_ik + q step_ik`` as :func:`loglik_at` computes it, less
    its maximum over the nodes, and that maximum."""
    N, K, n = ll.shape
    for i in numba.prange(N):
        for k in range(K):
            t = table[i, k]
            si = s[i, k]
            m = -np.inf
            for q in range(n):
                x = start[i, k] + q * step[i, k]
                v = si * x - _table_value_jit(F, dF, t, x, lo, h)
                ll[i, k, q] = v
                m = max(m, v)
            mx[i, k] = m
            for q in range(n):
                ll[i, k, q] -= m


def _points(s, const, table, F, dF, lo, h, x, out):
    """``out[m, i, k] = l_ik(x[m, i, k]) + const_ik``, the rows ``m`` in parallel."""
    M, N, K = x.shape
    for m in numba.prange(M):
        for i in range(N):
            for k in range(K):
                v = x[m, i, k]
                out[m, i, k] = s[i, k] * v + const[i, k] - _table_value_jit(F, dF, table[i, k], v, lo, h)


@cache
def table_value_kernel():
    """:func:`_table_value` compiled by numba (without fast-math): one interpolant of the tables at a point
    for every kernel that evaluates them (the cell grids, the pointwise log-likelihood, the domain scores'
    draws of :mod:`mtlirt.bayes.marginal`)."""
    global numba, _hermite_weights, _hermite_combine, _table_value_jit
    import numba

    _hermite_weights, _hermite_combine = numba_versions()
    _table_value_jit = numba.njit(boundscheck=False, cache=True)(_table_value)
    return _table_value_jit


@cache
def _table_kernels():
    """:func:`_cell_nodes` and :func:`_points` compiled by numba, in parallel: the integrated route's grids
    (and its quadrature check's finer grid) and a fit's pointwise log-likelihood evaluate the tables at
    every cell many times over, too many points for numpy's temporaries at leaderboard scale."""
    table_value_kernel()
    jit = numba.njit(parallel=True, nogil=True, boundscheck=False, cache=True)
    return jit(_cell_nodes), jit(_points)


def log_domain(logw_k, i, t0, h, m, a):
    """One cell's sums over its nodes in the log domain: ``(log S, E[d], E[d^2])`` with ``S = sum_q
    exp(logw_k[q, i] - a d_q^2)``, ``d_q = t0 + q h - m`` (numba: :func:`numba_log_domain`)."""
    Q = logw_k.shape[0]
    mx = -np.inf
    for q in range(Q):
        d = t0 + q * h - m
        mx = max(mx, logw_k[q, i] - a * d * d)
    S = 0.0
    S1 = 0.0
    S2 = 0.0
    for q in range(Q):
        d = t0 + q * h - m
        w = np.exp(logw_k[q, i] - a * d * d - mx)
        S += w
        S1 += w * d
        S2 += w * d * d
    return mx + np.log(S), S1 / S, S2 / S


@cache
def numba_log_domain():
    """:func:`log_domain` compiled by numba: the integrated routes' kernels fall back to it where a
    cell's scaled sum would leave the float range."""
    import numba

    return numba.njit(boundscheck=False, cache=True)(log_domain)
