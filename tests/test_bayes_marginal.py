"""Tests of mtlirt.bayes.marginal: the fixed-items factor model with the domain
traits integrated out (quadrature, compiled kernel and its gradient, the
PyMC potential, the conditional draws of the domain scores)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from mtlirt.bayes import build_fixed_model, build_model, fit_bayes, load_spec
from mtlirt.bayes.fixed_items import build_tables
from mtlirt.bayes.marginal import (
    draw_domain_scores,
    kernel_inputs,
    marginal_kernel,
    marginal_loglik_np,
    quadrature_nodes,
)
from mtlirt.errors import InputError
from mtlirt.numerics.llm_side import conditional_moments
from test_bayes import toy


@pytest.fixture(scope="module")
def setup():
    """Toy data with short and long domains, missing responses, tables at the
    true items and a quadrature at a point near the truth."""
    arr, truth = toy(40, (5, 12, 60), missing=0.1, seed=4, loading=0.85)
    tables = build_tables(arr, truth["a"], truth["d"], 0.0)
    lam = truth["lam"]
    psi = np.sqrt(1 - lam**2)
    m0 = truth["eta"][:, None] * lam[None, :]
    return arr, truth, tables, m0, psi, quadrature_nodes(tables, m0, psi)


def test_quadrature_matches_fine_grid_integral(setup):
    """The 13-node quadrature reproduces the integral over the whole table grid
    when the prior moves away from where the nodes were placed."""
    arr, truth, tables, m0, psi, quad = setup
    rng = np.random.default_rng(0)
    for _ in range(3):
        m = m0 + rng.normal(0, 0.1, size=m0.shape)
        ps = psi * np.exp(rng.normal(0, 0.15, size=psi.shape))
        exact = conditional_moments(tables, m, ps)[2]
        approx = marginal_loglik_np(quad, m, ps)
        assert np.abs(approx - exact).max() < 2e-3
        assert abs(approx.sum() - exact.sum()) < 1e-2


@pytest.mark.parametrize("guessing", [0.0, 0.25])
def test_conditional_moments_are_the_grid_sums(setup, guessing):
    """The compiled conditional moments are the plain sums over the whole table grid (2PL tables by
    answered pattern; 3PL tables per cell), priors far off included."""
    arr, truth, _, m0, psi, _ = setup
    tables = build_tables(arr, truth["a"], truth["d"], guessing)
    m = m0 + np.random.default_rng(1).normal(0, 1.5, size=m0.shape)
    x = tables.lo + tables.h * np.arange(tables.n_grid)
    lp = tables.s[..., None] * x - tables.F[tables.table] - (x - m[..., None]) ** 2 / (2 * psi[None, :, None] ** 2)
    w = np.exp(lp - lp.max(-1, keepdims=True))
    mean = (w * x).sum(-1) / w.sum(-1)
    sd = np.sqrt((w * (x - mean[..., None]) ** 2).sum(-1) / w.sum(-1))
    logi = (np.log(w.sum(-1)) + lp.max(-1) + np.log(tables.h) - np.log(psi)[None, :] - 0.5 * np.log(2 * np.pi))
    got = conditional_moments(tables, m, psi)
    assert np.allclose(got[0], mean, rtol=0, atol=1e-12) and np.allclose(got[1], sd, rtol=0, atol=1e-12)
    assert np.allclose(got[2], logi, rtol=1e-13, atol=1e-10)


def test_kernel_value_and_gradient(setup):
    arr, truth, tables, m0, psi, quad = setup
    kern = marginal_kernel()
    args = kernel_inputs(quad)  # domain-major: m and d/dm are (K, N)
    m = m0 + 0.05
    ps = psi * 1.1
    v, dm, dpsi = kern(*args, m.T.copy(), ps)
    assert np.isclose(v, marginal_loglik_np(quad, m, ps).sum(), rtol=1e-10)
    eps = 1e-6
    for i, k in ((0, 0), (7, 1), (39, 2)):
        m2 = m.copy()
        m2[i, k] += eps
        assert np.isclose((kern(*args, m2.T.copy(), ps)[0] - v) / eps, dm[k, i], rtol=1e-3, atol=1e-4)
    for k in range(3):
        p2 = ps.copy()
        p2[k] += eps
        assert np.isclose((kern(*args, m.T.copy(), p2)[0] - v) / eps, dpsi[k], rtol=1e-3, atol=1e-3)
    # a prior far from every node (warm-up territory): the log-domain path,
    # finite, and equal to the numpy reference
    v_far, dm_far, _ = kern(*args, (m + 40.0).T.copy(), ps)
    assert np.isfinite(v_far) and np.all(np.isfinite(dm_far))
    assert np.isclose(v_far, marginal_loglik_np(quad, m + 40.0, ps).sum(), rtol=1e-10)
    # some cells far, the others not: each path where it belongs
    mix = m.copy()
    mix[::3] += 40.0
    v_mix = kern(*args, mix.T.copy(), ps)[0]
    assert np.isclose(v_mix, marginal_loglik_np(quad, mix, ps).sum(), rtol=1e-10)


def test_kernel_does_not_depend_on_alignment(setup):
    """Bit for bit the same value and gradient wherever the arrays start."""
    *_, m0, psi, quad = setup
    kern = marginal_kernel()
    args = list(kernel_inputs(quad)) + [m0.T.copy() + 0.05, psi * 1.1]

    def shifted(x, off):
        buf = np.empty(x.size + 8)
        view = buf[off:off + x.size].reshape(x.shape)
        view[...] = x
        return view

    ref = kern(*args)
    for off in range(1, 8):
        got = kern(*[shifted(x, (off + j) % 8) for j, x in enumerate(args)])
        assert got[0] == ref[0]
        assert np.array_equal(got[1], ref[1]) and np.array_equal(got[2], ref[2])


def test_marginal_model_potential(setup):
    """The default fixed-items factor model samples only the overall traits (their
    standardised values, mean and variance) and loadings, and its potential is the
    quadrature's marginal log-likelihood."""
    arr, truth, tables, m0, psi, _ = setup
    built = build_fixed_model(arr, "factor-2pl", item_values={"a": truth["a"], "d": truth["d"]})
    model = built.model
    assert {rv.name for rv in model.free_RVs} == {"eta_raw", "eta_mean", "eta_var", "loading_free", "loading_diag"}
    quad = built.marginal
    import pytensor

    from mtlirt.bayes.derived import factor_parts

    ip = model.initial_point()
    pot = model.replace_rvs_by_values([model.potentials[0]])[0]
    fn = pytensor.function(model.value_vars, pot, on_unused_input="ignore", mode="FAST_COMPILE")
    got = float(fn(*[ip[v.name] for v in model.value_vars]))
    eta, lam, ps = factor_parts(ip["eta_raw"], np.sinh(ip["loading_free_asinh__"]), np.exp(ip["loading_diag_log__"]),
                                arr.n_domains, built.anchors, eta_mean=ip["eta_mean"],
                                eta_var=np.exp(ip["eta_var_log__"]))
    assert not np.allclose(eta.std(0), 1.0)  # the initial point spreads the traits as the data do
    want = marginal_loglik_np(quad, eta @ lam.T, ps).sum()
    assert np.isclose(got, want, rtol=1e-9)
    # the free loadings are sampled as x = asinh(V): density N(sinh x; 0, s) cosh x, the same prior on V
    from scipy.stats import norm

    x = np.linspace(-3.0, 2.5, len(ip["loading_free_asinh__"]))
    lp = model.compile_logp(vars=[model["loading_free"]], jacobian=True, mode="FAST_COMPILE")
    scale = load_spec("factor-2pl").priors.loading_scale
    want = (norm.logpdf(np.sinh(x), 0, scale) + np.log(np.cosh(x))).sum()
    assert np.isclose(lp({**ip, "loading_free_asinh__": x}), want, rtol=1e-12)


