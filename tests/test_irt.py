"""Single-domain IRT (STL): recovery, extremes, missing data, evaluators."""

import numpy as np
import pytest

from mtlirt.data.responses import Responses
from mtlirt.data.simulate import simulate
from mtlirt.estimators import em_steps, irt, trait_scoring
from mtlirt.estimators.heldout import cell_loglik
from mtlirt.estimators.trait_scoring import theta_likelihood


def _slices(sim):
    out, s = [], 0
    for n in sim.settings["domain_sizes"].values():
        out.append(slice(s, s + n))
        s += n
    return out


def _corr(x, y):
    return float(np.corrcoef(x, y)[0, 1])


@pytest.fixture(scope="module")
def small_sim():
    return simulate(400, domain_sizes=[25, 60], similarity=0.5, seed=3)


@pytest.fixture(scope="module")
def small_fit(small_sim):
    return irt.fit_stl(small_sim.to_responses())


def test_stl_recovers_traits_and_items(small_sim, small_fit):
    f = small_fit
    assert f.converged and f.n_iter < 100
    truth = small_sim.domain_scores.to_numpy()
    assert _corr(f.theta[:, 0], truth[:, 0]) > 0.9
    assert _corr(f.theta[:, 1], truth[:, 1]) > 0.95
    items = small_sim.items
    assert _corr(f.a, items.discrimination) > 0.7
    assert _corr(f.d, items.intercept) > 0.95
    # discrimination on the right scale (true traits have variance ~1)
    assert 0.7 < np.median(f.a / items.discrimination) < 1.3


def test_theta_standardised_and_internal_roundtrip(small_sim, small_fit):
    f = small_fit
    np.testing.assert_allclose(f.theta.mean(axis=0), 0, atol=1e-10)
    np.testing.assert_allclose(f.theta.std(axis=0), 1, atol=1e-10)
    th, a, d = f.internal()
    idom = f.item_domain
    # the linear predictor is the same on both scales
    z_std = f.a * f.theta[:, idom] + f.d
    z_int = a * th[:, idom] + d
    np.testing.assert_allclose(z_std, z_int, atol=1e-9)
    assert np.isfinite(f.theta_se).all() and (f.theta_se > 0).all()


def test_extreme_llms_and_items_stay_finite():
    sim = simulate(120, domain_sizes=[12, 20], seed=5)
    Y = sim.correct.copy()
    Y[0] = 1  # all correct
    Y[1] = 0  # all wrong
    Y[:, 3] = 1  # an item everybody solves
    Y[:, 20] = 0  # an item nobody solves
    f = irt.fit_stl(Responses.from_arrays(Y, None, _slices(sim)))
    for arr in (f.theta, f.a, f.d, f.theta_se):
        assert np.isfinite(arr).all()
    assert f.converged
    assert (f.theta[0] == f.theta.max(axis=0)).all()
    assert (f.theta[1] == f.theta.min(axis=0)).all()
    assert f.d[3] > f.d[:12].max() - 1e-9
    assert f.d[20] < f.d[12:].min() + 1e-9
    assert (f.a > 0).all() and (f.a < 10).all()


def test_tabulated_matches_dense_evaluator():
    sim = simulate(150, domain_sizes=[15, 40], missing=0.1, seed=2)
    data = irt.ResponseData.from_responses(sim.to_responses())
    tab = theta_likelihood(data)
    assert tab.kind == "tabulated" and tab.n_cells > 0
    dense = irt.DenseThetaLik(data)
    rng = np.random.default_rng(0)
    a = np.exp(0.3 * rng.standard_normal(data.J))
    d = rng.standard_normal(data.J)
    th = np.clip(rng.standard_normal((data.N, data.K)) * 1.5, -5, 5)
    tab.set_items(a, d)
    dense.set_items(a, d)
    g1, i1 = tab.theta_derivs(th)
    g2, i2 = dense.theta_derivs(th)
    np.testing.assert_allclose(g1, g2, atol=1e-4)
    np.testing.assert_allclose(i1, i2, atol=1e-4)
    np.testing.assert_allclose(tab.theta_loglik(th), dense.theta_loglik(th), atol=1e-4)
    # and the exact log-likelihood
    idom = data.item_domain
    z = a * th[:, idom] + d
    ll = np.where(sim.observed, sim.correct * z - np.logaddexp(0, z), 0.0)
    np.testing.assert_allclose(dense.theta_loglik(th).sum(), ll.sum(), rtol=1e-10)


