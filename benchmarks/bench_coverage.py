"""Coverage of the bootstrap intervals of MTL (and STL) against a known truth.

For each scenario and seed, one leaderboard from
``simulate(N, preset="mmlu", scale=scale, scenario=scenario, similarity=h, seed=seed)``
is fitted by ``mtlirt.fitting.fit(method, bootstrap=B)`` and its 90%
intervals are compared with the truth, standardised over the LLMs (every
domain score and the first overall trait; the estimates' scales are already
standardised over the LLMs, and their signs agree with the truth's by
construction: positive discriminations, loadings summing positive).

Columns
-------
``cov_domain``, ``width_domain``
    Share of (LLM, domain) cells whose true score lies in the interval of
    ``Estimate.domain_scores``; mean width.
``cov_small``
    The same over the smallest third of the domains (by items).
``cov_predicted``, ``n_predicted``
    Over the cells without responses (``predicted``), and their number.
``cov_overall``, ``width_overall``
    Share of LLMs whose true overall score lies in the interval of
    ``Estimate.overall_scores``; mean width.
``cov_rank``
    Share of LLMs whose true rank (by the true overall score) lies in
    ``[rank_lower, rank_upper]``.
``cov_overall_q1``, ``cov_overall_lump``, ``bias_overall_q1``
    Overall coverage among the lowest fifth of the LLMs by true overall
    score and among the LLMs of the near-chance lump (``simulate``'s
    ``chance_cluster``; NaN when there is none), and the mean error of the
    overall score in the lowest fifth.
``rmse_domain``
    Mean over domains of the RMSE of the domain scores, estimate and truth
    both standardised per domain (``bench_core._rmse``).
``rmse_overall``
    RMSE of the overall score against the standardised truth.
``floor``, ``floors``
    Mean guessing floor of the fit's items (``--guessing``: ``auto``, the
    package's default, a floor per domain where the data call for one;
    ``estimate``, one in every domain; ``none``; or fixed), and the number
    of domains with a floor.
``seconds``
    Wall time of the fit and its bootstrap.

``--methods bayes`` fits the Bayesian model with MTL's items fixed
(``fit(..., "bayes", items="fixed")``: the route, sampler and run length the fit
chooses, unless ``--bayes-draws``/``--bayes-chains``); its intervals are credible intervals.

``--decompose`` (no bootstrap, seconds per case) asks *why* an overall-score
interval misses: for the ideal design, each departure of the realistic
scenario alone, guessing with the skewed population, and the whole realistic
scenario, it fits MTL once and prints the RMSE of the overall score against
the standardised truth, the error's sd that the error bootstrap assumes
(``predsd``: the approximate posterior sd of the shared trait given all
domains, ``bootstrap.overall_spread``, on the overall score's scale), the
coverage of ``score +- 1.645 predsd`` overall, in the lowest fifth by the
true overall and in the near-chance lump, and the mean error (bias) of the
lowest and highest fifths. A departure whose RMSE exceeds ``predsd`` (an
error the fitted model's world cannot produce) is the cause.

Usage::

    .venv/bin/python benchmarks/bench_coverage.py [--scenarios realistic,ideal] [--seeds 0]
        [--n 1000] [--scale 0.1] [--similarity 0.1] [--bootstrap 100] [--methods mtl,stl]
        [--n-jobs 2] [--guessing auto|estimate|none|C] [--out runs.csv] [--bayes-draws D] [--bayes-chains C]
    .venv/bin/python benchmarks/bench_coverage.py --decompose [--n 1000] [--seeds 7] [--guessing auto|estimate|none|C]
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_core import _rmse  # RMSE after standardising estimate and truth per domain

from mtlirt import ConvergenceWarning, fit
from mtlirt.data.responses import Responses
from mtlirt.data.simulate import simulate


def _std(x):
    return (x - x.mean(0)) / x.std(0)


def run(scenario, seed, *, n, scale, similarity, bootstrap, methods, n_jobs, guessing=None, interval=0.9,
        bayes_options=None):
    sim = simulate(n, preset="mmlu", scale=scale, scenario=scenario, similarity=similarity, seed=seed)
    resp = Responses.from_frame(sim.responses)
    truth = _std(sim.domain_scores.to_numpy())
    eta = _std(sim.overall["score"].to_numpy())
    true_rank = pd.Series(-eta).rank(method="first").to_numpy()
    sizes = np.array(list(sim.settings["domain_sizes"].values()))
    small = sizes <= np.quantile(sizes, 1 / 3)
    q1 = eta <= np.quantile(eta, 0.2)
    lump = sim.llms["chance_cluster"].to_numpy()
    rows = []
    for method in methods:
        t0 = time.perf_counter()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ConvergenceWarning)
            if method == "bayes":  # calibrate, then score: MTL's items fixed, the fit's own route
                est = fit(resp, "bayes", items="fixed", seed=seed, progress=False, **(bayes_options or {}))
            else:
                est = fit(resp, method, bootstrap=bootstrap, seed=seed, n_jobs=n_jobs, guessing=guessing)
        secs = time.perf_counter() - t0
        ds = est.domain_scores(interval)
        shape = truth.shape
        lo, hi, score = (ds[c].to_numpy().reshape(shape) for c in ("lower", "upper", "score"))
        pred = ds["predicted"].to_numpy().reshape(shape)
        inside = (truth >= lo) & (truth <= hi)
        ov = est.overall_scores(interval).set_index("llm").loc[sim.llm_names]
        ov_in = (eta >= ov["lower"].to_numpy()) & (eta <= ov["upper"].to_numpy())
        rank_in = (true_rank >= ov["rank_lower"].to_numpy()) & (true_rank <= ov["rank_upper"].to_numpy())
        rows.append({
            "scenario": scenario, "seed": seed, "method": method,
            "cov_domain": inside.mean(), "cov_small": inside[:, small].mean(),
            "cov_predicted": inside[pred].mean() if pred.any() else np.nan, "n_predicted": int(pred.sum()),
            "width_domain": (hi - lo).mean(),
            "cov_overall": ov_in.mean(), "width_overall": (ov["upper"] - ov["lower"]).mean(),
            "cov_rank": rank_in.mean(),
            "cov_overall_q1": ov_in[q1].mean(),
            "cov_overall_lump": ov_in[lump].mean() if lump.any() else np.nan,
            "bias_overall_q1": float((ov["score"].to_numpy() - eta)[q1].mean()),
            "rmse_domain": _rmse(score, sim.domain_scores.to_numpy()).mean(),
            "rmse_overall": float(np.sqrt(((ov["score"].to_numpy() - eta) ** 2).mean())),
            "C": est.info.get("C"), "rank_sel": est.info.get("rank"),
            "floor": float(est.point("guessing").mean()) if "guessing" in est.posterior else 0.0,
            "floors": int(np.sum(np.bincount(np.asarray(est.item_domain), est.point("guessing") > 0) > 0))
            if "guessing" in est.posterior else 0,
            "converged": (not caught) if method != "bayes" else bool(est.info["diagnostics"].get("converged")),
            "seconds": secs,
        })
        print(pd.DataFrame(rows[-1:]).to_string(index=False, float_format=lambda v: f"{v:.3f}"), flush=True)
    return rows


#: The realistic scenario's departures one at a time (``simulate``'s arguments; the rest stay ideal).
DEPARTURES = {
    "ideal": {},
    "loadings": dict(loading_range=(0.6, 0.98)),
    "population": dict(skew=4.0, chance_cluster=0.05),
    "guessing": dict(guessing=0.2, guessing_sd=0.05, mc_share=0.75),
    "flawed": dict(flawed_share=0.04),
    "specialists": dict(specialist_share=0.03),
    "missing": dict(block_missing=0.4, missing=0.05),
    "population+guessing": dict(skew=4.0, chance_cluster=0.05, guessing=0.2, guessing_sd=0.05, mc_share=0.75),
    "realistic": None,
}


def decompose(seed, *, n, scale, similarity, guessing=None, cases=None):
    """Point error of MTL's overall score against the error the bootstrap's world assumes, per departure."""
    from mtlirt.estimators.error_world import error_world
    from mtlirt.estimators.point_methods import _POINT, _cell_counts
    from mtlirt.results.finish import _reported

    rows = []
    for name in cases or DEPARTURES:
        dep = DEPARTURES[name]
        kw = dict(scenario="realistic") if dep is None else dep
        sim = simulate(n, preset="mmlu", scale=scale, similarity=similarity, seed=seed, **kw)
        r = Responses.from_frame(sim.responses)
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            res = _POINT["mtl"](r, model="2pl", guessing=guessing, rank=None,
                                gamma=None, seed=seed)
        secs = time.perf_counter() - t0
        empty = _cell_counts(r) == 0
        arr = _reported(res, "mtl", "default", empty, r.item_domain)
        world = error_world(r, arr, method="mtl", pop=arr["pop"], empty=empty)  # fit's error bootstrap's world
        eta = world["eta"]
        pred_sd = np.sqrt(world["eta_var"][:, 0]) / eta[:, 0].std()
        true = _std(sim.overall["score"].to_numpy())
        err = arr["overall"] - true
        inside = np.abs(err) <= 1.645 * pred_sd
        q1, q5 = true <= np.quantile(true, 0.2), true >= np.quantile(true, 0.8)
        lump = sim.llms["chance_cluster"].to_numpy()
        rows.append({"case": name, "rank": res.rank, "C": res.C, "rmse": float(np.sqrt((err**2).mean())),
                     "predsd": float(np.sqrt((pred_sd**2).mean())), "cov": inside.mean(),
                     "cov_q1": inside[q1].mean(), "cov_lump": inside[lump].mean() if lump.any() else np.nan,
                     "bias_q1": float(err[q1].mean()), "bias_q5": float(err[q5].mean()),
                     "floor": float(np.mean(arr["c"])), "converged": bool(res.converged), "seconds": secs})
        print(pd.DataFrame(rows[-1:]).to_string(index=False, float_format=lambda v: f"{v:.3f}"), flush=True)
    return pd.DataFrame(rows)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scenarios", default="realistic,ideal")
    p.add_argument("--seeds", default="0")
    p.add_argument("--n", type=int, default=1000)
    p.add_argument("--scale", type=float, default=0.1)
    p.add_argument("--similarity", type=float, default=0.1)
    p.add_argument("--bootstrap", type=int, default=100)
    p.add_argument("--methods", default="mtl,stl")
    p.add_argument("--n-jobs", type=int, default=2)
    p.add_argument("--guessing", type=_floor, default="auto",
                   help="guessing of the fits: auto (default: a floor per domain where the data call for it), "
                   "estimate (one in every domain), none, or a fixed floor")
    p.add_argument("--out", default=None, help="also write the rows to this CSV")
    p.add_argument("--bayes-draws", type=int, default=None,
                   help="draws per chain of --methods bayes (default: the fit's)")
    p.add_argument("--bayes-chains", type=int, default=None, help="chains of --methods bayes (default: the fit's)")
    p.add_argument("--decompose", action="store_true",
                   help="point error of the overall score per departure of the realistic scenario (no bootstrap)")
    p.add_argument("--cases", default=None, help="with --decompose: comma-separated cases (default all)")
    args = p.parse_args(argv)
    if args.decompose:
        table = pd.concat([decompose(int(s), n=args.n, scale=args.scale, similarity=args.similarity,
                                     guessing=args.guessing,
                                     cases=args.cases.split(",") if args.cases else None).assign(seed=int(s))
                           for s in args.seeds.split(",")])
        if args.out:
            table.to_csv(args.out, index=False)
        print()
        print(_markdown(table))
        return
    bayes_options = {k: v for k, v in (("draws", args.bayes_draws), ("chains", args.bayes_chains)) if v}
    rows = []
    for scenario in args.scenarios.split(","):
        for seed in (int(s) for s in args.seeds.split(",")):
            rows += run(scenario, seed, n=args.n, scale=args.scale, similarity=args.similarity,
                        bootstrap=args.bootstrap, methods=args.methods.split(","), n_jobs=args.n_jobs,
                        guessing=args.guessing, bayes_options=bayes_options)
    table = pd.DataFrame(rows)
    if args.out:
        table.to_csv(args.out, index=False)
    cols = ["scenario", "seed", "method", "cov_domain", "cov_small", "cov_predicted", "width_domain",
            "cov_overall", "width_overall", "cov_rank", "cov_overall_q1", "cov_overall_lump", "rmse_domain",
            "rmse_overall", "C", "floor", "floors", "converged", "seconds"]
    print()
    print(_markdown(table[cols]))


def _floor(text):
    if text in ("estimate", "auto"):
        return text
    return None if text == "none" else float(text)


def _markdown(df: pd.DataFrame) -> str:
    def cell(v):
        return f"{v:.3f}" if isinstance(v, float) else str(v)

    lines = ["| " + " | ".join(df.columns) + " |", "|" + " --- |" * df.shape[1]]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
