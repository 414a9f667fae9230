"""The leave-one-LLM-out check's quadrature sums (:func:`mtlirt.evaluate.loo.llm_marginal_loglik`), compiled.

Per posterior draw, every LLM's log marginal likelihood is a log-sum over its
overall trait's nodes of sums over its domains of log-sums over each domain
trait's nodes: ``N P K Q`` terms (600 LLMs x 12 x 57 x 32 at the demo's size),
which numpy wrote out as several temporaries of that size per draw. This loop
holds one cell's nodes at a time, the LLMs on numba's threads (each LLM's sums
its own, so the bits do not depend on the number of threads). Compiled
without fast-math: with it, the kernel loaded from numba's cache gave other
last bits than a fresh compile, and the same seed must give the same numbers
in a first run and every later one. Imported on first use.
"""

from __future__ import annotations

import math

import numba
import numpy as np

__all__ = ["marginal_loglik"]

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


@numba.njit(parallel=True, error_model="numpy", boundscheck=False, cache=True)
def marginal_loglik(L, nodes, lbase, lsd, empty, eta_nodes, lam, psi, lweta, out):
    """``out[n] = log sum_p exp(lweta[n, p] + sum_k c[n, k, p])`` with each non-empty cell's
    ``c = log sum_q exp(L[n, k, q] + lbase[q] + log N(nodes[n, k, q]; m, psi_k^2)) + lsd[n, k]``,
    ``m = eta_nodes[n, p] . lam[k]``: the domain trait integrated against its conditional normal by
    importance-form Gauss-Hermite nodes, then the overall trait over its ``P`` nodes (one node and
    ``lweta`` 0: the overall trait given)."""
    N, K, Q = L.shape
    P = eta_nodes.shape[1]
    r = lam.shape[1]
    for n in numba.prange(N):
        e = np.empty(Q)
        acc = np.empty(P)
        for p in range(P):
            tot = 0.0
            for k in range(K):
                if empty[n, k]:
                    continue
                m = 0.0
                for j in range(r):
                    m += eta_nodes[n, p, j] * lam[k, j]
                inv = 1.0 / psi[k]
                mx = -np.inf
                for q in range(Q):
                    z = (nodes[n, k, q] - m) * inv
                    e[q] = L[n, k, q] + lbase[q] - 0.5 * z * z
                    if e[q] > mx:
                        mx = e[q]
                s = 0.0
                for q in range(Q):
                    s += math.exp(e[q] - mx)
                tot += mx + math.log(s) + lsd[n, k] - math.log(psi[k]) - _HALF_LOG_2PI
            acc[p] = tot + lweta[n, p]
        mx = -np.inf
        for p in range(P):
            if acc[p] > mx:
                mx = acc[p]
        s = 0.0
        for p in range(P):
            s += math.exp(acc[p] - mx)
        out[n] = mx + math.log(s)
