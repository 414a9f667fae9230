"""Cubic Hermite interpolation of tabulated functions (numpy and PyTensor):
how the fixed-items likelihood tables (:mod:`mtlirt.bayes.fixed_items`) are
evaluated by the model, the quadrature (:mod:`mtlirt.bayes.marginal`) and the
diagnostics. A leaf module."""

from __future__ import annotations

import numpy as np

__all__ = ["hermite_np", "hermite_pt"]


def hermite_np(F: np.ndarray, dF: np.ndarray, rows: np.ndarray, x: np.ndarray, lo: float, h: float) -> np.ndarray:
    """Evaluate tabulated functions by cubic Hermite interpolation (numpy).

    Parameters
    ----------
    F, dF : ndarray (P, G)
        Values and derivatives on the grid ``lo + h * arange(G)``.
    rows : ndarray of int
        Table row for each element of ``x`` (broadcastable to ``x``).
    x : ndarray
        Points; outside the grid the function continues linearly.
    lo, h : float

    Returns
    -------
    ndarray like ``x``.
    """
    G = F.shape[1]
    hi = lo + h * (G - 1)
    rows = np.broadcast_to(rows, x.shape)
    xc = np.clip(x, lo, hi)
    u = (xc - lo) / h
    i0 = np.clip(np.floor(u).astype(np.int64), 0, G - 2)
    t = u - i0
    Ff = F.reshape(-1)
    dFf = dF.reshape(-1)
    base = rows * G + i0
    t2 = t * t
    t3 = t2 * t
    val = ((2 * t3 - 3 * t2 + 1) * Ff[base] + (t3 - 2 * t2 + t) * h * dFf[base]
           + (-2 * t3 + 3 * t2) * Ff[base + 1] + (t3 - t2) * h * dFf[base + 1])
    out_lo = x < lo
    out_hi = x > hi
    if out_lo.any() or out_hi.any():
        slope = np.where(out_hi, dFf[rows * G + G - 1], dFf[rows * G])
        val = val + (x - xc) * slope
    return val


def hermite_pt(Ff, dFf, rows, x, lo: float, h: float, G: int):
    """PyTensor version of :func:`hermite_np` (flat tables ``Ff``, ``dFf``)."""
    import pytensor.tensor as pt

    hi = lo + h * (G - 1)
    xc = pt.clip(x, lo, hi)
    u = (xc - lo) / h
    i0 = pt.clip(pt.cast(pt.floor(u), "int64"), 0, G - 2)
    i0 = pt.cast(pytensor_disconnected(i0), "int64")
    t = u - i0
    base = rows * G + i0
    t2 = t * t
    t3 = t2 * t
    val = ((2 * t3 - 3 * t2 + 1) * Ff[base] + (t3 - 2 * t2 + t) * h * dFf[base]
           + (-2 * t3 + 3 * t2) * Ff[base + 1] + (t3 - t2) * h * dFf[base + 1])
    slope = pt.switch(pt.gt(x, hi), dFf[rows * G + (G - 1)], dFf[rows * G])
    return val + (x - xc) * slope


def pytensor_disconnected(v):
    from pytensor.gradient import disconnected_grad

    return disconnected_grad(v)
