"""Cubic Hermite interpolation of tabulated functions: one definition, in numpy, PyTensor and numba.

A function ``f`` tabulated with its derivative ``f'`` at the nodes ``lo + h q``
(``q = 0 .. G - 1``) is, on the segment from node ``q`` at the fraction ``t``::

    f(x) ~ h00(t) f_q + h01(t) f_q+1 + h10(t) f'_q + h11(t) f'_q+1

with the weights of :func:`weights` (C1, error ``O(h^4)``), summed by
:func:`combine`. :func:`hermite_np` and :func:`hermite_pt` continue the
function linearly outside the nodes, with the slope of the nearest end;
:func:`numba_versions` compiles the two for the numba kernels (the trait step
of :mod:`mtlirt.estimators.irt`; :func:`mtlirt.numerics.llm_side.table_value_kernel`,
the tables' value at a point, continued linearly, for the cell grids, the
pointwise log-likelihood and the domain-score draws of
:mod:`mtlirt.bayes.marginal`), which find the segment themselves.
"""

from __future__ import annotations

from functools import cache

import numpy as np

__all__ = ["combine", "hermite_np", "hermite_pt", "numba_versions", "weights"]


def weights(t, h):
    """The four weights ``(h00, h01, h10, h11)`` at the fraction ``t`` of a segment of length ``h``.

    Plain arithmetic, so the same lines serve numpy arrays, PyTensor tensors
    and numba scalars."""
    t2 = t * t
    t3 = t2 * t
    h00 = 2 * t3 - 3 * t2 + 1
    return h00, 1 - h00, (t3 - 2 * t2 + t) * h, (t3 - t2) * h


def combine(w, f0, f1, d0, d1):
    """The interpolant from the weights ``w`` of :func:`weights`, the values ``f0, f1`` and the
    derivatives ``d0, d1`` at the segment's two ends."""
    h00, h01, h10, h11 = w
    return h00 * f0 + h01 * f1 + h10 * d0 + h11 * d1


@cache
def numba_versions():
    """``(weights, combine)`` compiled by numba (imported here, on first use: it adds about a second to a
    process), for kernels that find the segment themselves.  ``fastmath=False`` said outright: without
    it a fast-math caller (the trait step's kernels) compiled them with its own flags, and numba's
    on-disk cache then gave that copy, which rounds differently, to every other caller."""
    import numba

    return numba.njit(cache=True, fastmath=False)(weights), numba.njit(cache=True, fastmath=False)(combine)


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
    Ff = F.reshape(-1)
    dFf = dF.reshape(-1)
    base = rows * G + i0
    val = combine(weights(u - i0, h), Ff[base], Ff[base + 1], dFf[base], dFf[base + 1])
    out_lo = x < lo
    out_hi = x > hi
    if out_lo.any() or out_hi.any():
        slope = np.where(out_hi, dFf[rows * G + G - 1], dFf[rows * G])
        val = val + (x - xc) * slope
    return val


def hermite_pt(Ff, dFf, rows, x, lo: float, h: float, G: int):
    """PyTensor version of :func:`hermite_np` (flat tables ``Ff``, ``dFf``); the segment index is
    disconnected from the gradient, which is the interpolant's own derivative."""
    import pytensor.tensor as pt
    from pytensor.gradient import disconnected_grad

    hi = lo + h * (G - 1)
    xc = pt.clip(x, lo, hi)
    u = (xc - lo) / h
    i0 = pt.clip(pt.cast(pt.floor(u), "int64"), 0, G - 2)
    i0 = pt.cast(disconnected_grad(i0), "int64")
    base = rows * G + i0
    val = combine(weights(u - i0, h), Ff[base], Ff[base + 1], dFf[base], dFf[base + 1])
    slope = pt.switch(pt.gt(x, hi), dFf[rows * G + (G - 1)], dFf[rows * G])
    return val + (x - xc) * slope
