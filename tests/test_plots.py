"""Plots: each runs on a point estimate (with bootstrap), a bare point estimate and a multi-chain posterior."""

import base64
import json
import re
import xml.etree.ElementTree as ET

import matplotlib
import matplotlib.collections
import matplotlib.patches
import matplotlib.text

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
import xarray as xr
from matplotlib.figure import Figure

from mtlirt import plots
from mtlirt.report.plots._common import _shorten
from mtlirt.results.estimate import INFO_ATTR, Estimate

MMLU_LIKE = [
    "abstract_algebra", "anatomy", "astronomy", "business_ethics", "clinical_knowledge", "college_biology",
    "college_chemistry", "college_computer_science", "college_mathematics", "college_medicine", "college_physics",
    "computer_security", "conceptual_physics", "econometrics", "electrical_engineering", "elementary_mathematics",
    "formal_logic", "global_facts", "high_school_biology", "high_school_chemistry", "high_school_computer_science",
    "high_school_european_history", "high_school_geography", "high_school_government_and_politics",
    "high_school_macroeconomics", "high_school_mathematics", "high_school_microeconomics", "high_school_physics",
    "high_school_psychology", "high_school_statistics", "high_school_us_history", "high_school_world_history",
    "human_aging", "human_sexuality", "international_law", "jurisprudence", "logical_fallacies", "machine_learning",
    "management", "marketing", "medical_genetics", "miscellaneous", "moral_disputes", "moral_scenarios", "nutrition",
    "philosophy", "prehistory", "professional_accounting", "professional_law", "professional_medicine",
    "professional_psychology", "public_relations", "security_studies", "sociology", "us_foreign_policy", "virology",
]


def _domains(k):
    return MMLU_LIKE[:k] if k <= len(MMLU_LIKE) else [f"domain_{i:02d}" for i in range(k)]


def make_point(n=40, k=6, B=20, seed=0, method="mtl", info=None, theta=None):
    """A rank-1 point estimate with ``B`` bootstrap replicates (none when B=0)."""
    rng = np.random.default_rng(seed)
    lam = rng.uniform(0.5, 0.95, k)
    eta = rng.normal(size=n)
    if theta is None:
        theta = eta[:, None] * lam + np.sqrt(1 - lam**2) * rng.normal(size=(n, k))
    sizes = rng.integers(3, 9, k)
    item_domain = np.repeat(np.arange(k), sizes)
    j = len(item_domain)
    a = rng.lognormal(0, 0.3, j)
    d = rng.normal(0, 1, j)
    boot = None
    if B:
        boot = {"theta": theta[None] + 0.2 * rng.normal(size=(B, n, k)),
                "overall": eta[None] + 0.15 * rng.normal(size=(B, n)),
                "discrimination": a[None] * np.exp(0.1 * rng.normal(size=(B, j))),
                "intercept": d[None] + 0.1 * rng.normal(size=(B, j))}
    return Estimate.from_point(method=method, theta=theta, overall=eta, llms=[f"llm-{i:03d}" for i in range(n)],
                               domains=_domains(k), items=[f"q{i:04d}" for i in range(j)], item_domain=item_domain,
                               discrimination=a, intercept=d, info=info, bootstrap=boot)


