"""The HTML report and the comparison table."""

import html
import io
import json
import os
import re
import shutil
import subprocess
import warnings
from pathlib import Path
from urllib.parse import unquote

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
import xarray as xr

from mtlirt.data.responses import Responses
from mtlirt.errors import InputError
from mtlirt.report.compare import compare, fit_summary, load_fits, recorded_heldout_loglik
from mtlirt.report.html import _accuracy_source, _check_llms, render_report, write_report
from mtlirt.report.html_blocks import _kv_table
from mtlirt.report.html_diagnostics import _diagnostics
from mtlirt.report.html_domains import _scores_section
from mtlirt.report.html_leaderboard import _accuracy_section
from mtlirt.report.html_settings import _settings
from mtlirt.results.estimate import INFO_ATTR, Estimate

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


def _responses_of(est, seed=0, share=0.9):
    """Responses on the estimate's LLMs and items (a share of them observed)."""
    n, j = len(est.llms), len(est.items)
    rng = np.random.default_rng(seed)
    item_domain = pd.Index(est.domains).get_indexer(est.posterior["item_domain"].values.astype(str))
    observed = rng.random((n, j)) < share
    return Responses((rng.random((n, j)) < 0.6) & observed, observed, list(est.llms), list(est.items),
                     list(est.domains), item_domain)


@pytest.fixture(scope="module")
def responses(fits):
    return _responses_of(fits["mtl"])


@pytest.fixture(scope="module")
def report_file(fits, responses, tmp_path_factory):
    """One full report (default resolution, with the data, without the model checks: test_checks.py has
    them) shared by the tests that only read it."""
    return write_report(fits, tmp_path_factory.mktemp("report") / "r.html", responses=responses,
                        title="Demo <report>", top=10, checks=False)


