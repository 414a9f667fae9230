"""The spectral MTL estimator: exactness at gamma = 0, borrowing, robustness, rank, seeds."""

import warnings

import numpy as np
import pytest

from mtlirt.data.responses import Responses
from mtlirt.data.simulate import simulate
from mtlirt.data.validate import DataWarning
from mtlirt.errors import InputError
from mtlirt.estimators import irt, mtl, mtl_tuning
from mtlirt.estimators.baselines import fit_pooled
from mtlirt.estimators.mtl_tuning import MTLTuning
from mtlirt.estimators.trait_scoring import theta_likelihood


def _slices(sim):
    out, s = [], 0
    for n in sim.settings["domain_sizes"].values():
        out.append(slice(s, s + n))
        s += n
    return out


def _rmse(est, truth):
    z = (est - est.mean(0)) / est.std(0)
    t = (truth - truth.mean(0)) / truth.std(0)
    return np.sqrt(((z - t) ** 2).mean(0))


@pytest.fixture(scope="module")
def rank1():
    sim = simulate(400, domain_sizes=[6] * 8 + [40] * 4, rank=1, similarity=0.1, seed=11)
    fit = mtl.fit_mtl(sim.to_responses(), seed=0)
    return sim, fit


def test_output_shapes_and_scales(rank1):
    sim, f = rank1
    N, K, J = 400, 12, sim.correct.shape[1]
    assert f.theta.shape == (N, K) and f.overall.shape == (N, f.rank)
    assert f.loadings.shape == (K, f.rank) and f.a.shape == (J,) and f.d.shape == (J,)
    # the in-sample step: the posterior moments of the LLMs' traits are 0 and 1 (to its tolerance)
    np.testing.assert_allclose(f.theta.mean(0), 0, atol=1e-3)
    np.testing.assert_allclose((f.theta**2 + f.theta_se**2).mean(0), 1, atol=2e-3)
    # domain scores spread like posterior means of unit-variance traits (below 1, more for short domains)
    assert (f.theta.std(0) < 1).all() and (f.theta.std(0) > 0.85).all()
    np.testing.assert_allclose(f.overall.std(0), 1, atol=1e-10)
    # the items follow the scale: the reported scores and items give the fit's log-likelihood
    x = f.a * f.theta[:, f.item_domain] + f.d
    ll = (sim.correct * x - np.logaddexp(0.0, x)).sum()
    assert ll == pytest.approx(f.loglik, rel=1e-7)  # the fit tabulates its log-partition
    assert (f.loadings.sum(0) > 0).all()
    assert set(f.seconds) >= {"stl", "rank", "centre", "cv", "final", "total"}
    assert f.scores == "posterior" and f.rank == 1
    np.testing.assert_array_equal(f.theta_loc, 0)
    np.testing.assert_array_equal(f.theta_scale, 1)
    assert np.corrcoef(f.overall[:, 0], sim.overall.to_numpy()[:, 0])[0, 1] > 0.95


def test_gamma_zero_reproduces_stl_exactly(rank1):
    sim, _ = rank1
    r = sim.to_responses()
    stl = irt.fit_stl(r)
    f = mtl.fit_mtl(r, gamma=0.0)
    assert f.C == 0 and f.record["cv"] is None
    np.testing.assert_array_equal(f.theta, stl.theta)
    np.testing.assert_array_equal(f.a, stl.a)
    np.testing.assert_array_equal(f.d, stl.d)
    assert f.loglik == stl.loglik


def test_mtl_beats_stl_on_small_domains(rank1):
    sim, f = rank1
    truth = sim.domain_scores.to_numpy()
    r_mtl = _rmse(f.theta, truth)
    r_stl = _rmse(f.stl.theta, truth)
    small = np.arange(8)
    assert f.rank == 1 and f.scores == "posterior"
    assert r_mtl[small].mean() < 0.75 * r_stl[small].mean()
    assert r_mtl.mean() < r_stl.mean()


