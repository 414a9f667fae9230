"""Model checks (mtlirt.evaluate.checks): S-X2 item fit, the correlation predictive check, leave-one-LLM-out."""

import json
import warnings

import numpy as np
import pytest
import xarray as xr

import mtlirt
from mtlirt import simulate
from mtlirt.data.responses import Responses
from mtlirt.errors import InputError
from mtlirt.estimators.correlation import principal_axes
from mtlirt.evaluate.checks import RMSEA_BOUND, ModelChecks, run_checks
from mtlirt.evaluate.correlation_check import correlation_check
from mtlirt.evaluate.item_fit import _rmsea, item_fit, item_fit_ppc, sx2_expected
from mtlirt.evaluate.loo import llm_marginal_loglik, loo_llm


def _responses(**kw):
    return Responses.from_frame(simulate(**kw).responses)


# ---------------------------------------------------------------- S-X2


def _lord_wingersky(P):
    f = np.zeros((len(P) + 1, P.shape[1]))
    f[0] = 1.0
    for j in range(len(P)):
        f[1:j + 2] = f[1:j + 2] * (1 - P[j]) + f[:j + 1] * P[j]
        f[0] *= 1 - P[j]
    return f


def test_sx2_expected_matches_the_direct_leave_one_out():
    """The stable deconvolution gives what a recursion without the item gives, and the default
    grid what a grid 30 times finer gives."""
    rng = np.random.default_rng(0)
    a, d, c = rng.lognormal(0.2, 0.3, 15), rng.normal(0, 1, 15), np.full(15, 0.2)
    E, score_prob = sx2_expected(a, d, c)
    x = np.linspace(-6, 6, 4001)
    w = np.exp(-x**2 / 2)
    w /= w.sum()
    E_fine, prob_fine = sx2_expected(a, d, c, nodes=(x, w))
    assert np.nanmax(np.abs(E - E_fine)) < 1e-7 and np.abs(score_prob - prob_fine).max() < 1e-7
    P = c[:, None] + (1 - c[:, None]) / (1 + np.exp(-(a[:, None] * x + d[:, None])))
    f = _lord_wingersky(P)
    for j in (0, 7, 14):
        fj = _lord_wingersky(np.delete(P, j, 0))
        direct = (P[j] * w * fj).sum(1) / (f @ w)[1:]  # s = 1..J
        assert np.allclose(E_fine[j, 1:15], direct[:14], atol=1e-12)
    assert np.isclose(score_prob.sum(), 1.0)


def _sx2_direct(y, E, min_expected):
    """S-X2 of every item by the rule written out: score groups 1..J-1 merged in order until each
    expects min_expected correct and wrong answers, a short last run joined to the group before."""
    N, J = y.shape
    S = y.sum(1)
    out = np.full(J, np.nan)
    for j in range(J):
        groups, acc = [], np.zeros(3)
        for s in range(1, J):
            n = float((S == s).sum())
            acc += (n, y[S == s, j].sum(), np.nan_to_num(E[j, s]) * n)
            if acc[2] >= min_expected and acc[0] - acc[2] >= min_expected:
                groups.append(acc)
                acc = np.zeros(3)
        if acc[0] > 0:
            if groups:
                groups[-1] = groups[-1] + acc
            else:
                groups.append(acc)
        if groups:
            n, o, e = np.array(groups).T
            out[j] = np.nansum((o - e) ** 2 / (e * (1 - e / n)))
    return out


@pytest.mark.parametrize("n_llms", [12, 400])
def test_sx2_groups_as_the_rule_says(n_llms):
    """The score groups merged for every item at once, visiting only the scores that occur, give
    the S-X2 of the rule written out item by item: few LLMs on many items (most score groups
    empty) and many LLMs."""
    from mtlirt.evaluate.item_fit import _sx2_block

    rng = np.random.default_rng(n_llms)
    J = 60
    a, d = rng.lognormal(0.0, 0.3, J), rng.normal(0, 1, J)
    theta = rng.normal(size=n_llms)
    y = (rng.random((n_llms, J)) < 1 / (1 + np.exp(-(a * theta[:, None] + d)))).astype(np.int64)
    E, _ = sx2_expected(a, d)
    for m in (1.0, 3.0):
        sx2, df, groups, expected = _sx2_block(y, E, 2, m)
        want = _sx2_direct(y, E, m)
        assert np.array_equal(np.isnan(sx2), np.isnan(want)) and np.allclose(sx2, want, rtol=1e-12, equal_nan=True)
        assert (groups >= 1).all() and np.array_equal(df, groups - 2)
    assert n_llms > 100 or (np.bincount(y.sum(1), minlength=J + 1) == 0).sum() > J / 2


