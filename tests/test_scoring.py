"""Scoring new LLMs against a fit's fixed items and structure (mtlirt.evaluate.scoring, mtlirt score)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from mtlirt import InputError, fit, simulate, write_fit
from mtlirt.cli import main
from mtlirt.data.responses import Responses
from mtlirt.evaluate.scoring import Scorer, factor_loadings, overall_loadings, score

N_CAL, N_NEW = 300, 120
SIZES = [12, 12, 8, 8, 5, 5]


@pytest.fixture(scope="module")
def world():
    """A tiny simulated leaderboard: MTL calibrated on 300 LLMs, 120 new ones held out."""
    sim = simulate(N_CAL + N_NEW, SIZES, seed=3)
    data = Responses.from_frame(sim.responses)
    est = fit(data.subset(llms=data.llms[:N_CAL]), "mtl", seed=0)
    return sim, est, Scorer(est)


def _long(sim, rows, cols=None):
    """The long table of some LLMs (rows) restricted to some items (column positions of sim.correct)."""
    items = np.asarray(sim.items["item"], dtype=str)
    cols = np.arange(len(items)) if cols is None else np.asarray(cols)
    out = []
    for i in rows:
        c = cols[sim.observed[i, cols]]
        out.append(pd.DataFrame({"llm": sim.llm_names[i], "item": items[c], "correct": sim.correct[i, c]}))
    return pd.concat(out, ignore_index=True)


def test_factor_loadings_recover_a_one_factor_matrix():
    lam = np.array([0.9, 0.8, 0.7, 0.6, 0.5])
    R = np.outer(lam, lam)
    np.fill_diagonal(R, 1.0)
    np.testing.assert_allclose(factor_loadings(R), lam, atol=1e-4)
    np.testing.assert_allclose(factor_loadings(-R + 2 * np.eye(5)) ** 2, factor_loadings(-R + 2 * np.eye(5)) ** 2)


def test_no_responses_gives_the_prior(world):
    _, est, sc = world
    s = sc.score_parsed([("nobody", np.zeros(0, int), np.zeros(0, int))], scale="population")
    o = s.overall.iloc[0]
    assert abs(o["score"]) < 1e-6 and abs(o["sd"] - 1) < 1e-3
    assert np.allclose(s.domains["score"], 0, atol=1e-6)
    assert np.allclose(s.domains["sd"], 1, atol=2e-3)
    assert (s.domains["n_responses"] == 0).all()


def test_one_domain_only(world):
    """A new LLM that answered one domain only gets every domain, the others through the overall score."""
    sim, est, sc = world
    dom0 = est.domains[0]
    cols = np.flatnonzero(sim.items["domain"].to_numpy() == dom0)
    df = pd.DataFrame({"llm": "specialist", "item": sim.items["item"].to_numpy()[cols], "correct": 1})
    s = sc.score(df)
    d = s.domains.set_index("domain")
    assert list(d.index) == list(est.domains)
    assert d.loc[dom0, "n_responses"] == len(cols)
    assert (d.drop(index=dom0)["n_responses"] == 0).all()
    # all right in one domain: that domain and (through positive loadings) every other above average
    assert (d["score"] > 0).all()
    assert d.loc[dom0, "score"] > d.drop(index=dom0)["score"].max()
    # answered domain narrower than the predicted ones, predicted ones narrower than the prior
    assert d.loc[dom0, "sd"] < d.drop(index=dom0)["sd"].min()
    pop_sd = s.domains["sd"].to_numpy() * sc.scale
    assert (pop_sd < 1).all()
    assert (d["lower"] < d["score"]).all() and (d["score"] < d["upper"]).all()
    assert s.overall.loc[0, "n_responses"] == len(cols)


def test_unknown_item_is_named_or_ignored(world):
    sim, est, sc = world
    df = _long(sim, [N_CAL], np.arange(10))
    bad = pd.concat([df, pd.DataFrame({"llm": [sim.llm_names[N_CAL]], "item": ["no-such-item"], "correct": [1]})])
    with pytest.raises(InputError, match="no-such-item"):
        sc.score(bad)
    kept = sc.score(bad, ignore_unknown_items=True)
    pd.testing.assert_frame_equal(kept.overall, sc.score(df).overall)


def test_domain_must_match_the_fit(world):
    sim, est, sc = world
    df = _long(sim, [N_CAL], np.arange(3))
    df["domain"] = est.domains[-1]
    with pytest.raises(InputError, match="another domain"):
        sc.score(df)


def test_everything_right(world):
    sim, est, sc = world
    items = np.asarray(sim.items["item"], dtype=str)
    one_wrong = np.r_[0, np.ones(len(items) - 1, dtype=int)]
    df = pd.DataFrame({"llm": np.repeat(["oracle", "almost"], len(items)), "item": np.tile(items, 2),
                       "correct": np.r_[np.ones(len(items), dtype=int), one_wrong]})
    s = sc.score(df)
    o = s.overall.iloc[0]
    assert np.isfinite(s.domains[["score", "sd", "lower", "upper"]].to_numpy()).all()
    assert o["score"] > np.quantile(est.point("overall"), 0.99)
    assert o["score"] > s.overall.iloc[1]["score"]  # one wrong answer less
    assert o["lower"] < o["score"] < o["upper"]
    assert 0.9 < o["expected_accuracy"] <= o["expected_accuracy_upper"] <= 1.0


def test_reproducible_with_a_seed(world):
    sim, _, sc = world
    df = _long(sim, range(N_CAL, N_CAL + 5), np.arange(0, 50, 3))
    a, b = sc.score(df, seed=7), sc.score(df, seed=7)
    pd.testing.assert_frame_equal(a.overall, b.overall)
    pd.testing.assert_frame_equal(a.domains, b.domains)
    c = sc.score(df, seed=8)
    pd.testing.assert_series_equal(a.overall["score"], c.overall["score"])  # exact, no draws
    assert not np.allclose(a.overall["expected_accuracy_lower"], c.overall["expected_accuracy_lower"])


def test_intervals_cover_on_a_tiny_simulation(world):
    """90% intervals of new LLMs from 15 random items each hold the truth about 90% of the time."""
    sim, est, sc = world
    rng = np.random.default_rng(0)
    J = sim.correct.shape[1]
    rows = range(N_CAL, N_CAL + N_NEW)
    df = pd.concat([_long(sim, [i], rng.choice(J, 15, replace=False)) for i in rows], ignore_index=True)
    s = sc.score(df, scale="population")
    true_g = sim.overall["score"].to_numpy()[N_CAL:]
    o = s.overall
    cov_g = ((o["lower"] <= true_g) & (true_g <= o["upper"])).mean()
    d = s.domains
    true_t = sim.domain_scores.loc[[sim.llm_names[i] for i in rows], list(est.domains)].to_numpy().ravel()
    cov_t = ((d["lower"] <= true_t) & (true_t <= d["upper"])).mean()
    assert 0.8 <= cov_g <= 0.98, cov_g
    assert 0.82 <= cov_t <= 0.96, cov_t
    # the point estimates carry information: the overall score tracks the truth
    assert np.corrcoef(o["score"], true_g)[0, 1] > 0.8


def test_expected_accuracy_tracks_the_truth(world):
    sim, est, sc = world
    rows = list(range(N_CAL, N_CAL + 40))
    s = sc.score(_long(sim, rows))
    it = sim.items
    th = sim.domain_scores.to_numpy()[rows]
    dcode = pd.Index(sim.domain_scores.columns).get_indexer(it["domain"])
    a, d, c, u = (it[k].to_numpy(float) for k in ("discrimination", "intercept", "guessing", "upper"))
    true_acc = (c + (u - c) / (1 + np.exp(-(th[:, dcode] * a + d)))).mean(axis=1)
    err = np.abs(s.overall["expected_accuracy"].to_numpy() - true_acc)
    observed = np.where(sim.observed[rows], sim.correct[rows], 0).sum(axis=1) / sim.observed[rows].sum(axis=1)
    # with every item answered the model's estimate is about as good as the raw proportion correct (on 300
    # calibration LLMs, item error offsets the smoothing of the coin flips) and unbiased
    assert err.mean() < 1.15 * np.abs(observed - true_acc).mean(), (err.mean(), np.abs(observed - true_acc).mean())
    assert abs((s.overall["expected_accuracy"].to_numpy() - true_acc).mean()) < 0.015
    lo, hi = s.overall["expected_accuracy_lower"], s.overall["expected_accuracy_upper"]
    assert ((lo <= true_acc) & (true_acc <= hi)).mean() >= 0.75


def test_score_function_and_fit_folder(world, tmp_path):
    sim, est, sc = world
    folder = write_fit(est, tmp_path / "fit")
    df = _long(sim, [N_CAL, N_CAL + 1], np.arange(20))
    s = score(folder, df)
    pd.testing.assert_frame_equal(s.overall, sc.score(df).overall)
    out = s.write(tmp_path / "scores")
    cols = ["llm", "score", "sd", "lower", "upper", "expected_accuracy", "expected_accuracy_lower",
            "expected_accuracy_upper"]
    assert list(pd.read_csv(out / "overall.csv").columns)[: len(cols)] == cols
    assert list(pd.read_csv(out / "domain_scores.csv").columns) == ["llm", "domain", "score", "sd", "lower",
                                                                     "upper", "n_responses"]


def test_cli_score(world, tmp_path, capsys):
    sim, est, sc = world
    folder = write_fit(est, tmp_path / "fit")
    df = _long(sim, [N_CAL, N_CAL + 1], np.arange(20))
    df.to_csv(tmp_path / "new.csv", index=False)
    assert main(["score", str(folder), str(tmp_path / "new.csv"), "--out", str(tmp_path / "out")]) == 0
    got = pd.read_csv(tmp_path / "out" / "overall.csv")
    np.testing.assert_allclose(got["score"], sc.score(df).overall["score"])
    assert len(pd.read_csv(tmp_path / "out" / "domain_scores.csv")) == 2 * len(est.domains)
    bad = pd.concat([df, pd.DataFrame({"llm": ["x"], "item": ["ghost"], "correct": [0]})])
    bad.to_csv(tmp_path / "bad.csv", index=False)
    assert main(["score", str(folder), str(tmp_path / "bad.csv"), "--out", str(tmp_path / "o2")]) == 2
    assert "ghost" in capsys.readouterr().err
    assert not (tmp_path / "o2").exists()
    assert main(["score", str(folder), str(tmp_path / "bad.csv"), "--out", str(tmp_path / "o3"),
                 "--ignore-unknown-items"]) == 0


def test_accuracy_fit_is_refused():
    sim = simulate(40, [5, 5], seed=0)
    est = fit(Responses.from_frame(sim.responses), "accuracy")
    with pytest.raises(InputError, match="item parameters"):
        Scorer(est)


def test_estimate_score_delegates(world):
    sim, est, sc = world
    df = _long(sim, [N_CAL], np.arange(12))
    pd.testing.assert_frame_equal(est.score(df, seed=2).domains, sc.score(df, seed=2).domains)


@pytest.mark.slow
@pytest.mark.xdist_group("bayes-fixed-60x6")
@pytest.mark.filterwarnings("ignore::mtlirt.bayes.NotConvergedWarning")  # a short chain: not meant to
def test_bayesian_fit_averages_over_structure_draws(tmp_path):
    """A Bayesian fit folder (NUTS, items fixed): the scorer mixes over draws of the loadings, and covers.

    The fit has the shape of test_checks.py's (60 LLMs x 72 items in the same 6 domains, the same run
    length), so the two share one compiled model on one worker (``mtlirt.bayes._nutpie``; an ADVI fit of
    150 LLMs here compiled a model of its own: 58 s of a cold run's test time)."""
    sim = simulate(110, [8] * 4 + [20] * 2, seed=3)
    data = Responses.from_frame(sim.responses)
    est = fit(data.subset(llms=data.llms[:60]), "bayes", seed=0, items="fixed", draws=150, tune=150, chains=2,
              progress=False)
    folder = write_fit(est, tmp_path / "bayes")
    sc = Scorer(est, draws=8)
    assert len(sc.structures) == 8
    lam = np.stack([st.lam for st in sc.structures])
    assert lam.std(axis=0).max() > 1e-3  # the draws differ
    items = np.asarray(sim.items["item"], dtype=str)
    df = pd.concat([pd.DataFrame({"llm": sim.llm_names[i], "item": items[:20], "correct": sim.correct[i, :20]})
                    for i in range(60, 110)], ignore_index=True)
    s = score(folder, df, draws=8, scale="population")
    g = sim.overall["score"].to_numpy()[60:]
    o = s.overall
    assert 0.8 <= ((o["lower"] <= g) & (g <= o["upper"])).mean() <= 1.0
    assert np.corrcoef(o["score"], g)[0, 1] > 0.7
    # the mixture: its mean is the mean of the per-draw posteriors
    one = Scorer(est, draws=8)
    means = []
    for st in one.structures:
        one.structures = [st]
        means.append(one.score(df.iloc[:20], scale="population").overall["score"].iloc[0])
    np.testing.assert_allclose(np.mean(means), s.overall["score"].iloc[0], rtol=1e-9)
    # on the fit's scale each draw's g is standardised as the fit's overall scores are in that draw:
    # the maps turn the draw's traits into its overall scores, and the fitted LLMs re-scored get theirs
    maps = Scorer(est, draws=8).overall_maps
    eta = est.draws("eta_raw", source="posterior", max_draws=8)[..., 0]
    np.testing.assert_allclose((eta - maps[:, :1]) / maps[:, 1:], est.draws("overall", max_draws=8), atol=1e-10)
    assert np.ptp(maps[:, 1]) > 1e-3  # the draws' spreads differ
    re = Scorer(est, draws=30).score(data.subset(llms=data.llms[:60])).overall.set_index("llm").loc[est.llms]
    gap = np.abs(re["score"] - est.point("overall")) / re["sd"]
    assert gap.mean() < 0.1 and gap.max() < 0.35, gap.describe()


def test_overall_loadings_at_rank_two_are_rotation_invariant():
    rng = np.random.default_rng(0)
    L = rng.uniform(0.2, 0.6, (7, 2))
    c, s = np.cos(0.7), np.sin(0.7)
    rot = np.array([[c, -s], [s, c]])
    np.testing.assert_allclose(overall_loadings(L), overall_loadings(L @ rot), atol=1e-12)
    # it is the correlation of each domain with the standardised shared part of the average domain
    lbar = L.mean(axis=0)
    np.testing.assert_allclose(overall_loadings(L), L @ lbar / np.linalg.norm(lbar))
    np.testing.assert_allclose(overall_loadings(L[:, :1]), L[:, 0])


def test_realised_accuracy_counts_the_answers(world):
    """The realised accuracy: answered items count with their answers, the rest are predicted. With every item
    answered it is the observed accuracy (an interval of one point); with none it is the expected accuracy,
    its interval wider by the answers' Bernoulli variance."""
    sim, est, sc = world
    rows = [N_CAL, N_CAL + 1, N_CAL + 2]
    full = sc.score(_long(sim, rows)).overall
    observed = np.array([sim.correct[i, sim.observed[i]].mean() for i in rows])
    np.testing.assert_allclose(full["accuracy"], observed)
    np.testing.assert_allclose(full["accuracy_lower"], observed)
    np.testing.assert_allclose(full["accuracy_upper"], observed)
    assert (full["expected_accuracy_upper"] - full["expected_accuracy_lower"] > 0.01).all()
    none = sc.score_parsed([("nobody", np.zeros(0, int), np.zeros(0, int))]).overall.iloc[0]
    assert abs(none["accuracy"] - none["expected_accuracy"]) < 1e-9
    assert (none["accuracy_upper"] - none["accuracy_lower"]
            > none["expected_accuracy_upper"] - none["expected_accuracy_lower"])


def test_realised_accuracy_interval_covers_the_observed_accuracy(world):
    """Against the observed whole-benchmark accuracy, from 45 of the 50 items: the realised accuracy's 90%
    intervals cover about 90% (measured 0.89; the expected accuracy's, which treat the answered items' answers
    as unknown, are three times as wide here and cover 0.975), and its point estimate, which keeps the
    answers, is closer (MAE 0.016 against 0.025)."""
    sim, est, sc = world
    rng = np.random.default_rng(0)
    J = sim.correct.shape[1]
    rows = range(N_CAL, N_CAL + N_NEW)
    df = pd.concat([_long(sim, [i], rng.choice(J, 45, replace=False)) for i in rows], ignore_index=True)
    o = sc.score(df).overall
    observed = np.array([sim.correct[i, sim.observed[i]].mean() for i in rows])
    cov = ((o["accuracy_lower"] <= observed) & (observed <= o["accuracy_upper"])).mean()
    assert 0.8 <= cov <= 0.97, cov
    width = (o["accuracy_upper"] - o["accuracy_lower"]).mean()
    assert width < 0.75 * (o["expected_accuracy_upper"] - o["expected_accuracy_lower"]).mean()
    assert np.abs(o["accuracy"] - observed).mean() < 0.8 * np.abs(o["expected_accuracy"] - observed).mean()


def test_rescoring_reproduces_the_fit_and_items_give_the_accuracy(tmp_path):
    """MTL's domain scores are the scorer's posterior means on its items' scale: re-scoring the fitted
    LLMs with their own answers (missing cells included) gives domain_scores.csv back, and items.csv's
    ``c + (1 - c) sigmoid(a s + d)`` at a new LLM's scores gives its expected accuracy (up to the
    difference between the probability at the posterior mean and the posterior mean probability)."""
    from scipy.special import expit

    sim = simulate(80, SIZES, missing=0.1, seed=5)
    with pytest.warns(UserWarning, match="every answer correct"):
        data = Responses.from_frame(sim.responses)
    est = fit(data.subset(llms=data.llms[:60]), "mtl", seed=0)
    folder = write_fit(est, tmp_path / "fit")
    s = score(folder, data)
    both = pd.read_csv(folder / "domain_scores.csv").merge(s.domains, on=["llm", "domain"], suffixes=("", "_re"))
    assert len(both) == 60 * len(SIZES)
    np.testing.assert_allclose(both["score_re"], both["score"], atol=1e-9)
    # the overall score: the fit's is the posterior mean of g standardised over its LLMs, and the scorer
    # puts every LLM on that scale (overall.csv back, its sd and interval scaled alike); on the population
    # scale it is g's posterior mean itself, which spreads less
    o = s.overall.set_index("llm").loc[est.llms]
    np.testing.assert_allclose(o["score"], est.point("overall"), atol=1e-8)
    pop = Scorer(est).score(data, scale="population").overall.set_index("llm").loc[est.llms]
    g = pop["score"].to_numpy()
    assert 0.8 < g.std() < 0.99
    np.testing.assert_allclose((g - g.mean()) / g.std(), est.point("overall"), atol=1e-8)
    np.testing.assert_allclose(o["sd"], pop["sd"] / g.std(), rtol=1e-8)
    np.testing.assert_allclose(o["lower"], (pop["lower"] - g.mean()) / g.std(), atol=1e-8)
    items = pd.read_csv(folder / "items.csv")
    new = s.domains[s.domains["llm"].isin(data.llms[60:])].pivot(index="llm", columns="domain", values="score")
    c = items["guessing"].fillna(0.0).to_numpy()
    plug_in = [np.mean(c + (1 - c) * expit(items["discrimination"] * new.loc[llm, items["domain"]].to_numpy()
                                           + items["intercept"])) for llm in new.index]
    expected = s.overall.set_index("llm").loc[new.index, "expected_accuracy"].to_numpy()
    gap = np.abs(np.array(plug_in) - expected)
    assert gap.max() < 0.015 and gap.mean() < 0.008


def test_overall_summary_of_a_mixture_of_mapped_grid_posteriors():
    """The overall score's mean, sd and quantiles over structures whose g is mapped by ``(g - m_s) / s_s``:
    against draws from the cells' uniform mixture, mapped; one structure with the identity is the grid's."""
    from mtlirt.numerics.factor_grid import grid_quantiles, mixture_summary
    from mtlirt.numerics.factor_model import G_GRID

    def masses(mu, sd):
        p = np.exp(-0.5 * ((G_GRID - mu) / sd) ** 2)
        return p / p.sum()

    qs = (0.05, 0.5, 0.95)
    one = masses(0.4, 0.3)
    mean, sd, q = mixture_summary([one], G_GRID, np.array([[0.0, 1.0]]), qs)
    np.testing.assert_allclose(q, grid_quantiles(one, G_GRID, qs), atol=1e-12)
    np.testing.assert_allclose(mean, one @ G_GRID, atol=1e-12)
    pgs, maps = [masses(0.4, 0.3), masses(-0.2, 0.5)], np.array([[0.1, 0.9], [-0.3, 1.2]])
    mean, sd, q = mixture_summary(pgs, G_GRID, maps, qs)
    rng = np.random.default_rng(0)
    h = G_GRID[1] - G_GRID[0]
    x = np.concatenate([(rng.choice(G_GRID, 200_000, p=p) + (rng.random(200_000) - 0.5) * h - m) / s
                        for p, (m, s) in zip(pgs, maps, strict=True)])
    np.testing.assert_allclose(q, np.quantile(x, qs), atol=0.01)
    assert abs(mean - x.mean()) < 0.005 and abs(sd - x.std()) < 0.01


def _dense_posterior(st, item_domain, pos, y, K):
    """The factor model's posterior means and sds (overall, then each domain) by brute force on dense grids."""
    from scipy.special import expit

    from mtlirt.numerics.llm_side import EPS

    a, d, c = st.items
    g, t = np.linspace(-6, 6, 1201), np.linspace(-7, 7, 2801)
    logZ, conds = np.zeros(len(g)), []
    for k in range(K):
        s = pos[item_domain[pos] == k]
        yk = y[item_domain[pos] == k]
        p = np.clip(c[s, None] + (1 - c[s, None]) * expit(a[s, None] * t + d[s, None]), EPS, 1 - EPS)
        ll = np.where(yk[:, None] > 0, np.log(p), np.log1p(-p)).sum(axis=0)
        L = np.exp(ll - ll.max())
        W = np.exp(-0.5 * ((t[None] - st.lam[k] * g[:, None]) / st.psi[k]) ** 2)
        W /= W.sum(axis=1, keepdims=True)
        Z = W @ L
        logZ += np.log(Z)
        conds.append(W * L / Z[:, None])
    pg = np.exp(-0.5 * g**2 + logZ - (-0.5 * g**2 + logZ).max())
    pg /= pg.sum()
    out = [(pg @ g, np.sqrt(pg @ g**2 - (pg @ g) ** 2))]
    for cond in conds:
        pt = pg @ cond
        out.append((pt @ t, np.sqrt(pt @ t**2 - (pt @ t) ** 2)))
    return np.array(out)


def test_a_narrow_posterior_is_refined(world):
    """Sharp items (sds near 0.05, below the fixed grids' spacing of 0.125): the refined grids give the means
    and sds of a brute-force dense quadrature, which the fixed grids miss."""
    from mtlirt.numerics.factor_model import _tabulate

    _, est, base = world
    J, K = base.n_items, base.n_domains
    rng = np.random.default_rng(0)
    a = np.full(J, 40.0)
    d = -a * rng.uniform(-0.3, 0.3, J)
    st = _tabulate(a, d, np.zeros(J), base.item_domain, np.full(K, 0.8), K)
    truth_t = 0.05
    y = (rng.random(J) < 1 / (1 + np.exp(-(a * truth_t + d)))).astype(np.int8)
    pos = np.arange(J)
    ref = _dense_posterior(st, base.item_domain, pos, y, K)
    got = {}
    for refine in (True, False):
        sc = Scorer(est, refine=refine)
        sc.structures, sc.selection = [st], st
        r = sc.posterior(pos, y, scale="population")
        got[refine] = np.c_[np.r_[r["overall"], r["theta"]], np.r_[r["overall_sd"], r["theta_sd"]]]
    assert ref[1:, 1].max() < 0.1
    np.testing.assert_allclose(got[True][:, 0], ref[:, 0], atol=1e-5)
    np.testing.assert_allclose(got[True][:, 1], ref[:, 1], rtol=1e-3)
    assert np.abs(got[False][1:, 1] / ref[1:, 1] - 1).max() > 0.1


def test_domain_sums_add_rows_by_domain_in_any_order():
    """The rows' sums by domain, runs of a domain apart included: those of ``np.add.at``."""
    from mtlirt.numerics.factor_model import domain_sums

    rng = np.random.default_rng(1)
    rows = rng.standard_normal((50, 7))
    for dom in (np.sort(rng.integers(0, 5, 50)), rng.integers(0, 5, 50)):
        ref = np.zeros((6, 7))
        np.add.at(ref, dom, rows)
        np.testing.assert_allclose(domain_sums(dom, rows, 6), ref, rtol=1e-13, atol=1e-13)
    assert not domain_sums(np.zeros(0, dtype=int), np.zeros((0, 7)), 3).any()


@pytest.mark.parametrize("holes", [0.0, 0.05])
def test_reported_scores_tables_over_the_llms_that_answered(monkeypatch, holes):
    """MTL's log-likelihood tables of a domain that some LLMs did not run (with and without other
    unobserved cells, floor or none): over those that answered it, and over every LLM, give the dense
    mask's numbers; the others' rows are 0."""
    from mtlirt.estimators import em_steps
    from mtlirt.estimators import factor_scores as fs
    from mtlirt.numerics.factor_model import _tabulate

    sim = simulate(200, domain_sizes=[20, 15], missing=holes, seed=2)
    obs = sim.observed.copy()
    obs[:70, 20:35] = False
    correct = np.where(obs, sim.correct, 0).astype(np.int8)
    rng = np.random.default_rng(0)
    a, d = np.exp(0.3 * rng.standard_normal(35)), rng.standard_normal(35)
    item_domain = np.repeat([0, 1], [20, 15])
    s = slice(20, 35)
    seen = obs[:, s].any(axis=1)
    for c in (np.zeros(35), np.repeat([0.0, 0.2], [20, 15])):
        st = _tabulate(a, d, c, item_domain, np.array([0.7, 0.6]), 2)
        cells = fs._cells(obs, s, seen)
        assert cells is not None and len(cells[2]) == np.count_nonzero(~obs[seen, s])
        dense = fs._domain_table(correct, obs, s, st)
        few = fs._domain_table(correct, obs, s, st, cells=cells)
        rows = em_steps.seen_rows(cells[0])
        kept = fs._domain_table(correct, obs, s, st, cells=cells,
                                answers=fs._seen_answers(correct, obs, s, rows, np.float64))
        np.testing.assert_array_equal(kept, few)  # the answers the scale step's tables keep for their passes
        monkeypatch.setattr(em_steps, "SEEN_SHARE", 0.0)
        every = fs._domain_table(correct, obs, s, st, cells=cells)
        monkeypatch.undo()
        np.testing.assert_allclose(few, dense, rtol=1e-12, atol=1e-9)
        np.testing.assert_allclose(every, dense, rtol=1e-12, atol=1e-9)
        assert np.all(few[~seen] == 0.0) and np.all(few[seen].max(axis=1) < 0.0)
