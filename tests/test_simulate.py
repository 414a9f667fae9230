"""Tests of the leaderboard simulator: the truth must match the data."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from mtlirt.errors import InputError
from mtlirt.simulate import (
    Simulation,
    mmlu_subjects,
    preset_domain_sizes,
    simulate,
)

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
