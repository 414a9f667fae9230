"""Tests of the leaderboard simulator: the truth must match the data."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from mtlirt.data.responses import Responses
from mtlirt.data.sim_presets import mmlu_subjects, preset_domain_sizes
from mtlirt.data.simulate import simulate
from mtlirt.data.simulation import Simulation
from mtlirt.errors import InputError

SIZES = [20, 30, 40, 50, 60, 60]


def _spearman(x: np.ndarray, y: np.ndarray) -> float:
    rx = pd.Series(x).rank().to_numpy()
    ry = pd.Series(y).rank().to_numpy()
    return float(np.corrcoef(rx, ry)[0, 1])


@pytest.fixture(scope="module")
def sim() -> Simulation:
    return simulate(200, SIZES, similarity=0.2, missing=0.1, seed=3)


# -- reproducibility ---------------------------------------------------------


def test_same_seed_identical_different_seed_differs():
    a = simulate(50, [10, 15], seed=7, missing=0.2)
    b = simulate(50, [10, 15], seed=7, missing=0.2)
    c = simulate(50, [10, 15], seed=8, missing=0.2)
    pd.testing.assert_frame_equal(a.responses, b.responses)
    pd.testing.assert_frame_equal(a.domain_scores, b.domain_scores)
    pd.testing.assert_frame_equal(a.items, b.items)
    np.testing.assert_array_equal(a.correct, b.correct)
    assert not np.array_equal(a.correct, c.correct)
    assert not np.allclose(a.domain_scores.to_numpy(), c.domain_scores.to_numpy())


def test_streams_are_independent_of_other_settings():
    base = simulate(80, [10, 20], seed=1)
    more = simulate(80, [10, 20], seed=1, missing=0.3, guessing=0.25)
    # traits and items do not depend on missingness or guessing
    pd.testing.assert_frame_equal(base.domain_scores, more.domain_scores)
    pd.testing.assert_frame_equal(base.items.drop(columns="guessing"), more.items.drop(columns="guessing"))
    # overall traits are shared across similarity levels (paired designs)
    other_h = simulate(80, [10, 20], seed=1, similarity=0.5)
    pd.testing.assert_frame_equal(base.overall, other_h.overall)


# -- shapes, names, columns ---------------------------------------------------


def test_shapes_names_and_columns(sim):
    n, j, k = 200, sum(SIZES), len(SIZES)
    assert sim.correct.shape == (n, j) and sim.correct.dtype == np.int8
    assert sim.observed.shape == (n, j) and sim.observed.dtype == bool
    assert list(sim.responses.columns) == ["llm", "item", "domain", "correct"]
    for col in ("llm", "item", "domain"):
        assert isinstance(sim.responses[col].dtype, pd.CategoricalDtype)
    assert sim.responses["correct"].dtype == np.int8
    assert set(np.unique(sim.responses["correct"])) <= {0, 1}
    assert sim.domain_names == [f"d0{i}" for i in range(1, 7)]
    assert sim.llm_names[0] == "llm0001" and sim.llm_names[-1] == "llm0200"
    assert sim.domain_scores.shape == (n, k)
    assert sim.overall.shape == (n, 1) and list(sim.overall.columns) == ["score"]
    assert sim.loadings.shape == (k, 1)
    assert list(sim.items.columns) == [
        "item", "domain", "discrimination", "intercept", "difficulty", "guessing", "upper",
    ]
    assert (sim.items["upper"] == 1).all()
    assert sim.items["item"].is_unique and len(sim.items) == j
    assert sim.items["item"].iloc[0] == "d01_0001"
    # items grouped by domain, contiguous, with the right sizes
    assert sim.items["domain"].tolist() == [d for d, s in zip(sim.domain_names, SIZES) for _ in range(s)]
    assert list(sim.domains["n_items"]) == SIZES
    np.testing.assert_allclose(
        sim.items["difficulty"], -sim.items["intercept"] / sim.items["discrimination"]
    )
    assert (sim.items["discrimination"] > 0).all()
    assert sim.settings["seed"] == 3 and sim.settings["domain_sizes"]["d06"] == 60
    json.dumps(sim.settings)  # serialisable


def test_long_table_matches_dense_matrix(sim):
    r = sim.responses
    assert len(r) == int(sim.observed.sum())
    rows = r["llm"].cat.codes.to_numpy()
    cols = r["item"].cat.codes.to_numpy()
    assert list(r["llm"].cat.categories) == sim.llm_names
    assert list(r["item"].cat.categories) == sim.items["item"].tolist()
    np.testing.assert_array_equal(r["correct"].to_numpy(), sim.correct[rows, cols])
    assert sim.observed[rows, cols].all()
    # domain column agrees with the items table
    item_domain = sim.items.set_index("item")["domain"]
    np.testing.assert_array_equal(
        r["domain"].astype(str).to_numpy(), item_domain.loc[r["item"].astype(str)].to_numpy()
    )
    # unobserved cells are 0 in the dense matrix
    assert (sim.correct[~sim.observed] == 0).all()


def test_to_responses_is_the_long_table_read(sim):
    """Simulation.to_responses: the dense matrix in its own column order and with its names, the same
    leaderboard as its long table read; a complete simulation gives the estimators' fast path (no mask)."""
    r = sim.to_responses()
    assert list(r.llms) == sim.llm_names and list(r.items) == sim.items["item"].tolist()
    assert list(r.domains) == sim.domain_names
    assert [s.stop - s.start for s in r.domain_slices] == SIZES
    np.testing.assert_array_equal(r.correct, sim.correct)
    np.testing.assert_array_equal(r.mask, sim.observed)
    assert r.fingerprint() == Responses.from_frame(sim.responses).fingerprint()
    assert simulate(30, [3, 4], seed=0).to_responses().mask is None


