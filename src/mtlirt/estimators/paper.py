"""The seed paper's own estimator (docs/model.md), with its global and local baselines.

Model and constraints, as published: per domain ``t`` a slope-intercept 2PL
``logit P = a_j theta_it + d_j`` with ``a_j in [0, 4]`` and ``d_j in [-4, 4]``;
every domain trait ``theta_t`` (length N) is centred, has norm ``sqrt(N)``
and ``|theta_it| <= 4``; one general trait ``theta_G`` (centred, norm
``sqrt(N)``, sign so that ``theta_G . sum_t theta_t >= 0``) is the overall
score.  Items constant over all observed responses are dropped first.  The
estimate minimises

    F = sum_t L_t / J_t  +  lambda * sum_t sin angle(theta_G, theta_t)

over items, domain traits and ``theta_G`` jointly, ``L_t`` the Bernoulli
negative log-likelihood of domain ``t`` over its observed responses and
``J_t`` its number of (kept) items, with
``lambda = C * max_t N / sqrt(min(N, J_t))`` (the largest term is that of the
smallest domain).  ``C`` is chosen by 5-fold cross-validation over
:data:`C_GRID`: folds split each LLM's observed responses within each domain
(shuffled, then cut into 5 near-equal parts, seed ``seed + 100003``); the
score of a fold is the held-out mean negative log-likelihood of each domain,
averaged over domains; a ``C`` counts only if its fits converged in every
fold; the smallest mean score wins, ties (means within a relative
:data:`TIE_RTOL`) to the smaller ``C``; the final fit uses all responses.
The start is spectral (``_spectral_start``).

Variants (``fit_paper(variant=...)``):

* ``"paper"`` -- the estimator above.
* ``"paper-global"`` -- ``lambda = inf``: one trait for all domains, each
  domain's loss still weighted by ``1 / J_t``; that trait is a domain trait,
  so it lies in the box.
* ``"paper-local"`` -- ``lambda = 0``: every domain alone; the overall score
  is the *sine centre*, the centred unit vector minimising
  ``sum_t sin angle(theta_G, theta_t)``.

Optimisers.  ``optimizer="adam"`` is the paper's, and gives the paper's
output: full-batch projected Adam (learning rate 0.01 halved every 200
steps, at most 10,000 steps, stop when the relative change of ``F`` falls
below 1e-7, gradients divided by the ``1/J_t``-weighted number of observed
responses, the best iterate kept; after every step each ``theta_t`` is
mapped back onto {mean 0, norm ``sqrt(N)``, box}, items clipped, ``theta_G``
re-normalised and oriented; the local baseline fits each domain by its own
Adam run and its sine centre by Adam with learning rate 0.03).  Every fit,
in every fold and for every ``C``, starts from the spectral start of its
own training responses, as the paper's code does.  Its stopping rule fires
early (on the paper's design after about a hundred steps, while ``F`` still
falls): the paper's estimates are those of an early-stopped Adam, not the
minimiser of ``F``.

``optimizer="fast"`` (default) *(ours)* reaches the exact minimiser of ``F``
(an Adam run without the early stop ends there: ``tests/test_paper.py``;
``docs/results.md``) far faster: each trait is written ``sqrt(N) Pz /
||Pz||`` (``P`` centres) so the sphere constraint disappears, and L-BFGS-B
minimises ``F`` over the ``z`` and the boxed items; entries of a trait that
reach the box are held at it and released when their Lagrangian gradient
points inward.  The sine penalty has a kink where a domain fuses onto
``theta_G`` (its group-lasso-like effect); the fast optimiser treats the
fused domains as an active set: a fused domain *is* ``theta_G`` (its
likelihood then moves ``theta_G``), a free domain whose sine falls below
1e-4 is fused when that does not raise ``F``, and a fused domain is split off
again when the tangent gradient of its loss exceeds ``lambda`` (the exact
optimality condition) unless a split from that same fused set already came
back to it without lowering ``F``.  Its departures from the paper's
procedure, which change where it starts, not the minimiser it reaches: it
starts with every domain fused (from the spectral ``theta_G`` and items),
and within each fold every ``C`` of the grid starts from the solution at
the previous ``C``.  Where ``theta_G`` (which the paper leaves unboxed)
leaves the box with domains fused on it, which their box forbids, it hands
over to the projected Adam on the same objective.

Deviation forced by real data: the paper's fold maker refuses an LLM with
fewer observed responses in a domain than folds; here such responses are
still dealt out (the first folds get them), and a fold's score averages over
the domains that have held-out responses in it.
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass

import numba
import numpy as np
from scipy.optimize import Bounds, minimize
from scipy.special import log_expit

from ..errors import InputError
from ..numerics.vecmath import exp_nonpos
from .blas import blas_threads
from .pointfit import PointFit

__all__ = ["C_GRID", "TIE_RTOL", "VARIANTS", "AdamSettings", "deviation_variance", "fit_paper",
           "make_folds", "sine_centre"]

#: The paper's grid of ``C`` (its MMLU application).
C_GRID = (0.001, 0.005, 0.01, 0.02, 0.05, 0.075, 0.09, 0.1, 0.11, 0.125, 0.2, 0.5, 1.0, 1.5)
VARIANTS = ("paper", "paper-global", "paper-local")
BOUND = 4.0  # |theta|, a (upper), |d|
_FUSE_SINE = 1e-4
#: Relative tolerance within which two C's mean held-out losses tie (the smaller C wins).
TIE_RTOL = 1e-6
# L-BFGS-B (ftol, gtol): tight for a fit, looser inside the cross-validation (held-out
# losses to ~1e-7 are all it compares)
_TOL = {"final": (1e-15, 1e-9), "cv": (1e-10, 1e-6)}


@dataclass(frozen=True)
class AdamSettings:
    """The paper's projected-Adam settings (its MMLU application)."""

    lr: float = 0.01
    decay: float = 0.5
    decay_steps: int = 200
    max_iter: int = 10_000
    tol: float = 1e-7
    centre_lr: float = 0.03  # the sine centre of the local baseline


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


