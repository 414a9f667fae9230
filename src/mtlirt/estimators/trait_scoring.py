"""The traits given fixed items: the trait log-likelihood evaluators (:class:`TabulatedThetaLik`,
:class:`DenseThetaLik`), the vectorised MAP Newton step (:func:`theta_step`) and the MAP traits of every
LLM in every domain (:func:`score_theta`)."""

from __future__ import annotations

import numpy as np
from scipy.special import expit

from ..numerics import hermite
from ..numerics.llm_side import softplus
from .em_steps import _NO_MASK, _em_kernels
from .penalties import DEFAULT_PENALTIES, Penalties
from .response_data import ResponseData

__all__ = ["DenseThetaLik", "TabulatedThetaLik", "score_theta", "theta_likelihood", "theta_step"]


_NO_ROWS = np.zeros((0, 0))
_NO_CELLS = np.zeros(0, dtype=np.int64)
_NO_ITEMS = np.zeros(0, dtype=np.int32)  # item columns of cell lists: int32 (30M correct cells at the flagship)
_NO_PTR = np.zeros((0, 0), dtype=np.int64)
_NO_DOMAINS = np.zeros(0, dtype=np.bool_)


def _tab_derivs(*args):
    """:func:`mtlirt.estimators._kernels.tab_derivs` (numba, imported on first use)."""
    return _em_kernels().tab_derivs(*args)


def _csr(rows, cols, n):
    """Row pointer and columns, grouped by row (stable), of the cells ``(rows, cols)``."""
    order = np.argsort(rows, kind="stable")
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n), out=ptr[1:])
    return ptr, np.ascontiguousarray(cols[order], dtype=np.int32)


