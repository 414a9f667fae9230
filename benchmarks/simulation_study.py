"""Simulation study (docs/simulation_study.md): STL, MTL, pooled and accuracy against the truth.

Each design cell ``(N, scale, r, h, eps)`` and seed is one leaderboard from
``mtlirt.data.simulate.simulate(N, preset="mmlu", scale=scale, rank=r,
similarity=h, outlier_share=eps, seed=seed)``; every competitor is fitted to
it by ``mtlirt.fitting.fit`` and compared with the truth.

Grids
-----
reduced (default; about 10 minutes on two shared cores)
    N 500; scale 0.1 (MMLU's 57 subjects, 10-153 items, 1,405 in all);
    r 1, 2; h 0.1, 0.4; eps 0, 0.2; seeds 0, 1.  Bootstrap coverage on the
    first seed (8 cells).
``--full``
    N 500, 1000, 2000, 4272; scale 0.1, 1; r 1, 2; h 0, 0.1, 0.4, 0.8;
    eps 0, 0.1, 0.2; seeds 0, 1, 2 (4,608 fits; hours on a laptop).
    Bootstrap coverage on the first seed of the cells with N <= 1000 and
    scale 0.1 only.

Metrics (per cell, seed and method)
-----------------------------------
``rmse_*``
    RMSE over LLMs of the domain scores, estimate and truth both
    standardised per domain over the LLMs (``bench_core._rmse``; for
    ``accuracy`` its standardised proportions correct), then the mean over
    domains (``rmse_mean``), the maximum (``rmse_max``), the mean by domain
    size tercile (``rmse_small``: size <= 1/3 quantile of the sizes,
    ``rmse_large``: size > 2/3 quantile, ``rmse_medium``: the rest), and,
    when eps > 0, over the inlier (``rmse_in``) and outlier (``rmse_out``)
    domains.
``angle``
    Largest principal angle (degrees) between the column span of the true
    overall traits (N x r) and the estimated one: MTL's shared traits (its
    first r columns; when it selected fewer than r, 90 degrees), for the
    others the first r principal components of their domain scores.  Both
    sides are centred; the angle is ``arcsin`` of the spectral norm of the
    difference of the two orthogonal projectors.
``spearman``
    Spearman correlation of the overall score (``Estimate.point("overall")``)
    with the true first overall trait.
``rank``
    Rank selected by MTL (blank for the others).
``coverage``, ``coverage_small``, ``coverage_out``, ``width``
    Share of (LLM, domain) pairs whose standardised true score lies in the
    90% bootstrap interval (``Estimate.domain_scores(0.9)``; ``--bootstrap``
    replicates, parametric for the IRT methods, items resampled for
    accuracy), overall, in the small-domain tercile and in outlier domains;
    mean interval width.  For ``accuracy`` the interval is one of the
    standardised proportion correct, a monotone but non-linear function of
    the trait: its coverage of the trait is not expected to be nominal.
``seconds``
    Wall time of the point fit (``Estimate.info["seconds"]["fit"]``).

The summary averages over seeds; the MTL/STL table divides the seed-mean
RMSE of MTL by that of STL, and gives the worst per-domain ratio and the share
of domains (pooled over seeds) where MTL's RMSE exceeds STL's.

Usage::

    .venv/bin/python benchmarks/simulation_study.py [--full] [--out DIR]
        [--seeds 0,1] [--no-coverage] [--bootstrap 20] [--n-jobs 2]
        [--methods stl,mtl,pooled,accuracy] [--bayes] [--scenario ideal|realistic]
        [--n 500] [--scale 0.1] [--rank 1,2] [--h 0.1,0.4] [--eps 0,0.2]

(``--n`` ... ``--eps`` replace the levels of a factor of the chosen grid.)

Writes ``runs.csv`` (one row per cell, seed and method), ``summary.csv``
and ``mtl_vs_stl.csv`` (means over seeds) to ``--out`` (default: a new
temporary folder) and prints the two tables in markdown.
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import math
import os
import platform
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_core import _rmse  # RMSE after standardising estimate and truth per domain

from mtlirt.data.responses import Responses
from mtlirt.data.simulate import simulate
from mtlirt.fitting import fit

REDUCED = {"n": [500], "scale": [0.1], "rank": [1, 2], "h": [0.1, 0.4], "eps": [0.0, 0.2], "seeds": [0, 1]}
FULL = {"n": [500, 1000, 2000, 4272], "scale": [0.1, 1.0], "rank": [1, 2], "h": [0.0, 0.1, 0.4, 0.8],
        "eps": [0.0, 0.1, 0.2], "seeds": [0, 1, 2]}
METHODS = ("stl", "mtl", "pooled", "accuracy")


# --------------------------------------------------------------------------- metrics
def _standardise(x):
    return (x - x.mean(0)) / x.std(0)


def _basis(x, r):
    """Orthonormal basis of the first ``r`` principal directions (over LLMs) of the columns of ``x``."""
    x = np.asarray(x, dtype=np.float64)
    x = x - x.mean(0)
    u = np.linalg.svd(x, full_matrices=False)[0]
    return u[:, :r]


def subspace_angle(est, truth) -> float:
    """Largest principal angle (degrees) between the centred column spans of ``est`` and ``truth``.

    ``arcsin ||P_est - P_truth||_2``: the largest principal angle when the
    dimensions agree, 90 degrees when they differ.
    """
    q1 = _basis(est, est.shape[1])
    q2 = _basis(truth, truth.shape[1])
    if q1.shape[1] != q2.shape[1]:
        return 90.0
    # ||P1 - P2||_2 = sin(largest principal angle) = ||(I - P2) Q1||_2
    resid = q1 - q2 @ (q2.T @ q1)
    s = np.linalg.norm(resid, 2)
    return float(np.degrees(np.arcsin(min(1.0, s))))


def _terciles(sizes):
    q1, q2 = np.quantile(sizes, [1 / 3, 2 / 3])
    small = sizes <= q1
    large = sizes > q2
    return small, ~small & ~large, large


def metrics(est, sim, method) -> dict:
    truth = sim.domain_scores.to_numpy()
    sizes = np.array(list(sim.settings["domain_sizes"].values()))
    small, medium, large = _terciles(sizes)
    out = np.isin(sim.domain_names, sim.outlier_domains)
    theta = est.point("theta")
    rm = _rmse(theta, truth)
    r = sim.rank
    eta = sim.overall.to_numpy()
    res = {
        "rmse_mean": rm.mean(), "rmse_max": rm.max(),
        "rmse_small": rm[small].mean(), "rmse_medium": rm[medium].mean(), "rmse_large": rm[large].mean(),
        "rmse_in": rm[~out].mean() if out.any() else np.nan,
        "rmse_out": rm[out].mean() if out.any() else np.nan,
    }
    if method == "mtl" or "eta" in est.posterior:
        shared = est.point("eta")
        res["rank"] = shared.shape[1]
        res["angle"] = subspace_angle(shared[:, :r], eta) if shared.shape[1] >= r else 90.0
    else:
        res["rank"] = np.nan
        res["angle"] = subspace_angle(_basis(theta, r), eta)
    res["spearman"] = spearmanr(est.point("overall"), eta[:, 0])[0]
    res["seconds"] = est.info.get("seconds", {}).get("fit", est.info.get("seconds", {}).get("bayes", np.nan))
    res["C"] = est.info.get("C", np.nan)  # MTL's shrinkage constant
    res["converged"] = bool(est.info.get("diagnostics", {}).get("converged", True))
    res["per_domain_rmse"] = rm  # for the MTL/STL comparison; dropped before writing
    if est.uncertainty_source is not None:
        ds = est.domain_scores(0.9)
        shape = theta.shape
        lo, hi = ds["lower"].to_numpy().reshape(shape), ds["upper"].to_numpy().reshape(shape)
        t = _standardise(truth)
        inside = (t >= lo) & (t <= hi)
        res["coverage"] = inside.mean()
        res["coverage_small"] = inside[:, small].mean()
        res["coverage_out"] = inside[:, out].mean() if out.any() else np.nan
        res["width"] = (hi - lo).mean()
        res["boot_seconds"] = est.info.get("seconds", {}).get("bootstrap", np.nan)
    return res


# --------------------------------------------------------------------------- driver
def run_cell(cell, seed, methods, *, bootstrap, n_jobs, bayes_options=None, scenario="ideal"):
    n, scale, rank, h, eps = cell
    sim = simulate(n, preset="mmlu", scale=scale, rank=rank, similarity=h, outlier_share=eps, seed=seed,
                   scenario=scenario)
    resp = Responses.from_frame(sim.responses)
    rows = []
    for method in methods:
        t0 = time.perf_counter()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if method == "bayes":
                est = fit(resp, "bayes", seed=seed, **(bayes_options or {}))
            else:
                est = fit(resp, method, seed=seed, bootstrap=bootstrap if bootstrap else 0, n_jobs=n_jobs)
        m = metrics(est, sim, method)
        m["n_warnings"] = len(caught)
        m["total_seconds"] = time.perf_counter() - t0
        rows.append({"scenario": scenario, "n": n, "scale": scale, "rank_true": rank, "h": h, "eps": eps,
                     "seed": seed, "method": method, **m})
    return rows


def _fmt(v, nd=3):
    if isinstance(v, (bool, np.bool_)):
        return "yes" if v else "no"
    if isinstance(v, (int, np.integer)):
        return str(v)
    if isinstance(v, float) and math.isnan(v):
        return ""
    if isinstance(v, float):
        return f"{v:.{nd}f}"
    return str(v)


def to_markdown(df: pd.DataFrame, digits: dict | None = None) -> str:
    digits = digits or {}
    cols = list(df.columns)
    lines = ["| " + " | ".join(cols) + " |", "| " + " | ".join("---" for _ in cols) + " |"]
    for _, row in df.iterrows():
        lines.append("| " + " | ".join(_fmt(row[c], digits.get(c, 3)) for c in cols) + " |")
    return "\n".join(lines)


def summarise(runs: pd.DataFrame):
    keys = ["n", "scale", "rank_true", "h", "eps", "method"]
    value_cols = [c for c in ["rmse_mean", "rmse_max", "rmse_small", "rmse_medium", "rmse_large", "rmse_in",
                              "rmse_out", "angle", "spearman", "rank", "coverage", "coverage_small",
                              "coverage_out", "width", "seconds"] if c in runs]
    g = runs.groupby(keys, sort=False)
    summary = g[value_cols].mean().reset_index()
    summary.insert(len(keys), "seeds", g.size().to_numpy())
    summary["all_converged"] = g["converged"].all().to_numpy()
    order = {m: i for i, m in enumerate(["mtl", "stl", "pooled", "accuracy", "bayes"])}
    summary = summary.sort_values(keys[:-1] + ["method"], key=lambda s: s.map(order) if s.name == "method" else s,
                                  kind="stable").reset_index(drop=True)
    return summary


def mtl_vs_stl(runs: pd.DataFrame, per_domain: dict) -> pd.DataFrame:
    cells = runs[["n", "scale", "rank_true", "h", "eps"]].drop_duplicates().itertuples(index=False)
    rows = []
    for cell in cells:
        sel = (runs[["n", "scale", "rank_true", "h", "eps"]] == pd.Series(cell._asdict())).all(axis=1)
        m = runs[sel & (runs.method == "mtl")].set_index("seed")
        s = runs[sel & (runs.method == "stl")].set_index("seed")
        seeds = m.index.intersection(s.index)
        if not len(seeds):
            continue
        ratios = np.concatenate([per_domain[(*cell, sd, "mtl")] / per_domain[(*cell, sd, "stl")] for sd in seeds])
        row = dict(cell._asdict())
        for c in ["rmse_mean", "rmse_small", "rmse_medium", "rmse_large", "rmse_max", "rmse_in", "rmse_out"]:
            row["ratio_" + c.removeprefix("rmse_")] = m.loc[seeds, c].mean() / s.loc[seeds, c].mean()
        row["worst_domain_ratio"] = ratios.max()
        row["share_domains_worse"] = (ratios > 1).mean()
        row["mtl_rank"] = "/".join(str(int(v)) for v in m.loc[seeds, "rank"])
        row["mtl_C"] = "/".join(f"{v:g}" for v in m.loc[seeds, "C"])
        rows.append(row)
    return pd.DataFrame(rows)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--full", action="store_true", help="the full grid of the simulation study (hours)")
    ap.add_argument("--out", type=Path, default=None, help="folder for the CSV files (default: a new temp folder)")
    ap.add_argument("--seeds", default=None, help="comma-separated seeds (default: 0,1 reduced, 0,1,2 full)")
    for name, kind in (("n", int), ("scale", float), ("rank", int), ("h", float), ("eps", float)):
        ap.add_argument(f"--{name}", default=None, type=lambda v, kind=kind: [kind(x) for x in v.split(",")],
                        help=f"comma-separated levels of {name}, replacing the grid's")
    ap.add_argument("--coverage", action=argparse.BooleanOptionalAction, default=True,
                    help="bootstrap intervals on the first seed of a subset of cells (default: on)")
    ap.add_argument("--bootstrap", type=int, default=20, help="replicates for the coverage cells (default 20)")
    ap.add_argument("--n-jobs", type=int, default=None, help="bootstrap worker processes (default: all cores)")
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--bayes", action="store_true", help="also the Bayesian model (slow; off by default)")
    ap.add_argument("--bayes-draws", type=int, default=500)
    ap.add_argument("--bayes-tune", type=int, default=500)
    ap.add_argument("--bayes-chains", type=int, default=2)
    ap.add_argument("--bayes-items", default="fixed", choices=["fixed", "joint"])
    ap.add_argument("--scenario", default="ideal", choices=["ideal", "realistic"],
                    help="simulate's scenario: the model itself (ideal) or its realistic departures")
    args = ap.parse_args(argv)

    grid = dict(FULL if args.full else REDUCED)
    if args.seeds:
        grid["seeds"] = [int(s) for s in args.seeds.split(",")]
    for name in ("n", "scale", "rank", "h", "eps"):
        if getattr(args, name) is not None:
            grid[name] = getattr(args, name)
    methods = [m for m in args.methods.split(",") if m]
    if args.bayes:
        methods.append("bayes")
    bayes_options = {"draws": args.bayes_draws, "tune": args.bayes_tune, "chains": args.bayes_chains,
                     "items": args.bayes_items, "progress": False}
    out = args.out or Path(tempfile.mkdtemp(prefix="mtlirt-simstudy-"))
    out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("MTLIRT_PROGRESS", "0")

    def coverage_cell(cell, seed):
        if not args.coverage or seed != grid["seeds"][0]:
            return False
        n, scale = cell[0], cell[1]
        return not args.full or (n <= 1000 and scale == 0.1)

    cells = list(itertools.product(grid["n"], grid["scale"], grid["rank"], grid["h"], grid["eps"]))
    print(f"# mtlirt simulation study ({'full' if args.full else 'reduced'} grid, {args.scenario} scenario): "
          f"{len(cells)} cells x "
          f"{len(grid['seeds'])} seeds x {len(methods)} methods; {datetime.datetime.now():%Y-%m-%d %H:%M}, "
          f"{platform.node()} ({os.cpu_count()} cores), python {platform.python_version()}", flush=True)
    t_start = time.perf_counter()
    rows, per_domain = [], {}
    for cell in cells:
        for seed in grid["seeds"]:
            boot = args.bootstrap if coverage_cell(cell, seed) else 0
            t0 = time.perf_counter()
            res = run_cell(cell, seed, methods, bootstrap=boot, n_jobs=args.n_jobs, bayes_options=bayes_options,
                           scenario=args.scenario)
            for r in res:
                per_domain[(*cell, seed, r["method"])] = r.pop("per_domain_rmse")
            rows.extend(res)
            brief = ", ".join(f"{r['method']} {r['rmse_mean']:.3f}" for r in res)
            print(f"  N={cell[0]} scale={cell[1]} r={cell[2]} h={cell[3]} eps={cell[4]} seed={seed}"
                  f"{' +bootstrap ' + str(boot) if boot else ''}: mean RMSE {brief} "
                  f"({time.perf_counter() - t0:.0f} s)", flush=True)
            pd.DataFrame(rows).to_csv(out / "runs.csv", index=False)  # keep partial results
    runs = pd.DataFrame(rows)
    summary = summarise(runs)
    ratios = mtl_vs_stl(runs, per_domain)
    summary.to_csv(out / "summary.csv", index=False)
    ratios.to_csv(out / "mtl_vs_stl.csv", index=False)
    total = time.perf_counter() - t_start

    show = summary.rename(columns={"rank_true": "r", "rank": "rank_sel"})
    print("\n## Summary (means over seeds; coverage only where bootstrapped)\n")
    print(to_markdown(show, {"n": 0, "scale": 1, "h": 1, "eps": 1, "angle": 1, "rank_sel": 1, "seconds": 2}))
    print("\n## MTL / STL RMSE ratios\n")
    if len(ratios):
        print(to_markdown(ratios.rename(columns={"rank_true": "r"}),
                          {"n": 0, "scale": 1, "h": 1, "eps": 1, "share_domains_worse": 2}))
    else:
        print("(needs both mtl and stl among the methods)")
    print(f"\nfiles: {out}/runs.csv, summary.csv, mtl_vs_stl.csv; total {total:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
