"""The joint 1PL/2PL/3PL likelihood as one fused PyTensor Op (log density and gradient); the same
terms summed per cell and draw, value only, for a fit's pointwise log-likelihood (:func:`cell_logliks`).

The joint model's likelihood is a sum over the observed cells ``(i, j)`` of
``log P(y_ij)`` with ``x = a_j theta_{i,k(j)} + intercept_j``: for the 1PL
and 2PL ``y x - log(1 + exp(x))``, for the 3PL ``P(1) = g_j + (1 - g_j)
sigmoid(x)``.
Written as a PyTensor elementwise graph it costs a gather, an elementwise
pass and three scatter-adds per gradient. This module computes the value
and the whole gradient in one numba loop over the cells, several times faster
(``benchmarks/bench_bayes.py joint-cost`` times both):

* responses are grouped by *cell* ``(llm, domain)`` (CSR: ``ptr`` and the
  item of each response), so each cell's trait is loaded once and its
  gradient accumulated in a register;
* when a cell's items are one contiguous run (always so for complete data:
  items are stored grouped by domain) the inner loop runs over plain slices
  and vectorises (SIMD), with the exponential of :mod:`mtlirt.bayes._vecmath`
  (numba's ``math.exp`` is a scalar libm call that keeps LLVM from
  vectorising the loop);
* 2PL: ``log(1 + e)`` is summed as the log of a product, one ``log`` per
  cell; 3PL: one vectorised ``log`` per response (``P(y)`` itself).

The Op has a ``perform`` (any PyTensor backend that runs Python), a numba
implementation (nutpie, PyMC's default numba mode, MAP, ADVI) and a
gradient built from its own outputs, so PyTensor evaluates the kernel once
per log density and gradient. There is no JAX implementation: the numpyro
sampler uses the elementwise graph (``build_model(likelihood="elementwise")``).
"""

from __future__ import annotations

import math
from functools import cache

import numba
import numpy as np

from mtlirt.bayes._vecmath import exp_nonpos, log_pos, source_version

__all__ = ["bernoulli_logit_cells", "cell_layout", "cell_logliks", "kernel"]

_FM = {"reassoc", "contract", "arcp", "nsz"}  # no nnan/ninf: the selects below must stay


@numba.njit(fastmath=_FM, error_model="numpy", inline="always", cache=True)
def _terms2(x, yy):
    """One 2PL response: (``y x - max(x, 0)``, ``1 + exp(-|x|)``, d/d logit).

    Its log-likelihood is the first minus the log of the second; the callers
    sum the logs as the log of a product."""
    e = exp_nonpos(-abs(x))
    op = 1.0 + e
    s = 1.0 / op
    return yy * x - max(x, 0.0), op, yy - (s if x >= 0.0 else e * s)  # y - sigmoid(x)


@numba.njit(fastmath=_FM, error_model="numpy", inline="always", cache=True)
def _run(a, c, th, y, ga, gc):
    """One cell over a contiguous run of items: returns (d/d theta, log-lik);
    adds d/d a and d/d intercept into ``ga``, ``gc``. Vectorises."""
    g = 0.0
    prod = 1.0
    lin = 0.0
    for q in range(a.shape[0]):
        aq = a[q]
        li, op, r = _terms2(aq * th + c[q], np.float64(y[q]))
        prod *= op  # at most 2**len(run): the caller splits runs at 512
        lin += li
        g += r * aq
        ga[q] += r * th
        gc[q] += r
    return g, lin - math.log(prod)


@numba.njit(fastmath=_FM, error_model="numpy", inline="always", cache=True)
def _gathered(a, c, th, items, y, ga, gc, buf):
    """One cell whose items are not a contiguous run (missing responses)."""
    n = items.shape[0]
    g = 0.0
    prod = 1.0
    lin = 0.0
    for q in range(n):
        j = items[q]
        aq = a[j]
        li, op, r = _terms2(aq * th + c[j], np.float64(y[q]))
        prod *= op
        lin += li
        g += r * aq
        buf[q] = r
    for q in range(n):  # the scatter, apart: it does not vectorise
        j = items[q]
        ga[j] += buf[q] * th
        gc[j] += buf[q]
    return g, lin - math.log(prod)


_RUN = 512  # 2**512 < 1.8e308: the product of (1 + e) <= 2 per response stays finite


_P_MIN = 1e-300  # keeps the 3PL's log arguments normal numbers (a floor far below any accepted state)


@numba.njit(fastmath=_FM, error_model="numpy", inline="always", cache=True)
def _terms3(x, cq, yy):
    """One 3PL response: (log-lik, d/d logit, d/d guessing).

    ``p = c + (1 - c) sigmoid(x)``; ``y = 1``: ``log p``; ``y = 0``:
    ``log((1 - c) (1 - sigmoid(x)))``, one logarithm either way."""
    e = exp_nonpos(-abs(x))
    s = 1.0 / (1.0 + e)
    sig = s if x >= 0.0 else e * s
    sbar = e * s if x >= 0.0 else s  # 1 - sigmoid(x)
    omc = 1.0 - cq
    p = max(cq + omc * sig, _P_MIN)
    one = yy > 0.5
    lp = log_pos(max(p if one else omc * s, _P_MIN)) - (0.0 if one else max(x, 0.0))
    dx = omc * sig * sbar / p if one else -sig
    dc = sbar / p if one else -1.0 / max(omc, _P_MIN)
    return lp, dx, dc


