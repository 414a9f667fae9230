"""The item calibration EM's steps: the quadrature grids (:func:`node_levels`, sized by
:func:`max_information`), the E-step (the posterior over the nodes and its moments), the M-steps of the
items and of the domains' guessing floors (numba kernels in :mod:`mtlirt.estimators._kernels`, imported on first
use)."""

from __future__ import annotations

import numpy as np

from ..numerics import llm_side
from .blas import matmul_rows
from .penalties import DEFAULT_PENALTIES, Penalties
from .response_data import ResponseData

__all__ = ["node_levels", "seen_rows"]


def _nodes(priors: Penalties, level: int = 0):
    """Quadrature of level ``level``: ``(n_nodes - 1) 2^level + 1`` equally spaced nodes
    on ``[-node_max, node_max]`` (each level halves the spacing and keeps the nodes)."""
    x = np.linspace(-priors.node_max, priors.node_max, (priors.n_nodes - 1) * 2**int(level) + 1)
    return x, llm_side.normal_log_weights(x, priors.theta_sd)


def node_levels(a, item_domain, K, priors: Penalties = DEFAULT_PENALTIES, c=None) -> np.ndarray:
    """The quadrature level of every domain (see :class:`~mtlirt.estimators.penalties.Penalties`).

    Equally spaced nodes integrate a smooth posterior of sd ``s`` with a
    relative error of about ``2 exp(-2 pi^2 s^2 / h^2)`` (the trapezoidal rule
    on a Gaussian): negligible at spacing ``h = s``, 3e-4 at ``1.5 s``, 0.2 at
    ``3 s``.  A long domain's posterior of one LLM's trait is narrow (sd
    about ``1 / sqrt(sum_j I_j)``, ``I_j = a_j^2 p_j (1 - p_j)``): 49 nodes on
    ``[-6, 6]`` (``h = 0.25``) round it, which biases the discriminations
    (measured with ``benchmarks/bench_calibration.py``).  The bound uses each
    item's largest information, ``a_j^2 / 4`` (less with a guessing floor
    ``c``, per item: :func:`max_information`), so the chosen spacing is finer
    than needed where the items spread.
    """
    K = int(K)
    if not priors.node_sd_ratio > 0 or K == 0:
        return np.zeros(K, dtype=np.int64)
    info = np.bincount(item_domain, np.asarray(a, dtype=np.float64) ** 2 * max_information(c), minlength=K)
    sd = 1.0 / np.sqrt(info + 1.0 / priors.theta_sd**2)
    h0 = 2.0 * priors.node_max / (priors.n_nodes - 1)
    need = np.ceil(np.log2(np.maximum(h0 / (priors.node_sd_ratio * sd), 1.0)) - 1e-9)
    top = int(np.floor(np.log2(max(priors.max_nodes - 1, 1) / (priors.n_nodes - 1)) + 1e-9))
    return np.clip(need, 0, max(top, 0)).astype(np.int64)


def max_information(c):
    """The largest Fisher information of an item about the trait, over the trait, per ``a^2``: ``1/4``
    without a floor; with a floor ``c`` (``P = c + (1 - c) sigma``) ``sigma^2 (1 - sigma) / (c' + sigma)``,
    ``c' = c / (1 - c)``, at its maximum ``sigma = (1 - 3c' + sqrt((1 - 3c')^2 + 16c')) / 4`` (Birnbaum's);
    ``c`` None: ``1/4``."""
    if c is None:
        return 0.25
    cp = np.asarray(c, dtype=np.float64) / (1.0 - np.asarray(c, dtype=np.float64))
    s = (1.0 - 3.0 * cp + np.sqrt((1.0 - 3.0 * cp) ** 2 + 16.0 * cp)) / 4.0
    return s * s * (1.0 - s) / (cp + s)


