"""Benchmarks of the Bayesian model (mtlirt.bayes), printing measured figures.

Usage::

    .venv/bin/python benchmarks/bench_bayes.py calibration [--seeds 3 4 5]
    .venv/bin/python benchmarks/bench_bayes.py joint
    .venv/bin/python benchmarks/bench_bayes.py flagship [--draws 500 --tune 500]
    .venv/bin/python benchmarks/bench_bayes.py all

(a) calibration: 150 LLMs, domains of 10, 15, 20, 30, 40, 60 items (rank 1,
    2PL), joint NUTS; 90% intervals of the domain scores should cover the true
    scores 85-95% of the time, max R-hat <= 1.01, no divergences, < 15 min.
(b) joint: 300 LLMs x MMLU sizes x 0.08 (about 1,150 items, 57 domains),
    joint NUTS, converged within 20 minutes.
(c) flagship: 4,272 LLMs x 57 domains x 14,042 items (MMLU sizes), items
    calibrated by MML-EM then fixed, LLM side by NUTS; converged posterior
    of all overall and domain scores within 20 minutes and 8 GB.

Each run prints wall time, peak resident memory, the convergence diagnostics
and the interval coverage / RMSE against the simulation's truth.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
import warnings

import numpy as np


def _peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6


def _coverage(tree, truth: np.ndarray, var: str = "theta", level: float = 0.9) -> dict:
    post = tree["posterior"]
    x = post[var]
    x = x.transpose("chain", "draw", *[d for d in x.dims if d not in ("chain", "draw")]).values
    S = x.shape[0] * x.shape[1]
    x = x.reshape(S, *x.shape[2:])
    lo, hi = np.quantile(x, [(1 - level) / 2, (1 + level) / 2], axis=0)
    cover = (truth >= lo) & (truth <= hi)
    mean = x.mean(0)
    return {
        "coverage": float(cover.mean()),
        "coverage_by_domain": cover.mean(0).round(3).tolist() if cover.ndim == 2 else None,
        "rmse": float(np.sqrt(np.mean((mean - truth) ** 2))),
        "mean_width": float(np.mean(hi - lo)),
    }


def _report(name: str, tree, seconds: float, extra: dict | None = None) -> dict:
    from mtlirt.bayes import diagnostics

    d = diagnostics(tree)  # computed once by fit_bayes (stored in the attrs)
    out = {
        "benchmark": name,
        "seconds": round(seconds, 1),
        "peak_rss_gb": round(_peak_rss_gb(), 2),
        "max_rhat": round(d["max_rhat"], 4),
        "worst_rhat": d["worst_rhat"],
        "min_ess_bulk": round(d["min_ess_bulk"], 1),
        "min_ess_tail": round(d["min_ess_tail"], 1),
        "divergences": d["divergences"],
        "min_bfmi": round(d["min_bfmi"], 3),
        "converged": d["converged"],
        "n_parameters": d.get("n_parameters"),
        "share_rhat_above_1.01": d.get("share_rhat_above"),
    }
    out.update(extra or {})
    print(json.dumps(out, indent=1), flush=True)
    return out


def bench_calibration(seed: int = 3, draws: int = 2000, tune: int = 1000, chains: int = 4,
                      spec: str = "factor-2pl") -> dict:
    """(a) 150 LLMs, domains of 10-60 items, joint NUTS, coverage of 90% intervals."""
    from mtlirt.bayes import fit_bayes
    from mtlirt.bayes._data import arrays_from_simulation
    from mtlirt.simulate import simulate

    sim = simulate(150, [10, 15, 20, 30, 40, 60], seed=seed)
    arr = arrays_from_simulation(sim)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tree = fit_bayes(arr, spec, draws=draws, tune=tune, chains=chains, seed=seed,
                         progress=False, log_likelihood=False)
    sec = time.perf_counter() - t0
    cov = _coverage(tree, sim.domain_scores.values)
    ov = _coverage(tree, sim.overall.values[:, 0], "overall")
    return _report(f"calibration seed={seed}", tree, sec, {
        "theta_coverage90": round(cov["coverage"], 3),
        "theta_coverage90_by_domain": cov["coverage_by_domain"],
        "theta_rmse": round(cov["rmse"], 3),
        "overall_coverage90": round(ov["coverage"], 3),
        "overall_rmse": round(ov["rmse"], 3),
    })


def bench_joint(seed: int = 0, draws: int = 500, tune: int = 500, chains: int = 2,
                spec: str = "factor-2pl") -> dict:
    """(b) 300 LLMs x MMLU x 0.08 (about 1,150 items, 57 domains), joint NUTS."""
    from mtlirt.bayes import fit_bayes
    from mtlirt.bayes._data import arrays_from_simulation
    from mtlirt.simulate import simulate

    sim = simulate(300, preset="mmlu", scale=0.08, seed=seed)
    arr = arrays_from_simulation(sim)
    print(f"joint: {arr.n_llms} LLMs x {arr.n_items} items in {arr.n_domains} domains", flush=True)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tree = fit_bayes(arr, spec, draws=draws, tune=tune, chains=chains, seed=seed,
                         progress=False, log_likelihood=False)
    sec = time.perf_counter() - t0
    cov = _coverage(tree, sim.domain_scores.values)
    ov = _coverage(tree, sim.overall.values[:, 0], "overall")
    return _report("joint 300 x mmlu*0.08", tree, sec, {
        "n_items": arr.n_items,
        "theta_coverage90": round(cov["coverage"], 3),
        "theta_rmse": round(cov["rmse"], 3),
        "overall_coverage90": round(ov["coverage"], 3),
        "overall_rmse": round(ov["rmse"], 3),
        "sampling_seconds": round(float(tree["posterior"].attrs["mtlirt_sampling_seconds"]), 1),
    })


def bench_flagship(seed: int = 0, draws: int = 1000, tune: int = 500, chains: int = 2,
                   n_llms: int = 4272, spec: str = "factor-2pl") -> dict:
    """(c) the flagship shape with items calibrated (MML-EM) then fixed."""
    from mtlirt.bayes import calibrate_items, fit_bayes
    from mtlirt.bayes._data import arrays_from_simulation
    from mtlirt.simulate import simulate

    t0 = time.perf_counter()
    sim = simulate(n_llms, preset="mmlu", seed=seed)
    arr = arrays_from_simulation(sim)
    truth_theta = sim.domain_scores.values
    truth_overall = sim.overall.values[:, 0]
    a_true = sim.items["discrimination"].values
    d_true = sim.items["intercept"].values
    del sim
    t_sim = time.perf_counter() - t0
    print(f"flagship: {arr.n_llms} LLMs x {arr.n_items} items in {arr.n_domains} domains "
          f"(simulated in {t_sim:.0f} s)", flush=True)
    t0 = time.perf_counter()
    cal = calibrate_items(arr, "factor-2pl")
    t_cal = time.perf_counter() - t0
    print(f"calibration: {t_cal:.0f} s, max EM iterations {max(cal['iterations'])}, "
          f"log a RMSE {np.sqrt(np.mean((np.log(cal['a']) - np.log(a_true))**2)):.3f}, "
          f"d RMSE {np.sqrt(np.mean((cal['d'] - d_true)**2)):.3f}", flush=True)
    t1 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tree = fit_bayes(arr, spec, items="fixed", item_values=cal, draws=draws, tune=tune,
                         chains=chains, seed=seed, progress=False, log_likelihood=False,
                         keep_raw=False)
    t_fit = time.perf_counter() - t1
    cov = _coverage(tree, truth_theta)
    ov = _coverage(tree, truth_overall, "overall")
    return _report("flagship fixed-items", tree, t_cal + t_fit, {
        "calibration_seconds": round(t_cal, 1),
        "fit_seconds": round(t_fit, 1),
        "sampling_seconds": round(float(tree["posterior"].attrs["mtlirt_sampling_seconds"]), 1),
        "draws": draws, "tune": tune, "chains": chains,
        "theta_coverage90": round(cov["coverage"], 3),
        "theta_rmse": round(cov["rmse"], 3),
        "overall_coverage90": round(ov["coverage"], 3),
        "overall_rmse": round(ov["rmse"], 3),
    })


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("which", choices=["calibration", "joint", "flagship", "all"])
    ap.add_argument("--seeds", type=int, nargs="*", default=None)
    ap.add_argument("--draws", type=int, default=None)
    ap.add_argument("--tune", type=int, default=None)
    ap.add_argument("--chains", type=int, default=None)
    ap.add_argument("--n-llms", type=int, default=4272)
    ap.add_argument("--spec", default="factor-2pl")
    args = ap.parse_args(argv)
    kw = {k: v for k, v in (("draws", args.draws), ("tune", args.tune), ("chains", args.chains))
          if v is not None}
    if args.which in ("calibration", "all"):
        for s in args.seeds or [3]:
            bench_calibration(seed=s, spec=args.spec, **kw)
    if args.which in ("joint", "all"):
        bench_joint(seed=(args.seeds or [0])[0], spec=args.spec, **kw)
    if args.which in ("flagship", "all"):
        bench_flagship(seed=(args.seeds or [0])[0], n_llms=args.n_llms, spec=args.spec, **kw)
    return 0


if __name__ == "__main__":
    sys.exit(main())