def make_posterior(n=25, k=5, chains=4, draws=40, seed=1, info=None):
    """A multi-chain posterior in the Estimate layout."""
    rng = np.random.default_rng(seed)
    p = make_point(n, k, B=0, seed=seed).posterior
    s = (chains, draws)
    theta = p["theta"].values[0, 0] + 0.2 * rng.normal(size=s + (n, k))
    overall = p["overall"].values[0, 0] + 0.15 * rng.normal(size=s + (n,))
    j = p.sizes["item"]
    a = p["discrimination"].values[0, 0] * np.exp(0.1 * rng.normal(size=s + (j,)))
    d = p["intercept"].values[0, 0] + 0.1 * rng.normal(size=s + (j,))
    t = theta - theta.mean(-2, keepdims=True)
    cov = np.einsum("cdnk,cdnl->cdkl", t, t)
    sd = np.sqrt(np.einsum("cdkk->cdk", cov))
    corr = cov / sd[..., :, None] / sd[..., None, :]
    dom = p["domain"].values
    ds = xr.Dataset(
        {
            "theta": (("chain", "draw", "llm", "domain"), theta),
            "overall": (("chain", "draw", "llm"), overall),
            "discrimination": (("chain", "draw", "item"), a),
            "intercept": (("chain", "draw", "item"), d),
            "guessing": (("chain", "draw", "item"), np.zeros_like(a)),
            "domain_corr": (("chain", "draw", "domain_a", "domain_b"), corr),
        },
        coords={"chain": np.arange(chains), "draw": np.arange(draws), "llm": p["llm"].values, "domain": dom,
                "item": p["item"].values, "item_domain": ("item", p["item_domain"].values),
                "domain_a": dom, "domain_b": dom},
    )
    tree = xr.DataTree.from_dict({"posterior": ds})
    tree.attrs[INFO_ATTR] = json.dumps({"method": "bayes", **(info or {})})
    return Estimate(tree)


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


@pytest.fixture(scope="module")
def boot():
    return make_point(info={"singular_values": [5.0, 2.0, 1.5, 1.0, 0.7, 0.4], "rank": 1})


@pytest.fixture(scope="module")
def bare():
    return make_point(B=0, seed=3, method="accuracy")


@pytest.fixture(scope="module")
def post():
    return make_posterior()


@pytest.fixture(scope="module")
def big():
    return make_point(n=60, k=56, B=10, seed=5, info={"singular_values": list(np.linspace(8, 0.5, 56)), "rank": 2})


def _yticks(ax):
    return [t.get_text() for t in ax.get_yticklabels()]


def _xticks(ax):
    return [t.get_text() for t in ax.get_xticklabels()]


# ------------------------------------------------------------------ heatmap
def test_cluster_order_keeps_blocks_together():
    rng = np.random.default_rng(0)
    f = rng.normal(size=(500, 2))
    # domains alternate between two independent factors
    theta = np.stack([f[:, i % 2] + 0.3 * rng.normal(size=500) for i in range(8)], axis=1)
    order = plots.cluster_order(np.corrcoef(theta.T))
    assert sorted(order) == list(range(8))
    first = {int(i) % 2 for i in order[:4]}
    assert len(first) == 1  # one block, then the other


@pytest.mark.parametrize("which", ["boot", "post"])
def test_heatmap_two_panels_ticks_in_cluster_order(which, request):
    est = request.getfixturevalue(which)
    fig = plots.correlation_heatmap(est)
    assert isinstance(fig, Figure)
    expected = list(np.asarray(est.domains)[plots.cluster_order(est.point("domain_corr"))])
    ax, ax2 = fig.axes[0], fig.axes[1]
    assert _yticks(ax) == expected
    assert _xticks(ax) == expected
    assert _xticks(ax2) == expected
    im = ax.get_images()[0]
    assert im.get_clim() == (-1, 1)
    assert im.get_cmap().name.startswith("RdBu")
    assert len(fig.axes) == 4  # two panels + two colour bars


def test_heatmap_point_estimate_one_panel_and_orders(bare):
    fig = plots.correlation_heatmap(bare, order="name")
    assert len(fig.axes) == 2  # panel + colour bar
    assert _yticks(fig.axes[0]) == sorted(bare.domains)
    rev = list(bare.domains)[::-1]
    assert _yticks(plots.correlation_heatmap(bare, order=rev).axes[0]) == rev
    with pytest.raises(ValueError):
        plots.correlation_heatmap(bare, order=["nope"])


def test_heatmap_56_domains(big):
    fig = plots.correlation_heatmap(big)
    labels = _yticks(fig.axes[0])
    assert len(labels) == 56 and set(labels) == set(big.domains)
    assert fig.get_size_inches()[1] > 15  # grows with the domains (stacked panels above 25)
    assert min(t.get_fontsize() for t in fig.axes[0].get_yticklabels()) <= 7