def _external_refs(text):
    return re.findall(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:|//|ftp:)""", text, flags=re.IGNORECASE)


def _csvs(text):
    """The CSV downloads of a report: file name -> table."""
    out = {}
    for name, href in re.findall(r'<a class="dl csv" download="([^"]+)" href="([^"]+)"', text):
        body = unquote(html.unescape(href).removeprefix("data:text/csv;charset=utf-8,"))
        out[name] = pd.read_csv(io.StringIO(body))
    return out


def _section(text, anchor):
    """The HTML from a heading's id to the next heading of the same or a higher level."""
    start = text.index(f'id="{anchor}"')
    level = text.rfind("<h", 0, start)
    tag = text[level:level + 3]
    ends = [i for i in (text.find(f"<{tag[1:]}", start), text.find("<h2", start), text.find("</section>", start))
            if i > 0]
    return text[start:min(ends)]


# ------------------------------------------------------------------- report
def test_report_self_contained(report_file, fits):
    assert [p.name for p in report_file.parent.iterdir()] == ["r.html"]
    text = report_file.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>")
    assert _external_refs(text) == []
    assert "<script src" not in text and "<link" not in text and "@import" not in text
    assert re.findall(r"url\((?!#)", text) == []  # only the SVGs' references to their own clip paths
    svgs = re.findall(r"<svg [^>]*>", text)
    assert len(svgs) >= 20 and "<img" not in text
    assert text.count('data-save="svg"') == len(svgs) == text.count('data-save="png"')
    ids = re.findall(r'<(?:clipPath|path) id="([^"]+)"', text)
    assert len(ids) == len(set(ids))  # the inline SVGs share one page: no id twice
    assert "plot not drawn" not in text
    assert "Demo &lt;report&gt;" in text
    # leaderboard rows: the best LLMs of each fit appear as table rows
    for est in fits.values():
        for name in est.overall_scores()["llm"].iloc[:10]:
            assert f"<td class=\"name\">{name}</td>" in text
    assert "Showing the top 10 of 30 LLMs" in text
    assert "<code>--full-table</code>" in text and "<code>full_table=True</code>" in text
    # sections
    for word in ("Leaderboard", "IRT rank against raw accuracy", "Domain scores", "Domains: difficulty and size",
                 "Items: the item map", "Correlation structure", "Strongest pairs", "Weakest pairs", "Diagnostics",
                 "Settings and timings", "Comparison of the fits", "Kendall", "top-10 overlap", "held-out log-lik."):
        assert word in text, word
    # every section says how to read it
    for anchor in ("data", "comparison", *(f"fit-{n}-{s}" for n in fits for s in (
            "leaderboard", "accuracy", "scores", "domains", "items", "correlation", "diagnostics", "settings"))):
        assert "How to read this." in _section(text, anchor), anchor


def test_report_csv_downloads_hold_the_full_tables(report_file, fits):
    text = report_file.read_text()
    csvs = _csvs(text)
    for name in ("mtl", "bayes"):
        for what in ("leaderboard", "rank-vs-accuracy", "domain-heatmap", "domains", "domain-correlations",
                     "settings", "timings"):
            if what in ("settings", "timings") and name == "bayes":
                continue
            assert f"{name}-{what}.csv" in csvs, (name, what)
    assert {"data-summary.csv", "data-domains.csv", "comparison-fits.csv", "comparison-agreement.csv",
            "bayes-diagnostics.csv"} <= set(csvs)
    est = fits["mtl"]
    board = csvs["mtl-leaderboard.csv"]  # all 30 LLMs, though the page shows 10
    want = est.overall_scores(0.9)
    assert list(board["llm"]) == list(want["llm"]) and len(board) == 30
    np.testing.assert_allclose(board["score"], want["score"], rtol=1e-5)
    np.testing.assert_allclose(board["p_top10"], est.prob_top(10).reindex(want["llm"]), rtol=1e-5)
    pairs = csvs["mtl-domain-correlations.csv"]
    assert len(pairs) == 10 and pairs["estimate"].is_monotonic_decreasing  # 5 domains: all 10 pairs
    heat = csvs["mtl-domain-heatmap.csv"]
    assert list(heat["llm"]) == list(want["llm"].iloc[:30]) and heat.shape[1] == 2 + 5


def test_report_rank_against_raw_accuracy(report_file, fits, responses):
    text = report_file.read_text()
    block = _section(text, "fit-mtl-accuracy")
    assert "Raw accuracy from the data" in block and "<svg " in block
    shift = _csvs(text)["mtl-rank-vs-accuracy.csv"]
    from mtlirt.report import plots

    want = plots.rank_shift(fits["mtl"], responses)
    assert list(shift["llm"]) == list(want["llm"])
    assert list(shift["accuracy_rank"]) == list(want["accuracy_rank"]) and list(shift["shift"]) == list(want["shift"])
    # the table names the largest moves, each with its signed move
    first = want.iloc[0]
    assert f'<td class="name">{first.llm}</td>' in block and f"{first['shift']:+d}" in block


def test_report_rank_comparison_without_data(fits):
    """Without the data: the accuracy-baseline fit, if one is given, else a note saying what to pass."""
    mtl = fits["mtl"]
    assert _accuracy_source(None, {"mtl": mtl}) == (None, None)
    block = _accuracy_section("fit-mtl", mtl, None, None, 0.9, 30, "mtl")
    assert "<svg" not in block and "--data" in block and "--method accuracy" in block
    from mtlirt.fitting import fit

    acc_fit = fit(_responses_of(mtl), "accuracy")
    acc, source = _accuracy_source(None, {"mtl": mtl, "acc": acc_fit})
    assert source == "the accuracy-baseline fit “acc”"
    np.testing.assert_allclose(acc.to_numpy(), np.nanmean(acc_fit.point("accuracy"), axis=1))
    block = _accuracy_section("fit-mtl", mtl, acc, source, 0.9, 30, "mtl")
    assert "accuracy-baseline fit “acc”" in block and block.count("<svg ") == 1
    assert "raw-accuracy baseline itself" in _accuracy_section("fit-acc", acc_fit, acc, source, 0.9, 30, "acc")


def test_report_chosen_llms(fits):
    mtl = fits["mtl"]
    chosen = ["llm-029", "llm-003", "llm-011"]
    block = _scores_section("fit-mtl", mtl, chosen, 30, 0.9, 30, "mtl")
    rank = mtl.overall_scores().set_index("llm")["rank"]
    order = sorted(chosen, key=rank.get)
    heat = re.findall(r"<svg .*?</svg>", block, flags=re.DOTALL)[0]
    rows = re.findall(r">(\d+)\. (llm-\d+)</text>", heat)
    assert [n for _, n in rows] == order and [int(r) for r, _ in rows] == [rank[n] for n in order]
    assert [re.search(r"Domain profile of (\S+):", c).group(1) for c in re.findall(r"<figcaption>[^<]*", block)
            if "Domain profile" in c] == order
    assert list(_csvs(block)["mtl-domain-heatmap.csv"]["llm"]) == order
    # by default the 3 best profiles and the top_llms best in the heatmap
    block = _scores_section("fit-mtl", mtl, None, 4, 0.9, 30, "mtl")
    best = list(mtl.overall_scores()["llm"])
    profiles = [c for c in re.findall(r"<figcaption>[^<]*", block) if "Domain profile of" in c]
    assert len(profiles) == 3 and f"Domain profile of {best[0]}:" in profiles[0]
    assert list(_csvs(block)["mtl-domain-heatmap.csv"]["llm"]) == best[:4]
    # names in another fit only: noted here; in none of the fits: an error naming them
    other = point(np.zeros((3, 5)), np.arange(3.0), llms=["x1", "x2", "x3"])
    assert _check_llms(["x2", "llm-003"], {"mtl": mtl, "other": other}) == ["x2", "llm-003"]
    block = _scores_section("fit-mtl", mtl, ["x2", "llm-003"], 30, 0.9, 30, "mtl")
    assert "Not in this fit: x2" in block and list(_csvs(block)["mtl-domain-heatmap.csv"]["llm"]) == ["llm-003"]
    with pytest.raises(InputError, match="'nope'"):
        render_report({"mtl": mtl}, llms=["llm-001", "nope"])


def test_report_cli_llms_option(tmp_path, fits, capsys):
    from mtlirt.cli import main

    fit_dir = tmp_path / "fit"
    fit_dir.mkdir()
    fits["mtl"].save(fit_dir / "posterior.nc")
    names = tmp_path / "llms.txt"
    names.write_text("# the two to show\nllm-007\n\nllm-002  # and this one\n")
    out = tmp_path / "r.html"
    with warnings.catch_warnings():  # a bare posterior.nc, a fit without fit.json: said on stderr
        warnings.simplefilter("always", UserWarning)
        assert main(["report", str(fit_dir), "--llms", str(names), "--out", str(out)]) == 0
    assert "mtlirt: warning: " in capsys.readouterr().err
    text = out.read_text()
    assert set(_csvs(text)["fit-domain-heatmap.csv"]["llm"]) == {"llm-007", "llm-002"}
    for argv, says in ((["--llms", "llm-007,no-such-llm"], "'no-such-llm'"), (["--llms", " , "], "no LLM name"),
                       (["--top-llms", "0"], "--top-llms")):
        bad = tmp_path / "bad.html"
        capsys.readouterr()
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", ".*no fingerprint", UserWarning)
            assert main(["report", str(fit_dir), *argv, "--out", str(bad)]) == 2
        err = capsys.readouterr().err
        assert err.startswith("mtlirt: error: ") and len(err.strip().splitlines()) == 1, err
        assert says in err and not bad.exists()


def test_report_settings_show_the_selected_values_and_readable_diagnostics():
    info = {"settings": {"method": "mtl", "rank": None, "gamma": None, "guessing": None, "seed": 0},
            "rank": 1, "rank_evidence": {"method": "held-out", "eigenvalues": [3.0, 1.0, 0.5]}, "gamma": 5.7, "C": 0.4}
    settings = _kv_table(_settings(info))
    assert "1 (selected from the data: held-out)" in settings
    assert "5.7 (tuned on held-out responses: C = 0.4)" in settings
    assert "none (no guessing floor)" in settings
    bayes = _kv_table(_settings({"settings": {"method": "bayes", "spec": "factor-2pl", "items": "auto", "draws": 500},
                                 "sampler_config": {"algorithm": "nuts", "items": "fixed", "draws": 500, "chains": 4,
                                                    "target_accept": 0.9, "sampler": "imh", "tune": None}}))
    assert "fixed (auto)" in bayes and "4 (the default)" in bayes and "imh (the default)" in bayes
    assert "500 (" not in bayes and "None" not in bayes  # as given, or nothing to run
    assert "40 values: 0.1 to 2" in _kv_table({"singular_values": list(np.linspace(2, 0.1, 40))})  # not JSON
    diag, warn = _diagnostics("m", {"converged": True, "iterations": 13,
                                    "calibrations": {"stl": True, "pooled": False}})
    assert warn is None
    assert "calibrations › stl" in diag and "calibrations › pooled" in diag and "{" not in diag
    assert "EM sweeps of the item calibration" in diag


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
    assert "dom&lt;script&gt;" in text
    assert text.count("<script") == 1 and text.index("<script>") > text.index("</main>")  # the page's own only
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


#: Run in the page by the browser test: per section (a heading with an id, up to the next one) the box of
#: every figure's SVG in page coordinates, its viewBox, its text, and its CSV links; then one figure saved
#: as PNG through the page's own script. The result lands in the body's data-mt attribute.
_MEASURE = """<script>
window.addEventListener('load', function () {
  var main = document.querySelector('main').getBoundingClientRect(), out = {sections: {}};
  document.querySelectorAll('h2[id], h3[id]').forEach(function (h) {
    var sec = {figures: [], csv: 0}, el = h.nextElementSibling;
    while (el && !/^H[23]$/.test(el.tagName) && el.tagName !== 'SECTION') {
      sec.csv += el.querySelectorAll('a.csv').length;
      el.querySelectorAll('figure svg').forEach(function (svg) {
        var r = svg.getBoundingClientRect(), vb = svg.viewBox.baseVal, t = svg.querySelector('text');
        sec.figures.push({top: r.top + window.scrollY, left: r.left, width: r.width, height: r.height,
                          vbw: vb.width, vbh: vb.height, text: t ? t.getComputedTextLength() : 0,
                          inside: r.left >= main.left - 1 && r.right <= main.right + 1});
      });
      el = el.nextElementSibling;
    }
    out.sections[h.id] = sec;
  });
  var csv = document.querySelector('a.csv');
  out.csv = {name: csv.getAttribute('download'), size: mtCsvBlob(csv).size};
  mtPngBlob(document.querySelector('figure svg'), 2, function (b) {
    out.png = b ? b.size : -1;
    document.body.setAttribute('data-mt', JSON.stringify(out));
  });
});
</script>"""


def _chromium(tmp_path, page, *args):
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
           f"--user-data-dir={tmp_path / 'profile'}", *args, page.resolve().as_uri()]
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    except subprocess.TimeoutExpired:
        _no_browser("chromium did not finish in 120 s")


