"""The seed paper's simulation design: its estimator against the package's methods.

Each replication ``r`` at heterogeneity ``h`` is
``mtlirt.simulate.simulate_paper(h, seed=seed + r)`` (100 LLMs, 18 domains of
50-100 items; the same seed at every ``h``, so the designs are paired over
``h`` as in the paper).  Every method is fitted by ``mtlirt.fitting.fit``:

``paper``, ``paper-global``, ``paper-local``
    ``fit(data, "mtl", variant=...)`` (:mod:`mtlirt.estimators.paper`; ``paper`` tunes
    C by its 5-fold cross-validation over the paper's 14-value grid);
``mtl``
    ``fit(data, "mtl")``, the package's default MTL at the commit run;
``stl``, ``pooled``, ``accuracy``
    the package's baselines.

Metrics, against the truth of the simulation (as in the paper's code):

``sine``
    ``sin angle`` between the estimated overall score (``Estimate.point("overall")``;
    for ``stl``, which has none, the sine centre of its domain scores, like
    the paper's local baseline) and the true general trait, both centred.
``domain``
    ``||theta^_t - theta_t|| / sqrt(N)`` with each estimated domain score
    centred and scaled to variance 1 (the paper's scale; the truth already
    is), averaged over the 18 domains.
``spearman``, ``kendall``
    Rank correlations (Kendall's tau-b) of the overall score with the truth.
``seconds``
    Wall time of the fit.

Usage::

    .venv/bin/python benchmarks/bench_paper.py [--reps 20] [--h 0,0.1,0.2,0.3,0.4,0.5]
        [--seed 0] [--jobs 2] [--methods paper,mtl,stl,pooled,accuracy,paper-global,paper-local]
        [--csv runs.csv] [--summarise runs.csv]
    .venv/bin/python benchmarks/bench_paper.py --optimizers [--seed 1] [--C 0.01,0.5]

Prints one markdown table (mean and standard error over replications) per metric.
"""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import kendalltau, spearmanr

METHODS = ("paper", "mtl", "stl", "pooled", "accuracy", "paper-global", "paper-local")


def _sine(x, y) -> float:
    x = x - x.mean()
    y = y - y.mean()
    c = float(x @ y) / (np.linalg.norm(x) * np.linalg.norm(y))
    return math.sqrt(max(0.0, 1.0 - min(1.0, c * c)))


def one(h: float, rep: int, seed: int, methods) -> list[dict]:
    """Simulate replication ``rep`` at ``h`` and score every method on it."""
    from mtlirt.estimators.paper import sine_centre
    from mtlirt.fitting import fit
    from mtlirt.io.responses import Responses
    from mtlirt.simulate import simulate_paper

    sim = simulate_paper(h, seed=seed + rep)
    data = Responses.from_frame(sim.responses)
    truth = sim.domain_scores.loc[data.llms, data.domains].to_numpy()
    g_true = sim.overall.loc[data.llms, "score"].to_numpy()
    N = truth.shape[0]
    rows = []
    for m in methods:
        method, variant = ("mtl", m) if m.startswith("paper") else (m, "default")
        t0 = time.perf_counter()
        est = fit(data, method, variant=variant, seed=rep) if method == "mtl" else fit(data, method, seed=rep)
        secs = time.perf_counter() - t0
        theta = est.point("theta")
        theta = (theta - theta.mean(axis=0)) / theta.std(axis=0)
        overall = est.point("overall") if "overall" in est.posterior else None
        if overall is None:
            overall = sine_centre(theta.T)[0]
        rows.append({
            "h": h, "rep": rep, "seed": seed + rep, "method": m,
            "sine": _sine(overall, g_true),
            "domain": float(np.mean(np.linalg.norm(theta - truth, axis=0) / math.sqrt(N))),
            "spearman": float(spearmanr(overall, g_true).statistic),
            "kendall": float(kendalltau(overall, g_true, variant="b").statistic),
            "C": est.info.get("C"), "converged": est.info.get("diagnostics", {}).get("converged"),
            "seconds": secs,
        })
    return rows