def _floor_case():
    """Three domains (floors 0.2, none, 0.35), 10% missing cells and an unobserved block."""
    sim = simulate(150, domain_sizes=[15, 40, 7], missing=0.1, seed=2)
    sl = _slices(sim)
    obs = sim.observed.copy()
    Y = sim.correct.copy()
    obs[:10, sl[1]] = False
    Y[~obs] = 0
    c = np.repeat([0.2, 0.0, 0.35], [15, 40, 7])
    data = irt.ResponseData(Y, obs, sl, guessing=c)
    rng = np.random.default_rng(0)
    a = np.exp(0.3 * rng.standard_normal(data.J))
    d = rng.standard_normal(data.J)
    th = np.clip(rng.standard_normal((data.N, data.K)) * 1.5, -5, 5)
    return data, obs, a, d, th


def test_tabulated_floor_matches_dense_evaluator():
    """The tabulated evaluator with one floor per domain: the dense numbers (gradient,
    Fisher information, log-likelihood) to 1e-8 on a fine grid, 1e-5 on the default one;
    a subset of rows gives those rows' values; so with floors that differ inside a domain."""
    data, obs, a, d, th = _floor_case()
    tab = theta_likelihood(data)
    assert tab.kind == "tabulated" and tab.n_cells > 0 and len(tab.yj) > 0
    dense = irt.DenseThetaLik(data)
    dense.set_items(a, d)
    g2, i2 = dense.theta_derivs(th)
    ll2 = dense.theta_loglik(th)
    fine = irt.TabulatedThetaLik(data, np.nonzero(~obs & data.row_obs[:, data.item_domain]), grid_step=0.002)
    assert fine.n_cells == tab.n_cells
    for lik, tol in ((fine, 1e-8), (tab, 1e-5)):
        lik.set_items(a, d)
        g1, i1 = lik.theta_derivs(th)
        np.testing.assert_allclose(g1, g2, rtol=0, atol=tol)
        np.testing.assert_allclose(i1, i2, rtol=0, atol=tol)
        np.testing.assert_allclose(lik.theta_loglik(th), ll2, rtol=0, atol=tol)
    # the observed information: the dense one, and the gradient's numerical derivative
    o1 = fine.theta_derivs(th, observed=True)[1]
    np.testing.assert_allclose(o1, dense.theta_derivs(th, observed=True)[1], rtol=0, atol=1e-8)
    eps = 1e-5
    num = (dense.theta_derivs(th - eps)[0] - dense.theta_derivs(th + eps)[0]) / (2 * eps)
    np.testing.assert_allclose(o1, num, rtol=0, atol=1e-5)
    assert np.abs(o1 - i2).max() > 1e-3  # with a floor it is not the Fisher information
    # the exact log-likelihood, from the item model
    z = a * th[:, data.item_domain] + d
    P = data.c + (1 - data.c) / (1 + np.exp(-z))
    Y = data.Y.astype(bool)
    ll = np.where(obs, np.where(Y, np.log(P), np.log1p(-P)), 0.0)
    np.testing.assert_allclose(fine.theta_loglik(th).sum(), ll.sum(), rtol=1e-12)
    rows = np.array([0, 7, 20, 149])
    g3, i3 = tab.theta_derivs(th[rows], rows=rows)
    np.testing.assert_array_equal(g3, tab.theta_derivs(th)[0][rows])
    np.testing.assert_array_equal(i3, tab.theta_derivs(th)[1][rows])
    g4, _ = dense.theta_derivs(th[rows], rows=rows)
    np.testing.assert_allclose(g4, g2[rows], rtol=0, atol=1e-12)
    data.set_floor(data.c.copy())  # the same floors: the evaluator is kept
    assert theta_likelihood(data) is tab
    # floors that differ inside a domain (and items without one in a floored domain) stay tabulated
    c = data.c.copy()
    c[0], c[3], c[58] = 0.1, 0.0, 0.5
    data.set_floor(c)
    tab = theta_likelihood(data)
    assert tab.kind == "tabulated" and tab.floored.tolist() == [True, False, True]
    dense = irt.DenseThetaLik(data)
    for lik in (tab, dense):
        lik.set_items(a, d)
    for obs_info in (False, True):
        for x, y in zip(tab.theta_derivs(th, observed=obs_info), dense.theta_derivs(th, observed=obs_info)):
            np.testing.assert_allclose(x, y, rtol=0, atol=1e-5)
    P = c + (1 - c) / (1 + np.exp(-z))
    ll = np.where(obs, np.where(Y, np.log(P), np.log1p(-P)), 0.0)
    np.testing.assert_allclose(tab.theta_loglik(th), dense.theta_loglik(th), rtol=0, atol=1e-5)
    np.testing.assert_allclose(tab.theta_loglik(th).sum(), ll.sum(), rtol=1e-7)


