"""The seed paper's estimator (mtlirt.estimators.paper), its baselines and its simulation design."""

import math

import numpy as np
import pytest

from mtlirt.data.responses import Responses
from mtlirt.data.sim_paper import PAPER_DOMAIN_SIZES, simulate_paper
from mtlirt.errors import InputError
from mtlirt.estimators import deviations, paper, paper_cv, sine_centre
from mtlirt.estimators import paper_objective as objective
from mtlirt.fitting import fit

SIZES = (12, 16, 20)


def _slices(sizes):
    edges = np.concatenate([[0], np.cumsum(sizes)])
    return [slice(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:])]


@pytest.fixture(scope="module")
def small():
    """50 LLMs x 3 domains of 12-20 items, h = 0.3, 10% missing."""
    sim = simulate_paper(0.3, n_llms=50, domain_sizes=SIZES, seed=4)
    obs = np.random.default_rng(1).random(sim.correct.shape) > 0.1
    return sim.correct * obs, obs, _slices(SIZES)


def _check_constraints(r, N):
    assert np.allclose(r.theta.mean(axis=0), 0, atol=1e-10)
    assert np.allclose(np.linalg.norm(r.theta, axis=0), math.sqrt(N), atol=1e-8)
    assert np.abs(r.theta).max() <= objective.BOUND + 1e-9
    assert r.a.min() >= 0 and r.a.max() <= objective.BOUND and np.abs(r.d).max() <= objective.BOUND
    assert abs(r.overall.mean()) < 1e-10 and abs(np.linalg.norm(r.overall) - math.sqrt(N)) < 1e-8
    assert r.overall @ r.theta.sum(axis=1) >= 0


@pytest.mark.parametrize("C", [0.05, 0.5])
def test_constraints_hold_and_fast_beats_the_papers_adam(small, C):
    y, obs, sl = small
    data = Responses.from_arrays(y, obs, sl)
    fast = paper.fit_paper(data, C=C)
    adam = paper.fit_paper(data, C=C, optimizer="adam")
    for r in (fast, adam):
        _check_constraints(r, y.shape[0])
    assert fast.converged
    assert fast.record["objective"] <= adam.record["objective"] + 1e-9 * abs(adam.record["objective"])
    assert np.allclose(fast.loadings[:, 0], fast.theta.T @ fast.overall / y.shape[0])


def test_fast_reaches_the_optimum_of_a_long_adam():
    """Run long enough (learning rate halved every 1,000 steps, no early stop),
    the paper's Adam ends where the fast optimiser does (on a design where
    the box |theta| <= 4 does not bind; where it does, projected Adam can
    stall on the box and the fast optimiser ends lower, as the other tests check)."""
    sim = simulate_paper(0.3, domain_sizes=(50, 60, 70), seed=5)
    data = sim.to_responses()
    fast = paper.fit_paper(data, C=0.01)
    long = paper.fit_paper(data, C=0.01, optimizer="adam",
                           adam=paper.AdamSettings(tol=0.0, max_iter=5000, decay_steps=1000))
    assert fast.record["objective"] <= long.record["objective"] + 1e-9 * abs(long.record["objective"])
    assert abs(fast.record["objective"] - long.record["objective"]) < 1e-7 * abs(long.record["objective"])
    assert np.abs(fast.theta - long.theta).max() < 1e-3
    assert np.abs(fast.overall - long.overall).max() < 1e-3