def test_outlier_domain_keeps_its_estimate():
    sim = simulate(400, domain_sizes=[8] * 6 + [40] * 6, rank=1, similarity=0.1,
                   outlier_share=0.1, seed=21)
    names = sim.domain_names
    out = np.isin(names, sim.outlier_domains)
    assert out.sum() == 1
    f = mtl.fit_mtl(sim.to_responses())
    truth = sim.domain_scores.to_numpy()
    r_mtl, r_stl = _rmse(f.theta, truth), _rmse(f.stl.theta, truth)
    assert r_mtl[out].mean() <= 1.05 * r_stl[out].mean()
    assert r_mtl[~out].mean() < 0.85 * r_stl[~out].mean()
    assert not f.extra["on_centre"][out].any()
    assert abs(f.loadings[out, 0]).max() < 0.3


def test_C_is_the_heldout_argmax():
    """C maximises the held-out log-likelihood, with no significance margin over STL: on a small
    leaderboard whose best C beats C = 0 by less than two standard errors (the old rule's fallback
    to STL), the best C is taken."""
    sim = simulate(60, domain_sizes=[5, 5, 8, 8, 12, 12, 20, 20], seed=3)
    f = mtl.fit_mtl(sim.to_responses(), seed=0, scores="shrunk")
    grid, ll = np.asarray(f.record["cv"]["grid"]), np.asarray(f.record["cv"]["heldout_loglik"])
    best = int(np.argmax(ll))
    assert f.C == grid[best] == f.record["cv"]["chosen"] and 0 < f.C < np.inf
    assert 0 < f.record["cv"]["gain"][best] < 2 * f.record["cv"]["gain_se"][best]


def test_tuning_settings_are_one_checked_object():
    """fit_mtl's tuning settings travel as one frozen MTLTuning; a setting out of its range is an InputError
    that names it, at construction, before any fit."""
    t = MTLTuning(C_grid=[0.0, 0.5, np.inf], max_extend=0, cv_refit_items=False)
    assert t.C_grid == (0.0, 0.5, np.inf) and MTLTuning().C_grid == mtl.DEFAULT_C_GRID
    with pytest.raises(AttributeError):
        t.max_rank = 2  # frozen
    bad = {"C_grid": [0.1, -1.0], "holdout_share": 1.0, "max_heldout": 0, "min_gain_se": -1, "c_tie": np.inf,
           "cv_refit_items": "yes", "max_rank": 0, "max_extend": 1.5}
    for name, value in bad.items():
        with pytest.raises(InputError, match=name):
            MTLTuning(**{name: value})
    with pytest.raises(InputError, match="C_grid"):
        MTLTuning(C_grid=[np.nan])
    with pytest.raises(InputError, match="C_grid"):
        MTLTuning(C_grid=())


def test_C_ties_go_to_more_shrinkage():
    """Of C values whose held-out fits agree within the tolerance, the largest is chosen."""
    grid = [0.0, 0.1, 0.4, 0.8, np.inf]
    assert mtl_tuning._best_C(grid, [-0.52, -0.51, -0.50, -0.500000004, -0.53], 1e-5) == 3
    assert mtl_tuning._best_C(grid, [-0.52, -0.51, -0.50, -0.5001, -0.53], 1e-5) == 2
    assert mtl_tuning._best_C(grid, [-0.50, -0.50, -0.50, -0.50, -0.50], 1e-5) == 4


@pytest.mark.parametrize("rank", [1, 2])
def test_rank_selection(rank):
    sim = simulate(500, domain_sizes=[30] * 12, rank=rank, similarity=0.1, seed=31)
    stl = irt.fit_stl(sim.to_responses())
    r, ev = mtl.select_rank(stl.theta, seed=0)
    assert r == rank
    assert len(ev["eigenvalues"]) == 12 and len(ev["thresholds"]) == 12


