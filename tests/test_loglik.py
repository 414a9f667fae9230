"""The fused 2PL/3PL likelihood kernel (mtlirt.bayes._loglik): values and
gradients against numpy, the response layout, and bitwise independence of
memory alignment (a vectorised reduction must not depend on where an array
starts, or two fits with the same seed could differ)."""

from __future__ import annotations

import numpy as np
import pytest

from mtlirt.bayes._loglik import GAP, PAD_SHARE, item_layout, kernel


def _problem(n=20, sizes=(5, 17, 60, 3), missing=0.0, scale=1.0, seed=0):
    """A leaderboard as the kernel reads it: traits (n, K), item parameters, the observed responses
    (llm, item, y) and the items' domains."""
    rng = np.random.default_rng(seed)
    K, J = len(sizes), int(sum(sizes))
    dom = np.repeat(np.arange(K), sizes)
    miss = np.broadcast_to(np.asarray(missing, dtype=float), (J,))  # one share, or one per item
    ii, jj = np.nonzero(rng.random((n, J)) >= miss)
    y = (rng.random(len(ii)) < 0.6).astype(np.int32)
    theta = rng.normal(size=(n, K)) * scale
    a = np.exp(rng.normal(0, 0.5, J))
    c = rng.normal(size=J) * scale
    return theta, a, c, ii, jj, y, dom


_EMPTY = np.zeros(0)


def _reference(theta, a, c, llm, item, y, dom, guess=None):
    th = theta[llm, dom[item]]
    x = a[item] * th + c[item]
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
    gth = np.zeros_like(theta)
    np.add.at(gth, (llm, dom[item]), r * a[item])
    ga = np.bincount(item, r * th, minlength=a.size)
    gc = np.bincount(item, r, minlength=a.size)
    return lp, gth, ga, gc, rg


@pytest.mark.parametrize("three", [False, True])
@pytest.mark.parametrize("n,missing,scale", [(20, 0.0, 1.0), (20, 0.3, 1.0), (20, 0.0, 30.0), (20, 0.5, 30.0),
                                             (20, 0.95, 1.0), (600, 0.1, 1.0)])
def test_kernel_matches_numpy(n, missing, scale, three):
    """Complete data (contiguous runs of LLMs), missing responses (coded gaps in the run; gathered
    where an item is sparse), logits far in both tails, 600 LLMs (runs split at 512); 2PL and 3PL."""
    theta, a, c, ii, jj, y, dom = _problem(n=n, missing=missing, scale=scale)
    guess = np.random.default_rng(1).uniform(0.05, 0.4, a.size) if three else None
    ptr, slots, codes = item_layout(ii, jj, y, dom, n)
    got = kernel(theta, a, c, _EMPTY if guess is None else guess, ptr, slots, codes)
    ref = _reference(theta, a, c, ii, jj, y, dom, guess)
    assert np.isclose(got[0], ref[0], rtol=1e-13, atol=0)
    for g, r in zip(got[1:4], ref[1:4]):
        np.testing.assert_allclose(g, r, rtol=1e-11, atol=1e-11)
    if three:
        np.testing.assert_allclose(got[4], ref[4], rtol=1e-11, atol=1e-11)
    else:
        assert got[4].size == 0


def test_item_layout_lists_every_llm_of_a_well_answered_item():
    """Item 0 (answered by 5 of 6 LLMs) lists all six, the missing one coded GAP; item 1 (one of six,
    under PAD_SHARE) lists its one response; item 2 (none) nothing. Slots read the traits domain by
    domain: ``domain * N + llm``."""
    assert 1 / 6 < PAD_SHARE <= 5 / 6
    llm = np.array([5, 0, 1, 3, 4, 4])
    item = np.array([0, 0, 0, 0, 1, 0])
    y = np.array([1, 0, 1, 1, 0, 1])
    dom = np.array([0, 1, 1])
    ptr, slots, codes = item_layout(llm, item, y, dom, 6)
    assert ptr.tolist() == [0, 6, 7, 7]
    assert slots.tolist() == [0, 1, 2, 3, 4, 5, 10]
    assert codes.tolist() == [0, 1, GAP, 1, 1, 1, 0]


