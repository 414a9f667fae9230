"""One fit of a seed-paper variant (:mod:`mtlirt.estimators.paper`) at a given ``lambda``: the paper's
estimator, its global baseline (one trait) and its local baseline (every domain alone, then the sine centre), by
either optimiser."""

from __future__ import annotations

import numpy as np

from .paper_adam import AdamSettings, _adam
from .paper_fast import _fast
from .paper_objective import _Objective, _Problem, _sines
from .sine_centre import sine_centre


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
