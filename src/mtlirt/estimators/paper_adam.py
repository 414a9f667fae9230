"""The seed paper's optimiser (:mod:`mtlirt.estimators.paper`): full-batch projected Adam with its early
stop, and its settings."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .paper_objective import BOUND, _box_sphere, _Objective, _orient, _penalty_grads, _sines, _sphere


@dataclass(frozen=True)
class AdamSettings:
    """The paper's projected-Adam settings (its MMLU application)."""

    lr: float = 0.01
    decay: float = 0.5
    decay_steps: int = 200
    max_iter: int = 10_000
    tol: float = 1e-7
    centre_lr: float = 0.03  # the sine centre of the local baseline


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