def test_item_fit_holds_the_nominal_rate_when_the_model_is_right():
    """2PL truth fitted by STL and by MTL: about 5% of items below p = 0.05, and (almost) no flag."""
    shares, flags = [], 0
    for seed in (21, 22):
        r = _responses(n_llms=1000, domain_sizes=[10] * 4 + [25] * 2, similarity=0.3, seed=seed)
        for method in ("stl", "mtl") if seed == 21 else ("stl",):
            tab = item_fit(mtlirt.fit(r, method), r)
            assert len(tab) == r.n_items and tab["p_value"].notna().all()
            assert (tab["df"] > 0).all() and (tab["n"] == 1000).all()
            assert tab["rmsea"].max() < RMSEA_BOUND  # no misfit of a size that matters either
            shares.append(float((tab["p_value"] < 0.05).mean()))
            flags += int(tab["misfit"].sum())
    assert 0.01 <= np.mean(shares) <= 0.1, shares
    assert flags <= 2


def test_item_fit_flags_items_from_a_wrong_model():
    """Items whose key is reversed (negative discrimination, which a 2PL with a > 0 cannot fit) are
    flagged, in a 10-item and in a 25-item domain; the others are not."""
    sim = simulate(n_llms=1000, domain_sizes=[10] * 4 + [25] * 2, similarity=0.3, seed=23)
    r = Responses.from_frame(sim.responses)
    bad = [3, 52]  # d01's 4th item, d05's 13th
    r.correct[:, bad] = 1 - r.correct[:, bad]
    est = mtlirt.fit(r, "mtl")
    tab = item_fit(est, r)
    assert tab["misfit"].iloc[bad].all() and (tab["p_value"].iloc[bad] < 1e-6).all()
    assert tab["misfit"].drop(index=bad).sum() <= 1
    # the size of the misfit, as mirt's RMSEA.S_X2 (its documented example: S-X2 19.477 on 8 df, 392
    # respondents, RMSEA 0.061)
    assert (tab["rmsea"].iloc[bad] > RMSEA_BOUND).all() and (tab["rmsea"].drop(index=bad) < RMSEA_BOUND).all()
    assert round(_rmsea(19.477, 8, 392), 3) == 0.061 and _rmsea(5.0, 8, 392) == 0.0
    assert ModelChecks(items=tab).summary()["item_fit"]["misfit_rmsea_above_bound"] == 2
    # the predictive version on the point fit (one draw): the data's S-X2 far above the replicate's
    ppc = item_fit_ppc(est, r)
    assert (ppc["s_x2_data"].iloc[bad] > 5 * ppc["s_x2_replicated"].iloc[bad]).all()
    rest = ppc.drop(index=bad)
    assert 0.7 < rest["s_x2_data"].mean() / rest["s_x2_replicated"].mean() < 1.3


