import json
import warnings

import pandas as pd

from mtlirt.cli import build_parser, main
from mtlirt.data.responses import Responses


def test_every_command_has_help(capsys):
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert {"validate", "simulate", "convert"} <= set(sub.choices)
    for name, p in sub.choices.items():
        text = p.format_help()
        assert p.description, name
        for action in p._actions:
            if action.dest != "help" and action.option_strings:
                assert action.help, f"{name} {action.option_strings} has no help"
        assert "usage:" in text


def test_simulate_writes_data_and_truth(tmp_path, capsys):
    out = tmp_path / "sim.parquet"
    rc = main(["simulate", "--n-llms", "40", "--domain-sizes", "10,12,15", "--rank", "1",
               "--missing", "0.1", "--seed", "5", "--out", str(out), "--truth", str(tmp_path / "truth")])
    assert rc == 0
    r = Responses.read(out)
    assert r.n_llms == 40 and list(r.domain_sizes) == [10, 12, 15]
    assert 0.85 < r.n_responses / (40 * 37) < 0.95
    scores = pd.read_csv(tmp_path / "truth" / "domain_scores.csv")
    assert list(scores.columns) == ["llm", "domain", "score"] and len(scores) == 40 * 3
    items = pd.read_csv(tmp_path / "truth" / "items.csv")
    assert list(items.columns) == ["item", "domain", "discrimination", "intercept", "difficulty", "guessing", "upper"]
    truth = json.loads((tmp_path / "truth" / "truth.json").read_text())
    assert truth["rank"] == 1


def test_simulate_preset_scale(tmp_path):
    out = tmp_path / "sim.csv.gz"
    assert main(["simulate", "--n-llms", "12", "--preset", "mmlu", "--scale", "0.01", "--out", str(out)]) == 0
    r = Responses.read(out)
    assert r.n_domains == 57 and r.domain_sizes.min() == 1  # 100 x 0.01


def test_simulate_bad_arguments_one_line(tmp_path, capsys):
    rc = main(["simulate", "--n-llms", "10", "--preset", "mmlu", "--domain-sizes", "3,4",
               "--out", str(tmp_path / "x.csv")])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("mtlirt: error:") and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "x.csv").exists()


def test_convert_wide_roundtrip(tmp_path, capsys):
    m = pd.DataFrame({"llm": ["a", "b"], "alg/q1": [1, 0], "alg/q2": [0, None], "bio/q1": [1, 1]})
    src = tmp_path / "wide.csv"
    m.to_csv(src, index=False)
    out = tmp_path / "long.parquet"
    assert main(["convert", "wide", str(src), "--out", str(out)]) == 0
    r = Responses.read(out)
    assert r.n_responses == 5 and list(r.domains) == ["alg", "bio"]
    assert main(["convert", "wide", str(src), "--tasks", "x", "--out", str(tmp_path / "other.parquet")]) == 2
    assert "does not apply" in capsys.readouterr().err
    assert not (tmp_path / "other.parquet").exists()


def test_convert_lm_eval_folder(tmp_path):
    folder = tmp_path / "org__model"
    folder.mkdir()
    lines = [
        {"doc_id": i, "doc": {"question": "q"}, "target": "A", "arguments": [], "resps": [], "filtered_resps": [],
         "filter": "none", "metrics": ["acc"], "acc": float(i % 2)}
        for i in range(4)
    ]
    (folder / "samples_mmlu_anatomy_2024-05-13T12-30-45.123456.jsonl").write_text(
        "\n".join(json.dumps(x) for x in lines))
    out = tmp_path / "long.csv"
    assert main(["convert", "lm-eval", str(folder), "--llm", "org/model", "--out", str(out)]) == 0
    df = pd.read_csv(out)
    assert set(df["llm"]) == {"org/model"} and list(df["correct"]) == [0, 1, 0, 1]
    assert set(df["domain"]) == {"mmlu_anatomy"}