def test_missing_share_near_p():
    s = simulate(300, [50, 50], missing=0.3, seed=0)
    share = 1 - s.observed.mean()
    assert abs(share - 0.3) < 0.01  # 30,000 cells: sd ~ 0.003
    full = simulate(300, [50, 50], seed=0)
    assert full.observed.all() and len(full.responses) == 300 * 100


# -- the truth matches the data ------------------------------------------------


def test_domain_accuracy_tracks_true_domain_score(sim):
    start = 0
    for d, size in zip(sim.domain_names, SIZES):
        block = slice(start, start + size)
        start += size
        acc = sim.correct[:, block].sum(1) / sim.observed[:, block].sum(1)
        rho = _spearman(acc, sim.domain_scores[d].to_numpy())
        assert rho > (0.7 if size >= 60 else 0.5), (d, rho)


def test_response_rates_match_model_probabilities():
    s = simulate(400, [40, 40], guessing=0.2, seed=11)
    it = s.items
    theta = s.domain_scores.to_numpy()[:, (it["domain"] == "d02").to_numpy().astype(int)]
    p = 0.2 + 0.8 / (1 + np.exp(-(theta * it["discrimination"].to_numpy() + it["intercept"].to_numpy())))
    # mean over all cells: expected vs observed, and per item
    assert abs(s.correct.mean() - p.mean()) < 0.01
    per_item = np.corrcoef(s.correct.mean(0), p.mean(0))[0, 1]
    assert per_item > 0.95


def test_accuracy_levels_look_like_mmlu():
    s = simulate(400, preset="mmlu", scale=0.1, seed=2)
    acc = s.correct.mean()
    assert 0.45 < acc < 0.65
    dom = pd.Series(s.correct.mean(0)).groupby(s.items["domain"].to_numpy()).mean()
    assert dom.max() - dom.min() > 0.2  # domains differ in difficulty


