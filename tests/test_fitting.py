import json
import re

import numpy as np
import pandas as pd
import pytest
from scipy.stats import rankdata

from mtlirt import ConvergenceWarning
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


def test_fit_takes_a_long_dataframe_or_a_path(sim, data, tmp_path):
    """Like bambi's and pymc-marketing's entry points, fit() takes the table itself: a long DataFrame or the
    path of a table, read and checked by the one reader (io.responses), with the same numbers as Responses."""
    path = tmp_path / "r.csv"
    sim.responses.to_csv(path, index=False)
    want = fit(data, "stl").point("theta")
    for given in (sim.responses, path, str(path)):
        est = fit(given, "stl")
        np.testing.assert_array_equal(est.point("theta"), want)
        assert est.info["data"]["fingerprint"] == data.fingerprint()
    with pytest.raises(InputError, match="correct must be 0 or 1"):  # the reader's rules, naming the rows
        fit(sim.responses.assign(correct=2), "stl")
    with pytest.raises(InputError, match="expected a Responses, a long DataFrame .* got ndarray"):
        fit(data.correct, "stl")


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
    from mtlirt.estimators import irt

    real = irt.fit_stl_data  # every calibration's path: STL's, MTL's single-domain and pooled fits
    monkeypatch.setattr(irt, "fit_stl_data", lambda *a, **k: real(*a, **{**k, "max_iter": 2}))
    path = tmp_path / "r.parquet"
    sim.write(path)
    assert main(["fit", str(path), "--method", "stl", "--out", str(tmp_path / "fit")]) == 0
    err = capsys.readouterr().err
    assert "DID NOT CONVERGE" in err and "item calibration" in err and "--draws" not in err
    with pytest.warns(ConvergenceWarning, match="item calibration"):
        est = fit(Responses.from_frame(sim.responses), "mtl", rank=1)
    calib = est.info["diagnostics"]["calibrations"]
    # the posterior scores at rank one tune nothing, so no pooled fit is run; at gamma = inf it is the estimate
    assert set(calib) == {"stl", "centre"} and not calib["stl"]
    assert est.info["diagnostics"]["converged"] is False
    with pytest.warns(ConvergenceWarning, match="item calibration"):
        est = fit(Responses.from_frame(sim.responses), "mtl", rank=1, gamma=float("inf"))
    calib = est.info["diagnostics"]["calibrations"]
    assert set(calib) == {"stl", "pooled", "centre"} and not calib["stl"] and not calib["pooled"]
    assert est.info["diagnostics"]["converged"] is False


def test_cli_advice_for_a_bayesian_fit_names_what_failed():
    """Divergences call for a higher target acceptance (a longer run repeats them); a run that failed on
    R-hat or ESS, for a run longer than the draws it reached."""
    from mtlirt.cli_commands import _not_converged_advice

    assert "--target-accept" in _not_converged_advice("bayes", {"divergences": 3, "n_draws": 3250})
    short = _not_converged_advice("bayes", {"divergences": 0, "n_draws": 4000})
    assert "longer than its 4000 draws" in short and "--target-accept" not in short
    assert "item calibration" in _not_converged_advice("mtl", {"divergences": 0})


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


