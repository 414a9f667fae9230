"""The numba kernels of the item calibration's EM and the trait step (:mod:`mtlirt.estimators.em_steps`,
:mod:`mtlirt.estimators.trait_scoring`).

One pass over each ``N x Q`` or ``J x Q`` array instead of numpy's one pass
per operation: the E-step's posterior over the nodes with its moments, and
the M-step's per-item derivatives and objective (2PL, or with guessing
floors), with the exponential and logarithm of :mod:`mtlirt.numerics.vecmath`
that LLVM vectorises.  Sums are reassociated (fast-math ``reassoc``), so
results differ from numpy's in the last bits.  A reassociating function that
other kernels call is inlined into them by numba (``inline="always"``): left
a separate function, the caller could run either of two copies that LLVM
vectorised differently, one when compiled afresh and the other when loaded
from the on-disk cache, and the same seed would give different numbers in a
first and a later run.  Imported on first use (numba costs about a second to
import).
"""

from __future__ import annotations

import math

import numba
import numpy as np

from ..numerics import hermite
from ..numerics.vecmath import exp_nonpos, log1p_nonneg, log_pos

__all__ = ["block_sums", "cell_sums", "correct_cells", "curve_change", "expected_correct", "floor_run",
           "floor_terms", "item_tables", "mstep_derivs", "mstep_objective", "posterior_linear", "posterior_rows",
           "sigmoid_table", "tab_derivs", "theta_newton"]

_FAST = {"contract", "reassoc", "nsz"}
_EPS = 1e-12
_weights, _combine = hermite.numba_versions()


@numba.njit(fastmath=_FAST, error_model="numpy", boundscheck=False, cache=True, inline="always")
def _row_stats(L, m, x, row, eap, e2, nq, lml, P32):
    """Normalise one row of log-posterior values ``L`` (max ``m``) in place and record its moments."""
    Q = x.shape[0]
    z = 0.0
    for q in range(Q):
        p = exp_nonpos(L[q] - m)
        L[q] = p
        z += p
    inv = 1.0 / z
    s1 = 0.0
    s2 = 0.0
    keep = P32.shape[0] > 0
    add = nq.shape[0] > 0
    for q in range(Q):
        p = L[q] * inv
        s1 += p * x[q]
        s2 += p * x[q] * x[q]
        if add:
            nq[q] += p
        if keep:  # (below 1e-30 as 0: float32 subnormals made the products with P32 five times slower)
            P32[row, q] = p if p >= 1e-30 else 0.0
    eap[row] = s1
    e2[row] = s2
    lml[row] = math.log(z) + m


@numba.njit(fastmath=_FAST, error_model="numpy", boundscheck=False, cache=True)
def posterior_linear(s, x, b, eap, e2, nq, lml, P32):
    """The posterior over the nodes ``x`` of every row whose log-likelihood plus log prior is
    ``s_i x_q + b_q`` (a complete domain without floors: ``b`` = log weights minus the log-partition).

    Fills each row's mean ``eap`` and mean square ``e2``, its log marginal likelihood ``lml``, adds its
    posterior to ``nq`` (unless empty) and writes it to ``P32`` (unless empty; weights below ``1e-30``
    as 0)."""
    N = s.shape[0]
    Q = x.shape[0]
    L = np.empty(Q)
    for i in range(N):
        si = s[i]
        m = -np.inf
        for q in range(Q):
            v = si * x[q] + b[q]
            L[q] = v
            m = max(m, v)
        _row_stats(L, m, x, i, eap, e2, nq, lml, P32)


@numba.njit(fastmath=_FAST, error_model="numpy", boundscheck=False, cache=True)
def posterior_rows(Lg, logw, x, eap, e2, nq, lml, P32):
    """As :func:`posterior_linear`, each row's log-likelihood on the nodes given (``Lg``, N x Q)."""
    N, Q = Lg.shape
    L = np.empty(Q)
    for i in range(N):
        m = -np.inf
        for q in range(Q):
            v = Lg[i, q] + logw[q]
            L[q] = v
            m = max(m, v)
        _row_stats(L, m, x, i, eap, e2, nq, lml, P32)