def test_rank_one_has_one_dominant_singular_value():
    s = simulate(500, [10] * 8, rank=1, similarity=0.1, seed=4)
    sv = np.linalg.svd(s.domain_scores.to_numpy() / math.sqrt(500), compute_uv=False)
    assert sv[1] / sv[0] < 0.25
    np.testing.assert_allclose((s.loadings.to_numpy() ** 2).sum(1), 0.9)


def test_rank_two_has_two_strong_singular_values():
    s = simulate(500, [10] * 8, rank=2, similarity=0.1, seed=4)
    w = s.loadings.to_numpy()
    assert w.shape == (8, 2) and list(s.overall.columns) == ["score", "score_2"]
    assert (w[:, 0] > 0).all()
    np.testing.assert_allclose((w**2).sum(1), 0.9)
    sv = np.linalg.svd(s.domain_scores.to_numpy() / math.sqrt(500), compute_uv=False)
    assert sv[1] / sv[0] > 0.35  # second factor clearly present
    assert sv[2] / sv[1] < 0.5  # and nothing beyond it
    # rank 3 keeps three factors
    s3 = simulate(500, [10] * 12, rank=3, similarity=0.1, seed=4)
    sv3 = np.linalg.svd(s3.domain_scores.to_numpy() / math.sqrt(500), compute_uv=False)
    assert sv3[2] / sv3[0] > 0.2 and sv3[3] / sv3[2] < 0.6


def test_outlier_domains_are_independent_of_overall():
    h = 0.3
    s = simulate(3000, [10] * 6, similarity=h, outlier_share=1 / 3, seed=5)
    assert len(s.outlier_domains) == 2
    eta = s.overall["score"].to_numpy()
    for d in s.domain_names:
        r = np.corrcoef(eta, s.domain_scores[d].to_numpy())[0, 1]
        if d in s.outlier_domains:
            assert abs(r) < 0.08, (d, r)  # sd of r ~ 0.018
            assert np.all(s.loadings.loc[d] == 0)
        else:
            assert abs(r - math.sqrt(1 - h)) < 0.05, (d, r)
    assert s.domains.set_index("domain")["outlier"].loc[s.outlier_domains].all()


def test_domain_traits_have_unit_population_variance():
    s = simulate(20000, [5] * 4, rank=2, similarity=0.3, outlier_share=0.25, seed=6)
    theta = s.domain_scores.to_numpy()
    np.testing.assert_allclose(theta.mean(0), 0, atol=0.04)
    np.testing.assert_allclose(theta.var(0), 1, atol=0.05)
    # cross-domain correlations are w_k . w_l
    w = s.loadings.to_numpy()
    expected = w @ w.T
    np.fill_diagonal(expected, 1.0)
    np.testing.assert_allclose(np.corrcoef(theta.T), expected, atol=0.04)


def test_similarity_extremes():
    s0 = simulate(300, [10] * 3, similarity=0.0, seed=1)
    theta = s0.domain_scores.to_numpy()
    np.testing.assert_allclose(theta, np.repeat(s0.overall.to_numpy(), 3, axis=1))
    s1 = simulate(300, [10] * 3, similarity=1.0, seed=1)
    assert np.all(s1.loadings.to_numpy() == 0)


def test_guessing_floor():
    c = 0.25
    with_floor = simulate(200, [60] * 4, guessing=c, seed=9)
    without = simulate(200, [60] * 4, guessing=0.0, seed=9)
    acc_c = with_floor.correct.mean(1)
    acc_0 = without.correct.mean(1)
    weakest = np.argsort(with_floor.overall["score"].to_numpy())[:20]
    assert acc_c[weakest].mean() > c
    # the floor lifts the weak: expected gain c * (1 - accuracy without it)
    gain = acc_c[weakest].mean() - acc_0[weakest].mean()
    assert abs(gain - c * (1 - acc_0[weakest].mean())) < 0.05
    assert acc_c.min() > c - 0.1  # 240 items: sd of an accuracy <= 0.03
    assert (with_floor.items["guessing"] == c).all()
    # very hard items: everyone sits just above the floor, not below it
    hard = simulate(200, [60] * 4, guessing=c, difficulty_mean=4.0, domain_shift_sd=0.0, seed=9)
    hard0 = simulate(200, [60] * 4, guessing=0.0, difficulty_mean=4.0, domain_shift_sd=0.0, seed=9)
    weak_half = np.argsort(hard.overall["score"].to_numpy())[:100]
    assert c < hard.correct.mean(1)[weak_half].mean() < c + 0.06
    assert hard0.correct.mean(1)[weak_half].mean() < 0.06


