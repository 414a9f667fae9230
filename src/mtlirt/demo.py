"""The README's main job: a built-in MMLU-shaped leaderboard, fitted and reported end to end."""

from __future__ import annotations

import json
import time
import warnings
from pathlib import Path

from .data.outputs import FolderKind, folder_output
from .data.responses import Responses
from .data.simulate import simulate
from .fitting import fit
from .progress import enabled as progress_enabled
from .progress import stage
from .results.fitdir import package_versions, write_fit

#: The demo leaderboard: MMLU's 57 subjects at a quarter of their sizes
#: (10-383 items), LLMs of one general ability with 5% outlier subjects.
DEMO = dict(n_llms=600, preset="mmlu", scale=0.25, rank=1, similarity=0.15, outlier_share=0.05, missing=0.02)

#: The demo's folder, recognised by its ``demo.json``.
DEMO_FOLDER = FolderKind("demo folder", "demo.json",
                         ("leaderboard.parquet", "truth", "mtl", "bayes", "report.html", "demo.json"))


def run_demo(out: str | Path = "demo-output", *, seed: int = 2026, n_llms: int | None = None,
             scale: float | None = None, bootstrap: int = 40, bayes: bool = True, draws: int | None = None,
             tune: int | None = None, chains: int = 4, checks: bool = True, check_replicates: int = 20,
             overwrite: bool = True) -> dict:
    """Simulate the demo leaderboard, fit MTL (with bootstrap) and the Bayesian model, write the report.

    Parameters
    ----------
    out
        Folder for the data, the truth, the two fit folders, ``report.html``
        and ``demo.json`` (the settings): a new path, or a demo folder
        written earlier, replaced when ``overwrite`` (the CLI's ``--force``).
        It appears only when the whole demo succeeded.
    seed
        Seed of the simulation, the bootstrap and the sampler.
    n_llms, scale
        Override the demo's size (600 LLMs, MMLU sizes x 0.25).
    bootstrap
        Bootstrap replicates of the MTL fit.
    bayes
        Also fit the Bayesian model (items fixed at the MTL calibration).
    draws, tune, chains
        Sampler settings of the Bayesian fit; by default the fit's own: the
        LLM side integrated out, the loadings sampled until the convergence
        checks pass (:func:`mtlirt.bayes.fit_bayes`).
    checks, check_replicates
        The report's model checks (:mod:`mtlirt.evaluate.checks`) of both fits, with
        this many replicates of the correlation check (the Bayesian fit's also
        run the posterior predictive S-X2 on 50 draws and leave-one-LLM-out on 200).
    overwrite
        Replace an existing demo folder.

    Returns
    -------
    dict
        Paths, the headline lines and timings.
    """
    from .report.html import write_report

    out = Path(out)
    settings = dict(DEMO, seed=seed)
    if n_llms is not None:
        settings["n_llms"] = n_llms
    if scale is not None:
        settings["scale"] = scale
    with folder_output(out, DEMO_FOLDER, overwrite=overwrite) as tmp:
        timings = {}
        t0 = time.perf_counter()
        stage(f"simulating {settings['n_llms']} LLMs on MMLU's 57 subjects (sizes x {settings['scale']})")
        sim = simulate(**settings)
        sim.write(tmp / "leaderboard.parquet")
        sim.write_truth(tmp / "truth")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            data = Responses.read(tmp / "leaderboard.parquet")
        timings["simulate"] = time.perf_counter() - t0

        t1 = time.perf_counter()
        mtl = fit(data, "mtl", bootstrap=bootstrap, seed=seed)
        stage("writing the MTL fit")
        write_fit(mtl, tmp / "mtl")
        timings["mtl"] = time.perf_counter() - t1
        fits = {"MTL": tmp / "mtl"}
        bayes_est = None
        if bayes:
            t2 = time.perf_counter()
            bayes_est = fit(data, "bayes", items="fixed", init=mtl, draws=draws, tune=tune, chains=chains,
                            seed=seed, progress=progress_enabled(),  # nutpie's bar and the domain-score draws
                            log_likelihood=False)  # no loo in the demo: 1.1 GB saved
            stage("writing the Bayesian fit")
            write_fit(bayes_est, tmp / "bayes")
            timings["bayes"] = time.perf_counter() - t2
            fits["Bayes (items fixed)"] = tmp / "bayes"
        t3 = time.perf_counter()
        stage("writing the report")
        report = write_report(fits, tmp / "report.html", responses=data,
                              title="mtlirt demo: a simulated MMLU leaderboard",
                              checks={"MTL": checks, "Bayes (items fixed)": checks},
                              check_replicates=check_replicates)
        timings["report"] = time.perf_counter() - t3
        (tmp / "demo.json").write_text(json.dumps({"settings": settings, "bootstrap": bootstrap, "bayes": bayes,
                                                   "draws": draws, "tune": tune, "chains": chains,
                                                   "versions": package_versions()}, indent=2))
    lines = headline(mtl, bayes_est, sim, data)
    report = out / report.name
    lines.append(f"report: {report}")
    return {"report": report, "headline": lines, "seconds": timings, "out": out}


def headline(mtl, bayes_est, sim, data) -> list[str]:
    """Five lines: top LLMs with intervals, rank, strongest and weakest correlations, agreement with the truth."""
    main = bayes_est if bayes_est is not None else mtl
    top = main.overall_scores(0.9).head(3)
    tops = "; ".join(f"{r.llm} {r.score:.2f} [{r.lower:.2f}, {r.upper:.2f}]" for r in top.itertuples())
    corr = mtl.domain_correlation(0.9).sort_values("estimate")
    hi, lo = corr.iloc[-1], corr.iloc[0]
    truth = sim.overall["score"].loc[list(data.llms)].to_numpy()
    from scipy.stats import spearmanr

    rho_mtl = spearmanr(mtl.point("overall"), truth).statistic
    acc = data.accuracy().mean(axis=1).to_numpy()
    rho_acc = spearmanr(acc, truth).statistic
    lines = [
        f"top LLMs ({'Bayes' if bayes_est is not None else 'MTL'}, overall score, 90% interval): {tops}",
        f"selected rank: {mtl.info.get('rank')} (simulated: {sim.rank}); scores: {mtl.info.get('scores')}",
        f"strongest domain correlation: {hi.domain_a} ~ {hi.domain_b} {hi.estimate:.2f} "
        f"[{hi.lower:.2f}, {hi.upper:.2f}]; "
        f"weakest: {lo.domain_a} ~ {lo.domain_b} {lo.estimate:.2f} [{lo.lower:.2f}, {lo.upper:.2f}]",
        f"ranking vs the simulated truth (Spearman): MTL {rho_mtl:.3f}, macro accuracy {rho_acc:.3f}",
    ]
    if bayes_est is not None:
        d = bayes_est.info.get("diagnostics", {})
        verdict = "converged" if d.get("converged") else "DID NOT CONVERGE"
        lines[-1] += (f"; Bayes {verdict} (max R-hat {d.get('max_rhat', float('nan')):.3f}, "
                      f"{d.get('divergences')} divergences)")
    return lines
