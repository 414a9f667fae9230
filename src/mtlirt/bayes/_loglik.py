"""The joint 1PL/2PL/3PL likelihood as one fused PyTensor Op (log density and gradient); the same
terms summed per cell and draw, value only, for a fit's pointwise log-likelihood (:func:`cell_logliks`).

The joint model's likelihood is a sum over the observed cells ``(i, j)`` of
``log P(y_ij)`` with ``x = a_j theta_{i,k(j)} + intercept_j``: for the 1PL
and 2PL ``y x - log(1 + exp(x))``, for the 3PL ``P(1) = g_j + (1 - g_j)
sigmoid(x)``.
Written as a PyTensor elementwise graph it costs a gather, an elementwise
pass and three scatter-adds per gradient. This module computes the value
and the whole gradient in one numba loop, several times faster
(``benchmarks/bench_bayes.py joint-cost`` times both):

* responses are grouped by *item* (CSR: ``ptr`` and each entry's trait,
  :func:`item_layout`), so each item's parameters are loaded once and their
  gradient accumulated in registers, and the traits are read domain by
  domain, where an item's LLMs are one contiguous run: the inner loop runs
  over plain slices as long as the leaderboard (grouping by LLM and domain
  instead gives runs as short as a domain, and a domain of 20 items spent
  more in each run's set-up and reductions than in its responses);
* an item answered by most LLMs lists them all, its missing responses
  coded ``GAP`` and masked in the loop, so missing data keep the contiguous
  run; only sparsely answered items gather their traits;
* the loop vectorises (SIMD) with the exponential of
  :mod:`mtlirt.bayes._vecmath` (numba's ``math.exp`` is a scalar libm call
  that keeps LLVM from vectorising it);
* 2PL: ``log(1 + e)`` is summed as the log of a product, one ``log`` per
  run of up to 512 entries; 3PL: one vectorised ``log`` per response
  (``P(y)`` itself).

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

__all__ = ["GAP", "bernoulli_logit_cells", "cell_layout", "cell_logliks", "item_layout", "kernel"]

_FM = {"reassoc", "contract", "arcp", "nsz"}  # no nnan/ninf: the selects below must stay
GAP = 2  # the code of an LLM an item's entries list without a response (:func:`item_layout`)
PAD_SHARE = 0.2  # an item answered by at least this share of the LLMs lists them all (:func:`item_layout`)


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
def _run(aj, cj, th, y, gth):
    """One item over a contiguous run of LLMs (traits ``th``, codes ``y``; a
    ``GAP`` adds nothing): returns (d/d a, d/d intercept, log-lik); adds
    d/d theta into ``gth``. Vectorises."""
    ga = 0.0
    gc = 0.0
    prod = 1.0
    lin = 0.0
    for q in range(th.shape[0]):
        t = th[q]
        yq = y[q]
        li, op, r = _terms2(aj * t + cj, np.float64(yq == 1))
        seen = yq < GAP
        r = r if seen else 0.0  # selects as statements of their own: in an augmented assignment
        op = op if seen else 1.0  # they keep LLVM from vectorising the loop (7x slower)
        li = li if seen else 0.0
        prod *= op  # at most 2**len(run): the caller splits runs at 512
        lin += li
        ga += r * t
        gc += r
        gth[q] += r * aj
    return ga, gc, lin - math.log(prod)


@numba.njit(fastmath=_FM, error_model="numpy", inline="always", cache=True)
def _gathered(aj, cj, th, slots, y, gth):
    """One item over LLMs that are not a contiguous run (a sparsely answered item)."""
    ga = 0.0
    gc = 0.0
    prod = 1.0
    lin = 0.0
    for q in range(slots.shape[0]):
        t = th[slots[q]]
        li, op, r = _terms2(aj * t + cj, np.float64(y[q] == 1))
        prod *= op
        lin += li
        ga += r * t
        gc += r
        gth[slots[q]] += r * aj
    return ga, gc, lin - math.log(prod)


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
def _run3(aj, cj, gj, th, y, gth):
    """:func:`_run` for the 3PL (guessing ``gj``): (d/d a, d/d intercept, d/d guess, log-lik)."""
    ga = 0.0
    gc = 0.0
    gg = 0.0
    lin = 0.0
    for q in range(th.shape[0]):
        t = th[q]
        yq = y[q]
        lp, dx, dc = _terms3(aj * t + cj, gj, np.float64(yq == 1))
        seen = yq < GAP
        dx = dx if seen else 0.0  # selects as statements of their own (see _run)
        lp = lp if seen else 0.0
        dc = dc if seen else 0.0
        lin += lp
        gg += dc
        ga += dx * t
        gc += dx
        gth[q] += dx * aj
    return ga, gc, gg, lin


@numba.njit(fastmath=_FM, error_model="numpy", inline="always", cache=True)
def _gathered3(aj, cj, gj, th, slots, y, gth):
    """:func:`_gathered` for the 3PL."""
    ga = 0.0
    gc = 0.0
    gg = 0.0
    lin = 0.0
    for q in range(slots.shape[0]):
        t = th[slots[q]]
        lp, dx, dc = _terms3(aj * t + cj, gj, np.float64(y[q] == 1))
        lin += lp
        gg += dc
        ga += dx * t
        gc += dx
        gth[slots[q]] += dx * aj
    return ga, gc, gg, lin


@numba.njit(fastmath=_FM, error_model="numpy", nogil=True, cache=True)
def kernel(theta, a, c, guess, ptr, slots, y):
    """Log-likelihood and gradient of the 2PL or 3PL over the observed responses, item by item.

    Parameters
    ----------
    theta : float64 (N, K)
        Trait of each LLM in each domain.
    a, c : float64 (J,)
        Discrimination and intercept of each item.
    guess : float64 (J,) or (0,)
        Guessing floor of each item (3PL), or empty (2PL).
    ptr : int (J + 1,)
        Entries of item ``j`` are ``ptr[j]:ptr[j + 1]`` (:func:`item_layout`).
    slots : int (n_entries,)
        Trait of each entry: ``domain * N + llm`` (the traits domain by domain), ascending within an item.
    y : int (n_entries,)
        0/1 responses; ``GAP`` for an LLM listed without a response.

    Returns
    -------
    logp : float
        2PL: ``sum y x - log(1 + exp(x))``; 3PL: ``sum log P(y)`` with
        ``P(1) = g + (1 - g) sigmoid(x)``.
    g_theta (N, K), g_a, g_c, g_guess : float64 arrays
        Its gradient with respect to ``theta``, ``a``, ``c`` and ``guess``
        (empty for the 2PL).
    """
    three = guess.shape[0] > 0
    N, K = theta.shape
    th = np.ascontiguousarray(theta.T).reshape(-1)  # domain by domain: an item's LLMs are one run
    gth = np.zeros(N * K)
    J = a.shape[0]
    ga = np.zeros(J)
    gc = np.zeros(J)
    gg = np.zeros(guess.shape[0])
    lp = 0.0
    for j in range(J):
        aj = a[j]
        cj = c[j]
        gj = guess[j] if three else 0.0
        p0 = ptr[j]
        p1 = ptr[j + 1]
        while p0 < p1:
            q1 = min(p1, p0 + _RUN)
            s0 = slots[p0]
            n = q1 - p0
            if slots[q1 - 1] - s0 == n - 1:
                if three:
                    da, dc, dg, dl = _run3(aj, cj, gj, th[s0:s0 + n], y[p0:q1], gth[s0:s0 + n])
                else:
                    da, dc, dl = _run(aj, cj, th[s0:s0 + n], y[p0:q1], gth[s0:s0 + n])
                    dg = 0.0
            elif three:
                da, dc, dg, dl = _gathered3(aj, cj, gj, th, slots[p0:q1], y[p0:q1], gth)
            else:
                da, dc, dl = _gathered(aj, cj, th, slots[p0:q1], y[p0:q1], gth)
                dg = 0.0
            ga[j] += da
            gc[j] += dc
            if three:
                gg[j] += dg
            lp += dl
            p0 = q1
    return lp, np.ascontiguousarray(gth.reshape(K, N).T), ga, gc, gg


@numba.njit(fastmath=_FM, error_model="numpy", nogil=True, parallel=True, cache=True)
def cell_logliks(theta, a, c, guess, ptr, items, y, out):
    """Each cell's log-likelihood at each of ``S`` draws (the pointwise log-likelihood of a fit), value
    only, the terms of :func:`kernel`, the draws in parallel.

    ``theta`` (S, n_cells); ``a``, ``c`` (S, J); ``guess`` (S, J), or (S, 0) for the 2PL; ``ptr``,
    ``items``, ``y``: the responses cell by cell (:func:`cell_layout`), each one's item and 0/1 answer.
    Writes ``out`` (S, n_cells): 0 for a cell without responses."""
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


def item_layout(llm: np.ndarray, item: np.ndarray, y: np.ndarray, item_domain: np.ndarray, n_llms: int):
    """The responses as :func:`kernel` reads them: item by item, each item's LLMs in order.

    An item answered by at least ``PAD_SHARE`` of the LLMs lists every LLM, a missing response coded
    ``GAP``: its entries are one contiguous run of traits, whose vectorised loop costs less than
    gathering the answered ones (the gathered loop costs about six times as much per entry). Sparser
    items list their responses only.

    Returns
    -------
    ptr : int64 (J + 1,)
    slots : int64 (n_entries,)
        ``domain * n_llms + llm`` of each entry.
    codes : int8 (n_entries,)
        0/1, or ``GAP``.
    """
    llm, item = np.asarray(llm, dtype=np.int64), np.asarray(item, dtype=np.int64)
    J = len(item_domain)
    counts = np.bincount(item, minlength=J)
    padded = counts >= PAD_SHARE * n_llms
    order = np.lexsort((llm, item))
    llm, item, y = llm[order], item[order], np.asarray(y)[order]
    ptr = np.zeros(J + 1, dtype=np.int64)
    np.cumsum(np.where(padded, n_llms, counts), out=ptr[1:])
    within = np.arange(len(item)) - (np.cumsum(counts) - counts)[item]  # rank among the item's responses
    pos = ptr[item] + np.where(padded[item], llm, within)
    slots = np.empty(ptr[-1], dtype=np.int64)
    codes = np.full(ptr[-1], GAP, dtype=np.int8)
    pj = np.flatnonzero(padded)
    if pj.size:
        slots[(ptr[pj][:, None] + np.arange(n_llms)).reshape(-1)] = (
            item_domain[pj][:, None] * n_llms + np.arange(n_llms)).reshape(-1)
    slots[pos] = item_domain[item] * n_llms + llm
    codes[pos] = y
    return ptr, slots, codes


def _make_op():
    import pytensor.tensor as pt
    from pytensor.gradient import DisconnectedType
    from pytensor.graph.basic import Apply
    from pytensor.graph.op import Op

    class BernoulliLogitCells(Op):
        """``(logp, d/d theta, d/d a, d/d c, d/d guess) =
        BernoulliLogitCells()(theta, a, c, guess, ptr, slots, y)``.

        Only ``logp`` is meant to be used in graphs; its gradient is the other
        outputs of the same node (merged by PyTensor into one kernel call)."""

        __props__ = ()

        def make_node(self, theta, a, c, guess, ptr, slots, y):
            floats = [pt.as_tensor_variable(v).astype("float64") for v in (theta, a, c, guess)]
            ints = [pt.as_tensor_variable(v) for v in (ptr, slots, y)]
            names = ("theta", "a", "c", "guess", "ptr", "slots", "y")
            for nm, v in zip(names, floats + ints):
                if v.ndim != (2 if nm == "theta" else 1):
                    raise TypeError(f"{nm} must be a {'matrix' if nm == 'theta' else 'vector'}")
            for nm, v in zip(names[4:], ints):
                if not v.dtype.startswith(("int", "uint")):
                    raise TypeError(f"{nm} must be integer, got {v.dtype}")
            outs = [pt.dscalar(), pt.dmatrix()] + [pt.dvector() for _ in range(3)]
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
        def bernoulli_logit_cells(theta, a, c, guess, ptr, slots, y):
            lp, gth, ga, gc, gg = kernel(theta, a, c, guess, ptr, slots, y)
            return np.asarray(lp), gth, ga, gc, gg

        return bernoulli_logit_cells, version

    return BernoulliLogitCells


@cache
def _op_class():
    return _make_op()


def bernoulli_logit_cells(theta, a, c, ptr, slots, y, guess=None):
    """Symbolic 2PL (``guess=None``) or 3PL log-likelihood of the responses,
    ``x = a[item] * theta[llm, domain] + c[item]``, in :func:`item_layout`'s
    layout; a PyTensor scalar with a gradient (also in ``guess``)."""
    if guess is None:
        guess = np.zeros(0)
    return _op_class()()(theta, a, c, guess, ptr, slots, y)[0]
