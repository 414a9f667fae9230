"""The fused 2PL/3PL likelihood kernel (mtlirt.bayes._loglik): values and
gradients against numpy, the response layout, and bitwise independence of
memory alignment (a vectorised reduction must not depend on where an array
starts, or two fits with the same seed could differ)."""

from __future__ import annotations

import numpy as np
import pytest

from mtlirt.bayes._loglik import cell_layout, kernel


def _problem(n=20, sizes=(5, 17, 600, 3), missing=0.0, scale=1.0, seed=0):
    rng = np.random.default_rng(seed)
    K, J = len(sizes), int(sum(sizes))
    dom = np.repeat(np.arange(K), sizes)
    obs = rng.random((n, J)) >= missing
    ii, jj = np.nonzero(obs)
    cell = ii * K + dom[jj]
    y = (rng.random(len(ii)) < 0.6).astype(np.int32)
    theta = rng.normal(size=n * K) * scale
    a = np.exp(rng.normal(0, 0.5, J))
    c = rng.normal(size=J) * scale
    return theta, a, c, cell, jj, y, n * K


_EMPTY = np.zeros(0)


def _reference(theta, a, c, cell, item, y, guess=None):
    x = a[item] * theta[cell] + c[item]
    sig = 0.5 * (1.0 + np.tanh(0.5 * x))
    if guess is None:
        lp = np.sum(y * x - np.logaddexp(0.0, x))
        r = y - sig  # d/dx
        rg = None
    else:
        g = guess[item]
        p = g + (1 - g) * sig
        lp = np.sum(np.where(y == 1, np.log(p), np.log1p(-g) - np.logaddexp(0.0, x)))
        r = np.where(y == 1, (1 - g) * sig * (1 - sig) / p, -sig)
        rg = np.bincount(item, np.where(y == 1, (1 - sig) / p, -1.0 / (1 - g)), minlength=a.size)
    gth = np.bincount(cell, r * a[item], minlength=theta.size)
    ga = np.bincount(item, r * theta[cell], minlength=a.size)
    gc = np.bincount(item, r, minlength=a.size)
    return lp, gth, ga, gc, rg


@pytest.mark.parametrize("three", [False, True])
@pytest.mark.parametrize("missing,scale", [(0.0, 1.0), (0.3, 1.0), (0.0, 30.0), (0.5, 30.0)])
def test_kernel_matches_numpy(missing, scale, three):
    """Complete data (contiguous runs, one split at 512 items), missing
    responses (gathered), logits far in both tails; 2PL and 3PL."""
    theta, a, c, cell, item, y, n_cells = _problem(missing=missing, scale=scale)
    guess = np.random.default_rng(1).uniform(0.05, 0.4, a.size) if three else None
    ptr, order = cell_layout(cell, item, n_cells)
    got = kernel(theta, a, c, _EMPTY if guess is None else guess, ptr,
                 item[order].astype(np.int32), y[order])
    ref = _reference(theta, a, c, cell, item, y, guess)
    assert np.isclose(got[0], ref[0], rtol=1e-13, atol=0)
    for g, r in zip(got[1:4], ref[1:4]):
        np.testing.assert_allclose(g, r, rtol=1e-11, atol=1e-11)
    if three:
        np.testing.assert_allclose(got[4], ref[4], rtol=1e-11, atol=1e-11)
    else:
        assert got[4].size == 0


def test_cell_layout_orders_by_cell_then_item():
    cell = np.array([3, 0, 3, 1, 0])
    item = np.array([7, 2, 4, 1, 0])
    ptr, order = cell_layout(cell, item, 5)
    assert ptr.tolist() == [0, 2, 3, 3, 5, 5]
    assert cell[order].tolist() == [0, 0, 1, 3, 3]
    assert item[order].tolist() == [0, 2, 1, 4, 7]


def test_empty_cells_have_zero_gradient():
    theta, a, c, cell, item, y, n_cells = _problem(n=4, sizes=(3, 4))
    keep = cell != 2
    ptr, order = cell_layout(cell[keep], item[keep], n_cells)
    lp, gth, *_ = kernel(theta, a, c, _EMPTY, ptr, item[keep][order], y[keep][order])
    assert gth[2] == 0.0 and np.isfinite(lp)


def test_kernel_does_not_depend_on_alignment():
    theta, a, c, cell, item, y, n_cells = _problem(n=30, sizes=(5, 17, 33, 64, 3, 120), missing=0.0)
    ptr, order = cell_layout(cell, item, n_cells)
    items, ys = item[order].astype(np.int32), y[order]

    def shifted(x, off):
        buf = np.empty(x.size + 16, x.dtype)
        view = buf[off:off + x.size]
        view[:] = x
        return view

    guess = np.full(a.size, 0.25)
    for gs in (_EMPTY, guess):
        ref = kernel(theta, a, c, gs, ptr, items, ys)
        for off in range(1, 8):
            got = kernel(shifted(theta, off), shifted(a, off), shifted(c, 8 - off),
                         shifted(gs, off) if gs.size else gs, ptr, shifted(items, off),
                         shifted(ys, 8 - off))
            assert got[0] == ref[0]
            for g, r in zip(got[1:], ref[1:]):
                assert np.array_equal(g, r)


@pytest.mark.parametrize("three", [False, True])
def test_op_numba_dispatch_matches_perform(three):
    """The Op compiled by PyTensor's numba backend (what nutpie, MAP and ADVI run) gives the value and the
    gradient of ``Op.perform`` (the kernel called from Python, checked against numpy above), 2PL and 3PL
    with the guessing floor's gradient, on cells with complete runs (split at 512 items) and gathered ones."""
    import pytensor
    import pytensor.tensor as pt

    from mtlirt.bayes._loglik import bernoulli_logit_cells

    theta, a, c, cell, item, y, n_cells = _problem(n=6, sizes=(3, 530, 4), missing=0.0, seed=3)
    keep = np.random.default_rng(2).random(item.size) >= np.where(item >= 3 + 530, 0.0, 0.2)  # last domain whole
    ptr, order = cell_layout(cell[keep], item[keep], n_cells)
    items, ys = item[keep][order].astype(np.int64), y[keep][order].astype(np.int64)
    guess = np.random.default_rng(4).uniform(0.05, 0.4, a.size)
    vs = [pt.dvector(nm) for nm in ("theta", "a", "c", "guess")]
    lp = bernoulli_logit_cells(vs[0], vs[1], vs[2], ptr, items, ys, guess=vs[3] if three else None)
    outs = [lp, *pytensor.grad(lp, vs[:4] if three else vs[:3])]
    args = (theta, a, c, guess) if three else (theta, a, c)
    with pytensor.config.change_flags(numba__fastmath=False):  # as fit_bayes compiles (shares its cache)
        got = {mode: pytensor.function(vs[:len(args)], outs, mode=mode)(*args) for mode in ("NUMBA", "FAST_COMPILE")}
    ref = kernel(theta, a, c, guess if three else _EMPTY, ptr, items, ys)
    for mode, res in got.items():
        assert len(res) == len(args) + 1
        assert np.isclose(res[0], ref[0], rtol=1e-13, atol=0), mode
        for g, r in zip(res[1:], ref[1:]):
            np.testing.assert_allclose(g, r, rtol=1e-12, atol=1e-12, err_msg=mode)
