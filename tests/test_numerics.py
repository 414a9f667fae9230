"""The shared numerics of the LLM side (mtlirt.numerics): the interpolation in its numpy, PyTensor-free
and numba forms, the grid log-likelihood in its matrix, sparse, partition, table and per-cell forms
against each other, the integrals; and the one draws accessor and held-out API built on them."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from scipy.special import logsumexp

from mtlirt.errors import InputError
from mtlirt.estimators.heldout import heldout_loglik
from mtlirt.numerics import hermite, llm_side
from mtlirt.results.estimate import Estimate


def _data(n=7, sizes=(3, 5), missing=0.3, seed=0):
    """Answers with missing cells and items with floors, moderate enough that no clip binds."""
    rng = np.random.default_rng(seed)
    J = int(sum(sizes))
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    slices = [slice(int(bounds[k]), int(bounds[k + 1])) for k in range(len(sizes))]
    obs = rng.random((n, J)) > missing
    y = np.where(obs, rng.random((n, J)) < 0.6, 0).astype(np.int8)
    a = np.exp(rng.normal(0.0, 0.3, J))
    d = rng.normal(0.0, 1.0, J)
    c = rng.uniform(0.0, 0.3, J)
    return y, obs, slices, a, d, c


def test_bernoulli_loglik_is_exact_in_both_tails():
    """The per-cell log-likelihood against its closed forms, for answers 0 and 1 at logits from -40 to 40
    (where p or 1 - p underflows a naive log) with and without a guessing floor."""
    import math

    def log_expit(v):
        return -math.log1p(math.exp(-v)) if v > 0 else v - math.log1p(math.exp(v))

    x = np.array([-40.0, -5.0, -0.3, 0.0, 2.0, 40.0])
    for c in (None, 0.25):
        for yv in (0, 1):
            got = llm_side.bernoulli_loglik(x, np.full(x.shape, yv), None if c is None else np.full(x.shape, c))
            if c is None:
                want = [log_expit(v if yv else -v) for v in x]
            elif yv:
                want = [math.log(c + (1 - c) * math.exp(log_expit(v))) for v in x]
            else:
                want = [math.log1p(-c) + log_expit(-v) for v in x]
            np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-15)

def test_hermite_numba_gives_the_numpy_bits_and_is_exact_on_a_cubic():
    w_nb, c_nb = hermite.numba_versions()
    t = np.linspace(0.0, 1.0, 101)
    h = 0.37
    f0, f1, d0, d1 = 0.3, -1.2, 2.5, 0.4
    ref = hermite.combine(hermite.weights(t, h), f0, f1, d0, d1)
    got = np.array([c_nb(w_nb(v, h), f0, f1, d0, d1) for v in t])
    assert np.array_equal(got, ref)
    # a cubic is interpolated exactly from its values and slopes at the nodes, and continued linearly
    grid = -1.0 + 0.25 * np.arange(9)
    F, dF = (grid**3 - grid)[None], (3 * grid**2 - 1)[None]
    x = np.array([[-0.9, -0.13, 0.4, 0.99]])
    np.testing.assert_allclose(hermite.hermite_np(F, dF, np.zeros((1, 4), int), x, -1.0, 0.25), x**3 - x,
                               atol=1e-14)
    out = hermite.hermite_np(F, dF, np.zeros((1, 2), int), np.array([[-1.5, 1.5]]), -1.0, 0.25)
    np.testing.assert_allclose(out, [[0.0 + 2.0 * -0.5, 0.0 + 2.0 * 0.5]], atol=1e-14)


def test_grid_loglik_forms_agree():
    y, obs, slices, a, d, c = _data()
    x = np.linspace(-3, 3, 13)
    nodes = np.broadcast_to(x, (y.shape[0], len(slices), len(x)))
    exact = llm_side.node_loglik(y, obs, slices, a, d, c, nodes)  # per cell, log_expit
    from scipy.sparse import csr_matrix

    for k, sl in enumerate(slices):
        Y, O = (y * obs)[:, sl].astype(float), obs[:, sl].astype(float)
        lp, l1p = llm_side.log_curves(llm_side.curves(a[sl], d[sl], c[sl], x))
        np.testing.assert_allclose(llm_side.grid_loglik(Y, O, lp, l1p), exact[:, k], rtol=1e-12)
        sparse = llm_side.grid_loglik(csr_matrix(Y), csr_matrix(O), lp, l1p)
        np.testing.assert_allclose(sparse, exact[:, k], rtol=1e-12)
        low = llm_side.grid_loglik(Y.astype(np.float32), O.astype(np.float32), lp, l1p, np.float32)
        np.testing.assert_allclose(low, exact[:, k], rtol=1e-5)
    # without a floor: s t + Y d - partition
    exact0 = llm_side.node_loglik(y, obs, slices, a, d, np.zeros_like(c), nodes)
    for k, sl in enumerate(slices):
        Y, O = (y * obs)[:, sl].astype(float), obs[:, sl].astype(float)
        part = np.multiply.outer(Y @ a[sl], x) + (Y @ d[sl])[:, None] - llm_side.partition(O, a[sl], d[sl], x)
        np.testing.assert_allclose(part, exact0[:, k], rtol=1e-12)


def test_matmul_rows_is_the_product_on_any_number_of_threads(monkeypatch):
    """The E-step's large products in blocks of rows: the product to float32 rounding, matrices and vectors,
    transposed views too; the same bits in one thread; small products are the plain one."""
    from mtlirt.estimators import blas

    rng = np.random.default_rng(3)
    Y = (rng.random((3000, 500)) < 0.6).astype(np.float32)
    M, v = rng.normal(size=(500, 49)).astype(np.float32), rng.normal(size=3000).astype(np.float32)
    results = []
    for pool in (blas._pool(), None):
        monkeypatch.setattr(blas, "_pool", lambda p=pool: p)
        results.append((blas.matmul_rows(Y, M), blas.matmul_rows(Y.T, v), blas.matmul_rows(Y[:, :300], M[:300])))
    for threaded, single, exact in zip(*results, (Y @ M, Y.T @ v, Y[:, :300] @ M[:300])):
        assert np.array_equal(threaded, single)
        np.testing.assert_allclose(threaded, exact, rtol=1e-5, atol=1e-3)
    small = Y[:50, :20]
    assert np.array_equal(blas.matmul_rows(small, M[:20]), small @ M[:20])


@pytest.mark.parametrize("floor, missing, kind", [(False, 0.0, "pattern"), (False, 0.3, "cell"), (True, 0.3, "cell")])
def test_tables_interpolate_the_likelihood(floor, missing, kind):
    y, obs, slices, a, d, c = _data(n=9, missing=missing, seed=2)
    c = c if floor else np.zeros_like(c)
    tb = llm_side.tabulate(y, obs, slices, a, d, c)
    assert tb.kind == kind
    t = np.random.default_rng(3).uniform(-4, 4, size=(9, len(slices), 5))
    exact = llm_side.node_loglik(y, obs, slices, a, d, c, t)
    np.testing.assert_allclose(llm_side.loglik_at(tb, t) + tb.const[..., None], exact, atol=1e-6)



def test_cell_quadrature_is_the_interpolated_likelihood_at_its_nodes():
    """The compiled cell quadrature gives the tables' interpolant at every node, beyond the table's range
    too (continued linearly), less the cell's maximum, and the trapezoid rule's log scale."""
    y, obs, slices, a, d, c = _data(n=9, missing=0.3, seed=5)
    tb = llm_side.tabulate(y, obs, slices, a, d, c)
    rng = np.random.default_rng(6)
    start = rng.uniform(-11, 2, size=(9, len(slices)))
    step = rng.uniform(0.05, 1.2, size=(9, len(slices)))
    n = 13
    nodes = start[..., None] + step[..., None] * np.arange(n)
    assert nodes.min() < tb.lo and nodes.max() > tb.lo + tb.h * (tb.n_grid - 1)
    ll = llm_side.loglik_at(tb, nodes)
    logw, logscale = llm_side.cell_quadrature(tb, start, step, n)
    np.testing.assert_allclose(logw, ll - ll.max(-1, keepdims=True), rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(logscale, ll.max(-1) + np.log(step) - 0.5 * np.log(2 * np.pi), rtol=1e-12)


def test_integrals():
    rng = np.random.default_rng(4)
    L = rng.normal(0, 3, size=(5, 11))
    x = np.linspace(-3, 3, 11)
    logw = llm_side.normal_log_weights(x)
    assert np.isclose(logsumexp(logw), 0.0)
    want = logsumexp(L + logw, axis=1)
    P, lml = llm_side.posterior(L.copy(), logw)
    np.testing.assert_allclose(lml, want, rtol=1e-13)
    np.testing.assert_allclose(P, np.exp(L + logw - want[:, None]), rtol=1e-12)
    gx, glw = llm_side.gauss_hermite(20)
    assert np.isclose(np.exp(glw) @ gx**2, 1.0) and np.isclose(np.exp(glw) @ gx**4, 3.0)
    # the log-domain sums of one cell, in numpy and numba
    logw_k = rng.normal(0, 2, size=(9, 3))
    ref = llm_side.log_domain(logw_k, 1, -2.0, 0.5, 0.3, 0.7)
    d = -2.0 + 0.5 * np.arange(9) - 0.3
    e = logw_k[:, 1] - 0.7 * d * d
    assert np.isclose(ref[0], logsumexp(e)) and np.isclose(ref[1], np.exp(e - logsumexp(e)) @ d)
    assert llm_side.numba_log_domain()(logw_k, 1, -2.0, 0.5, 0.3, 0.7) == pytest.approx(ref, rel=1e-14)


def _estimate(chains=2, draws=5, n=4, J=3, boot=False):
    rng = np.random.default_rng(5)
    s = (chains, draws)
    post = xr.Dataset(
        {"theta": (("chain", "draw", "llm", "domain"), rng.normal(size=s + (n, 1))),
         "overall": (("chain", "draw", "llm"), rng.normal(size=s + (n,))),
         "discrimination": (("chain", "draw", "item"), np.exp(rng.normal(size=s + (J,)))),
         "intercept": (("chain", "draw", "item"), rng.normal(size=s + (J,))),
         "guessing": (("chain", "draw", "item"), np.zeros(s + (J,))),
         "domain_corr": (("chain", "draw", "domain_a", "domain_b"), np.ones(s + (1, 1)))},
        coords={"chain": np.arange(chains), "draw": np.arange(draws), "llm": [f"m{i}" for i in range(n)],
                "domain": ["d"], "domain_a": ["d"], "domain_b": ["d"], "item": [f"q{j}" for j in range(J)],
                "item_domain": ("item", ["d"] * J)})
    groups = {"posterior": post}
    if boot:
        groups["bootstrap"] = post.isel(chain=[0])
    return Estimate(xr.DataTree.from_dict(groups))


def test_draws_accessor():
    est = _estimate()
    theta = est.posterior["theta"].values
    assert np.array_equal(est.draws("theta", source="posterior", by_chain=True), theta)
    flat = theta.reshape(10, 4, 1)
    assert np.array_equal(est.draws("theta"), flat)  # the uncertainty source: the posterior
    assert np.array_equal(est.draws("theta", max_draws=4), flat[[0, 3, 6, 9]])
    assert est.draws("eta") is None and est.draws("theta", source="bootstrap") is None
    with pytest.raises(ValueError):
        est.draws("theta", max_draws=3, by_chain=True)
    assert np.array_equal(est.item_domain, [0, 0, 0])
    point = _estimate(chains=1, draws=1, boot=True)
    assert point.uncertainty_source == "bootstrap"
    assert np.array_equal(point.draws("theta", source="posterior"), point.posterior["theta"].values[0])
    # the item model's arrays: the posterior's draws (a point estimate's one, not its bootstrap), thinned alike
    th, a, d, c = est.item_model_draws(max_draws=4)
    assert np.array_equal(th, flat[[0, 3, 6, 9]]) and a.shape == d.shape == c.shape == (4, 3)
    assert np.array_equal(d, est.posterior["intercept"].values.reshape(10, 3)[[0, 3, 6, 9]])
    assert est.item_model_draws(by_chain=True)[1].shape == (2, 5, 3)
    assert point.item_model_draws()[0].shape == (1, 4, 1)


def test_heldout_loglik_names_a_wrong_shape():
    est = _estimate()

    class R:
        correct = np.zeros((4, 2), dtype=np.int8)

    with pytest.raises(InputError, match="shape"):
        heldout_loglik(est, R(), np.ones((4, 2), bool))


@pytest.mark.parametrize("items", [400, 2])  # likelihoods on a few grid points (the kernel); spread wide (dense)
def test_factor_grid_posterior_matches_the_plain_sums(items, monkeypatch):
    """Both ways of the rank-one factor posterior -- the kernel that skips negligible terms, the dense matrix
    products for wide likelihoods -- give the plain sums over the grids, answered or not, and each is taken
    where it should be."""
    from mtlirt.numerics import factor_grid as fg

    rng = np.random.default_rng(0)
    N, K, Q, G = 30, 4, 41, 31
    t, g = np.linspace(-5, 5, Q), np.linspace(-4, 4, G)
    theta = rng.normal(size=(N, K))
    logL = -0.5 * items * (t[None, None, :] - theta[..., None]) ** 2 / 4.0 + rng.normal(size=(N, K, 1))
    answered = rng.random((N, K)) < 0.85
    lam = np.array([0.9, 0.7, 0.5, 0.8])
    W = np.exp(-0.5 * ((t[None, None, :] - lam[:, None, None] * g[None, :, None]) / np.sqrt(1 - lam**2)[:, None,
                                                                                                          None]) ** 2)
    W /= W.sum(axis=2, keepdims=True)
    log_prior = -0.5 * g**2
    L = np.where(answered[..., None], np.exp(logL), 1.0)
    Z = np.einsum("kgt,nkt->nkg", W, L)
    lp = log_prior + np.log(Z).sum(axis=1)
    pg = np.exp(lp - logsumexp(lp, axis=1, keepdims=True))
    pt = L * np.einsum("ng,nkg,kgt->nkt", pg, 1.0 / Z, W)
    assert (fg._spread(logL, answered) > fg.DENSE_SPREAD) == (items == 2)
    for dense_from in (2.0, -1.0):  # the kernel for every spread, then the dense products for every spread
        monkeypatch.setattr(fg, "DENSE_SPREAD", dense_from)
        got_g, got_t = fg.factor_grid_posterior(logL, answered, W, log_prior)
        np.testing.assert_allclose(got_g, pg, rtol=0, atol=1e-12)
        np.testing.assert_allclose(got_t, pt, rtol=0, atol=1e-12)


def test_loglik_points_is_the_interpolated_likelihood():
    """The compiled pointwise likelihood is :func:`loglik_at` plus each cell's constant, at any leading shape
    and beyond the table's range."""
    y, obs, slices, a, d, c = _data(n=9, missing=0.3, seed=7)
    tb = llm_side.tabulate(y, obs, slices, a, d, c)
    x = np.random.default_rng(8).normal(0, 6, size=(2, 3, 9, len(slices)))
    assert np.abs(x).max() > -tb.lo
    want = np.moveaxis(llm_side.loglik_at(tb, np.moveaxis(x, (2, 3), (0, 1))), (0, 1), (2, 3)) + tb.const
    got = llm_side.loglik_points(tb, x)
    assert got.shape == x.shape
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-9)