def test_lambda_zero_is_per_domain_fits_and_the_sine_centre(small):
    y, obs, sl = small
    data = Responses.from_arrays(y, obs, sl)
    local = paper.fit_paper(data, variant="paper-local")
    assert local.C == 0 and local.record["lam"] == 0
    for k, s in enumerate(sl):  # every domain alone
        one = paper.fit_paper(Responses.from_arrays(y[:, s], obs[:, s]), variant="paper-local")
        assert np.abs(one.theta[:, 0] - local.theta[:, k]).max() < 1e-4
        assert np.abs(one.a - local.a[s]).max() < 1e-3
    c0 = paper.fit_paper(data, C=0.0)
    assert np.abs(c0.theta - local.theta).max() < 1e-4
    # the overall score is the sine centre: no nearby direction has a smaller sum of sines
    sines = lambda g: objective._sines(g, local.theta.T)[0].sum()  # noqa: E731
    best = sines(local.overall)
    rng = np.random.default_rng(0)
    for _ in range(20):
        g = objective._sphere(local.overall + 0.05 * rng.standard_normal(len(local.overall)))
        assert sines(g) >= best - 1e-12
    g_adam, _, ok = sine_centre.sine_centre(local.theta.T, optimizer="adam")
    assert ok and sines(local.overall) <= sines(g_adam) + 1e-9


def test_huge_lambda_fuses_every_domain_into_the_global_fit(small):
    y, obs, sl = small
    data = Responses.from_arrays(y, obs, sl)
    big = paper.fit_paper(data, C=1e4)
    glob = paper.fit_paper(data, variant="paper-global")
    assert big.extra["fused"].all() and glob.extra["fused"].all() and np.isinf(glob.record["lam"])
    assert np.allclose(objective._sines(big.overall, big.theta.T)[0], 0, atol=1e-7)  # round-off of sqrt(1 - cos^2)
    assert np.abs(big.theta - glob.theta).max() < 1e-5
    assert np.abs(big.a - glob.a).max() < 1e-4
    assert abs(big.record["objective"] - glob.record["objective"]) < 1e-8 * abs(glob.record["objective"])
    adam = paper.fit_paper(data, variant="paper-global", optimizer="adam")
    assert glob.record["objective"] <= adam.record["objective"] + 1e-9 * abs(adam.record["objective"])


def test_cv_chooses_a_grid_value_and_reproduces():
    sim = simulate_paper(0.3, n_llms=30, domain_sizes=(10, 12), seed=4)
    y, sl = sim.correct, _slices((10, 12))
    grid = (0.01, 1.0)
    data = Responses.from_arrays(y, None, sl)
    r = paper.fit_paper(data, grid=grid, seed=3)
    assert r.C in grid and r.record["cv"]["chosen"] == r.C and r.record["cv"]["n_folds"] == 5
    assert len(r.record["cv"]["loss"]) == 2 and np.array(r.record["cv"]["fold_loss"]).shape == (5, 2)
    assert r.record["cv"]["loss"][grid.index(r.C)] == min(v for v in r.record["cv"]["loss"] if v is not None)
    again = paper.fit_paper(data, grid=grid, seed=3)
    assert again.record["cv"]["fold_loss"] == r.record["cv"]["fold_loss"] and np.array_equal(again.theta, r.theta)
    prob = objective._Problem(y, None, sl)
    f3, f4 = (paper_cv.make_folds(prob.mask(), prob.dom, prob.K, 5, seed=s) for s in (3, 4))
    assert not np.array_equal(f3, f4)


def test_choice_ties_to_the_smaller_C_and_skips_unconverged():
    loss = np.array([[0.5, 0.4, 0.4, 0.3], [0.5, 0.4, 0.4, 0.3]])
    conv = np.ones_like(loss, dtype=bool)
    conv[1, 3] = False
    k, mean, failed = paper_cv._choose(loss, conv)
    assert k == 1 and np.isnan(mean[3]) and not failed
    k, _, failed = paper_cv._choose(loss, np.zeros_like(conv))
    assert k == 3 and failed
    # fused fits of neighbouring C agree only to the optimiser's precision: a tie all the same
    noisy = np.array([[0.5, 0.4 + 3e-9, 0.4 - 2e-9, 0.4], [0.5, 0.4 + 1e-9, 0.4, 0.4 - 1e-9]])
    assert paper_cv._choose(noisy, np.ones_like(conv))[0] == 1
    assert paper_cv._choose(np.array([[0.5, 0.4, 0.4 - 1e-4]]), np.ones((1, 3), dtype=bool))[0] == 2