# -- presets -------------------------------------------------------------------


def test_mmlu_preset_sizes():
    subjects = mmlu_subjects()
    assert len(subjects) == 57 and int(subjects.sum()) == 14042
    full = preset_domain_sizes("mmlu", 1.0)
    assert len(full) == 57 and sum(full.values()) == 14042
    assert list(full) == list(subjects.index)
    small = preset_domain_sizes("mmlu", 0.01)
    assert min(small.values()) == 1  # 100 * 0.01
    assert small["professional_law"] == 15  # 1534 * 0.01 = 15.34
    tiny = preset_domain_sizes("mmlu", 0.007)  # tiny domains, as on real leaderboards
    assert min(tiny.values()) == 1 and max(tiny.values()) == 11
    assert sum(v <= 10 for v in tiny.values()) == 56
    assert min(preset_domain_sizes("mmlu", 1e-4).values()) == 1  # never below one item
    s = simulate(30, preset="mmlu", scale=0.05, seed=0)
    assert len(s.domain_names) == 57
    assert s.correct.shape[1] == sum(preset_domain_sizes("mmlu", 0.05).values())
    assert s.settings["preset"] == "mmlu"
    # the default domains are MMLU's
    assert simulate(5, scale=0.01).domain_names == list(subjects.index)


def test_named_domain_sizes():
    s = simulate(20, {"math": 12, "law": 8}, seed=0)
    assert s.domain_names == ["math", "law"]
    assert s.items["item"].tolist()[:2] == ["math_0001", "math_0002"]
    assert s.settings["preset"] is None


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(domain_sizes=[10], preset="mmlu"),
        dict(domain_sizes=[10, 0]),
        dict(domain_sizes=[]),
        dict(domain_sizes=[10], scale=0.5),
        dict(preset="bbh"),
        dict(domain_sizes=[10], similarity=1.5),
        dict(domain_sizes=[10], guessing=1.0),
        dict(domain_sizes=[10], missing=-0.1),
        dict(domain_sizes=[10], rank=0),
        dict(n_llms=0, domain_sizes=[10]),
    ],
)
def test_bad_arguments_raise_input_error(kwargs):
    with pytest.raises(InputError):
        simulate(**{"n_llms": 10, **kwargs})


# -- writing -------------------------------------------------------------------


@pytest.mark.parametrize("name", ["r.parquet", "r.csv", "r.csv.gz"])
def test_write_round_trip(sim, tmp_path, name):
    path = sim.write(tmp_path / name)
    assert path.exists()
    back = pd.read_parquet(path) if name.endswith(".parquet") else pd.read_csv(path)
    assert list(back.columns) == ["llm", "item", "domain", "correct"]
    assert len(back) == len(sim.responses)
    for col in ("llm", "item", "domain"):
        np.testing.assert_array_equal(back[col].astype(str).to_numpy(), sim.responses[col].astype(str).to_numpy())
    np.testing.assert_array_equal(back["correct"].to_numpy(), sim.responses["correct"].to_numpy())


