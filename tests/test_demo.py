"""The demo end to end at a tiny size, with its progress messages."""

import pytest

from mtlirt.demo import run_demo


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::mtlirt.bayes.NotConvergedWarning")  # 2 x 60 draws: not meant to
def test_tiny_demo_writes_everything_and_shows_progress(tmp_path, monkeypatch, capfd):
    monkeypatch.setenv("MTLIRT_PROGRESS", "1")
    # 4 replicates of the report's correlation check, not the default 20: each is one STL fit
    res = run_demo(tmp_path / "demo", seed=3, n_llms=40, scale=0.02, bootstrap=2, draws=60, tune=60, chains=2,
                   check_replicates=4)
    out = res["out"]
    for path in ("leaderboard.parquet", "truth", "mtl/overall.csv", "bayes/overall.csv", "report.html"):
        assert (out / path).exists(), path
    assert len(res["headline"]) == 5 and res["headline"][-1] == f"report: {res['report']}"
    err = capfd.readouterr().err
    # a message for every long step, the Bayesian sampling included (nutpie draws its own bar
    # on a terminal only)
    for message in ("simulating 40 LLMs", "fitting mtl", "writing the MTL fit", "route: items fixed",
                    "building the factor-2pl structure model", "sampling the loadings: 2 chains x 60 draws after 60 "
                    "tuning steps", "derived quantities",
                    "writing the Bayesian fit", "writing the report"):
        assert f"mtlirt: {message}" in err, message
    # and a bar for each model check that loops (the replicates, the draws)
    for bar in ("correlation check", "posterior predictive item fit", "leave-one-LLM-out"):
        assert f"{bar}: " in err, bar
