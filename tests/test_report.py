"""The HTML report and the comparison table."""

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
import xarray as xr

from mtlirt.errors import InputError
from mtlirt.estimate import INFO_ATTR, Estimate
from mtlirt.io.responses import Responses
from mtlirt.report.compare import compare, fit_summary, load_fits, recorded_heldout_loglik
from mtlirt.report.html import render_report, write_report

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"  # Debian's package (make test installs it as root)


def _no_browser(why: str):
    """Fail under CI (``CI=true``): the browser test must run there; skip elsewhere."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{why} (CI=true: the headless-browser test must run)")
    pytest.skip(why)


def point(theta, overall, *, llms=None, domains=None, B=0, seed=0, method="mtl", info=None):
    """A point estimate with the given scores (and ``B`` bootstrap replicates)."""
    rng = np.random.default_rng(seed)
    theta = np.asarray(theta, float)
    n, k = theta.shape
    item_domain = np.repeat(np.arange(k), 4)
    j = len(item_domain)
    a = rng.lognormal(0, 0.2, j)
    d = rng.normal(0, 1, j)
    boot = None
    if B:
        boot = {"theta": theta[None] + 0.1 * rng.normal(size=(B, n, k)),
                "overall": np.asarray(overall)[None] + 0.1 * rng.normal(size=(B, n))}
    return Estimate.from_point(
        method=method, theta=theta, overall=overall,
        llms=llms if llms is not None else [f"llm-{i:03d}" for i in range(n)],
        domains=domains if domains is not None else [f"dom_{i}" for i in range(k)],
        items=[f"q{i:03d}" for i in range(j)], item_domain=item_domain, discrimination=a, intercept=d,
        info=info, bootstrap=boot)


def synthetic(n=30, k=5, seed=0, **kw):
    rng = np.random.default_rng(seed)
    eta = rng.normal(size=n)
    theta = 0.8 * eta[:, None] + 0.6 * rng.normal(size=(n, k))
    return point(theta, eta, seed=seed, **kw)


def posterior(est: Estimate, chains=2, draws=20, seed=0, info=None) -> Estimate:
    """A multi-chain posterior around a point estimate."""
    rng = np.random.default_rng(seed)
    p = est.posterior
    s = (chains, draws)
    data = {}
    for v in ("theta", "overall", "discrimination", "intercept", "guessing", "domain_corr"):
        base = p[v].values[0, 0]
        noise = 0.0 if v in ("guessing", "domain_corr") else 0.1 * rng.normal(size=s + base.shape)
        data[v] = (p[v].dims, np.broadcast_to(base, s + base.shape) + noise)
    coords = {c: p[c].values for c in ("llm", "domain", "item", "domain_a", "domain_b")}
    coords.update(chain=np.arange(chains), draw=np.arange(draws), item_domain=("item", p["item_domain"].values))
    tree = xr.DataTree.from_dict({"posterior": xr.Dataset(data, coords=coords)})
    tree.attrs[INFO_ATTR] = json.dumps({"method": "bayes", **(info or {})})
    return Estimate(tree)


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


BAD_DIAG = {"max_rhat": 1.2, "min_ess_bulk": 50.0, "min_ess_tail": 40.0, "divergences": 7, "min_bfmi": 0.2,
            "converged": False}
GOOD_DIAG = {"max_rhat": 1.003, "min_ess_bulk": 900.0, "min_ess_tail": 800.0, "divergences": 0, "min_bfmi": 0.9,
             "converged": True}


@pytest.fixture(scope="module")
def fits():
    mtl = synthetic(B=15, info={
        "singular_values": [4.0, 1.2, 0.9, 0.5, 0.2], "rank": 1,
        "settings": {"C": 0.5, "seed": 0}, "timings": {"fit": 1.5, "bootstrap": 70.0},
        "heldout": {"mean_loglik": -0.48},
    })
    bayes = posterior(mtl, info={"diagnostics": BAD_DIAG, "heldout": -0.47})
    return {"mtl": mtl, "bayes": bayes}


@pytest.fixture(scope="module")
def report_file(fits, tmp_path_factory):
    """One full report (default resolution) shared by the tests that only read it."""
    return write_report(fits, tmp_path_factory.mktemp("report") / "r.html", title="Demo <report>", top=10)


def _external_refs(text):
    return re.findall(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:|//|ftp:)""", text, flags=re.IGNORECASE)