@numba.njit(fastmath=_FAST, error_model="numpy", boundscheck=False, cache=True, inline="always")
def _sigmoid(z):
    e = exp_nonpos(-abs(z))
    return (1.0 if z >= 0 else e) / (1.0 + e), e


@numba.njit(fastmath=_FAST, error_model="numpy", boundscheck=False, cache=True)
def mstep_derivs(a, d, x, Nq, rows, c, R, out):
    """Per item ``j``: the derivatives in ``(a_j, d_j)`` of its expected complete-data log-likelihood
    ``sum_q`` over the nodes, without the answers' linear part when there is no floor (``c`` empty: the
    caller adds ``t_j`` and ``n1_j``), and its Fisher information: ``out[j]`` = (``g_a``, ``g_d``,
    ``I_aa``, ``I_ad``, ``I_dd``).  ``Nq[rows[j]]`` are the expected numbers of responses at the nodes,
    ``R[j]`` the expected correct ones (with floors)."""
    J = a.shape[0]
    Q = x.shape[0]
    floor = c.shape[0] > 0
    for j in range(J):
        aj, dj = a[j], d[j]
        nrow = Nq[rows[j]]
        ga = 0.0
        gd = 0.0
        iaa = 0.0
        iad = 0.0
        idd = 0.0
        if floor:
            cj = c[j]
            Rj = R[j]
            for q in range(Q):
                sig, _ = _sigmoid(aj * x[q] + dj)
                P1 = min(max(cj + (1.0 - cj) * sig, _EPS), 1.0 - _EPS)
                dP = (1.0 - cj) * sig * (1.0 - sig)
                r = Rj[q] * dP / P1 - (nrow[q] - Rj[q]) * dP / (1.0 - P1)
                w = nrow[q] * dP * dP / (P1 * (1.0 - P1))
                ga += r * x[q]
                gd += r
                iaa += w * x[q] * x[q]
                iad += w * x[q]
                idd += w
        else:
            for q in range(Q):
                sig, _ = _sigmoid(aj * x[q] + dj)
                r = -nrow[q] * sig
                w = nrow[q] * sig * (1.0 - sig)
                ga += r * x[q]
                gd += r
                iaa += w * x[q] * x[q]
                iad += w * x[q]
                idd += w
        out[j, 0] = ga
        out[j, 1] = gd
        out[j, 2] = iaa
        out[j, 3] = iad
        out[j, 4] = idd


@numba.njit(fastmath=_FAST, error_model="numpy", boundscheck=False, cache=True)
def mstep_objective(a, d, x, Nq, rows, c, R, out):
    """Per item: its expected complete-data log-likelihood, ``-sum_q Nq softplus(a x_q + d)`` without a
    floor (the caller adds ``a t + d n1``), ``sum_q R log P + (Nq - R) log(1 - P)`` with one
    (``P`` kept inside ``[1e-12, 1 - 1e-12]``)."""
    J = a.shape[0]
    Q = x.shape[0]
    floor = c.shape[0] > 0
    for j in range(J):
        aj, dj = a[j], d[j]
        nrow = Nq[rows[j]]
        f = 0.0
        if floor:
            cj = c[j]
            Rj = R[j]
            for q in range(Q):
                sig, _ = _sigmoid(aj * x[q] + dj)
                P1 = min(max(cj + (1.0 - cj) * sig, _EPS), 1.0 - _EPS)
                f += Rj[q] * log_pos(P1) + (nrow[q] - Rj[q]) * log_pos(1.0 - P1)
        else:
            for q in range(Q):
                z = aj * x[q] + dj
                f -= nrow[q] * (max(z, 0.0) + log1p_nonneg(exp_nonpos(-abs(z))))
        out[j] = f