# ------------------------------------------------------------------- forest
@pytest.mark.parametrize("which", ["boot", "post", "bare"])
def test_forest_rows(which, request):
    est = request.getfixturevalue(which)
    n = len(est.llms)
    fig = plots.overall_forest(est, top=8, bottom=4)
    labels = _yticks(fig.axes[0])
    assert len(labels) == 12
    assert labels[0].startswith("1. ")
    assert labels[-1].startswith(f"{n}. ")
    assert labels[7].startswith("8. ") and labels[8].startswith(f"{n - 3}. ")


def test_forest_all_when_few(boot):
    fig = plots.overall_forest(boot, top=30, bottom=30)
    assert len(_yticks(fig.axes[0])) == len(boot.llms)


def test_forest_into_given_axes(boot):
    fig0, ax = plt.subplots()
    assert plots.overall_forest(boot, ax=ax) is fig0


# ------------------------------------------------------------------ profile
@pytest.mark.parametrize("which", ["boot", "post", "bare"])
def test_domain_profile(which, request):
    est = request.getfixturevalue(which)
    name = est.llms[2]
    fig = plots.domain_profile(est, name)
    tab = est.domain_scores()
    expect = tab[tab["llm"] == name].sort_values("score", ascending=False)["domain"].tolist()
    assert _yticks(fig.axes[0]) == expect
    assert name in fig.axes[0].get_title()


def test_domain_profile_by_position_and_errors(boot, big):
    assert len(_yticks(plots.domain_profile(big, 0).axes[0])) == 56
    with pytest.raises(KeyError):
        plots.domain_profile(boot, "no-such-llm")
    with pytest.raises(IndexError):
        plots.domain_profile(boot, 10_000)


# -------------------------------------------------------------------- ranks
def test_rank_uncertainty(boot, post, bare):
    fig = plots.rank_uncertainty(boot, top=10)
    assert len(fig.axes) == 2
    assert _yticks(fig.axes[0]) == boot.overall_scores()["llm"].iloc[:10].tolist()
    assert "P(top 10)" in fig.axes[1].get_xlabel()
    assert len(plots.rank_uncertainty(post, top=5, k=3).axes) == 2
    assert len(plots.rank_uncertainty(bare, top=10).axes) == 1


# ------------------------------------------------------------------ compare
def test_compare_scatter(boot, post):
    fig = plots.compare_scatter(boot, boot)
    assert "Pearson r = 1.000" in fig.axes[0].get_title()
    fig = plots.compare_scatter(boot, post, var="theta", labels=("MTL", "Bayes"))
    ax = fig.axes[0]
    assert ax.get_xlabel().startswith("MTL") and ax.get_ylabel().startswith("Bayes")
    assert any(line.get_label() == "identity" for line in ax.get_lines())
    with pytest.raises(ValueError):
        plots.compare_scatter(boot, post, var="nope")


def test_compare_scatter_no_common_llm(boot):
    other = make_point(n=5, k=6, B=0)
    other.tree["posterior"] = other.tree["posterior"].to_dataset().assign_coords(llm=[f"x{i}" for i in range(5)])
    with pytest.raises(ValueError, match="in common"):
        plots.compare_scatter(boot, other)


# -------------------------------------------------------------------- scree
def test_scree(boot, big, bare):
    fig = plots.scree(boot)
    ax = fig.axes[0]
    assert len(ax.patches) == 6
    assert any("r = 1" in t.get_text() for t in ax.get_legend().get_texts())
    assert len(plots.scree(big).axes[0].patches) == 56
    with pytest.raises(ValueError, match="singular values"):
        plots.scree(bare)


# --------------------------------------------------------------- difficulty
@pytest.mark.parametrize("which", ["boot", "post", "big"])
def test_domain_difficulty_labels(which, request):
    est = request.getfixturevalue(which)
    fig = plots.domain_difficulty(est)
    ax = fig.axes[0]
    texts = [t.get_text() for t in ax.texts]
    assert sorted(texts) == sorted(_shorten(d, 32) for d in est.domains)


def test_domain_difficulty_sizes(boot):
    sizes = {d: 10 * (i + 1) for i, d in enumerate(boot.domains)}
    fig = plots.domain_difficulty(boot, sizes=sizes)
    xs = fig.axes[0].collections[0].get_offsets()[:, 0]
    assert sorted(xs) == sorted(sizes.values())


