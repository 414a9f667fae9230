"""Fixed items, factor traits: the whole LLM side integrated out.

With the items fixed, LLMs are independent given the loadings. Each LLM's
overall trait ``eta_i`` (r numbers) and domain scores ``theta_ik`` enter the
likelihood only through that LLM's own responses, so the posterior of the
structure (the loadings ``Lambda``, and with them ``psi_k = sqrt(1 -
|Lambda_k|^2)``) has the exact marginal likelihood::

    p(y | Lambda) = prod_i  integral N(eta; 0, I_r) prod_k f_ik(Lambda_k . eta; psi_k) deta,
    f_ik(m; psi)  = integral exp(l_ik(theta)) N(theta; m, psi^2) dtheta,

with ``l_ik`` the tabulated log-likelihood of :mod:`mtlirt.bayes.fixed_items`
and ``f_ik`` the domain marginal of :mod:`mtlirt.bayes.marginal`. Only the
``K r - r (r - 1) / 2`` loadings are sampled (below); every LLM's overall trait
and domain scores are drawn afterwards, exactly, from their conditional
posteriors given each structure draw (:func:`draw_llm_side`). The overall
traits here have the population prior ``N(0, I_r)`` (LLMs independent), and
each draw's overall traits are standardised over the LLMs when the overall
scores are reported. The sampled route has the same prior, written as the
standardised traits with their mean and variance over the LLMs
(:func:`mtlirt.bayes.model.population_eta`), so both routes give the same
posterior.

The two integrals (:func:`build_grid`)
-------------------------------------
Both use nodes fixed before sampling:

* inner, per cell: a trapezoid rule, ``Q`` equally spaced nodes ``t_ikq``
  (at most ``INNER_STEP`` conditional sds apart) spanning the cell's
  posterior of ``theta_ik`` (mean +- ``inner_half_width`` sds, widened by
  the reach of the outer nodes), weights ``w_ikq = exp(l_ik(t_ikq) - max_q
  l_ik)``;
* outer, per LLM: nodes ``eta_ig = mu_i + L_i u_g`` (``L_i`` the Cholesky
  factor of the LLM's posterior covariance of ``eta_i``), ``u_g`` the
  Gauss-Hermite nodes of ``N(0, I)`` (``G1`` = 4 per axis; 8 at rank 1 and
  6 at rank 2 with fewer than 16 domains), weights
  ``N(eta_ig; 0, I) |L_i| w_g / phi(u_g)``. The exact draws need equally
  spaced nodes instead (:func:`draw_grid`: 9 per axis over +- 4.8 sds at
  rank 1, 7 over +- 4.2 at rank 2, weights ``N(eta_ig; 0, I) |L_i| h^r``).
  Few domains leave the LLM's posterior less Gaussian, hence more nodes
  there. An LLM answered in one domain only has a likelihood that does
  not depend on the structure (``|Lambda_k|^2 + psi_k^2 = 1``), but a
  skewed posterior whose quadrature error would move with the loadings:
  such LLMs are left out of the structure's density
  (:func:`informative_llms`) and kept for the draws. The quadrature check
  (below) measures what is left (``benchmarks/bench_collapsed.py``).

The nodes are placed at the posterior mode of the structure (found first by
L-BFGS), where the conditionals move little over the structure's posterior.

Sampling the structure
----------------------
In the coordinates ``asinh(V)`` (:func:`structure_logp`) the structure's
posterior is close to the Laplace approximation at the mode
(:func:`laplace_whitening`) once there are a few hundred LLMs
(``benchmarks/bench_collapsed.py flagship`` prints the pilot's importance
ratios and IMH's acceptance). Then
independence Metropolis-Hastings from it (with a defensive Student-t part,
:func:`imh_log_proposal`) mixes almost like independent draws, and as its
proposals do not depend on the chain, their log densities are evaluated up
front, in parallel and without gradients (one value pass per draw, against
NUTS's 7 leapfrog steps of value and gradient). A pilot of ``IMH_PILOT`` proposals decides (Pareto k-hat of their
importance ratios at most ``IMH_PILOT_K_MAX``, and IMH's chains then
converging); otherwise, and on request,
NUTS (nutpie) samples the loadings whitened by the same approximation,
chains started at draws from it. The Pareto k-hat of all proposals is part
of the convergence check (:mod:`mtlirt.bayes.diagnostics`).

Cost (:func:`collapsed_kernel`)
-------------------------------
The Gaussian factor of node ``q`` at outer node ``g`` separates: with ``c``
the distance from the LLM's centre prior mean to the middle inner node, ``h``
the inner step and ``v_g = Lambda_k . L_i u_g``::

    -a (t_q - m_g)^2 = E_q + 2 a c v_g - a v_g^2 + q (2 a h v_g),
    E_q = log w_q - a (c + q h)^2,   a = 1 / (2 psi^2),   q centred,

so ``sum_q w_q exp(-a (t_q - m_g)^2) = exp(.) * P(Y_g)`` with ``Y_g =
exp(2 a h v_g)`` and ``P`` a polynomial whose coefficients ``exp(E_q)`` do
not depend on ``g``: one Horner scheme per (cell, outer node) instead of
``Q`` exponentials. The same scheme with coefficients ``q exp(E_q)`` and
``q^2 exp(E_q)`` gives the first two moments of ``t - m`` and with them the
gradient. All terms are positive (no cancellation). A cell whose terms could
overflow or underflow (``|2 a h v| (Q - 1) > 650``, a Gaussian factor
beyond ``exp(-600)`` across the nodes, or a sum below ``1e-250``: loadings far
from the grid's, warm-up territory) is summed in the log domain instead. The coefficients themselves
cost three exponentials per cell, not ``Q``: ``exp(E_q)`` is ``w_q`` (kept
with the grid) times a Gaussian factor whose ratios between neighbouring
nodes form a geometric sequence.

The draws (:func:`draw_llm_side`)
---------------------------------
Per structure draw and LLM: the exact log posterior at the nodes of the
equally spaced grid :func:`draw_grid` (the kernel's per-node totals) defines a density that is log-linear between
neighbouring nodes; ``eta_i`` is drawn from it by inverse CDF (rank 2: the
first axis from its marginal, the second from its conditional). Then each
``theta_ik`` is drawn the same way from ``exp(l_ik(t) - (t - Lambda_k .
eta_i)^2 / (2 psi_k^2))`` on the cell's inner nodes. For a Gaussian the
log-linear interpolant has the exact variance and its 5% and 95% quantiles
move by 0.004 sds at a node spacing of one sd (0.001 at half an sd), far
below the Monte Carlo error of a quantile from 1,000 draws (about 0.04 sds).

Accuracy (:func:`quadrature_check`): the same integrals on a finer, wider
grid at posterior draws of the structure; the spread of the difference over
the draws is what could move the posterior.
"""

from __future__ import annotations

import dataclasses
import math
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numba
import numpy as np

from mtlirt.bayes._factor import factor_parts, loading_layout
from mtlirt.bayes._vecmath import exp_nonpos, log_pos
from mtlirt.bayes.diagnostics import diagnostics, pareto_khat
from mtlirt.bayes.marginal import _likelihood_gaussian, quadrature_nodes
from mtlirt.config import NUTS_DRAWS
from mtlirt.numerics.llm_side import cell_quadrature, gauss_hermite, numba_log_domain

__all__ = [
    "CollapsedGrid",
    "N_INNER",
    "N_OUTER",
    "build_grid",
    "collapsed_kernel",
    "collapsed_loglik_np",
    "draw_llm_side",
    "find_mode",
    "quadrature_check",
    "structure_from_v",
]

N_INNER = 11
MAX_INNER = 31
INNER_HALF_WIDTH = 5.0
INNER_STEP = 1.0
N_OUTER = {1: 4, 2: 4}
N_OUTER_FEW = {1: 8, 2: 6}
FEW_DOMAINS = 16
N_DRAW_OUTER = {1: 9, 2: 7}
OUTER_HALF_WIDTH = {1: 4.8, 2: 4.2}
_LOGW_MIN = -700.0
_Z_MAX = 650.0
_T_MAX = 600.0
_A_MIN = 1e-280
_P_MIN = 1e-250
_BLOCK = 64


@dataclass
class CollapsedGrid:
    """The fixed nodes of the two integrals, in the kernel's layout.

    Inner (per cell, domain-major): ``start``, ``step``, ``logscale`` (K, N),
    ``logw`` (K, Q, N) and ``expw = exp(logw)``. Outer (per LLM): ``mu`` (r, N), ``chol`` (r, r, N),
    ``offsets`` (G, r) whitened node offsets, ``logomega`` (G, N) log
    weights; ``n_axis`` nodes per axis (the offsets are the full product
    grid, first axis slowest); ``rule`` ``"hermite"`` (Gauss-Hermite nodes
    and weights) or ``"trapezoid"`` (equally spaced, ``outer_step`` apart
    over +- ``outer_half_width``: the layout the exact draws need)."""

    start: np.ndarray
    step: np.ndarray
    logscale: np.ndarray
    logw: np.ndarray
    mu: np.ndarray
    chol: np.ndarray
    offsets: np.ndarray
    logomega: np.ndarray
    n_axis: int
    outer_step: float
    info: np.ndarray | None = None
    rule: str = "trapezoid"
    outer_half_width: float = 4.8
    expw: np.ndarray | None = None

    def __post_init__(self):
        if self.expw is None:
            self.expw = np.exp(self.logw)

    @property
    def arrays(self) -> tuple[np.ndarray, ...]:
        """The kernel's grid arguments."""
        return (self.start, self.step, self.logw, self.expw, self.logscale, self.mu, self.chol,
                self.offsets, self.logomega)

    @property
    def rank(self) -> int:
        return self.mu.shape[0]

    @property
    def shape(self) -> tuple[int, int]:
        """(N, K)"""
        return self.start.shape[1], self.start.shape[0]