def test_fast_converges_where_a_split_returns_to_its_fused_set():
    """A domain on the verge of fusing (its tangent gradient a hair above lambda): splitting it
    off comes back to the kink without lowering F.  The fit must stop converged there, not cycle
    to its iteration limit (which dropped that C from the cross-validation's choice)."""
    sizes = (20, 30, 40, 50, 60, 70)
    sim = simulate_paper(0.2, n_llms=80, domain_sizes=sizes, seed=3)
    prob = objective._Problem(sim.correct, None, _slices(sizes))
    train = paper_cv.make_folds(prob.mask(), prob.dom, prob.K, 5, seed=3) != 1
    r = paper.fit_paper(Responses.from_arrays(sim.correct * train, train, _slices(sizes)), C=0.2)
    assert r.converged and r.n_iter < 1000
    assert r.extra["fused"].sum() == 1  # the domain on the verge stays fused
    _check_constraints(r, 80)


def test_global_baseline_keeps_its_one_trait_in_the_box():
    """An LLM with every answer right pushes the global trait to the box |theta| <= 4: the fit
    must stay the global problem's (its objective recomputed as one trait for all domains) and
    beat the paper's Adam on it."""
    sim = simulate_paper(0.3, n_llms=80, domain_sizes=SIZES, seed=4)
    y = sim.correct.copy()
    y[0] = 1
    sl = _slices(SIZES)
    data = Responses.from_arrays(y, None, sl)
    fast = paper.fit_paper(data, variant="paper-global")
    adam = paper.fit_paper(data, variant="paper-global", optimizer="adam")
    prob = objective._Problem(y, None, sl)
    one = objective._Objective(prob, prob.mask(), one_trait=True)
    for r in (fast, adam):
        F = r.record["objective"]
        assert abs(one.lik(r.overall[None, :], r.a[prob.kept], r.d[prob.kept]) - F) < 1e-9 * F
        assert np.array_equal(r.theta, np.repeat(r.overall[:, None], 3, axis=1))
        _check_constraints(r, 80)
    assert fast.overall[0] == objective.BOUND and fast.converged  # the box binds
    assert fast.record["objective"] <= adam.record["objective"]


def test_folds_split_each_llms_responses_within_each_domain(small):
    y, obs, sl = small
    prob = objective._Problem(y, obs, sl)
    fold = paper_cv.make_folds(prob.mask(), prob.dom, prob.K, 5, seed=0)
    assert np.array_equal(fold >= 0, prob.mask())
    for t in range(prob.K):
        cols = prob.dom == t
        for i in range(5):
            counts = np.bincount(fold[i, cols][fold[i, cols] >= 0], minlength=5)
            assert counts.max() - counts.min() <= 1


def test_missing_cells_do_not_enter_the_loss(small):
    y, obs, sl = small
    data = Responses.from_arrays(y, obs, sl)
    r = paper.fit_paper(data, C=0.1)
    flipped = np.where(obs, y, 1 - y).astype(np.int8)  # change every unobserved cell
    r2 = paper.fit_paper(data.with_answers(flipped, obs), C=0.1)  # the answers taken as they are
    assert np.array_equal(r.theta, r2.theta) and r.record["objective"] == r2.record["objective"]


def test_constant_items_are_dropped_and_filled_in():
    sim = simulate_paper(0.2, n_llms=40, domain_sizes=(10, 10), seed=0)
    y = sim.correct.copy()
    y[:, 0] = 1
    y[:, 12] = 0
    r = paper.fit_paper(Responses.from_arrays(y, None, _slices((10, 10))), C=0.1)
    assert list(r.extra["dropped_items"]) == [0, 12]
    assert (r.a[0], r.d[0], r.a[12], r.d[12]) == (0.0, objective.BOUND, 0.0, -objective.BOUND)
    with pytest.raises(InputError, match="at least 2 domains"):
        paper.fit_paper(Responses.from_arrays(np.ones((10, 4), np.int8), None, _slices((2, 2))))


