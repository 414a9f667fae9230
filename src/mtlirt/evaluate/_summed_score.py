"""The summed-score tables of the S-X2 item fit (:func:`mtlirt.evaluate.item_fit.sx2_expected`) and its
score groups (:func:`sx2_groups`), compiled.

Both tables cost ``J^2 Q`` for a domain of ``J`` items on ``Q`` nodes; numpy
spent most of it writing temporaries (seconds for a domain of a thousand
items), these loops make one pass per score. Sums over the nodes are
reassociated (fast-math ``reassoc``), so results differ from a numpy
version in the last bits. The grouping, a loop over the scores per item
that the posterior predictive S-X2 runs twice per draw and domain, keeps
numpy's order and bits. Imported on first use (numba costs about a second
to import).
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["lord_wingersky", "leave_one_out", "sx2_groups"]

_FAST = {"contract", "reassoc", "nsz"}


@numba.njit(error_model="numpy", boundscheck=False, cache=True)
def lord_wingersky(P):
    """``f[s, q]``: the probability of the summed score ``s`` at node ``q`` given the items'
    probabilities correct ``P`` (J x Q), by the Lord-Wingersky recursion."""
    J, Q = P.shape
    f = np.zeros((J + 1, Q))
    f[0, :] = 1.0
    for j in range(J):
        for s in range(j + 1, 0, -1):  # downwards: f[s - 1] still holds the scores without item j
            for q in range(Q):
                f[s, q] = f[s, q] * (1.0 - P[j, q]) + f[s - 1, q] * P[j, q]
        for q in range(Q):
            f[0, q] *= 1.0 - P[j, q]
    return f


@numba.njit(fastmath=_FAST, error_model="numpy", boundscheck=False, cache=True)
def leave_one_out(P, w, f):
    """``num[j, s] = sum_q w_q P_jq f_-j(s - 1 | x_q)``, where ``f_-j`` is the summed-score
    distribution without item ``j``, recovered from ``f`` by deconvolution: forward in ``s`` at
    the nodes where ``P_jq <= 1/2``, backward elsewhere (both stable: every step divides by at
    least 1/2); a negative value (rounding) is taken as 0."""
    J, Q = P.shape
    num = np.zeros((J, J + 1))
    g = np.empty(Q)
    fwd = np.empty(Q, dtype=np.bool_)
    r = np.empty(Q)
    pw = np.empty(Q)
    for j in range(J):
        for q in range(Q):
            p = P[j, q]
            fwd[q] = p <= 0.5
            pw[q] = p * w[q]
            g[q] = 0.0
            r[q] = 1.0 / (1.0 - p)
        for s in range(J):  # g = f_-j(s) from f(s) and f_-j(s - 1)
            t = 0.0
            for q in range(Q):
                v = max((f[s, q] - P[j, q] * g[q]) * r[q], 0.0) if fwd[q] else 0.0
                g[q] = v
                t += pw[q] * v
            num[j, s + 1] += t
        for q in range(Q):
            g[q] = 0.0
            r[q] = 1.0 / P[j, q]
        for s in range(J, 0, -1):  # g = f_-j(s - 1) from f(s) and f_-j(s)
            t = 0.0
            for q in range(Q):
                v = 0.0 if fwd[q] else max((f[s, q] - (1.0 - P[j, q]) * g[q]) * r[q], 0.0)
                g[q] = v
                t += pw[q] * v
            num[j, s] += t
    return num


@numba.njit(error_model="numpy", boundscheck=False, cache=True, inline="always")
def _pearson(n, o, e):
    """A score group's Pearson term ``(o - e)^2 / (e (1 - e / n))``; 0 where it is 0 / 0."""
    t = (o - e) ** 2 / (e * (1.0 - e / n))
    return 0.0 if t != t else t


@numba.njit(error_model="numpy", boundscheck=False, cache=True)
def sx2_groups(Ns, Os, Es, occur, min_expected, sx2, groups):
    """Each item's S-X2 and number of groups (``sx2``, ``groups``: J) from the LLMs per score
    ``Ns`` (J + 1), the correct answers per item and score ``Os`` (J x J + 1) and the expected
    ones at the scores that occur ``Es`` (J x len(occur)): the inner score groups merged in
    order until each expects ``min_expected`` correct and wrong answers, a short last run joined
    to the group before it (no group: NaN). The same sums in the same order as the rule written
    out item by item."""
    J = Os.shape[0]
    for j in range(J):
        n = o = e = 0.0
        ln = lo = le = 0.0
        sx, g = 0.0, 0
        for i in range(len(occur)):
            s = occur[i]
            n += Ns[s]
            o += Os[j, s]
            e += Es[j, i]
            if e >= min_expected and n - e >= min_expected:
                sx += _pearson(n, o, e)
                g += 1
                ln, lo, le = n, o, e
                n = o = e = 0.0
        if n > 0:
            if g > 0:
                sx += _pearson(ln + n, lo + o, le + e) - _pearson(ln, lo, le)
            else:
                sx, g = _pearson(n, o, e), 1
        sx2[j] = sx if g > 0 else np.nan
        groups[j] = g