def _estep(data: ResponseData, a, d, x, logw, c=None, domains=None):
    """Posterior over the nodes for every (LLM, domain); sufficient statistics for the M-step.

    Parameters
    ----------
    c : ndarray (J,), optional
        Guessing floors (default ``data.c``); a domain whose floors are all 0
        takes the 2PL's sufficient statistics.
    domains : sequence of int, optional
        Only these domains (default all); the item statistics are then over
        their items, in order.

    Returns
    -------
    stats : dict
        ``t`` (J) = sum_i E[theta] y_ij (items without a floor), ``R`` (J x Q,
        or None) expected correct counts (items with one; ``floored`` says
        which); ``Nq`` (J x Q) or ``nq`` (K x Q) expected numbers of responses
        at each node; ``eap`` (N x K); ``ll`` marginal log-likelihood and
        ``ll_domain`` its split by domain.
    """
    if c is None:
        c = data.c
    ks = list(range(data.K)) if domains is None else [int(k) for k in domains]
    sizes = [data.slices[k].stop - data.slices[k].start for k in ks]
    floored = [c is not None and bool(np.any(c[data.slices[k]] > 0)) for k in ks]
    Jg = int(sum(sizes))
    N, Kg, Q = data.N, len(ks), len(x)
    eap = np.empty((N, Kg))
    ll_domain = np.zeros(Kg)
    t = np.zeros(Jg)
    R = np.zeros((Jg, Q)) if any(floored) else None
    Nq_items = None if data.obs is None else np.empty((Jg, Q))
    nq = np.zeros((Kg, Q))
    mom = np.zeros((Kg, 3))
    a32 = a.astype(np.float32)
    kern = _em_kernels()
    e2, lml = np.empty(N), np.empty(N)
    off = 0
    for g, k in enumerate(ks):
        sl = data.slices[k]
        loc = slice(off, off + sizes[g])
        off = loc.stop
        fl = floored[g]
        if not fl:
            ll_domain[g] += float(np.dot(data.n1[sl], d[sl]))
        pat = data.patterns(k)
        if pat is not None:
            ll_domain[g] += _estep_patterns(data, g, sl, loc, pat, a, d, c if fl else None, x, logw, eap, mom, t, R,
                                            Nq_items, nq)
            continue
        Yk = data.Y[:, sl]
        mk = data.mask_of(k)
        Ok = mk[1] if mk is not None and mk[0] == "dense" else None
        seen = _seen_rows(mk) if fl else None
        P32 = np.empty((N, Q), dtype=np.float32) if fl or mk is not None else _NO_P
        nq_g = nq[g] if mk is None else _NO_CELLS_F
        eap_g = np.empty(N)
        if not fl:  # the answers through s = Y a; sum_j n1_j d_j is added above
            s_k = matmul_rows(Yk, a32[sl]).astype(np.float64)
            if mk is None:
                kern.posterior_linear(s_k, x, logw - llm_side.partition(None, a[sl], d[sl], x), eap_g, e2, nq_g,
                                      lml, P32)
            else:
                L = np.multiply.outer(s_k, x)
                if Ok is not None:
                    L -= llm_side.partition(Ok, a[sl], d[sl], x, np.float32)
                else:  # the observed LLMs' whole partition, less their unobserved cells' terms
                    sp = llm_side.softplus(llm_side.logits(a[sl], d[sl], x))
                    L -= mk[1] @ np.add.reduceat(sp, mk[5], axis=0)
                    _holes_kernels().gather_rows(*mk[2], sp, 1.0, L)
                kern.posterior_rows(L, logw, x, eap_g, e2, nq_g, lml, P32)
        else:
            lp, l1p = llm_side.log_curves(llm_side.curves(a[sl], d[sl], c[sl], x))
            L, Yk = _floored_loglik(Yk if seen is None else data.seen_answers(k, seen), mk, Ok, seen, lp, l1p)
            kern.posterior_rows(L, logw, x, eap_g, e2, nq_g, lml, P32)
        eap[:, g] = eap_g
        ll_domain[g] += float(np.sum(lml))
        if data.row_obs is None:
            mom[g] = (float(N), eap_g.sum(), e2.sum())
        else:
            ro = data.row_obs[:, k]
            mom[g] = (float(ro.sum()), eap_g[ro].sum(), e2[ro].sum())
        if fl:
            R[loc] = matmul_rows(Yk.T, P32 if seen is None else P32[seen])
        else:
            t[loc] = matmul_rows(Yk.T, eap_g.astype(np.float32))
        if Ok is not None:
            Nq_items[loc] = matmul_rows(Ok.T, P32)
        elif mk is not None:  # the observed LLMs' posterior mass, less that of each item's unobserved cells
            Nq_items[loc] = (mk[1].T @ P32)[mk[4]]
            _holes_kernels().gather_rows(*mk[3], P32, -1.0, Nq_items[loc])
    fl_items = np.repeat(np.asarray(floored, dtype=bool), sizes)
    return {"t": t, "R": R, "floored": fl_items, "nq": nq, "Nq": Nq_items, "eap": eap,
            "ll": float(ll_domain.sum()), "ll_domain": ll_domain, "moments": mom}


#: :func:`_seen_rows`: the largest share of the LLMs that answered in a domain at which its answer-by-node
#: products run over those LLMs only (the E-step of a floored domain, MTL's score tables): the copy of their
#: answers then costs less than the other LLMs' rows of zeros.
SEEN_SHARE = 0.9