@numba.njit(fastmath=_FM, error_model="numpy", inline="always", cache=True)
def _run3(a, c, gs, th, y, ga, gc, gg):
    """:func:`_run` for the 3PL (guessing ``gs``; its gradient into ``gg``)."""
    g = 0.0
    lin = 0.0
    for q in range(a.shape[0]):
        aq = a[q]
        lp, dx, dc = _terms3(aq * th + c[q], gs[q], np.float64(y[q]))
        lin += lp
        g += dx * aq
        ga[q] += dx * th
        gc[q] += dx
        gg[q] += dc
    return g, lin


@numba.njit(fastmath=_FM, error_model="numpy", inline="always", cache=True)
def _gathered3(a, c, gs, th, items, y, ga, gc, gg, buf, buf2):
    """:func:`_gathered` for the 3PL."""
    n = items.shape[0]
    g = 0.0
    lin = 0.0
    for q in range(n):
        j = items[q]
        aq = a[j]
        lp, dx, dc = _terms3(aq * th + c[j], gs[j], np.float64(y[q]))
        lin += lp
        g += dx * aq
        buf[q] = dx
        buf2[q] = dc
    for q in range(n):
        j = items[q]
        ga[j] += buf[q] * th
        gc[j] += buf[q]
        gg[j] += buf2[q]
    return g, lin


@numba.njit(fastmath=_FM, error_model="numpy", nogil=True, cache=True)
def kernel(theta, a, c, guess, ptr, items, y):
    """Log-likelihood and gradient of the 2PL or 3PL over the observed cells.

    Parameters
    ----------
    theta : float64 (n_cells,)
        Trait of each cell ``llm * K + domain``.
    a, c : float64 (J,)
        Discrimination and intercept of each item.
    guess : float64 (J,) or (0,)
        Guessing floor of each item (3PL), or empty (2PL).
    ptr : int (n_cells + 1,)
        Responses of cell ``m`` are ``ptr[m]:ptr[m + 1]``.
    items : int (n_responses,)
        Item of each response, ascending within a cell.
    y : int (n_responses,)
        0/1 responses.

    Returns
    -------
    logp : float
        2PL: ``sum y x - log(1 + exp(x))``; 3PL: ``sum log P(y)`` with
        ``P(1) = g + (1 - g) sigmoid(x)``.
    g_theta, g_a, g_c, g_guess : float64 arrays
        Its gradient with respect to ``theta``, ``a``, ``c`` and ``guess``
        (empty for the 2PL).
    """
    three = guess.shape[0] > 0
    n_cells = ptr.shape[0] - 1
    gth = np.zeros(n_cells)
    ga = np.zeros(a.shape[0])
    gc = np.zeros(a.shape[0])
    gg = np.zeros(guess.shape[0])
    buf = np.empty(_RUN)
    buf2 = np.empty(_RUN)
    lp = 0.0
    for m in range(n_cells):
        th = theta[m]
        g = 0.0
        p0 = ptr[m]
        p1 = ptr[m + 1]
        while p0 < p1:
            q1 = min(p1, p0 + _RUN)
            j0 = items[p0]
            n = q1 - p0
            j1 = j0 + n
            if items[q1 - 1] - j0 == n - 1:
                if three:
                    dg, dl = _run3(a[j0:j1], c[j0:j1], guess[j0:j1], th, y[p0:q1], ga[j0:j1],
                                   gc[j0:j1], gg[j0:j1])
                else:
                    dg, dl = _run(a[j0:j1], c[j0:j1], th, y[p0:q1], ga[j0:j1], gc[j0:j1])
            elif three:
                dg, dl = _gathered3(a, c, guess, th, items[p0:q1], y[p0:q1], ga, gc, gg, buf, buf2)
            else:
                dg, dl = _gathered(a, c, th, items[p0:q1], y[p0:q1], ga, gc, buf)
            g += dg
            lp += dl
            p0 = q1
        gth[m] = g
    return lp, gth, ga, gc, gg