@pytest.mark.slow
def test_report_in_headless_chromium(tmp_path, report_file, fits):
    """The page as a browser draws it: a DOM check of every section (its figures drawn at their size,
    inside the page, in proportion, their text laid out; its CSV links), a figure saved as PNG by the
    page's script, and screenshots: the top (the red warning) and the new figures, each drawn over its box."""
    if not Path(CHROMIUM).exists():
        _no_browser("chromium is not installed (scripts/ensure-chromium.sh installs it as root)")
    text = report_file.read_text()
    probe = tmp_path / "probe.html"
    probe.write_text(text.replace("</body>", _MEASURE + "</body>"), encoding="utf-8")
    proc = _chromium(tmp_path, probe, "--dump-dom", "--virtual-time-budget=20000", "--window-size=1400,3000")
    found = re.search(r'data-mt="([^"]+)"', proc.stdout)
    assert found, proc.stderr[-2000:]
    dom = json.loads(html.unescape(found.group(1)))
    assert dom["png"] > 5_000  # the "PNG" link's conversion works in the browser
    href = re.search(rf'download="{dom["csv"]["name"]}" href="([^"]+)"', text).group(1)
    body = unquote(html.unescape(href).split(",", 1)[1])
    assert dom["csv"]["size"] == len(body.encode()) > 100  # a CSV link saves the table, decoded
    # (figures, CSV links) of each section; the synthetic MTL fit records no diagnostics, the posterior (not
    # converged: its diagnostics table heads the fit) no settings
    want = {"leaderboard": (2, 1), "accuracy": (1, 1), "scores": (4, 1), "domains": (1, 1), "items": (2, 0),
            "correlation": (1, 1)}
    extra = {"mtl": {"scree": (1, 0), "diagnostics": (0, 0), "settings": (0, 3)},
             "bayes": {"diagnostics": (2, 0), "settings": (0, 1)}}
    for name in fits:
        for part, (n_figs, n_csv) in {**want, **extra[name]}.items():
            sec = dom["sections"][f"fit-{name}-{part}"]
            assert (len(sec["figures"]), sec["csv"]) == (n_figs, n_csv), (name, part, sec)
    assert len(dom["sections"]["comparison"]["figures"]) >= 2 and dom["sections"]["data"]["csv"] >= 1
    figures = [f for sec in dom["sections"].values() for f in sec["figures"]]
    assert len(figures) >= 25
    for f in figures:
        assert f["width"] > 150 and f["height"] > 100 and f["inside"], f
        assert f["height"] / f["width"] == pytest.approx(f["vbh"] / f["vbw"], rel=0.02), f  # drawn in proportion
        assert f["text"] > 0, f  # labels laid out in a font
    # the top of the page: not blank, the red warning box of the fit that did not converge
    top = tmp_path / "top.png"
    proc = _chromium(tmp_path, report_file, f"--screenshot={top}", "--window-size=1400,3000")
    assert top.exists() and top.stat().st_size > 20_000, proc.stderr[-2000:]
    img = plt.imread(top)
    assert img.shape[:2] == (3000, 1400)
    assert img[..., :3].std() > 0.05
    red = (img[..., 0] > 0.6) & (img[..., 1] < 0.3) & (img[..., 2] < 0.3)
    assert red.sum() > 100
    # the new figures of the first fit, the page shifted up to them: each drawn over its whole box
    new = [f for part in ("accuracy", "scores", "items") for f in dom["sections"][f"fit-mtl-{part}"]["figures"]]
    y0 = int(min(f["top"] for f in new)) - 20
    shifted = tmp_path / "shifted.html"
    shifted.write_text(text.replace("</head>", f"<style>main{{margin-top:-{y0}px}}</style></head>"), encoding="utf-8")
    shot = tmp_path / "new.png"
    _chromium(tmp_path, shifted, f"--screenshot={shot}", "--window-size=1400,6000")
    img = plt.imread(shot)[..., :3]
    drawn = 0
    for f in new:
        top_, left = int(f["top"]) - y0, int(f["left"])
        if top_ + f["height"] > img.shape[0]:
            continue
        box = img[top_:top_ + int(f["height"]), left:left + int(f["width"])]
        ink = (box < 0.85).any(axis=2)
        rows, cols = np.flatnonzero(ink.any(axis=1)), np.flatnonzero(ink.any(axis=0))
        assert ink.mean() > 0.02, f
        assert rows[-1] - rows[0] > 0.8 * box.shape[0] and cols[-1] - cols[0] > 0.8 * box.shape[1], f
        drawn += 1
    assert drawn >= 4
    heat = dom["sections"]["fit-mtl-scores"]["figures"][0]
    box = img[int(heat["top"]) - y0:int(heat["top"] + heat["height"]) - y0,
              int(heat["left"]):int(heat["left"] + heat["width"])]
    reds = ((box[..., 0] > 0.7) & (box[..., 2] < 0.5)).sum()
    blues = ((box[..., 2] > 0.6) & (box[..., 0] < 0.45)).sum()
    assert reds > 500 and blues > 500  # the heatmap's cells above and below the average LLM


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
    with pytest.raises(InputError, match="two or more fits"):
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
