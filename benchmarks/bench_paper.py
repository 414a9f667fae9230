"""The seed paper's simulation design: its estimator against the package's methods.

Each replication ``r`` at heterogeneity ``h`` is
``mtlirt.data.sim_paper.simulate_paper(h, seed=seed + r)`` (100 LLMs, 18 domains of
50-100 items; the same seed at every ``h``, so the designs are paired over
``h`` as in the paper).  Every method is fitted by ``mtlirt.fitting.fit``:

``paper``, ``paper-global``, ``paper-local``
    ``fit(data, "mtl", variant=..., optimizer=...)`` (:mod:`mtlirt.estimators.paper`; ``paper``
    tunes C by its 5-fold cross-validation over the paper's 14-value grid; ``--optimizer adam``:
    the paper's early-stopped Adam, its published output; ``fast``, the default: the exact minimiser);
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
        [--optimizer fast|adam]
        [--csv runs.csv] [--summarise runs.csv]
    .venv/bin/python benchmarks/bench_paper.py --optimizers [--seed 1] [--C 0.01,0.5]
    .venv/bin/python benchmarks/bench_paper.py --coverage [--h 0.3] [--C 0.5|tuned] [--bootstrap 20]
        [--reps 6] [--seed 0] [--variants paper] [--optimizer fast] [--jobs 1] [--csv runs.csv]

Prints one markdown table (mean and standard error over replications) per metric.

``--coverage`` measures the bootstrap intervals of the paper variants
(``fit(data, "mtl", variant=v, gamma=C, bootstrap=B, seed=seed + r)``, ``C``
tuned by the paper's cross-validation with ``--C tuned``) against the truth of
``simulate_paper(h, seed=seed + r)``: the share of (LLM, domain) cells whose
standardised true domain trait lies in its 90% interval (``cov_domain``), the
share of LLMs whose standardised true overall score (the sine centre) lies in
its interval (``cov_overall``), their mean widths, the RMSE of the point
estimates and the bootstrap's error sd (``boot_sd_domain``, ``boot_sd_overall``:
the root mean square of ``estimate - draw``), one row per replication and a
summary (mean and SE over replications).
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


def one(h: float, rep: int, seed: int, methods, optimizer: str = "fast") -> list[dict]:
    """Simulate replication ``rep`` at ``h`` and score every method on it."""
    from mtlirt.data.responses import Responses
    from mtlirt.data.sim_paper import simulate_paper
    from mtlirt.estimators.sine_centre import sine_centre
    from mtlirt.fitting import fit

    sim = simulate_paper(h, seed=seed + rep)
    data = Responses.from_frame(sim.responses)
    truth = sim.domain_scores.loc[data.llms, data.domains].to_numpy()
    g_true = sim.overall.loc[data.llms, "score"].to_numpy()
    N = truth.shape[0]
    rows = []
    for m in methods:
        method, variant = ("mtl", m) if m.startswith("paper") else (m, "default")
        t0 = time.perf_counter()
        est = (fit(data, method, variant=variant, seed=rep, optimizer=optimizer if variant != "default" else None)
               if method == "mtl" else fit(data, method, seed=rep))
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
    from mtlirt.data.sim_paper import simulate_paper
    from mtlirt.estimators import paper

    data = simulate_paper(h, seed=seed).to_responses()
    lines = ["| fit | F fast | F Adam (paper) | F Adam (long) | max abs diff theta fast vs long | "
             "max abs diff theta_G | s fast | s Adam (paper) |", "|---|---|---|---|---|---|---|---|"]
    print("\n".join(lines), flush=True)
    runs = [("paper", C) for C in Cs] + [("paper-global", None), ("paper-local", None)]
    for variant, C in runs:
        t0 = time.perf_counter()
        fast = paper.fit_paper(data, variant=variant, C=C)
        t1 = time.perf_counter()
        adam = paper.fit_paper(data, variant=variant, C=C, optimizer="adam")
        t2 = time.perf_counter()
        name = variant if C is None else f"paper, C = {C:g}"
        if variant == "paper":
            long = min((paper.fit_paper(data, variant=variant, C=C, optimizer="adam",
                                        adam=paper.AdamSettings(tol=0.0, max_iter=4000, decay_steps=k))
                        for k in (200, 1000)), key=lambda r: r.record["objective"])
            cols = (f"{long.record['objective']:.6f} | {np.abs(fast.theta - long.theta).max():.1e} | "
                    f"{np.abs(fast.overall - long.overall).max():.1e}")
        else:  # the long runs of the baselines take too long on two shared cores
            cols = "- | - | -"
        objs = f"{fast.record['objective']:.6f} | {adam.record['objective']:.6f}"
        print(f"| {name} | {objs} | {cols} | {t1 - t0:.2f} | {t2 - t1:.2f} |",
              flush=True)


def coverage_one(h: float, rep: int, seed: int, variant: str, C, bootstrap: int, optimizer: str,
                 interval: float = 0.9) -> dict:
    """Fit ``variant`` with a bootstrap to replication ``rep`` and score its intervals against the truth."""
    from mtlirt.data.responses import Responses
    from mtlirt.data.sim_paper import simulate_paper
    from mtlirt.fitting import fit

    sim = simulate_paper(h, seed=seed + rep)
    data = Responses.from_frame(sim.responses)
    truth = sim.domain_scores.loc[data.llms, data.domains].to_numpy()
    truth = (truth - truth.mean(axis=0)) / truth.std(axis=0)
    g = sim.overall.loc[data.llms, "score"].to_numpy()
    g = (g - g.mean()) / g.std()
    t0 = time.perf_counter()
    paper = variant != "default"  # the package's own MTL (its C tuned) for comparison
    est = fit(data, "mtl", variant=variant, gamma=C if paper else None, bootstrap=bootstrap, seed=seed + rep,
              n_jobs=1, optimizer=optimizer if paper else None)
    secs = time.perf_counter() - t0
    ds = est.domain_scores(interval)
    lo, hi = (ds[c].to_numpy().reshape(truth.shape) for c in ("lower", "upper"))
    ov = est.overall_scores(interval).set_index("llm").loc[data.llms]
    theta, overall = est.point("theta"), ov["score"].to_numpy()
    return {
        "h": h, "rep": rep, "seed": seed + rep, "variant": variant, "C": est.info.get("C"), "bootstrap": bootstrap,
        "cov_domain": float(((truth >= lo) & (truth <= hi)).mean()),
        "cov_overall": float(((g >= ov["lower"].to_numpy()) & (g <= ov["upper"].to_numpy())).mean()),
        "width_domain": float((hi - lo).mean()), "width_overall": float((ov["upper"] - ov["lower"]).mean()),
        "rmse_domain": float(np.sqrt(((theta - truth) ** 2).mean())),
        "rmse_overall": float(np.sqrt(((overall - g) ** 2).mean())),
        "boot_sd_domain": float(np.sqrt(((est.draws("theta") - theta) ** 2).mean())),
        "boot_sd_overall": float(np.sqrt(((est.draws("overall") - est.point("overall")) ** 2).mean())),
        "seconds": secs,
    }


def coverage(args) -> int:
    """``--coverage``: one row per (variant, replication), then the means (SE) over replications."""
    C = None if args.C == "tuned" else float(args.C)
    hs = [float(x) for x in args.h.split(",")]
    tasks = [(h, r, v) for v in args.variants.split(",") for h in hs for r in range(args.reps)]
    if args.jobs == 1:
        results = (coverage_one(h, r, args.seed, v, C, args.bootstrap, args.optimizer) for h, r, v in tasks)
    else:
        from joblib import Parallel, delayed

        results = Parallel(n_jobs=args.jobs, backend="loky", inner_max_num_threads=1,
                           return_as="generator_unordered")(
            delayed(coverage_one)(h, r, args.seed, v, C, args.bootstrap, args.optimizer) for h, r, v in tasks)
    rows = []
    for res in results:
        rows.append(res)
        print(pd.DataFrame([res]).to_string(index=False, float_format=lambda v: f"{v:.3f}"), flush=True)
        if args.csv:
            Path(args.csv).parent.mkdir(parents=True, exist_ok=True)
            pd.DataFrame(rows).to_csv(args.csv, index=False)
    df = pd.DataFrame(rows)
    cols = ["cov_domain", "cov_overall", "width_domain", "width_overall", "rmse_domain", "boot_sd_domain",
            "rmse_overall", "boot_sd_overall", "seconds"]
    g = df.groupby(["variant", "h"])[cols]
    mean, se = g.mean(), g.std(ddof=1) / np.sqrt(g.count())
    print(f"\npaper-variant intervals, C = {args.C}, --bootstrap {args.bootstrap}, optimizer {args.optimizer}, "
          f"{args.reps} replications (mean (SE))\n")
    print("| variant | h | " + " | ".join(cols) + " |\n|---|---|" + "---|" * len(cols))
    for key in mean.index:
        print(f"| {key[0]} | {key[1]:g} | "
              + " | ".join(f"{mean.loc[key, c]:.3f} ({se.loc[key, c]:.3f})" for c in cols) + " |")
    return 0


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
    ap.add_argument("--C", default=None, help="with --optimizers: the C values of the paper rows (default "
                    "0.01,0.5); with --coverage: C of the paper variant, or 'tuned' (default 0.5)")
    ap.add_argument("--optimizers", action="store_true",
                    help="only compare the fast optimiser with the paper's Adam on one dataset (h = 0.3, --seed)")
    ap.add_argument("--coverage", action="store_true", help="measure the paper variants' bootstrap intervals")
    ap.add_argument("--bootstrap", type=int, default=20, help="with --coverage: bootstrap replicates")
    ap.add_argument("--variants", default="paper", help="with --coverage: paper variants to measure (and "
                    "'default', the package's MTL)")
    ap.add_argument("--optimizer", default="fast", choices=["fast", "adam"], help="the paper variants' optimiser")
    args = ap.parse_args(argv)
    if args.optimizers:
        optimizers(0.3, args.seed, [float(c) for c in (args.C or "0.01,0.5").split(",")])
        return 0
    if args.coverage:
        if args.h == ap.get_default("h"):
            args.h = "0.3"
        args.C = args.C or "0.5"
        return coverage(args)
    hs = [float(x) for x in args.h.split(",")]
    methods = [m for m in args.methods.split(",") if m]
    tasks = [(h, r) for r in range(args.reps) for h in hs]
    t0 = time.perf_counter()
    if args.summarise:
        df = pd.read_csv(args.summarise)
    else:
        rows = []
        if args.jobs == 1:
            results = (one(h, r, args.seed, methods, args.optimizer) for h, r in tasks)
        else:
            from joblib import Parallel, delayed

            results = Parallel(n_jobs=args.jobs, backend="loky", inner_max_num_threads=1,
                               return_as="generator_unordered")(
                delayed(one)(h, r, args.seed, methods, args.optimizer) for h, r in tasks)
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
