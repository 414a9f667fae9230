"""The seed paper's problem (:mod:`mtlirt.estimators.paper`): the data reduced to informative items, the
objective ``F`` and its gradient (numba kernels), the maps onto its constraint set (centred, norm ``sqrt(N)``,
box) and the paper's spectral start."""

from __future__ import annotations

import math

import numba
import numpy as np

from ..errors import InputError
from ..numerics.vecmath import exp_nonpos

BOUND = 4.0  # |theta|, a (upper), |d|


# ---------------------------------------------------------------------------
# the data, reduced to informative items
# ---------------------------------------------------------------------------
class _Problem:
    """Kept items packed by domain, their domain codes and ``1/J_t`` weights."""

    def __init__(self, correct, observed, domain_slices):
        correct = np.asarray(correct)
        N, J = correct.shape
        if N < 3:
            raise InputError(f"the paper's estimator needs at least 3 LLMs, got {N}")
        obs = None if observed is None else np.asarray(observed, dtype=bool)
        n_obs = np.full(J, N) if obs is None else obs.sum(axis=0)
        n_right = correct.sum(axis=0, dtype=np.int64) if obs is None else (correct.astype(bool) & obs).sum(axis=0)
        keep = (n_right > 0) & (n_right < n_obs)
        dom_all = np.empty(J, dtype=np.int64)
        for k, s in enumerate(domain_slices):
            dom_all[s] = k
        self.K_all = len(domain_slices)
        self.J_all = J
        self.kept = np.flatnonzero(keep)
        self.dropped = np.flatnonzero(~keep)
        self.d_dropped = np.where(n_obs[~keep] == 0, 0.0, np.where(n_right[~keep] > 0, BOUND, -BOUND))
        counts = np.bincount(dom_all[self.kept], minlength=self.K_all)
        self.domains = np.flatnonzero(counts > 0)  # domains with informative items
        remap = np.full(self.K_all, -1)
        remap[self.domains] = np.arange(len(self.domains))
        self.N = N
        self.K = len(self.domains)
        self.y = np.ascontiguousarray(correct[:, self.kept], dtype=np.int8)
        self.obs = None if obs is None else np.ascontiguousarray(obs[:, self.kept])
        self.dom = remap[dom_all[self.kept]].astype(np.int64)
        self.J_t = counts[self.domains].astype(np.float64)
        self.w = 1.0 / self.J_t[self.dom]
        self.lam_scale = float(np.max(N / np.sqrt(np.minimum(N, self.J_t)))) if self.K else 0.0

    def mask(self, cells=None):
        """The observation mask of the kept items, ``cells`` (a mask) applied."""
        base = np.ones(self.y.shape, dtype=bool) if self.obs is None else self.obs
        return base if cells is None else base & cells


# ---------------------------------------------------------------------------
# kernels
# ---------------------------------------------------------------------------
@numba.njit(fastmath={"contract"}, error_model="numpy", cache=True)
def _loss_grad(y, m, theta, a, d, runs, run_w, gth, ga, gd):
    """Weighted NLL over the observed cells (``m`` true) and its gradients.

    ``runs`` (R x 3: first item, end, trait column) are contiguous item
    blocks sharing a trait column and a weight ``run_w`` (``1/J_t``).
    Fills ``gth`` (N x K), ``ga``, ``gd`` (zeroed first).  Per run, an
    elementwise loop (branch-free, it vectorises; exp of
    :mod:`mtlirt.bayes._vecmath`) fills buffers, and plain loops sum them in
    index order (no reassociation, so the bits do not depend on where the
    arrays sit in memory); one log per run of at most 512 items, the log of
    the product of ``1 + exp(-|z|)``."""
    N = y.shape[0]
    J = a.shape[0]
    gth[:] = 0.0
    ga[:] = 0.0
    gd[:] = 0.0
    r = np.empty(J)
    op = np.empty(J)
    li = np.empty(J)
    f = 0.0
    for i in range(N):
        yi = y[i]
        mi = m[i]
        for q in range(runs.shape[0]):
            j0, j1, t = runs[q, 0], runs[q, 1], runs[q, 2]
            w = run_w[q]
            th = theta[i, t]
            for j in range(j0, j1):  # elementwise: vectorises
                mm = np.float64(mi[j])
                z = a[j] * th + d[j]
                e = exp_nonpos(-abs(z))
                sg = 1.0 / (1.0 + e)
                yy = np.float64(yi[j])
                op[j] = 1.0 + mm * e
                li[j] = mm * (max(z, 0.0) - yy * z)
                r[j] = mm * w * ((sg if z >= 0.0 else e * sg) - yy)
            g = 0.0
            lin = 0.0
            for k0 in range(j0, j1, 512):  # the product of (1 + e) <= 2 per item stays finite
                prod = 1.0
                for j in range(k0, min(k0 + 512, j1)):
                    prod *= op[j]
                f += w * math.log(prod)
            for j in range(j0, j1):
                lin += li[j]
                g += r[j] * a[j]
                ga[j] += r[j] * th
                gd[j] += r[j]
            f += w * lin
            gth[i, t] += g
    return f