@numba.njit(fastmath=_FAST, error_model="numpy", boundscheck=False, cache=True)
def sigmoid_table(a, d, x, out):
    """``out[j, q]`` = ``sigmoid(a_j x_q + d_j)``: the items' curves above their floors, which the floors'
    Newton steps (:func:`floor_terms`) evaluate again at every trial floor."""
    for j in range(a.shape[0]):
        for q in range(x.shape[0]):
            out[j, q], _ = _sigmoid(a[j] * x[q] + d[j])


@numba.njit(fastmath=_FAST, error_model="numpy", boundscheck=False, cache=True)
def floor_terms(sig, c, Nq, rows, R, out):
    """Per item, in its floor ``c_j``: the expected complete-data log-likelihood ``f``, its derivative
    ``g`` and minus its second derivative ``H``: ``out[j]`` = (``f``, ``g``, ``H``); ``sig`` the
    items' :func:`sigmoid_table`."""
    J, Q = sig.shape
    for j in range(J):
        cj = c[j]
        nrow = Nq[rows[j]]
        Rj = R[j]
        sj = sig[j]
        f = 0.0
        g = 0.0
        h = 0.0
        nr = 0.0
        for q in range(Q):
            P1 = min(max(cj + (1.0 - cj) * sj[q], _EPS), 1.0 - _EPS)
            S = 1.0 - sj[q]
            f += Rj[q] * log_pos(P1) + (nrow[q] - Rj[q]) * log_pos(1.0 - P1)
            u = Rj[q] * S / P1
            g += u
            h += u * S / P1
            nr += nrow[q] - Rj[q]
        out[j, 0] = f
        out[j, 1] = g - nr / (1.0 - cj)
        out[j, 2] = h + nr / ((1.0 - cj) * (1.0 - cj))


@numba.njit(fastmath=_FAST, error_model="numpy", boundscheck=False, cache=True, parallel=True, nogil=True)
def block_sums(correct, obs, starts, stops, w1, w2, out1, out2, out3):
    """Per LLM ``i`` and domain ``k`` (items ``starts[k]:stops[k]``): ``out1 = sum_j y_ij w1_j``,
    ``out2 = sum_j y_ij w2_j`` and, unless ``out3`` is empty, ``out3 = sum_j o_ij w2_j``, with ``y``
    the answers where observed (``obs`` empty: all are) -- the tabulated trait step's statistics, one
    pass over the ``int8`` answers, the LLMs in parallel."""
    N = correct.shape[0]
    K = starts.shape[0]
    masked = obs.shape[0] > 0
    third = out3.shape[0] > 0
    for i in numba.prange(N):
        for k in range(K):
            s1 = 0.0
            s2 = 0.0
            s3 = 0.0
            for j in range(starts[k], stops[k]):
                if masked:
                    o = 1.0 if obs[i, j] else 0.0
                    y = o * correct[i, j]
                    s3 += o * w2[j]
                else:
                    y = 1.0 * correct[i, j]
                    s3 += w2[j]
                s1 += y * w1[j]
                s2 += y * w2[j]
            out1[i, k] = s1
            out2[i, k] = s2
            if third:
                out3[i, k] = s3


@numba.njit(fastmath=_FAST, error_model="numpy", boundscheck=False, cache=True)
def curve_change(a0, d0, c0, a1, d1, c1, x):
    """Per item, the largest change over the nodes ``x`` of ``c + (1 - c) sigmoid(a x + d)`` between the
    items ``(a0, d0, c0)`` and ``(a1, d1, c1)`` (``c`` per item)."""
    J = a0.shape[0]
    Q = x.shape[0]
    out = np.zeros(J)
    for j in range(J):
        m = 0.0
        for q in range(Q):
            p0, _ = _sigmoid(a0[j] * x[q] + d0[j])
            p1, _ = _sigmoid(a1[j] * x[q] + d1[j])
            m = max(m, abs((c1[j] + (1.0 - c1[j]) * p1) - (c0[j] + (1.0 - c0[j]) * p0)))
        out[j] = m
    return out