def test_kernel_bits_do_not_depend_on_alignment(small):
    y, obs, sl = small
    prob = objective._Problem(y, obs, sl)
    obj = objective._Objective(prob, prob.mask())
    th, a, d, _ = objective._spectral_start(prob, prob.mask())
    f1 = obj.lik(th, a, d)
    g1 = obj.ga.copy()
    buf = np.empty(len(a) + 1)[1:]  # the same values 8 bytes off
    buf[:] = a
    f2 = obj.lik(th, buf, d.copy())
    assert f1 == f2 and np.array_equal(g1, obj.ga)


def test_fit_variants_and_bootstrap(small):
    y, obs, sl = small
    data = Responses.from_arrays(y, obs, sl)
    data = Responses.from_frame(simulate_paper(0.3, n_llms=50, domain_sizes=SIZES, seed=4).responses)
    est = fit(data, "mtl", variant="paper", gamma=0.2, bootstrap=2, n_jobs=1)
    assert est.info["C"] == 0.2 and est.info["settings"]["variant"] == "paper"
    assert est.info["settings"]["optimizer"] == "fast" and est.info["settings"]["cv_seed"] == 0
    assert est.info["diagnostics"]["converged"] is True
    draws = est.draws("theta")  # error replicates refitted with C held at 0.2
    assert est.uncertainty_source == "bootstrap" and draws.shape == (2, 50, 3)
    assert not np.array_equal(draws[0], draws[1])
    for v in ("paper-global", "paper-local"):
        e = fit(data, "mtl", variant=v)
        assert e.point("theta").shape == (50, 3) and e.info["settings"]["variant"] == v
    with pytest.raises(InputError, match="unknown variant"):
        fit(data, "mtl", variant="papr")
    with pytest.raises(InputError, match="applies to method 'mtl' only"):
        fit(data, "stl", variant="paper")
    with pytest.raises(InputError, match="rank-one 2PL"):
        fit(data, "mtl", variant="paper", guessing=0.25)


def test_paper_design_shapes_and_truth():
    sim = simulate_paper(0.3, seed=2)
    assert sim.correct.shape == (100, sum(PAPER_DOMAIN_SIZES)) and sim.observed.all()
    assert list(sim.domains.n_items) == list(PAPER_DOMAIN_SIZES) and len(PAPER_DOMAIN_SIZES) == 18
    theta = sim.domain_scores.to_numpy()
    assert np.allclose(theta.mean(axis=0), 0) and np.allclose(theta.std(axis=0), 1) and np.abs(theta).max() <= 4
    alpha = np.array(sim.settings["alpha"])
    assert alpha[0] == 0.3 and np.abs(alpha).max() <= 0.3
    a = sim.items.discrimination
    assert a.between(0.5, 1.5).all() and sim.items.intercept.between(-1, 1).all()
    g = sim.overall["score"].to_numpy()
    assert abs(g.mean()) < 1e-10 and abs(g.std() - 1) < 1e-10
    s = objective._sines(g, theta.T)[0].sum()  # the truth is the sine centre
    rng = np.random.default_rng(0)
    for _ in range(10):
        assert objective._sines(objective._sphere(g + 0.05 * rng.standard_normal(100)), theta.T)[0].sum() >= s - 1e-12
    flat = simulate_paper(0.0, seed=2)  # h = 0: every domain is the centre
    t0 = flat.domain_scores.to_numpy()
    assert np.allclose(t0, t0[:, :1]) and np.allclose(flat.overall["score"], t0[:, 0])
    assert np.array_equal(simulate_paper(0.3, seed=2).correct, sim.correct)