class TabulatedThetaLik:
    """Trait log-likelihood of every (LLM, domain) block by tabulation; guessing floors allowed.

    With ``P_ij = c_j + (1 - c_j) sigmoid(z_ij)``, ``z_ij = a_j theta_ik + d_j``
    and ``log(1 - P) = log(1 - c_j) - softplus(z)``::

        loglik_ik(theta) = sum_{j wrong} log(1 - c_j) - G_ik(theta) + sum_{j correct} log(c_j + exp(z_ij))

    (the floors may differ within a domain: the pooled fit's one domain has the
    single-domain fits' floors), with ``G_ik(t) = r_ik G_k(t) - sum_{j
    unobserved} softplus(a_j t + d_j)``: ``G_k = sum_j softplus`` over the
    domain's items and its derivatives are tabulated on a grid and interpolated
    by cubic Hermite polynomials; unobserved cells of observed blocks are
    subtracted exactly.  Without a floor the correct cells' sum is ``theta s_ik
    + sum_j y_ij d_j`` (``s_ik = sum_j a_j y_ij``), so a Newton step costs
    ``O(N K)``; with one, each correct cell adds ``a_j / (1 + c_j exp(-z))`` to
    the gradient (one exponential per correct cell, none per wrong one).  The
    Fisher information ``sum_j a_j^2 (1 - c_j) s^2 (1 - s) / P`` (observed
    information without a floor) depends on the answers only through which
    cells are observed: tabulated too.  Use :meth:`set_items` first.
    """

    kind = "tabulated"

    def __init__(self, data: ResponseData, cells=None, *, by_llm=None, grid_step=0.05, theta_max=6.0):
        self.data = data
        self.N, self.K, self.J = data.N, data.K, data.J
        self.item_domain = data.item_domain
        self.rw = None if data.row_obs is None else data.row_obs.astype(np.float64)
        if by_llm is not None and len(by_llm[1]):  # the cells already listed by LLM: (pointers, columns)
            self.uptr, self.uj = by_llm
            self.n_cells = len(self.uj)
        elif cells is not None and len(cells[0]):
            self.uptr, self.uj = _csr(np.asarray(cells[0], dtype=np.int64), np.asarray(cells[1]), self.N)
            self.n_cells = len(self.uj)
        else:
            self.uptr = np.zeros(self.N + 1, dtype=np.int64)
            self.uj = _NO_ITEMS
            self.n_cells = 0
        # the floors per item; a domain is floored when any of its items has one (its correct
        # cells are then summed cell by cell)
        self.citem = np.zeros(self.J) if data.c is None else np.asarray(data.c, dtype=np.float64)
        self.floored = np.bincount(self.item_domain, self.citem > 0, minlength=self.K) > 0
        if self.floored.any():  # the correct cells of the domains with a floor, by LLM and domain
            self.ykptr, self.yj = _em_kernels().correct_cells(
                data.correct, _NO_MASK if data.obs is None else data.obs, self.floored[self.item_domain],
                self.item_domain, self.K)
        else:
            self.ykptr = _NO_PTR
            self.yj = _NO_ITEMS
        self.grid = np.arange(-theta_max, theta_max + 1e-9, grid_step)
        self.h = float(self.grid[1] - self.grid[0])

    def set_items(self, a, d):
        """Tabulate ``G_k``, its derivatives and the information; compute ``s_ik`` and the constant terms
        (nothing to do when the items are the ones set last)."""
        data = self.data
        a = np.asarray(a, dtype=np.float64)
        d = np.asarray(d, dtype=np.float64)
        if getattr(self, "a", None) is not None and np.array_equal(a, self.a) and np.array_equal(d, self.d):
            return
        M, K = len(self.grid), self.K
        T = np.empty((6, M, K))
        s = np.empty((self.N, K))
        starts = np.array([sl.start for sl in data.slices], dtype=np.int64)
        stops = np.array([sl.stop for sl in data.slices], dtype=np.int64)
        _em_kernels().item_tables(self.grid, a, d, self.citem, starts, stops, self.floored, T)
        # the answers' sums in float64 (float32 ones were off by 4e-6 in s on 40-item domains), one
        # pass over the int8 answers: s = Y a and Y d without a floor; with one, the wrong answers'
        # sum of log(1 - c_j) (s is 0: the correct cells are summed one by one)
        lc = np.log1p(-self.citem)
        fl_items = self.floored[self.item_domain]
        w1 = np.where(fl_items, 0.0, a)
        w2 = np.where(fl_items, lc, d)
        y_w2 = np.empty((self.N, K))
        o_w2 = np.empty((self.N, K)) if self.floored.any() else np.zeros((0, 0))
        _em_kernels().block_sums(data.correct, _NO_MASK if data.obs is None else data.obs, starts, stops, w1, w2,
                                 s, y_w2, o_w2)
        const = y_w2
        if self.floored.any():
            const[:, self.floored] = o_w2[:, self.floored] - y_w2[:, self.floored]
        self.T = [np.ascontiguousarray(T[m]).ravel() for m in range(6)]
        self.s = s
        self.const = const
        self.a = a.copy()
        self.d = d.copy()

    def _interp(self, theta, f, df):
        """The table ``f`` (with derivative ``df``) at ``theta`` (N x K), as :func:`_tab_derivs_py` finds it."""
        pos = (theta - self.grid[0]) / self.h
        g = np.clip(np.floor(pos).astype(np.int64), 0, len(self.grid) - 2)
        i0 = g * self.K + np.arange(self.K)
        i1 = i0 + self.K
        return hermite.combine(hermite.weights(np.clip(pos - g, 0.0, 1.0), self.h), f[i0], f[i1], df[i0], df[i1])

    def theta_derivs(self, theta, rows=None, observed=False, domains=None):
        """Gradient and Fisher information of the log-likelihood in every ``theta_ik``
        (``observed``: the observed information instead, the same without a floor; it
        may be negative with one); with ``rows``, ``theta`` holds those LLMs' traits only;
        with ``domains`` (K bools), only those domains' (the others' are 0)."""
        theta = np.ascontiguousarray(theta, dtype=np.float64)
        rows = _NO_CELLS if rows is None else np.ascontiguousarray(rows, dtype=np.int64)
        kact = _NO_DOMAINS if domains is None else np.ascontiguousarray(domains, dtype=np.bool_)
        T = self.T
        g, fisher, obs = _tab_derivs(theta, rows, self.s, self.grid[0], self.h, T[1], T[2], T[3], T[4], T[5],
                                     self.rw if self.rw is not None else _NO_ROWS, self.a, self.d, self.citem,
                                     self.item_domain, self.uptr, self.uj, self.ykptr, self.yj, kact)
        return g, (obs if observed else fisher)

    def newton(self, theta, *, prec, bound, centre, weight, tol, max_newton, domains):
        """:func:`theta_step` on the tables, one fused loop per LLM
        (:func:`mtlirt.estimators._kernels.theta_newton`); returns the traits and the information."""
        theta = np.ascontiguousarray(theta, dtype=np.float64)
        kact = _NO_DOMAINS if domains is None else np.ascontiguousarray(domains, dtype=np.bool_)
        if weight is None or centre is None:
            centre = weight = _NO_ROWS
        else:
            centre = np.ascontiguousarray(np.broadcast_to(centre, theta.shape), dtype=np.float64)
            weight = np.ascontiguousarray(np.broadcast_to(np.asarray(weight, dtype=np.float64), theta.shape))
        T = self.T
        return _em_kernels().theta_newton(theta, self.s, self.grid[0], self.h, T[1], T[2], T[3], T[4], T[5],
                                          self.rw if self.rw is not None else _NO_ROWS, self.a, self.d, self.citem,
                                          self.item_domain, self.uptr, self.uj, self.ykptr, self.yj, kact,
                                          float(prec), float(bound), centre, weight, float(tol), int(max_newton))

    def theta_loglik(self, theta):
        """Log-likelihood of every (LLM, domain) block at ``theta`` (N x K)."""
        theta = np.ascontiguousarray(theta, dtype=np.float64)
        G0 = self._interp(theta, self.T[0], self.T[1])
        if self.rw is not None:
            G0 *= self.rw
        kern = _em_kernels()
        if self.n_cells:
            G0 -= kern.cell_sums(theta, self.uptr, self.uj, self.a, self.d, self.citem, self.item_domain, False)
        out = theta * self.s + self.const - G0
        if len(self.yj):
            out += self._correct_sums(theta)
        return out

    def _correct_sums(self, theta):
        """``sum log(c_j + exp(z_ij))`` over the correct cells of the floored blocks (N x K)."""
        ptr = np.append(self.ykptr[:, 0], self.ykptr[-1, -1]) if self.N else np.zeros(1, dtype=np.int64)
        return _em_kernels().cell_sums(theta, ptr, self.yj, self.a, self.d, self.citem, self.item_domain, True)