@numba.njit(fastmath=_FAST, error_model="numpy", boundscheck=False, cache=True)
def item_tables(grid, a, d, c, starts, stops, floored, T):
    """The tabulated trait step's tables of every domain ``k`` at the trait values ``grid``
    (``T[m, g, k]``, see :class:`mtlirt.estimators.trait_scoring.TabulatedThetaLik`): the log-partition
    ``sum_j softplus(z)``, its derivatives ``sum a s``, ``sum a^2 s (1 - s)`` and ``sum a^3 s (1 - s)
    (1 - 2 s)``, and (with a floor) the Fisher information ``sum a^2 (1 - c) s^2 (1 - s) / P`` and its
    derivative, ``z = a_j t + d_j``, ``s = sigmoid(z)``, ``P = c + (1 - c) s``."""
    M = grid.shape[0]
    for k in range(starts.shape[0]):
        fl = floored[k]
        for g in range(M):
            t = grid[g]
            t0 = 0.0
            t1 = 0.0
            t2 = 0.0
            t3 = 0.0
            t4 = 0.0
            t5 = 0.0
            for j in range(starts[k], stops[k]):
                aj = a[j]
                z = aj * t + d[j]
                sig, e = _sigmoid(z)
                w = sig * (1.0 - sig)
                t0 += max(z, 0.0) + log1p_nonneg(e)
                t1 += aj * sig
                t2 += aj * aj * w
                t3 += aj * aj * aj * w * (1.0 - 2.0 * sig)
                if fl:
                    cj = c[j]
                    P = cj + (1.0 - cj) * sig
                    wc = (1.0 - cj) * sig * w / P
                    t4 += aj * aj * wc
                    t5 += aj * aj * aj * wc * ((2.0 - 3.0 * sig) - (1.0 - cj) * w / P)
            T[0, g, k] = t0
            T[1, g, k] = t1
            T[2, g, k] = t2
            T[3, g, k] = t3
            T[4, g, k] = t4 if fl else t2
            T[5, g, k] = t5 if fl else t3


@numba.njit(fastmath=_FAST, error_model="numpy", boundscheck=False, cache=True, inline="always")
def floor_run(lo, hi, yj, a, d, c, th):
    """Over the correct cells ``yj[lo:hi]`` of one (LLM, domain) block with a floor, at the trait ``th``:
    ``sum a_j / (1 + u_j)`` and ``sum a_j^2 u_j / (1 + u_j)^2``, ``u_j = c_j exp(-z_j)``."""
    g1 = 0.0
    g3 = 0.0
    for p in range(lo, hi):
        j = yj[p]
        z = min(max(a[j] * th + d[j], -700.0), 700.0)
        u = c[j] * exp_nonpos(-z)
        v = 1.0 / (1.0 + u)
        g1 += a[j] * v
        g3 += a[j] * a[j] * u * v * v
    return g1, g3


@numba.njit(fastmath=_FAST, error_model="numpy", boundscheck=False, cache=True, inline="always")
def _unobserved_run(lo, hi, uj, a, d, citem, th):
    """The unobserved cells ``uj[lo:hi]`` of one block at its trait ``th``: the sums of their gradient
    terms ``a_j sigma`` and of their Fisher and observed information terms."""
    g1 = 0.0
    g2 = 0.0
    g3 = 0.0
    for p in range(lo, hi):
        j = uj[p]
        sig, _ = _sigmoid(a[j] * th + d[j])
        c = citem[j]
        aa = a[j] * a[j] * sig * (1.0 - sig)
        g1 += a[j] * sig
        g2 += aa if c == 0.0 else aa * (1.0 - c) * sig / (c + (1.0 - c) * sig)
        g3 += aa
    return g1, g2, g3


