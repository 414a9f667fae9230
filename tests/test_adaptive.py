"""Adaptive testing across domains (mtlirt.evaluate.adaptive, mtlirt adapt)."""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd
import pytest

from mtlirt import InputError, fit, simulate, write_fit
from mtlirt.cli import main
from mtlirt.data.responses import Responses
from mtlirt.evaluate.adaptive import TARGETS, AdaptiveTest, replay
from mtlirt.evaluate.scoring import Scorer

N_CAL, N_NEW = 300, 60
SIZES = [14, 12, 10, 8, 6, 6]


@pytest.fixture(scope="module")
def world():
    sim = simulate(N_CAL + N_NEW, SIZES, seed=5)
    data = Responses.from_frame(sim.responses)
    est = fit(data.subset(llms=data.llms[:N_CAL]), "mtl", seed=0)
    return sim, est, Scorer(est)


def _full(sim, rows):
    items = np.asarray(sim.items["item"], dtype=str)
    return pd.concat([pd.DataFrame({"llm": sim.llm_names[i], "item": items[sim.observed[i]],
                                    "correct": sim.correct[i, sim.observed[i]]}) for i in rows], ignore_index=True)


@pytest.mark.parametrize("target", TARGETS)
def test_expected_variance_is_exact(world, target):
    """The criterion equals the target's posterior variance after each answer, weighted by its predictive."""
    _, _, sc = world
    test = AdaptiveTest(sc, target=target, seed=0)
    rng = np.random.default_rng(1)
    for j in rng.choice(sc.n_items, 6, replace=False):
        test.answer(int(j), int(rng.random() < 0.5))
    ev = test.expected_variance()
    assert np.isnan(ev[test.pos]).all()
    for j in rng.choice(np.flatnonzero(test.available), 5, replace=False):
        k = sc.item_domain[j]
        p1 = test.pg @ (test._cond[k] @ test._st.p[j])
        var = []
        for y in (0, 1):
            t = copy.deepcopy(test)
            t.answer(int(j), y)
            var.append(t.target_sd() ** 2)
        np.testing.assert_allclose(ev[j], (1 - p1) * var[0] + p1 * var[1], rtol=1e-8)


def test_target_sd_matches_the_scores(world):
    _, _, sc = world
    test = AdaptiveTest(sc, target="overall", seed=0)
    for j in range(0, sc.n_items, 5):
        test.answer(j, j % 3 != 0)
    s = test.scores(scale="population").overall.iloc[0]
    assert abs(s["sd"] - test.target_sd()) < 1e-9


def test_live_api(world):
    _, est, sc = world
    test = AdaptiveTest(est, budget=3, seed=0)
    asked = []
    while (item := test.next_item()) is not None:
        asked.append(item)
        test.answer(item, True)
    assert len(asked) == 3 and len(set(asked)) == 3 and test.done
    adm = test.administered("me")
    assert list(adm.columns) == ["llm", "step", "item", "domain", "correct"]
    assert adm["item"].tolist() == asked and adm["step"].tolist() == [1, 2, 3]
    with pytest.raises(InputError, match="already answered"):
        test.answer(asked[0], 1)
    with pytest.raises(InputError, match="not in the fit"):
        AdaptiveTest(sc).answer("ghost", 1)
    with pytest.raises(InputError, match="target"):
        AdaptiveTest(sc, target="everything")


def test_adaptive_narrows_faster_than_random(world):
    """After 8 items the adaptive test's overall sd is below that of 8 random items, LLM by LLM on average."""
    sim, _, sc = world
    rng = np.random.default_rng(0)
    sd_ad, sd_rand = [], []
    for i in range(N_CAL, N_CAL + 20):
        t = AdaptiveTest(sc, target="overall", budget=8, seed=int(i))
        while (j := t.next_position()) is not None:
            t.answer(j, sim.correct[i, j])  # the fit's item order is the simulation's (domains sorted alike)
        sd_ad.append(t.target_sd())
        r = AdaptiveTest(sc, target="overall")
        for j in rng.choice(sc.n_items, 8, replace=False):
            r.answer(int(j), sim.correct[i, j])
        sd_rand.append(r.target_sd())
    assert np.mean(sd_ad) < 0.95 * np.mean(sd_rand), (np.mean(sd_ad), np.mean(sd_rand))


def test_replay_budget_width_and_seed(world):
    sim, est, sc = world
    assert list(sc.items) == list(sim.items["item"])  # the oracle's columns line up with the fit's items
    df = _full(sim, range(N_CAL, N_CAL + 6))
    res = replay(sc, df, budget=10, target="accuracy", seed=3)
    adm = res.administered
    assert (adm.groupby("llm").size() == 10).all()
    assert not adm.duplicated(["llm", "item"]).any()
    merged = adm.merge(df, on=["llm", "item"], suffixes=("", "_data"))
    assert len(merged) == len(adm) and (merged["correct"] == merged["correct_data"]).all()
    again = replay(sc, df, budget=10, target="accuracy", seed=3)
    pd.testing.assert_frame_equal(adm, again.administered)
    pd.testing.assert_frame_equal(res.scores.overall, again.scores.overall)
    assert len(res.scores.domains) == 6 * len(est.domains)
    # stopping by interval width: every LLM stops once its overall interval is narrow enough
    wide = replay(sc, df, budget=None, width=1.2, target="overall", seed=3)
    n = wide.administered.groupby("llm").size().reindex(wide.scores.overall["llm"]).to_numpy()
    stopped = n < sc.n_items  # the others ran out of items first
    assert stopped.sum() >= 4, n
    sd = wide.scores.overall["sd"].to_numpy()
    assert (2 * 1.6449 * sd[stopped] < 1.2).all()


def test_cli_adapt(world, tmp_path):
    sim, est, sc = world
    folder = write_fit(est, tmp_path / "fit")
    _full(sim, range(N_CAL, N_CAL + 3)).to_csv(tmp_path / "full.csv", index=False)
    out = tmp_path / "out"
    assert main(["adapt", str(folder), "--responses", str(tmp_path / "full.csv"), "--budget", "7",
                 "--target", "domains", "--out", str(out), "--seed", "1"]) == 0
    adm = pd.read_csv(out / "administered.csv")
    assert list(adm.columns) == ["llm", "step", "item", "domain", "correct"]
    assert (adm.groupby("llm").size() == 7).all()
    assert len(pd.read_csv(out / "overall.csv")) == 3
    assert main(["adapt", str(folder), "--responses", str(tmp_path / "full.csv"), "--out", str(out)]) == 2