class DenseThetaLik:
    """Trait log-likelihood on dense per-domain blocks (mask, guessing). ``O(N J)`` per call.

    Computed in float64 (the Newton steps are iterated to 1e-8)."""

    kind = "dense"

    def __init__(self, data: ResponseData):
        self.data = data
        self.N, self.K, self.J = data.N, data.K, data.J
        self.item_domain = data.item_domain

    def set_items(self, a, d):
        self._a = np.asarray(a, dtype=np.float64)
        self._d = np.asarray(d, dtype=np.float64)

    def _block(self, k, theta_col, want_ll=False, rows=None, observed=False):
        """Residual ``r = dl/dz``, weight ``w`` (Fisher information in ``z``, or the observed
        one) and, optionally, the log-likelihood of every cell of domain ``k`` (float64)
        (of the LLMs ``rows`` only, if given)."""
        data = self.data
        sl = data.slices[k]
        Z = np.multiply.outer(theta_col, self._a[sl])
        Z += self._d[sl]
        sig = expit(Z)
        y = data.Y[:, sl] if rows is None else data.Y[rows, sl]
        ll = None
        if data.c is None:
            r = y - sig
            w = sig * (1 - sig)
            if want_ll:
                ll = y * Z - softplus(Z)
        else:
            c = data.c[sl]
            P = np.clip(c + (1 - c) * sig, 1e-12, 1 - 1e-12)
            dP = (1 - c) * sig * (1 - sig)
            q = dP / (P * (1 - P))
            r = (y - P) * q
            if observed:  # -d2 log P / dz2 = s (1 - s) - u / (1 + u)^2 with u = c exp(-z) where correct
                u = c * np.exp(-np.clip(Z, -700.0, 700.0))
                w = sig * (1 - sig) - y * u / ((1 + u) * (1 + u))
            else:
                w = dP * q
            if want_ll:
                ll = y * np.log(P) + (1 - y) * np.log1p(-P)
        if data.obs is not None:
            m = data.obs[:, sl] if rows is None else data.obs[rows, sl]
            r *= m
            w *= m
            if want_ll:
                ll *= m
        return r, w, ll

    def theta_derivs(self, theta, rows=None, observed=False, domains=None):
        n = theta.shape[0]
        g = np.zeros((n, self.K))
        info = np.zeros((n, self.K))
        for k, sl in enumerate(self.data.slices):
            if domains is not None and not domains[k]:
                continue
            r, w, _ = self._block(k, theta[:, k], rows=rows, observed=observed)
            ak = self._a[sl]
            g[:, k] = r @ ak
            info[:, k] = w @ (ak * ak)
        return g, info

    def theta_loglik(self, theta):
        out = np.empty((self.N, self.K))
        for k in range(self.K):
            out[:, k] = self._block(k, theta[:, k], want_ll=True)[2].sum(axis=1)
        return out