def test_parquet_is_dictionary_encoded(sim, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = sim.write(tmp_path / "r.parquet")
    schema = pq.read_schema(path)
    for col in ("llm", "item", "domain"):
        assert pa.types.is_dictionary(schema.field(col).type)
    assert schema.field("correct").type == pa.int8()
    meta = pq.ParquetFile(path).metadata.row_group(0)
    assert any("DICTIONARY" in e for e in meta.column(1).encodings)


def test_write_rejects_unknown_extension(sim, tmp_path):
    with pytest.raises(InputError):
        sim.write(tmp_path / "r.xlsx")


def test_write_truth_round_trip(tmp_path):
    s = simulate(40, [10, 12, 14], rank=2, outlier_share=0.34, seed=12)
    out = s.write_truth(tmp_path / "truth")
    names = {p.name for p in out.iterdir()}
    assert {"domain_scores.csv", "overall.csv", "items.csv", "truth.json"} <= names

    ds = pd.read_csv(out / "domain_scores.csv")
    assert list(ds.columns) == ["llm", "domain", "score"] and len(ds) == 40 * 3
    wide = ds.pivot(index="llm", columns="domain", values="score")
    wide = wide.loc[s.llm_names, s.domain_names]
    np.testing.assert_allclose(wide.to_numpy(), s.domain_scores.to_numpy(), rtol=1e-12)

    ov = pd.read_csv(out / "overall.csv")
    assert list(ov.columns) == ["llm", "score", "score_2"]
    np.testing.assert_allclose(ov[["score", "score_2"]].to_numpy(), s.overall.to_numpy(), rtol=1e-12)

    items = pd.read_csv(out / "items.csv")
    pd.testing.assert_frame_equal(items, s.items, check_dtype=False, rtol=1e-12)

    truth = json.loads((out / "truth.json").read_text())
    assert truth["rank"] == 2 and truth["seed"] == 12
    assert truth["outlier_domains"] == s.outlier_domains and len(s.outlier_domains) == 1
    assert set(truth["loadings"]) == set(s.domain_names)
    np.testing.assert_allclose(
        [truth["loadings"][d] for d in s.domain_names], s.loadings.to_numpy()
    )
    assert truth["settings"]["n_llms"] == 40

    ov1 = pd.read_csv(simulate(10, [5], seed=0).write_truth(tmp_path / "t1") / "overall.csv")
    assert list(ov1.columns) == ["llm", "score"]


# -- scenarios: each departure changes what it should and nothing else ---------

BASE = dict(n_llms=400, domain_sizes=[12, 15, 20, 25], seed=21)


def test_ideal_scenario_is_todays_default():
    a = simulate(**BASE)
    b = simulate(**BASE, scenario="ideal")
    np.testing.assert_array_equal(a.correct, b.correct)
    pd.testing.assert_frame_equal(a.domain_scores, b.domain_scores)
    assert a.settings["scenario"] == "ideal" and a.settings["block_missing"] == 0.0
    assert (a.llms["domains_run"] == 4).all() and not a.llms["chance_cluster"].any()
    assert (a.llms["specialist_domains"] == "").all()


def test_loading_range_changes_loadings_only():
    base = simulate(**BASE)
    s = simulate(**BASE, loading_range=(0.5, 0.98))
    norms = np.linalg.norm(s.loadings.to_numpy(), axis=1)
    assert norms.min() >= 0.5 and norms.max() <= 0.98
    wide = np.linalg.norm(simulate(20, [2] * 40, loading_range=(0.5, 0.98), seed=0).loadings, axis=1)
    assert wide.min() < 0.6 and wide.max() > 0.88  # uniform over the range
    pd.testing.assert_frame_equal(s.overall, base.overall)
    pd.testing.assert_frame_equal(s.items, base.items)
    # same eta and unique parts: theta_k = eta |w_k| + sqrt(1 - |w_k|^2) z_k
    eta = base.overall["score"].to_numpy()
    z = (base.domain_scores.to_numpy() - np.outer(eta, np.full(4, math.sqrt(0.9)))) / math.sqrt(0.1)
    np.testing.assert_allclose(s.domain_scores.to_numpy(), np.outer(eta, norms) + np.sqrt(1 - norms**2) * z,
                               atol=1e-10)


def test_skewed_population_with_a_chance_cluster():
    base = simulate(20000, [5] * 3, seed=4)
    s = simulate(20000, [5] * 3, seed=4, skew=4.0, chance_cluster=0.05)
    eta = s.overall["score"].to_numpy()
    assert abs(eta.mean()) < 0.03 and abs(eta.var() - 1) < 0.04  # population scale
    member = s.llms["chance_cluster"].to_numpy()
    assert abs(member.mean() - 0.05) < 0.006
    # a tight lump well below the body: 3 body sds down, sd 0.3 body sds
    assert eta[member].mean() < -2.2 and eta[member].std() < 0.3
    assert np.quantile(eta[member], 0.95) < np.quantile(eta[~member], 0.01)
    body = eta[~member]
    assert (((body - body.mean()) / body.std()) ** 3).mean() > 0.5  # long upper tail
    theta = s.domain_scores.to_numpy()
    np.testing.assert_allclose(theta.mean(0), 0, atol=0.03)
    np.testing.assert_allclose(theta.var(0), 1, atol=0.04)
    pd.testing.assert_frame_equal(s.items, base.items)
    pd.testing.assert_frame_equal(s.loadings, base.loadings)
    # the unique parts are untouched
    w = math.sqrt(0.9)
    np.testing.assert_allclose(s.domain_scores.to_numpy() - w * eta[:, None],
                               base.domain_scores.to_numpy() - w * base.overall.to_numpy(), atol=1e-10)


def test_three_pl_guessing_on_multiple_choice_domains():
    base = simulate(**BASE)
    s = simulate(**BASE, guessing=0.2, guessing_sd=0.05, mc_share=0.5)
    pd.testing.assert_frame_equal(s.domain_scores, base.domain_scores)
    cols = ["item", "domain", "discrimination", "intercept", "difficulty", "upper"]
    pd.testing.assert_frame_equal(s.items[cols], base.items[cols])
    c = s.items.groupby("domain")["guessing"]
    mc = c.max() > 0
    assert mc.sum() == 2  # half of the 4 domains
    assert (c.max()[~mc] == 0).all()
    g = s.items.loc[s.items["domain"].isin(mc.index[mc]), "guessing"]
    assert abs(g.mean() - 0.2) < 0.03 and 0.02 < g.std() < 0.08
    # guessing lifts the weak LLMs' accuracy in the multiple-choice domains only
    weak = np.argsort(s.overall["score"].to_numpy())[:80]
    for d in s.domain_names:
        cols_d = (s.items["domain"] == d).to_numpy()
        gain = s.correct[weak][:, cols_d].mean() - base.correct[weak][:, cols_d].mean()
        assert (gain > 0.08) if mc[d] else (gain == 0), (d, gain)


def test_flawed_items():
    base = simulate(**BASE)
    s = simulate(**BASE, flawed_share=0.1)
    n_flawed = round(0.1 * 72)
    low = s.items["upper"] < 1
    neg = s.items["discrimination"] < 0
    assert low.sum() == n_flawed // 2 and neg.sum() == n_flawed - n_flawed // 2 and not (low & neg).any()
    assert s.items.loc[low, "upper"].between(0.5, 0.9).all()
    np.testing.assert_allclose(s.items.loc[neg, "discrimination"], -0.5 * base.items.loc[neg, "discrimination"])
    np.testing.assert_allclose(s.items["difficulty"], base.items["difficulty"])
    ok = ~(low | neg)
    pd.testing.assert_frame_equal(s.items[ok], base.items[ok])
    pd.testing.assert_frame_equal(s.domain_scores, base.domain_scores)
    # a reversed item correlates negatively with the rest of its domain
    rest = s.correct.sum(1)
    for j in np.flatnonzero(neg.to_numpy()):
        assert np.corrcoef(s.correct[:, j], rest - s.correct[:, j])[0, 1] < 0
    # the ceiling holds for the best LLMs
    top = np.argsort(s.overall["score"].to_numpy())[-100:]
    for j in np.flatnonzero(low.to_numpy()):
        assert s.correct[top, j].mean() < s.items["upper"].iloc[j] + 0.15


def test_specialists():
    base = simulate(**BASE)
    s = simulate(**BASE, specialist_share=0.1)
    pd.testing.assert_frame_equal(s.overall, base.overall)
    pd.testing.assert_frame_equal(s.items, base.items)
    spec = (s.llms["specialist_domains"] != "").to_numpy()
    assert 0.06 < spec.mean() < 0.14
    ratio = s.domain_scores.to_numpy() / base.domain_scores.to_numpy()
    scale = 1 / ratio[~spec].mean(0)
    np.testing.assert_allclose(ratio[~spec], np.broadcast_to(1 / scale, ratio[~spec].shape), rtol=1e-10)
    np.testing.assert_allclose(scale, math.sqrt(1 + 0.1 * 2 / 4 * 5.25))  # E[#domains] 2, E[D^2] 5.25
    dev = s.domain_scores.to_numpy() * scale - base.domain_scores.to_numpy()
    for i in np.flatnonzero(spec):
        names = s.llms["specialist_domains"].iloc[i].split(";")
        hit = np.abs(dev[i]) > 1e-9
        assert 1 <= hit.sum() <= 3 and set(np.asarray(s.domain_names)[hit]) == set(names)
        assert np.all((np.abs(dev[i, hit]) >= 1.5) & (np.abs(dev[i, hit]) <= 3.0))
    np.testing.assert_allclose(s.loadings.to_numpy(), base.loadings.to_numpy() / scale[:, None])


def test_block_missingness():
    base = simulate(**BASE)
    s = simulate(**BASE, block_missing=0.5)
    pd.testing.assert_frame_equal(s.domain_scores, base.domain_scores)
    pd.testing.assert_frame_equal(s.items, base.items)
    np.testing.assert_array_equal(s.correct[s.observed], base.correct[s.observed])
    starts = np.cumsum([0] + BASE["domain_sizes"])
    ran = np.column_stack([s.observed[:, a:b].any(1) for a, b in zip(starts[:-1], starts[1:])])
    for a, b, k in zip(starts[:-1], starts[1:], range(4)):  # whole blocks or nothing
        assert (s.observed[:, a:b].all(1) == ran[:, k]).all()
    assert ran.any(1).all()  # every LLM kept at least one domain
    partial = ~ran.all(1)
    assert 0.35 < partial.mean() < 0.6  # 0.5 * (1 - 1/16 of them all kept)
    np.testing.assert_array_equal(s.llms["domains_run"].to_numpy(), ran.sum(1))
    assert set(s.responses["llm"].astype(str)) == set(s.llm_names)


def test_realistic_scenario_levels_and_override(tmp_path):
    s = simulate(300, preset="mmlu", scale=0.02, scenario="realistic", seed=1)
    st = s.settings
    assert st["scenario"] == "realistic" and st["loading_range"] == [0.6, 0.98]
    assert st["specialist_share"] == 0.03 and st["block_missing"] == 0.4 and st["guessing"] == 0.2
    assert (s.llms["domains_run"] < 57).mean() > 0.3
    assert (s.items["discrimination"] < 0).any() and (s.items["upper"] < 1).any()
    norms = np.linalg.norm(s.loadings.to_numpy(), axis=1)
    assert norms.min() > 0.55 and norms.max() < 0.98
    off = simulate(300, preset="mmlu", scale=0.02, scenario="realistic", seed=1, block_missing=0.0, missing=0.0)
    assert off.observed.all() and (off.llms["domains_run"] == 57).all()
    pd.testing.assert_frame_equal(off.domain_scores, s.domain_scores)
    # truth files
    out = s.write_truth(tmp_path / "truth")
    llms = pd.read_csv(out / "llms.csv", keep_default_na=False)
    assert list(llms.columns) == ["llm", "chance_cluster", "specialist_domains", "domains_run"]
    np.testing.assert_array_equal(llms["domains_run"], s.llms["domains_run"])
    assert json.loads((out / "truth.json").read_text())["settings"]["scenario"] == "realistic"
    items = pd.read_csv(out / "items.csv")
    np.testing.assert_allclose(items["upper"], s.items["upper"])
    ds = pd.read_csv(out / "domain_scores.csv").pivot(index="llm", columns="domain", values="score")
    np.testing.assert_allclose(ds.loc[s.llm_names, s.domain_names].to_numpy(), s.domain_scores.to_numpy())


def test_realistic_truth_on_population_scale():
    s = simulate(20000, [4] * 6, scenario="realistic", seed=2)
    theta = s.domain_scores.to_numpy()
    np.testing.assert_allclose(theta.mean(0), 0, atol=0.04)
    np.testing.assert_allclose(theta.var(0), 1, atol=0.05)
    eta = s.overall["score"].to_numpy()
    assert abs(eta.mean()) < 0.03 and abs(eta.var() - 1) < 0.05
    # loadings are the covariances with the overall score
    np.testing.assert_allclose((theta * eta[:, None]).mean(0), s.loadings["score"], atol=0.04)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(scenario="harsh"),
        dict(loading_range=(0.9, 0.2)),
        dict(loading_range=(0.2, 1.2)),
        dict(chance_cluster=1.0),
        dict(guessing=0.2, guessing_sd=0.45),
        dict(mc_share=1.5),
        dict(flawed_share=-0.1),
        dict(specialist_share=2.0),
        dict(block_missing=1.0),
    ],
)
def test_bad_departures_raise_input_error(kwargs):
    with pytest.raises(InputError):
        simulate(10, [5, 5], **kwargs)