# -------------------------------------------------------------- item curves
def test_item_curves(boot, post, bare):
    fig = plots.item_curves(boot, [0, "q0003", 5])
    ax = fig.axes[0]
    assert len(ax.get_lines()) == 3
    assert len(ax.collections) == 3  # bands from the bootstrap replicates
    y = ax.get_lines()[0].get_ydata()
    assert 0 <= y.min() and y.max() <= 1
    assert len(plots.item_curves(post, [1, 2]).axes[0].get_lines()) == 2
    assert len(plots.item_curves(bare, 0).axes[0].collections) == 0
    with pytest.raises(KeyError):
        plots.item_curves(boot, ["nope"])


def test_item_curve_formula():
    est = make_point(n=10, k=2, B=0)
    par = est.item_parameters().iloc[0]
    fig = plots.item_curves(est, [0], theta_range=(-2, 2), n_points=5)
    t = np.linspace(-2, 2, 5)
    expect = par.guessing + (1 - par.guessing) / (1 + np.exp(-(par.discrimination * t + par.intercept)))
    np.testing.assert_allclose(fig.axes[0].get_lines()[0].get_ydata(), expect)


# -------------------------------------------------------------- convergence
@pytest.mark.parametrize("kind", ["rank", "trace", "ess"])
def test_convergence_kinds(post, kind):
    fig = plots.convergence(post, kind=kind, max_panels=2)
    assert isinstance(fig, Figure)
    assert len([a for a in fig.axes if a.get_visible() and a.axison]) >= 2
    assert fig.get_suptitle()


def test_convergence_picks_worst_rhat(post):
    bad = make_posterior()
    ds = bad.tree["posterior"].to_dataset()
    ov = ds["overall"].values.copy()
    ov[0, :, 3] += 3.0  # one chain off for llm 3
    bad.tree["posterior"] = ds.assign(overall=(ds["overall"].dims, ov))
    fig = plots.convergence(bad, max_panels=1)
    titles = [a.get_title() for a in fig.axes]
    assert any(bad.llms[3] in t for t in titles)


def test_convergence_errors(boot, post):
    with pytest.raises(ValueError, match="several chains"):
        plots.convergence(boot)
    with pytest.raises(ValueError):
        plots.convergence(post, kind="nope")
    with pytest.raises(ValueError, match="unknown variable"):
        plots.convergence(post, var_names="nope")


def test_rank_rhat_matches_arviz():
    import arviz as az

    rng = np.random.default_rng(0)
    x = rng.normal(size=(4, 100, 6))
    x[0, :, :2] += 1.0
    np.testing.assert_allclose(plots.rank_rhat(x), np.asarray(az.rhat(x, chain_axis=0, draw_axis=1)), rtol=1e-3)


# ------------------------------------------------------------------- export
def test_figure_to_base64_png(boot):
    fig = plots.scree(boot)
    raw = base64.b64decode(plots.figure_to_base64_png(fig, dpi=50, close=True))
    assert raw[:8] == b"\x89PNG\r\n\x1a\n"
    assert not plt.fignum_exists(fig.number)


def test_all_plots_at_56_domains(big):
    acc = pd.Series(np.linspace(0.9, 0.3, 60), index=[str(x) for x in big.llms])
    figs = [
        plots.overall_forest(big),
        plots.domain_profile(big, big.llms[0]),
        plots.rank_uncertainty(big),
        plots.compare_scatter(big, big, var="theta"),
        plots.scree(big),
        plots.domain_difficulty(big),
        plots.item_curves(big, list(range(12))),
        plots.domain_heatmap(big),
        plots.item_map(big),
        plots.rank_vs_accuracy(big, acc),
    ]
    assert all(isinstance(f, Figure) for f in figs)
    # the profile and the item map grow with the domains
    assert figs[1].get_size_inches()[1] > 9 and figs[8].get_size_inches()[1] > 9