def test_trait_step_with_floor_reaches_the_maximum():
    """MAP traits with floors (tabulated evaluator, only the unfinished LLMs iterated):
    the MAP objective's gradient vanishes and the dense evaluator's step gives the same traits."""
    data, _, a, d, th = _floor_case()
    out = []
    for lik in (theta_likelihood(data), irt.DenseThetaLik(data)):
        lik.set_items(a, d)
        t = irt.theta_step(lik, th, tol=1e-10)
        g, _ = lik.theta_derivs(t)
        assert np.abs(g - t).max() < 1e-7
        out.append(t)
    np.testing.assert_allclose(out[0], out[1], atol=1e-5)


def test_trait_step_on_some_domains():
    """``domains``: the evaluators give those domains' derivatives (the full call's, to the bit
    for the tabulated one) and 0 elsewhere; the trait step moves those domains to the same
    maximum as a step on all of them and keeps the others' traits."""
    data, _, a, d, th = _floor_case()
    some = np.array([True, False, True])
    for lik in (theta_likelihood(data), irt.DenseThetaLik(data)):
        lik.set_items(a, d)
        for observed in (False, True):
            g0, i0 = lik.theta_derivs(th, observed=observed)
            g1, i1 = lik.theta_derivs(th, observed=observed, domains=some)
            np.testing.assert_allclose(g1[:, some], g0[:, some], rtol=0, atol=0 if lik.kind == "tabulated" else 1e-12)
            np.testing.assert_allclose(i1[:, some], i0[:, some], rtol=0, atol=0 if lik.kind == "tabulated" else 1e-12)
            assert not g1[:, ~some].any() and not i1[:, ~some].any()
        t = irt.theta_step(lik, th, tol=1e-10, centre=np.zeros_like(th), weight=np.array([0.5, 1.0, 2.0]),
                           domains=some)
        full = irt.theta_step(lik, th, tol=1e-10, centre=np.zeros_like(th), weight=np.array([0.5, 1.0, 2.0]))
        np.testing.assert_array_equal(t[:, ~some], th[:, ~some])
        np.testing.assert_allclose(t[:, some], full[:, some], rtol=0, atol=1e-9)
        assert np.abs(full[:, ~some] - th[:, ~some]).max() > 0.1


