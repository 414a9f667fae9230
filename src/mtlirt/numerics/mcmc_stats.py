"""Vectorised rank-normalised split R-hat and bulk/tail ESS (Vehtari et al. 2021).

The same algorithms as ``arviz_stats`` (``rhat(method="rank")``,
``ess(method="bulk")``, ``ess(method="tail", prob=0.05)``), vectorised over
many parameters at once: ArviZ loops in Python per parameter (~0.5 ms each),
which is minutes for the ~2.5e5 scalars of a leaderboard-sized posterior.
Internally arrays are laid out (parameter, chain, draw) so that sorts and
autocovariances run along contiguous memory; ``summary_stats`` sorts each parameter's draws
once, reuses the ranks for R-hat and ESS, and reads the folded values' order off the sorted draws.
"""

from __future__ import annotations

from functools import cache

import numpy as np
from scipy import special

__all__ = ["rhat_rank", "ess_bulk", "ess_tail", "summary_stats"]


def _to_mcd(x: np.ndarray) -> np.ndarray:
    """(C, D, ...) -> contiguous (M, 2C, D//2) split chains."""
    C, D = x.shape[:2]
    x = x.reshape(C, D, -1)
    half = D // 2
    s = np.concatenate([x[:, :half], x[:, D - half:]], axis=0)  # 2C, half, M
    return np.ascontiguousarray(np.moveaxis(s, -1, 0), dtype=np.float64)