def test_cli_scenario_flags(tmp_path):
    from mtlirt.cli import main

    out = tmp_path / "r.csv"
    args = ["simulate", "--n-llms", "40", "--domain-sizes", "5,6,7", "--scenario", "realistic",
            "--block-missing", "0", "--loading-range", "0.7,0.8", "--specialist-share", "0.2",
            "--flawed-share", "0.1", "--mc-share", "1", "--guessing", "0.25", "--guessing-sd", "0",
            "--skew", "2", "--chance-cluster", "0.1", "--missing", "0",
            "--seed", "3", "--out", str(out), "--truth", str(tmp_path / "t")]
    assert main(args) == 0
    st = json.loads((tmp_path / "t" / "truth.json").read_text())["settings"]
    assert st["scenario"] == "realistic" and st["block_missing"] == 0 and st["loading_range"] == [0.7, 0.8]
    assert st["specialist_share"] == 0.2 and st["flawed_share"] == 0.1 and st["mc_share"] == 1
    assert st["skew"] == 2 and st["chance_cluster"] == 0.1 and st["guessing"] == 0.25 and st["missing"] == 0
    expected = simulate(40, [5, 6, 7], scenario="realistic", block_missing=0, loading_range=(0.7, 0.8),
                        specialist_share=0.2, flawed_share=0.1, mc_share=1, guessing=0.25, guessing_sd=0,
                        skew=2, chance_cluster=0.1, missing=0, seed=3)
    assert len(pd.read_csv(out)) == 40 * 18 == len(expected.responses)
    items = pd.read_csv(tmp_path / "t" / "items.csv")
    assert (items["guessing"] == 0.25).all()
    with pytest.raises(SystemExit):  # argparse: not LO,HI
        main(["simulate", "--domain-sizes", "5", "--loading-range", "0.9", "--out", str(out)])
    assert main(["simulate", "--domain-sizes", "5", "--loading-range", "0.9,0.1", "--out", str(out)]) == 2