# ------------------------------------------------------- LLM x domain heatmap
def test_domain_heatmap_rows_columns_and_cells(boot):
    fig = plots.domain_heatmap(boot, top=7)
    ax = fig.axes[0]
    tab = boot.overall_scores()
    best = tab["llm"].iloc[:7].tolist()
    assert _yticks(ax) == [f"{r}. {n}" for r, n in zip(tab["rank"].iloc[:7], best)]
    order = plots.domain_order(boot, "cluster")
    assert _xticks(ax) == list(np.asarray(boot.domains)[order])
    pos = [list(boot.llms).index(n) for n in best]
    np.testing.assert_allclose(ax.get_images()[0].get_array(), boot.point("theta")[np.ix_(pos, order)])
    lo, hi = ax.get_images()[0].get_clim()
    assert lo == -hi and hi >= np.abs(boot.point("theta")[pos]).max() * 0.5
    assert "7 best" in ax.get_title()


def test_domain_heatmap_chosen_llms_in_rank_order_and_predicted_cells():
    est = make_point(n=12, k=4, B=0, seed=2)
    n_resp = np.full((12, 4), 5)
    n_resp[3, 1] = 0  # llm-003 ran no item of the second domain
    est.attach_cells(n_resp)
    chosen = ["llm-003", "llm-010", "llm-001"]
    fig = plots.domain_heatmap(est, chosen, order="none")
    ax = fig.axes[0]
    ranks = est.overall_scores().set_index("llm")["rank"]
    expect = sorted(chosen, key=ranks.get)
    assert [t.split(". ", 1)[1] for t in _yticks(ax)] == expect
    dots = ax.collections[0].get_offsets()
    assert dots.tolist() == [[1.0, float(expect.index("llm-003"))]]
    assert "no response" in ax.get_title()
    assert len(ax.texts) == 12  # few cells: each written
    with pytest.raises(KeyError, match="nope"):
        plots.domain_heatmap(est, ["llm-001", "nope"])


# --------------------------------------------------- rank against raw accuracy
def _ranked(overall, accuracy, B=0):
    """An estimate with the given overall scores (ranks follow) and raw accuracies by LLM."""
    n = len(overall)
    est = make_point(n=n, k=3, B=B, seed=4, theta=np.tile(np.asarray(overall, float)[:, None], (1, 3)))
    post = est.tree["posterior"].to_dataset()
    post["overall"] = (post["overall"].dims, np.asarray(overall, float)[None, None])
    est.tree["posterior"] = post
    return est, pd.Series(accuracy, index=[f"llm-{i:03d}" for i in range(n)])


def test_rank_shift_known_moves_and_ties():
    est, acc = _ranked([5.0, 4.0, 3.0, 2.0, 1.0, 0.0], [0.5, 0.9, 0.8, 0.7, 0.1, 0.7])
    t = plots.rank_shift(est, acc)
    by = t.set_index("llm").loc[[f"llm-{i:03d}" for i in range(6)]]
    assert list(by["rank"]) == [1, 2, 3, 4, 5, 6]
    # accuracy ranks: 0.9 -> 1, 0.8 -> 2, 0.7 (twice) -> 3, 0.5 -> 5, 0.1 -> 6
    assert list(by["accuracy_rank"]) == [5, 1, 2, 3, 6, 3]
    assert list(by["shift"]) == [4, -1, -1, -1, 1, -3]
    # the largest moves first, then by rank
    assert list(t["llm"]) == ["llm-000", "llm-005", "llm-001", "llm-002", "llm-003", "llm-004"]
    # a bare point estimate has no rank interval: nothing is "outside" it
    assert by["rank_lower"].isna().all() and not by["outside"].any()