def _rhat(z: np.ndarray) -> np.ndarray:
    """Classic R-hat of (M, m, n) arrays."""
    n = z.shape[2]
    cm = z.mean(2)
    cv = z.var(2, ddof=1)
    B = n * cm.var(1, ddof=1)
    W = cv.mean(1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.sqrt((B / W + n - 1) / n)


def _ess(x: np.ndarray) -> np.ndarray:
    """Geyer initial-monotone-sequence ESS of (M, m, n) arrays, per parameter.

    ArviZ's estimator, with the autocovariances computed lag by lag only as
    far as Geyer's truncation reaches (a few lags for well-mixing
    parameters) instead of all ``n`` lags by FFT: the same numbers, several
    times faster on a leaderboard-sized posterior (compiled; it releases
    the GIL, so :func:`summary_stats`' threads run it in parallel).
    """
    M, m, n = x.shape
    x = np.ascontiguousarray(x, dtype=np.float64)
    kmax = max(1, int(np.ceil((n - 2) / 2)) - 1)  # last pair index ArviZ's loop can reach
    L = min(2 * (kmax + 1), n)
    npairs = min((L + 1) // 2, L // 2)
    out = np.empty(M)
    _ess_kernel()(x, npairs, float(np.finfo(float).resolution), out)
    return out


def _ess_loop(x, npairs, resolution, out):  # pragma: no cover - compiled by numba
    M, m, n = x.shape
    size = m * n
    for p in range(M):
        v = x[p]
        lo = np.inf
        hi = -np.inf
        bad = False
        for c in range(m):
            for s in range(n):
                a = v[c, s]
                if a != a:
                    bad = True
                lo = min(lo, a)
                hi = max(hi, a)
        if bad:
            out[p] = np.nan
            continue
        if hi - lo < resolution:
            out[p] = float(size)
            continue
        xc = np.empty((m, n))
        cm = np.empty(m)
        for c in range(m):
            t = 0.0
            for s in range(n):
                t += v[c, s]
            cm[c] = t / n
            for s in range(n):
                xc[c, s] = v[c, s] - cm[c]

        def mean_acov(lag):
            tot = 0.0
            for c in range(m):
                t = 0.0
                for s in range(n - lag):
                    t += xc[c, s] * xc[c, s + lag]  # noqa: B023 (called in this iteration only)
                tot += t / n
            return tot / m

        a0 = mean_acov(0)
        mean_var = a0 * n / (n - 1.0)
        var_plus = mean_var * (n - 1.0) / n
        if m > 1:
            mu = 0.0
            for c in range(m):
                mu += cm[c]
            mu /= m
            vb = 0.0
            for c in range(m):
                vb += (cm[c] - mu) ** 2
            var_plus += vb / (m - 1)
        total = 0.0
        mono = np.inf
        extra = 0.0
        for k in range(npairs):
            ev = 1.0 if k == 0 else 1.0 - (mean_var - mean_acov(2 * k)) / var_plus
            od = 1.0 - (mean_var - mean_acov(2 * k + 1)) / var_plus
            pair = ev + od
            mono = min(mono, pair)
            if (k >= 1 and pair <= 0.0) or k == npairs - 1:
                extra = ev if ev > 0.0 else 0.0
                break
            total += mono
        tau = -1.0 + 2.0 * total + extra
        tau = max(tau, 1.0 / np.log10(size))
        out[p] = size / tau


@cache
def _ess_kernel():
    """:func:`_ess_loop` compiled by numba (imported on first use), kept in numba's on-disk cache: a later
    process loads it instead of compiling it again (about half a second)."""
    import numba

    return numba.njit(nogil=True, cache=True)(_ess_loop)


def _fold_loop(srt, order, med, sf, fo):  # pragma: no cover - compiled by numba
    M, S = srt.shape
    mid = S // 2  # srt[:mid] <= med <= srt[mid:]
    for p in range(M):
        m = med[p]
        i = mid - 1
        j = mid
        for r in range(S):
            if j >= S or (i >= 0 and not (srt[p, j] - m < m - srt[p, i])):  # a NaN (sorted last) goes last
                sf[p, r] = m - srt[p, i]
                fo[p, r] = order[p, i]
                i -= 1
            else:
                sf[p, r] = srt[p, j] - m
                fo[p, r] = order[p, j]
                j += 1


@cache
def _fold_kernel():
    """:func:`_fold_loop` compiled by numba, kept in numba's on-disk cache."""
    import numba

    return numba.njit(nogil=True, cache=True)(_fold_loop)


def _folded(srt: np.ndarray, order: np.ndarray, med: np.ndarray):
    """The folded values ``|x - med|`` of each row, sorted, and their positions, from the row's sorted
    values ``srt`` and their positions ``order``: the values below the median, read downwards, and
    those above it, read upwards, are two ascending runs, merged in one pass instead of a second sort
    (``med - x`` and ``x - med`` are ``|x - med|`` exactly on either side)."""
    sf = np.empty(srt.shape)
    fo = np.empty(order.shape, dtype=order.dtype)
    _fold_kernel()(np.ascontiguousarray(srt), np.ascontiguousarray(order), np.ascontiguousarray(med), sf, fo)
    return sf, fo


def _scatter(order: np.ndarray, values_sorted: np.ndarray) -> np.ndarray:
    out = np.empty(order.shape, dtype=np.float64)
    np.put_along_axis(out, order, values_sorted, axis=1)
    return out


def _ztable(S: int) -> np.ndarray:
    """Rank-normalised z-score of ranks 1..S (Blom offset 3/8)."""
    return special.ndtri((np.arange(1, S + 1, dtype=np.float64) - 3 / 8) / (S - 2 * 3 / 8 + 1))


def _summary_chunk(s: np.ndarray, prob: float = 0.05, with_ess: bool = True):
    """(rhat_rank, ess_bulk, ess_tail) for split chains s (M, m, n), one sort.

    Ties in the values are broken by position (continuous draws have none);
    in the folded values, tied neighbours (the two middle draws when the
    number of draws is even) get their average rank, as ArviZ does.
    """
    M, m, n = s.shape
    S = m * n
    zt = _ztable(S)
    flat = s.reshape(M, S)
    order = np.argsort(flat, axis=1)
    z = _scatter(order, np.broadcast_to(zt, (M, S))).reshape(M, m, n)
    rhat_bulk = _rhat(z)
    ebulk = _ess(z) if with_ess else np.full(M, np.nan)
    del z
    srt = np.take_along_axis(flat, order, axis=1)
    med = 0.5 * (srt[:, (S - 1) // 2] + srt[:, S // 2])

    def q(srt, pr):
        h = (S - 1) * pr
        lo = int(np.floor(h))
        hi = min(lo + 1, S - 1)
        return srt[:, lo] + (h - lo) * (srt[:, hi] - srt[:, lo])

    qlo, qhi = q(srt, prob), q(srt, 1 - prob)
    sf, order = _folded(srt, order, med)
    del srt
    tie = sf[:, 1:] == sf[:, :-1]
    zs = np.broadcast_to(zt, (M, S))
    if tie.any():
        zs = zs.copy()
        rr, cc = np.nonzero(tie)
        zavg = special.ndtri((cc + 1.5 - 3 / 8) / (S - 2 * 3 / 8 + 1))
        zs[rr, cc] = zavg
        zs[rr, cc + 1] = zavg
    del sf, tie
    zf = _scatter(order, zs).reshape(M, m, n)
    del order, zs
    rhat_tail = _rhat(zf)
    del zf
    if not with_ess:
        return np.maximum(rhat_bulk, rhat_tail), ebulk, np.full(M, np.nan)
    etail = np.minimum(_ess((s <= qlo[:, None, None]).astype(np.float64)),
                       _ess((s <= qhi[:, None, None]).astype(np.float64)))
    return np.maximum(rhat_bulk, rhat_tail), ebulk, etail


def summary_stats(x: np.ndarray, *, max_elems: float = 4e6, workers: int = 2, with_ess: bool = True):
    """R-hat (rank-normalised, split), bulk ESS and tail ESS of every column.

    Parameters
    ----------
    x : ndarray (chain, draw, ...)
    max_elems : float
        Elements per chunk (working memory about 10x this many float64).
    workers : int
        Threads (numpy sorts and scipy FFTs release the GIL).
    with_ess : bool
        False: R-hat only (ESS returned as NaN).

    Returns
    -------
    rhat, ess_bulk, ess_tail : ndarray
        One value per trailing element (flattened).
    """
    C, D = x.shape[:2]
    x = x.reshape(C, D, -1)
    M = x.shape[2]
    per = max(1, int(max_elems // max(C * D, 1)))
    starts = list(range(0, M, per))
    r = np.empty(M)
    b = np.empty(M)
    t = np.empty(M)

    def work(s0):
        sl = slice(s0, min(M, s0 + per))
        rr, bb, tt = _summary_chunk(_to_mcd(x[:, :, sl]), with_ess=with_ess)
        r[sl], b[sl], t[sl] = rr, bb, tt

    if workers > 1 and len(starts) > 1:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(workers) as ex:
            list(ex.map(work, starts))
    else:
        for s0 in starts:
            work(s0)
    return r, b, t


def rhat_rank(x: np.ndarray) -> np.ndarray:
    """Rank-normalised split R-hat (max of bulk and folded) per column of
    ``x`` (chain, draw, ...), shaped like ``x``'s trailing axes."""
    x = np.asarray(x)
    return summary_stats(x, workers=1, with_ess=False)[0].reshape(x.shape[2:])


def ess_bulk(x: np.ndarray) -> np.ndarray:
    """Bulk ESS (rank-normalised split chains) per column of ``x`` (chain, draw, ...)."""
    return summary_stats(x, workers=1)[1]


def ess_tail(x: np.ndarray) -> np.ndarray:
    """Tail ESS (min over the 5% and 95% quantile indicators) per column."""
    return summary_stats(x, workers=1)[2]