def theta_likelihood(data: ResponseData, *, max_sparse_share=0.25):
    """The evaluator of ``data``'s trait log-likelihoods (tabulated or dense), built on first use and kept with
    the data."""
    if data._theta_lik is None:
        data._theta_lik = _make_theta_lik(data, max_sparse_share)
    return data._theta_lik


def _make_theta_lik(data: ResponseData, max_sparse_share=0.25):
    if data.obs is None:
        return TabulatedThetaLik(data)
    if data._observed is None:  # complete but for held-out cells: those are the unobserved ones
        rows, cols = (np.asarray(v, dtype=np.int64) for v in data._exclude)
        keep = np.ones(len(rows), dtype=bool) if data.row_obs is None else data.row_obs[rows, data.item_domain[cols]]
        order = np.argsort(rows[keep] * data.J + cols[keep], kind="stable")
        return TabulatedThetaLik(data, (rows[keep][order], cols[keep][order].astype(np.int32)))
    from ._holes import unobserved_cells  # numba: loaded on first use

    rows = np.ones((data.N, data.K), dtype=bool) if data.row_obs is None else data.row_obs
    sizes = np.array([sl.stop - sl.start for sl in data.slices], dtype=np.int64)
    n_cells = int((rows @ sizes).sum()) - int(np.count_nonzero(data.obs))  # unobserved cells of observed blocks
    if n_cells > max_sparse_share * data.N * data.J:
        return DenseThetaLik(data)
    key = ("cells by LLM", tuple((sl.start, sl.stop) for sl in data.slices))
    if key not in data._copies:  # the lists of the mask's cells, shared by the fits of the same answers
        data._copies[key] = unobserved_cells(data.obs, 0, data.J, rows, data.item_domain)[:2]
    return TabulatedThetaLik(data, by_llm=data._copies[key])