def test_trait_newton_converges_on_steep_items():
    """Steep items (a = 8, the bound): plain Newton cycled between two points with
    steps of +-1 (measured: |gradient| 7.1 after 50 steps); the safeguarded one converges."""
    rng = np.random.default_rng(1)
    Y = rng.integers(0, 2, (400, 3)).astype(np.int8)
    a, d = np.full(3, 8.0), np.array([-8.0, 0.0, 8.0])
    data = irt.ResponseData(Y, None, [slice(0, 3)])
    for lik in (theta_likelihood(data), irt.DenseThetaLik(data)):
        lik.set_items(a, d)
        th = irt.theta_step(lik, rng.uniform(-4, 4, (400, 1)), tol=1e-9)
        g, _ = lik.theta_derivs(th)
        assert np.abs(g - th).max() < 1e-6  # prior N(0, 1): gradient of the MAP objective


def test_missing_responses_and_empty_blocks():
    sim = simulate(300, domain_sizes=[20, 40], missing=0.2, similarity=0.2, seed=4)
    obs = sim.observed.copy()
    Y = sim.correct.copy()
    obs[:10, :20] = False  # ten LLMs without any response in domain 0
    Y[~obs] = 0
    r = Responses.from_arrays(Y, obs, _slices(sim))
    f = irt.fit_stl(r)
    assert np.isfinite(f.theta).all() and f.converged
    truth = sim.domain_scores.to_numpy()
    assert _corr(f.theta[10:, 0], truth[10:, 0]) > 0.8
    assert _corr(f.theta[:, 1], truth[:, 1]) > 0.9
    # no responses: the prior mean (the same value for all of them)
    assert np.ptp(f.theta[:10, 0]) < 1e-8
    # the unobserved cells do not count (answers 1 there, taken as they are)
    g = irt.fit_stl(r.with_answers(np.where(obs, Y, 1).astype(np.int8), obs))
    np.testing.assert_allclose(g.theta, f.theta, atol=1e-8)


def test_response_data_of_responses():
    """ResponseData.from_responses: the leaderboard's own answers, mask (None when complete) and domains."""
    sim = simulate(40, domain_sizes=[3, 5], missing=0.2, seed=4)
    r = sim.to_responses()
    data = irt.ResponseData.from_responses(r, guessing=0.2)
    assert data.correct is r.correct and data.obs is r.observed and data.slices == r.domain_slices
    assert np.all(data.c == 0.2) and data.K == 2
    full = irt.ResponseData.from_responses(Responses.from_arrays(sim.correct, None, r.domain_slices))
    assert full.obs is None and full.c is None


def test_guessing_and_1pl_run():
    sim = simulate(200, domain_sizes=[15, 25], guessing=0.25, seed=6)
    f = irt.fit_stl(sim.to_responses(), guessing=0.25)
    assert f.converged and np.isfinite(f.theta).all()
    assert np.allclose(f.c, 0.25)
    assert _corr(f.theta[:, 1], sim.domain_scores.to_numpy()[:, 1]) > 0.85
    g = irt.fit_stl(sim.to_responses(), model="1pl")
    for sl in _slices(sim):
        assert np.ptp(g.a[sl]) < 1e-9
    assert g.converged


def test_cell_loglik_matches_manual(small_sim, small_fit):
    f = small_fit
    rng = np.random.default_rng(1)
    rows = rng.integers(0, 400, 50)
    cols = rng.integers(0, 85, 50)
    z = f.a[cols] * f.theta[rows, f.item_domain[cols]] + f.d[cols]
    y = small_sim.correct[rows, cols]
    manual = np.mean(y * z - np.logaddexp(0, z))
    got = cell_loglik(small_sim.correct, rows, cols, f.theta, f.a, f.d, None, f.item_domain).mean()
    assert got == pytest.approx(manual, rel=1e-10)
    # with a guessing floor: p = c + (1 - c) expit(z)
    c = np.full(len(f.a), 0.2)
    p = c[cols] + (1 - c[cols]) / (1 + np.exp(-z))
    manual_c = np.log(np.where(y > 0, p, 1 - p))
    got_c = cell_loglik(small_sim.correct, rows, cols, f.theta, f.a, f.d, c, f.item_domain)
    np.testing.assert_allclose(got_c, manual_c, rtol=1e-10)


