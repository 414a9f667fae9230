"""Cross-domain correlations corrected for measurement error, with LLMs that ran only some domains."""

from __future__ import annotations

import numpy as np
import pytest

from mtlirt.data.responses import Responses
from mtlirt.data.simulate import simulate
from mtlirt.estimators.correlation import (
    column_corr,
    corr_draws,
    corrected_corr,
    error_corrected_corr,
    pairwise_corr,
    reliability_from_se,
)
from mtlirt.evaluate.correlation_check import correlation_statistic
from mtlirt.fitting import fit


def test_pairwise_corr_is_the_correlation_over_the_rows_seen_in_both():
    rng = np.random.default_rng(0)
    theta = rng.standard_normal((3, 50, 4))  # three replicates share one pattern
    seen = rng.random((50, 4)) > 0.3
    out = pairwise_corr(theta, seen)
    for b in range(3):
        for k in range(4):
            for m in range(4):
                rows = seen[:, k] & seen[:, m]
                want = np.corrcoef(theta[b, rows, k], theta[b, rows, m])[0, 1]
                assert out[b, k, m] == pytest.approx(want, abs=1e-12)
    seen[:, 0] = False
    seen[:2, 0] = True  # two LLMs in domain 0: no correlation with it
    assert np.isnan(pairwise_corr(theta[0], seen)[0, 1:]).all()


def test_complete_data_keeps_the_classical_correction():
    rng = np.random.default_rng(1)
    theta = rng.standard_normal((80, 5))
    se = rng.uniform(0.2, 0.8, (80, 5))
    corr, rel = error_corrected_corr(theta, se)
    np.testing.assert_array_equal(rel, reliability_from_se(se))
    np.testing.assert_array_equal(corr, corrected_corr(theta, rel))
    raw = column_corr(theta)
    np.testing.assert_allclose(corr, np.clip(raw / np.sqrt(np.outer(rel, rel)), -1, 1), atol=1e-15)
    corr_all, rel_all = error_corrected_corr(theta, se, np.ones((80, 5), bool))
    np.testing.assert_array_equal(corr_all, corr)
    np.testing.assert_array_equal(rel_all, rel)


def test_draws_ignore_the_cells_without_responses():
    """A replicate's unseen cells hold no score: whatever they hold, the draws are the same."""
    rng = np.random.default_rng(2)
    seen = rng.random((60, 4)) > 0.3
    point = rng.standard_normal((60, 4))
    reps = rng.standard_normal((5, 60, 4))
    rel = np.full(4, 0.8)
    p1, d1 = corr_draws(point, reps, rel, seen)
    p2, d2 = corr_draws(np.where(seen, point, 3.0), np.where(seen, reps, 3.0), rel, seen)
    np.testing.assert_allclose(d1, d2, atol=1e-12)
    np.testing.assert_allclose(p1, p2, atol=1e-12)


@pytest.fixture(scope="module")
def blocky():
    sim = simulate(n_llms=600, domain_sizes=[15] * 8, similarity=0.1, seed=4, block_missing=0.4)
    return sim, Responses.from_frame(sim.responses)


def test_fit_correlations_with_llms_that_ran_some_domains(blocky):
    """domain_corr is the check's statistic (one function), near the true correlations; over all
    rows (the prior's zeros read as scores) it was 0.987 where the truth is 0.90 on MMLU x 0.1."""
    sim, r = blocky
    empty = np.column_stack([~r.mask[:, s].any(1) for s in r.domain_slices])
    assert empty.mean() > 0.1
    est = fit(r, "stl", bootstrap=3, seed=0, n_jobs=1)
    corr = est.point("domain_corr")
    np.testing.assert_allclose(corr, correlation_statistic(r), atol=1e-12)
    iu = np.triu_indices(8, 1)
    truth = np.corrcoef(sim.domain_scores.to_numpy().T)[iu]
    assert abs(corr[iu].mean() - truth.mean()) < 0.03
    assert np.abs(corr[iu] - truth).mean() < 0.06
    # the bootstrap replicates are correlated the same way and centred on the point estimate
    draws = est.draws("domain_corr")[:, iu[0], iu[1]]
    np.testing.assert_allclose(draws.mean(0), corr[iu], atol=1e-9)
    assert np.isfinite(draws).all() and draws.std(0).mean() > 0.005