def test_item_fit_with_missing_answers():
    """Answers missing at random inside a domain: imputed (every LLM that ran the domain is used),
    or only the LLMs that answered the whole domain; a reversed item is flagged either way."""
    r = _responses(n_llms=800, domain_sizes=[8, 12, 2], seed=2, missing=0.05)
    r.correct[:, 3] = np.where(r.mask[:, 3], 1 - r.correct[:, 3], 0)
    est = mtlirt.fit(r, "stl")
    tab = item_fit(est, r)
    assert (tab["n"].iloc[:20] == 800).all() and 0.03 < tab["imputed"].iloc[0] < 0.07
    only = item_fit(est, r, impute=0)
    full = r.mask[:, :8].all(1).sum()
    assert (only["n"].iloc[:8] == full).all() and full < 800 and (only["imputed"] == 0).all()
    for t in (tab, only):
        assert t["misfit"].iloc[3] and t["misfit"].sum() <= 2
        assert t["p_value"].iloc[20:].isna().all()  # a 2-item domain leaves no degrees of freedom
        assert t["rmsea"].iloc[20:].isna().all()
    assert np.array_equal(item_fit(est, r)["s_x2"].to_numpy(), tab["s_x2"].to_numpy(), equal_nan=True)  # seeded
    assert item_fit(mtlirt.fit(r, "accuracy"), r) is None
    with pytest.raises(InputError):
        item_fit(est, r.subset(llms=list(r.llms[:200])))


# ---------------------------------------------------------------- correlations


def test_principal_axes_recover_a_factor_structure():
    lam = np.array([[0.9, 0.0], [0.8, 0.3], [0.7, -0.4], [0.6, 0.5], [0.9, 0.1], [0.5, -0.5]])
    R = lam @ lam.T
    np.fill_diagonal(R, 1.0)
    L = principal_axes(R, 2)
    fit = L @ L.T
    off = ~np.eye(6, dtype=bool)
    assert np.abs(fit[off] - R[off]).max() < 1e-3


@pytest.fixture(scope="module")
def rank2():
    return _responses(n_llms=400, domain_sizes=[10] * 6, rank=2, similarity=0.1, seed=5)


def test_correlation_check_flags_a_wrong_structure(rank2):
    """Rank-2 truth: a rank-1 MTL fit and the pooled fit misfit; a rank-2 fit does not."""
    one = correlation_check(mtlirt.fit(rank2, "mtl", rank=1), rank2, n_replicates=20, seed=1)
    assert one.global_p < 0.05 and one.n_misfit >= 6
    pooled = correlation_check(mtlirt.fit(rank2, "pooled"), rank2, n_replicates=20, seed=1)
    assert pooled.global_p < 0.05 and pooled.n_misfit >= 10
    two = correlation_check(mtlirt.fit(rank2, "mtl", rank=2), rank2, n_replicates=20, seed=1)
    assert two.global_p > 0.1 and two.n_misfit <= 2


def test_correlation_check_passes_the_right_structure():
    """Rank-1 truth, rank-1 MTL: the statistic of the data is the reported domain_corr, and few pairs misfit;
    the replicates refitted in two worker processes are those refitted in this one."""
    r = _responses(n_llms=400, domain_sizes=[10] * 6, rank=1, similarity=0.1, seed=5)
    est = mtlirt.fit(r, "mtl")
    chk = correlation_check(est, r, n_replicates=20, seed=1, n_jobs=2)
    assert np.allclose(chk.observed, est.point("domain_corr"))
    assert chk.global_p > 0.1 and chk.n_misfit <= 2
    t = chk.table
    assert list(t.columns[:3]) == ["domain_a", "domain_b", "observed"] and len(t) == 15
    assert ((t["replicated_lower"] <= t["replicated_mean"]) & (t["replicated_mean"] <= t["replicated_upper"])).all()
    assert chk.replicated.shape == (20, 6, 6)
    again = correlation_check(est, r, n_replicates=3, seed=1, n_jobs=1)
    assert np.array_equal(again.replicated, chk.replicated[:3])  # seeded; the same in the worker processes
    assert correlation_check(mtlirt.fit(r, "stl"), r) is None


