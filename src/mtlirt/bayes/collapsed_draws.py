"""Exact draws of the LLM side given each draw of the structure.

Per structure draw and LLM: the kernel's log posterior at the grid's own
outer nodes (Gauss-Hermite: the nodes the structure's density sums over)
divided by the standard normal of the whitened coordinates is a smooth
function, which the polynomial through the nodes interpolates (exact where
its logarithm is a polynomial of lower degree than the nodes' number: a
Gaussian posterior of any mean and sd, with a cubic skew term from four
nodes per axis on); ``eta_i`` is drawn
by inverse CDF from that polynomial times the normal, evaluated every
``ETA_STEP`` whitened sds over +- the grid's outer span and log-linear in
between (rank 2: the first axis from its marginal, the second integrated
by the grid's rule, then the second from its conditional). Then each
``theta_ik`` is drawn the same way from ``exp(l_ik(t) - (t - Lambda_k .
eta_i)^2 / (2 psi_k^2))`` on the cell's inner nodes. For a Gaussian the
log-linear interpolant has the exact variance.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numba
import numpy as np

from mtlirt.bayes._vecmath import exp_nonpos, log_pos
from mtlirt.bayes.collapsed_grid import grid_subset, outer_axis
from mtlirt.bayes.collapsed_kernel import (
    _BLOCK,
    _DEEP_FLOOR,
    _EMPTY2,
    _P_MIN,
    CollapsedGrid,
    _inner_weights,
    _node_stride,
    collapsed_kernel,
)

__all__ = [
    "DRAW_BATCH",
    "ETA_STEP",
    "StoredNodes",
    "draw_llm_side",
]

# the spacing, in whitened sds, of the points at which the overall trait's interpolated density is read
ETA_STEP = 0.25
# structure draws whose domain scores are drawn in one pass over the grid's tables (the pass is bound by
# reading them)
DRAW_BATCH = 8

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
    # below that, dlt^2 / 12); the exponentials first, in a loop the compiler vectorises
    for q in range(n):
        wbuf[q] = exp_nonpos(lv[q] - mx)
    tot = 0.0
    eb = wbuf[0]
    for q in range(n - 1):
        ea = eb
        eb = wbuf[q + 1]
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


@numba.njit(inline="always", boundscheck=False, cache=True)
def _lagrange(x, t, out):
    # the Lagrange basis of the nodes x at t: out[j] = prod_{m != j} (t - x_m) / (x_j - x_m)
    n = x.shape[0]
    for j in range(n):
        p = 1.0
        for m in range(n):
            if m != j:
                p *= (t - x[m]) / (x[j] - x[m])
        out[j] = p


@numba.njit(inline="always", boundscheck=False, cache=True)
def _interpolate(BT, vals, base, out):
    # base plus the polynomial through vals at the nodes, at the fine points (BT (n, M): the
    # Lagrange basis there)
    n, M = BT.shape
    for m in range(M):
        out[m] = base[m]
    for j in range(n):
        v = vals[j]
        for m in range(M):
            out[m] += BT[j, m] * v


@numba.njit(inline="always", boundscheck=False, cache=True)
def _falling_tails(lv, m_lo, m_hi):
    # lv non-increasing outwards below fine point m_lo and above m_hi
    for m in range(m_lo - 1, -1, -1):
        lv[m] = min(lv[m], lv[m + 1])
    for m in range(m_hi + 1, lv.shape[0]):
        lv[m] = min(lv[m], lv[m - 1])


@numba.njit(nogil=True, boundscheck=False, cache=True)
def _draw_eta(nodes, xq, lwq, BT, m_lo, m_hi, x0, h, mu, chol, u_eta, eta_out):
    # the overall traits: nodes (G, N), each LLM's log posterior at the grid's outer nodes (the
    # kernel's node totals, the rule's weights included); xq, lwq (n,): one axis's nodes and log
    # weights against N(0, 1); BT (n, M): their Lagrange basis at the M points x0 + m h; u_eta (N, r)
    G, N = nodes.shape
    n, M = BT.shape
    r = mu.shape[0]
    neg_half_sq = np.empty(M)  # the standard normal's log density at the fine points, up to a constant
    for m in range(M):
        f = x0 + m * h
        neg_half_sq[m] = -0.5 * f * f
    lv = np.empty(M)
    wbuf = np.empty(M)
    lr = np.empty((n, n))
    vals = np.empty(n)
    ell = np.empty(n)
    V = np.empty((n, M))
    zero = np.zeros(M)
    top = np.empty(M)
    x = np.empty(r)
    for i in range(N):
        if r == 1:
            mx = -np.inf
            for g in range(n):
                vals[g] = nodes[g, i] - lwq[g]
                mx = max(mx, vals[g])
            for g in range(n):
                vals[g] -= mx
            _interpolate(BT, vals, neg_half_sq, lv)
            _falling_tails(lv, m_lo, m_hi)
            x[0] = _sample_loglinear(lv, x0, h, u_eta[i, 0], wbuf)
        else:
            mx = -np.inf
            for g1 in range(n):
                for g2 in range(n):
                    lr[g1, g2] = nodes[g1 * n + g2, i] - lwq[g1] - lwq[g2]
                    mx = max(mx, lr[g1, g2])
            for g1 in range(n):
                for g2 in range(n):
                    lr[g1, g2] -= mx
            # the first axis from its marginal: the second integrated by the grid's own rule at each point
            for g2 in range(n):
                _interpolate(BT, lr[:, g2], zero, V[g2])
            for m in range(M):
                top[m] = V[0, m] + lwq[0]
            for g2 in range(1, n):
                for m in range(M):
                    top[m] = max(top[m], V[g2, m] + lwq[g2])
            for m in range(M):
                wbuf[m] = 0.0
            for g2 in range(n):
                for m in range(M):
                    wbuf[m] += exp_nonpos(V[g2, m] + lwq[g2] - top[m])
            for m in range(M):
                lv[m] = top[m] + log_pos(wbuf[m]) + neg_half_sq[m]
            _falling_tails(lv, m_lo, m_hi)
            x[0] = _sample_loglinear(lv, x0, h, u_eta[i, 0], wbuf)
            # the second from its conditional: the polynomial at x[0] along the first axis
            _lagrange(xq, x[0], ell)
            for g2 in range(n):
                s = 0.0
                for g1 in range(n):
                    s += ell[g1] * lr[g1, g2]
                vals[g2] = s
            _interpolate(BT, vals, neg_half_sq, lv)
            _falling_tails(lv, m_lo, m_hi)
            x[1] = _sample_loglinear(lv, x0, h, u_eta[i, 1], wbuf)
        for jj in range(r):
            s = mu[jj, i]
            for l in range(r):
                s += chol[jj, l, i] * x[l]
            eta_out[i, jj] = s


# below this |difference| of a segment's end log densities its mass is the trapezoid with its end correction
# (error below dlt^4 / 720 relative); above it the exact (e1 - e0) / dlt, whose rounding of the float32
# weights is then below 1e-6 relative
_TRAPEZOID_DLT = 0.1


@numba.njit(inline="always", fastmath={"contract"}, error_model="numpy", boundscheck=False, cache=True)
def _segment_slope(lw0, lw1, a, h, d0):
    # the difference of the log density between a segment's ends: the log weights' and the
    # Gaussian's -a d^2, with d0 the segment's start's distance from the prior mean
    return (lw1 - lw0) - a * h * (2.0 * d0 + h)


@numba.njit(inline="always", fastmath={"contract"}, error_model="numpy", boundscheck=False, cache=True)
def _segment_masses(k, b0, nb, Q, Qc, a, hh, c, logw, s, A, C, tot):
    # C[q, ii]: the mass up to the end of segment q of the density A (Q, B) interpolated log-linearly,
    # each segment's log slope from the log weights (every s-th of the table's) and the Gaussian's (no
    # logarithm of A)
    for ii in range(nb):
        tot[ii] = 0.0
    for q in range(Q - 1):
        lw0 = logw[k, s * q, b0:b0 + nb]
        lw1 = logw[k, s * (q + 1), b0:b0 + nb]
        for ii in range(nb):
            h = hh[ii]
            dlt = _segment_slope(lw0[ii], lw1[ii], a, h, c[ii] + (q - Qc) * h)
            e0 = A[q, ii]
            e1 = A[q + 1, ii]
            if abs(dlt) < _TRAPEZOID_DLT:
                mm = 0.5 * (e0 + e1) - (e1 - e0) * dlt * (1.0 / 12.0)
            else:
                mm = (e1 - e0) / dlt
            tot[ii] += mm
            C[q, ii] = tot[ii]


@numba.njit(inline="always", fastmath={"contract"}, error_model="numpy", boundscheck=False, cache=True)
def _invert_segments(k, b0, nb, Q, Qc, a, hh, c, logw, s, C, u_theta, start, fv, dv, qv, theta):
    # the segment each uniform falls in (by counting), then the inverse CDF within it (with the
    # vectorisable exp and log, on the side where the density falls)
    for ii in range(nb):
        fv[ii] = u_theta[k, b0 + ii] * C[Q - 2, ii]
        qv[ii] = 0
    for q in range(Q - 2):
        for ii in range(nb):
            qv[ii] += C[q, ii] < fv[ii]
    for ii in range(nb):
        q = qv[ii]
        prev = C[q - 1, ii] if q > 0 else 0.0
        seg = C[q, ii] - prev
        frac = (fv[ii] - prev) / seg if seg > 0 else 0.5
        fv[ii] = min(max(frac, 0.0), 1.0)
        h = hh[ii]
        dv[ii] = _segment_slope(logw[k, s * q, b0 + ii], logw[k, s * (q + 1), b0 + ii], a, h, c[ii] + (q - Qc) * h)
    for ii in range(nb):
        # within the segment the density is exp(dlt s), s in [0, 1]: its CDF inverted at frac,
        # on the mirrored segment where dlt > 0 so that the exponent is never positive
        dlt = dv[ii]
        down = dlt < 0.0
        dn = dlt if down else -dlt
        fn = fv[ii] if down else 1.0 - fv[ii]
        w = max(1.0 + fn * (exp_nonpos(dn) - 1.0), 1e-300)
        s = log_pos(w) / dn if dn < -1e-8 else fn
        s = s if down else 1.0 - s
        theta[k, b0 + ii] = start[k, b0 + ii] + (qv[ii] + min(max(s, 0.0), 1.0)) * hh[ii]


@numba.njit(nogil=True, fastmath={"contract"}, error_model="numpy", boundscheck=False, cache=True)
def _draw_theta(start, step, logw, expw, half_from, deep, lam, psi, eta, u_theta, theta):
    # the domain scores given the overall traits eta (S, N, r) of S structure draws (lam (S, K, r), psi
    # (S, K)): u_theta and theta (S, K, N) laid out like the tables (K, Q, N), a domain at a time in
    # blocks of LLMs, every draw of a block in turn while its tables are in cache (the pass is bound by
    # reading them: S draws read them once), so that the tables are read as contiguous streams and
    # every step of a block is a loop the compiler vectorises. The density
    # at the inner nodes, w_q exp(-a d_q^2) up to a factor, comes from the
    # kernel's recurrence (_inner_weights: three exponentials per cell, not
    # Q); then the segment masses and the inverse CDF. A cell whose
    # recurrence could leave the float range, or whose mass underflows (a deep cell's: falls to where
    # the terms single precision cannot hold could weigh), is
    # drawn in the log domain (_sample_loglinear, the same inverse CDF). Every second node where the
    # grid says they resolve psi_k (half_from, as the kernel). Each draw's numbers do not depend on S.
    S, N, r = eta.shape
    K, Qt, _ = logw.shape
    B = _BLOCK
    A = np.empty((Qt, B))
    C = np.empty((Qt, B))
    work = np.empty((9, B))
    c, M, gq, rq, kq, fv, dv, tot, hh = (work[0], work[1], work[2], work[3], work[4], work[5], work[6], work[7],
                                          work[8])
    bad = np.empty(B, dtype=np.bool_)
    qv = np.empty(B, np.int64)
    lv = np.empty(Qt)
    wbuf = np.empty(Qt)
    for k in range(K):
        for b0 in range(0, N, B):
            nb = min(N, b0 + B) - b0
            for j in range(S):
                a = 0.5 / (psi[j, k] * psi[j, k])
                s, Q, Qc = _node_stride(psi[j, k], half_from[k], Qt)
                ut = u_theta[j]
                th = theta[j]
                for ii in range(nb):
                    hh[ii] = s * step[k, b0 + ii]
                for ii in range(nb):
                    m = 0.0
                    for jj in range(r):
                        m += lam[j, k, jj] * eta[j, b0 + ii, jj]
                    c[ii] = start[k, b0 + ii] + Qc * hh[ii] - m  # the middle node's distance from the prior mean
                _inner_weights(k, b0, nb, Q, Qc, a, hh, c, expw, s, M, bad, gq, rq, kq, A)
                _segment_masses(k, b0, nb, Q, Qc, a, hh, c, logw, s, A, C, tot)
                _invert_segments(k, b0, nb, Q, Qc, a, hh, c, logw, s, C, ut, start, fv, dv, qv, th)
                for ii in range(nb):
                    if bad[ii] or not tot[ii] > _P_MIN or (deep[k, b0 + ii] and tot[ii] < _DEEP_FLOOR * Q):
                        i = b0 + ii
                        h = hh[ii]
                        for q in range(Q):
                            d = c[ii] + (q - Qc) * h
                            lv[q] = logw[k, s * q, i] - a * d * d
                        th[k, i] = _sample_loglinear(lv[:Q], start[k, i], h, ut[k, i], wbuf)


@dataclass
class StoredNodes:
    """The kernel's node totals of structure draws already evaluated by the sampler (IMH evaluates
    every state it visits), so that the draws need not pass the kernel again: ``totals`` U arrays
    (G, n) float32, each LLM's log posterior at the outer nodes less its largest; ``index`` (C, D) the row
    of each structure draw (-1: not stored, the kernel runs); ``llms`` (n,) the LLMs they cover
    (None: all; the others' totals are computed)."""

    totals: list
    index: np.ndarray
    llms: np.ndarray | None = None

    def thinned(self, keep: np.ndarray) -> StoredNodes:
        """The same totals for the kept draws (their positions in each chain)."""
        return StoredNodes(self.totals, self.index[:, keep], self.llms)


def _eta_points(grid: CollapsedGrid) -> tuple:
    """The outer rule's nodes and log weights on one axis, the Lagrange basis at the points every
    ``ETA_STEP`` over +- the grid's outer span, the first and last of those points within the nodes,
    the first point and the spacing."""
    xq, lwq = outer_axis(grid)
    half = float(grid.outer_half_width)
    fine = np.linspace(-half, half, 2 * int(math.ceil(half / ETA_STEP)) + 1)
    B = np.empty((fine.size, xq.size))
    for m in range(fine.size):
        _lagrange(xq, fine[m], B[m])
    BT = np.ascontiguousarray(B.T)
    inside = np.flatnonzero((fine >= xq.min() - 1e-12) & (fine <= xq.max() + 1e-12))
    return (np.ascontiguousarray(xq), np.ascontiguousarray(lwq), BT, int(inside[0]), int(inside[-1]),
            float(fine[0]), float(fine[1] - fine[0]))


def draw_llm_side(grid: CollapsedGrid, lam: np.ndarray, psi: np.ndarray, *, seed: int = 0,
                  dtype=np.float32, progress=None, cores: int = 2, stored: StoredNodes | None = None):
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
    cores : int
        Batches of ``DRAW_BATCH`` structure draws drawn at once, one per thread (the kernels release the
        GIL); the draws depend on neither.
    stored : StoredNodes, optional
        The node totals of the draws the sampler evaluated (the kernel runs for the rest only).

    Returns
    -------
    eta : ndarray (C, D, N, r) float64
    theta : ndarray (C, D, N, K) ``dtype``
    """
    C, D, K, r = lam.shape
    xq, lwq, BT, m_lo, m_hi, x0, h = _eta_points(grid)
    N = grid.shape[0]
    G = grid.offsets.shape[0]
    eta = np.empty((C, D, N, r))
    theta = np.empty((C, D, N, K), dtype=dtype)
    seqs = np.random.SeedSequence([int(seed), 0xC011A95E]).spawn(C * D)
    kern = collapsed_kernel()
    jobs = [(c, t) for c in range(C) for t in range(D)]
    rest = rest_grid = None
    if stored is not None and stored.llms is not None:
        rest = np.setdiff1d(np.arange(N), stored.llms)
        rest_grid = grid_subset(grid, rest) if rest.size else None

    def node_totals(c, t, lam_t, psi_t):
        """Every LLM's log posterior at its outer nodes (G, N), up to a constant per LLM."""
        nodes = np.empty((G, N))
        row = -1 if stored is None else int(stored.index[c, t])
        if row < 0:
            kern(*grid.arrays, lam_t, psi_t, 0, nodes, _EMPTY2, _EMPTY2)
        elif stored.llms is None:
            nodes[:] = stored.totals[row]
        else:
            nodes[:, stored.llms] = stored.totals[row]
            if rest_grid is not None:
                part = np.empty((G, rest.size))
                kern(*rest_grid.arrays, lam_t, psi_t, 0, part, _EMPTY2, _EMPTY2)
                nodes[:, rest] = part
        return nodes

    def batch(first):
        """The jobs from ``first``, ``DRAW_BATCH`` of them: each one's overall traits, then their domain
        scores in one pass over the tables."""
        part = jobs[first:first + DRAW_BATCH]
        S = len(part)
        lam_b = np.empty((S, K, r))
        psi_b = np.empty((S, K))
        et = np.empty((S, N, r))
        ut = np.empty((S, K, N))
        for j, (c, t) in enumerate(part):
            rng = np.random.default_rng(seqs[first + j])
            lam_b[j] = lam[c, t]
            psi_b[j] = psi[c, t]
            nodes = node_totals(c, t, lam_b[j], psi_b[j])
            ue = rng.random((N, r))
            ut[j] = rng.random((K, N))
            _draw_eta(nodes, xq, lwq, BT, m_lo, m_hi, x0, h, grid.mu, grid.chol, ue, et[j])
        th = np.empty((S, K, N))
        _draw_theta(grid.start, grid.step, grid.logw, grid.expw, grid.half_from, grid.deep, lam_b, psi_b, et, ut, th)
        for j, (c, t) in enumerate(part):
            eta[c, t] = et[j]
            theta[c, t] = th[j].T
        return S

    done = 0
    with ThreadPoolExecutor(max(1, int(cores))) as pool:
        for n in pool.map(batch, range(0, len(jobs), DRAW_BATCH)):
            done += n
            if progress is not None:
                progress(done / len(jobs))
    return eta, theta