# ------------------------------------------------------------------- report
def test_report_self_contained(report_file, fits):
    assert [p.name for p in report_file.parent.iterdir()] == ["r.html"]
    text = report_file.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>")
    assert _external_refs(text) == []
    assert "<script src" not in text and "<link" not in text and "@import" not in text
    assert "url(" not in text
    imgs = re.findall(r'<img [^>]*src="data:image/png;base64,', text)
    assert len(imgs) >= 8
    assert "plot not drawn" not in text
    assert "Demo &lt;report&gt;" in text
    # leaderboard rows: the best LLMs of each fit appear as table rows
    for est in fits.values():
        for name in est.overall_scores()["llm"].iloc[:10]:
            assert f"<td class=\"name\">{name}</td>" in text
    assert "Showing the top 10 of 30 LLMs" in text
    # sections
    for word in ("Leaderboard", "Domains: difficulty and size", "Correlation structure", "Strongest pairs",
                 "Weakest pairs", "Diagnostics", "Settings and timings", "Comparison of the fits",
                 "Kendall", "top-10 overlap", "held-out log-lik."):
        assert word in text, word


def test_report_non_convergence_warning(report_file):
    text = report_file.read_text()
    assert text.count('class="warning"') >= 2  # top of the page and in the fit's section
    assert "NOT CONVERGED" in text and "did NOT converge" in text
    assert "max_rhat = 1.2" in text
    i_warn = text.index("did NOT converge")
    assert i_warn < text.index('id="data"')  # before anything else


def test_report_converged_has_no_warning(tmp_path, fits):
    good = posterior(fits["mtl"], info={"diagnostics": GOOD_DIAG})
    text = write_report({"bayes": good}, tmp_path / "r.html", dpi=40).read_text()
    assert 'class="warning"' not in text
    assert "converged (by the fitter" in text
    # a single fit: no comparison section
    assert 'id="comparison"' not in text


def test_report_escapes_names(tmp_path):
    rng = np.random.default_rng(1)
    est = point(rng.normal(size=(6, 2)), rng.normal(size=6), llms=["<b>evil</b>", "a&b", "c", "d", "e", "f"],
                domains=["dom<script>", 'quote"d'], method="acc<i>")
    text = render_report({"fit <x>": est}, dpi=40)
    assert "<b>evil</b>" not in text and "&lt;b&gt;evil&lt;/b&gt;" in text
    assert "<script>" not in text and "dom&lt;script&gt;" in text
    assert "fit &lt;x&gt;" in text and "acc&lt;i&gt;" in text
    assert "a&amp;b" in text


def test_report_from_fit_folders_with_responses(tmp_path, fits):
    dirs = []
    for name, est in fits.items():
        d = tmp_path / f"fit_{name}"
        d.mkdir()
        est.save(d / "posterior.nc")
        (d / "fit.json").write_text(json.dumps({"method": est.method, "interval": 0.9,
                                                "versions": {"mtlirt": "0.1.0"}}))
        dirs.append(d)
    mtl = fits["mtl"]
    n, j = len(mtl.llms), len(mtl.items)
    rng = np.random.default_rng(0)
    item_domain = pd.Index(mtl.domains).get_indexer(mtl.posterior["item_domain"].values.astype(str))
    observed = rng.random((n, j)) < 0.9
    responses = Responses((rng.random((n, j)) < 0.6) & observed, observed, list(mtl.llms), list(mtl.items),
                          list(mtl.domains), item_domain)
    # with the data the report runs the model checks itself (2 replicates: their numbers are tested in test_checks.py)
    out = write_report(dirs, tmp_path / "sub" / "report.html", responses=responses, full_table=True, top=5, dpi=40,
                       check_replicates=2)
    text = out.read_text()
    assert "fit_mtl" in text and "fit_bayes" in text
    for name in ("fit_mtl", "fit_bayes"):
        block = text.split(f'id="fit-{name}-checks"')[1].split("<h2")[0]
        assert "over 2 replicated data sets" in block and "Item fit (S-X2)" in block and "checks not run" not in block
    assert "observed share of the LLM x item matrix" in text
    assert "All 30 LLMs" in text  # the full table
    assert _external_refs(text) == []


