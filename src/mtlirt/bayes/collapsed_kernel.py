"""The collapsed marginal likelihood's kernel: the grid's layout and one numba pass over it.

:class:`CollapsedGrid` holds the fixed nodes of the two integrals of
:mod:`mtlirt.bayes.collapsed`; :func:`collapsed_kernel` sums them at given
loadings, with the gradient or the cells' posterior moments on request, and
:func:`collapsed_loglik_np` is its plain numpy reference.

Cost: the Gaussian factor of inner node ``q`` at outer node ``g`` separates.
With ``c`` the distance from the LLM's centre prior mean to the middle inner
node, ``h`` the inner step and ``v_g = Lambda_k . L_i u_g``::

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
from the grid's, warm-up territory; or weights below single precision's range) is summed in the log
domain instead. The
coefficients cost three exponentials per cell, not ``Q``: ``exp(E_q)`` is
``w_q`` (kept with the grid) times a Gaussian factor whose ratios between
neighbouring nodes form a geometric sequence.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numba
import numpy as np

from mtlirt.bayes._vecmath import exp_nonpos, log_pos
from mtlirt.numerics.llm_side import numba_log_domain

__all__ = [
    "CollapsedGrid",
    "collapsed_kernel",
    "collapsed_loglik_np",
    "structure_from_v",
]

_LOGW_MIN = -700.0
# below this log weight a table's exponential leaves single precision's normal range (exp(-87) = 1.6e-38)
_LOGW_SINGLE = -87.0
# a deep cell's sum below this many times exp(_LOGW_SINGLE) per node (times the largest node ratio) is taken
# again in the log domain: there the terms single precision cannot hold could reach 1e-8 of it
_DEEP_FLOOR = 1e8 * float(np.exp(_LOGW_SINGLE))
_Z_MAX = 650.0
_T_MAX = 600.0
_A_MIN = 1e-280
_P_MIN = 1e-250
# LLMs per block of the kernel's and the draws' vector loops: each pass over a block is a short loop whose
# set-up a longer block spreads, while the block's working arrays (nodes x LLMs) must stay in cache
_BLOCK = 128
# the smallest residual sd the inner nodes resolve, in steps (CollapsedGrid.resolvable_psi)
RESOLVE = 0.8


@dataclass
class CollapsedGrid:
    """The fixed nodes of the two integrals, in the kernel's layout.

    Inner (per cell, domain-major): ``start``, ``step``, ``logscale`` (K, N),
    ``logw`` (K, Q, N) and ``expw = exp(logw)`` in single precision (every evaluation reads them
    whole: half the bytes; their rounding, 6e-8 relative, is a fixed change of the quadrature's
    weights, far below its own error), ``deep`` (K, N) the cells whose log weights reach below
    ``_LOGW_SINGLE``, where single precision cannot hold the exponentials: those are summed
    and drawn in the log domain wherever such terms could weigh. Outer (per LLM): ``mu`` (r, N), ``chol`` (r, r, N),
    ``offsets`` (G, r) whitened node offsets, ``logomega`` (G, N) log
    weights; ``n_axis`` nodes per axis (the offsets are the full product
    grid, first axis slowest); ``rule`` ``"hermite"`` (Gauss-Hermite nodes
    and weights) or ``"trapezoid"`` (equally spaced, ``outer_step`` apart
    over +- ``outer_half_width``). ``half_from`` (K,): the residual sd from
    which a domain's cells are summed on every second inner node only
    (:meth:`with_half_nodes`; inf: never)."""

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
    half_from: np.ndarray | None = None
    deep: np.ndarray | None = None

    def __post_init__(self):
        self.logw = np.ascontiguousarray(self.logw, dtype=np.float32)
        self.expw = np.exp(self.logw) if self.expw is None else np.ascontiguousarray(self.expw, dtype=np.float32)
        if self.deep is None:
            self.deep = np.ascontiguousarray(self.logw.min(axis=1) < _LOGW_SINGLE)
        if self.half_from is None:
            self.half_from = np.full(self.start.shape[0], np.inf)

    @property
    def arrays(self) -> tuple[np.ndarray, ...]:
        """The kernel's grid arguments."""
        return (self.start, self.step, self.logw, self.expw, self.logscale, self.mu, self.chol,
                self.offsets, self.logomega, self.half_from, self.deep)

    def weights_read(self) -> np.ndarray:
        """The log weights (K, Q, N) the kernel sums with, in double precision: the logarithms of the
        single-precision exponentials, a deep cell's log weights (the references of the kernel)."""
        with np.errstate(divide="ignore"):
            return np.where(self.deep[:, None, :], self.logw, np.log(self.expw.astype(np.float64)))

    def domain_step(self) -> np.ndarray:
        """Each domain's inner step (K,): the 99th percentile over its cells, as the grid's spacing
        rule counts them."""
        return np.quantile(self.step, 0.99, axis=1)

    def resolvable_psi(self) -> np.ndarray:
        """The smallest residual sd of each domain (K,) whose conditional
        prior ``N(theta; m, psi_k^2)`` the inner nodes integrate accurately:
        ``RESOLVE`` times the domain's step (:meth:`domain_step`). The
        trapezoid rule's relative error is about ``2 exp(-2 pi^2 (psi /
        h)^2)``: 6e-6 at the bound, but it grows fast below it, where the
        quadrature overstates the likelihood."""
        return RESOLVE * self.domain_step()

    def with_half_nodes(self, n_least: int) -> CollapsedGrid:
        """The grid whose cells are summed on every second inner node wherever
        a domain's residual sd is resolved by them (:meth:`resolvable_psi`
        with twice the step), so long as that keeps at least ``n_least`` nodes
        per cell: a grid spaced for the smallest residual sds a posterior
        reaches (:func:`~mtlirt.bayes.collapsed_grid.psi_reach`) makes every
        evaluation pay for them, though most are at larger ones. The same
        accuracy rule decides the nodes, per evaluation instead of once."""
        Q = self.logw.shape[1]
        if (Q - 1) % 2 or (Q - 1) // 2 + 1 < n_least:
            return self
        return dataclasses.replace(self, half_from=2.0 * self.resolvable_psi())

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
def _node_stride(p, half_from_k, Q):
    # the inner nodes a domain is summed (and drawn) on at residual sd p: every second of the table's Q
    # where they resolve p (CollapsedGrid.half_from), else all: (stride, nodes used, their middle)
    s = 2 if p >= half_from_k else 1
    Qs = (Q - 1) // s + 1
    return s, Qs, 0.5 * (Qs - 1)