def test_empty_cells_have_zero_gradient():
    theta, a, c, ii, jj, y, dom = _problem(n=4, sizes=(3, 4))
    keep = ~((ii == 2) & (dom[jj] == 1))  # LLM 2 answered nothing in domain 1
    ptr, slots, codes = item_layout(ii[keep], jj[keep], y[keep], dom, 4)
    lp, gth, *_ = kernel(theta, a, c, _EMPTY, ptr, slots, codes)
    assert gth[2, 1] == 0.0 and gth[2, 0] != 0.0 and np.isfinite(lp)


def test_kernel_does_not_depend_on_alignment():
    miss = np.where(np.arange(242) % 3 == 0, 0.9, 0.1)  # runs with gaps, and gathered items
    theta, a, c, ii, jj, y, dom = _problem(n=30, sizes=(5, 17, 33, 64, 3, 120), missing=miss)
    ptr, slots, codes = item_layout(ii, jj, y, dom, 30)
    assert 0 < (codes == GAP).sum() and np.any(np.diff(ptr) < 30)

    def shifted(x, off):
        buf = np.empty(x.size + 16, x.dtype)
        view = buf[off:off + x.size].reshape(x.shape)
        view[:] = x
        return view

    guess = np.full(a.size, 0.25)
    for gs in (_EMPTY, guess):
        ref = kernel(theta, a, c, gs, ptr, slots, codes)
        for off in range(1, 8):
            got = kernel(shifted(theta, off), shifted(a, off), shifted(c, 8 - off),
                         shifted(gs, off) if gs.size else gs, ptr, shifted(slots, off), shifted(codes, 8 - off))
            assert got[0] == ref[0]
            for g, r in zip(got[1:], ref[1:]):
                assert np.array_equal(g, r)


@pytest.mark.parametrize("three", [False, True])
def test_op_numba_dispatch_matches_perform(three):
    """The Op compiled by PyTensor's numba backend (what nutpie, MAP and ADVI run) gives the value and the
    gradient of ``Op.perform`` (the kernel called from Python, checked against numpy above), 2PL and 3PL
    with the guessing floor's gradient, on items answered by every LLM (runs split at 512 LLMs), with gaps,
    and sparse (gathered)."""
    import pytensor
    import pytensor.tensor as pt

    from mtlirt.bayes._loglik import bernoulli_logit_cells

    miss = (0.0, 0.0, 0.0, 0.2, 0.9, 0.5, 0.5, 0.5, 0.5)
    theta, a, c, ii, jj, y, dom = _problem(n=530, sizes=(3, 2, 4), missing=miss, seed=3)
    ptr, slots, codes = item_layout(ii, jj, y, dom, 530)
    guess = np.random.default_rng(4).uniform(0.05, 0.4, a.size)
    vs = [pt.dmatrix("theta")] + [pt.dvector(nm) for nm in ("a", "c", "guess")]
    lp = bernoulli_logit_cells(vs[0], vs[1], vs[2], ptr, slots, codes, guess=vs[3] if three else None)
    outs = [lp, *pytensor.grad(lp, vs[:4] if three else vs[:3])]
    args = (theta, a, c, guess) if three else (theta, a, c)
    with pytensor.config.change_flags(numba__fastmath=False):  # as fit_bayes compiles (shares its cache)
        got = {mode: pytensor.function(vs[:len(args)], outs, mode=mode)(*args) for mode in ("NUMBA", "FAST_COMPILE")}
    ref = kernel(theta, a, c, guess if three else _EMPTY, ptr, slots, codes)
    for mode, res in got.items():
        assert len(res) == len(args) + 1
        assert np.isclose(res[0], ref[0], rtol=1e-13, atol=0), mode
        for g, r in zip(res[1:], ref[1:]):
            np.testing.assert_allclose(g, r, rtol=1e-12, atol=1e-12, err_msg=mode)