def test_correlation_check_estimate_world_is_the_error_bootstraps(monkeypatch):
    """world="estimate" draws the truths of the world the fit's error bootstrap drew from: its centre,
    items and deviation spreads (an LLM's domain traits around the fit's centre with the world's
    variance), not around a centre refitted to the reported, shrunk scores; cells without responses too."""
    import mtlirt.results.finish as finish
    from mtlirt.evaluate.correlation_check import _worlds

    r = _responses(n_llms=100, domain_sizes=[8] * 4, similarity=0.2, seed=3, block_missing=0.2)
    world = {}
    real = finish.run_bootstrap

    def spy(*args, **kw):
        world.update(kw["point"])
        return real(*args, **kw)

    monkeypatch.setattr(finish, "run_bootstrap", spy)
    est = mtlirt.fit(r, "mtl", bootstrap=2, seed=0, n_jobs=1)
    assert est.predicted.any()
    what, gen = _worlds(est, r, 4000, np.random.default_rng(0), None, "estimate")
    draws = list(gen)
    truth = np.stack([t for t, *_ in draws])
    _, a, d, c = draws[0]
    assert np.array_equal(a, world["a"]) and np.array_equal(d, world["d"]) and "error-bootstrap world" in what
    var = world["psi"] + world["eta_var"] @ (world["loadings"] ** 2).T  # N x K: the world's variance of a truth
    z = (truth.mean(axis=0) - world["centre"]) / np.sqrt(var / len(truth))
    assert np.abs(z).max() < 5
    ratio = truth.var(axis=0) / var
    assert 0.93 < ratio.mean() < 1.07 and 0.8 < ratio.min() and ratio.max() < 1.25
    tree = est.tree.copy()  # a fit that records no centre (written before it was recorded)
    tree["posterior"] = xr.DataTree(tree["posterior"].to_dataset().drop_vars("centre"))
    with pytest.raises(InputError, match="records no centre"):
        correlation_check(mtlirt.Estimate(tree), r, n_replicates=2, world="estimate")


def test_correlation_statistic_with_llms_that_ran_some_domains():
    """Block missingness: pairs over the LLMs that ran both domains, reliabilities over those that
    ran each; the statistic stays near the true correlation (0.9 by construction)."""
    from mtlirt.evaluate.correlation_check import correlation_statistic

    sim = simulate(n_llms=600, domain_sizes=[15] * 8, similarity=0.1, seed=4, block_missing=0.4)
    r = Responses.from_frame(sim.responses)
    assert (np.column_stack([~r.mask[:, s].any(1) for s in r.domain_slices])).mean() > 0.1
    T = correlation_statistic(r)
    iu = np.triu_indices(8, 1)
    truth = np.corrcoef(sim.domain_scores.to_numpy().T)[iu]
    assert abs(T[iu].mean() - truth.mean()) < 0.04 and np.allclose(np.diag(T), 1.0)


# ---------------------------------------------------------------- Bayes: LOO and the rest


def test_loo_quadrature_sums_as_written_out():
    """The compiled sums of the leave-one-LLM-out quadrature against the formula in numpy: rank 2, empty
    cells, and one overall node with zero weight (the overall traits given)."""
    from scipy.special import logsumexp

    from mtlirt.evaluate._loo_sums import marginal_loglik

    rng = np.random.default_rng(4)
    N, K, Q, P = 30, 4, 9, 6
    L, nodes = -rng.gamma(2.0, 3.0, (N, K, Q)), rng.normal(size=(N, K, Q))
    lbase, lsd, empty = rng.normal(size=Q), rng.normal(size=(N, K)), rng.random((N, K)) < 0.2
    lam = rng.uniform(-0.5, 0.6, (K, 2))
    psi = np.sqrt(1 - (lam**2).sum(1))
    for eta_nodes, lw in ((rng.normal(size=(N, P, 2)), rng.normal(size=(N, P))),
                          (rng.normal(size=(N, 1, 2)), np.zeros((N, 1)))):
        m = np.einsum("npr,kr->npk", eta_nodes, lam)
        z = (nodes[:, None] - m[..., None]) / psi[:, None]  # N P K Q
        cell = (logsumexp(L[:, None] + lbase - 0.5 * z**2, axis=-1) + lsd[:, None] - np.log(psi)
                - 0.5 * np.log(2 * np.pi))
        want = logsumexp(lw + np.where(empty[:, None], 0.0, cell).sum(-1), axis=1)
        got = np.empty(N)
        marginal_loglik(L, nodes, lbase, lsd, empty, eta_nodes, lam, psi, lw, got)
        assert np.allclose(got, want, rtol=0, atol=1e-10)