@numba.njit(cache=True)
def _domain_nll(y, cells, theta, a, d, dom, K):
    """Summed NLL and number of cells per domain over the cells in ``cells``."""
    N, J = y.shape
    s = np.zeros(K)
    n = np.zeros(K)
    for i in range(N):
        for j in range(J):
            if not cells[i, j]:
                continue
            t = dom[j]
            z = a[j] * theta[i, t] + d[j]
            s[t] += max(z, 0.0) + math.log1p(math.exp(-abs(z))) - y[i, j] * z
            n[t] += 1.0
    return s, n


@numba.njit(cache=True)
def _clipped_centred(v, scale, bound):
    """``clip(scale (v - m), -bound, bound)`` with ``m`` chosen (bisection) so it sums to 0."""
    lo = v.min() - bound / scale
    hi = v.max() + bound / scale
    out = np.empty_like(v)
    for _ in range(80):
        m = 0.5 * (lo + hi)
        s = 0.0
        for i in range(v.size):
            out[i] = min(max(scale * (v[i] - m), -bound), bound)
            s += out[i]
        if s > 0.0:
            lo = m
        else:
            hi = m
    m = 0.5 * (lo + hi)
    for i in range(v.size):
        out[i] = min(max(scale * (v[i] - m), -bound), bound)
    return out


@numba.njit(cache=True)
def _box_sphere(v, bound):
    """A point of {mean 0, norm sqrt(N), |x| <= bound} from ``v``: centred and
    scaled when that fits in the box, else a centred clip ``clip(s (v - m))``
    with the scale ``s`` found by bisection to give norm ``sqrt(N)``."""
    N = v.size
    c = v - v.mean()
    nrm = math.sqrt((c * c).sum())
    target = math.sqrt(N)
    if nrm < 1e-14:
        c = np.linspace(-1.0, 1.0, N)
        nrm = math.sqrt((c * c).sum())
    x = c * (target / nrm)
    if np.abs(x).max() <= bound + 1e-12:
        return x
    lo, hi = 0.0, 1.0
    while math.sqrt((_clipped_centred(v, hi, bound) ** 2).sum()) < target:
        hi *= 2.0
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        if math.sqrt((_clipped_centred(v, mid, bound) ** 2).sum()) < target:
            lo = mid
        else:
            hi = mid
    return _clipped_centred(v, hi, bound)


def _sphere(v):
    """Centre and scale a vector to norm ``sqrt(N)``."""
    c = v - v.mean()
    n = np.linalg.norm(c)
    if n < 1e-14:
        c = np.linspace(-1.0, 1.0, v.size)
        n = np.linalg.norm(c)
    return c * (math.sqrt(v.size) / n)


def _orient(g, theta):
    """``g`` with the sign that makes ``g . sum_t theta_t >= 0`` (theta: K x N)."""
    return -g if g @ theta.sum(axis=0) < 0 else g


def _sines(g, theta):
    """``sin angle(g, theta_t)`` for every row of ``theta`` (K x N) and the cosines."""
    ug = g / np.linalg.norm(g)
    U = theta / np.linalg.norm(theta, axis=1, keepdims=True)
    c = np.clip(U @ ug, -1.0, 1.0)
    return np.sqrt(np.maximum(0.0, 1.0 - c * c)), c