def test_exclude_equals_mask():
    sim = simulate(100, domain_sizes=[10, 20], seed=8)
    rows = np.arange(0, 100, 3)
    cols = (rows * 7) % 30
    obs = np.ones(sim.correct.shape, bool)
    obs[rows, cols] = False
    Y = np.where(obs, sim.correct, 0).astype(np.int8)
    f1 = irt.fit_stl(sim.to_responses(), exclude=(rows, cols))
    f2 = irt.fit_stl(Responses.from_arrays(Y, obs, _slices(sim)))
    np.testing.assert_allclose(f1.theta, f2.theta, atol=1e-10)
    np.testing.assert_allclose(f1.a, f2.a, atol=1e-10)


@pytest.mark.parametrize("guessing", [None, 0.2])
def test_pattern_estep_equals_per_llm_estep(guessing):
    """Short domains' E-step once per distinct response pattern gives the per-LLM statistics."""
    sim = simulate(300, domain_sizes=[1, 2, 3, 9, 12], missing=0.1, seed=3)
    x, logw = em_steps._nodes(irt.DEFAULT_PENALTIES)
    rng = np.random.default_rng(0)
    a, d = rng.uniform(0.5, 2, sim.correct.shape[1]), rng.normal(size=sim.correct.shape[1])
    data = irt.ResponseData.from_responses(sim.to_responses(), guessing=guessing)
    fast = em_steps._estep(data, a, d, x, logw)
    assert data.patterns(0)[0].shape[0] <= 3 and data.patterns(4) is None
    data.patterns = lambda k, max_items=8: None
    slow = em_steps._estep(data, a, d, x, logw)
    for key in ("eap", "moments", "Nq", "t" if guessing is None else "R"):
        np.testing.assert_allclose(fast[key], slow[key], rtol=2e-5, atol=2e-5)
    assert abs(fast["ll"] - slow["ll"]) < 1e-6 * abs(slow["ll"])


def test_calibration_converges_on_a_real_leaderboard(shared_data):
    """Open LLM Leaderboard v1 (2,000 LLMs, Winogrande and TruthfulQA, missing responses): items at
    their discrimination bound used to make the EM cycle until its sweep limit."""
    import warnings

    from mtlirt.data.validate import DataWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataWarning)
        r = Responses.read(shared_data / "oll_v1" / "responses.csv.gz")
    keep = np.zeros(r.n_llms, dtype=bool)
    keep[np.random.default_rng(0).choice(r.n_llms, 2000, replace=False)] = True
    sub = r.subset(llms=keep, items=np.isin(r.item_domain, [2, 3]))
    fit = irt.fit_stl(sub, max_iter=300)
    assert fit.converged and fit.n_iter < 300
    assert (fit.a > 0).all() and np.isfinite(fit.theta).all()


def _numpy_estep(data, a, d, c, x, logw):
    """The E-step's statistics in plain numpy, every cell summed in float64 (the reference)."""
    from scipy.special import expit

    Y = np.where(data.obs if data.obs is not None else True, data.correct, 0).astype(float)
    O = np.ones_like(Y) if data.obs is None else data.obs.astype(float)
    P = c[:, None] + (1 - c[:, None]) * expit(np.multiply.outer(a, x) + d[:, None])  # J x Q
    eap = np.empty((data.N, data.K))
    out = {"t": np.empty(data.J), "R": np.empty((data.J, len(x))), "Nq": np.empty((data.J, len(x))),
           "ll_domain": np.empty(data.K)}
    for k, sl in enumerate(data.slices):
        L = Y[:, sl] @ np.log(P[sl]) + (O[:, sl] - Y[:, sl]) @ np.log1p(-P[sl]) + logw
        m = L.max(axis=1, keepdims=True)
        W = np.exp(L - m)
        z = W.sum(axis=1, keepdims=True)
        W /= z
        eap[:, k] = W @ x
        out["t"][sl] = eap[:, k] @ Y[:, sl]
        out["R"][sl] = (W.T @ Y[:, sl]).T
        out["Nq"][sl] = (W.T @ O[:, sl]).T
        out["ll_domain"][k] = float(np.sum(np.log(z) + m))
    out["eap"] = eap
    return out