def test_psis_loo_where_an_llm_likelihood_does_not_move():
    """An LLM whose marginal likelihood is the same in every draw (one that ran one domain only, items
    fixed: no sampled parameter changes it) has equal weights: arviz's PSIS raises on it ("All tail values
    are the same"); here it gets its likelihood as its elpd, p_loo 0 and a Pareto k of NaN (not flagged),
    and every other LLM what arviz gives it without that LLM."""
    import arviz as az
    import xarray as xr

    from mtlirt.evaluate.loo import psis_loo_llm

    rng = np.random.default_rng(0)
    C, D, N = 2, 200, 6
    ll = rng.normal(size=(C, D, N)) - 3.0
    ll[..., 2] = -7.25
    ll[..., 4] = -6.0 + 1e-15 * rng.normal(size=(C, D))  # the same up to rounding
    coords = {"chain": np.arange(C), "draw": np.arange(D), "llm": list("abcdef")}
    dims = ("chain", "draw", "llm")
    tree = xr.DataTree.from_dict({"posterior": xr.Dataset({"overall": (dims, rng.normal(size=(C, D, N)))},
                                                          coords=coords),
                                  "log_likelihood": xr.Dataset({"llm_marginal": (dims, ll)}, coords=coords)})
    moving = [0, 1, 3, 5]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match="tail values"):
            az.loo(tree, var_name="llm_marginal", pointwise=True)
        res = psis_loo_llm(tree)
        rest = az.loo(tree.isel(llm=moving), var_name="llm_marginal", pointwise=True)
        whole = psis_loo_llm(tree.isel(llm=moving))
    e, k = res.elpd_i.values, res.pareto_k.values
    assert np.allclose(e[[2, 4]], [-7.25, -6.0]) and np.isnan(k[[2, 4]]).all() and np.isfinite(k[moving]).all()
    assert np.allclose(e[moving], rest.elpd_i.values) and np.allclose(k[moving], rest.pareto_k.values)
    assert np.isclose(res.elpd, rest.elpd - 13.25) and np.isclose(res.p, rest.p)
    assert np.isclose(res.se, np.sqrt(N * np.var(e, ddof=1)))  # every LLM counted
    assert np.array_equal(whole.elpd_i.values, rest.elpd_i.values)  # none flat: arviz's own loo