# ---------------------------------------------------------------------------
# the objective
# ---------------------------------------------------------------------------
class _Objective:
    """``F`` and its gradient on the cells ``obs``; ``one_trait``: every item on trait column 0."""

    def __init__(self, prob: _Problem, obs, one_trait=False):
        self.p = prob
        self.obs = obs
        cut = np.flatnonzero(np.diff(prob.dom)) + 1
        starts = np.concatenate([[0], cut])
        stops = np.concatenate([cut, [len(prob.dom)]])
        trait = np.zeros(len(starts), dtype=np.int64) if one_trait else prob.dom[starts]
        self.runs = np.column_stack([starts, stops, trait]).astype(np.int64)
        self.run_w = prob.w[starts].astype(np.float64)
        self.gth = np.empty((prob.N, 1 if one_trait else prob.K))
        self.ga = np.empty(len(prob.dom))
        self.gd = np.empty(len(prob.dom))
        self.weighted_n = float((obs * prob.w).sum())

    def lik(self, theta, a, d):
        """Weighted NLL at theta (K x N); gradients left in ``gth`` (N x K), ``ga``, ``gd``."""
        return _loss_grad(self.p.y, self.obs, np.ascontiguousarray(theta.T), a, d, self.runs, self.run_w,
                          self.gth, self.ga, self.gd)


def _penalty_grads(g, theta, lam):
    """Gradients of ``lam sum_t sin(g, theta_t)`` w.r.t. theta (K x N) and g; 0 where sin < 1e-12."""
    ng = np.linalg.norm(g)
    nt = np.linalg.norm(theta, axis=1)
    ug = g / ng
    U = theta / nt[:, None]
    c = np.clip(U @ ug, -1.0, 1.0)
    s = np.sqrt(np.maximum(0.0, 1.0 - c * c))
    m = np.where(s > 1e-12, -c / np.where(s > 1e-12, s, 1.0), 0.0)
    gt = lam * m[:, None] * (ug[None, :] - c[:, None] * U) / nt[:, None]
    gg = lam * (m[:, None] * (U - c[:, None] * ug[None, :])).sum(axis=0) / ng
    return gt, gg


# ---------------------------------------------------------------------------
# start
# ---------------------------------------------------------------------------
def _spectral_start(prob: _Problem, obs, dom=None, K=None):
    """The paper's start: per domain ``d = logit(item mean)`` and the leading singular
    pair of the scaled residuals gives ``theta_t`` and ``a_t``; ``theta_G`` the
    leading right singular vector of the stacked traits.  Returns (theta K x N, a, d, g)."""
    dom = prob.dom if dom is None else dom
    K = prob.K if K is None else K
    N = prob.N
    J = len(dom)
    cnt = obs.sum(axis=0)
    active = cnt > 0
    p = np.full(J, 0.5)
    p[active] = np.clip((prob.y * obs).sum(axis=0)[active] / cnt[active], 0.02, 0.98)
    d = np.clip(np.log(p / (1 - p)), -BOUND, BOUND)
    slope = np.maximum(p * (1 - p), 0.05)
    rate = np.where(active, cnt / N, 1.0)
    theta = np.empty((K, N))
    a = np.empty(J)
    for t in range(K):
        cols = np.flatnonzero(dom == t)
        R = obs[:, cols] * (prob.y[:, cols] - p[cols]) / slope[cols] / rate[cols]
        U, S, Vt = np.linalg.svd(R, full_matrices=False)
        th = math.sqrt(N) * U[:, 0]
        at = S[0] * Vt[0] / math.sqrt(N)
        if at.sum() < 0:
            th, at = -th, -at
        theta[t] = _box_sphere(th, BOUND)
        a[cols] = np.clip(at, 1e-4, BOUND)
    a[~active] = 0.0
    d[~active] = 0.0
    _, _, Vt = np.linalg.svd(theta, full_matrices=False)
    g = _orient(_sphere(Vt[0]), theta)
    return theta, a, d, g