@pytest.mark.parametrize("missing,guessing", [(0.0, None), (0.2, None), (0.0, [0.0, 0.2, 0.25]),
                                              (0.2, [0.1, 0.0, 0.3])])
def test_em_kernels_match_numpy(missing, guessing):
    """The E-step's posterior kernels and the M-step's per-item kernels give the statistics, derivatives
    and objectives of the plain numpy formulas (to rounding), floors or not, missing cells or not, and
    a domain without a floor among floored ones takes the 2PL's statistics."""
    from scipy.special import expit

    sim = simulate(150, domain_sizes=[12, 30, 21], missing=missing, seed=4)
    sl = _slices(sim)
    rng = np.random.default_rng(1)
    J = sim.correct.shape[1]
    a, d = rng.uniform(0.4, 2.5, J), rng.normal(0, 1.5, J)
    c = np.zeros(J) if guessing is None else np.repeat(guessing, [s.stop - s.start for s in sl])
    data = irt.ResponseData.from_responses(sim.to_responses(), guessing=guessing and c)
    x, logw = em_steps._nodes(irt.DEFAULT_PENALTIES, 1)
    st = em_steps._estep(data, a, d, x, logw)
    ref = _numpy_estep(data, a, d, c, x, logw)
    np.testing.assert_allclose(st["eap"], ref["eap"], rtol=1e-6, atol=1e-6)  # (float32 products)
    np.testing.assert_allclose(st["ll_domain"], ref["ll_domain"], rtol=1e-6)
    fl = st["floored"]
    assert np.array_equal(fl, c > 0)
    np.testing.assert_allclose(st["t"][~fl], ref["t"][~fl], rtol=1e-5)
    if fl.any():
        np.testing.assert_allclose(st["R"][fl], ref["R"][fl], rtol=1e-5, atol=1e-5)
    Nq = st["Nq"] if st["Nq"] is not None else st["nq"][data.item_domain]
    np.testing.assert_allclose(Nq, ref["Nq"], rtol=1e-5, atol=1e-5)
    # M-step: per-item derivatives and objective against numpy, the same statistics in
    R, Nq = ref["R"], ref["Nq"]
    Z = np.multiply.outer(a, x) + d[:, None]
    sig = expit(Z)
    P1 = np.clip(c[:, None] + (1 - c[:, None]) * sig, 1e-12, 1 - 1e-12)
    dP = (1 - c[:, None]) * sig * (1 - sig)
    r = R * dP / P1 - (Nq - R) * dP / (1 - P1)
    w = Nq * dP * dP / (P1 * (1 - P1))
    f = (R * np.log(P1) + (Nq - R) * np.log1p(-P1)).sum(axis=1)
    kern = em_steps._em_kernels()
    for floor in (False, True):
        der, obj = np.empty((J, 5)), np.empty(J)
        cc, RR = (c, R) if floor else (np.zeros(0), np.zeros((0, 0)))
        kern.mstep_derivs(a, d, x, Nq, np.arange(J), cc, RR, der)
        kern.mstep_objective(a, d, x, Nq, np.arange(J), cc, RR, obj)
        if floor:
            want = np.column_stack([r @ x, r.sum(1), w @ (x * x), w @ x, w.sum(1)])
            np.testing.assert_allclose(obj, f, rtol=1e-12)
        else:  # without a floor the answers' part (t, n1) is the caller's
            r2, w2 = -Nq * sig, Nq * sig * (1 - sig)
            want = np.column_stack([r2 @ x, r2.sum(1), w2 @ (x * x), w2 @ x, w2.sum(1)])
            np.testing.assert_allclose(obj, -(Nq * np.logaddexp(0, Z)).sum(1), rtol=1e-12)
        np.testing.assert_allclose(der, want, rtol=1e-11, atol=1e-9)