def optimizers(h: float, seed: int, Cs) -> None:
    """Fast optimiser against the paper's projected Adam (its settings) and a long
    Adam (no early stop, 4,000 steps, learning rate halved every 200 or every
    1,000 steps; the better of the two), on one dataset of the paper's design."""
    from mtlirt.estimators import paper
    from mtlirt.simulate import simulate_paper

    sim = simulate_paper(h, seed=seed)
    edges = np.concatenate([[0], np.cumsum(sim.domains.n_items)])
    sl = [slice(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:])]
    lines = ["| fit | F fast | F Adam (paper) | F Adam (long) | max abs diff theta fast vs long | "
             "max abs diff theta_G | s fast | s Adam (paper) |", "|---|---|---|---|---|---|---|---|"]
    print("\n".join(lines), flush=True)
    runs = [("paper", C) for C in Cs] + [("paper-global", None), ("paper-local", None)]
    for variant, C in runs:
        t0 = time.perf_counter()
        fast = paper.fit_paper(sim.correct, None, sl, variant=variant, C=C)
        t1 = time.perf_counter()
        adam = paper.fit_paper(sim.correct, None, sl, variant=variant, C=C, optimizer="adam")
        t2 = time.perf_counter()
        name = variant if C is None else f"paper, C = {C:g}"
        if variant == "paper":
            long = min((paper.fit_paper(sim.correct, None, sl, variant=variant, C=C, optimizer="adam",
                                        adam=paper.AdamSettings(tol=0.0, max_iter=4000, decay_steps=k))
                        for k in (200, 1000)), key=lambda r: r.objective)
            cols = (f"{long.objective:.6f} | {np.abs(fast.theta - long.theta).max():.1e} | "
                    f"{np.abs(fast.overall - long.overall).max():.1e}")
        else:  # the long runs of the baselines take too long on two shared cores
            cols = "- | - | -"
        print(f"| {name} | {fast.objective:.6f} | {adam.objective:.6f} | {cols} | {t1 - t0:.2f} | {t2 - t1:.2f} |",
              flush=True)


def table(df: pd.DataFrame, metric: str, methods) -> str:
    g = df.groupby(["h", "method"])[metric]
    mean, se = g.mean().unstack(), (g.std(ddof=1) / np.sqrt(g.count())).unstack()
    cols = [m for m in methods if m in mean.columns]
    lines = ["| h | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]
    for h in mean.index:
        lines.append(f"| {h:g} | " + " | ".join(f"{mean.loc[h, c]:.4f} ({se.loc[h, c]:.4f})" for c in cols) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--h", default="0,0.1,0.2,0.3,0.4,0.5")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--csv", default=None, help="write the runs here (rewritten after every replication)")
    ap.add_argument("--summarise", default=None, metavar="CSV", help="only print the tables of a runs CSV")
    ap.add_argument("--C", default="0.01,0.5", help="with --optimizers: the C values of the paper rows")
    ap.add_argument("--optimizers", action="store_true",
                    help="only compare the fast optimiser with the paper's Adam on one dataset (h = 0.3, --seed)")
    args = ap.parse_args(argv)
    if args.optimizers:
        optimizers(0.3, args.seed, [float(c) for c in args.C.split(",")])
        return 0
    hs = [float(x) for x in args.h.split(",")]
    methods = [m for m in args.methods.split(",") if m]
    tasks = [(h, r) for r in range(args.reps) for h in hs]
    t0 = time.perf_counter()
    if args.summarise:
        df = pd.read_csv(args.summarise)
    else:
        rows = []
        if args.jobs == 1:
            results = (one(h, r, args.seed, methods) for h, r in tasks)
        else:
            from joblib import Parallel, delayed

            results = Parallel(n_jobs=args.jobs, backend="loky", inner_max_num_threads=1,
                               return_as="generator_unordered")(
                delayed(one)(h, r, args.seed, methods) for h, r in tasks)
        for k, res in enumerate(results):  # written as they come: a long run can be summarised midway
            rows.extend(res)
            if args.csv:
                Path(args.csv).parent.mkdir(parents=True, exist_ok=True)
                pd.DataFrame(rows).to_csv(args.csv, index=False)
            print(f"{k + 1}/{len(tasks)} replications done, {time.perf_counter() - t0:.0f} s", file=sys.stderr)
        df = pd.DataFrame(rows)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=Path(__file__).parent).stdout.strip()
    reps = df.groupby("h")["rep"].nunique().to_dict()
    print(f"paper design: replications per h {reps}; commit {commit}; {time.perf_counter() - t0:.0f} s "
          f"with {args.jobs} jobs")
    for metric, what in [("sine", "sine error of the overall score"),
                         ("domain", "domain trait error ||theta^_t - theta_t|| / sqrt(N), mean over domains"),
                         ("spearman", "Spearman of the overall ranking"), ("kendall", "Kendall of the overall ranking"),
                         ("seconds", "seconds per fit")]:
        print(f"\n{what} (mean (SE) over replications)\n")
        print(table(df, metric, methods))
    if "paper" in methods:
        print("\nchosen C of paper:", df[df.method == "paper"].groupby("h")["C"].apply(
            lambda s: dict(s.value_counts().sort_index())).to_dict())
    return 0


if __name__ == "__main__":
    sys.exit(main())