@pytest.mark.parametrize("rank", [1, 2])
def test_heldout_rank_selection(rank):
    """The default fit picks the rank by held-out responses: the simulator's rank-2 design gives 2. Where
    parallel analysis bounds the rank at one, nothing is held out (the posterior scores take no C)."""
    sim = simulate(500, domain_sizes=[30] * 12, rank=rank, similarity=0.1, seed=31)
    f = mtl.fit_mtl(sim.to_responses(), seed=0)
    assert f.rank == rank
    if rank == 1:
        assert f.record["rank_evidence"]["method"] == "parallel analysis" and f.record["cv"] is None and f.C is None
        return
    path = f.record["rank_evidence"]["heldout"]
    assert [p["rank"] for p in path][:rank] == list(range(1, rank + 1))
    if rank == 2:
        assert path[1]["gain_over_previous"] > 2 * path[1]["gain_se"]


def test_tiny_domains_many_llms_rank_one_near_pooled():
    """1-5 item domains, thousands of LLMs, missing responses: the calibrations converge, the rank is 1,
    every domain loads near 1 and the overall score is the pooled trait's (the pooled fit is the
    factor model with every loading 1)."""
    sizes = [1, 1, 2, 1, 3, 1, 2, 5, 1, 4, 1, 2]
    sim = simulate(2000, domain_sizes=sizes, missing=0.1, seed=81)
    r = sim.to_responses()
    f = mtl.fit_mtl(r, seed=0)
    assert f.stl.converged and f.converged
    assert f.rank == 1 and f.scores == "posterior"
    assert f.extra["pooled"] is None and "pooled" not in f.seconds  # nothing tuned: no pooled fit run
    assert (np.asarray(f.record["structure"]["lambda"]) > 0.9).all()
    pooled = fit_pooled(r)
    assert np.corrcoef(f.overall[:, 0], pooled.theta[:, 0])[0, 1] > 0.99


def test_fused_rank_one_reproduces_pooled_exactly():
    """C = inf at rank one is the pooled fit, item values included (as C = 0 is STL)."""
    sim = simulate(300, domain_sizes=[3, 5, 20, 20], missing=0.05, seed=83)
    r = sim.to_responses()
    pooled = fit_pooled(r)
    f = mtl.fit_mtl(r, rank=1, C=np.inf)
    np.testing.assert_array_equal(f.theta, pooled.theta)
    np.testing.assert_array_equal(f.a, pooled.a)
    np.testing.assert_array_equal(f.d, pooled.d)
    assert f.loglik == pooled.loglik and f.extra["on_centre"].all()
    np.testing.assert_allclose(f.overall[:, 0], pooled.theta[:, 0], atol=1e-10)


def test_overall_is_the_mean_centre_at_any_rank():
    """Column 0 of ``overall`` is the standardised mean of the domain centres on the population scale,
    at rank 1 and 2."""
    sim = simulate(400, domain_sizes=[20] * 8, rank=2, similarity=0.1, seed=85)
    for r in (1, 2):
        f = mtl.fit_mtl(sim.to_responses(), rank=r, C=0.4)
        m = (f.centre * f.theta_scale + f.theta_loc).mean(axis=1)  # on the population scale
        m = (m - m.mean()) / m.std()
        np.testing.assert_allclose(f.overall[:, 0], m, atol=1e-8)
        if r == 2:
            np.testing.assert_allclose(np.corrcoef(f.overall.T), np.eye(2), atol=1e-8)