# ---------------------------------------------------------------------------
# the paper's optimiser: projected Adam
# ---------------------------------------------------------------------------
class _Adam:
    def __init__(self, x):
        self.m = np.zeros_like(x)
        self.v = np.zeros_like(x)

    def step(self, x, grad, k, lr):
        self.m = 0.9 * self.m + 0.1 * grad
        self.v = 0.999 * self.v + 0.001 * grad * grad
        mh = self.m / (1 - 0.9 ** k)
        vh = self.v / (1 - 0.999 ** k)
        return x - lr * mh / (np.sqrt(vh) + 1e-8)


def _adam(obj: _Objective, lam, start, s: AdamSettings):
    """The paper's projected Adam from ``start``; returns (theta, a, d, g, F, n_iter, converged)."""
    theta, a, d, g = (np.array(x, dtype=np.float64) for x in start)
    active = obj.obs.any(axis=0)
    opt = [_Adam(theta), _Adam(a), _Adam(d), _Adam(g)]
    scale = 1.0 / obj.weighted_n
    best, best_f = None, np.inf
    prev = np.inf
    converged = False
    k = 0
    for k in range(1, s.max_iter + 1):
        f = obj.lik(theta, a, d)
        gth = obj.gth.T.copy()
        ga, gd = obj.ga.copy(), obj.gd.copy()
        gg = np.zeros_like(g)
        if lam > 0:
            f += lam * _sines(g, theta)[0].sum()
            pt, gg = _penalty_grads(g, theta, lam)
            gth += pt
        if not np.isfinite(f):
            break
        if f < best_f:
            best_f, best = f, (theta.copy(), a.copy(), d.copy(), g.copy())
        rel = np.inf if not np.isfinite(prev) else abs(f - prev) / max(1.0, abs(prev))
        if rel < s.tol:
            converged = True
            break
        prev = f
        if k == s.max_iter:
            break
        lr = s.lr * s.decay ** ((k - 1) // s.decay_steps)
        theta = opt[0].step(theta, gth * scale, k, lr)
        a = opt[1].step(a, ga * scale, k, lr)
        d = opt[2].step(d, gd * scale, k, lr)
        if lam > 0:
            g = opt[3].step(g, gg * scale, k, lr)
        theta = np.stack([_box_sphere(row, BOUND) for row in theta])
        a = np.clip(a, 0.0, BOUND)
        d = np.clip(d, -BOUND, BOUND)
        a[~active] = 0.0
        d[~active] = 0.0
        if lam > 0:
            g = _orient(_sphere(g), theta)
    theta, a, d, g = best
    return theta, a, d, _orient(g, theta), best_f, k, converged


def sine_centre(theta, *, start=None, optimizer="fast", settings: AdamSettings = AdamSettings()):
    """The sine centre of domain traits: the centred vector ``g`` (norm ``sqrt(N)``)
    minimising ``sum_t sin angle(g, theta_t)``, oriented so ``g . sum_t theta_t >= 0``.

    Parameters
    ----------
    theta : ndarray (K, N)
    start : ndarray (N,), optional
        Default: the leading right singular vector of ``theta``.
    optimizer : {"fast", "adam"}
        ``fast`` *(ours)*: majorise-minimise (each sine bounded above by a
        quadratic, so each step is the leading eigenvector of
        ``sum_t u_t u_t' / sin_t``; monotone), to a relative change of 1e-13;
        ``adam``: the paper's projected Adam (learning rate 0.03).

    Returns
    -------
    g : ndarray (N,)
    n_iter : int
    converged : bool
    """
    theta = np.asarray(theta, dtype=np.float64)
    if start is None:
        start = np.linalg.svd(theta, full_matrices=False)[2][0]
    g = _orient(_sphere(np.asarray(start, dtype=np.float64)), theta)
    if optimizer == "adam":
        opt = _Adam(g)
        best, best_f, prev = g, np.inf, np.inf
        K = theta.shape[0]
        for k in range(1, settings.max_iter + 1):
            f = _sines(g, theta)[0].sum()
            if f < best_f:
                best_f, best = f, g.copy()
            if f <= settings.tol:
                return _orient(best, theta), k, True
            rel = np.inf if not np.isfinite(prev) else abs(f - prev) / max(1.0, abs(prev))
            if rel < settings.tol:
                return _orient(best, theta), k, True
            prev = f
            _, gg = _penalty_grads(g, theta, 1.0)
            lr = settings.centre_lr * settings.decay ** ((k - 1) // settings.decay_steps)
            g = _orient(_sphere(opt.step(g, gg / K, k, lr)), theta)
        return _orient(best, theta), settings.max_iter, False
    U = theta / np.linalg.norm(theta, axis=1, keepdims=True)
    f_old = np.inf
    for k in range(1, 10_001):
        s, _ = _sines(g, theta)
        f = s.sum()
        if f_old - f <= 1e-13 * max(1.0, f):
            return _orient(g, theta), k, True
        f_old = f
        if s.min() < 1e-12:  # on a domain trait: the majoriser is infinite there
            return _orient(g, theta), k, True
        W = U / np.sqrt(s)[:, None]
        _, _, Vt = np.linalg.svd(W, full_matrices=False)
        g_new = _orient(_sphere(Vt[0]), theta)
        if _sines(g_new, theta)[0].sum() > f:
            return _orient(g, theta), k, True
        g = g_new
    return _orient(g, theta), 10_000, False


def deviation_variance(correct, observed, domain_slices, centre, a, d, *, leverage=None, nodes=15, grid=41,
                       floor=1e-3):
    """Variance ``psi_t = alpha_t^2`` of each domain's deviations from a centre: its posterior mean.

    With ``theta_it = centre_it + delta_it``, ``delta_it ~ N(0, alpha_t^2)``,
    each domain's marginal likelihood of its observed answers (the deviation
    integrated out by Gauss-Hermite quadrature over ``nodes`` points, items
    fixed at ``a``, ``d``) is evaluated on ``grid`` values of the deviation's
    sine ``alpha_t`` in ``[0, 1]``, and ``psi_t`` is the posterior mean of
    ``alpha_t^2`` under a uniform ``alpha_t`` (the paper's design draws
    ``|alpha_t|`` uniformly).  Exact where moments of the likelihood score lose
    large deviations to the logistic's curvature; near 0 for a domain that sits
    on its centre when its answers say so, and not 0 (as a maximum-likelihood
    estimate would be) when they cannot tell.  A centre fitted to the same data
    follows a share ``h_t`` of the domain's own deviations, which the estimate
    loses; given ``leverage`` (the ``h_t``) it is divided by ``(1 - h_t)^2``,
    then floored at ``floor``.

    Parameters
    ----------
    correct, observed, domain_slices
        The data (``observed`` None when complete).
    centre : ndarray (N, K)
        Centres on the scale of the items.
    a, d : ndarray (J,)
        Slope-intercept items, ``logit P = a theta + d``.

    Returns
    -------
    numpy.ndarray
        ``K`` variances.
    """
    x, w = np.polynomial.hermite_e.hermegauss(nodes)
    lw = np.log(w / w.sum())
    alpha = np.linspace(0.0, 1.0, grid)
    trap = np.full(grid, alpha[1])  # trapezoid weights of the uniform prior
    trap[[0, -1]] /= 2
    out = np.empty(len(domain_slices))
    for k, s in enumerate(domain_slices):
        y = np.asarray(correct[:, s], dtype=np.float64)
        m = np.ones(y.shape) if observed is None else np.asarray(observed[:, s], dtype=np.float64)
        ak, dk = np.asarray(a[s], dtype=np.float64), np.asarray(d[s], dtype=np.float64)
        base = np.asarray(centre, dtype=np.float64)[:, k][:, None] * ak + dk
        loglik = np.empty(grid)
        for g, al in enumerate(alpha):
            t = np.empty((y.shape[0], nodes))
            for q in range(nodes):
                z = base + ak * (al * x[q])
                t[:, q] = (m * (y * log_expit(z) + (1.0 - y) * log_expit(-z))).sum(axis=1) + lw[q]
            top = t.max(axis=1)
            loglik[g] = (top + np.log(np.exp(t - top[:, None]).sum(axis=1))).sum()
        post = trap * np.exp(loglik - loglik.max())
        out[k] = (post * alpha**2).sum() / post.sum()
    if leverage is not None:
        out = out / (1.0 - np.clip(np.asarray(leverage, dtype=np.float64), 0.0, 0.5)) ** 2
    return np.maximum(out, floor)


# ---------------------------------------------------------------------------
# our optimiser: L-BFGS-B over z (theta = sqrt(N) Pz/|Pz|) with fused domains as an active set
# ---------------------------------------------------------------------------
def _box_map(Z, sign, N):
    """Domain traits from free vectors ``Z`` (rows) with the entries where
    ``sign != 0`` held at ``BOUND * sign``: the others are ``m + r u``,
    ``u`` the unit centred (over the free entries) direction of ``Z``, with
    ``m`` and ``r`` making the row sum 0 and its norm ``sqrt(N)``.
    Returns (theta, u, |centred Z|, r, free mask)."""
    M = (sign == 0).astype(np.float64)
    n = M.sum(axis=1, keepdims=True)
    held = BOUND * sign
    mu = (Z * M).sum(axis=1, keepdims=True) / n
    PZ = (Z - mu) * M
    nz = np.linalg.norm(PZ, axis=1, keepdims=True)
    U = PZ / nz
    m = -held.sum(axis=1, keepdims=True) / n
    r = np.sqrt(np.maximum(N - (held**2).sum(axis=1, keepdims=True) - n * m**2, 0.0))
    return M * (m + r * U) + held, U, nz, r, M


def _box_chain(GT, U, nz, r, M):
    """Gradient w.r.t. the free vectors ``Z`` of :func:`_box_map` from ``GT``, the gradient w.r.t. its traits."""
    W = r * GT * M  # d F / d u
    W = (W - W.sum(axis=1, keepdims=True) / M.sum(axis=1, keepdims=True)) * M
    return (W - U * (U * W).sum(axis=1, keepdims=True)) / nz


def _lbfgs(obj: _Objective, lam, theta, a, d, g, fused, sign, *, gsign=None, maxiter=3000, stop_sine=None,
           tol="final"):
    """Minimise ``F`` with the domains in ``fused`` equal to ``g``, the others
    free except their entries held at the box (``sign``, K x N in -1, 0, 1);
    ``gsign`` (N) holds entries of ``g`` at the box likewise (the global
    baseline, whose one trait is a domain trait; None: ``g`` is not boxed)."""
    N = obj.p.N
    K = theta.shape[0]
    free = np.flatnonzero(~fused)
    use_g = bool(fused.any()) or lam > 0
    nf = len(free)
    J = len(a)
    active = obj.obs.any(axis=0)
    rootN = math.sqrt(N)
    off = N if use_g else 0
    off_a = off + nf * N
    sg = sign[free]
    gs = (np.zeros(N) if gsign is None else np.asarray(gsign, dtype=np.float64))[None, :]
    stop_sine = np.zeros(K) if stop_sine is None else stop_sine
    free_box = np.full(off_a, np.inf)
    bounds = Bounds(np.concatenate([-free_box, np.zeros(J), np.where(active, -BOUND, 0.0)]),
                    np.concatenate([free_box, np.where(active, BOUND, 0.0), np.where(active, BOUND, 0.0)]))
    x0 = np.concatenate([g if use_g else np.empty(0), theta[free].ravel(), a, d])
    th = np.empty((K, N))

    def fun(x):
        Z = x[off:off_a].reshape(nf, N)
        aa, dd = x[off_a:off_a + J], x[off_a + J:]
        TF, U, nz, r, M = _box_map(Z, sg, N)
        th[free] = TF
        if use_g:
            TG, UG, nzG, rG, MG = _box_map(x[:N][None, :], gs, N)
            eG = TG[0] / rootN
            th[fused] = TG[0]
        f = obj.lik(th, aa, dd)
        G = obj.gth.T  # d F / d theta (K x N)
        GT = G[free]
        GG = G[fused].sum(axis=0) if use_g else None  # d F / d theta_G
        if lam > 0 and nf:
            c = np.clip(TF @ eG / rootN, -1.0, 1.0)
            s = np.sqrt(np.maximum(0.0, 1.0 - c * c))
            f += lam * s.sum()
            m = np.where(s > 1e-12, -lam * c / np.where(s > 1e-12, s, 1.0), 0.0)
            GT = GT + m[:, None] * (eG[None, :] - c[:, None] * TF / rootN) / rootN
            GG = GG + (m[:, None] * (TF / rootN - c[:, None] * eG[None, :])).sum(axis=0) / rootN
        out = np.empty_like(x)
        if use_g:
            out[:N] = _box_chain(GG[None, :], UG, nzG, rG, MG)[0]
        out[off:off_a] = _box_chain(GT, U, nz, r, M).ravel()
        out[off_a:off_a + J] = obj.ga
        out[off_a + J:] = obj.gd
        return f, out

    hit = [False]

    def stop_at_kink(xk):  # a free domain reaching theta_G: stop, the caller fuses it
        if lam > 0 and nf and (stop_sine[free] > 0).any():
            TF = _box_map(xk[off:off_a].reshape(nf, N), sg, N)[0]
            c = np.clip(TF @ _box_map(xk[:N][None, :], gs, N)[0][0] / N, -1.0, 1.0)
            if (1.0 - c * c < stop_sine[free]**2).any():
                hit[0] = True
                raise StopIteration

    res = minimize(fun, x0, jac=True, method="L-BFGS-B", bounds=bounds, callback=stop_at_kink,
                   options={"maxiter": maxiter, "maxcor": 20, "ftol": _TOL[tol][0], "gtol": _TOL[tol][1], "maxls": 40})
    x = res.x
    if use_g:
        g = _box_map(x[:N][None, :], gs, N)[0][0]
    th = np.empty((K, N))
    th[free] = _box_map(x[off:off_a].reshape(nf, N), sg, N)[0]
    if use_g:
        th[fused] = g
    a = x[off_a:off_a + J].copy()
    d = x[off_a + J:].copy()
    ok = res.status != 1 and not hit[0]  # 1: iteration limit; 2 (line search at round-off) is converged
    return th, a, d, g, float(res.fun), int(res.nit), bool(ok)


def _hold_release(X, G, sign, skip):
    """Box bookkeeping of the rows of ``X`` (not ``skip``) with the gradient ``G``: entries that left the
    box are held at its bound, held entries whose Lagrangian gradient points inward are released.
    Returns (sign, changed)."""
    sign = sign.copy()
    out = (np.abs(X) > BOUND + 1e-9) & (sign == 0) & ~skip[:, None]
    sign[out] = np.sign(X[out])
    release = np.zeros_like(out)
    for t in np.flatnonzero((sign != 0).any(axis=1) & ~out.any(axis=1)):
        F = sign[t] == 0
        A = np.column_stack([np.ones(F.sum()), X[t, F]])  # G + mu + nu theta = 0 on the free entries
        mu, nu = np.linalg.lstsq(A, -G[t, F], rcond=None)[0]
        L = G[t] + mu + nu * X[t]
        release[t] = (sign[t] != 0) & (sign[t] * L > 1e-8 * max(1.0, np.abs(G[t]).max()))
    sign[release] = 0
    return sign, bool(out.any() or release.any())


def _box_update(obj: _Objective, theta, a, d, g, fused, sign, lam, gsign=None):
    """Hold entries of the free domain traits (and, given ``gsign``, of ``g``) that left the box at
    its bound; release held entries whose Lagrangian gradient points inward.
    Returns (sign, gsign, changed)."""
    obj.lik(theta, a, d)
    G = obj.gth.T.copy()
    gg = G[fused].sum(axis=0)  # d F / d theta_G through the fused domains
    if lam > 0:
        pt, pg = _penalty_grads(g, theta, lam)
        G += pt
        gg = gg + pg
    sign, changed = _hold_release(theta, G, sign, fused)
    if gsign is not None:
        gs, g_changed = _hold_release(g[None, :], gg[None, :], gsign[None, :], np.zeros(1, dtype=bool))
        gsign, changed = gs[0], changed or g_changed
    return sign, gsign, changed


def _split_test(obj: _Objective, theta, a, d, g, fused, lam):
    """For each fused domain: the norm of the tangent gradient of its loss (e-units)
    minus ``lam``; positive means splitting it off lowers ``F``."""
    obj.lik(theta, a, d)
    G = math.sqrt(obj.p.N) * obj.gth.T
    eG = g / np.linalg.norm(g)
    V = G - G.mean(axis=1, keepdims=True)
    V = V - np.outer(V @ eG, eG)
    excess = np.linalg.norm(V, axis=1) - lam
    return np.where(fused, excess, -np.inf), V


def _fast(obj: _Objective, lam, start, *, fused=None, global_=False, tol="final"):
    """Our optimiser: returns (theta, a, d, g, F, n_iter, converged, fused).

    Without a warm-start ``fused`` set every domain starts fused (the smooth
    global problem); domains are then split off where the optimality test
    fails and fused where their sine vanishes, and box entries held or
    released, until nothing changes.  A split whose run comes back to the
    same fused set without lowering ``F`` ends the loop there (the gain the
    test promises is below the optimiser's resolution).  ``global_``: every
    domain fused for good, and ``theta_G`` (the one domain trait) in the box."""
    theta, a, d, g = (np.array(x, dtype=np.float64) for x in start)
    K = theta.shape[0]
    N = obj.p.N
    if global_:
        fused = np.ones(K, dtype=bool)
    elif lam == 0:
        fused = np.zeros(K, dtype=bool)
    elif fused is None:
        fused = np.ones(K, dtype=bool)
    fused = fused.copy()
    theta[fused] = g
    sign = np.where(np.abs(theta) >= BOUND - 1e-12, np.sign(theta), 0.0) * ~fused[:, None]
    gsign = np.where(np.abs(g) >= BOUND - 1e-12, np.sign(g), 0.0) if global_ else None
    n_iter = 0
    ok = True
    F = np.inf
    first_split = {}  # fused set -> F when a split was first tried from it
    for _ in range(40):
        theta, a, d, g, F, it, ok = _lbfgs(obj, lam, theta, a, d, g, fused, sign, gsign=gsign, tol=tol,
                                           stop_sine=np.full(K, _FUSE_SINE))
        n_iter += it
        sign, gsign, boxed = _box_update(obj, theta, a, d, g, fused, sign, lam, gsign)
        if boxed:
            theta = np.where(sign != 0, BOUND * sign, theta)
            if gsign is not None:
                g = np.where(gsign != 0, BOUND * gsign, g)
                theta[fused] = g
            continue
        if global_ or lam == 0:
            break
        changed = False
        s, _ = _sines(g, theta)
        cand = ~fused & (s < _FUSE_SINE)
        if cand.any() and not ok:  # stopped at a kink: fuse and go on
            fused |= cand
            theta[fused] = g
            sign[fused] = 0
            continue
        if cand.any():
            f2 = fused | cand
            th2 = theta.copy()
            th2[f2] = g
            s2 = sign * ~f2[:, None]
            t2 = _lbfgs(obj, lam, th2, a, d, g, f2, s2, tol=tol)
            n_iter += t2[5]
            if t2[4] <= F + 1e-12 * max(1.0, abs(F)):
                theta, a, d, g, F, _, ok = t2
                fused, sign = f2, s2
                changed = True
        excess, V = _split_test(obj, theta, a, d, g, fused, lam)
        split = excess > 1e-6 * max(1.0, lam)
        if split.any():
            key = fused.tobytes()
            if key in first_split and F >= first_split[key] - 1e-9 * max(1.0, abs(F)):
                break  # the last split came back here without lowering F
            first_split.setdefault(key, F)
            eG = g / math.sqrt(N)
            for t in np.flatnonzero(split):  # start 0.05 rad away, down the tangent gradient
                step = math.cos(0.05) * eG - math.sin(0.05) * V[t] / np.linalg.norm(V[t])
                theta[t] = _box_sphere(math.sqrt(N) * step, BOUND)
                sign[t] = np.where(np.abs(theta[t]) >= BOUND - 1e-12, np.sign(theta[t]), 0.0)
            fused &= ~split
            changed = True
        if not changed:
            break
    else:
        ok = False
    if np.abs(theta).max() > BOUND + 1e-9:
        # theta_G (unboxed) left the box with domains fused on it, which their box forbids: the
        # paper's projected Adam on the same objective (lam > 0 here: only fused domains can leave it)
        start = (np.stack([_box_sphere(r, BOUND) for r in theta]), np.clip(a, 0, BOUND), d, g)
        theta, a, d, g, F, it, ok = _adam(obj, lam, start, AdamSettings())
        n_iter += it
        fused = _sines(g, theta)[0] < 1e-7
    return theta, a, d, _orient(g, theta), F, n_iter, ok, fused


# ---------------------------------------------------------------------------
# one fit at a given lambda
# ---------------------------------------------------------------------------
def _solve(prob, obs, variant, lam, optimizer, start, fused=None, adam=AdamSettings(), tol="final"):
    """Fit ``variant`` at ``lam`` on the cells ``obs`` from ``start``."""
    obj = _Objective(prob, obs)
    if variant == "paper-global":
        if optimizer == "adam":
            # one domain spanning all items, each item keeping its 1/J_t weight
            th, a, d, _, F, it, ok = _adam(_Objective(prob, obs, one_trait=True), 0.0, start, adam)
            g = th[0]
        else:
            theta0 = np.repeat(start[0][:1], prob.K, axis=0)
            th, a, d, g, F, it, ok, _ = _fast(obj, 0.0, (theta0, start[1], start[2], start[0][0]), global_=True,
                                              tol=tol)
        theta = np.repeat(g[None, :], prob.K, axis=0)
        return theta, a, d, g, F, it, ok, np.ones(prob.K, dtype=bool)
    if variant == "paper-local":
        if optimizer == "adam":
            theta = start[0].copy()
            a, d = start[1].copy(), start[2].copy()
            F, it, ok = 0.0, 0, True
            for t in range(prob.K):  # each domain by its own Adam run, as the paper
                cols = np.flatnonzero(prob.dom == t)
                sub = _Problem.__new__(_Problem)
                sub.__dict__.update(prob.__dict__)
                sub.y, sub.dom, sub.w, sub.K = prob.y[:, cols], np.zeros(len(cols), dtype=np.int64), prob.w[cols], 1
                o = _Objective(sub, np.ascontiguousarray(obs[:, cols]))
                r = _adam(o, 0.0, (theta[t:t + 1], a[cols], d[cols], start[3]), adam)
                theta[t], a[cols], d[cols] = r[0][0], r[1], r[2]
                F += r[4]
                it = max(it, r[5])
                ok = ok and r[6]
        else:
            theta, a, d, _, F, it, ok, _ = _fast(obj, 0.0, start, tol=tol)
        g, _, ok_g = sine_centre(theta, optimizer=optimizer, settings=adam)
        return theta, a, d, g, F, it, ok and ok_g, _sines(g, theta)[0] < 1e-7
    if optimizer == "adam":
        theta, a, d, g, F, it, ok = _adam(obj, lam, start, adam)
        fz = _sines(g, theta)[0] < 1e-7
    else:
        theta, a, d, g, F, it, ok, fz = _fast(obj, lam, start, fused=fused, tol=tol)
    return theta, a, d, g, F, it, ok, fz


# ---------------------------------------------------------------------------
# cross-validation
# ---------------------------------------------------------------------------
def make_folds(mask, dom, K, n_folds=5, seed=0):
    """Fold of every observed cell (``-1`` elsewhere): each LLM's observed
    responses within each domain are shuffled and cut into ``n_folds``
    near-equal consecutive parts (``numpy.array_split``), domain by domain,
    LLM by LLM, from ``default_rng(seed + 100003)``."""
    rng = np.random.default_rng(seed + 100_003)
    fold = np.full(mask.shape, -1, dtype=np.int8)
    for t in range(K):
        cols = np.flatnonzero(dom == t)
        for i in range(mask.shape[0]):
            items = cols[mask[i, cols]]
            if items.size == 0:
                continue
            for f, part in enumerate(np.array_split(rng.permutation(items), n_folds)):
                fold[i, part] = f
    return fold


def _fold_path(prob, fold, f, variant, grid, optimizer, adam):
    """Held-out scores of one fold along the grid (warm starts with the fast optimiser)."""
    train = prob.mask(fold != f) & (fold >= 0)
    test = fold == f
    start = _spectral_start(prob, train)
    losses, oks = [], []
    cur, fz = start, None
    for C in grid:
        res = _solve(prob, train, variant, C * prob.lam_scale, optimizer, cur if optimizer == "fast" else start,
                     fused=fz, adam=adam, tol="cv")
        theta, a, d, g = res[:4]
        if optimizer == "fast":
            cur, fz = (theta, a, d, g), res[7]
        s, n = _domain_nll(prob.y, test, np.ascontiguousarray(theta.T), a, d, prob.dom, prob.K)
        has = n > 0
        losses.append(float(np.mean(s[has] / n[has])) if has.any() else np.nan)  # nothing held out: no loss
        oks.append(bool(res[6]))
    return losses, oks


def _choose(loss, converged, rtol=TIE_RTOL):
    """Index of the chosen C (grid ascending) from folds x grid held-out losses:
    among the C whose fits converged in every fold (all C when none did), the
    smallest C whose mean over the folds is within ``rtol`` (relative) of the
    smallest mean: fits that agree to the optimiser's precision (fused fits
    of neighbouring C, say) tie, and the tie goes to the smaller C.
    Returns (index, mean losses with NaN for the C left out, whether none converged)."""
    with warnings.catch_warnings():  # a fold that held nothing out (tiny data) has no loss and counts for nothing
        warnings.simplefilter("ignore", RuntimeWarning)
        fold_mean = np.nanmean(loss, axis=0)
    if np.isnan(fold_mean).all():
        raise InputError("too few responses to cross-validate the paper variant's C (no fold holds a response "
                         "out); fix C with --gamma")
    mean = np.where(converged.all(axis=0), fold_mean, np.nan)
    all_failed = bool(np.isnan(mean).all())
    if all_failed:
        mean = fold_mean
    best = np.nanmin(mean)
    return int(np.flatnonzero(mean <= best + rtol * abs(best))[0]), mean, all_failed


def _tune(prob, variant, grid, n_folds, seed, optimizer, adam, n_jobs):
    fold = make_folds(prob.mask(), prob.dom, prob.K, n_folds, seed)
    args = [(prob, fold, f, variant, grid, optimizer, adam) for f in range(n_folds)]
    if n_jobs == 1:
        out = [_fold_path(*x) for x in args]
    else:
        from joblib import Parallel, delayed

        out = Parallel(n_jobs=min(n_jobs, n_folds), backend="loky", inner_max_num_threads=1)(
            delayed(_fold_path)(*x) for x in args)
    loss = np.array([o[0] for o in out])
    conv = np.array([o[1] for o in out])
    chosen, mean, all_failed = _choose(loss, conv)
    return float(grid[chosen]), {
        "grid": [float(c) for c in grid], "loss": [None if np.isnan(v) else float(v) for v in mean],
        "fold_loss": loss.tolist(), "converged": conv.tolist(), "chosen": float(grid[chosen]),
        "n_folds": n_folds, "seed": seed, "all_failed": all_failed,
    }


# ---------------------------------------------------------------------------
# entry point
# ---------------------------------------------------------------------------
def fit_paper(correct, observed, domain_slices, *, variant="paper", C=None, grid=C_GRID, n_folds=5, seed=0,
              optimizer="fast", adam: AdamSettings = AdamSettings(), n_jobs=1) -> PointFit:
    """Fit the paper's estimator or one of its baselines.

    Parameters
    ----------
    correct : ndarray (N, J) of int8
        0/1 answers, 0 where unobserved.
    observed : ndarray (N, J) of bool or None
        Observation mask (``None``: complete); the loss runs over observed cells only.
    domain_slices : list of slice
        Contiguous item blocks of the domains.
    variant : {"paper", "paper-global", "paper-local"}
    C : float, optional
        Penalty constant of ``paper``; tuned by 5-fold cross-validation over
        ``grid`` when None.
    grid : sequence of float
        Candidate ``C`` (ascending), default the paper's :data:`C_GRID`.
    n_folds, seed
        Folds and the seed of their split (``default_rng(seed + 100003)``, as the paper's code).
    optimizer : {"fast", "adam"}
        Ours (default: the exact minimiser of ``F``) or the paper's projected
        Adam with its early stop (the paper's output).
    adam : AdamSettings
        Settings of the projected Adam.
    n_jobs : int
        Folds fitted in parallel (joblib processes; 1: in this process).

    Returns
    -------
    PointFit
        ``theta``: ``N x K`` domain traits ``theta_t``, each centred with norm ``sqrt(N)`` (mean 0,
        variance 1 over LLMs); a domain left without informative items takes the overall score.
        ``overall``: ``N`` general trait ``theta_G`` (mean 0, variance 1; for ``paper-local`` the
        sine centre of the domain traits). ``loadings``: ``K x 1``, ``cos angle(theta_G, theta_t)``
        (= their correlation, both being centred; 1 for fused domains). ``a, d``: items (``J``) on
        the scale of ``theta``; a dropped item that every observed LLM answered right gets ``a = 0,
        d = 4`` (the bound), all wrong ``a = 0, d = -4``, one nobody answered ``a = d = 0``; ``c``
        None (no guessing). ``centre``: ``theta_G`` in every column, the prediction for an LLM
        without responses in a domain (what a fused domain gets). ``C`` the penalty constant,
        ``rank`` 1, ``converged`` (the final fit and, with ``C`` tuned, at least one ``C`` in every
        fold), ``n_iter`` (of the final fit), ``seconds`` (``cv``, ``final``, ``total``).
        ``record``: ``lam`` (``lambda``: ``inf`` for ``paper-global``, 0 for ``paper-local``),
        ``cv`` (None, or ``grid``, ``loss``: mean held-out NLL per ``C``, NaN where a fold did not
        converge, ``fold_loss`` and ``converged``: folds x grid, ``chosen``, ``n_folds``,
        ``seed``), ``objective`` (``F`` at the estimate), ``optimizer``. ``extra``: ``variant``,
        ``fused`` (``K`` booleans: domain traits equal to ``theta_G``, fused by the fast optimiser;
        with Adam: sine below 1e-7, the round-off floor of ``sqrt(1 - cos^2)``) and
        ``dropped_items`` (the indices of the items left out: constant or never answered).
    """
    with blas_threads(1):  # small matrix products: threads cost more than they give
        return _fit_paper(correct, observed, domain_slices, variant=variant, C=C, grid=grid, n_folds=n_folds,
                          seed=seed, optimizer=optimizer, adam=adam, n_jobs=n_jobs)


def _fit_paper(correct, observed, domain_slices, *, variant, C, grid, n_folds, seed, optimizer, adam, n_jobs):
    t0 = time.perf_counter()
    if variant not in VARIANTS:
        raise InputError(f"unknown paper variant {variant!r}: expected one of {', '.join(VARIANTS)}")
    if optimizer not in ("fast", "adam"):
        raise InputError(f"unknown optimizer {optimizer!r}: expected 'fast' or 'adam'")
    prob = _Problem(correct, observed, domain_slices)
    if prob.K < (2 if variant == "paper" else 1):
        raise InputError(f"the {variant} estimator needs at least {2 if variant == 'paper' else 1} domains "
                         f"with non-constant items, got {prob.K}")
    if variant == "paper" and C is not None and (not np.isfinite(C) or C < 0):
        raise InputError(f"C must be a finite number >= 0, got {C}")
    grid = tuple(sorted(float(c) for c in grid))
    cv = None
    secs = {}
    if variant == "paper-global":
        C, lam = math.inf, math.inf
    elif variant == "paper-local":
        C, lam = 0.0, 0.0
    else:
        if C is None:
            t1 = time.perf_counter()
            C, cv = _tune(prob, variant, grid, n_folds, seed, optimizer, adam, n_jobs)
            secs["cv"] = time.perf_counter() - t1
        lam = C * prob.lam_scale
    t2 = time.perf_counter()
    mask = prob.mask()
    if variant == "paper-global":  # the start of one domain spanning all items
        start = _spectral_start(prob, mask, dom=np.zeros(len(prob.dom), dtype=np.int64), K=1)
    else:
        start = _spectral_start(prob, mask)
    theta, a, d, g, F, n_iter, ok, fused = _solve(prob, mask, variant, lam, optimizer, start, adam=adam)
    secs["final"] = time.perf_counter() - t2
    if cv is not None and cv["all_failed"]:
        ok = False
    return _assemble(prob, variant, C, lam, cv, theta, a, d, g, F, n_iter, ok, fused, optimizer,
                     {**secs, "total": time.perf_counter() - t0})


def _assemble(prob, variant, C, lam, cv, theta, a, d, g, F, n_iter, ok, fused, optimizer, secs) -> PointFit:
    """Back to all domains and items (the left-out ones filled in as documented), as a
    :class:`~mtlirt.estimators.pointfit.PointFit` (:func:`fit_paper`'s Returns)."""
    N = prob.N
    full = np.repeat(g[:, None], prob.K_all, axis=1)
    full[:, prob.domains] = theta.T
    fz = np.ones(prob.K_all, dtype=bool)
    fz[prob.domains] = fused
    a_all = np.zeros(prob.J_all)
    d_all = np.zeros(prob.J_all)
    a_all[prob.kept], d_all[prob.kept] = a, d
    d_all[prob.dropped] = prob.d_dropped
    cos = np.clip(full.T @ g / N, -1.0, 1.0)
    return PointFit(theta=full, overall=g.copy(), loadings=cos[:, None], a=a_all, d=d_all, c=None,
                    centre=np.repeat(g[:, None], prob.K_all, axis=1), converged=bool(ok), n_iter=int(n_iter),
                    seconds=secs, rank=1, C=float(C),
                    record={"cv": cv, "lam": float(lam), "objective": float(F), "optimizer": optimizer},
                    extra={"variant": variant, "fused": fz, "dropped_items": prob.dropped})