def test_sampled_route_gives_the_overall_traits_the_population_prior(setup):
    """The overall traits the likelihood sees (``eta_raw`` standardised, then given
    ``eta_mean`` and ``eta_var``) are, under the model's prior, N LLMs drawn
    independently from N(0, 1): each draw's mean over the LLMs is N(0, 1 / N) and
    N times its variance chi2(N - 1). With the traits standardised inside the
    model (mean 0 and variance 1 in every draw) the posterior is conditioned on
    the LLMs spreading exactly like the prior on the fixed items' scale, which
    pulls the least-measured LLMs (a leaderboard's extremes) in or out."""
    import pymc as pm
    from scipy import stats

    from mtlirt.bayes.derived import factor_parts

    arr, truth, *_ = setup
    built = build_fixed_model(arr, "factor-2pl", item_values={"a": truth["a"], "d": truth["d"]})
    m = built.model
    raw, mean, var = pm.draw([m["eta_raw"], m["eta_mean"], m["eta_var"]], draws=4000, random_seed=1,
                             mode="FAST_COMPILE")
    K, n = arr.n_domains, arr.n_llms
    eta, _, _ = factor_parts(raw, np.zeros((4000, K - 1)), np.ones((4000, 1)), K, built.anchors,
                             eta_mean=mean, eta_var=var)
    e = eta[..., 0]
    assert stats.kstest(np.sqrt(n) * e.mean(1), "norm").pvalue > 0.01
    assert stats.kstest(n * e.var(1), stats.chi2(n - 1).cdf).pvalue > 0.01
    assert stats.kstest(e[:, :5].ravel(), "norm").pvalue > 0.01  # each LLM's trait N(0, 1)
    assert abs(np.corrcoef(e[:, 0], e[:, 1])[0, 1]) < 0.05  # independent LLMs