def test_rank_shift_outside_the_rank_interval_and_sources():
    rng = np.random.default_rng(0)
    est = make_point(n=30, k=3, B=40, seed=6)
    tab = est.overall_scores()
    acc = pd.Series(-tab["score"].to_numpy(), index=tab["llm"])  # accuracy reverses the ranking
    t = plots.rank_shift(est, acc)
    lo, hi = t["rank_lower"].to_numpy(), t["rank_upper"].to_numpy()
    ar = t["accuracy_rank"].to_numpy()
    np.testing.assert_array_equal(t["outside"].to_numpy(), (ar < lo) | (ar > hi))
    assert t["outside"].sum() > 20
    # from the data: the mean of each LLM's domain accuracies (a domain it did not run skipped)
    from mtlirt.data.responses import Responses

    n, j = 30, len(est.items)
    item_domain = pd.Index(est.domains).get_indexer(est.posterior["item_domain"].values.astype(str))
    observed = np.ones((n, j), bool)
    observed[0, item_domain == 0] = False
    correct = rng.random((n, j)) < 0.6
    r = Responses(correct & observed, observed, list(est.llms), list(est.items), list(est.domains), item_domain)
    raw = plots.raw_accuracy(r)
    doms = [correct[0, item_domain == k].mean() for k in (1, 2)]
    assert raw.iloc[0] == pytest.approx(np.mean(doms))
    assert plots.rank_shift(est, r).set_index("llm").loc["llm-000", "accuracy"] == pytest.approx(np.mean(doms))
    # fewer LLMs with an accuracy: both rankings over the common LLMs, no rank interval
    part = plots.rank_shift(est, acc.iloc[:10])
    assert sorted(part["rank"]) == list(range(1, 11)) and part["rank_lower"].isna().all()
    with pytest.raises(ValueError, match="at least 2"):
        plots.rank_shift(est, acc.iloc[:1])


def test_rank_vs_accuracy_names_the_largest_moves(boot):
    tab = boot.overall_scores()
    acc = pd.Series(tab["score"].to_numpy(), index=tab["llm"])
    acc.iloc[[3, 30]] = acc.iloc[[30, 3]].to_numpy()  # two LLMs swap places in the raw accuracies
    fig = plots.rank_vs_accuracy(boot, acc, label=5)
    ax = fig.axes[0]
    names = [t.get_text() for t in ax.texts]
    assert len(names) == 2  # only LLMs that move are named
    a, b = tab["llm"].iloc[3], tab["llm"].iloc[30]
    assert sorted(names) == sorted([f"{a}: 31 → 4", f"{b}: 4 → 31"])
    fig.canvas.draw()
    box = ax.get_window_extent()
    for t in ax.texts:  # each label inside the axes
        bb = matplotlib.text.Text.get_window_extent(t)
        assert box.x0 <= bb.x0 and bb.x1 <= box.x1 and box.y0 <= bb.y0 and bb.y1 <= box.y1
    assert "Spearman" in ax.get_title()
    assert ax.get_xlim()[0] > ax.get_xlim()[1]  # rank 1 on the right, at the top
    assert ax.get_ylim()[0] > ax.get_ylim()[1]


def test_rank_vs_accuracy_names_llms_at_one_place_once():
    """LLMs with the same answers sit at nearly one place: one name says how many more are there; the
    names never resize the plot."""
    n = 40
    est, acc = _ranked(np.linspace(2, -2, n), np.linspace(0.9, 0.1, n))
    acc.iloc[[30, 31, 32]] = 0.95  # three copies: best by accuracy, IRT ranks 31 to 33
    acc.iloc[10] = 0.05  # and one that falls alone
    fig = plots.rank_vs_accuracy(est, acc, label=2)
    ax = fig.axes[0]
    texts = sorted(x.get_text() for x in ax.texts)
    assert texts == ["llm-010: 40 → 11", "llm-032 (+2 nearby): 1 → 33"]
    assert all(not x.get_in_layout() for x in ax.texts)