def _floored_loglik(Yk, mk, Ok, seen, lp, l1p):
    """A floored domain's log-likelihood at the nodes (N x Q) from its curves' logs ``lp``, ``l1p`` (J_k x Q):
    the answers ``Yk`` (and the mask ``Ok``, or the cell lists of ``mk``) times them; with ``seen``
    (:func:`_seen_rows`) over those LLMs only (``Yk`` then holds their rows alone), the others' rows 0 (the
    prior). Returns it and the answers its product took (the M-step's product takes them too)."""
    if mk is None or Ok is not None:
        return llm_side.grid_loglik(Yk, Ok, lp, l1p, np.float32, matmul_rows), Yk
    if seen is not None:
        L = np.zeros((len(mk[1]), lp.shape[1]))
        L[seen] = llm_side.grid_loglik(Yk, None, lp, l1p, np.float32, matmul_rows)
    else:  # as the 2PL's: the wrong answers' log(1 - P) over the observed cells
        L = llm_side.grid_loglik(Yk, None, lp, l1p, np.float32, matmul_rows)
        L -= (1.0 - mk[1]) @ np.add.reduceat(l1p, mk[5], axis=0)
    _holes_kernels().gather_rows(*mk[2], l1p, -1.0, L)
    return L, Yk


def seen_rows(seen) -> np.ndarray | None:
    """The rows of the LLMs that answered in a domain (``seen``, N, nonzero where they did), where they are
    at most :data:`SEEN_SHARE` of all (its products then run over them only); else None."""
    rows = np.flatnonzero(seen)
    return rows if len(rows) <= SEEN_SHARE * len(seen) else None


def _seen_rows(mk):
    """:func:`seen_rows` of a domain of one block whose missing cells are listed (``mask_of``'s
    ``"sparse"``); else None."""
    if mk is None or mk[0] != "sparse" or mk[1].shape[1] != 1:
        return None
    return seen_rows(mk[1][:, 0])


_NO_P = np.zeros((0, 0), dtype=np.float32)
_NO_MASK = np.zeros((0, 0), dtype=bool)
_NO_CELLS_F = np.zeros(0)


def _em_kernels():
    """The EM's numba kernels (:mod:`mtlirt.estimators._kernels`), imported on first use."""
    from . import _kernels

    return _kernels


def _holes_kernels():
    """The kernels of the unobserved cells (:mod:`mtlirt.estimators._holes`), imported on first use."""
    from . import _holes

    return _holes


def _estep_patterns(data, g, sl, loc, pat, a, d, c, x, logw, eap, mom, t, R, Nq_items, nq):
    """The E-step of one short domain, computed once per distinct response
    pattern (same statistics as the per-LLM loop of :func:`_estep`).  Returns
    its marginal log-likelihood (without the ``sum_j n1_j d_j`` term that
    :func:`_estep` adds for every item)."""
    Yu, Ou, cnt, inv = pat
    if c is None:
        L = Yu @ (a[sl][:, None] * x[None, :]) - llm_side.partition(Ou, a[sl], d[sl], x)
    else:
        L = llm_side.grid_loglik(Yu, Ou, *llm_side.log_curves(llm_side.curves(a[sl], d[sl], c[sl], x)))
    P, lml = llm_side.posterior(L, logw)
    e_u = P @ x
    e2_u = P @ (x * x)
    eap[:, g] = e_u[inv]
    ro = Ou.any(axis=1) if data.row_obs is not None else np.ones(len(cnt), dtype=bool)
    w = cnt * ro
    mom[g] = (w.sum(), w @ e_u, w @ e2_u)
    if c is None:
        t[loc] = (cnt * e_u) @ Yu
    else:
        R[loc] = ((cnt[:, None] * P).T @ Yu).T
    if data.obs is None:
        nq[g] = cnt @ P
    else:
        Nq_items[loc] = ((cnt[:, None] * P).T @ Ou).T
    return float(cnt @ lml)


def _nq_of(stats, n):
    """The M-step's expected numbers of responses: a matrix and each item's row in it."""
    if stats["Nq"] is not None:
        return stats["Nq"], np.arange(n)
    return stats["nq"], stats["nq_rows"]