def structure_from_v(V: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Loadings and residual sds from the unsquashed loadings ``V`` (..., K, r):
    ``Lambda = V psi``, ``psi = (1 + |V_k|^2)^(-1/2)``."""
    psi = 1.0 / np.sqrt(1.0 + (V**2).sum(-1))
    return V * psi[..., None], psi


# ---------------------------------------------------------------------------
# the kernel
# ---------------------------------------------------------------------------


_direct = numba_log_domain()  # one (cell, outer node) in the log domain


# The kernel's steps, inlined into it by numba (``inline="always"``: the same
# machine code as one long function). Each works on one block of ``nb`` LLMs
# starting at ``b0``, with the block's work arrays passed in.


@numba.njit(inline="always", fastmath={"contract"}, error_model="numpy", boundscheck=False, cache=True)
def _centres(k, b0, nb, st, hh, Qc, lam, mu, chol, c, e):
    # c: the middle of domain k's inner nodes minus the prior mean lam_k . mu at
    # the outer centre; e = chol' lam_k, the shift per unit of outer offset
    r = mu.shape[0]
    for i in range(nb):
        c[i] = st[i] + Qc * hh[i]
    for j in range(r):
        lkj = lam[k, j]
        for i in range(nb):
            c[i] -= lkj * mu[j, b0 + i]
    e[:, :nb] = 0.0
    for l in range(r):
        lkl = lam[k, l]
        for j in range(r):
            for i in range(nb):
                e[j, i] += lkl * chol[l, j, b0 + i]


@numba.njit(inline="always", fastmath={"contract"}, error_model="numpy", boundscheck=False, cache=True)
def _inner_weights(k, b0, nb, Q, Qc, a, hh, c, expw, M, bad, gq, rq, kq, A):
    # A_q = w_q exp(-a (d_q^2 - D)), d_q = c + (q - Qc) h, D the least d^2
    # over the nodes' span (so A_q <= 1): three exponentials per cell,
    # the rest by the recurrence of the Gaussian's ratios
    for i in range(nb):
        h = hh[i]
        d0 = c[i] - Qc * h
        d1 = c[i] + Qc * h
        D = 0.0 if d0 * d1 <= 0.0 else min(d0 * d0, d1 * d1)
        t0 = a * (d0 * d0 - D)
        t1 = a * (d1 * d1 - D)
        r0 = a * (2.0 * d0 * h + h * h)
        M[i] = -a * D
        bad[i] = (t0 > _T_MAX) | (t1 > _T_MAX) | (abs(r0) > _T_MAX)
        gq[i] = exp_nonpos(-min(t0, _T_MAX))
        rq[i] = exp_nonpos(min(max(-r0, -_T_MAX), _T_MAX))
        kq[i] = exp_nonpos(-2.0 * a * h * h)
    for q in range(Q):
        wq = expw[k, q, b0:b0 + nb]
        for i in range(nb):
            x = wq[i] * gq[i]
            A[q, i] = x if x > _A_MIN else 0.0
            gq[i] *= rq[i]
            rq[i] *= kq[i]


@numba.njit(inline="always", fastmath={"contract"}, error_model="numpy", boundscheck=False, cache=True)
def _outer_nodes(k, b0, nb, Q, Qc, a, lp, zmax, store, offsets, e, c, st, hh, ls, logw, A, M, bad,
                 v, Y, P0, P1, P2, LF, D1, D2, acc):
    # domain k at every outer node g: the inner sum (Horner in the node ratio Y)
    # added to acc[g]; with store, E[d] and E[d^2] over the inner nodes in D1, D2
    G, r = offsets.shape
    for g in range(G):
        for i in range(nb):
            v[i] = 0.0
        for j in range(r):
            ogj = offsets[g, j]
            for i in range(nb):
                v[i] += ogj * e[j, i]
        for i in range(nb):
            z = 2.0 * a * hh[i] * v[i]
            Y[i] = exp_nonpos(min(max(z, -zmax), zmax))
            P0[i] = A[Q - 1, i]
        if store:
            for i in range(nb):
                P1[i] = (Q - 1) * A[Q - 1, i]
                P2[i] = (Q - 1) * (Q - 1) * A[Q - 1, i]
            for q in range(Q - 2, -1, -1):
                fq = float(q)
                for i in range(nb):
                    y = Y[i]
                    aq = A[q, i]
                    P0[i] = P0[i] * y + aq
                    P1[i] = P1[i] * y + fq * aq
                    P2[i] = P2[i] * y + fq * fq * aq
        else:
            for q in range(Q - 2, -1, -1):
                for i in range(nb):
                    P0[i] = P0[i] * Y[i] + A[q, i]
        # the log domain where the scaled sums could leave the float range
        n_bad = 0
        for i in range(nb):
            n_bad += bad[i] | (abs(2.0 * a * hh[i] * v[i]) > zmax) | (P0[i] < _P_MIN)
        for i in range(nb):
            if n_bad:
                P0[i] = max(P0[i], _P_MIN)
            z = 2.0 * a * hh[i] * v[i]
            LF[i] = ls[i] + M[i] + log_pos(P0[i]) - Qc * z + a * v[i] * (2.0 * c[i] - v[i]) - lp
        if store:
            for i in range(nb):
                inv = 1.0 / P0[i]
                r1 = P1[i] * inv
                Eq = r1 - Qc
                Eq2 = P2[i] * inv - 2.0 * Qc * r1 + Qc * Qc
                u = c[i] - v[i]
                h = hh[i]
                D1[k, g, i] = u + h * Eq
                D2[k, g, i] = u * u + 2.0 * u * h * Eq + h * h * Eq2
        if n_bad:
            for i in range(nb):
                if bad[i] | (abs(2.0 * a * hh[i] * v[i]) > zmax) | (P0[i] <= _P_MIN):
                    mc = st[i] + Qc * hh[i] - c[i]
                    lsum, Ed, Ed2 = _direct(logw[k], b0 + i, st[i], hh[i], mc + v[i], a)
                    LF[i] = ls[i] + lsum - lp
                    D1[k, g, i] = Ed
                    D2[k, g, i] = Ed2
        for i in range(nb):
            acc[g, i] += LF[i]


@numba.njit(inline="always", fastmath={"contract"}, error_model="numpy", boundscheck=False, cache=True)
def _outer_sum(acc, pi, nb, total):
    # per LLM: the outer sum of exp(acc) (added to total, LLM by LLM) and the
    # nodes' posterior weights pi
    G = acc.shape[0]
    for i in range(nb):
        mx = -np.inf
        for g in range(G):
            mx = max(mx, acc[g, i])
        s = 0.0
        for g in range(G):
            w = np.exp(acc[g, i] - mx)
            pi[g, i] = w
            s += w
        for g in range(G):
            pi[g, i] /= s
        total += mx + np.log(s)
    return total


@numba.njit(inline="always", fastmath={"contract"}, error_model="numpy", boundscheck=False, cache=True)
def _node_means(k, nb, pi, D1, D2, s1v, s2v):
    # per LLM: the means of D1[k] and D2[k] over the outer nodes, weighted by
    # the nodes' posterior weights pi
    G = pi.shape[0]
    for i in range(nb):
        s1v[i] = 0.0
        s2v[i] = 0.0
    for g in range(G):
        for i in range(nb):
            s1v[i] += pi[g, i] * D1[k, g, i]
            s2v[i] += pi[g, i] * D2[k, g, i]


@numba.njit(inline="always", fastmath={"contract"}, error_model="numpy", boundscheck=False, cache=True)
def _gradient_block(k, b0, nb, pi, D1, D2, mu, chol, offsets, s1v, s2v, so, dlam, dpsi):
    # the block's share of d/dlambda_k and d/dpsi_k (D1, D2 already scaled to
    # the derivatives of log f per outer node)
    G, r = offsets.shape
    _node_means(k, nb, pi, D1, D2, s1v, s2v)
    for i in range(nb):
        dpsi[k] += s2v[i]
    for l in range(r):
        for i in range(nb):
            so[l, i] = 0.0
        for g in range(G):
            ogl = offsets[g, l]
            for i in range(nb):
                so[l, i] += pi[g, i] * D1[k, g, i] * ogl
    for j in range(r):
        sj = 0.0
        for i in range(nb):
            sg = mu[j, b0 + i] * s1v[i]
            for l in range(r):
                sg += chol[j, l, b0 + i] * so[l, i]
            sj += sg
        dlam[k, j] += sj


@numba.njit(inline="always", fastmath={"contract"}, error_model="numpy", boundscheck=False, cache=True)
def _moments_block(k, b0, nb, pi, D1, D2, mu, chol, offsets, lam, s1v, s2v, mom1, mom2):
    # theta = m_g + d: D1[k], D2[k] turned into theta's first two moments at
    # each outer node, then their means over the nodes
    G, r = offsets.shape
    for g in range(G):
        for i in range(nb):
            m = 0.0
            for j in range(r):
                ej = mu[j, b0 + i]
                for l in range(r):
                    ej += chol[j, l, b0 + i] * offsets[g, l]
                m += lam[k, j] * ej
            d1 = D1[k, g, i]
            D1[k, g, i] = m + d1
            D2[k, g, i] = m * m + 2.0 * m * d1 + D2[k, g, i]
    _node_means(k, nb, pi, D1, D2, s1v, s2v)
    for i in range(nb):
        mom1[k, b0 + i] = s1v[i]
        mom2[k, b0 + i] = s2v[i]


@numba.njit(fastmath={"contract"}, error_model="numpy", boundscheck=False, nogil=True, cache=True)
def _kernel(start, step, logw, expw, logscale, mu, chol, offsets, logomega, lam, psi, mode,
            node_out, mom1, mom2):
    K, Q, N = logw.shape
    r = mu.shape[0]
    G = offsets.shape[0]
    Qc = 0.5 * (Q - 1)
    B = _BLOCK
    acc = np.empty((G, B))
    D1 = np.empty((K, G, B))
    D2 = np.empty((K, G, B))
    A = np.empty((Q, B))
    bad = np.empty(B, dtype=np.bool_)
    e = np.empty((r, B))
    so = np.empty((r, B))
    work = np.empty((13, B))  # the block's per-LLM work vectors, one row each
    c, M, gq, rq, kq, v, Y = work[0], work[1], work[2], work[3], work[4], work[5], work[6]
    P0, P1, P2, LF, s1v, s2v = work[7], work[8], work[9], work[10], work[11], work[12]
    pi = np.empty((G, B))
    dlam = np.zeros((K, r))
    dpsi = np.zeros(K)
    total = 0.0
    store = mode != 0
    zmax = _Z_MAX / max(Q - 1, 1)
    for b0 in range(0, N, B):
        b1 = min(N, b0 + B)
        nb = b1 - b0
        for g in range(G):
            for i in range(nb):
                acc[g, i] = logomega[g, b0 + i]
        for k in range(K):
            p = psi[k]
            a = 0.5 / (p * p)
            lp = np.log(p)
            st = start[k, b0:b1]
            hh = step[k, b0:b1]
            ls = logscale[k, b0:b1]
            _centres(k, b0, nb, st, hh, Qc, lam, mu, chol, c, e)
            _inner_weights(k, b0, nb, Q, Qc, a, hh, c, expw, M, bad, gq, rq, kq, A)
            _outer_nodes(k, b0, nb, Q, Qc, a, lp, zmax, store, offsets, e, c, st, hh, ls, logw, A, M, bad,
                         v, Y, P0, P1, P2, LF, D1, D2, acc)
            if mode == 1:
                for g in range(G):
                    for i in range(nb):
                        D1[k, g, i] = 2.0 * a * D1[k, g, i]
                        D2[k, g, i] = D2[k, g, i] / (p * p * p) - 1.0 / p
        total = _outer_sum(acc, pi, nb, total)
        if node_out.shape[0]:
            for g in range(G):
                for i in range(nb):
                    node_out[g, b0 + i] = acc[g, i]
        if not store:
            continue
        for k in range(K):
            if mode == 1:
                _gradient_block(k, b0, nb, pi, D1, D2, mu, chol, offsets, s1v, s2v, so, dlam, dpsi)
            else:
                _moments_block(k, b0, nb, pi, D1, D2, mu, chol, offsets, lam, s1v, s2v, mom1, mom2)
    return total, dlam, dpsi


def collapsed_kernel():
    """The compiled kernel ``(start, step, logw, expw, logscale, mu, chol, offsets,
    logomega, lam, psi, mode, node_out, mom1, mom2) -> (total, dlam (K, r),
    dpsi (K,))``.

    ``mode`` 0: value only; 1: value and gradient; 2: value and the
    posterior moments of every ``theta_ik`` (``mom1``, ``mom2`` (K, N):
    mean and mean square). ``node_out`` (G, N), if not empty, receives each
    LLM's log posterior at its outer nodes (up to a constant)."""
    return _kernel


_EMPTY2 = np.empty((0, 0))


def _call(grid: CollapsedGrid, lam, psi, mode: int = 0, node_out=None, moments: bool = False):
    K = grid.start.shape[0]
    N = grid.start.shape[1]
    m1 = np.empty((K, N)) if moments else _EMPTY2
    m2 = np.empty((K, N)) if moments else _EMPTY2
    out = _EMPTY2 if node_out is None else node_out
    v, dl, dp = collapsed_kernel()(*grid.arrays, np.ascontiguousarray(lam, dtype=np.float64),
                                   np.ascontiguousarray(psi, dtype=np.float64), int(mode), out, m1, m2)
    if moments:
        return v, m1, m2
    return v, dl, dp


def collapsed_loglik_np(grid: CollapsedGrid, lam: np.ndarray, psi: np.ndarray) -> np.ndarray:
    """The two trapezoid rules in plain numpy, log domain (the reference for the
    kernel): ``log p(y_i | Lambda)`` per LLM (N,)."""
    from scipy.special import logsumexp

    K, Q, N = grid.logw.shape
    nodes = grid.start[:, None, :] + grid.step[:, None, :] * np.arange(Q)[None, :, None]  # K Q N
    eta = grid.mu[None, :, :] + np.einsum("jln,gl->gjn", grid.chol, grid.offsets)  # G r N
    m = np.einsum("kj,gjn->gkn", lam, eta)  # G K N
    a = 0.5 / psi**2
    e = grid.logw[None] - a[None, :, None, None] * (nodes[None] - m[:, :, None, :]) ** 2  # G K Q N
    lf = grid.logscale[None] + logsumexp(e, axis=2) - np.log(psi)[None, :, None]  # G K N
    return logsumexp(grid.logomega + lf.sum(1), axis=0)


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
    logw = np.maximum(logw, _LOGW_MIN)
    return (np.ascontiguousarray(start.T), np.ascontiguousarray(step.T),
            np.ascontiguousarray(logscale.T), np.ascontiguousarray(logw.transpose(1, 2, 0)))


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


def _gaussian_start(tables, quad: dict, lam: np.ndarray, psi: np.ndarray):
    """Gaussian approximation of each LLM's posterior of ``eta_i`` and of each
    cell's posterior of ``theta_ik`` from the cells' own Gaussian likelihoods."""
    info, that = _likelihood_gaussian(quad)
    r = lam.shape[1]
    # that_ik ~ N(Lambda_k eta, psi_k^2 + 1 / I_ik)
    with np.errstate(divide="ignore"):
        wgt = np.where(info > 1e-8, 1.0 / (psi[None, :] ** 2 + 1.0 / np.maximum(info, 1e-300)), 0.0)
    prec = np.eye(r)[None] + np.einsum("nk,kj,kl->njl", wgt, lam, lam)
    cov = np.linalg.inv(prec)
    mu = np.einsum("njl,nl->nj", cov, np.einsum("nk,kj->nj", wgt * that, lam))
    return mu, cov


def build_grid(tables, lam: np.ndarray, psi: np.ndarray, *, quad: dict | None = None,
               mu: np.ndarray | None = None, cov: np.ndarray | None = None,
               theta_mean: np.ndarray | None = None, theta_sd: np.ndarray | None = None,
               info: np.ndarray | None = None,
               n_inner: int = N_INNER, inner_half_width: float = INNER_HALF_WIDTH,
               n_outer: int | None = None, outer_half_width: float | None = None,
               outer_rule: str = "hermite") -> CollapsedGrid:
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
        sds (the outer span sets the inner nodes' reach either way: the
        draws' equally spaced grid, :func:`draw_grid`, shares them).
    outer_rule : {"hermite", "trapezoid"}
        Gauss-Hermite nodes (the likelihood: by default 4 per axis with
        ``FEW_DOMAINS`` domains or more, else 8 at rank 1 and 6 at rank 2:
        with few domains an LLM's posterior of its overall trait is further
        from Gaussian) or the equally spaced grid of the draws
        (``N_DRAW_OUTER`` per axis).

    Returns
    -------
    CollapsedGrid
    """
    r = lam.shape[1]
    K = lam.shape[0]
    table = (N_OUTER if K >= FEW_DOMAINS else N_OUTER_FEW) if outer_rule == "hermite" else N_DRAW_OUTER
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
        need = int(np.ceil(np.quantile(half / sd_c, 0.99) / INNER_STEP))  # steps per half span
        n_inner = int(min(max(n_inner, 2 * need + 1), MAX_INNER))
    start, step, logscale, logw = _inner(tables, theta_mean, half, n_inner)
    mu_t, chol, offsets, logomega, h = _outer(mu, cov, n_outer, outer_half_width, outer_rule)
    return CollapsedGrid(start=start, step=step, logscale=logscale, logw=logw, mu=mu_t, chol=chol,
                         offsets=offsets, logomega=logomega, n_axis=int(n_outer), outer_step=h, info=info,
                         rule=outer_rule, outer_half_width=float(outer_half_width))


def draw_grid(grid: CollapsedGrid, n_outer: int | None = None) -> CollapsedGrid:
    """The equally spaced outer grid the exact draws need (``N_DRAW_OUTER``
    nodes per axis over +- ``grid.outer_half_width``), around the same centres
    and with the same inner nodes; ``grid`` itself if it is one already."""
    r = grid.rank
    n = N_DRAW_OUTER.get(r, 7) if n_outer is None else int(n_outer)
    if grid.rule == "trapezoid" and (n_outer is None or n == grid.n_axis):
        return grid
    mu = grid.mu.T
    Lc = grid.chol.transpose(2, 0, 1)
    mu_t, chol, offsets, logomega, h = _outer(mu, Lc @ Lc.transpose(0, 2, 1), n, grid.outer_half_width)
    return dataclasses.replace(grid, mu=mu_t, chol=chol, offsets=offsets, logomega=logomega, n_axis=n,
                               outer_step=h, rule="trapezoid")


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


def llm_subset(grid: CollapsedGrid, tables, idx: np.ndarray):
    """The grid and tables of the LLMs ``idx`` only: ``(grid, tables)``."""
    c = np.ascontiguousarray
    g = dataclasses.replace(grid, start=c(grid.start[:, idx]), step=c(grid.step[:, idx]),
                            logscale=c(grid.logscale[:, idx]), logw=c(grid.logw[:, :, idx]),
                            expw=c(grid.expw[:, :, idx]), mu=c(grid.mu[:, idx]), chol=c(grid.chol[:, :, idx]),
                            logomega=c(grid.logomega[:, idx]), info=None if grid.info is None else grid.info[idx])
    t = dataclasses.replace(tables, s=tables.s[idx], const=tables.const[idx], table=tables.table[idx])
    return g, t


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
    from the mass misses some of it)."""
    r = lam.shape[1]
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
# the structure's parameters: V (unsquashed loadings) <-> free variables
# ---------------------------------------------------------------------------


def _v_gradient(V: np.ndarray, dlam: np.ndarray, dpsi: np.ndarray) -> np.ndarray:
    """d/dV of a function of ``(Lambda, psi) = structure_from_v(V)``."""
    psi = 1.0 / np.sqrt(1.0 + (V**2).sum(-1))
    inner = (dlam * V).sum(-1) + dpsi
    return psi[:, None] * dlam - (psi**3)[:, None] * V * inner[:, None]


def find_mode(grid: CollapsedGrid, V0: np.ndarray, layout, loading_scale: float, *,
              maxiter: int = 200) -> tuple[np.ndarray, dict]:
    """Posterior mode of the unsquashed loadings (free entries ``N(0,
    loading_scale)``, diagonal entries half-normal) by L-BFGS-B; returns ``V``
    and the optimiser's summary."""
    from scipy.optimize import minimize

    rows, cols, drows = layout
    K, r = V0.shape
    n_free = len(rows)

    def unpack(x):
        V = np.zeros((K, r))
        V[rows, cols] = x[:n_free]
        V[drows, np.arange(r)] = x[n_free:]
        return V

    def f(x):
        V = unpack(x)
        lam, psi = structure_from_v(V)
        val, dl, dp = _call(grid, lam, psi, mode=1)
        gV = _v_gradient(V, dl, dp)
        val = val - 0.5 * (x**2).sum() / loading_scale**2
        g = np.concatenate([gV[rows, cols], gV[drows, np.arange(r)]]) - x / loading_scale**2
        return -val, -g

    x0 = np.concatenate([V0[rows, cols], V0[drows, np.arange(r)]])
    bounds = [(None, None)] * n_free + [(1e-3, None)] * r
    res = minimize(f, x0, jac=True, method="L-BFGS-B", bounds=bounds, options={"maxiter": maxiter})
    return unpack(res.x), {"iterations": int(res.nit), "evaluations": int(res.nfev),
                           "converged": bool(res.success), "message": str(res.message)}


# ---------------------------------------------------------------------------
# exact draws of the LLM side
# ---------------------------------------------------------------------------


@numba.njit(fastmath={"contract"}, error_model="numpy", boundscheck=False, cache=True)
def _sample_loglinear(lv, x0, h, u, wbuf):
    # draw from the density exp(lv) interpolated log-linearly between the
    # equally spaced nodes x0 + q h (inverse CDF; lv has n >= 2 entries)
    n = lv.shape[0]
    mx = -np.inf
    for q in range(n):
        mx = max(mx, lv[q])
    # segment masses (e_{q+1} - e_q) / (lv_{q+1} - lv_q): one exponential per
    # node (relative error below 1e-11 at |dlt| >= 1e-4; the trapezoid's
    # below that, dlt^2 / 12)
    tot = 0.0
    eb = exp_nonpos(lv[0] - mx)
    for q in range(n - 1):
        ea = eb
        eb = exp_nonpos(lv[q + 1] - mx)
        dlt = lv[q + 1] - lv[q]
        if abs(dlt) < 1e-4:
            m = 0.5 * (ea + eb)
        else:
            m = (eb - ea) / dlt
        tot += m
        wbuf[q] = tot
    target = u * tot
    q = 0
    while q < n - 2 and wbuf[q] < target:
        q += 1
    prev = wbuf[q - 1] if q > 0 else 0.0
    seg = wbuf[q] - prev
    frac = (target - prev) / seg if seg > 0 else 0.5
    frac = min(max(frac, 0.0), 1.0)
    dlt = lv[q + 1] - lv[q]
    if abs(dlt) < 1e-8:
        t = frac
    else:
        t = math.log1p(frac * math.expm1(dlt)) / dlt
    return x0 + (q + min(max(t, 0.0), 1.0)) * h

@numba.njit(nogil=True, boundscheck=False, cache=True)
def _draw_kernel(nodes, mu, chol, n_axis, h_out, start, step, logw, lam, psi, u_eta, u_theta,
           eta_out, theta_out):
    # nodes (G, N): log posterior at the outer nodes; u_eta (N, r), u_theta (N, K) uniforms
    G, N = nodes.shape
    r = mu.shape[0]
    K, Q, _ = logw.shape
    x0 = -0.5 * (n_axis - 1) * h_out
    for i in range(N):
        wbuf = np.empty(max(Q, n_axis))
        lv = np.empty(n_axis)
        x = np.empty(r)
        if r == 1:
            for g in range(G):
                lv[g] = nodes[g, i]
            x[0] = _sample_loglinear(lv, x0, h_out, u_eta[i, 0], wbuf)
        else:
            # first axis from its marginal (trapezoid over the second)
            for g1 in range(n_axis):
                mx = -np.inf
                for g2 in range(n_axis):
                    mx = max(mx, nodes[g1 * n_axis + g2, i])
                s = 0.0
                for g2 in range(n_axis):
                    s += math.exp(nodes[g1 * n_axis + g2, i] - mx)
                lv[g1] = mx + math.log(s)
            x[0] = _sample_loglinear(lv, x0, h_out, u_eta[i, 0], wbuf)
            pos = (x[0] - x0) / h_out
            j = min(max(int(math.floor(pos)), 0), n_axis - 2)
            t = pos - j
            for g2 in range(n_axis):
                lv[g2] = (1.0 - t) * nodes[j * n_axis + g2, i] + t * nodes[(j + 1) * n_axis + g2, i]
            x[1] = _sample_loglinear(lv, x0, h_out, u_eta[i, 1], wbuf)
        for jj in range(r):
            s = mu[jj, i]
            for l in range(r):
                s += chol[jj, l, i] * x[l]
            eta_out[i, jj] = s
    # the domain scores by blocks of LLMs, the LLM index innermost (the
    # tables are laid out (K, Q, N)) and the exponentials and segment masses
    # of a block in loops the compiler vectorises (one LLM at a time, this
    # loop took most of a structure draw's time)
    B = _BLOCK
    L = np.empty((Q, B))
    E = np.empty((Q, B))
    C = np.empty((Q, B))
    mb = np.empty(B)
    for b0 in range(0, N, B):
        nb = min(N, b0 + B) - b0
        for k in range(K):
            a = 0.5 / (psi[k] * psi[k])
            for ii in range(nb):
                m = 0.0
                for jj in range(r):
                    m += lam[k, jj] * eta_out[b0 + ii, jj]
                mb[ii] = m
            for q in range(Q):
                for ii in range(nb):
                    i = b0 + ii
                    d = start[k, i] + q * step[k, i] - mb[ii]
                    L[q, ii] = logw[k, q, i] - a * d * d
            _loglinear_masses(L, E, C, mb, nb)
            for ii in range(nb):
                i = b0 + ii
                theta_out[i, k] = _invert_masses(L, C, ii, start[k, i], step[k, i], u_theta[i, k])


@numba.njit(fastmath={"contract"}, error_model="numpy", boundscheck=False, cache=True)
def _loglinear_masses(L, E, C, mx, nb):
    # column ii of L (Q, B): log density at Q equally spaced nodes; C[q, ii]:
    # the cumulative mass up to the end of segment q of the density
    # interpolated log-linearly (as _sample_loglinear, a block at a time)
    Q = L.shape[0]
    for ii in range(nb):
        mx[ii] = L[0, ii]
    for q in range(1, Q):
        for ii in range(nb):
            mx[ii] = max(mx[ii], L[q, ii])
    for q in range(Q):
        for ii in range(nb):
            E[q, ii] = exp_nonpos(L[q, ii] - mx[ii])
    for q in range(Q - 1):
        for ii in range(nb):
            dlt = L[q + 1, ii] - L[q, ii]
            m = 0.5 * (E[q, ii] + E[q + 1, ii]) if abs(dlt) < 1e-4 else (E[q + 1, ii] - E[q, ii]) / dlt
            C[q, ii] = (C[q - 1, ii] if q > 0 else 0.0) + m


@numba.njit(fastmath={"contract"}, error_model="numpy", boundscheck=False, cache=True)
def _invert_masses(L, C, ii, x0, h, u):
    # the inverse CDF of column ii (see _loglinear_masses) at u
    n = L.shape[0]
    target = u * C[n - 2, ii]
    q = 0
    while q < n - 2 and C[q, ii] < target:
        q += 1
    prev = C[q - 1, ii] if q > 0 else 0.0
    seg = C[q, ii] - prev
    frac = (target - prev) / seg if seg > 0 else 0.5
    frac = min(max(frac, 0.0), 1.0)
    dlt = L[q + 1, ii] - L[q, ii]
    if abs(dlt) < 1e-8:
        t = frac
    else:
        t = math.log1p(frac * math.expm1(dlt)) / dlt
    return x0 + (q + min(max(t, 0.0), 1.0)) * h


def draw_llm_side(grid: CollapsedGrid, lam: np.ndarray, psi: np.ndarray, *, seed: int = 0,
                  dtype=np.float32, progress=None):
    """Draw every LLM's overall trait and domain scores from their conditional
    posteriors given each structure draw (see module docstring).

    Parameters
    ----------
    grid : CollapsedGrid
    lam : ndarray (C, D, K, r)
    psi : ndarray (C, D, K)
    seed : int
    dtype : numpy dtype of the domain scores
    progress : callable, optional
        Called with the fraction done.

    Returns
    -------
    eta : ndarray (C, D, N, r) float64
    theta : ndarray (C, D, N, K) ``dtype``
    """
    C, D, K, r = lam.shape
    grid = draw_grid(grid)
    N = grid.shape[0]
    G = grid.offsets.shape[0]
    eta = np.empty((C, D, N, r))
    theta = np.empty((C, D, N, K), dtype=dtype)
    seqs = np.random.SeedSequence([int(seed), 0xC011A95E]).spawn(C * D)
    draw = _draw_kernel
    kern = collapsed_kernel()
    jobs = [(c, t) for c in range(C) for t in range(D)]

    def one(job_index):
        c, t = jobs[job_index]
        rng = np.random.default_rng(seqs[job_index])
        nodes = np.empty((G, N))
        lam_t = np.ascontiguousarray(lam[c, t], dtype=np.float64)
        psi_t = np.ascontiguousarray(psi[c, t], dtype=np.float64)
        kern(*grid.arrays, lam_t, psi_t, 0, nodes, _EMPTY2, _EMPTY2)
        ue = rng.random((N, r))
        ut = rng.random((N, K))
        th = np.empty((N, K))
        et = np.empty((N, r))
        draw(nodes, grid.mu, grid.chol, grid.n_axis, grid.outer_step, grid.start, grid.step, grid.logw,
             lam_t, psi_t, ue, ut, et, th)
        eta[c, t] = et
        theta[c, t] = th

    done = 0
    with ThreadPoolExecutor(2) as pool:
        for _ in pool.map(one, range(len(jobs))):
            done += 1
            if progress is not None and done % max(1, len(jobs) // 100) == 0:
                progress(done / len(jobs))
    return eta, theta


# ---------------------------------------------------------------------------
# accuracy
# ---------------------------------------------------------------------------


def quadrature_check(grid: CollapsedGrid, tables, lam: np.ndarray, psi: np.ndarray, *,
                     n_draws: int = 8, fine: dict | None = None) -> dict:
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
        Settings of the fine grid (default: equally spaced outer nodes, three
        times as many per unit as the draws' grid and half as wide again;
        inner nodes three times as dense and half as wide again).

    Returns
    -------
    dict
        ``max_abs_diff`` (largest |fine - working| of the total
        log-likelihood over the draws), ``spread_diff`` (its max - min over
        the draws: what could move the posterior), ``max_abs_diff_per_llm``,
        ``n_draws``, ``seconds``.
    """
    t0 = time.perf_counter()
    S = lam.shape[0]
    pick = np.unique(np.linspace(0, S - 1, min(n_draws, S)).round().astype(int))
    Q = grid.logw.shape[1]
    n_out = N_DRAW_OUTER.get(grid.rank, 7)
    fine = fine or {"n_inner": 3 * (Q - 1) + 1, "inner_half_width": 1.5, "outer_rule": "trapezoid",
                    "n_outer": 3 * (n_out - 1) + 1, "outer_half_width": 1.5 * grid.outer_half_width}
    # the fine grid around the same centres, wider, with steps half as long or less
    N, K = grid.shape
    half = 0.5 * grid.step.T * (Q - 1)
    mean = grid.start.T + half
    mu = grid.mu.T
    Lc = grid.chol.transpose(2, 0, 1)
    cov = Lc @ Lc.transpose(0, 2, 1)
    fg = build_grid(tables, lam[0], psi[0], mu=mu, cov=cov, theta_mean=mean, theta_sd=half,
                    info=grid.info, **fine)
    diffs, per = [], 0.0
    nodes_w = np.empty((grid.offsets.shape[0], N))
    nodes_f = np.empty((fg.offsets.shape[0], N))
    kern = collapsed_kernel()
    for s in pick:
        lw = np.ascontiguousarray(lam[s], dtype=np.float64)
        pw = np.ascontiguousarray(psi[s], dtype=np.float64)
        vw = kern(*grid.arrays, lw, pw, 0, nodes_w, _EMPTY2, _EMPTY2)[0]
        vf = kern(*fg.arrays, lw, pw, 0, nodes_f, _EMPTY2, _EMPTY2)[0]
        diffs.append(vf - vw)
        from scipy.special import logsumexp

        li_w = logsumexp(nodes_w, axis=0)
        li_f = logsumexp(nodes_f, axis=0)
        per = max(per, float(np.abs(li_f - li_w).max()))
    diffs = np.asarray(diffs)
    return {"max_abs_diff": float(np.abs(diffs).max()), "spread_diff": float(np.ptp(diffs)),
            "max_abs_diff_per_llm": per, "n_draws": len(pick), "fine_grid": fine,
            "seconds": time.perf_counter() - t0}


# ---------------------------------------------------------------------------
# the fit
# ---------------------------------------------------------------------------


@dataclass
class CollapsedFit:
    """What :func:`sample_structure` returns: the posterior (``loading_free``,
    ``loading_diag``, and the drawn ``eta_raw`` and ``theta_raw``), the NUTS
    statistics, the grid and a summary (``info``: mode search, quadrature
    check, stage seconds)."""

    posterior: object
    sample_stats: object
    grid: CollapsedGrid
    info: dict


def _v_of(free: np.ndarray | None, diag: np.ndarray, K: int, layout) -> np.ndarray:
    rows, cols, drows = layout
    r = diag.shape[-1]
    V = np.zeros(diag.shape[:-1] + (K, r))
    if len(rows):
        V[..., rows, cols] = free
    V[..., drows, np.arange(r)] = diag
    return V


def structure_logp(grid: CollapsedGrid, layout, loading_scale: float, *, gradient: bool = True):
    """The log posterior density of the structure and its gradient in the
    sampling coordinates ``x = (asinh(loading_free), log asinh(loading_diag))``
    (:func:`structure_of_x`): the collapsed marginal likelihood,
    ``loading_free ~ N(0, s)``, ``loading_diag ~ HalfNormal(s)`` (as the
    sampled route's priors) and the transform's Jacobian. With
    ``gradient=False`` the function returns the value only (the kernel's
    cheaper pass; both timed by ``benchmarks/bench_collapsed.py kernel``).

    At rank 1 ``asinh(V_k)`` is Fisher's z of the loading ``lambda_k = V_k /
    sqrt(1 + V_k^2)``, ``atanh(lambda_k)``: the posterior is much closer to
    Gaussian there than in ``V`` itself, whose right tail is long where
    loadings approach 1, which the Laplace approximation
    (NUTS's whitening, the IMH proposal) relies on."""
    rows, cols, drows = layout
    N, K = grid.shape
    r = grid.rank
    n_free = len(rows)
    inv_s2 = 1.0 / loading_scale**2
    e2 = _EMPTY2
    arrays = grid.arrays
    ar = np.arange(r)

    def logp(x):
        x = np.asarray(x, dtype=np.float64)
        u, w = x[:n_free], x[n_free:]
        free, diag = structure_of_x(x, n_free)
        ea = np.exp(w)
        V = np.zeros((K, r))
        V[rows, cols] = free
        V[drows, ar] = diag
        psi = 1.0 / np.sqrt(1.0 + (V**2).sum(-1))
        lam = V * psi[:, None]
        val, dl, dp = _kernel(*arrays, lam, psi, int(gradient), e2, e2, e2)
        val = (val - 0.5 * inv_s2 * ((free**2).sum() + (diag**2).sum())
               + _log_cosh(u).sum() + (_log_cosh(ea) + w).sum())
        if not gradient:
            return float(val)
        gV = _v_gradient(V, dl, dp)
        g = np.empty(n_free + r)
        g[:n_free] = (gV[rows, cols] - inv_s2 * free) * np.cosh(u) + np.tanh(u)
        g[n_free:] = (gV[drows, ar] - inv_s2 * diag) * np.cosh(ea) * ea + np.tanh(ea) * ea + 1.0
        return float(val), g

    return logp


def _log_cosh(t: np.ndarray) -> np.ndarray:
    a = np.abs(t)
    return a + np.log1p(np.exp(-2.0 * a)) - math.log(2.0)


def structure_of_x(x: np.ndarray, n_free: int) -> tuple[np.ndarray, np.ndarray]:
    """``(loading_free, loading_diag)`` from the sampling coordinates ``x``
    (last axis): ``sinh(x_free)`` and ``sinh(exp(x_diag))``."""
    x = np.asarray(x, dtype=np.float64)
    return np.sinh(x[..., :n_free]), np.sinh(np.exp(x[..., n_free:]))


def _x_of(V: np.ndarray, layout) -> np.ndarray:
    """The sampling coordinates of the structure ``V`` (inverse of :func:`structure_of_x`)."""
    rows, cols, drows = layout
    r = len(drows)
    return np.concatenate([np.arcsinh(V[rows, cols]), np.log(np.arcsinh(np.maximum(V[drows, np.arange(r)], 1e-3)))])


def laplace_whitening(logp, x0: np.ndarray, *, eps: float = 1e-4) -> tuple[np.ndarray, np.ndarray, dict]:
    """The Laplace approximation of a log density at (near) its mode: centre
    ``xc`` (one Newton step from ``x0``) and a square root ``T`` of its
    covariance (``T T' = (-H)^-1``, ``H`` the Hessian by central differences
    of the gradient, ``2 n`` evaluations). In ``z = T^-1 (x - xc)`` the
    posterior is close to ``N(0, I)``: NUTS starts with the right scales and
    correlations instead of learning them in the warm-up. Where ``-H`` is not
    positive definite, ``T`` is diagonal (or the identity)."""
    x0 = np.asarray(x0, dtype=np.float64)
    n = len(x0)
    H = np.empty((n, n))
    for j in range(n):
        e = np.zeros(n)
        e[j] = eps
        H[:, j] = (logp(x0 + e)[1] - logp(x0 - e)[1]) / (2 * eps)
    H = 0.5 * (H + H.T)
    f0, g0 = logp(x0)[:2]
    try:
        L = np.linalg.cholesky(-H)
        T = np.linalg.solve(L, np.eye(n)).T
        step = T @ (T.T @ g0)
        kind = "full"
    except np.linalg.LinAlgError:
        d = -np.diagonal(H)
        T = np.diag(np.where(d > 0, 1.0 / np.sqrt(np.where(d > 0, d, 1.0)), 1.0))
        step = np.zeros(n)
        kind = "diagonal"
    # one Newton step, kept only if it does not lower the density (x0 is the
    # mode on a slightly different scale: the log transform's Jacobian)
    xc = x0 + step
    if not logp(xc)[0] >= f0:
        xc = x0
    sd = np.sqrt((T**2).sum(1))
    return xc, T, {"kind": kind, "sd_min": float(sd.min()), "sd_max": float(sd.max()),
                   "newton_step_max": float(np.abs(xc - x0).max())}


def _nutpie_model(grid: CollapsedGrid, layout, loading_scale: float, V0: np.ndarray, coords: dict, r: int,
                  whiten: bool = True, info: dict | None = None, laplace: tuple | None = None):
    """nutpie's model of the structure from a Python log density (no graph to
    compile; the kernel releases the GIL, so chains run in parallel). With
    ``whiten``, NUTS samples ``z`` with ``x = xc + T z``
    (:func:`laplace_whitening`), chains started at draws of ``N(0, I)``."""
    from nutpie.compiled_pyfunc import from_pyfunc

    rows, cols, drows = layout
    n_free = len(rows)
    x0 = _x_of(V0, layout)
    names, shapes = (["loading_free"], [(n_free,)]) if n_free else ([], [])
    names, shapes = names + ["loading_diag"], shapes + [(r,)]
    if whiten:
        xc, T, winfo = laplace if laplace is not None else _laplace(grid, layout, loading_scale, x0)
        if info is not None:
            info["whitening"] = winfo
    else:
        xc, T = x0, np.eye(len(x0))

    def make_logp():
        f = structure_logp(grid, layout, loading_scale)
        if not whiten:
            return f

        def logp(z):
            v, g = f(xc + T @ z)
            return v, T.T @ g

        return logp

    def make_expand(seed1, seed2, chain):
        def expand(z):
            x = xc + T @ np.asarray(z, dtype=np.float64) if whiten else np.asarray(z, dtype=np.float64)
            free, diag = structure_of_x(x, n_free)
            out = {"loading_free": free} if n_free else {}
            out["loading_diag"] = diag
            return out

        return expand

    def init_point(seed):
        rng = np.random.default_rng(seed)
        if whiten:
            return rng.standard_normal(x0.shape)
        return x0 + 1e-3 * rng.standard_normal(x0.shape)

    return from_pyfunc(len(x0), make_logp, make_expand, [np.dtype("float64")] * len(names), shapes, names,
                       make_initial_point_fn=init_point)


def _sample_loadings(grid: CollapsedGrid, layout, loading_scale: float, V2: np.ndarray, coords: dict, r: int, *,
                     sampler, draws, tune, chains, cores, seed, target_accept, progress, nuts_kwargs, whiten,
                     stages: dict, whitening_info: dict, laplace: tuple | None = None):
    """NUTS on the loadings from the mode ``V2``, by nutpie (whitened by the
    Laplace approximation when ``whiten``: its record in ``whitening_info``) or
    numpyro: ``(posterior, sample_stats)``, the free loadings and the per-draw
    stats, with integer chain and draw coordinates; the compile time in
    ``stages["compile"]``."""
    import xarray as xr

    t2 = time.perf_counter()
    kw = dict(nuts_kwargs or {})
    if "max_treedepth" in kw:
        kw["maxdepth"] = kw.pop("max_treedepth")
    kw.setdefault("target_accept", target_accept)
    if sampler == "numpyro":
        from mtlirt.bayes._jax import sample_structure_numpyro

        stages["compile"] = 0.0
        pd, sd = sample_structure_numpyro(grid, layout, loading_scale, V2, draws=draws, tune=tune,
                                          chains=chains, seed=seed, target_accept=kw["target_accept"],
                                          progress=progress)
        post = xr.Dataset({k: (("chain", "draw") + tuple(f"{k}_dim_{i}" for i in range(v.ndim - 2)), v)
                           for k, v in pd.items()})
        ss = xr.Dataset({k: (("chain", "draw"), v) for k, v in sd.items()})
    else:
        import nutpie

        compiled = _nutpie_model(grid, layout, loading_scale, V2, coords, r, whiten=whiten, info=whitening_info,
                                 laplace=laplace)
        stages["compile"] = time.perf_counter() - t2
        idata = nutpie.sample(compiled, draws=draws, tune=max(int(tune), 1), chains=chains, cores=cores,
                              seed=int(seed), save_warmup=False, progress_bar=bool(progress), **kw)
        post = idata["posterior"].to_dataset()
        ss = idata["sample_stats"].to_dataset()
        del idata
    rows = layout[0]
    free_names = ["loading_free", "loading_diag"] if len(rows) else ["loading_diag"]
    post = post[free_names].load()
    post = post.assign_coords(chain=np.arange(post.sizes["chain"]), draw=np.arange(post.sizes["draw"]))
    ss = ss[[v for v in ss.data_vars if set(ss[v].dims) <= {"chain", "draw"}]].load()
    ss = ss.assign_coords(chain=np.arange(ss.sizes["chain"]), draw=np.arange(ss.sizes["draw"]))
    return post, ss


# ---------------------------------------------------------------------------
# independence Metropolis-Hastings from the Laplace approximation
# ---------------------------------------------------------------------------

IMH_DEFENSIVE = 0.1
IMH_DF = 4.0
IMH_WIDE = 1.5
IMH_TUNE = 100
IMH_PILOT = 200
IMH_PILOT_K_MAX = 0.5
# draws=None: IMH draws this many steps per chain at a time until the convergence checks pass, at most
# IMH_MAX_DRAWS per chain; then the LLM side is drawn for about KEEP_DRAWS of them (thin=None)
IMH_BLOCK = 250
IMH_MAX_DRAWS = 4000
KEEP_DRAWS = 1000


def imh_log_proposal(z: np.ndarray, *, eps: float = IMH_DEFENSIVE, df: float = IMH_DF,
                     wide: float = IMH_WIDE) -> np.ndarray:
    """Log density of the IMH proposal in the whitened coordinates ``z``: the
    mixture ``(1 - eps) N(0, I) + eps t_df(0, wide^2 I)``. The Student-t part
    (Hesterberg's defensive mixture) bounds the importance ratio wherever the
    posterior's tails are lighter than a t with ``df`` degrees of freedom, so
    the chain is uniformly ergodic even where the Laplace approximation is
    too narrow."""
    from scipy.special import gammaln

    z = np.asarray(z, dtype=np.float64)
    n = z.shape[-1]
    r2 = (z * z).sum(-1)
    lg = -0.5 * r2 - 0.5 * n * math.log(2 * math.pi)
    lt = (gammaln(0.5 * (df + n)) - gammaln(0.5 * df) - 0.5 * n * math.log(df * math.pi) - n * math.log(wide)
          - 0.5 * (df + n) * np.log1p(r2 / (df * wide * wide)))
    return np.logaddexp(math.log1p(-eps) + lg, math.log(eps) + lt)


def imh_proposals(rng: np.random.Generator, size: tuple, n: int, *, eps: float = IMH_DEFENSIVE,
                  df: float = IMH_DF, wide: float = IMH_WIDE, heavy: bool = False) -> np.ndarray:
    """Draws ``size + (n,)`` of :func:`imh_log_proposal`'s mixture (``heavy``:
    of its Student-t part only, the chains' overdispersed starting points)."""
    z = rng.standard_normal(tuple(size) + (n,))
    scale = wide / np.sqrt(rng.chisquare(df, size) / df)
    t = np.ones(size, dtype=bool) if heavy else rng.random(size) < eps
    z[t] *= scale[t][..., None]
    return z


def _imh_chains(log_w_start: np.ndarray, log_w: np.ndarray, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The IMH chains from the log importance ratios: each chain starts at its
    own state (``log_w_start`` (C,)); at step ``t`` proposal ``t`` (``log_w``
    (C, S)) is accepted when ``log u < log_w[t] - log_w[state]``. Returns the
    index of each step's state (-1: the start) and the acceptances."""
    C, S = log_w.shape
    state = np.empty((C, S), dtype=np.int64)
    acc = np.empty((C, S), dtype=bool)
    for c in range(C):
        cur, lw = -1, log_w_start[c]
        for t in range(S):
            a = bool(np.log(u[c, t]) < log_w[c, t] - lw)
            if a:
                cur, lw = t, log_w[c, t]
            state[c, t] = cur
            acc[c, t] = a
    return state, acc


def _laplace(grid: CollapsedGrid, layout, loading_scale: float, x0: np.ndarray) -> tuple:
    """:func:`laplace_whitening` of the structure at ``x0``, timed: ``(xc, T, info)``."""
    t0 = time.perf_counter()
    xc, T, winfo = laplace_whitening(structure_logp(grid, layout, loading_scale), x0)
    winfo["seconds"] = time.perf_counter() - t0
    return xc, T, winfo


def _log_densities(f, xc: np.ndarray, T: np.ndarray, z: np.ndarray, cores: int, progress: bool,
                   desc: str) -> np.ndarray:
    """``f(xc + T z_j)`` for every row of ``z``, in ``cores`` threads (the
    kernel releases the GIL)."""
    from mtlirt.progress import progress_bar

    lp = np.empty(len(z))
    chunk = max(1, len(z) // (50 * max(1, cores)))

    def run(a):
        b = min(len(z), a + chunk)
        for j in range(a, b):
            lp[j] = f(xc + T @ z[j])
        return b - a

    with ThreadPoolExecutor(max(1, int(cores))) as pool:
        if progress:
            with progress_bar(len(z), desc) as bar:
                for done in pool.map(run, range(0, len(z), chunk)):
                    bar.update(done)
        else:
            list(pool.map(run, range(0, len(z), chunk)))
    return lp


def _log_ratios(grid: CollapsedGrid, layout, loading_scale: float, xc: np.ndarray, T: np.ndarray, z: np.ndarray,
                cores: int, progress: bool = False, desc: str = "") -> tuple[np.ndarray, np.ndarray]:
    """The structure's log density at the proposals ``xc + T z`` (value
    only) and their log importance ratios (``-inf`` where the density is not
    finite)."""
    lp = _log_densities(structure_logp(grid, layout, loading_scale, gradient=False), xc, T, z, cores, progress, desc)
    return lp, np.where(np.isfinite(lp), lp - imh_log_proposal(z), -np.inf)


def imh_pilot(grid: CollapsedGrid, layout, loading_scale: float, laplace: tuple, *, seed: int, cores: int,
              size: int = IMH_PILOT) -> dict:
    """Whether the Laplace proposal fits the structure's posterior: the
    Pareto k-hat of the importance ratios of ``size`` proposals (their own
    seed stream, not reused by the chains), and their relative effective
    sample size."""
    xc, T, winfo = laplace
    if winfo["kind"] != "full":
        return {"khat": float("inf"), "relative_ess": 0.0, "size": 0, "reason": "no full Laplace approximation"}
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0x1A4C1]))
    z = imh_proposals(rng, (size,), len(xc))
    _, lw = _log_ratios(grid, layout, loading_scale, xc, T, z, cores)
    w = np.exp(lw - lw.max())
    return {"khat": round(pareto_khat(lw), 4), "relative_ess": round(float(w.sum() ** 2 / (w**2).sum() / size), 4),
            "size": int(size)}


def _imh_loadings(grid: CollapsedGrid, layout, loading_scale: float, laplace: tuple, *, draws, tune, chains, cores,
                  seed, progress, info: dict):
    """Independence Metropolis-Hastings on the structure: proposals from the
    Laplace approximation at the mode (``laplace``: :func:`_laplace`) with a
    defensive Student-t part (:func:`imh_log_proposal`), chains started at
    draws of that t. The proposals do not depend on the chains' states, so
    every log density is evaluated first, in parallel (value only, no
    gradient); the accept steps then cost nothing. Returns ``(posterior,
    sample_stats, diagnostics or None)``, the first two as :func:`_sample_loadings`;
    the sample stats hold each step's acceptance, the log importance ratio of its proposal
    (``proposal_log_weight``: their Pareto k-hat checks that the proposal
    covers the posterior, :func:`mtlirt.bayes.diagnostics.diagnostics`) and
    the state's log density (``lp``).

    ``draws=None``: the run length is chosen by the convergence checks. The
    chains draw ``IMH_BLOCK`` steps each at a time, continued from their last
    state with new proposals of the same random stream, until the loadings
    pass :func:`_structure_diagnostics` (R-hat, bulk and tail ESS, Pareto k-hat)
    or reach ``IMH_MAX_DRAWS`` (``info["run_length"]`` records each block)."""
    import xarray as xr

    n_free = len(layout[0])
    t0 = time.perf_counter()
    xc, T, winfo = laplace
    n = len(xc)
    info["whitening"] = winfo
    if winfo["kind"] != "full":
        raise RuntimeError("the structure's Laplace approximation is not positive definite at the mode: "
                           "independence Metropolis-Hastings needs it; sample with NUTS (sampler='nutpie')")
    adaptive = draws is None
    S = int(tune) + (IMH_BLOCK if adaptive else int(draws))
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0x1A4C0]))
    z_start = imh_proposals(rng, (chains,), n, heavy=True)
    z = imh_proposals(rng, (chains, S), n)
    u = rng.random((chains, S))
    flat = np.concatenate([z_start, z.reshape(chains * S, n)])
    lp, lw = _log_ratios(grid, layout, loading_scale, xc, T, flat, cores, progress,
                         "IMH: log densities of the proposals")
    lp_start, lw_start = lp[:chains], lw[:chains]
    lp, lw = lp[chains:].reshape(chains, S), lw[chains:].reshape(chains, S)
    blocks = []
    while True:
        S = z.shape[1]
        D = S - int(tune)
        state, acc = _imh_chains(lw_start, lw, u)
        zz = np.concatenate([z_start[:, None, :], z], axis=1)  # index 0: the start
        lpp = np.concatenate([lp_start[:, None], lp], axis=1)
        pick = state[:, tune:] + 1
        zs = np.take_along_axis(zz, pick[..., None], axis=1)
        x = xc + zs @ T.T
        free, diag = structure_of_x(x, n_free)
        data = {"loading_free": (("chain", "draw", "loading_free_dim_0"), free)} if n_free else {}
        data["loading_diag"] = (("chain", "draw", "loading_diag_dim_0"), diag)
        post = xr.Dataset(data, coords={"chain": np.arange(chains), "draw": np.arange(D)})
        ss = xr.Dataset({
            "accepted": (("chain", "draw"), acc[:, tune:]),
            "proposal_log_weight": (("chain", "draw"), lw[:, tune:]),
            "lp": (("chain", "draw"), np.take_along_axis(lpp, pick, axis=1)),
        }, coords={"chain": np.arange(chains), "draw": np.arange(D)})
        if not adaptive:
            checked = None
            break
        r = len(layout[2])
        K = (n_free + r + r * (r - 1) // 2) // r  # the loadings' K r - r (r - 1) / 2 entries
        checked = _structure_diagnostics(post, ss, _structure_draws(post, K, layout)[0])
        blocks.append({"draws": int(D), **{k: checked[k] for k in ("max_rhat", "min_ess_bulk", "min_ess_tail",
                                                                     "pareto_khat") if k in checked}})
        if checked["converged"] or D >= IMH_MAX_DRAWS:
            break
        more = min(IMH_BLOCK, IMH_MAX_DRAWS - D)
        z2 = imh_proposals(rng, (chains, more), n)
        u2 = rng.random((chains, more))
        lp2, lw2 = _log_ratios(grid, layout, loading_scale, xc, T, z2.reshape(chains * more, n), cores, progress,
                               "IMH: log densities of more proposals")
        z, u = np.concatenate([z, z2], axis=1), np.concatenate([u, u2], axis=1)
        lp = np.concatenate([lp, lp2.reshape(chains, more)], axis=1)
        lw = np.concatenate([lw, lw2.reshape(chains, more)], axis=1)
    if not (np.isfinite(lp).all() and np.isfinite(lp_start).all()):
        info["imh_nonfinite_proposals"] = int((~np.isfinite(lp)).sum() + (~np.isfinite(lp_start)).sum())
    if adaptive:
        info["run_length"] = {"rule": f"blocks of {IMH_BLOCK} draws per chain until the convergence checks pass, "
                                      f"at most {IMH_MAX_DRAWS}", "blocks": blocks, "draws": int(D),
                              "converged": bool(checked["converged"])}
    info["imh"] = {"acceptance": [round(float(a), 4) for a in acc[:, tune:].mean(1)],
                   "evaluations": int(chains * (S + 1)), "tune": int(tune), "seconds": time.perf_counter() - t0}
    return post, ss, checked


def _structure_draws(post, K: int, layout) -> tuple[np.ndarray, np.ndarray]:
    """The loadings and residual scales (C, D, K, r), (C, D, K) of the sampled structure's draws."""
    free = post["loading_free"].values if "loading_free" in post else None
    return structure_from_v(_v_of(free, post["loading_diag"].values, K, layout))


def _structure_diagnostics(post, ss, lam: np.ndarray) -> dict:
    """The convergence diagnostics of the sampled loadings and the reported
    loadings ``lam`` (C, D, K, r), as :func:`mtlirt.bayes.fit_bayes` checks
    them, on these draws."""
    import xarray as xr

    p = post.assign(loadings=xr.Variable(("chain", "draw", "domain", "factor"), lam))
    p.attrs = {"mtlirt_algorithm": "nuts"}
    names = [v for v in ("loading_free", "loading_diag") if v in p] + ["loadings"]
    out = diagnostics(xr.DataTree.from_dict({"posterior": p, "sample_stats": ss}), var_names=names, recompute=True)
    out["computed_on"] = f"all {p.sizes['chain']} x {p.sizes['draw']} structure draws, before thinning"
    return out


def overall_spread(eta: np.ndarray, llms: np.ndarray | None = None) -> dict:
    """How far the LLMs' overall traits spread, against the population prior
    ``N(0, 1)`` this route gives them: per factor, the sd over the LLMs
    (``llms``: those the structure's density sums over; default all) of each
    draw of ``eta`` (C, D, N, r), its median over the draws and its 5% and
    95% quantiles, and ``sd_expected``, the spread such a median has over
    samples of that many LLMs truly drawn from the prior (``1 / sqrt(2 n)``).

    Where the prior fits, a draw of the traits is a draw of ``n`` LLMs from
    it: its sd is 1 up to ``sd_expected``. A median well away from 1 says the
    LLMs are not spread like ``N(0, 1)`` (one tail far out, or clusters, as on
    real leaderboards with outlying LLMs), and the population prior fits
    them poorly."""
    x = eta if llms is None else eta[:, :, llms]
    sd = x.std(axis=2).reshape(-1, x.shape[-1])
    n = x.shape[2]
    return {"median_sd": [round(float(v), 4) for v in np.median(sd, axis=0)],
            "sd_q05": [round(float(v), 4) for v in np.quantile(sd, 0.05, axis=0)],
            "sd_q95": [round(float(v), 4) for v in np.quantile(sd, 0.95, axis=0)],
            "n_llms": int(n), "sd_expected": round(float(1 / np.sqrt(2 * max(n, 1))), 4)}


# How far the overall traits' spread (overall_spread's median sd) may lie from the prior's 1 before the
# fit says so: 10%, plus 4 of the sds such a median has over samples from the prior. Simulated
# populations stay within it at every size; real leaderboards with outlying LLMs (oll_v1, ChemBench) do not.
OVERALL_SPREAD_TOL = 0.10


def spread_off_prior(spread: dict | None) -> list[int]:
    """The factors whose traits spread too far from the ``N(0, 1)`` prior
    (:func:`overall_spread`; ``OVERALL_SPREAD_TOL``)."""
    if not spread:
        return []
    tol = OVERALL_SPREAD_TOL + 4 * spread["sd_expected"]
    return [j for j, sd in enumerate(spread["median_sd"]) if abs(sd - 1) > tol]


def choose_thin(chains: int, draws: int, diag: dict) -> int:
    """The thinning of the structure draws before the LLM side is drawn (``thin=None``).

    The LLM side drawn for a kept structure draw is exact given it, so the kept draws' effective sample
    size is about the smaller of their number and the structure's ESS. Every ``floor(chains x draws /
    KEEP_DRAWS)``-th draw is kept (about ``KEEP_DRAWS`` in all: 90% intervals from them cover as from
    more, docs/results.md) where the structure's bulk ESS over all draws reaches ``KEEP_DRAWS``; below
    it, every ``floor(chains x draws / ESS)``-th at most (the chains' autocorrelation time: a chain
    thinned at it keeps most of its ESS, an AR(1) chain 75-85%), so that the LLM side is not drawn
    for draws that add little."""
    ess = diag.get("min_ess_bulk", float("nan"))
    n = int(chains * draws)
    if not np.isfinite(ess) or ess <= 0:
        return 1
    keep = n // KEEP_DRAWS
    return max(1, keep if ess >= KEEP_DRAWS else min(keep, int(n // ess)))


def sample_structure(tables, spec, anchors: list[int], initvals: dict, coords: dict, *,
                     draws: int | None = None,
                     tune: int | None = None, chains: int = 4, cores: int = 1, seed: int = 0,
                     target_accept: float = 0.9, progress: bool = False, nuts_kwargs: dict | None = None,
                     check: bool = True, grid_options: dict | None = None,
                     sampler: str = "auto", whiten: bool = True, thin: int | None = 1) -> CollapsedFit:
    """The fixed-items factor model with the LLM side integrated out: the
    structure's posterior mode, the grid placed there, the loadings sampled
    (IMH or NUTS, see ``sampler``), then exact draws of every LLM's overall
    trait and domain scores.

    Parameters
    ----------
    tables : LikelihoodTables
    spec : ModelSpec
        A factor spec of rank 1 or 2.
    anchors : list of int
    initvals : dict
        ``eta_raw`` (N, r), ``loading_diag`` (r,), ``loading_free`` (start
        point, e.g. from the MTL fit).
    coords : dict
        The model's coordinates (``llm``, ``domain``, ``factor`` ...).
    draws, tune, chains, cores, seed, target_accept, progress, nuts_kwargs
        As for :func:`mtlirt.bayes.fit_bayes` (nutpie).
    check : bool
        Run :func:`quadrature_check` at posterior draws.
    grid_options : dict, optional
        ``n_inner``, ``inner_half_width``, ``n_outer``, ``outer_half_width``.
    sampler : {"auto", "imh", "nutpie", "numpyro"}
        How the structure is sampled: ``"imh"``, independence
        Metropolis-Hastings from the Laplace approximation
        (:func:`_imh_loadings`; ``tune`` is then the burn-in each chain
        discards); NUTS by nutpie; or NUTS by numpyro on the JAX version of
        the likelihood (:mod:`mtlirt.bayes._jax`; optional ``jax`` extra).
        ``"auto"``: IMH where a pilot of ``IMH_PILOT`` proposals finds the
        Laplace approximation good enough (Pareto k-hat of their importance
        ratios at most ``IMH_PILOT_K_MAX``: large designs, whose posterior
        of the structure is close to Gaussian), else nutpie; and nutpie
        too where IMH's chains then fail the convergence check (R-hat,
        ESS, k-hat of all proposals: ``info["imh_fallback"]``; a pilot can
        pass where IMH then fails, on small or real leaderboards). ``tune``
        defaults to ``IMH_TUNE`` for IMH and 1,000 for NUTS.
    whiten : bool
        nutpie samples the loadings whitened by the Laplace approximation
        at the mode (:func:`laplace_whitening`).
    thin : int
        Keep every ``thin``-th of the ``draws`` structure draws per chain
        and draw the LLM side for those only (the LLM-side draws are most of
        the cost at leaderboard scale, and an IMH chain's draws are nearly
        independent); the convergence diagnostics of all ``draws`` are in
        ``info["structure_diagnostics_all_draws"]``.

    Returns
    -------
    CollapsedFit
    """
    import xarray as xr

    r = spec.rank
    if r not in (1, 2):
        raise ValueError("the collapsed route supports rank 1 and 2")
    N, K = tables.s.shape
    layout = loading_layout(K, r, anchors)
    stages = {}
    t0 = time.perf_counter()
    eta0, lam0, psi0 = factor_parts(np.asarray(initvals["eta_raw"], float), initvals.get("loading_free"),
                                    np.asarray(initvals["loading_diag"], float), K, anchors)
    go = dict(grid_options or {})
    quad = quadrature_nodes(tables, eta0 @ lam0.T, psi0)
    grid = build_grid(tables, lam0, psi0, quad=quad, **go)
    del quad
    V0 = _v_of(initvals.get("loading_free"), np.asarray(initvals["loading_diag"], float), K, layout)
    stages["grid"] = time.perf_counter() - t0
    t1 = time.perf_counter()
    # the structure's density over the LLMs answered in two domains or more
    # (the others' likelihood does not depend on it); the draws use them all
    informative = informative_llms(tables)
    if len(informative) in (0, N):
        informative = None

    def structure_part(g):
        """The grid and tables of the LLMs the structure's density sums over."""
        return (g, tables) if informative is None else llm_subset(g, tables, informative)

    V1, mode1 = find_mode(structure_part(grid)[0], V0, layout, spec.priors.loading_scale)
    lam1, psi1 = structure_from_v(V1)
    grid = regrid(grid, tables, lam1, psi1, **go)
    sgrid, stables = structure_part(grid)
    V2, mode2 = find_mode(sgrid, V1, layout, spec.priors.loading_scale, maxiter=50)
    stages["mode"] = time.perf_counter() - t1
    t2 = time.perf_counter()
    wi = {}
    laplace = None
    if sampler in ("auto", "imh") or (sampler == "nutpie" and whiten):
        laplace = _laplace(sgrid, layout, spec.priors.loading_scale, _x_of(V2, layout))
        stages["laplace"] = laplace[2]["seconds"]
    auto, tune_given, diag_all = sampler == "auto", tune, None
    if sampler == "auto":
        t = time.perf_counter()
        pilot = imh_pilot(sgrid, layout, spec.priors.loading_scale, laplace, seed=seed, cores=cores)
        stages["imh_pilot"] = time.perf_counter() - t
        sampler = "imh" if pilot["khat"] <= IMH_PILOT_K_MAX else "nutpie"
        wi["imh_pilot"] = pilot
    if tune is None:
        tune = IMH_TUNE if sampler == "imh" else 1000
    t2 = time.perf_counter()
    if sampler == "imh":
        post, ss, diag_all = _imh_loadings(sgrid, layout, spec.priors.loading_scale, laplace, draws=draws,
                                           tune=tune, chains=chains, cores=cores, seed=seed, progress=progress,
                                           info=wi)
        stages["imh"] = time.perf_counter() - t2
        if auto:  # the pilot's 200 proposals can pass where IMH's chains then fail: NUTS instead
            if diag_all is None:
                diag_all = _structure_diagnostics(post, ss, _structure_draws(post, K, layout)[0])
            if not diag_all["converged"]:
                wi["imh_fallback"] = {**{k: diag_all[k] for k in ("max_rhat", "min_ess_bulk", "min_ess_tail",
                                                                  "pareto_khat") if k in diag_all},
                                      "imh": wi.pop("imh", None), "seconds": stages.pop("imh")}
                sampler, tune, diag_all = "nutpie", 1000 if tune_given is None else tune_given, None
                wi.pop("run_length", None)
    if sampler != "imh":
        t2 = time.perf_counter()
        if draws is None:
            draws = NUTS_DRAWS
            wi["run_length"] = {"rule": f"{NUTS_DRAWS} draws per chain, the NUTS default", "draws": NUTS_DRAWS}
        post, ss = _sample_loadings(sgrid, layout, spec.priors.loading_scale, V2, coords, r, sampler=sampler,
                                    draws=draws, tune=tune, chains=chains, cores=cores, seed=seed,
                                    target_accept=target_accept, progress=progress, nuts_kwargs=nuts_kwargs,
                                    whiten=whiten, stages=stages, whitening_info=wi, laplace=laplace)
        stages["nuts"] = time.perf_counter() - t2
    t3 = time.perf_counter()
    lam, psi = _structure_draws(post, K, layout)
    C, D = lam.shape[:2]
    if thin is None:
        diag_all = diag_all or _structure_diagnostics(post, ss, lam)
        thin = choose_thin(C, D, diag_all)
        wi["thin_rule"] = {"rule": f"keep about {KEEP_DRAWS} draws where the structure's ESS allows",
                           "structure_draws": int(C * D), "min_ess_bulk": diag_all["min_ess_bulk"], "thin": thin}
    if thin > 1 or diag_all is not None:
        wi["structure_diagnostics_all_draws"] = diag_all or _structure_diagnostics(post, ss, lam)
    if thin > 1:
        keep = slice(thin - 1, None, thin)
        n_keep = len(range(post.sizes["draw"])[keep])
        post = post.isel(draw=keep).assign_coords(draw=np.arange(n_keep))
        ss = ss.isel(draw=keep).assign_coords(draw=np.arange(n_keep))
        lam, psi = lam[:, keep], psi[:, keep]
    eta, theta = draw_llm_side(grid, lam, psi, seed=seed)
    # the traits' mean and variance over the LLMs, the variables of the sampled route's population model
    # (mtlirt.bayes.model.population_eta): the derived quantities then read both routes' draws alike
    post = post.assign(eta_raw=xr.Variable(("chain", "draw", "llm", "factor"), eta),
                       eta_mean=xr.Variable(("chain", "draw", "factor"), eta.mean(axis=2, dtype=np.float64)),
                       eta_var=xr.Variable(("chain", "draw", "factor"), eta.var(axis=2, dtype=np.float64)),
                       theta_raw=xr.Variable(("chain", "draw", "llm", "domain"), theta))
    post = post.assign_coords(llm=list(coords["llm"]), domain=list(coords["domain"]),
                              factor=list(coords.get("factor", range(r))))
    stages["llm_side_draws"] = time.perf_counter() - t3
    info = {"mode": mode1, "mode_refit": mode2, "n_outer_nodes": int(grid.offsets.shape[0]),
            "sampler": sampler, "tune": int(tune), "draws": int(D), "thin": int(thin), **wi,
            "n_inner_nodes": int(grid.logw.shape[1]), "stage_seconds": stages,
            "n_llms_structure": N if informative is None else len(informative),
            "overall_spread": overall_spread(eta, informative)}
    if check:
        C, D = psi.shape[:2]
        info["quadrature_check"] = quadrature_check(sgrid, stables, lam.reshape(C * D, K, r),
                                                    psi.reshape(C * D, K))
        stages["quadrature_check"] = info["quadrature_check"]["seconds"]
    return CollapsedFit(posterior=post, sample_stats=ss, grid=grid, info=info)