# each check of fit's settings, in the API (a notebook gets the InputError before any work) and through the
# command line (the same message on one line, exit status 2, nothing written): (CLI options, fit() keywords)
REFUSED = {
    "variant of another method": (["--method", "stl", "--variant", "paper"], dict(method="stl", variant="paper"),
                                  "variant (--variant) applies to method 'mtl' only, not 'stl'"),
    "optimizer without a paper variant": (["--optimizer", "adam"], dict(optimizer="adam"),
                                          "optimizer (--optimizer) applies to the paper variants of mtl only"),
    "cv seed without the paper variant": (["--variant", "paper-global", "--cv-seed", "3"],
                                          dict(variant="paper-global", cv_seed=3),
                                          "cv_seed (--cv-seed) applies to variant 'paper' only"),
    "paper variant of rank 2": (["--variant", "paper", "--rank", "2"], dict(variant="paper", rank=2),
                                "the paper variant is the paper's rank-one 2PL without guessing"),
    "sampler options without bayes": (["--draws", "50", "--chains", "2"], dict(draws=50, chains=2),
                                      "draws (--draws), chains (--chains) apply to method 'bayes' only, not 'mtl'"),
    "spec without bayes": (["--method", "pooled", "--model", "factor-2pl"], dict(method="pooled", spec="factor-2pl"),
                           "spec (--model) applies to method 'bayes' only, not 'pooled'"),
    "bayes with guessing": (["--method", "bayes", "--guessing", "0.25"], dict(method="bayes", guessing=0.25),
                            "the Bayesian fit takes its item model from its spec"),
    "imh without the integrated route": (["--method", "bayes", "--items", "fixed", "--llm-side", "sampled",
                                          "--sampler", "imh"],
                                         dict(method="bayes", items="fixed", llm_side="sampled", sampler="imh"),
                                         "sampler='imh' samples the structure of the route with the whole LLM side"),
    "integrated route of correlated traits": (["--method", "bayes", "--model", "correlated-2pl", "--llm-side",
                                               "integrated"],
                                              dict(method="bayes", spec="correlated-2pl", llm_side="integrated"),
                                              "llm_side='integrated' needs algorithm='nuts', items='fixed' and factor"),
    "thin of ADVI": (["--method", "bayes", "--algorithm", "advi", "--thin", "2"],
                     dict(method="bayes", algorithm="advi", thin=2), "thin applies to llm_side='integrated' only"),
    "thin above draws": (["--method", "bayes", "--draws", "5", "--thin", "6"], dict(method="bayes", draws=5, thin=6),
                         "thin must be a number from 1 to draws; got 6"),
    "no chains": (["--method", "bayes", "--chains", "0"], dict(method="bayes", chains=0),
                  "chains must be an integer >= 1; got 0"),
    "target acceptance without bayes": (["--target-accept", "0.95"], dict(target_accept=0.95),
                                        "target_accept (--target-accept) applies to method 'bayes' only, not 'mtl'"),
    "target acceptance out of range": (["--method", "bayes", "--target-accept", "1.5"],
                                       dict(method="bayes", target_accept=1.5),
                                       "target_accept must be a number in (0, 1) or None; got 1.5"),
}


@pytest.mark.parametrize("case", REFUSED.values(), ids=REFUSED.keys())
def test_fit_and_the_cli_refuse_the_same_settings_alike(case, data, sim, tmp_path, monkeypatch, capsys):
    argv, kwargs, message = case
    import mtlirt.fitting as fitting

    def never(*args, **kw):
        raise AssertionError("fitted although the settings were invalid")

    monkeypatch.setattr(fitting, "_fit_bayes", never)
    for name in fitting._POINT:
        monkeypatch.setitem(fitting._POINT, name, never)
    kwargs = dict(kwargs)
    with pytest.raises(InputError) as api:
        fit(data, kwargs.pop("method", "mtl"), **kwargs)
    assert message in str(api.value)
    path = tmp_path / "t.csv"
    sim.responses.to_csv(path, index=False)
    capsys.readouterr()
    assert main(["fit", str(path), *argv, "--out", str(tmp_path / "fit")]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == f"mtlirt: error: {api.value}"
    assert not (tmp_path / "fit").exists()


def test_interval_and_check_replicates_are_checked_by_the_api(data, tmp_path, capsys):
    """write_fit refuses an interval outside (0, 1) and run_checks fewer than 2 replicates, with the messages
    the command line prints before it fits."""
    from mtlirt.evaluate.checks import run_checks

    est = fit(data, "accuracy")
    with pytest.raises(InputError, match=re.escape("interval (--interval) must be a probability in (0, 1), got 1.5")):
        write_fit(est, tmp_path / "fit", interval=1.5)
    assert not (tmp_path / "fit").exists()
    with pytest.raises(InputError, match=re.escape("n_replicates (--check-replicates) must be an integer of at least "
                                                   "2, got 1")):
        run_checks(est, data, n_replicates=1)


def test_fit_refuses_unknown_keywords_as_python_does(data):
    with pytest.raises(TypeError, match="unexpected keyword argument 'draw'"):
        fit(data, "bayes", draw=10)


def test_score_takes_the_path_of_a_table(sim, data, tmp_path):
    """score() takes what fit() takes: the table's path gives the scores of its DataFrame."""
    from mtlirt import score

    est = fit(data, "stl")
    new = sim.responses[sim.responses["llm"].isin(list(data.llms[:3]))]
    path = tmp_path / "new.csv"
    new.to_csv(path, index=False)
    want = score(est, new, seed=1)
    got = score(est, path, seed=1)
    pd.testing.assert_frame_equal(got.overall, want.overall)
    pd.testing.assert_frame_equal(got.domains, want.domains)
    assert len(got.overall) == 3
