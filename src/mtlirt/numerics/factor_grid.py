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

__all__ = ["CUT", "factor_grid_posterior"]

#: Relative size below which a term is left out of the sums.
CUT = 1e-18
_LOG_CUT = math.log(CUT)


def _posterior(logL, answered, WT, log_prior, pg, pt):  # pragma: no cover - compiled by numba
    N, K, Q = logL.shape
    G = WT.shape[2]
    for n in numba.prange(N):
        L = np.zeros((K, Q))
        Z = np.zeros((K, G))
        lo = np.zeros(K, dtype=np.int64)
        hi = np.full(K, Q, dtype=np.int64)
        lp = log_prior.copy()
        prod = np.ones(G)
        for k in range(K):
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
                    L[k, t] = math.exp(logL[n, k, t] - m)
                lo[k] = a
                hi[k] = b
            else:
                for t in range(Q):
                    L[k, t] = 1.0
            for t in range(lo[k], hi[k]):
                lt = L[k, t]
                for g in range(G):
                    Z[k, g] += WT[k, t, g] * lt
            for g in range(G):
                # floored: a domain whose likelihood lies where this g puts (numerically) no prior mass keeps
                # 1 / Z finite, and an LLM whose every g underflows keeps the other domains' information
                s = max(Z[k, g], 1e-300)
                Z[k, g] = s
                # log prod_k Z_k(g) as a running product, its log taken before it could underflow
                if s < 1e-150:
                    lp[g] += math.log(s)
                else:
                    prod[g] *= s
                    if prod[g] < 1e-150:
                        lp[g] += math.log(prod[g])
                        prod[g] = 1.0
        for g in range(G):
            lp[g] += math.log(prod[g])
        mx = lp[0]
        for g in range(1, G):
            mx = max(mx, lp[g])
        tot = 0.0
        for g in range(G):
            v = math.exp(lp[g] - mx)
            pg[n, g] = v
            tot += v
        ga = G
        gb = 0
        for g in range(G):
            pg[n, g] /= tot
            if pg[n, g] >= CUT:
                ga = min(ga, g)
                gb = g + 1
        w = np.empty(G)
        for k in range(K):
            for g in range(ga, gb):
                w[g] = pg[n, g] / Z[k, g]
            for t in range(Q):
                pt[n, k, t] = 0.0
            for t in range(lo[k], hi[k]):
                acc = 0.0
                for g in range(ga, gb):
                    acc += w[g] * WT[k, t, g]
                pt[n, k, t] = acc * L[k, t]


@cache
def _kernel():
    """:func:`_posterior` compiled by numba (imported on first use), the LLMs in parallel."""
    global numba
    import numba

    return numba.njit(parallel=True, nogil=True, boundscheck=False, cache=True)(_posterior)


def factor_grid_posterior(logL: np.ndarray, answered: np.ndarray, W: np.ndarray,
                          log_prior: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``pg`` (N, G), the posterior of the overall trait, and ``pt`` (N, K, Q), each domain trait's marginal
    posterior, from the log-likelihoods ``logL`` (N, K, Q), the cells with responses ``answered`` (N, K) (the
    others' likelihood is 1), the conditional priors ``W`` (K, G, Q) and the overall trait's log prior (G,)."""
    logL = np.ascontiguousarray(logL, dtype=np.float64)
    N, K, Q = logL.shape
    WT = np.ascontiguousarray(np.asarray(W, dtype=np.float64).transpose(0, 2, 1))  # (K, Q, G): g innermost
    pg = np.empty((N, WT.shape[2]))
    pt = np.empty((N, K, Q))
    _kernel()(logL, np.ascontiguousarray(answered, dtype=np.bool_), WT, np.asarray(log_prior, dtype=np.float64),
              pg, pt)
    return pg, pt
