import json
import re

import numpy as np
import pandas as pd
import pytest
from scipy.stats import rankdata

from mtlirt.cli import main
from mtlirt.data.responses import Responses
from mtlirt.data.simulate import simulate
from mtlirt.errors import InputError
from mtlirt.estimators.heldout import heldout_loglik
from mtlirt.fitting import fit
from mtlirt.results.fitdir import read_fit, write_fit


@pytest.fixture(scope="module")
def sim():
    return simulate(80, domain_sizes=[8, 12, 20], seed=11)


@pytest.fixture(scope="module")
def data(sim):
    return Responses.from_frame(sim.responses)


@pytest.mark.parametrize("method", ["mtl", "stl", "pooled", "accuracy"])
def test_every_method_gives_an_estimate_in_the_common_layout(data, sim, method):
    est = fit(data, method)
    post = est.posterior
    assert post["theta"].dims == ("chain", "draw", "llm", "domain")
    assert post.sizes["chain"] == 1 and post.sizes["draw"] == 1
    assert list(est.domains) == list(data.domains) and list(est.llms) == list(data.llms)
    theta = est.point("theta")
    assert np.isfinite(theta).all()
    truth = sim.overall["score"].loc[list(data.llms)].to_numpy()
    assert np.corrcoef(est.point("overall"), truth)[0, 1] > 0.8
    table = est.overall_scores()
    assert list(table.columns) == ["llm", "score", "sd", "lower", "upper", "rank", "rank_lower", "rank_upper",
                                   "expected_accuracy"]
    # best first; equal scores (the accuracy baseline's equal proportions) share the best rank of their group
    assert table["rank"].tolist() == rankdata(-table["score"].round(12), method="min").astype(int).tolist()
    assert table["rank"].iloc[0] == 1 and table["rank"].is_monotonic_increasing
    assert est.info["method"] == method and "seconds" in est.info


def test_bootstrap_is_seeded_and_independent_of_workers(data):
    a = fit(data, "stl", bootstrap=4, seed=3, n_jobs=1)
    b = fit(data, "stl", bootstrap=4, seed=3, n_jobs=2)
    c = fit(data, "stl", bootstrap=4, seed=4, n_jobs=1)
    np.testing.assert_array_equal(a.draws("theta"), b.draws("theta"))
    assert not np.array_equal(a.draws("theta"), c.draws("theta"))
    ds = a.domain_scores(0.9)
    assert (ds["lower"] <= ds["upper"]).all() and (ds["sd"] > 0).all()
    ov = a.overall_scores(0.9).set_index("llm").loc[list(data.llms)]
    ranks = a.rank_draws()
    # the interval of the draws' ranks, reaching the point's rank where the draws miss it
    np.testing.assert_array_equal(ov["rank_lower"], np.minimum(np.floor(np.quantile(ranks, 0.05, axis=0)), ov["rank"]))
    np.testing.assert_array_equal(ov["rank_upper"], np.maximum(np.ceil(np.quantile(ranks, 0.95, axis=0)), ov["rank"]))


def test_mtl_bootstrap_keeps_the_tuned_settings(data):
    est = fit(data, "mtl", bootstrap=3, seed=0, n_jobs=1)
    assert est.uncertainty_source == "bootstrap" and est.draws("theta").shape == (3, data.n_llms, data.n_domains)
    assert est.info["rank"] >= 1 and est.info["scores"] == "posterior" and "C" not in est.info


def test_fit_folder_roundtrip_and_columns(data, tmp_path):
    est = fit(data, "mtl", bootstrap=3, seed=0, n_jobs=1)
    out = write_fit(est, tmp_path / "fit")
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["domain_scores.csv", "overall.csv", "items.csv", "domain_correlation.csv", "fit.json", "posterior.nc"])
    assert list(pd.read_csv(out / "domain_scores.csv").columns) == [
        "llm", "domain", "score", "sd", "lower", "upper", "predicted"]
    assert list(pd.read_csv(out / "items.csv").columns) == [
        "item", "domain", "discrimination", "intercept", "difficulty", "guessing"]
    assert list(pd.read_csv(out / "domain_correlation.csv").columns) == [
        "domain_a", "domain_b", "estimate", "lower", "upper"]
    record = json.loads((out / "fit.json").read_text())
    assert record["method"] == "mtl" and record["rank"] == est.info["rank"] and "singular_values" in record
    assert "versions" in record and "seconds" in record
    back = read_fit(out)
    assert back.tree.identical(est.tree)
    items = pd.read_csv(out / "items.csv")
    # P(correct) = guessing + (1 - guessing) * sigmoid(discrimination * score + intercept)
    np.testing.assert_allclose(items["difficulty"], -items["intercept"] / items["discrimination"])