def test_report_point_estimate_without_intervals(tmp_path):
    est = synthetic(seed=4, method="accuracy")
    text = write_report(est, tmp_path / "r.html", dpi=40).read_text()
    assert "no intervals" in text
    assert "No diagnostics recorded" in text


@pytest.mark.slow
def test_report_screenshot_in_headless_chromium(tmp_path, report_file):
    if not Path(CHROMIUM).exists():
        _no_browser("chromium is not installed (scripts/ensure-chromium.sh installs it as root)")
    html = report_file
    png = tmp_path / "shot.png"
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={png}", "--window-size=1400,3000",
           html.resolve().as_uri()]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    except subprocess.TimeoutExpired:
        _no_browser("chromium did not finish in 120 s")
    assert png.exists() and png.stat().st_size > 20_000, proc.stderr[-2000:]
    img = plt.imread(png)
    assert img.shape[0] == 3000 and img.shape[1] == 1400
    # not a blank page: some red of the warning box and plenty of variation
    assert img[..., :3].std() > 0.05
    red = (img[..., 0] > 0.6) & (img[..., 1] < 0.3) & (img[..., 2] < 0.3)
    assert red.sum() > 100


# ------------------------------------------------------------------ compare
def _pair_with(theta_b, overall_b, **kw):
    rng = np.random.default_rng(0)
    n, k = 25, 3
    theta = rng.normal(size=(n, k))
    overall = rng.normal(size=n)
    a = point(theta, overall, B=10)
    b = point(theta_b(theta), overall_b(overall), **kw)
    return a, b, theta, overall


def test_compare_identical_up_to_scale():
    a, b, *_ = _pair_with(lambda t: 3 * t - 1, lambda o: 2 * o + 1)
    row = compare([a, b], names=["A", "B"]).iloc[0]
    assert (row["a"], row["b"]) == ("A", "B")
    for c in ("pearson_overall", "spearman_overall", "kendall_overall", "top10_overlap", "pearson_domain",
              "pearson_domain_min", "spearman_domain"):
        assert row[c] == pytest.approx(1.0), c
    assert row["n_llms"] == 25 and row["n_domains"] == 3
    assert np.isfinite(row["mean_width_overall_a"]) and np.isnan(row["mean_width_overall_b"])


def test_compare_reversed():
    a, b, *_ = _pair_with(lambda t: -t, lambda o: -o)
    row = compare({"A": a, "B": b}).iloc[0]
    assert row["pearson_overall"] == pytest.approx(-1.0)
    assert row["kendall_overall"] == pytest.approx(-1.0)
    assert row["top10_overlap"] == 0.0
    assert row["pearson_domain"] == pytest.approx(-1.0)


def test_compare_known_correlations_and_name_matching():
    rng = np.random.default_rng(2)
    n, k = 40, 4
    theta = rng.normal(size=(n, k))
    overall = rng.normal(size=n)
    noise_t = rng.normal(size=(n, k))
    noise_o = rng.normal(size=n)
    names = [f"m{i}" for i in range(n)]
    a = point(theta, overall, llms=names)
    tb = theta + noise_t
    ob = overall + noise_o
    # b lists the LLMs in another order, with two extra LLMs and one missing
    perm = rng.permutation(n)[:-1]
    extra_t = rng.normal(size=(2, k))
    b = point(np.vstack([tb[perm], extra_t]), np.r_[ob[perm], [5.0, -5.0]],
              llms=[names[i] for i in perm] + ["x1", "x2"])
    row = compare([a, b]).iloc[0]
    keep = np.sort(perm)
    from scipy import stats

    assert row["n_llms"] == n - 1
    assert row["pearson_overall"] == pytest.approx(np.corrcoef(overall[keep], ob[keep])[0, 1])
    assert row["spearman_overall"] == pytest.approx(stats.spearmanr(overall[keep], ob[keep]).statistic)
    assert row["kendall_overall"] == pytest.approx(stats.kendalltau(overall[keep], ob[keep]).statistic)
    per = [np.corrcoef(theta[keep, j], tb[keep, j])[0, 1] for j in range(k)]
    assert row["pearson_domain"] == pytest.approx(np.mean(per))
    assert row["pearson_domain_min"] == pytest.approx(np.min(per))
    top_a = set(np.array(names)[keep][np.argsort(-overall[keep])[:10]])
    top_b = set(np.array(names)[keep][np.argsort(-ob[keep])[:10]])
    assert row["top10_overlap"] == pytest.approx(len(top_a & top_b) / 10)