@numba.njit(fastmath=_FM, error_model="numpy", nogil=True, parallel=True, cache=True)
def cell_logliks(theta, a, c, guess, ptr, items, y, out):
    """Each cell's log-likelihood at each of ``S`` draws (the pointwise log-likelihood of a fit), value
    only, the terms of :func:`kernel`, the draws in parallel.

    ``theta`` (S, n_cells); ``a``, ``c`` (S, J); ``guess`` (S, J), or (S, 0) for the 2PL; ``ptr``,
    ``items``, ``y`` as :func:`kernel` takes them. Writes ``out`` (S, n_cells): 0 for a cell without
    responses."""
    S = theta.shape[0]
    n_cells = ptr.shape[0] - 1
    three = guess.shape[1] > 0
    for s in numba.prange(S):
        for m in range(n_cells):
            th = theta[s, m]
            lp = 0.0
            p0 = ptr[m]
            p1 = ptr[m + 1]
            while p0 < p1:
                q1 = min(p1, p0 + _RUN)
                lin = 0.0
                prod = 1.0
                for q in range(p0, q1):
                    j = items[q]
                    x = a[s, j] * th + c[s, j]
                    if three:
                        lq, _, _ = _terms3(x, guess[s, j], np.float64(y[q]))
                        lin += lq
                    else:
                        li, op, _ = _terms2(x, np.float64(y[q]))
                        lin += li
                        prod *= op
                lp += lin - math.log(prod)
                p0 = q1
            out[s, m] = lp


def cell_layout(cell: np.ndarray, item: np.ndarray, n_cells: int):
    """Responses ordered by cell, then item, with the CSR pointer.

    Parameters
    ----------
    cell, item : int arrays (n_responses,)
        Cell (``llm * K + domain``) and item of each response.
    n_cells : int

    Returns
    -------
    ptr : int64 (n_cells + 1,)
    order : int64 (n_responses,)
        Permutation that puts the responses in that order.
    """
    cell = np.asarray(cell, dtype=np.int64)
    order = np.lexsort((np.asarray(item), cell))
    counts = np.bincount(cell, minlength=n_cells)
    ptr = np.zeros(n_cells + 1, dtype=np.int64)
    np.cumsum(counts, out=ptr[1:])
    return ptr, order


def _make_op():
    import pytensor.tensor as pt
    from pytensor.gradient import DisconnectedType
    from pytensor.graph.basic import Apply
    from pytensor.graph.op import Op

    class BernoulliLogitCells(Op):
        """``(logp, d/d theta, d/d a, d/d c, d/d guess) =
        BernoulliLogitCells()(theta, a, c, guess, ptr, items, y)``.

        Only ``logp`` is meant to be used in graphs; its gradient is the other
        outputs of the same node (merged by PyTensor into one kernel call)."""

        __props__ = ()

        def make_node(self, theta, a, c, guess, ptr, items, y):
            floats = [pt.as_tensor_variable(v).astype("float64") for v in (theta, a, c, guess)]
            ints = [pt.as_tensor_variable(v) for v in (ptr, items, y)]
            names = ("theta", "a", "c", "guess", "ptr", "items", "y")
            for nm, v in zip(names, floats + ints):
                if v.ndim != 1:
                    raise TypeError(f"{nm} must be a vector")
            for nm, v in zip(names[4:], ints):
                if not v.dtype.startswith(("int", "uint")):
                    raise TypeError(f"{nm} must be integer, got {v.dtype}")
            outs = [pt.dscalar()] + [pt.dvector() for _ in range(4)]
            return Apply(self, floats + ints, outs)

        def perform(self, node, inputs, output_storage):
            out = kernel(*inputs)
            output_storage[0][0] = np.asarray(out[0])
            for k in range(1, 5):
                output_storage[k][0] = out[k]

        def infer_shape(self, node, shapes):
            return [()] + list(shapes[:4])

        def connection_pattern(self, node):
            return [[True] * 5] * 4 + [[False] * 5] * 3

        def pullback(self, inputs, outputs, cotangents):
            for ct in cotangents[1:]:
                if not isinstance(ct.type, DisconnectedType):
                    raise NotImplementedError("BernoulliLogitCells: only its log density is "
                                              "differentiable (no second derivatives)")
            g = cotangents[0]
            return [g * o for o in outputs[1:]] + [DisconnectedType()() for _ in range(3)]

    from pytensor.link.numba.dispatch import basic as numba_basic

    version = source_version(__name__)

    @numba_basic.register_funcify_default_op_cache_key(BernoulliLogitCells)
    def _numba_funcify(op, node=None, **kwargs):
        @numba_basic.numba_njit
        def bernoulli_logit_cells(theta, a, c, guess, ptr, items, y):
            lp, gth, ga, gc, gg = kernel(theta, a, c, guess, ptr, items, y)
            return np.asarray(lp), gth, ga, gc, gg

        return bernoulli_logit_cells, version

    return BernoulliLogitCells


@cache
def _op_class():
    return _make_op()


def bernoulli_logit_cells(theta, a, c, ptr, items, y, guess=None):
    """Symbolic 2PL (``guess=None``) or 3PL log-likelihood over the observed
    cells, ``x = a[item] * theta[cell] + c[item]`` (see :func:`kernel` for the
    layout); a PyTensor scalar with a gradient (also in ``guess``)."""
    if guess is None:
        guess = np.zeros(0)
    return _op_class()()(theta, a, c, guess, ptr, items, y)[0]
