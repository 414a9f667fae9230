"""Baselines: pooled 2PL and accuracy."""

import numpy as np

from mtlirt.data.responses import Responses
from mtlirt.data.simulate import simulate
from mtlirt.estimators import irt
from mtlirt.estimators.baselines import fit_accuracy, fit_pooled


def _slices(sim):
    out, s = [], 0
    for n in sim.settings["domain_sizes"].values():
        out.append(slice(s, s + n))
        s += n
    return out


def test_pooled_equals_unidimensional_fit():
    sim = simulate(200, domain_sizes=[10, 25, 15], rank=1, similarity=0.3, seed=7)
    pooled = fit_pooled(sim.to_responses())
    uni = irt.fit_stl(Responses.from_arrays(sim.correct))  # one domain of every item
    assert pooled.theta.shape == (200, 3)
    for k in range(3):
        np.testing.assert_array_equal(pooled.theta[:, k], uni.theta[:, 0])
    np.testing.assert_array_equal(pooled.a, uni.a)
    np.testing.assert_array_equal(pooled.d, uni.d)
    assert pooled.loglik == np.float64(pooled.extra["loglik_domain"].sum())
    assert abs(pooled.loglik - uni.loglik) < 1e-6 * abs(uni.loglik)
    assert np.corrcoef(pooled.theta[:, 0], sim.overall.to_numpy()[:, 0])[0, 1] > 0.8


def test_pooled_with_missing_responses():
    sim = simulate(150, domain_sizes=[10, 20], missing=0.3, seed=9)
    pooled = fit_pooled(sim.to_responses())
    assert np.isfinite(pooled.theta).all() and pooled.converged


def test_accuracy_equals_domain_means():
    sim = simulate(100, domain_sizes=[5, 12], missing=0.2, seed=8)
    obs = sim.observed.copy()
    obs[0, :5] = False  # LLM 0 has no response in domain 0
    Y = np.where(obs, sim.correct, 0).astype(np.int8)
    fit = fit_accuracy(Responses.from_arrays(Y, obs, _slices(sim)))
    for k, sl in enumerate(_slices(sim)):
        for i in range(1, 100):
            assert fit.extra["accuracy"][i, k] == Y[i, sl][obs[i, sl]].mean()
    assert np.isnan(fit.extra["accuracy"][0, 0]) and np.isnan(fit.theta[0, 0])
    assert fit.extra["overall_raw"][0] == fit.extra["accuracy"][0, 1]
    assert fit.extra["overall_raw"][1] == fit.extra["accuracy"][1].mean()
    np.testing.assert_allclose(np.nanmean(fit.theta, axis=0), 0, atol=1e-12)
    np.testing.assert_allclose(np.nanstd(fit.theta, axis=0), 1, atol=1e-12)
    np.testing.assert_allclose(fit.overall.std(), 1, atol=1e-12)


def test_accuracy_complete():
    sim = simulate(50, domain_sizes=[4, 6], seed=10)
    fit = fit_accuracy(sim.to_responses())
    np.testing.assert_allclose(fit.extra["accuracy"][:, 0], sim.correct[:, :4].mean(axis=1))
    np.testing.assert_allclose(fit.extra["overall_raw"], fit.extra["accuracy"].mean(axis=1))


def test_stl_reports_the_estimand_scale():
    """STL's domain scores spread like posterior means (docs/model.md "The estimand"): a regression
    of the standardised truth on them has slope about 1 in short domains too (spread 1 gave 0.83 on
    the 8-item domains here); the items and the population-scale traits are those of fit_stl; MTL at
    C = 0 reports the same scores."""
    from mtlirt.data.responses import Responses
    from mtlirt.estimators.baselines import posterior_mean_scale
    from mtlirt.fitting import fit

    sim = simulate(600, domain_sizes=[8] * 3 + [40] * 3, similarity=0.2, seed=13)
    r = Responses.from_frame(sim.responses)
    est = fit(r, "stl")
    theta = est.point("theta")
    truth = sim.domain_scores.to_numpy()
    truth = (truth - truth.mean(0)) / truth.std(0)
    slope = np.array([np.cov(theta[:, k], truth[:, k])[0, 1] / theta[:, k].var(ddof=1) for k in range(6)])
    assert abs(slope[:3].mean() - 1) < 0.06 and abs(slope[3:].mean() - 1) < 0.04
    raw = irt.fit_stl(r)
    pv = (raw.theta_se * raw.theta_scale) ** 2
    np.testing.assert_allclose(theta.std(0), np.sqrt(1 - pv.mean(0)), rtol=1e-9)
    assert theta[:, :3].std(0).max() < 0.9 < 0.93 < theta[:, 3:].std(0).min()
    np.testing.assert_allclose(  # a theta + d unchanged, and the same traits on the population scale
        est.point("discrimination") * theta[:, r.item_domain] + est.point("intercept"),
        raw.a * raw.theta[:, r.item_domain] + raw.d, atol=1e-9)
    pop = est.info["population_scale"]
    np.testing.assert_allclose(theta * pop["scale"] + pop["loc"], raw.internal()[0], atol=1e-9)
    np.testing.assert_allclose(posterior_mean_scale(raw).theta, theta, atol=1e-12)
    mtl0 = fit(r, "mtl", gamma=0.0)
    assert mtl0.info["C"] == 0
    np.testing.assert_allclose(mtl0.point("theta"), theta, atol=1e-9)