def test_compare_three_fits_pairs_and_heldout():
    a = synthetic(seed=1, info={"heldout": {"mean_loglik": -0.5, "n": 100}})
    b = synthetic(seed=2, info={"heldout": -0.6})
    c = synthetic(seed=3)
    tab = compare([a, b, c])
    assert len(tab) == 3
    assert list(tab["a"]) == ["mtl", "mtl", "mtl (2)"] and list(tab["b"]) == ["mtl (2)", "mtl (3)", "mtl (3)"]
    assert tab.iloc[0]["heldout_loglik_a"] == -0.5 and tab.iloc[0]["heldout_loglik_b"] == -0.6
    assert np.isnan(tab.iloc[1]["heldout_loglik_b"])


def test_compare_needs_two_fits_and_common_llms():
    a = synthetic(seed=1)
    with pytest.raises(ValueError, match="at least two"):
        compare([a])
    b = point(np.zeros((3, 5)) + np.arange(3)[:, None], np.arange(3.0), llms=["p", "q", "r"])
    with pytest.raises(InputError, match="share 0 LLM.*at least 2"):
        compare([a, b])


def test_compare_fit_folders(tmp_path):
    a, b = synthetic(seed=1), synthetic(seed=1, method="stl")
    a.save(tmp_path / "a.nc")
    (tmp_path / "B").mkdir()
    b.save(tmp_path / "B" / "posterior.nc")
    tab = compare([tmp_path / "a.nc", str(tmp_path / "B")])
    assert list(tab[["a", "b"]].iloc[0]) == ["a", "B"]
    assert tab.iloc[0]["pearson_overall"] == pytest.approx(1.0)
    with pytest.raises(FileNotFoundError):
        load_fits([tmp_path / "missing"])


def test_fit_summary_and_heldout():
    mtl = synthetic(B=10, info={"rank": 1, "timings": {"a": 1.0, "b": 2.0}})
    bay = posterior(mtl, info={"diagnostics": GOOD_DIAG})
    s = fit_summary({"m": mtl, "b": bay})
    assert list(s.index) == ["m", "b"]
    assert s.loc["m", "uncertainty"] == "bootstrap" and s.loc["m", "draws"] == 10
    assert s.loc["b", "draws"] == 40 and s.loc["b", "converged"]
    assert s.loc["m", "time_s"] == 3.0
    assert s.loc["m", "mean_width_overall"] > 0
    assert recorded_heldout_loglik({"heldout": {"loglik": -1.5}}) == -1.5
    assert np.isnan(recorded_heldout_loglik({}))
    assert np.isnan(recorded_heldout_loglik({"heldout": {"other": "x"}}))


def test_report_reads_fitting_conventions(tmp_path):
    """Timings under ``seconds``; NaN diagnostics (MAP fits) are not failures; ESS threshold from the fit."""
    est = synthetic(info={"seconds": {"fit": 2.5, "bootstrap": 130.0},
                          "diagnostics": {"max_rhat": float("nan"), "min_ess_bulk": float("nan"), "converged": None}})
    text = render_report(est, dpi=30)
    assert "2 min 10 s" in text and "2.50 s" in text
    assert 'class="caution"' not in text and 'class="warning"' not in text
    post = posterior(est, chains=2)
    ds = post.tree["posterior"].to_dataset()
    ds.attrs["mtlirt_diagnostics"] = json.dumps({"max_rhat": 1.004, "min_ess_bulk": 250.0, "min_ess_tail": 240.0,
                                                 "divergences": 0, "ess_threshold": 200, "converged": True})
    post.tree["posterior"] = ds
    text = render_report({"b": post}, dpi=30)
    assert "converged (by the fitter" in text and "FAIL" not in text
    assert fit_summary({"b": post}).loc["b", "converged"]