def _bayes_fit():
    r = _responses(n_llms=60, domain_sizes=[8] * 4 + [20] * 2, similarity=0.3, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a short chain's convergence warning
        est = mtlirt.fit(r, "bayes", items="fixed", draws=150, tune=150, chains=2, progress=False)
    return r, est


@pytest.mark.xdist_group("bayes-fixed-60x6")  # with test_scoring.py's fit of the same shape: one compiled model
def test_checks_of_a_bayesian_fit():
    """One tiny NUTS fit (its compilation is the cost; one test, so that parallel workers do not
    each fit it): leave-one-LLM-out, its quadrature, run_checks, the record, the plots and the report."""
    r, est = _bayes_fit()
    _loo_per_llm_on_the_marginal_likelihood(r, est)
    _marginal_loglik_matches_the_tabulated_integral(r, est)
    mc = _run_checks_and_the_record(r, est)
    _plots_and_report_section(r, est, mc)


def _loo_per_llm_on_the_marginal_likelihood(r, est):
    loo = loo_llm(est, r)
    t = loo.table
    assert list(t["llm"]) == list(r.llms) and np.isfinite(t["elpd_loo"]).all() and np.isfinite(t["pareto_k"]).all()
    assert loo.overall_integrated and loo.n_draws == 300
    assert np.isclose(t["elpd_loo"].sum(), loo.elpd.elpd)
    # the overall trait integrated out: importance sampling works for (nearly) every LLM, and the
    # effective number of parameters is that of the shared ones (loadings), not one per LLM
    assert (~t["k_ok"]).sum() <= 3 and loo.summary()["p_loo"] < 15
    cond = loo_llm(est, r, integrate_overall=False)
    assert (~cond.table["k_ok"]).sum() > 30 and not cond.overall_integrated
    # the same, through the fit's own log_likelihood group (bayes.diagnostics)
    from mtlirt.bayes import add_llm_marginal_log_likelihood
    from mtlirt.bayes.diagnostics import loo as bayes_loo

    tree = est.tree.copy()
    add_llm_marginal_log_likelihood(tree, r)
    assert set(tree["log_likelihood"].to_dataset().data_vars) == {"y", "llm_marginal"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert np.isclose(bayes_loo(tree, var_name="llm_marginal").elpd, loo.elpd.elpd)


def _marginal_loglik_matches_the_tabulated_integral(r, est):
    """Given the overall trait, the Gauss-Hermite marginal is bayes.marginal's integral on its fine grid."""
    from mtlirt.bayes.fixed_items import build_tables
    from mtlirt.numerics.llm_side import conditional_moments

    post = est.posterior
    # the default 32 nodes per domain trait are within 1e-2 at every draw checked, 64 within 1e-3 (16 nodes,
    # the old default, missed by 0.026-0.076 at the worst of these draws: the nodes sit on the LLM's posterior
    # over all draws, and a draw's narrow conditional prior off that centre needs more of them)
    ml = llm_marginal_loglik(est, r, integrate_overall=False, max_draws=10_000)
    ml64 = llm_marginal_loglik(est, r, integrate_overall=False, max_draws=10_000, n_theta_nodes=64)
    tables = build_tables(r, post["discrimination"].values[0, 0], post["intercept"].values[0, 0], 0.0)
    err, err64 = [], []
    for ch in range(post.sizes["chain"]):
        for t in range(0, post.sizes["draw"], 5):
            eta, lam = post["eta"].values[ch, t], post["loadings"].values[ch, t]
            psi = np.sqrt(1 - (lam**2).sum(-1))
            exact = (conditional_moments(tables, eta @ lam.T, psi)[2] + tables.const).sum(1)
            err.append(np.abs(ml["loglik"][ch, t] - exact).max())
            err64.append(np.abs(ml64["loglik"][ch, t] - exact).max())
    assert len(err) == 60 and max(err) < 1e-2 and max(err64) < 1e-3


def _run_checks_and_the_record(r, est):
    mc = run_checks(est, r, n_replicates=10)
    assert mc.correlation is not None and mc.correlation.world.startswith("posterior draws")
    assert mc.items is not None and mc.loo is not None and not mc.skipped
    s = json.loads(json.dumps(mc.summary()))
    assert set(s) == {"correlation", "item_fit", "item_fit_ppc", "loo_llm"} and s["loo_llm"]["llms"] == 60
    ppp = mc.items_ppc["ppp"]
    assert len(ppp) == r.n_items and ppp.between(0, 1).all() and 0.3 < ppp.mean() < 0.8
    point = mtlirt.fit(r, "stl")
    mp = run_checks(point, r, correlation=False)
    mp.record(point)
    rec = point.info["diagnostics"]["checks"]
    assert "loo_llm" in rec["skipped"] and rec["item_fit"]["items"] == r.n_items
    assert point.info["diagnostics"]["converged"] is True  # the fit's own diagnostics stay
    return mc


def _plots_and_report_section(r, est, mc):
    import matplotlib.pyplot as plt

    from mtlirt.report import plots_checks as pc
    from mtlirt.report.html import render_report
    from mtlirt.report.html_checks import _checks_section

    for fig in (pc.correlation_check_matrix(mc.correlation), pc.correlation_check_pairs(mc.correlation),
                pc.item_fit_plot(mc.items), pc.loo_pareto_k(mc.loo)):
        assert fig.axes
        plt.close(fig)
    block = _checks_section("bayes", est, r, mc, 10, 40)
    assert "Model checks" in block and "Leave-one-LLM-out" in block and "not drawn" not in block
    assert block.count("<figure") == 4 and block.count("<svg ") == 4
    point = mtlirt.fit(r, "stl")
    html = render_report({"stl": point}, r, checks={"stl": run_checks(point, r, correlation=False)}, dpi=40)
    assert 'id="fit-stl-checks"' in html and "Not applicable: a point estimate" in html
    assert "Model checks" not in render_report({"stl": point}, r, checks=False, dpi=40)


def test_a_failing_check_leaves_the_others(monkeypatch):
    """A check that raises is recorded with its error and a warning, the others run with the numbers they
    give alone; the report shows the error in its place; ``errors="raise"`` lets it through."""
    from mtlirt.evaluate import checks
    from mtlirt.report.html_checks import _checks_section

    r = _responses(n_llms=150, domain_sizes=[10, 10, 12, 14], seed=3)
    est = mtlirt.fit(r, "mtl", seed=0)
    alone = run_checks(est, r, n_replicates=4, items=False)

    def broken(*args, **kwargs):
        raise RuntimeError("no expected proportions")

    monkeypatch.setattr(checks, "item_fit", broken)
    with pytest.warns(checks.CheckFailedWarning, match="item_fit failed"):
        mc = run_checks(est, r, n_replicates=4)
    assert mc.failed == {"item_fit": "RuntimeError: no expected proportions"} and mc.items is None
    assert mc.correlation.global_p == alone.correlation.global_p and "item_fit" not in mc.skipped
    s = mc.summary()
    assert s["failed"] == mc.failed and "item_fit" not in s
    assert _without_seconds(s["correlation"]) == _without_seconds(alone.summary()["correlation"])
    block = _checks_section("mtl", est, r, mc, 4, 40)
    assert "Failed, left out: RuntimeError: no expected proportions" in block
    assert "Cross-domain correlations: predictive check" in block and block.count("<figure") == 2
    with pytest.raises(RuntimeError, match="no expected proportions"):
        run_checks(est, r, n_replicates=4, errors="raise")
    with pytest.raises(ValueError, match="errors must be"):
        run_checks(est, r, errors="ignore")


# ---------------------------------------------------------------- the command line


def _without_seconds(d):
    if isinstance(d, dict):
        return {k: _without_seconds(v) for k, v in d.items() if k != "seconds"}
    return d


def test_fit_checks_on_the_command_line(tmp_path, capsys):
    """``mtlirt fit --checks`` records run_checks' summary of the fit on the data fitted in fit.json (the same
    numbers as run_checks in Python), prints one line, and ``mtlirt report`` without the data shows the record."""
    from mtlirt.cli import main
    from mtlirt.results.fitdir import read_fit

    data = tmp_path / "sim.csv"
    assert main(["simulate", "--n-llms", "150", "--domain-sizes", "10,10,12,14", "--seed", "3",
                 "--out", str(data)]) == 0
    out = tmp_path / "mtl"
    assert main(["fit", str(data), "--checks", "--check-replicates", "5", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "model checks (in fit.json): correlation: " in printed and "loo_llm not run (a point estimate" in printed
    rec = json.loads((out / "fit.json").read_text())["diagnostics"]["checks"]
    assert rec["correlation"]["replicates"] == 5 and rec["correlation"]["pairs"] == 6
    assert rec["item_fit"]["items"] == 46 and set(rec["skipped"]) == {"loo_llm"}
    r = Responses.read(data)
    est = read_fit(out)
    direct = run_checks(mtlirt.fit(r, "mtl", seed=0), r, n_replicates=5, seed=0, max_draws=200).summary()
    assert _without_seconds(direct) == _without_seconds(rec)
    assert est.info["diagnostics"]["checks"]["correlation"]["global_p"] == rec["correlation"]["global_p"]
    assert main(["report", str(out), "--out", str(tmp_path / "r.html")]) == 0
    assert "Recorded in the fit" in (tmp_path / "r.html").read_text()
    # without --checks nothing is run or recorded; too few replicates: one line, exit 2
    assert main(["fit", str(data), "--method", "stl", "--out", str(tmp_path / "stl")]) == 0
    assert "checks" not in json.loads((tmp_path / "stl" / "fit.json").read_text()).get("diagnostics", {})
    capsys.readouterr()
    assert main(["fit", str(data), "--checks", "--check-replicates", "1", "--out", str(tmp_path / "x")]) == 2
    assert capsys.readouterr().err.strip() == ("mtlirt: error: n_replicates (--check-replicates) must be an "
                                                "integer of at least 2, got 1")
    assert not (tmp_path / "x").exists()
