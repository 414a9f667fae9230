"""The sine centre of domain traits: the overall score of the seed paper's local baseline
(:mod:`mtlirt.estimators.paper`), the centre of its simulation design and of its error bootstrap's world."""

from __future__ import annotations

import numpy as np

from .paper_adam import AdamSettings, _Adam
from .paper_objective import _orient, _penalty_grads, _sines, _sphere


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
