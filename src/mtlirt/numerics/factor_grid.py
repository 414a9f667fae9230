"""The rank-one factor model's grid posterior for many LLMs at once, as a numba kernel.

For each LLM, with ``L_k(t)`` its likelihood in domain ``k`` on the trait
grid and ``W_k(g, t)`` the conditional prior of the domain trait given the
overall trait ``g`` (normalised over ``t``)::

    Z_k(g) = sum_t W_k(g, t) L_k(t),     p(g | y) ~ prior(g) prod_k Z_k(g),
    p(theta_k = t | y) = L_k(t) sum_g p(g | y) W_k(g, t) / Z_k(g).

The sums skip the terms that cannot reach the reported digits: the grid
points where an LLM's likelihood is below ``CUT`` of its largest value and
the values of ``g`` whose posterior mass is below ``CUT``. Large domains
concentrate the likelihood on a few grid points, so the kernel costs a
fraction of the dense products.
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np

__all__ = ["CUT", "DENSE_SPREAD", "factor_grid_posterior", "grid_quantiles", "mixture_summary"]

#: Relative size below which a term is left out of the sums.
CUT = 1e-18
_LOG_CUT = math.log(CUT)
#: LLMs per block of the kernel.
_BLOCK = 32


def _axpy(z, w, x):  # pragma: no cover - compiled by numba
    for g in range(z.shape[0]):
        z[g] += w[g] * x


def _posterior(logL, answered, WT, log_prior, pg, pt):  # pragma: no cover - compiled by numba
    N, K, Q = logL.shape
    G = WT.shape[2]
    n_blocks = (N + _BLOCK - 1) // _BLOCK
    # LLMs in blocks, domains outside the LLMs of a block: a domain's conditional prior (Q x G) is read
    # from the cache by every LLM of the block rather than from memory by each
    for blk in numba.prange(n_blocks):
        n0 = blk * _BLOCK
        B = min(_BLOCK, N - n0)
        L = np.zeros((B, K, Q))
        Z = np.zeros((B, K, G))
        lo = np.zeros((B, K), dtype=np.int64)
        hi = np.full((B, K), Q, dtype=np.int64)
        lp = np.empty((B, G))
        for i in range(B):
            lp[i] = log_prior
        for k in range(K):
            for i in range(B):
                n = n0 + i
                if answered[n, k]:
                    m = logL[n, k, 0]
                    for t in range(1, Q):
                        m = max(m, logL[n, k, t])
                    a = 0
                    while logL[n, k, a] - m < _LOG_CUT:
                        a += 1
                    b = Q
                    while logL[n, k, b - 1] - m < _LOG_CUT:
                        b -= 1
                    for t in range(a, b):
                        L[i, k, t] = exp_nonpos(logL[n, k, t] - m)
                    lo[i, k] = a
                    hi[i, k] = b
                else:
                    for t in range(Q):
                        L[i, k, t] = 1.0
                zk = Z[i, k]
                for t in range(lo[i, k], hi[i, k]):
                    _axpy(zk, WT[k, t], L[i, k, t])
                for g in range(G):
                    # floored: a domain whose likelihood lies where this g puts (numerically) no prior mass
                    # keeps 1 / Z finite, and an LLM whose every g underflows keeps the other domains' information
                    v = max(zk[g], 1e-300)
                    zk[g] = v
                    lp[i, g] += log_pos(v)
        ga = np.empty(B, dtype=np.int64)
        gb = np.empty(B, dtype=np.int64)
        for i in range(B):
            n = n0 + i
            mx = lp[i, 0]
            for g in range(1, G):
                mx = max(mx, lp[i, g])
            tot = 0.0
            for g in range(G):
                v = math.exp(lp[i, g] - mx)
                pg[n, g] = v
                tot += v
            ga[i] = G
            gb[i] = 0
            for g in range(G):
                pg[n, g] /= tot
                if pg[n, g] >= CUT:
                    ga[i] = min(ga[i], g)
                    gb[i] = g + 1
        w = np.empty(G)
        for k in range(K):
            for i in range(B):
                n = n0 + i
                for g in range(ga[i], gb[i]):
                    w[g] = pg[n, g] / Z[i, k, g]
                for t in range(Q):
                    pt[n, k, t] = 0.0
                for t in range(lo[i, k], hi[i, k]):
                    acc = 0.0
                    for g in range(ga[i], gb[i]):
                        acc += w[g] * WT[k, t, g]
                    pt[n, k, t] = acc * L[i, k, t]


def _quantiles(mass, qs, lo, h, out):  # pragma: no cover - compiled by numba
    R, n = mass.shape
    for r in numba.prange(R):
        tot = 0.0
        for i in range(n):
            tot += mass[r, i]
        for iq in range(qs.shape[0]):
            q = qs[iq]
            cum = 0.0
            j = 0
            while j < n and (cum + mass[r, j]) / tot <= q:  # the cell whose cdf passes q
                cum += mass[r, j]
                j += 1
            if q >= 1.0 or j == n:
                out[r, iq] = lo + n * h
                continue
            c0 = cum / tot
            c1 = (cum + mass[r, j]) / tot
            frac = (q - c0) / (c1 - c0) if c1 > c0 else 0.0
            out[r, iq] = lo + (j + min(max(frac, 0.0), 1.0)) * h


@cache
def _quantiles_kernel():
    """:func:`_quantiles` compiled by numba, the rows in parallel."""
    global numba
    import numba

    return numba.njit(parallel=True, nogil=True, boundscheck=False, cache=True)(_quantiles)


def grid_quantiles(mass: np.ndarray, grid: np.ndarray, qs) -> np.ndarray:
    """Quantiles ``qs`` of distributions with ``mass`` (..., n) spread evenly over the cells of the equally
    spaced ``grid`` (the cdf interpolated linearly between the cells' edges); (..., len(qs))."""
    h = float(grid[1] - grid[0])
    flat = np.ascontiguousarray(mass, dtype=np.float64).reshape(-1, mass.shape[-1])
    out = np.empty((flat.shape[0], len(qs)))
    _quantiles_kernel()(flat, np.asarray(qs, dtype=np.float64), float(grid[0]) - h / 2, h, out)
    return out.reshape(mass.shape[:-1] + (len(qs),))


def _moments(mass: np.ndarray, grid: np.ndarray):
    """Mean and sd of the distributions ``mass`` (..., n; each summing to 1) at the nodes ``grid``."""
    mean = mass @ grid
    var = np.clip(mass @ grid**2 - mean**2, 0.0, None)
    return mean, np.sqrt(var)


def mixture_summary(masses, grid: np.ndarray, maps: np.ndarray, qs) -> tuple[float, float, np.ndarray]:
    """Mean, sd and quantiles ``qs`` of the equal-weight mixture over ``s`` of ``(x - m_s) / s_s`` (``maps``
    (S, 2) the ``m_s, s_s``), each ``x`` with the masses ``masses[s]`` on ``grid`` spread evenly over its
    cells as :func:`grid_quantiles` reads them (the mixture's cdf is linear between the mapped cell edges);
    the moments read at the nodes."""
    h = grid[1] - grid[0]
    edges = np.append(grid - h / 2, grid[-1] + h / 2)
    m1 = m2 = 0.0
    xs, cdfs = [], []
    for p, (m, s) in zip(masses, maps, strict=True):
        p = p / p.sum()
        mu, sd = _moments(p, grid)
        m1 += (mu - m) / s
        m2 += (sd * sd + (mu - m) ** 2) / (s * s)
        xs.append((edges - m) / s)
        cdfs.append(np.concatenate([[0.0], np.cumsum(p)]))
    S = len(xs)
    mean = m1 / S
    x = np.unique(np.concatenate(xs))
    F = sum(np.interp(x, xe, c) for xe, c in zip(xs, cdfs, strict=True)) / S
    return float(mean), float(np.sqrt(max(m2 / S - mean * mean, 0.0))), np.interp(qs, F, x)


@cache
def _kernel():
    """:func:`_posterior` compiled by numba (imported on first use), the LLMs in parallel."""
    global numba, exp_nonpos, log_pos, _axpy
    import numba

    _axpy = numba.njit(inline="always", boundscheck=False)(_axpy)
    from .vecmath import exp_nonpos, log_pos

    return numba.njit(parallel=True, nogil=True, boundscheck=False, cache=True)(_posterior)


def factor_grid_posterior(logL: np.ndarray, answered: np.ndarray, W: np.ndarray,
                          log_prior: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``pg`` (N, G), the posterior of the overall trait, and ``pt`` (N, K, Q), each domain trait's marginal
    posterior, from the log-likelihoods ``logL`` (N, K, Q), the cells with responses ``answered`` (N, K) (the
    others' likelihood is 1), the conditional priors ``W`` (K, G, Q) and the overall trait's log prior (G,).

    Where the likelihoods spread over most of the grid (domains of a few items: nothing to skip), the sums
    are the dense matrix products instead of the kernel, the same numbers to rounding."""
    logL = np.ascontiguousarray(logL, dtype=np.float64)
    N, K, Q = logL.shape
    answered = np.ascontiguousarray(answered, dtype=np.bool_)
    WT = np.ascontiguousarray(np.asarray(W, dtype=np.float64).transpose(0, 2, 1))  # (K, Q, G): g innermost
    log_prior = np.asarray(log_prior, dtype=np.float64)
    if N and _spread(logL, answered) > DENSE_SPREAD:
        return _dense_posterior(logL, answered, WT, log_prior)
    pg = np.empty((N, WT.shape[2]))
    pt = np.empty((N, K, Q))
    _kernel()(logL, answered, WT, log_prior, pg, pt)
    return pg, pt


#: Share of the trait grid that the answered cells' likelihoods cover (above ``CUT`` of their peak), on average,
#: above which :func:`factor_grid_posterior` takes the dense products.
DENSE_SPREAD = 0.5


def _spread(logL: np.ndarray, answered: np.ndarray) -> float:
    """The mean share of the grid over which an answered cell's likelihood exceeds ``CUT`` of its peak (1 for
    the unanswered ones, which the kernel cannot skip either)."""
    cells = np.flatnonzero(answered)
    if not len(cells):
        return 1.0
    rows = logL.reshape(-1, logL.shape[-1])[cells[:: max(1, len(cells) // 2000)]]  # a sample of the cells says it
    wide = (rows - rows.max(axis=1, keepdims=True) >= _LOG_CUT).mean()
    return float((wide * answered.sum() + (~answered).sum()) / answered.size)


def _dense_posterior(logL, answered, WT, log_prior):
    """:func:`factor_grid_posterior` by matrix products, domain by domain (no term skipped)."""
    N, K, Q = logL.shape
    G = WT.shape[2]
    WT = np.where(WT < 1e-250, 0.0, WT)  # the priors' far tails, subnormal, would slow the products tenfold
    dense = _dense_kernels()
    L = np.empty((K, N, Q))
    dense[0](logL, answered, L)
    Z = np.empty((K, N, G))
    for k in range(K):
        np.matmul(L[k], WT[k], out=Z[k])
    lp = np.empty((N, G))
    dense[1](Z, log_prior, lp)  # Z floored, lp = log prior + sum_k log Z
    lp -= lp.max(axis=1, keepdims=True)
    pg = np.exp(lp)
    pg /= pg.sum(axis=1, keepdims=True)
    pg[pg < CUT] = 0.0  # as the kernel, which skips these values of g
    pt = np.empty((N, K, Q))
    for k in range(K):
        np.multiply(L[k], (pg / Z[k]) @ WT[k].T, out=pt[:, k, :])
    return pg, pt


def _likelihoods(logL, answered, L):  # pragma: no cover - compiled by numba
    N, K, Q = logL.shape
    for n in numba.prange(N):
        for k in range(K):
            if answered[n, k]:
                m = logL[n, k, 0]
                for t in range(1, Q):
                    m = max(m, logL[n, k, t])
                for t in range(Q):
                    v = logL[n, k, t] - m
                    L[k, n, t] = exp_nonpos(v) if v >= _LOG_CUT else 0.0  # as the kernel: no subnormals
            else:
                for t in range(Q):
                    L[k, n, t] = 1.0


def _log_sums(Z, log_prior, lp):  # pragma: no cover - compiled by numba
    K, N, G = Z.shape
    for n in numba.prange(N):
        for g in range(G):
            lp[n, g] = log_prior[g]
        for k in range(K):
            for g in range(G):
                v = max(Z[k, n, g], 1e-300)
                Z[k, n, g] = v
                lp[n, g] += log_pos(v)


@cache
def _dense_kernels():
    """:func:`_likelihoods` and :func:`_log_sums` compiled by numba, the LLMs in parallel."""
    global numba, exp_nonpos, log_pos
    import numba

    from .vecmath import exp_nonpos, log_pos

    jit = numba.njit(parallel=True, nogil=True, boundscheck=False, cache=True)
    return jit(_likelihoods), jit(_log_sums)