def test_rank_two_overall_is_one_estimand_for_mtl_and_bayes():
    """At rank 2 the overall score is the shared part of the average domain trait (docs/model.md, "The
    estimand"): the Bayesian derivation (``bayes.derived.overall_score``) does not depend on how the factors
    are rotated, is the factor itself at rank one, and MTL's overall score estimates the same quantity of the
    truth (not the truth's first factor, which is a rotation away from it)."""
    from mtlirt.bayes.derived import overall_score

    sim = simulate(500, domain_sizes=[30] * 12, rank=2, similarity=0.1, seed=31)
    eta, lam = sim.overall.to_numpy(), sim.loadings.to_numpy()
    eta = (eta - eta.mean(0)) / eta.std(0)
    truth = overall_score(eta, lam)
    ang = 0.7
    R = np.array([[np.cos(ang), -np.sin(ang)], [np.sin(ang), np.cos(ang)]])
    np.testing.assert_allclose(overall_score(eta @ R, lam @ R), truth, atol=1e-12)
    np.testing.assert_allclose(overall_score(eta[:, :1], lam[:, :1]), eta[:, 0])
    mean_theta = sim.domain_scores.to_numpy().mean(axis=1)
    assert np.corrcoef(truth, mean_theta)[0, 1] > 0.97  # the shared part of the average domain trait
    f = mtl.fit_mtl(sim.to_responses(), C=0.4)
    assert f.rank == 2
    # the truth's first factor depends on a rotation the data cannot see; the estimand does not
    r_estimand = np.corrcoef(f.overall[:, 0], truth)[0, 1]
    r_factor = np.corrcoef(f.overall[:, 0], (eta @ R)[:, 0])[0, 1]
    assert r_estimand > 0.98 and r_factor < 0.8


def test_loadings_are_disattenuated_correlations():
    """MTL's loadings estimate the true loadings (the correlation of each domain trait with the overall
    trait), not the correlation of shrunk scores with the overall (near 1 for short domains set onto their
    centre); their products estimate the domain correlations, as the corrected ``domain_corr`` does."""
    from mtlirt.data.responses import Responses
    from mtlirt.fitting import fit

    sim = simulate(600, domain_sizes=[8, 8, 10, 12, 40, 60, 80, 100], similarity=0.36, seed=5)
    f = mtl.fit_mtl(sim.to_responses(), C=0.4)
    true = sim.loadings["score"].to_numpy()  # sqrt(1 - 0.36) = 0.8
    shrunk = np.array([np.corrcoef(f.theta[:, k], f.overall[:, 0])[0, 1] for k in range(8)])
    assert np.abs(f.loadings[:, 0] - true).max() < 0.08
    assert shrunk[:4].min() > 0.9  # what the loadings used to be: the short domains fused onto the overall
    est = fit(Responses.from_frame(sim.responses), "mtl", gamma=None, rank=1)
    lam = est.point("loadings")[:, 0]
    corr = est.point("domain_corr")
    off = ~np.eye(8, dtype=bool)
    assert abs(np.outer(lam, lam)[off].mean() - 0.64) < 0.05 and abs(corr[off].mean() - 0.64) < 0.05