def _mstep_objective(a, d, stats, x, c, priors):
    """Every item's expected complete-data log-likelihood plus its penalties (:mod:`._kernels`)."""
    NqM, rows = _nq_of(stats, len(a))
    f = np.empty(len(a))
    _em_kernels().mstep_objective(a, d, x, NqM, rows, _NO_CELLS_F if c is None else c,
                                  _NO_P_F if c is None else stats["R"], f)
    if c is None:
        f += a * stats["t"] + d * stats["n1"]
    f -= 0.5 * ((np.log(a) - priors.log_a_mean) / priors.log_a_sd) ** 2
    f -= 0.5 * (d / priors.d_sd) ** 2
    return f


_NO_P_F = np.zeros((0, 0))


def _mstep(a, d, stats, x, c, priors, model, item_domain, n_newton=2, backtrack=5):
    """Penalised Fisher-scoring steps on every item's expected complete-data log-likelihood.

    ``stats`` holds the E-step's statistics of these items (``nq_rows``: each item's row of
    ``nq``); ``item_domain`` their domains numbered from 0 (the 1PL's blocks)."""
    a = a.copy()
    d = d.copy()
    pa = 1.0 / priors.log_a_sd**2
    pd_ = 1.0 / priors.d_sd**2
    lo_u, hi_u = np.log(priors.a_min), np.log(priors.a_max)
    K = int(item_domain.max()) + 1 if len(item_domain) else 0
    first = np.searchsorted(item_domain, np.arange(K))
    kern = _em_kernels()
    NqM, rows = _nq_of(stats, len(a))
    cc = _NO_CELLS_F if c is None else np.ascontiguousarray(c, dtype=np.float64)
    RR = _NO_P_F if c is None else stats["R"]
    der = np.empty((len(a), 5))
    f0 = _mstep_objective(a, d, stats, x, c, priors)
    for _ in range(n_newton):
        kern.mstep_derivs(a, d, x, NqM, rows, cc, RR, der)
        ga, gd, Iaa, Iad, Idd = der.T
        if c is None:  # the answers' part: t and n1
            ga = ga + stats["t"]
            gd = gd + stats["n1"]
        u = np.log(a)
        gu = a * ga - pa * (u - priors.log_a_mean)
        gdd = gd - pd_ * d
        # curvature in log a: Fisher information plus the term of the chain
        # rule, -a ga, where it adds curvature (an item whose likelihood pulls
        # a toward 0 against the prior: without it the step overshoots and the
        # backtracking crawls, measured on oll_v1 at 0.0024 per sweep)
        Iuu = a * a * Iaa + pa + np.maximum(-a * ga, 0.0)
        Iud = a * Iad
        Idd = Idd + pd_
        if model == "2pl":
            det = np.maximum(Iuu * Idd - Iud * Iud, 1e-12 * Iuu * Idd)
            du = (Idd * gu - Iud * gdd) / det
            dd = (Iuu * gdd - Iud * gu) / det
            # projected Newton: an item held at its discrimination bound moves
            # its intercept alone (the joint step assumes log a moves too and
            # overshoots d; measured on oll_v1: items at a_max cycling in d)
            held = ((u >= hi_u - 1e-9) & (du > 0)) | ((u <= lo_u + 1e-9) & (du < 0))
            du = np.where(held, 0.0, du)
            dd = np.where(held, gdd / Idd, dd)
        else:  # 1pl: one log a per domain, d per item (block step ignoring the cross term)
            dd = gdd / Idd
            gk = np.bincount(item_domain, a * ga, minlength=K) - pa * (u[first] - priors.log_a_mean)
            Ik = np.bincount(item_domain, a * a * Iaa - Iud * Iud / Idd, minlength=K) + pa
            du = (gk / np.maximum(Ik, 1e-12))[item_domain]
        np.clip(du, -0.7, 0.7, out=du)
        np.clip(dd, -3.0, 3.0, out=dd)
        step = np.ones_like(a)
        a_new = np.exp(np.clip(u + step * du, lo_u, hi_u))
        d_new = np.clip(d + step * dd, -priors.d_max, priors.d_max)
        f1 = _mstep_objective(a_new, d_new, stats, x, c, priors)
        for _b in range(backtrack + 1):
            diff = f1 - f0
            if model != "2pl":
                diff = np.bincount(item_domain, diff, minlength=K)[item_domain]
            bad = diff < -1e-10 * (1 + np.abs(f0))
            if not bad.any() or _b == backtrack:
                break
            step = np.where(bad, step * 0.5, step)
            # the objective is a sum per item: only the items still backtracking are evaluated
            # again (same values; a few stubborn items made every backtrack cost J x Q)
            sub = np.flatnonzero(bad)  # (1pl: whole domains)
            a_new[sub] = np.exp(np.clip(u[sub] + step[sub] * du[sub], lo_u, hi_u))
            d_new[sub] = np.clip(d[sub] + step[sub] * dd[sub], -priors.d_max, priors.d_max)
            f1[sub] = _mstep_objective(a_new[sub], d_new[sub], _rows(stats, sub), x, None if c is None else c[sub],
                                       priors)
        a = np.where(bad, a, a_new)
        d = np.where(bad, d, d_new)
        f0 = np.where(bad, f0, f1)  # the objective at the new items
    return a, d