# ---------------------------------------------------------------------------
# trait MAP
# ---------------------------------------------------------------------------
def theta_step(lik, theta, *, priors: Penalties = DEFAULT_PENALTIES, centre=None, weight=None,
               tol=1e-7, max_newton=50, return_info=False, domains=None):
    """Maximise every ``theta_ik`` given the items (1-D Newton, vectorised).

    Objective per LLM and domain: ``loglik_ik(theta) - theta^2 / (2 theta_sd^2)
    - weight / 2 * (theta - centre_ik)^2`` (concave without guessing).

    Parameters
    ----------
    lik
        Trait evaluator with items set (``set_items``).
    theta : ndarray (N, K)
        Starting values.
    centre : ndarray (N, K), optional
        Centre of the optional quadratic penalty.
    weight : ndarray broadcastable to (N, K), optional
        Its weight (per domain ``(K,)`` or per cell).
    domains : ndarray (K,) of bool, optional
        Only these domains' traits are moved (the others are kept, their
        information returned as 0): the evaluator then skips the others' cells.

    Returns
    -------
    theta : ndarray (N, K)
    info : ndarray (N, K)
        Only with ``return_info``: the log-likelihood information at the
        last-but-one iterate (for the MTL root finding).
    """
    prec = 1.0 / priors.theta_sd**2
    B = priors.theta_max
    if getattr(lik, "kind", None) == "tabulated":  # the same steps, one fused loop per LLM
        th, info = lik.newton(theta, prec=prec, bound=B, centre=centre, weight=weight, tol=tol,
                              max_newton=max_newton, domains=domains)
    else:
        th, info = _theta_step_arrays(lik, theta, prec, B, centre, weight, tol, max_newton, domains)
    return (th, info) if return_info else th


def _theta_step_arrays(lik, theta, prec, B, centre, weight, tol, max_newton, domains):
    """:func:`theta_step` by whole-array steps over the LLMs still moving (any evaluator)."""
    th = np.array(theta, dtype=np.float64, copy=True)
    # safeguarded Newton: the maximiser is bracketed by the iterates (concave
    # objective: above where the gradient is positive, below where negative),
    # and a step moves at most half-way to the far end of the bracket.  Plain
    # Newton (steps capped at +-1) cycled between two points on one oll_v1
    # cell (a steep item: curvature 3 at the iterate, far more at the root),
    # so every call there ran to max_newton.
    # Only the LLMs whose step is still above ``tol`` in some domain are iterated
    # (their traits are independent given the items); a finished LLM keeps its
    # last iterate and the information there.
    lo = np.full_like(th, -B)
    hi = np.full_like(th, B)
    penal = centre is not None and weight is not None
    if penal:
        centre = np.broadcast_to(centre, th.shape)
        weight = np.broadcast_to(np.asarray(weight, dtype=np.float64), th.shape)
    info = np.zeros_like(th)
    act = np.arange(th.shape[0])
    for _ in range(max_newton):
        full = len(act) == th.shape[0]
        x = th if full else th[act]
        # Newton on the observed information (quadratic convergence; with a floor Fisher
        # scoring converged linearly: 27 evaluations instead of 8 from 0 on the realistic
        # scenario, 1,000 x 1,405), kept >= 0: where the log-likelihood is convex the
        # bracket bounds the step
        g, inf = lik.theta_derivs(x, rows=None if full else act, observed=True, domains=domains)
        np.maximum(inf, 0.0, out=inf)
        info[act] = inf
        g -= prec * x
        tot = inf + prec
        if penal:
            g -= weight[act] * (x - centre[act])
            tot += weight[act]
        lo_a, hi_a = lo[act], hi[act]
        np.copyto(lo_a, x, where=g > 0)
        np.copyto(hi_a, x, where=g < 0)
        lo[act], hi[act] = lo_a, hi_a
        cap = np.minimum(0.5 * (hi_a - lo_a), 1.0)
        new = x + np.clip(g / tot, -cap, cap)
        np.clip(new, -B, B, out=new)
        if domains is not None:
            new[:, ~domains] = x[:, ~domains]
        step = np.max(np.abs(new - x), axis=1)
        th[act] = new
        act = act[step >= tol]
        if not len(act):
            break
    return th, info


def score_theta(data: ResponseData, a, d, theta0=None, *, priors: Penalties = DEFAULT_PENALTIES):
    """MAP traits of every LLM in every domain given internal-scale items.

    Returns
    -------
    theta : ndarray (N, K)
        Internal scale.
    info : ndarray (N, K)
        Fisher information of the log-likelihood at ``theta`` (no prior).
    """
    lik = theta_likelihood(data)
    lik.set_items(a, d)
    th0 = np.zeros((data.N, data.K)) if theta0 is None else theta0
    th = theta_step(lik, th0, priors=priors)
    info = lik.theta_derivs(th)[1]
    return th, info