@numba.njit(fastmath=_FAST, error_model="numpy", boundscheck=False, cache=True, inline="always")
def _row_derivs(i, th, s, g0, h, T1, T2, T3, I1, I2, rw, a, d, citem, item_domain, uptr, uj, ykptr, yj, kact,
                G1, G2, G3):
    """:func:`tab_derivs` of LLM ``i`` at its traits ``th`` (K) into ``G1``, ``G2``, ``G3`` (K; ``G2``
    not yet kept >= 0)."""
    K = th.shape[0]
    M = T1.shape[0] // K
    weighted = rw.shape[0] > 0
    masked = kact.shape[0] > 0
    for k in range(K):
        if masked and not kact[k]:
            G1[k] = 0.0
            G2[k] = 0.0
            G3[k] = 0.0
            continue
        pos = (th[k] - g0) / h
        g = min(max(np.floor(pos), 0.0), M - 2.0)
        w = _weights(min(max(pos - g, 0.0), 1.0), h)
        i0 = int(g) * K + k
        i1 = i0 + K
        v1 = _combine(w, T1[i0], T1[i1], T2[i0], T2[i1])
        v2 = _combine(w, I1[i0], I1[i1], I2[i0], I2[i1])
        v3 = _combine(w, T2[i0], T2[i1], T3[i0], T3[i1])
        if weighted:
            v1 *= rw[i, k]
            v2 *= rw[i, k]
            v3 *= rw[i, k]
        G1[k] = s[i, k] - v1
        G2[k] = v2
        G3[k] = v3
    p, end = uptr[i], uptr[i + 1]
    while p < end:  # the cells come by column, so by domain: one run per domain, summed in registers
        k = item_domain[uj[p]]
        q = p
        while q < end and item_domain[uj[q]] == k:
            q += 1
        if not (masked and not kact[k]):
            g1, g2, g3 = _unobserved_run(p, q, uj, a, d, citem, th[k])
            G1[k] += g1
            G2[k] -= g2
            G3[k] -= g3
        p = q
    if ykptr.shape[0] > 0:
        for k in range(K):
            lo, hi = ykptr[i, k], ykptr[i, k + 1]
            if hi > lo and not (masked and not kact[k]):
                g1, g3 = floor_run(lo, hi, yj, a, d, citem, th[k])
                G1[k] += g1
                G3[k] -= g3


#: LLMs per parallel task of :func:`tab_derivs` and :func:`theta_newton`.
_BLOCK = 64


