"""Intervals of the point estimators: MTL's error bootstrap, predicted cells, coverage."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from mtlirt.data.responses import Responses
from mtlirt.data.simulate import simulate
from mtlirt.estimators.bootstrap import deviation_spread
from mtlirt.estimators.mtl import fit_mtl
from mtlirt.fitting import fit
from mtlirt.results.fitdir import write_fit


def _slices(sizes):
    edges = np.cumsum([0] + list(sizes))
    return [slice(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:])]


def _std(x):
    return (x - x.mean(0)) / x.std(0)


def test_deviation_spread_recovers_the_true_spread():
    h = 0.3
    sim = simulate(3000, [30] * 4, similarity=h, seed=0)
    centre = np.outer(sim.overall["score"].to_numpy(), sim.loadings["score"].to_numpy())
    it = sim.items
    psi = deviation_spread(sim.correct, None, _slices([30] * 4), centre, it["discrimination"], it["intercept"])
    np.testing.assert_allclose(psi, h, atol=0.06)
    # no deviations at all: the spread sits near its floor
    s0 = simulate(3000, [30] * 4, similarity=0.0, seed=0)
    centre0 = np.outer(s0.overall["score"].to_numpy(), s0.loadings["score"].to_numpy())
    psi0 = deviation_spread(s0.correct, None, _slices([30] * 4), centre0, s0.items["discrimination"],
                            s0.items["intercept"])
    assert psi0.max() < 0.04


@pytest.fixture(scope="module")
def blocky():
    sim = simulate(120, [8] * 6, similarity=0.2, block_missing=0.3, seed=1)
    return sim, Responses.from_frame(sim.responses)


def _empty(sim):
    return np.column_stack([~sim.observed[:, s].any(1) for s in _slices(sim.settings["domain_sizes"].values())])


def test_predicted_cells_are_flagged_and_get_a_real_spread(blocky, tmp_path):
    sim, resp = blocky
    empty = _empty(sim)
    assert 0.05 < empty.mean() < 0.3
    est = fit(resp, "mtl", bootstrap=16, seed=0, n_jobs=1)
    ds = est.domain_scores()
    np.testing.assert_array_equal(ds["predicted"].to_numpy().reshape(empty.shape), empty)
    sd = ds["sd"].to_numpy().reshape(empty.shape)
    # a deviation from the centre is unknown: never a near-zero sd, wider than measured cells
    assert sd[empty].min() > 0.2
    assert np.median(sd[empty]) > np.median(sd[~empty])
    # every cell is the factor model's posterior mean, predicted cells included, as fit_mtl gives it: the
    # in-sample step centres each domain over the LLMs with responses, with the spread of posterior means
    theta = est.point("theta")
    own = fit_mtl(resp)
    np.testing.assert_array_equal(theta, own.theta)
    for k in range(theta.shape[1]):
        seen = theta[~empty[:, k], k]
        assert abs(seen.mean()) < 1e-3
        assert 0.5 < seen.std() <= 1
    # same seed, same intervals
    again = fit(resp, "mtl", bootstrap=16, seed=0, n_jobs=1).domain_scores()
    pd.testing.assert_frame_equal(ds, again)
    # the flag reaches domain_scores.csv
    write_fit(est, tmp_path / "fit")
    csv = pd.read_csv(tmp_path / "fit" / "domain_scores.csv")
    assert csv["predicted"].dtype == bool and csv["predicted"].sum() == empty.sum()


def test_mtl_keeps_its_posterior_mean_spread_over_the_llms_with_responses():
    """A shrunk fit (0 < C < inf, the biased regularisation at a given C) reports domains with the spread
    of posterior means (< 1); filling the empty cells and re-centring over the LLMs with responses keeps
    that spread, items following."""
    sim = simulate(200, [15] * 6, similarity=0.2, block_missing=0.3, seed=1)
    resp = Responses.from_frame(sim.responses)
    own = fit_mtl(resp, scores="shrunk")
    assert own.scores == "shrunk" and 0 < own.C < np.inf and own.theta.std(axis=0).max() < 0.99
    est = fit(resp, "mtl", gamma=own.record["gamma"], rank=own.rank)
    empty = _empty(sim)
    theta = est.point("theta")
    for k in range(theta.shape[1]):
        seen = theta[~empty[:, k], k]
        assert abs(seen.mean()) < 1e-9
        np.testing.assert_allclose(seen.std(), own.theta[:, k].std(), rtol=1e-6)
    # the linear predictor of every answered cell is unchanged by the shift
    a, d = est.point("discrimination"), est.point("intercept")
    lin = theta[:, resp.item_domain] * a + d
    lin_own = own.theta[:, resp.item_domain] * own.a + own.d
    np.testing.assert_allclose(lin[resp.mask], lin_own[resp.mask], atol=1e-6)


def test_stl_predicts_the_population_where_it_knows_nothing(blocky):
    sim, resp = blocky
    empty = _empty(sim)
    est = fit(resp, "stl", bootstrap=16, seed=0, n_jobs=1)
    ds = est.domain_scores()
    score = ds["score"].to_numpy().reshape(empty.shape)
    sd = ds["sd"].to_numpy().reshape(empty.shape)
    np.testing.assert_array_equal(score[empty], 0.0)
    assert 0.6 < np.median(sd[empty]) < 1.5  # draws from N(0, 1)
    assert ds["predicted"].sum() == empty.sum()
    # without a bootstrap the flag is there too
    assert fit(resp, "stl").domain_scores()["predicted"].sum() == empty.sum()


def test_mtl_intervals_cover_the_truth():
    """Many short domains near the shared structure (h = 0.1), so MTL shrinks hard.

    Measured on these two seeds with 30 replicates (2026-12-01): the old
    intervals (answers redrawn from the shrunk fit, percentile intervals)
    covered 0.545 of the domain scores and 0.807 of the overall scores; the
    error bootstrap 0.802 and 0.803 (30 replicates' percentile bounds hold
    about 0.84 of a new draw).
    """
    inside, inside_overall = [], []
    for seed in (0, 1):
        sim = simulate(150, [6] * 24, similarity=0.1, seed=seed)
        est = fit(Responses.from_frame(sim.responses), "mtl", bootstrap=30, seed=seed, n_jobs=1)
        assert est.info["scores"] == "posterior"
        ds = est.domain_scores(0.9)
        truth = _std(sim.domain_scores.to_numpy())
        lo, hi = (ds[c].to_numpy().reshape(truth.shape) for c in ("lower", "upper"))
        inside.append((truth >= lo) & (truth <= hi))
        ov = est.overall_scores(0.9).set_index("llm").loc[sim.llm_names]
        eta = _std(sim.overall["score"].to_numpy())
        inside_overall.append((eta >= ov["lower"].to_numpy()) & (eta <= ov["upper"].to_numpy()))
        assert "error" in est.info["intervals"]
    cover = np.mean(inside)
    assert 0.7 < cover < 0.93, cover
    assert 0.72 < np.mean(inside_overall) < 0.97


def test_deviation_spread_of_a_fitted_centre_counts_its_leverage():
    """MTL's centre is fitted to the same data: short domains' moments without the leverage
    correction came out near the floor (0.001-0.04 where the truth is 0.1)."""
    from mtlirt.estimators.point_methods import _POINT
    from mtlirt.results.finish import _reported

    sim = simulate(400, [10] * 6, similarity=0.1, seed=5)
    r = Responses.from_frame(sim.responses)
    res = _POINT["mtl"](r, model="2pl", guessing=None, rank=None, gamma=None, seed=5)
    arr = _reported(res, "mtl", "default", np.zeros((r.n_llms, r.n_domains), dtype=bool), r.item_domain)
    eta = arr["overall"][:, None]
    W = np.linalg.lstsq(eta - eta.mean(0), arr["centre"] - arr["centre"].mean(0), rcond=None)[0].T
    naive = deviation_spread(r.correct, None, r.domain_slices, arr["centre"], arr["a"], arr["d"])
    psi = deviation_spread(r.correct, None, r.domain_slices, arr["centre"], arr["a"], arr["d"], loadings=W)
    assert naive.mean() < 0.05
    assert 0.06 < psi.mean() < 0.16 and psi.min() > 0.03
    est = fit(r, "mtl", bootstrap=2, seed=5, n_jobs=1)  # the error bootstrap's world uses it
    np.testing.assert_allclose(est.info["deviation_spread"], psi, rtol=1e-6)
