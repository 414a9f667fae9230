"""MTL's structure (each domain's loading on the overall score) on leaderboards of few LLMs.

MTL's reported scores are the rank-one factor model's posterior means given its structure
``lambda_k`` (``fit.json``'s ``structure``). This checks the structure against the truth and against
the Bayesian posterior, and what it does to the scores and their intervals.

Simulated (``--only sim``): at seeds ``--seeds``, MTL with ``--bootstrap`` replicates on

- ``hard``: 30 LLMs x 5 domains of 200 hard items (``simulate(30, [200] * 5,
  difficulty_mean=1.5, domain_shift_sd=1.0)``, true loadings ``sqrt(0.9)``), where the items'
  priors, not the LLMs, set the calibration's scale;
- ``chembench``: 24 LLMs on ChemBench's nine topic sizes (40-1,001 items), the realistic scenario
  (loadings 0.6-0.98, guessing, a skewed population, missing blocks).

Printed per seed: the structure's largest error against the true loadings, how many structures
the fit estimated, and the domain and overall scores' RMSE, 90% coverage and mean width (estimate
and truth standardised per domain over the LLMs, as ``bench_bayes.py few-llms`` checks them); with
``--bayes`` the default Bayesian fit's too, on the next line; with ``--scale`` per domain the mean
and sd of MTL's scores and of the truth over the LLMs that ran it, and their correlation.

Real (``--only real``, ``../shared/data``): ChemBench (24 LLMs) and MMLU-Pro (29 LLMs, 14
categories), whole: MTL with ``--bootstrap`` replicates and the default Bayesian fit, the same
seed; per domain MTL's ``lambda_k`` and the posterior mean of the Bayesian loadings, and both fits'
mean interval widths.

Usage::

    .venv/bin/python benchmarks/bench_structure.py [--only sim|real] [--seeds 0 1 2 3] [--bootstrap 30]
        [--designs hard chembench] [--bayes] [--scale]
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

import numpy as np
from bench_bayes import FEW_LLMS_SIZES, _fit, _interval_check, _standardised
from bench_collapsed import REAL_SETS

from mtlirt.data.responses import Responses
from mtlirt.data.simulate import simulate
from mtlirt.data.validate import DataWarning

DESIGNS = {
    "hard": dict(n_llms=30, domain_sizes=[200] * 5, difficulty_mean=1.5, domain_shift_sd=1.0),
    "chembench": dict(n_llms=24, domain_sizes=FEW_LLMS_SIZES, scenario="realistic"),
}


def _sim_row(design, seed, est, truth, lam_error, structures, seconds) -> None:
    r = _interval_check(est, truth)
    dom, ov = r["theta"], r["overall"]
    print(f"| {design} | {seed} | {lam_error} | {structures} | "
          f"{dom['rmse']:.3f} / {ov['rmse']:.3f} | {dom['coverage90']:.3f} / {ov['coverage90']:.3f} | "
          f"{dom['mean_width90']:.3f} / {ov['mean_width90']:.3f} | {seconds:.1f} |", flush=True)


def _scale_lines(est, theta, resp) -> None:
    """Per domain, over the LLMs that ran it: the mean and sd of MTL's domain scores and of the truth
    (standardised over every LLM), and their correlation."""
    score = est.domain_scores(0.9)["score"].to_numpy().reshape(theta.shape)
    truth = _standardised(theta)
    ran = (np.ones(theta.shape, dtype=bool) if resp.mask is None
           else np.column_stack([resp.mask[:, s].any(axis=1) for s in resp.domain_slices]))
    for k, name in enumerate(resp.domains):
        m, t = score[ran[:, k], k], truth[ran[:, k], k]
        print(f"    {name}: {ran[:, k].sum()} LLMs, scores mean {m.mean():.2f} sd {m.std():.2f}, truth mean "
              f"{t.mean():.2f} sd {t.std():.2f}, correlation {np.corrcoef(m, t)[0, 1]:.2f}", flush=True)


def simulated(design: str, seed: int, bootstrap: int, bayes: bool = False, scale: bool = False) -> None:
    sim = simulate(seed=seed, **DESIGNS[design])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataWarning)
        resp = Responses.from_frame(sim.responses)
    theta = sim.domain_scores.loc[resp.llms, resp.domains].to_numpy()
    overall = _standardised(sim.overall.loc[resp.llms].to_numpy()[:, 0])
    truth = {"theta": theta, "overall": overall}
    t0 = time.perf_counter()
    est = _fit(resp, method="mtl", bootstrap=bootstrap, seed=seed)
    s = est.info["structure"]
    true = sim.loadings["score"].loc[resp.domains].to_numpy()
    _sim_row(design, seed, est, truth, f"{np.abs(np.asarray(s['lambda']) - true).max():.3f}", s.get("rounds", 1),
             time.perf_counter() - t0)
    if scale:
        _scale_lines(est, theta, resp)
    if bayes:
        t0 = time.perf_counter()
        est = _fit(resp, method="bayes", seed=seed, progress=False, log_likelihood=False)
        post = est.posterior["loadings"].mean(("chain", "draw")).to_numpy()[:, 0]
        _sim_row(f"{design}, Bayes", seed, est, truth, f"{np.abs(post - true).max():.3f}", "", time.perf_counter() - t0)


def real(name: str, root: str, seed: int, bootstrap: int) -> None:
    path, kw = REAL_SETS[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataWarning)
        resp = Responses.read(os.path.join(root, "data", path), **kw)
    mtl = _fit(resp, method="mtl", bootstrap=bootstrap, seed=seed)
    bayes = _fit(resp, method="bayes", seed=seed, progress=False, log_likelihood=False)
    lam = np.asarray(mtl.info["structure"]["lambda"])
    post = bayes.posterior["loadings"].mean(("chain", "draw")).to_numpy()[:, 0]

    def widths(est):
        o, d = est.overall_scores(0.9), est.domain_scores(0.9)
        return (o["upper"] - o["lower"]).mean(), (d["upper"] - d["lower"]).mean()

    (mo, md), (bo, bd) = widths(mtl), widths(bayes)
    print(f"| {name} | {' '.join(f'{x:.2f}' for x in lam)} | {' '.join(f'{x:.2f}' for x in post)} | "
          f"{np.abs(lam - post).max():.3f} | {mtl.info['structure'].get('rounds', 1)} | "
          f"{mo:.3f} / {bo:.3f} | {md:.3f} / {bd:.3f} |", flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", choices=["sim", "real"], default=None)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3])
    ap.add_argument("--bootstrap", type=int, default=30, help="MTL's bootstrap replicates")
    ap.add_argument("--designs", nargs="+", choices=list(DESIGNS), default=list(DESIGNS))
    ap.add_argument("--shared", default=None, help="the shared folder holding data/ (default ../shared)")
    ap.add_argument("--bayes", action="store_true", help="sim: the default Bayesian fit too")
    ap.add_argument("--scale", action="store_true",
                    help="sim: per domain, MTL's scores and the truth over the LLMs that ran it")
    args = ap.parse_args(argv)
    if args.only in (None, "sim"):
        print("| design | seed | max abs error of lambda | structures | RMSE, domain / overall | "
              "coverage 90%, domain / overall | mean width, domain / overall | MTL s |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- |")
        for design in args.designs:
            for seed in args.seeds:
                simulated(design, seed, args.bootstrap, args.bayes, args.scale)
    if args.only in (None, "real"):
        root = args.shared or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared")
        print("| leaderboard | MTL lambda | Bayes loadings (posterior mean) | max abs difference | structures | "
              "mean width overall, MTL / Bayes | mean width domain, MTL / Bayes |")
        print("| --- | --- | --- | --- | --- | --- | --- |")
        for name in ("chembench", "mmlu_pro"):
            real(name, root, args.seeds[0], args.bootstrap)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