@numba.njit(fastmath=_FAST, error_model="numpy", boundscheck=False, cache=True, parallel=True, nogil=True)
def tab_derivs(theta, rows, s, g0, h, T1, T2, T3, I1, I2, rw, a, d, citem, item_domain, uptr, uj, ykptr, yj,
               kact):
    """Gradient, Fisher and observed information of every block's log-likelihood (see :class:`TabulatedThetaLik`).

    ``theta`` (n x K) holds the traits of the LLMs ``rows`` (all ``N`` when
    ``rows`` is empty).  Per block: ``s - r G'(theta)`` by cubic Hermite
    interpolation of the tables (``M x K``, raveled: ``T1 = G'`` with
    derivative ``T2 = G''`` (derivative ``T3``), the Fisher information ``I1``
    with derivative ``I2``), times
    ``rw`` (N x K) unless it is empty; the unobserved cells of observed blocks
    (CSR by LLM: ``uptr``, items ``uj``) subtracted exactly; and, in domains
    with a floor (``citem[j] > 0`` for some of their items), the correct cells
    (CSR ``yptr``, ``yj``) add ``a_j / (1 + u)`` to the gradient (their ``a_j``
    is not in ``s``) and ``-a_j^2 u / (1 + u)^2`` to the observed information
    ``G''``, ``u = c_j exp(-z)``: the cells of LLM ``i`` in domain ``k`` are
    ``yj[ykptr[i, k]:ykptr[i, k + 1]]`` (:func:`floor_run`).  With ``kact``
    (K, not empty) only the domains where it is true are evaluated (the
    others' cells are skipped and their outputs are 0).  The trait step's hot
    loop, fused in one pass, the LLMs in parallel (each its own sums: the same numbers on any number of
    threads)."""
    n, K = theta.shape
    G1 = np.empty((n, K))
    G2 = np.empty((n, K))
    G3 = np.empty((n, K))
    for b in numba.prange((n + _BLOCK - 1) // _BLOCK):
        _derivs_rows(b * _BLOCK, min(n, (b + 1) * _BLOCK), theta, rows, s, g0, h, T1, T2, T3, I1, I2, rw, a, d,
                     citem, item_domain, uptr, uj, ykptr, yj, kact, G1, G2, G3)
    return G1, np.maximum(G2, 0.0), G3


@numba.njit(fastmath=_FAST, error_model="numpy", boundscheck=False, cache=True)
def _derivs_rows(r0, r1, theta, rows, s, g0, h, T1, T2, T3, I1, I2, rw, a, d, citem, item_domain, uptr, uj, ykptr,
                 yj, kact, G1, G2, G3):
    """:func:`tab_derivs` of the rows ``r0:r1``."""
    all_rows = rows.shape[0] == 0
    for r in range(r0, r1):
        i = r if all_rows else rows[r]
        _row_derivs(i, theta[r], s, g0, h, T1, T2, T3, I1, I2, rw, a, d, citem, item_domain, uptr, uj, ykptr, yj,
                    kact, G1[r], G2[r], G3[r])


@numba.njit(fastmath=_FAST, error_model="numpy", boundscheck=False, cache=True, parallel=True, nogil=True)
def theta_newton(theta, s, g0, h, T1, T2, T3, I1, I2, rw, a, d, citem, item_domain, uptr, uj, ykptr, yj, kact,
                 prec, bound, centre, weight, tol, max_newton):
    """:func:`mtlirt.estimators.trait_scoring.theta_step` on the tables, LLM by LLM: the safeguarded Newton steps
    on the observed information (kept >= 0) of each LLM's traits until its largest step is below
    ``tol``, with the prior's precision ``prec``, the bounds ``+-bound`` and, unless ``weight`` is empty,
    the ridge ``weight * (theta - centre)^2 / 2``; only the domains ``kact`` move (all when empty).
    Returns the traits and the information at each LLM's last-but-one iterate (0 where not moved).
    The LLMs run in parallel, in blocks of :data:`_BLOCK` (each LLM its own steps: the same
    numbers on any number of threads)."""
    N, K = theta.shape
    th = theta.copy()
    info = np.zeros((N, K))
    for b in numba.prange((N + _BLOCK - 1) // _BLOCK):
        _newton_rows(b * _BLOCK, min(N, (b + 1) * _BLOCK), th, info, s, g0, h, T1, T2, T3, I1, I2,
                     rw, a, d, citem, item_domain, uptr, uj, ykptr, yj, kact, prec, bound, centre, weight, tol,
                     max_newton)
    return th, info


@numba.njit(fastmath=_FAST, error_model="numpy", boundscheck=False, cache=True)
def _newton_rows(i0, i1, th, info, s, g0, h, T1, T2, T3, I1, I2, rw, a, d, citem, item_domain, uptr, uj, ykptr, yj,
                 kact, prec, bound, centre, weight, tol, max_newton):
    """:func:`theta_newton` of the LLMs ``i0:i1`` (their traits ``th`` moved in place)."""
    K = th.shape[1]
    penal = weight.shape[0] > 0
    masked = kact.shape[0] > 0
    G1 = np.empty(K)
    G2 = np.empty(K)
    G3 = np.empty(K)
    lo = np.empty(K)
    hi = np.empty(K)
    for i in range(i0, i1):
        x = th[i]
        for k in range(K):
            lo[k] = -bound
            hi[k] = bound
        for _ in range(max_newton):
            _row_derivs(i, x, s, g0, h, T1, T2, T3, I1, I2, rw, a, d, citem, item_domain, uptr, uj, ykptr, yj,
                        kact, G1, G2, G3)
            step = 0.0
            for k in range(K):
                inf = max(G3[k], 0.0)
                info[i, k] = inf
                g = G1[k] - prec * x[k]
                tot = inf + prec
                if penal:
                    g -= weight[i, k] * (x[k] - centre[i, k])
                    tot += weight[i, k]
                if g > 0:
                    lo[k] = x[k]
                if g < 0:
                    hi[k] = x[k]
                cap = min(0.5 * (hi[k] - lo[k]), 1.0)
                new = x[k] + min(max(g / tot, -cap), cap)
                new = min(max(new, -bound), bound)
                if masked and not kact[k]:
                    new = x[k]
                step = max(step, abs(new - x[k]))
                x[k] = new
            if step < tol:
                break


@numba.njit(error_model="numpy", boundscheck=False, cache=True)
def correct_cells(correct, obs, floored_item, item_domain, K):
    """The correct answers of the items ``floored_item`` (observed ones: ``obs`` empty means all), by
    LLM and, within an LLM, by column: ``(ykptr, yj)`` with the cells of LLM ``i`` in domain ``k`` at
    ``yj[ykptr[i, k]:ykptr[i, k + 1]]`` (columns ascending, domains contiguous)."""
    N, J = correct.shape
    masked = obs.shape[0] > 0
    n = 0
    for i in range(N):
        for j in range(J):
            if floored_item[j] and correct[i, j] != 0 and (not masked or obs[i, j]):
                n += 1
    yj = np.empty(n, dtype=np.int32)
    ykptr = np.empty((N, K + 1), dtype=np.int64)
    p = 0
    for i in range(N):
        k0 = 0
        for j in range(J):
            k = item_domain[j]
            while k0 <= k:
                ykptr[i, k0] = p
                k0 += 1
            if floored_item[j] and correct[i, j] != 0 and (not masked or obs[i, j]):
                yj[p] = j
                p += 1
        while k0 <= K:
            ykptr[i, k0] = p
            k0 += 1
    return ykptr, yj


@numba.njit(fastmath=_FAST, error_model="numpy", boundscheck=False, cache=True, parallel=True, nogil=True)
def cell_sums(theta, ptr, cols, a, d, c, item_domain, correct):
    """Per (LLM, domain) block, a sum over the cells of LLM ``i`` (``cols[ptr[i]:ptr[i + 1]]``) at the
    traits ``theta`` (N x K): ``log(c_j + exp(z))`` (``correct``; ``z`` where ``c_j = 0``) or
    ``softplus(z)``, ``z = a_j theta_ik + d_j``; the LLMs in parallel."""
    N, K = theta.shape
    out = np.zeros((N, K))
    for i in numba.prange(N):
        for p in range(ptr[i], ptr[i + 1]):
            j = cols[p]
            k = item_domain[j]
            z = a[j] * theta[i, k] + d[j]
            e = exp_nonpos(-abs(z))
            if not correct:
                v = max(z, 0.0) + log1p_nonneg(e)
            elif c[j] == 0.0:
                v = z
            elif z > 0:
                v = z + log1p_nonneg(c[j] * e)
            else:
                v = log_pos(c[j] + e)
            out[i, k] += v
    return out


@numba.njit(fastmath=_FAST, error_model="numpy", boundscheck=False, cache=True)
def expected_correct(theta, a, d, c, item_domain, out):
    """Each LLM's mean over the items of ``c_j + (1 - c_j) sigmoid(a_j theta_ik + d_j)`` (``k`` the item's
    domain), into ``out`` (no ``N x J`` array)."""
    N = theta.shape[0]
    J = a.shape[0]
    for i in range(N):
        acc = 0.0
        for j in range(J):
            sig, _ = _sigmoid(a[j] * theta[i, item_domain[j]] + d[j])
            acc += c[j] + (1.0 - c[j]) * sig
        out[i] = acc / J