def test_fit_variant_paper_writes_its_tuning(tmp_path, capsys):
    sim = tmp_path / "paper.csv"
    assert main(["simulate", "--preset", "paper", "--similarity", "0.2", "--seed", "1",
                 "--out", str(sim), "--truth", str(tmp_path / "truth")]) == 0
    r = Responses.read(sim)
    assert r.n_llms == 100 and r.n_domains == 18 and r.n_items == 1350
    data = tmp_path / "small.csv"  # a small table keeps the 5-fold x 14-C tuning quick
    assert main(["simulate", "--n-llms", "30", "--domain-sizes", "8,10", "--seed", "1", "--out", str(data)]) == 0
    out = tmp_path / "fit"
    assert main(["fit", str(data), "--method", "mtl", "--variant", "paper", "--out", str(out)]) == 0
    info = json.loads((out / "fit.json").read_text())
    assert info["settings"]["variant"] == "paper" and info["C"] in info["cv"]["grid"]
    assert len(info["cv"]["loss"]) == 14 and info["cv"]["chosen"] == info["C"]
    assert info["diagnostics"]["converged"] is True and info["optimizer"] == "fast"
    assert main(["fit", str(data), "--method", "stl", "--variant", "paper", "--out", str(tmp_path / "x")]) == 2
    assert main(["fit", str(data), "--variant", "papr", "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-2:] == ["mtlirt: error: variant (--variant) applies to method 'mtl' only, not 'stl'",
                        "mtlirt: error: unknown variant 'papr': expected one of default, paper, paper-global, "
                        "paper-local"]
    assert main(["simulate", "--preset", "paper", "--missing", "0.1", "--out", str(tmp_path / "y.csv")]) == 2
    assert not (tmp_path / "x").exists() and not (tmp_path / "y.csv").exists()


def test_validate_fit_compare_report_chain(tmp_path, capsys):
    """The success paths of validate, fit (two methods), compare and report, through the command line."""
    data = tmp_path / "sim.csv"
    assert main(["simulate", "--n-llms", "60", "--domain-sizes", "8,10,12", "--seed", "2", "--out", str(data)]) == 0
    capsys.readouterr()
    assert main(["validate", str(data)]) == 0
    summary = capsys.readouterr().out
    assert "60" in summary and "3" in summary
    for method in ("stl", "pooled"):
        assert main(["fit", str(data), "--method", method, "--out", str(tmp_path / method)]) == 0
        scores = pd.read_csv(tmp_path / method / "overall.csv")
        assert len(scores) == 60 and scores["rank"].min() == 1
    capsys.readouterr()
    assert main(["compare", str(tmp_path / "stl"), str(tmp_path / "pooled")]) == 0
    table = capsys.readouterr().out
    assert "stl" in table and "pooled" in table
    # two reasonable estimators of the same 60 LLMs agree closely on the overall ranking
    a = pd.read_csv(tmp_path / "stl" / "overall.csv").set_index("llm")["score"]
    b = pd.read_csv(tmp_path / "pooled" / "overall.csv").set_index("llm")["score"]
    assert a.corr(b.loc[a.index], method="spearman") > 0.9
    html = tmp_path / "r.html"
    assert main(["report", str(tmp_path / "stl"), str(tmp_path / "pooled"), "--data", str(data),
                 "--out", str(html)]) == 0
    text = html.read_text()
    assert text.startswith("<!DOCTYPE html>") and "<svg" in text and "pooled" in text


def test_fit_bayes_default_route(tmp_path, capsys, monkeypatch):
    """fit --method bayes without route or run-length options, on a leaderboard past the joint model's
    size: the items fixed, the LLM side integrated out, the run length chosen by the convergence checks;
    the choices and their reasons are printed and recorded in fit.json; every LLM gets a score with an
    interval. ``MTLIRT_PROGRESS=0`` reaches the fit (the sampler's bars too), and no display switch is
    recorded among the settings."""
    import json

    import mtlirt.fitting

    data = tmp_path / "sim.csv"
    assert main(["simulate", "--n-llms", "201", "--domain-sizes", "5,10,15", "--seed", "2", "--out", str(data)]) == 0
    out = tmp_path / "fit"
    real_fit, asked = mtlirt.fitting.fit, []

    def spy(*args, **kwargs):
        asked.append(kwargs.get("progress", "not given"))
        return real_fit(*args, **kwargs)

    monkeypatch.setattr(mtlirt.fitting, "fit", spy)
    monkeypatch.setenv("MTLIRT_PROGRESS", "0")
    assert main(["fit", str(data), "--method", "bayes", "--chains", "2", "--strict", "--out", str(out)]) == 0
    assert asked == [False]
    printed = capsys.readouterr().out
    assert "route: items fixed, LLM side integrated" in printed and "chosen by the convergence checks" in printed
    info = json.loads((out / "fit.json").read_text())
    route = info["route"]
    assert route["items"] == "fixed" and route["llm_side"] == "integrated" and info["llm_side"] == "integrated"
    assert "201 LLMs" in route["reasons"]["items"] and route["reasons"]["llm_side"].startswith("auto")
    assert info["sampler"] in ("imh", "nutpie") and "imh_pilot" in info
    assert info["run_length"]["converged"] and info["draws"] == info["run_length"]["draws"]
    assert info["diagnostics"]["converged"]
    assert "progress" not in info["settings"]
    # the settings as run, every default filled in, and read back without complaint
    ran = info["sampler_config"]
    assert (ran["items"], ran["llm_side"], ran["sampler"], ran["chains"]) == ("fixed", "integrated", info["sampler"], 2)
    assert (ran["draws"], ran["thin"], ran["tune"]) == (info["draws"], info["thin"], info["tune"])
    from mtlirt.results.fitdir import read_fit

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        post = read_fit(out).posterior
    assert json.loads(post.attrs["mtlirt_sampler_config"]) == ran
    assert post.sizes["draw"] == min(ran["draws"], 500)  # 1,000 kept: 500 per chain at 2 chains
    scores = pd.read_csv(out / "overall.csv")
    assert len(scores) == 201 and (scores["upper"] > scores["lower"]).all()


def test_fit_guessing_default_is_auto_and_none_is_the_2pl(tmp_path):
    """``mtlirt fit`` decides the floors from the data by default (recorded in fit.json); ``--guessing
    none`` fits the 2PL."""
    data = tmp_path / "sim.csv"
    assert main(["simulate", "--n-llms", "400", "--domain-sizes", "30,30", "--guessing", "0.25", "--mc-share",
                 "0.5", "--seed", "1", "--out", str(data)]) == 0
    assert main(["fit", str(data), "--method", "stl", "--out", str(tmp_path / "auto")]) == 0
    info = json.loads((tmp_path / "auto" / "fit.json").read_text())
    assert info["settings"]["guessing"] == "auto"
    items = pd.read_csv(tmp_path / "auto" / "items.csv")
    kept = [bool((items.loc[items["domain"] == k, "guessing"] > 0).all()) for k in sorted(items["domain"].unique())]
    assert info["floors"]["keep"] == kept and sum(kept) == 1
    assert main(["fit", str(data), "--method", "stl", "--guessing", "none", "--out", str(tmp_path / "none")]) == 0
    info = json.loads((tmp_path / "none" / "fit.json").read_text())
    assert info["settings"]["guessing"] is None and "floors" not in info
    assert (pd.read_csv(tmp_path / "none" / "items.csv")["guessing"] == 0).all()