# ---------------------------------------------------------------- item map
def test_item_map_rows_ticks_and_clipped_items():
    est = make_point(n=50, k=4, B=0, seed=7)
    post = est.tree["posterior"].to_dataset()
    d = post["intercept"].values.copy()
    a = post["discrimination"].values.copy()
    a[..., 0] = 1e-3  # difficulty -d/a far beyond the range: marked at the edge
    post["discrimination"] = (post["discrimination"].dims, a)
    post["intercept"] = (post["intercept"].dims, np.where(np.arange(d.shape[-1]) == 0, -1.0, d))
    est.tree["posterior"] = post
    fig = plots.item_map(est)
    ax = fig.axes[0]
    items = est.item_parameters()
    med = items.groupby("domain")["difficulty"].median()
    assert _yticks(ax) == med.sort_values(ascending=False).index.tolist()
    ticks = [p for p in ax.patches if isinstance(p, matplotlib.patches.PathPatch)][0]
    assert len(ticks.get_path().vertices) == 2 * (len(items) - 1)
    right = [c for c in ax.collections if c.get_offsets().shape[0] and c.get_paths()
             and c.get_offsets()[0, 0] == pytest.approx(ax.get_xlim()[1], abs=0.1)]
    assert len(right) == 1 and len(right[0].get_offsets()) == 1
    assert _yticks(plots.item_map(est, ["anatomy", "abstract_algebra"], order="name").axes[0]) == [
        "abstract_algebra", "anatomy"]
    with pytest.raises(KeyError, match="nope"):
        plots.item_map(est, ["nope"])


def test_item_map_draws_a_histogram_for_a_large_domain():
    rng = np.random.default_rng(9)
    item_domain = np.repeat([0, 1], [70, 5])
    d = rng.normal(0, 0.5, 75)
    est = Estimate.from_point(method="mtl", theta=rng.normal(size=(30, 2)), overall=rng.normal(size=30),
                              llms=[f"m{i}" for i in range(30)], domains=["big", "small"],
                              items=[f"q{i}" for i in range(75)], item_domain=item_domain,
                              discrimination=np.ones(75), intercept=d)
    ax = plots.item_map(est).axes[0]
    ticks = [p for p in ax.patches if isinstance(p, matplotlib.patches.PathPatch)][0]
    assert len(ticks.get_path().vertices) == 2 * 5  # the small domain: one tick per item
    fills = [c for c in ax.collections if isinstance(c, matplotlib.collections.PolyCollection)]
    assert len(fills) == 1  # the large one: a histogram
    row = _yticks(ax).index("big")
    ys = fills[0].get_paths()[0].vertices[:, 1]
    assert row < ys.min() and ys.max() <= row + 0.4  # within the domain's row, under its box
    assert "histogram above 60 items" in " ".join(t.get_text() for t in ax.figure.legends[0].get_texts())


def test_item_curves_title_and_legend_stay_in_the_figure():
    """Long item names go in a legend under the plot: neither the title nor the plot is squeezed."""
    est = make_point(n=20, k=24, B=10, seed=8)
    names = list(est.items)
    fig = plots.item_curves(est, [names[-1], names[len(names) // 2], names[0]])
    fig.canvas.draw()
    fb = fig.bbox
    ax = fig.axes[0]
    for artist in (ax.title, ax.get_legend()):
        bb = artist.get_window_extent()
        assert fb.x0 <= bb.x0 and bb.x1 <= fb.x1 and fb.y0 <= bb.y0 and bb.y1 <= fb.y1
    assert ax.get_window_extent().width > 0.75 * fb.width
    assert ax.get_title().startswith("Item characteristic curves")


# -------------------------------------------------------------------- SVG
def test_figure_to_svg(boot):
    fig = plots.scree(boot)
    svg = plots.figure_to_svg(fig, salt="one")
    assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>")
    assert "<?xml" not in svg and "<metadata" not in svg
    assert svg.count("font-family") == 1  # one style rule, not one per label
    styles = re.findall(r'<text style="([^"]*)"', svg)
    assert styles and all(re.fullmatch(r"font-size: [\d.]+px(; [a-z-]+: [^;]+)*", st) for st in styles), styles
    assert "Scree plot of the shared representation" in svg  # text kept as text
    other = plots.figure_to_svg(fig, salt="two", close=True)
    ids = set(re.findall(r'id="(p[0-9a-f]{10})"', svg))
    assert ids and not ids & set(re.findall(r'id="(p[0-9a-f]{10})"', other))
    assert not plt.fignum_exists(fig.number)
    ET.fromstring(svg)  # well-formed: saved as it is, it is a valid .svg file


def test_shorten():
    assert _shorten("abc") == "abc"
    s = _shorten("x" * 100, 20)
    assert len(s) == 20 and "…" in s