def test_nodes_placed_where_the_population_model_puts_an_llm():
    """The quadrature nodes of every cell are placed at the LLM's posterior under the
    population prior, not at the standardised start. LLMs spread 1.7 times wider than
    the start (the items' discriminations divided by 1.6) with long domains (narrow
    conditionals) put the extremes' domain scores near the edge of nodes placed at the
    start: 3 posterior sds below the lowest LLM's mean such nodes missed the integral by
    0.16, and a truncated integral pulls an LLM in (ChemBench's lowest LLM, at -5.6 on
    the population scale, sampled at -5.0). Across every LLM's posterior the quadrature
    matches the integral over the whole table grid."""
    from mtlirt.bayes.collapsed_grid import llm_posteriors
    from mtlirt.bayes.derived import factor_parts

    arr, truth = toy(30, (200, 200, 200), seed=6, loading=0.9)
    items = {"a": truth["a"] / 1.6, "d": truth["d"]}
    built = build_fixed_model(arr, "factor-2pl", item_values=items)
    quad, tables = built.marginal, built.tables
    ip = built.initvals
    _, lam, ps = factor_parts(ip["eta_raw"], ip["loading_free"], ip["loading_diag"], arr.n_domains, built.anchors)
    mu, cov = llm_posteriors(tables, quad, lam, ps)
    assert mu[:, 0].std() > 1.5  # the LLMs spread as the data put them
    sd = np.sqrt(cov[:, :, 0])
    for k in (-3.0, -1.5, 0.0, 1.5, 3.0):
        m = (mu + k * sd) @ lam.T
        err = marginal_loglik_np(quad, m, ps).sum(1) - conditional_moments(tables, m, ps)[2].sum(1)
        assert np.abs(err).max() < 0.01, (k, np.abs(err).max())


def test_a_domain_score_beyond_minus_six():
    """An LLM that answered none of 1,000 items right, with a prior mean of -2, has its domain score's
    posterior near -5.8 (sd 0.46), reaching past -6: the tables' conditional posterior and the sampled
    route's draws match the exact per-item integral there. Tables on [-6, 6] gave -5.56 (sd 0.30), and
    on ChemBench the two routes' domain scores of such LLMs (exact -7.27) 2.2 interval widths apart."""
    from scipy.special import log_expit

    from mtlirt.data.responses import Responses

    arr, truth = toy(20, (1000,), seed=8)
    y = arr.correct.copy()
    y[0] = 0
    arr = Responses.from_arrays(y, None, arr.domain_slices, llms=arr.llms, items=arr.items, domains=arr.domains)
    tables = build_tables(arr, truth["a"], truth["d"])
    m, psi = np.full((20, 1), -2.0), np.array([0.94])
    t = np.linspace(-20.0, 10.0, 30001)
    lp = log_expit(-(truth["a"][:, None] * t + truth["d"][:, None])).sum(0) - 0.5 * ((t + 2.0) / 0.94) ** 2
    w = np.exp(lp - lp.max())
    w /= w.sum()
    exact = (w * t).sum()
    exact_sd = np.sqrt((w * t**2).sum() - exact**2)
    mu, sd, _ = conditional_moments(tables, m, psi)
    assert abs(mu[0, 0] - exact) < 0.01 and abs(sd[0, 0] - exact_sd) < 0.01, (mu[0, 0], sd[0, 0], exact, exact_sd)
    D = 4000
    th, _ = draw_domain_scores(tables, quadrature_nodes(tables, m, psi), np.broadcast_to(m, (1, D, 20, 1)),
                               np.broadcast_to(psi, (1, D, 1)), seed=2)
    assert abs(th[0, :, 0, 0].mean() - exact) < 4 * exact_sd / np.sqrt(D)
    assert abs(th[0, :, 0, 0].std() / exact_sd - 1) < 0.1


def test_marginal_needs_fixed_items_and_factor(setup):
    arr = setup[0]
    spec = load_spec("factor-2pl").with_changes(trait_parameterization="marginal")
    with pytest.raises(InputError, match="items='fixed'"):
        build_model(arr, spec)
    with pytest.raises(InputError, match="traits = 'factor'"):
        load_spec("correlated-2pl").with_changes(trait_parameterization="marginal")