@numba.njit(inline="always", fastmath={"contract"}, error_model="numpy", boundscheck=False, cache=True)
def _inner_weights(k, b0, nb, Q, Qc, a, hh, c, expw, s, M, bad, gq, rq, kq, A):
    # A_q = w_q exp(-a (d_q^2 - D)), d_q = c + (q - Qc) h, D the least d^2
    # over the nodes' span (so A_q <= 1): three exponentials per cell,
    # the rest by the recurrence of the Gaussian's ratios; every s-th of the
    # table's nodes (hh: their step). bad: the cells for the log domain
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
        wq = expw[k, s * q, b0:b0 + nb]
        for i in range(nb):
            x = wq[i] * gq[i]
            A[q, i] = x if x > _A_MIN else 0.0
            gq[i] *= rq[i]
            rq[i] *= kq[i]


@numba.njit(inline="always", fastmath={"contract"}, error_model="numpy", boundscheck=False, cache=True)
def _beyond_range(bad, z, zmax, p0):
    # the part of _log_domain without a branch (a loop over a block vectorises it): nonzero where a
    # (cell, outer node)'s terms could leave the float range (bad, |z| beyond zmax, a sum at or below _P_MIN)
    return bad + (abs(z) > zmax) + (p0 <= _P_MIN)


@numba.njit(inline="always", fastmath={"contract"}, error_model="numpy", boundscheck=False, cache=True)
def _log_domain(bad, z, zmax, p0, deep, Q):
    # whether a (cell, outer node) is summed in the log domain: its terms could leave the float range
    # (_beyond_range), or, a deep cell, the terms single precision cannot hold (each below
    # exp(_LOGW_SINGLE) Y^q, Y = exp(z)) could reach 1e-8 of its sum p0
    return (_beyond_range(bad, z, zmax, p0) > 0
            or (deep and p0 * exp_nonpos(-max(z * (Q - 1), 0.0)) < _DEEP_FLOOR * Q))