def test_auto_keeps_a_floor_where_the_data_have_one():
    """``guessing="auto"``: the two multiple-choice domains (guessing 0.25) keep an estimated floor, the
    two others none (their floors exactly 0), each decision by the floor's log-likelihood gain against
    BIC's penalty."""
    sim = simulate(500, domain_sizes=[30, 30, 30, 30], guessing=0.25, mc_share=0.5, seed=1)
    sl = _slices(sim)
    truth = np.array([sim.items.guessing.iloc[s].mean() for s in sl])
    assert np.array_equal(truth > 0, [False, True, True, False])
    f = irt.fit_stl(sim.to_responses(), guessing="auto")
    keep = np.asarray(f.floors["keep"])
    assert np.array_equal(keep, truth > 0)
    gain, thr = np.asarray(f.floors["gain"]), np.asarray(f.floors["threshold"])
    assert np.all(gain[keep] > thr[keep]) and np.all(gain[~keep] < thr[~keep])
    floors = np.array([f.c[s.start] for s in sl])
    assert np.all(np.abs(floors[keep] - 0.25) < 0.06) and np.all(floors[~keep] == 0)
    assert f.floors["llms"] == 500 and f.converged


def test_auto_without_a_floor_is_the_2pl_fit():
    """Where no domain's data call for a floor, ``guessing="auto"`` is the 2PL fit itself."""
    from mtlirt.estimators.mtl import fit_mtl

    sim = simulate(300, domain_sizes=[15, 40, 25], seed=5)
    r = sim.to_responses()
    auto = fit_mtl(r, guessing="auto", seed=0)
    plain = fit_mtl(r, guessing=None, seed=0)
    assert not any(auto.stl.floors["keep"]) and len(auto.stl.floors["keep"]) == 3
    np.testing.assert_array_equal(auto.theta, plain.theta)
    np.testing.assert_array_equal(auto.a, plain.a)
    assert not np.any(auto.c) and auto.C == plain.C


@pytest.mark.parametrize("guessing,missing", [(None, 0.0), (0.2, 0.0), (None, 0.2)])
def test_fused_trait_newton_takes_the_array_steps(guessing, missing):
    """The tabulated trait step's loop per LLM (numba) gives the whole-array steps' traits and
    information bit for bit, with a ridge toward a centre and on some domains only."""
    sim = simulate(200, domain_sizes=[8, 30, 15], missing=missing, seed=6)
    data = irt.ResponseData.from_responses(sim.to_responses(), guessing=guessing)
    lik = theta_likelihood(data)
    assert lik.kind == "tabulated"
    rng = np.random.default_rng(2)
    lik.set_items(rng.lognormal(0, 0.4, data.J), rng.normal(0, 1.5, data.J))
    th0 = rng.normal(size=(data.N, data.K))
    for kw in ({}, {"centre": rng.normal(size=th0.shape), "weight": np.array([0.5, 2.0, 8.0])},
               {"centre": np.zeros(th0.shape), "weight": np.ones(3), "domains": np.array([True, False, True])}):
        th, info = irt.theta_step(lik, th0, return_info=True, **kw)
        ref = trait_scoring._theta_step_arrays(lik, th0, 1.0, 6.0, kw.get("centre"), kw.get("weight"), 1e-7, 50,
                                     kw.get("domains"))
        np.testing.assert_array_equal(th, ref[0])
        np.testing.assert_array_equal(info, ref[1])
        if "domains" in kw:
            np.testing.assert_array_equal(th[:, 1], th0[:, 1])