def test_domain_score_draws_follow_the_conditional(setup):
    """With the prior held fixed, the draws have the conditional posterior's
    mean and sd (computed on the fine grid); the same seed gives the same draws."""
    arr, truth, tables, m0, psi, quad = setup
    D = 2000
    m = np.broadcast_to(m0, (1, D) + m0.shape)
    ps = np.broadcast_to(psi, (1, D, len(psi)))
    th, acc = draw_domain_scores(tables, quad, m, ps, seed=3)
    assert th.shape == (1, D) + m0.shape and th.dtype == np.float32
    assert 0.5 < acc <= 1.0
    mu, sd, _ = conditional_moments(tables, m0, psi)
    z = (th[0].mean(0) - mu) / (sd / np.sqrt(D))
    assert abs(z.mean()) < 0.2 and 0.8 < z.std() < 1.2
    ratio = th[0].std(0) / sd
    assert 0.9 < np.median(ratio) < 1.1
    th2, _ = draw_domain_scores(tables, quad, m, ps, seed=3)
    th3, _ = draw_domain_scores(tables, quad, m, ps, seed=4)
    assert np.array_equal(th, th2) and not np.array_equal(th2, th3)


def test_map_gives_conditional_means(setup):
    """A point estimate of the marginal model reports each domain score's
    conditional posterior mean, not a random draw."""
    arr, truth, *_ = setup
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tree = fit_bayes(arr, "factor-2pl", algorithm="map", items="fixed", progress=False,
                         item_values={"a": truth["a"], "d": truth["d"]}, map_maxiter=300)
    post = tree["posterior"]
    assert post.sizes["draw"] == 1
    th = post["theta"].values[0, 0]
    # the overall traits the likelihood sees: the reported (standardised) ones at the
    # traits' mean and variance over the LLMs
    eta = post["eta_mean"].values[0, 0] + np.sqrt(post["eta_var"].values[0, 0]) * post["eta"].values[0, 0]
    lam = post["loadings"].values[0, 0]
    psi = np.sqrt(1 - (lam**2).sum(-1))
    tables = build_tables(arr, truth["a"], truth["d"], 0.0)
    mu = conditional_moments(tables, eta @ lam.T, psi)[0]
    assert np.allclose(th, mu, atol=1e-5)
    assert np.corrcoef(th.ravel(), truth["theta"].ravel())[0, 1] > 0.7


@pytest.mark.slow  # two real NUTS runs
def test_fixed_items_fit_is_reproducible(setup):
    """The same seed gives the same draws, to the last bit (the compiled
    marginal kernel must not depend on memory alignment, as with fastmath)."""
    arr, truth, *_ = setup
    kw = dict(items="fixed", llm_side="sampled", item_values={"a": truth["a"], "d": truth["d"]}, draws=100, tune=100,
              chains=2, seed=9, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t1 = fit_bayes(arr, "factor-2pl", **kw)
        t2 = fit_bayes(arr, "factor-2pl", **kw)
    for v in ("theta", "overall", "loadings"):
        assert np.array_equal(t1["posterior"][v].values, t2["posterior"][v].values), v


def test_expected_accuracy_from_the_tables_is_the_items_mean_probability():
    """The compiled sums of the domains' tables give every draw's expected accuracy, the mean of P_ij over
    all items, within the tables' interpolation error; beyond the tables' range P is flat."""
    from mtlirt.bayes.derived import expected_accuracy_tables

    arr, truth = toy(n=12, sizes=(5, 9, 4), guessing=0.2, seed=4)
    tables = build_tables(arr, truth["a"], truth["d"], 0.2)
    rng = np.random.default_rng(5)
    theta = rng.normal(0, 2, size=(2, 3, arr.n_llms, arr.n_domains)).astype(np.float32)
    theta[0, 0, 0] = [-30.0, 30.0, 0.5]
    x = truth["a"] * theta[..., arr.item_domain].astype(np.float64) + truth["d"]
    P = 0.2 + 0.8 / (1 + np.exp(-x))
    got = expected_accuracy_tables(theta, tables)
    assert got.shape == (2, 3, arr.n_llms)
    np.testing.assert_allclose(got / arr.n_items, P.mean(-1), atol=1e-4)
    # clamped at the grid's ends: all the domains' floors at -30, every item certain at 30
    edge = expected_accuracy_tables(np.array([[[[-30.0, -30.0, -30.0]], [[30.0, 30.0, 30.0]]]]), tables)
    np.testing.assert_allclose(edge[0, :, 0], [0.2 * arr.n_items, arr.n_items], atol=1e-3)