def test_a_fused_fits_intervals_carry_the_domains_deviations():
    """A fit that fuses every domain onto theta_G has no deviations left: answers redrawn from
    it refit to fused traits, so every domain's interval was the overall score's (coverage of
    the domain truths 0.45 on the paper's design).  The error bootstrap's world draws
    deviations with each domain's estimated spread, and says so in fit.json."""
    sim = simulate_paper(0.4, n_llms=50, domain_sizes=SIZES, seed=4)
    data = Responses.from_frame(sim.responses)
    est = fit(data, "mtl", variant="paper", gamma=1e3, bootstrap=8, n_jobs=1)
    theta = est.point("theta")
    assert np.allclose(theta, theta[:, :1])  # fused: every domain is theta_G
    draws = est.draws("theta")
    assert not np.allclose(draws, draws[:, :, :1])  # each domain's own error
    psi = np.array(est.info["deviation_spread"])
    assert psi.shape == (3,) and (psi > 0.01).all()
    for k, m in ((0, 1), (0, 2), (1, 2)):  # fused refits: two domains' errors differ by their truths' deviations
        spread = (draws[:, :, k] - draws[:, :, m]).std()
        assert 0.7 < spread / math.sqrt(psi[k] + psi[m]) < 1.4
    assert est.info["intervals"].startswith("estimate minus quantiles of the bootstrap error")
    assert "sine centre" in est.info["intervals"]
    # the replicates keep the optimiser
    est = fit(data, "mtl", variant="paper-global", bootstrap=2, n_jobs=1, optimizer="adam")
    assert est.info["settings"]["optimizer"] == "adam" and est.info["optimizer"] == "adam"


def test_fit_takes_the_papers_optimizer_and_fold_seed(small):
    y, obs, sl = small
    data = Responses.from_arrays(y, obs, sl)
    data = Responses.from_frame(simulate_paper(0.3, n_llms=50, domain_sizes=SIZES, seed=4).responses)
    est = fit(data, "mtl", variant="paper", gamma=0.2, optimizer="adam")
    ref = paper.fit_paper(data, C=0.2, optimizer="adam")
    assert est.info["optimizer"] == "adam" and np.array_equal(est.point("theta"), ref.theta)
    assert est.info["objective"] == ref.record["objective"]
    fast = fit(data, "mtl", variant="paper", gamma=0.2)
    assert fast.info["optimizer"] == "fast" and fast.info["objective"] < ref.record["objective"]
    assert fit(data, "mtl", variant="paper", gamma=0.2, seed=2).info["settings"]["cv_seed"] == 2  # default: seed
    with pytest.raises(InputError, match=r"optimizer \(--optimizer\) applies to the paper variants"):
        fit(data, "mtl", optimizer="adam")
    with pytest.raises(InputError, match="unknown optimizer"):
        fit(data, "mtl", variant="paper", optimizer="lbfgs")
    with pytest.raises(InputError, match=r"cv_seed \(--cv-seed\) applies to variant 'paper' only"):
        fit(data, "mtl", variant="paper-local", cv_seed=3)
    with pytest.raises(InputError, match="cv_seed must be an integer >= 0"):
        fit(data, "mtl", variant="paper", cv_seed=-1)


def test_folds_are_the_papers_from_its_seed():
    """The paper's fold maker: ``default_rng(seed + 100003)``, domain by domain, LLM by LLM, a
    permutation of the LLM's observed items cut by ``array_split``; the same ``--cv-seed`` gives
    the paper's folds."""
    sim = simulate_paper(0.3, n_llms=12, domain_sizes=(7, 9), seed=0)
    obs = np.random.default_rng(0).random(sim.correct.shape) > 0.2
    prob = objective._Problem(sim.correct * obs, obs, _slices((7, 9)))
    assert prob.dropped.size == 0  # (the paper's code, too, drops constant items first)
    fold = paper_cv.make_folds(prob.mask(), prob.dom, prob.K, 5, seed=20260803)
    rng = np.random.default_rng(20260803 + 100_003)
    for s in _slices((7, 9)):
        block = obs[:, s]
        for i in range(12):
            parts = np.array_split(rng.permutation(np.flatnonzero(block[i])), 5)
            for f, items in enumerate(parts):
                assert (fold[i, s][items] == f).all()


