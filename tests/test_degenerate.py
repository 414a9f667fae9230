"""Degenerate and tiny data: the guards, their messages and the defined treatments (docs/data.md,
"Degenerate and tiny data")."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from mtlirt.cli import main
from mtlirt.data.responses import Responses
from mtlirt.data.simulate import simulate
from mtlirt.data.validate import MIN_LLMS, MIN_RESPONSES, DataWarning
from mtlirt.errors import InputError
from mtlirt.estimators.mtl import fit_mtl
from mtlirt.fitting import fit
from mtlirt.results.estimate import _ranks


def _frame(sim) -> pd.DataFrame:
    return sim.responses.astype({"llm": str, "item": str, "domain": str})


def _run(argv, capsys) -> tuple[int, str]:
    capsys.readouterr()
    rc = main([str(a) for a in argv])
    return rc, capsys.readouterr().err


# ------------------------------------------------------------------ nothing varies: an error


def _same_everywhere(answer):
    rows = [(f"m{i}", f"d{k}/{j}", f"d{k}", answer) for i in range(30) for k in range(3) for j in range(10)]
    return pd.DataFrame(rows, columns=["llm", "item", "domain", "correct"])


def _same_per_domain():
    df = _same_everywhere(1)
    df.loc[df["domain"] == "d1", "correct"] = 0
    return df


NOTHING_VARIES = {
    "every response correct": (lambda: _same_everywhere(1), "every response is correct (900 responses)"),
    "every response wrong": (lambda: _same_everywhere(0), "every response is wrong (900 responses)"),
    "every domain constant": (_same_per_domain, "no response varies within any domain (d0 (all correct), "
                                                "d1 (all wrong), d2 (all correct))"),
}


@pytest.mark.parametrize("case", NOTHING_VARIES.values(), ids=NOTHING_VARIES.keys())
def test_no_varying_response_is_an_error(case, tmp_path, capsys):
    """30 identical LLMs answering everything right were fitted and ranked 1-30: now nothing is measured,
    validate and fit exit 2 with one line, and nothing is written."""
    make, message = case
    table = tmp_path / "t.csv"
    make().to_csv(table, index=False)
    before = sorted(tmp_path.rglob("*"))
    for argv in (["validate", table], ["fit", table, "--out", tmp_path / "fit"],
                 ["fit", table, "--method", "accuracy", "--out", tmp_path / "fit"]):
        rc, err = _run(argv, capsys)
        assert rc == 2, err
        assert err.startswith(f"mtlirt: error: {message}") and len(err.strip().splitlines()) == 1, err
        assert sorted(tmp_path.rglob("*")) == before
    with pytest.raises(InputError, match="nothing can be measured"):
        Responses.from_frame(make())
    # a Responses built from arrays (no reading rules) is refused by the fit
    y = (make().sort_values(["llm", "item"])["correct"].to_numpy().reshape(30, 30)).astype(np.int8)
    raw = Responses(y, np.ones_like(y, dtype=bool), [f"m{i}" for i in range(30)], [f"q{j}" for j in range(30)],
                    ["d0", "d1", "d2"], np.repeat([0, 1, 2], 10))
    for method in ("mtl", "accuracy", "bayes"):
        with pytest.raises(InputError, match="nothing can be measured"):
            fit(raw, method)


# ------------------------------------------------------------------ a constant domain


@pytest.fixture(scope="module")
def constant_domain():
    """40 LLMs x 3 domains of 10 items; every answer in d03 correct."""
    sim = simulate(40, domain_sizes=[10, 10, 10], seed=3)
    df = _frame(sim)
    df.loc[df["domain"] == "d03", "correct"] = 1
    with pytest.warns(DataWarning):  # its constant items
        return df, Responses.from_frame(df)


@pytest.mark.parametrize("method", ["mtl", "stl", "pooled", "accuracy"])
def test_constant_domain_is_kept_and_predicted(constant_domain, method):
    """Nothing in a constant domain tells the LLMs apart, nor ties the domain to the others: the model-based
    methods set its responses aside and predict it from the other domains, flagged; accuracy keeps its
    proportions."""
    _, r = constant_domain
    with pytest.warns(DataWarning, match=r"constant domain d03 \(all correct\): no response varies"):
        est = fit(r, method)
    ds = est.domain_scores().set_index(["llm", "domain"])
    const = ds.xs("d03", level="domain")
    rest = ds.drop(index="d03", level="domain")
    assert not rest["predicted"].any()
    assert list(est.domains) == ["d01", "d02", "d03"]
    if method == "accuracy":
        assert not const["predicted"].any()
        np.testing.assert_array_equal(est.point("accuracy")[:, 2], 1.0)
        np.testing.assert_array_equal(const["score"], 0.0)
        return
    assert const["predicted"].all()
    assert np.isfinite(const["score"]).all()
    if method == "pooled":  # one trait for every domain: the constant one gets it too
        np.testing.assert_allclose(const["score"], rest.xs("d01", level="domain")["score"])
    else:  # nothing relates it to the others (its centre has no loading): every LLM at the same score
        assert np.ptp(const["score"]) < 1e-9
        corr = est.domain_correlation()
        assert corr.loc[(corr["domain_b"] == "d03"), "estimate"].isna().all()
        assert corr.loc[(corr["domain_a"] == "d01") & (corr["domain_b"] == "d02"), "estimate"].notna().all()


@pytest.mark.filterwarnings("default::mtlirt.data.validate.DataWarning")  # the command prints them
def test_constant_domain_through_the_command_line(constant_domain, tmp_path, capsys):
    df, _ = constant_domain
    table = tmp_path / "t.csv"
    df.to_csv(table, index=False)
    rc, err = _run(["fit", table, "--out", tmp_path / "fit"], capsys)
    assert rc == 0
    lines = [ln for ln in err.splitlines() if "constant domain" in ln]
    assert lines == ["mtlirt: warning: constant domain d03 (all correct): no response varies, so nothing there "
                     "tells the LLMs apart; kept, its responses set aside: every LLM's score there is predicted "
                     "from its other domains"]
    ds = pd.read_csv(tmp_path / "fit" / "domain_scores.csv")
    assert ds.loc[ds["domain"] == "d03", "predicted"].all() and not ds.loc[ds["domain"] != "d03", "predicted"].any()
    rc = main(["validate", str(table)])
    assert rc == 0
    assert "constant domains (every response the same; a fit predicts their scores): d03 (all correct)" in \
        capsys.readouterr().out


# ------------------------------------------------------------------ thin domains


@pytest.mark.filterwarnings("default::mtlirt.data.validate.DataWarning")  # the command prints them
def test_thin_domains_are_named(tmp_path, capsys):
    """Fewer than MIN_LLMS LLMs in a domain, or fewer than MIN_RESPONSES responses per LLM: a warning
    naming it, and a line of mtlirt validate."""
    assert (MIN_LLMS, MIN_RESPONSES) == (20, 5)  # the thresholds of docs/data.md (benchmarks/bench_thin.py)
    sim = simulate(40, domain_sizes=[10, 10, 2], seed=3)
    df = _frame(sim)
    df = df[~((df["domain"] == "d01") & ~df["llm"].isin(sim.llm_names[:5]))]
    table = tmp_path / "t.csv"
    df.to_csv(table, index=False)
    named = "d01 (5 LLMs, 10 responses each), d03 (40 LLMs, 2 responses each)"
    assert main(["validate", str(table)]) == 0
    assert ("thin domains (under 20 LLMs, or under 5 responses per LLM; rough scores): " + named
            in capsys.readouterr().out)
    rc, err = _run(["fit", table, "--method", "stl", "--out", tmp_path / "fit"], capsys)
    assert rc == 0 and (tmp_path / "fit" / "domain_scores.csv").exists()
    assert [ln for ln in err.splitlines() if "thin" in ln] == [
        f"mtlirt: warning: thin domains {named}: under 20 LLMs, or under 5 responses per LLM, a domain's scores "
        "are rough and its intervals cover less"]
    r = Responses.from_frame(df)
    for method in ("mtl", "accuracy"):
        with pytest.warns(DataWarning, match=re.escape(f"thin domains {named}: under 20 LLMs, or under 5 "
                                                       "responses per LLM, a domain's scores are rough")):
            fit(r, method)
    # 20 LLMs with 5 responses each are enough
    assert Responses.from_frame(_frame(simulate(20, domain_sizes=[5, 5], seed=1))).summary().thin_domains == {}


# ------------------------------------------------------------------ tiny leaderboards: predicted cells


def _tiny(seed):
    """6 LLMs x 6 domains of 3 items, each LLM without 1-3 of the domains (an Inspect-sized set)."""
    sim = simulate(6, domain_sizes=[3] * 6, seed=seed)
    df = _frame(sim)
    rng = np.random.default_rng(seed)
    keep = np.ones(len(df), dtype=bool)
    for llm in sim.llm_names:
        drop = rng.choice(sim.domain_names, size=rng.integers(1, 4), replace=False)
        keep &= ~((df["llm"] == llm) & df["domain"].isin(drop)).to_numpy()
    return Responses.from_frame(df[keep])


@pytest.mark.filterwarnings("ignore::mtlirt.data.validate.DataWarning")
def test_predicted_cells_of_a_tiny_leaderboard_stay_within_the_prior_predictive():
    """On 6 LLMs the predicted cells reached +-17 and their bounds +-49 (the centre's loading on a
    separated domain grew without bound, and a domain run by one LLM, or by LLMs with the same answers,
    was re-scaled by the spread of their estimates). Now a prediction is at most a unit-variance trait's
    conditional mean, and its interval that of a unit-variance trait."""
    for seed in range(4):
        r = _tiny(seed)
        res = fit_mtl(r)
        assert np.linalg.norm(res.extra["w"], axis=1).max() <= 1 + 1e-9  # the centre's loadings, population scale
        est = fit(r, "mtl", bootstrap=16, seed=0, n_jobs=1)
        ds = est.domain_scores()
        pred = ds[ds["predicted"]]
        assert len(pred) > 0
        assert pred["score"].abs().max() < 3, seed
        assert ds[["lower", "upper"]].abs().to_numpy().max() < 6, seed
        assert ((ds["lower"] <= ds["score"]) & (ds["score"] <= ds["upper"])).all(), seed
        # a thin domain with predicted cells keeps the fit's population scale (no re-scaling)
        empty = (r.counts()[1] == 0).any(axis=0)
        np.testing.assert_allclose(np.asarray(est.info["population_scale"]["scale"])[empty], 1.0)


# ------------------------------------------------------------------ a point estimate inside its interval


def _inside(est):
    ds = est.domain_scores()
    ok = ds["score"].isna() | ((ds["lower"] <= ds["score"]) & (ds["score"] <= ds["upper"]))
    ov = est.overall_scores()
    ok_ov = (ov["lower"] <= ov["score"]) & (ov["score"] <= ov["upper"])
    ranks = (ov["rank_lower"] <= ov["rank"]) & (ov["rank"] <= ov["rank_upper"])
    corr = est.domain_correlation()
    ok_c = corr["estimate"].isna() | ((corr["lower"] <= corr["estimate"]) & (corr["estimate"] <= corr["upper"]))
    return bool(ok.all() and ok_ov.all() and ranks.all() and ok_c.all())


@pytest.fixture(scope="module")
def ordinary():
    return Responses.from_frame(_frame(simulate(40, domain_sizes=[10, 10, 10], seed=5)))


@pytest.mark.filterwarnings("ignore::mtlirt.data.validate.DataWarning")
@pytest.mark.parametrize("method,variant", [("mtl", "default"), ("stl", "default"), ("pooled", "default"),
                                            ("accuracy", "default"), ("mtl", "paper"), ("mtl", "paper-global"),
                                            ("mtl", "paper-local")])
def test_every_point_estimate_lies_inside_its_interval(ordinary, method, variant):
    """On ordinary and on tiny data, with bootstrap intervals: every score, overall score, rank and
    correlation inside its own interval (MTL's error bootstrap misses the estimate of LLMs far from
    their centre, its bias-corrected interval lying beyond it: the interval reaches the estimate).
    The paper's own variant tunes C by 5-fold cross-validation, on 6 LLMs from folds some of which
    hold nothing out (they count for nothing; it crashed on their missing loss)."""
    for data in (ordinary, _tiny(1)):
        est = fit(data, method, variant=variant, bootstrap=8, seed=0, n_jobs=1)
        assert _inside(est), (method, variant, data)
        assert est.info["intervals_extended"].keys() <= {"domain_scores", "overall"}


def test_a_posterior_mean_outside_its_equal_tailed_interval_is_reached(ordinary):
    """A skewed posterior (the Bayesian fit's draws) can put its mean outside the equal-tailed interval;
    the tables extend the interval to the mean, as for a bootstrap."""
    import xarray as xr

    from mtlirt.results.estimate import Estimate

    est = fit(ordinary, "accuracy", bootstrap=40, seed=0, n_jobs=1)
    post = est.tree["bootstrap"].to_dataset()
    theta = post["theta"].values.copy()
    theta[:, :39] = 0.0  # 39 of 40 draws at 0, one far out: the mean (2.5) beyond the 95% quantile (0)
    theta[:, 39] = 100.0
    post["theta"] = (post["theta"].dims, theta)
    point = est.posterior
    for name in ("discrimination", "intercept", "guessing"):  # the replicates kept the items fixed
        post[name] = point[name].isel(draw=0, drop=True).expand_dims(draw=post["draw"].values, axis=1)
    tree = est.tree.copy()
    tree["posterior"] = xr.DataTree(post)
    skewed = Estimate(tree)
    ds = skewed.domain_scores(0.9)
    np.testing.assert_allclose(ds["score"], 2.5)
    assert (ds["lower"] == 0).all() and (ds["upper"] >= ds["score"]).all()


# ------------------------------------------------------------------ ranks


def test_ties_share_a_rank_in_points_and_draws():
    np.testing.assert_array_equal(_ranks(np.array([0.3, 0.9, 0.3, 0.1])), [2, 1, 2, 4])
    # equal up to floating-point noise is equal; every draw ranked alike
    draws = np.array([[0.2672612419124244, 0.26726124191242473, -1.0], [1.0, 2.0, 2.0]])
    np.testing.assert_array_equal(_ranks(draws), [[1, 1, 3], [3, 1, 1]])


def test_identical_llms_share_their_rank_and_a_point_fit_has_no_rank_interval(ordinary, tmp_path):
    """Copies of one LLM under other names get one rank; without draws the rank interval is missing (empty
    in overall.csv), not a zero-width interval that reads as certain; the report and compare cope."""
    from mtlirt.report.compare import compare
    from mtlirt.report.html import write_report
    from mtlirt.results.fitdir import write_fit

    df = ordinary.to_frame().astype({"llm": str, "item": str, "domain": str})
    copies = [df[df["llm"] == df["llm"].iloc[0]].assign(llm=f"copy{c}") for c in range(3)]
    r = Responses.from_frame(pd.concat([df, *copies], ignore_index=True))
    first = str(df["llm"].iloc[0])
    for method in ("mtl", "accuracy"):
        est = fit(r, method)
        ov = est.overall_scores().set_index("llm")
        group = ov.loc[[first, "copy0", "copy1", "copy2"], "rank"]
        assert group.nunique() == 1, (method, group)
        g, tied = group.iloc[0], (ov["rank"] == group.iloc[0]).sum()  # the four, and any equal score
        # competition ranking: g - 1 LLMs ahead, the tied share g, the next is g + tied
        assert (ov["rank"] < g).sum() == g - 1 and tied >= 4
        assert not ov["rank"].between(g + 1, g + tied - 1).any()
        assert ov["rank_lower"].isna().all() and ov["rank_upper"].isna().all()
        write_fit(est, tmp_path / method)
    csv = pd.read_csv(tmp_path / "mtl" / "overall.csv", keep_default_na=False)
    assert (csv["rank_lower"] == "").all() and (csv["rank_upper"] == "").all()
    booted = fit(r, "accuracy", bootstrap=4, seed=0, n_jobs=1).overall_scores()
    assert str(booted["rank_lower"].dtype) == "Int64" and booted["rank_lower"].notna().all()
    assert len(compare([tmp_path / "mtl", tmp_path / "accuracy"])) == 1
    assert write_report([tmp_path / "mtl", tmp_path / "accuracy"], tmp_path / "report.html").exists()


@pytest.mark.slow
@pytest.mark.xdist_group("bayes-fixed-60x6")  # the shape of test_checks.py's fit: one compiled model
@pytest.mark.filterwarnings("ignore::mtlirt.bayes.NotConvergedWarning")  # a short chain
def test_bayes_sets_a_constant_domain_aside_and_its_means_lie_in_their_intervals():
    """The Bayesian fit gets the same treatment: a constant domain's responses set aside, its scores the
    prior predictive given the other domains (flagged), its correlations the prior's; every posterior mean
    inside its interval."""
    sim = simulate(60, [8] * 4 + [20] * 2, seed=1)
    df = _frame(sim)
    df.loc[df["domain"] == "d01", "correct"] = 1
    r = Responses.from_frame(df)
    with pytest.warns(DataWarning, match=r"constant domain d01 \(all correct\)"):
        est = fit(r, "bayes", items="fixed", draws=150, tune=150, chains=2, progress=False, seed=0)
    assert _inside(est)
    ds = est.domain_scores()
    const = ds[ds["domain"] == "d01"]
    assert const["predicted"].all() and not ds.loc[ds["domain"] != "d01", "predicted"].any()
    assert const["score"].std() < 0.3 * ds.loc[ds["domain"] == "d02", "score"].std()  # near the prior mean
    assert (const["upper"] - const["lower"]).mean() > 2.5  # the prior's 90% width, 3.3