def test_heldout_loglik_prefers_the_model_over_a_coin(data):
    train, held = data.holdout(0.2, seed=1)
    est = fit(train, "stl")
    res = heldout_loglik(est, data, held)
    assert res["n"] == held.sum() and res["mean_loglik"] > np.log(0.5)


def test_every_llm_gets_a_score_in_a_domain_it_never_answered(sim):
    df = sim.responses.copy()
    first = df["llm"].astype(str) == "llm0001"
    dom0 = df["domain"].astype(str) == "d01"
    df = df[~(first & dom0)]
    r = Responses.from_frame(df)
    est = fit(r, "mtl", bootstrap=3, seed=0, n_jobs=1)
    row = est.domain_scores().query("llm == 'llm0001'")
    assert row["score"].notna().all() and row["sd"].notna().all()


def test_cli_fit_writes_folder_and_bad_input_writes_nothing(tmp_path, sim, capsys):
    good = tmp_path / "good.parquet"
    sim.write(good)
    assert main(["fit", str(good), "--method", "stl", "--bootstrap", "3", "--jobs", "1", "--heldout", "0.1",
                 "--out", str(tmp_path / "fit")]) == 0
    record = json.loads((tmp_path / "fit" / "fit.json").read_text())
    assert record["heldout"]["n"] > 0 and record["interval"] == 0.9
    bad = tmp_path / "bad.csv"
    sim.responses.assign(correct=2).to_csv(bad, index=False)
    assert main(["fit", str(bad), "--out", str(tmp_path / "nofit")]) == 2
    err = capsys.readouterr().err
    assert "correct must be 0 or 1" in err and "Traceback" not in err
    assert not (tmp_path / "nofit").exists()
    assert not any(p.name.startswith(".nofit") for p in tmp_path.iterdir())


def test_cli_convergence_advice_fits_the_method(tmp_path, sim, capsys, monkeypatch):
    """A frequentist fit whose item calibration stops at its sweep limit is flagged with
    advice for item calibration, not the sampler's --draws/--tune."""
    from mtlirt import fitting
    from mtlirt.estimators import irt

    real = irt.fit_stl
    monkeypatch.setattr(irt, "fit_stl", lambda *a, **k: real(*a, **{**k, "max_iter": 2}))
    path = tmp_path / "r.parquet"
    sim.write(path)
    assert main(["fit", str(path), "--method", "stl", "--out", str(tmp_path / "fit")]) == 0
    err = capsys.readouterr().err
    assert "DID NOT CONVERGE" in err and "item calibration" in err and "--draws" not in err
    with pytest.warns(fitting.ConvergenceWarning, match="item calibration"):
        est = fit(Responses.from_frame(sim.responses), "mtl", rank=1)
    calib = est.info["diagnostics"]["calibrations"]
    assert set(calib) == {"stl", "pooled", "centre"} and not calib["stl"] and not calib["pooled"]
    assert est.info["diagnostics"]["converged"] is False


@pytest.mark.parametrize(("settings", "message"), [
    (dict(bootstrap=1), "at least 2 replicates"),
    (dict(bootstrap=-3), "at least 2 replicates"),
    (dict(bootstrap=2.5), "at least 2 replicates"),
    (dict(rank=0), "rank (--rank) must be an integer of at least 1"),
    (dict(rank=4), "exceeds the number of domains (3)"),
])
@pytest.mark.parametrize("method", ["mtl", "bayes"])
def test_fit_refuses_bad_settings_before_any_work(data, monkeypatch, method, settings, message):
    # the same checks as the CLI's, in the API: a notebook gets the InputError, not a late ValueError
    import mtlirt.fitting as fitting

    def never(*args, **kwargs):
        raise AssertionError("fitted although the settings were invalid")

    monkeypatch.setattr(fitting, "_fit_bayes", never)
    monkeypatch.setitem(fitting._POINT, "mtl", never)
    with pytest.raises(InputError, match=re.escape(message)):
        fit(data, method, **settings)


def test_holdout_refuses_a_share_outside_the_unit_interval(data):
    for share in (0, 1, 1.5):
        with pytest.raises(InputError, match="held-out share must be in"):
            data.holdout(share)
