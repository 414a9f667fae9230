"""Our optimiser of the seed paper's objective (:mod:`mtlirt.estimators.paper`): L-BFGS-B over free vectors
``z`` (``theta = sqrt(N) Pz / ||Pz||``), box entries held and released, the domains fused onto ``theta_G`` as an
active set."""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import Bounds, minimize

from .paper_adam import AdamSettings, _adam
from .paper_objective import BOUND, _box_sphere, _Objective, _orient, _penalty_grads, _sines

_FUSE_SINE = 1e-4
# L-BFGS-B (ftol, gtol): tight for a fit, looser inside the cross-validation (held-out
# losses to ~1e-7 are all it compares)
_TOL = {"final": (1e-15, 1e-9), "cv": (1e-10, 1e-6)}


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