def test_paper_variant_keeps_its_traits_where_cells_are_empty():
    """The paper variant's domain scores are the paper's theta_t (centred, norm sqrt(N) over all
    LLMs), also when an LLM has no response in a domain: not re-standardised over the others."""
    sim = simulate_paper(0.3, n_llms=50, domain_sizes=SIZES, seed=4)
    df = sim.responses
    df = df[~((df["llm"] == df["llm"].iloc[0]) & (df["domain"] == df["domain"].iloc[0]))]
    data = Responses.from_frame(df)
    est = fit(data, "mtl", variant="paper", gamma=0.2)
    ref = paper.fit_paper(data, C=0.2)
    assert est.predicted.sum() == 1
    assert np.array_equal(est.point("theta"), ref.theta)
    assert np.allclose(np.linalg.norm(est.point("theta"), axis=0), math.sqrt(50))


def test_cli_paper_optimizer_and_cv_seed(tmp_path, capsys):
    import json

    from mtlirt.cli import main

    data = tmp_path / "small.csv"
    simulate_paper(0.3, n_llms=30, domain_sizes=(8, 10), seed=1).responses.to_csv(data, index=False)
    out = tmp_path / "fit"
    assert main(["fit", str(data), "--variant", "paper", "--gamma", "0.2", "--optimizer", "adam",
                 "--out", str(out)]) == 0
    info = json.loads((out / "fit.json").read_text())
    assert info["optimizer"] == "adam" and info["settings"]["optimizer"] == "adam"
    out2 = tmp_path / "fit2"
    assert main(["fit", str(data), "--variant", "paper", "--cv-seed", "20260803", "--out", str(out2)]) == 0
    assert json.loads((out2 / "fit.json").read_text())["cv"]["seed"] == 20260803
    capsys.readouterr()
    assert main(["fit", str(data), "--optimizer", "adam", "--out", str(tmp_path / "x")]) == 2
    assert main(["fit", str(data), "--variant", "paper-global", "--cv-seed", "1", "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["mtlirt: error: optimizer (--optimizer) applies to the paper variants of mtl only (variant "
                   "paper, paper-global or paper-local)",
                   "mtlirt: error: cv_seed (--cv-seed) applies to variant 'paper' only (its cross-validation folds; "
                   "the others have none)"]
    assert not (tmp_path / "x").exists()


def test_deviation_variance_recovers_the_spread_of_deviations():
    """Maximum likelihood of each domain's deviation variance about a known centre, the deviation
    integrated out: near the truth for small and large spreads (where moments of the score lose
    the large deviations to the logistic's curvature), at the floor for a domain on its centre,
    and larger by 1 / (1 - h)^2 for a centre that follows a share h of the domain."""
    rng = np.random.default_rng(3)
    N, sizes, psi = 400, (40, 40, 40), np.array([0.0, 0.1, 0.5])
    centre = rng.standard_normal((N, 1)) * np.ones((1, 3))
    a, d = rng.uniform(0.5, 1.5, 120), rng.uniform(-1, 1, 120)
    theta = centre + rng.standard_normal((N, 3)) * np.sqrt(psi)
    sl = _slices(sizes)
    p = np.concatenate([1 / (1 + np.exp(-(theta[:, [k]] * a[s] + d[s]))) for k, s in enumerate(sl)], axis=1)
    y = (rng.random(p.shape) < p).astype(np.int8)
    obs = rng.random(p.shape) > 0.1
    est = deviations.deviation_variance(y * obs, obs, sl, centre, a, d)
    assert est[0] < 0.02 and abs(est[1] - 0.1) < 0.04 and abs(est[2] - 0.5) < 0.12
    lev = deviations.deviation_variance(y * obs, obs, sl, centre, a, d, leverage=[0.1, 0.1, 0.1])
    assert np.allclose(lev[1:], est[1:] / 0.81)