def test_mtl_and_bayes_map_report_the_same_scale():
    """MTL and the Bayesian MAP (items fixed) estimate one quantity on one scale (docs/model.md, "The
    estimand"): ``compare``'s slopes of the Bayesian scores on MTL's are near 1 for the overall and the
    domain scores, and both track the truth with slopes near 1. MTL's scores are on its items' own scale:
    the population scale is the identity."""
    import warnings

    from mtlirt.data.responses import Responses
    from mtlirt.fitting import fit
    from mtlirt.report.compare import compare

    sim = simulate(300, domain_sizes=[8, 8, 10, 12, 30, 40], similarity=0.2, seed=13)
    resp = Responses.from_frame(sim.responses)
    m = fit(resp, "mtl", seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        b = fit(resp, "bayes", algorithm="map", items="fixed", seed=0, progress=False)
    row = compare([m, b], names=["mtl", "bayes"]).iloc[0]
    assert 0.97 < row["slope_overall"] < 1.03 and row["pearson_overall"] > 0.99
    assert 0.95 < row["slope_domain"] < 1.04, row["slope_domain"]  # sample-standardised: 0.936
    assert row["rmsd_domain"] < 0.25, row["rmsd_domain"]
    pop = m.info["population_scale"]
    assert pop["loc"] == [0.0] * 6 and pop["scale"] == [1.0] * 6
    truth = sim.domain_scores.to_numpy()
    for est in (m, b):
        t = est.point("theta")
        slopes = [np.polyfit(t[:, k], truth[:, k], 1)[0] for k in range(6)]
        assert 0.95 < np.mean(slopes) < 1.03, np.mean(slopes)  # sample-standardised MTL: 0.928


def test_grid_edge_is_extended_or_flagged():
    """When the largest finite C wins the grid is extended; an optimum still at its edge is flagged."""
    sim = simulate(300, domain_sizes=[2, 3, 40, 40, 40], rank=1, similarity=0.1, seed=61)
    f = mtl.fit_mtl(sim.to_responses(), tuning=MTLTuning(C_grid=(0.0, 0.05, 0.1)), rank=1,
                    scores="shrunk")
    cv = f.record["cv"]
    g, ll = cv["grid"], cv["heldout_loglik"]
    assert cv["extended"] >= 1 and g[:3] == [0.0, 0.05, 0.1] and g[-1] == 0.1 * 2 ** cv["extended"]
    # it stopped because the last doubling lost, with an interior optimum
    assert f.C == g[int(np.argmax(ll))] and 0.1 < f.C < g[-1] and not f.record["cv"]["at_edge"]
    with pytest.warns(RuntimeWarning, match="edge of the grid"):
        edge = mtl.fit_mtl(sim.to_responses(), rank=1, scores="shrunk",
                           tuning=MTLTuning(C_grid=(0.0, 0.0005, 0.001), max_extend=1))
    assert edge.record["cv"]["at_edge"] and edge.C == edge.record["cv"]["grid"][-1] == 0.002


def test_rank_two_fit_orders_factors():
    sim = simulate(500, domain_sizes=[30] * 12, rank=2, similarity=0.1, seed=31)
    f = mtl.fit_mtl(sim.to_responses(), C=0.4)
    assert f.rank == 2 and f.overall.shape == (500, 2)
    np.testing.assert_allclose(np.corrcoef(f.overall.T), np.eye(2), atol=1e-8)
    eta = sim.overall.to_numpy()
    assert abs(np.corrcoef(f.overall[:, 0], eta[:, 0])[0, 1]) > 0.9


def test_seed_reproduces():
    sim = simulate(200, domain_sizes=[8, 8, 30, 30], seed=41)
    f1 = mtl.fit_mtl(sim.to_responses(), seed=3)
    f2 = mtl.fit_mtl(sim.to_responses(), seed=3)
    np.testing.assert_array_equal(f1.theta, f2.theta)
    np.testing.assert_array_equal(f1.a, f2.a)
    assert f1.record["structure"] == f2.record["structure"]


def test_every_llm_gets_every_domain_score():
    sim = simulate(300, domain_sizes=[10, 30, 30, 30], rank=1, similarity=0.1, missing=0.05, seed=51)
    obs = sim.observed.copy()
    obs[:30, :10] = False  # 30 LLMs never answered domain 0
    Y = np.where(obs, sim.correct, 0).astype(np.int8)
    f = mtl.fit_mtl(Responses.from_arrays(Y, obs, _slices(sim)), C=0.4)
    assert np.isfinite(f.theta).all()
    truth = sim.domain_scores.to_numpy()
    # STL gives them all the prior mean; MTL borrows from their other domains
    assert np.ptp(f.stl.theta[:30, 0]) < 1e-8
    assert np.corrcoef(f.theta[:30, 0], truth[:30, 0])[0, 1] > 0.7


def test_tiny_domains_approach_pooled():
    sim = simulate(300, domain_sizes=[2, 3, 40, 40, 40], rank=1, similarity=0.1, seed=61)
    r = sim.to_responses()
    pooled = fit_pooled(r)
    tuned = mtl.fit_mtl(r)
    strong = mtl.fit_mtl(r, C=0.8, stl=tuned.stl)
    stl = tuned.stl
    for k in (0, 1):
        c_tuned = np.corrcoef(tuned.theta[:, k], pooled.theta[:, 0])[0, 1]
        c_strong = np.corrcoef(strong.theta[:, k], pooled.theta[:, 0])[0, 1]
        c_stl = np.corrcoef(stl.theta[:, k], pooled.theta[:, 0])[0, 1]
        assert c_stl < 0.8 and c_tuned > 0.9 and c_strong > 0.99


def test_prox_step_optimality():
    """KKT conditions of the unsquared-norm problem."""
    sim = simulate(150, domain_sizes=[10, 30, 60], seed=71)
    data = irt.ResponseData.from_responses(sim.to_responses())
    stl = irt.fit_stl_data(data)
    th0, a, d = stl.internal()
    lik = theta_likelihood(data)
    lik.set_items(a, d)
    rng = np.random.default_rng(0)
    centre = th0 + 0.3 * rng.standard_normal(th0.shape)
    centre[:, 0] = th0[:, 1] * 0.8  # domain 0 near another domain's traits
    lam = np.array([3.0, 2.0, 1e6])
    th, _mu, on = mtl.prox_step(lik, th0, centre, lam)
    assert on[2] and np.array_equal(th[:, 2], centre[:, 2])
    g, _ = lik.theta_derivs(th)
    g -= th
    for k in range(3):
        diff = th[:, k] - centre[:, k]
        rho = np.linalg.norm(diff)
        if on[k]:
            assert np.linalg.norm(g[:, k]) <= lam[k] + 1e-6
        else:
            # g = lam * (theta - c) / ||theta - c||
            np.testing.assert_allclose(g[:, k], lam[k] * diff / rho, atol=1e-5)


def test_rank_one_centre_does_not_depend_on_its_start():
    """The final fit starts rank one's centre from the STL matrix's first principal component (no pooled
    fit needed); started from the pooled trait instead, the refined centre is the same."""
    from mtlirt.estimators.centre import _rank_one_centre
    from mtlirt.estimators.response_data import ResponseData

    sim = simulate(400, domain_sizes=[2, 5, 12, 30, 60], missing=0.1, seed=5)
    r = sim.to_responses()
    data = ResponseData.from_responses(r)
    stl = irt.fit_stl_data(data)
    lik = theta_likelihood(data)
    lik.set_items(*stl.internal()[1:])
    U = np.linalg.svd(stl.theta, full_matrices=False)[0]
    pc1 = U[:, 0] * np.sign(U[:, 0] @ stl.theta.mean(axis=1))
    eta = fit_pooled(r).theta[:, 0]
    assert abs(np.corrcoef(pc1, eta)[0, 1]) < 0.999  # two different starts
    A1, W1, i1 = _rank_one_centre(lik, pc1, max_iter=200)
    A2, W2, i2 = _rank_one_centre(lik, eta, max_iter=200)
    assert i1["converged"] and i2["converged"]
    np.testing.assert_allclose(A1 @ W1.T, A2 @ W2.T, atol=1e-5)


def test_auto_without_a_floor_tunes_as_the_2pl(monkeypatch):
    """guessing="auto" where no domain keeps a floor: the pooled fit the tuning needs runs as the 2PL,
    with the single-domain fit's decision, instead of deciding the floors again."""
    sim = simulate(300, domain_sizes=[10, 20, 30, 40, 50], rank=2, seed=3)
    r = sim.to_responses()
    seen = []
    real = mtl.fit_pooled
    monkeypatch.setattr(mtl, "fit_pooled", lambda *a, **k: seen.append(k["guessing"]) or real(*a, **k))
    f = mtl.fit_mtl(r, guessing="auto")
    assert f.c.max() == 0 and f.record["cv"] is not None  # no floor kept; the rank and C were tuned
    assert seen == [None]


def test_deviation_spread_takes_the_callers_evaluator_only_with_its_floors(monkeypatch):
    """The fit hands its own trait evaluator to the deviations' moments (with floors, building another costs
    seconds at the flagship shape): the same numbers, and one with other floors is not used."""
    from mtlirt.estimators import bootstrap

    sim = simulate(150, domain_sizes=[20, 15], missing=0.1, seed=3)
    r = sim.to_responses()
    c = np.repeat([0.2, 0.0], [20, 15])
    rng = np.random.default_rng(0)
    a, d = np.exp(0.2 * rng.standard_normal(35)), rng.standard_normal(35)
    centre = rng.standard_normal((150, 2))
    args = (r.correct, r.mask, r.domain_slices, centre, a, d, c)
    ref = bootstrap.deviation_spread(*args)
    built = []
    monkeypatch.setattr(bootstrap, "theta_likelihood", lambda data: built.append(data) or theta_likelihood(data))
    lik = theta_likelihood(irt.ResponseData.from_responses(r, guessing=c))
    lik.set_items(a, d)
    np.testing.assert_array_equal(bootstrap.deviation_spread(*args, lik=lik), ref)
    assert built == []
    other = theta_likelihood(irt.ResponseData.from_responses(r))
    np.testing.assert_array_equal(bootstrap.deviation_spread(*args, lik=other), ref)
    assert len(built) == 1 and np.array_equal(built[0].c, c)


def test_structure_is_estimated_on_the_leaderboards_own_scale():
    """With few LLMs and hard items the items' priors, not the LLMs, set the calibration's scale (the
    traits of 30 LLMs here sit 1-2 sds below its N(0, 1)); the structure estimated there took the offset
    for deviations (loadings 0.2-0.6 where the truth is 0.95, a reported centre 2 sds off its scores).
    Estimated again on the in-sample items, the loadings and the centre are the leaderboard's."""
    sim = simulate(30, [200] * 5, difficulty_mean=1.5, domain_shift_sd=1.0, seed=1)
    f = mtl.fit_mtl(sim.to_responses(), seed=0)
    s = f.record["structure"]
    assert s["rounds"] >= 2 and np.min(s["loc"]) < -1  # the calibration's scale was well off
    np.testing.assert_allclose(s["lambda"], sim.loadings["score"].to_numpy(), atol=0.06)  # sqrt(0.9)
    np.testing.assert_allclose(f.centre.mean(axis=0), 0.0, atol=0.1)  # the centre predicts the scores
    assert np.corrcoef(f.centre[:, 0], f.theta[:, 0])[0, 1] > 0.8


def test_small_leaderboards_domains_run_by_most_of_its_llms_take_the_scale_step():
    """16 LLMs, each domain run by 12 of them: every domain has fewer LLMs than a thin domain's
    threshold, yet they are the leaderboard's own; with hard items the calibration's scale is the
    items' priors' (a domain's LLMs a sd or more below its 0), so the scores are put on the
    leaderboard's scale as those of a larger one are: mean 0 and mean square 1 over the LLMs that ran
    the domain. A domain run by 12 of 200 LLMs keeps its calibration's scale."""
    sim = simulate(16, [80] * 4, difficulty_mean=1.5, domain_shift_sd=1.0, seed=3)
    df = sim.responses
    llms = np.array(sorted(df.llm.unique()))
    skip = {d: llms[4 * k:4 * k + 4] for k, d in enumerate(sorted(df.domain.unique()))}
    df = df[~np.array([llm in skip[d] for llm, d in zip(df.llm, df.domain)])]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataWarning)  # thin domains: named in a warning
        resp = Responses.from_frame(df)
    f = mtl.fit_mtl(resp, seed=0)
    seen = np.column_stack([resp.mask[:, s].any(axis=1) for s in resp.domain_slices])
    assert seen.sum(axis=0).tolist() == [12] * 4
    s = f.record["structure"]
    assert np.max(np.abs(s["loc"])) > 0.8  # the step moved the calibration's scale this far
    for k in range(4):
        th = f.theta[seen[:, k], k]
        assert abs(th.mean()) < 0.05 and abs(np.mean(th**2 + f.theta_se[seen[:, k], k] ** 2) - 1) < 0.05

    big = simulate(200, [40] * 3, seed=3).responses
    few = np.array(sorted(big.llm.unique()))[:12]
    big = big[(big.domain != "d01") | big.llm.isin(few)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataWarning)
        f = mtl.fit_mtl(Responses.from_frame(big), seed=0)
    s = f.record["structure"]
    assert s["loc"][0] == 0.0 and s["scale"][0] == 1.0 and s["scale"][1] != 1.0