@numba.njit(inline="always", fastmath={"contract"}, error_model="numpy", boundscheck=False, cache=True)
def _outer_nodes(k, b0, nb, Q, Qc, a, lp, zmax, store, offsets, e, c, st, hh, ls, logw_k, A, M, bad, deep_k,
                 v, Y, P0, P1, P2, LF, D1, D2, acc):
    # domain k at every outer node g: the inner sum (Horner in the node ratio Y)
    # added to acc[g]; with store, E[d] and E[d^2] over the inner nodes in D1, D2. A deep cell (deep_k)
    # is summed in the log domain where the terms single precision cannot hold (each below
    # exp(_LOGW_SINGLE) Y^q) could reach 1e-8 of its sum
    G, r = offsets.shape
    any_deep = False
    for i in range(nb):
        any_deep |= deep_k[b0 + i]
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
        # the log domain where the scaled sums could leave the float range: _log_domain's test but the
        # deep cells' in one vectorised pass with the sums' logarithms (the deep cells' test, a branch
        # per cell, only in the blocks that hold one); a sum at or below _P_MIN is taken again below
        n_bad = 0
        for i in range(nb):
            z = 2.0 * a * hh[i] * v[i]
            n_bad += _beyond_range(bad[i], z, zmax, P0[i])
            P0[i] = max(P0[i], _P_MIN)
            LF[i] = ls[i] + M[i] + log_pos(P0[i]) - Qc * z + a * v[i] * (2.0 * c[i] - v[i]) - lp
        if any_deep and not n_bad:
            for i in range(nb):
                n_bad += _log_domain(bad[i], 2.0 * a * hh[i] * v[i], zmax, P0[i], deep_k[b0 + i], Q)
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
                if _log_domain(bad[i], 2.0 * a * hh[i] * v[i], zmax, P0[i], deep_k[b0 + i], Q):
                    mc = st[i] + Qc * hh[i] - c[i]
                    lsum, Ed, Ed2 = _direct(logw_k, b0 + i, st[i], hh[i], mc + v[i], a)
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
def _kernel(start, step, logw, expw, logscale, mu, chol, offsets, logomega, half_from, deep, lam, psi, mode,
            node_out, mom1, mom2):
    K, Q, N = logw.shape
    r = mu.shape[0]
    G = offsets.shape[0]
    B = _BLOCK
    acc = np.empty((G, B))
    D1 = np.empty((K, G, B))
    D2 = np.empty((K, G, B))
    A = np.empty((Q, B))
    bad = np.empty(B, dtype=np.bool_)
    e = np.empty((r, B))
    so = np.empty((r, B))
    work = np.empty((15, B))  # the block's per-LLM work vectors, one row each
    c, M, gq, rq, kq, v, Y = work[0], work[1], work[2], work[3], work[4], work[5], work[6]
    P0, P1, P2, LF, s1v, s2v, hs, ls = work[7], work[8], work[9], work[10], work[11], work[12], work[13], work[14]
    pi = np.empty((G, B))
    dlam = np.zeros((K, r))
    dpsi = np.zeros(K)
    total = 0.0
    store = mode != 0
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
            s, Qs, Qcs = _node_stride(p, half_from[k], Q)
            log_s = np.log(s)
            hh = hs[:nb]
            for i in range(nb):
                hh[i] = s * step[k, b0 + i]
                ls[i] = logscale[k, b0 + i] + log_s
            zmax = _Z_MAX / max(Qs - 1, 1)
            _centres(k, b0, nb, st, hh, Qcs, lam, mu, chol, c, e)
            _inner_weights(k, b0, nb, Qs, Qcs, a, hh, c, expw, s, M, bad, gq, rq, kq, A)
            _outer_nodes(k, b0, nb, Qs, Qcs, a, lp, zmax, store, offsets, e, c, st, hh, ls, logw[k, ::s], A, M,
                         bad, deep[k], v, Y, P0, P1, P2, LF, D1, D2, acc)
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
    logomega, half_from, deep, lam, psi, mode, node_out, mom1, mom2) -> (total, dlam (K, r),
    dpsi (K,))`` (the grid's arguments: :attr:`CollapsedGrid.arrays`).

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
    kernel): ``log p(y_i | Lambda)`` per LLM (N,), on the weights the kernel reads (the
    single-precision exponentials; a deep cell's log weights)."""
    from scipy.special import logsumexp

    K, Q, N = grid.logw.shape
    logw = grid.weights_read()
    nodes = grid.start[:, None, :] + grid.step[:, None, :] * np.arange(Q)[None, :, None]  # K Q N
    eta = grid.mu[None, :, :] + np.einsum("jln,gl->gjn", grid.chol, grid.offsets)  # G r N
    m = np.einsum("kj,gjn->gkn", lam, eta)  # G K N
    a = 0.5 / psi**2
    e = logw[None] - a[None, :, None, None] * (nodes[None] - m[:, :, None, :]) ** 2  # G K Q N
    lf = grid.logscale[None] + logsumexp(e, axis=2) - np.log(psi)[None, :, None]  # G K N
    return logsumexp(grid.logomega + lf.sum(1), axis=0)