def _rows(stats, sub):
    """The M-step's statistics of the items ``sub`` only."""
    out = {k: (None if stats.get(k) is None else stats[k][sub]) for k in ("t", "n1", "R", "Nq", "nq_rows")}
    out["nq"] = stats["nq"]
    return out


def _mstep_stride(nq, x, tol=1e-7):
    """The largest stride ``m`` (a power of 2) at which every m-th node integrates the M-step.

    A fine grid is needed for one LLM's narrow posterior (the E-step), not
    for the M-step of a complete domain without guessing: that integrates
    smooth item curves against ``nq``, the posterior mass summed over the
    LLMs (``t`` is exact), which is smooth wherever many LLMs spread; there
    every m-th node times ``m`` (the trapezoidal rule at spacing ``m h``)
    gives the same integrals.  The stride is accepted when the moments 0-4 of
    every domain's ``nq`` agree within ``tol`` times its mass (a few LLMs
    with sharp posteriors fail it and keep every node)."""
    Q = nq.shape[1]
    mass = np.maximum(nq.sum(axis=1), 1e-300)
    pw = np.vstack([x**p for p in range(5)])  # 5 x Q
    full = nq @ pw.T
    bound = tol * np.maximum(mass[:, None], np.abs(full))
    m = 1
    while (Q - 1) % (2 * m) == 0 and (Q - 1) // (2 * m) >= 48:
        mm = 2 * m
        sub = (nq[:, ::mm] * mm) @ pw[:, ::mm].T
        if np.any(np.abs(sub - full) > bound):
            break
        m = mm
    return m


def _floor_logprior(cd, priors):
    """The floors' ``Beta(guessing_alpha, guessing_beta)`` log-density, per domain (up to a constant)."""
    return (priors.guessing_alpha - 1) * np.log(cd) + (priors.guessing_beta - 1) * np.log1p(-cd)


def _mstep_floor(a, d, cd, stats, x, priors, item_domain, n_newton=3, backtrack=8):
    """Newton steps on every domain's floor ``c_k`` (shared by its items) given the E-step's counts.

    The expected complete-data log-likelihood is concave in ``c_k``
    (``P = c + (1 - c) sigma`` is linear in it), and so is the log of the
    Beta prior for ``alpha, beta >= 1``: a safeguarded 1-D Newton per domain
    (per item terms: :func:`mtlirt.estimators._kernels.floor_terms`)."""
    K = len(cd)
    NqM, rows = _nq_of(stats, len(a))
    R = stats["R"]
    kern = _em_kernels()
    terms = np.empty((len(a), 3))
    al, be = priors.guessing_alpha - 1.0, priors.guessing_beta - 1.0
    lo, hi = 1e-4, priors.guessing_max

    sig = np.empty((len(a), len(x)))
    kern.sigmoid_table(a, d, x, sig)

    def at(cdv):
        kern.floor_terms(sig, cdv[item_domain], NqM, rows, R, terms)
        return [np.bincount(item_domain, terms[:, m], minlength=K) for m in range(3)]

    cd = np.clip(np.asarray(cd, dtype=np.float64), lo, hi)
    fb, gb, Hb = at(cd)
    f0 = fb + _floor_logprior(cd, priors)
    for _ in range(n_newton):
        g = gb + al / cd - be / (1 - cd)
        H = Hb + al / cd**2 + be / (1 - cd) ** 2
        step = g / np.maximum(H, 1e-12)
        # at most half-way to a bound
        step = np.clip(step, -0.5 * (cd - lo), 0.5 * (hi - cd))
        t = np.ones(K)
        for _b in range(backtrack + 1):
            c1 = cd + t * step
            f1b, g1b, H1b = at(c1)
            f1 = f1b + _floor_logprior(c1, priors)
            bad = f1 < f0 - 1e-10 * (1 + np.abs(f0))
            if not bad.any():
                break
            t = np.where(bad, 0.5 * t, t)
        cd = np.where(bad, cd, c1)
        f0 = np.where(bad, f0, f1)
        gb = np.where(bad, gb, g1b)
        Hb = np.where(bad, Hb, H1b)
    return cd
