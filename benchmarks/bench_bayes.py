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
    """Coverage of central intervals, RMSE of the posterior mean (chunked over
    LLMs so no copy of the whole posterior is made)."""
    post = tree["posterior"]
    x = post[var]
    x = x.transpose("chain", "draw", *[d for d in x.dims if d not in ("chain", "draw")]).values
    S = x.shape[0] * x.shape[1]
    x = x.reshape(S, *x.shape[2:])
    n = x.shape[1]
    cover = np.empty(truth.shape, dtype=bool)
    sq, width = 0.0, 0.0
    step = max(1, int(2e7 // max(S * int(np.prod(x.shape[2:], dtype=int)), 1)))
    for a in range(0, n, step):
        sl = slice(a, min(n, a + step))
        lo, hi = np.quantile(x[:, sl], [(1 - level) / 2, (1 + level) / 2], axis=0)
        cover[sl] = (truth[sl] >= lo) & (truth[sl] <= hi)
        sq += float(((x[:, sl].mean(0) - truth[sl]) ** 2).sum())
        width += float((hi - lo).sum())
    return {
        "coverage": float(cover.mean()),
        "coverage_by_domain": cover.mean(0).round(3).tolist() if cover.ndim == 2 else None,
        "rmse": float(np.sqrt(sq / truth.size)),
        "mean_width": width / truth.size,
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


def bench_calibration(seed: int = 3, draws: int = 1000, tune: int = 1000, chains: int = 4,
                      spec: str = "factor-2pl", target_accept: float | None = None) -> dict:
    """(a) 150 LLMs, domains of 10-60 items, joint NUTS, coverage of 90% intervals.

    Runs what ``mtlirt simulate --domain-sizes 10,15,20,30,40,60 --n-llms 150
    --seed S`` then ``mtlirt fit --method bayes`` run: ``mtlirt.fit`` with the
    MTL initial values and the default sampler settings.
    """
    from mtlirt import fit
    from mtlirt.data import Responses
    from mtlirt.simulate import simulate

    sim = simulate(150, [10, 15, 20, 30, 40, 60], seed=seed)
    resp = Responses.from_frame(sim.responses)
    truth = sim.domain_scores.loc[resp.llms, resp.domains].values
    truth_overall = sim.overall.loc[resp.llms].values[:, 0]
    opts = {} if target_accept is None else {"target_accept": target_accept}
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = fit(resp, method="bayes", spec=spec, seed=seed, draws=draws, tune=tune,
                  chains=chains, progress=False, **opts)
    sec = time.perf_counter() - t0
    tree = est.tree
    cov = _coverage(tree, truth)
    ov = _coverage(tree, truth_overall, "overall")
    return _report(f"calibration seed={seed}", tree, sec, {
        "draws": draws, "tune": tune, "chains": chains,
        "theta_coverage90": round(cov["coverage"], 3),
        "theta_coverage90_by_domain": cov["coverage_by_domain"],
        "theta_rmse": round(cov["rmse"], 3),
        "overall_coverage90": round(ov["coverage"], 3),
        "overall_rmse": round(ov["rmse"], 3),
    })


def bench_joint(seed: int = 0, draws: int = 1000, tune: int = 1000, chains: int = 2,
                spec: str = "factor-2pl", target_accept: float | None = None) -> dict:
    """(b) 300 LLMs x MMLU x 0.08 (about 1,150 items, 57 domains), joint NUTS
    (``mtlirt.fit(method="bayes")``: MTL initial values)."""
    from mtlirt import fit
    from mtlirt.data import Responses
    from mtlirt.simulate import simulate

    sim = simulate(300, preset="mmlu", scale=0.08, seed=seed)
    resp = Responses.from_frame(sim.responses)
    truth = sim.domain_scores.loc[resp.llms, resp.domains].values
    truth_overall = sim.overall.loc[resp.llms].values[:, 0]
    print(f"joint: {resp.n_llms} LLMs x {resp.n_items} items in {resp.n_domains} domains", flush=True)
    opts = {} if target_accept is None else {"target_accept": target_accept}
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = fit(resp, method="bayes", spec=spec, seed=seed, draws=draws, tune=tune, chains=chains,
                  progress=False, log_likelihood=False, **opts)
    sec = time.perf_counter() - t0
    tree = est.tree
    cov = _coverage(tree, truth)
    ov = _coverage(tree, truth_overall, "overall")
    return _report("joint 300 x mmlu*0.08", tree, sec, {
        "n_items": resp.n_items, "draws": draws, "tune": tune, "chains": chains,
        "theta_coverage90": round(cov["coverage"], 3),
        "theta_rmse": round(cov["rmse"], 3),
        "overall_coverage90": round(ov["coverage"], 3),
        "overall_rmse": round(ov["rmse"], 3),
        "sampling_seconds": round(float(tree["posterior"].attrs["mtlirt_sampling_seconds"]), 1),
    })


def bench_flagship(seed: int = 0, draws: int = 500, tune: int = 500, chains: int = 2,
                   n_llms: int = 4272, spec: str = "factor-2pl", target_accept: float | None = None,
                   out: str | None = None) -> dict:
    """(c) the flagship shape with the items fixed at the MTL fit's (MML-EM)
    values: ``mtlirt.fit(method="bayes", items="fixed")``."""
    from mtlirt import fit
    from mtlirt.data import Responses
    from mtlirt.simulate import simulate

    t0 = time.perf_counter()
    sim = simulate(n_llms, preset="mmlu", seed=seed)
    resp = Responses.from_frame(sim.responses)
    truth_theta = sim.domain_scores.loc[resp.llms, resp.domains].values
    truth_overall = sim.overall.loc[resp.llms].values[:, 0]
    del sim
    t_sim = time.perf_counter() - t0
    print(f"flagship: {resp.n_llms} LLMs x {resp.n_items} items in {resp.n_domains} domains "
          f"(simulated in {t_sim:.0f} s)", flush=True)
    opts = {} if target_accept is None else {"target_accept": target_accept}
    t1 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = fit(resp, method="bayes", spec=spec, items="fixed", seed=seed, draws=draws, tune=tune,
                  chains=chains, progress=False, log_likelihood=False, keep_raw=False, **opts)
    t_fit = time.perf_counter() - t1
    rss_fit = _peak_rss_gb()
    tree = est.tree
    cov = _coverage(tree, truth_theta)
    ov = _coverage(tree, truth_overall, "overall")
    if out:
        est.save(out)
    secs = est.info.get("seconds", {})
    return _report("flagship fixed-items", tree, t_fit, {
        "peak_rss_gb_after_fit": round(rss_fit, 2),
        "mtl_calibration_seconds": round(float(secs.get("mtl_init", float("nan"))), 1),
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
    ap.add_argument("--target-accept", type=float, default=None)
    ap.add_argument("--out", default=None, help="flagship: save the Estimate here (posterior.nc)")
    args = ap.parse_args(argv)
    kw = {k: v for k, v in (("draws", args.draws), ("tune", args.tune), ("chains", args.chains))
          if v is not None}
    if args.which in ("calibration", "all"):
        for s in args.seeds or [3]:
            bench_calibration(seed=s, spec=args.spec, target_accept=args.target_accept, **kw)
    if args.which in ("joint", "all"):
        bench_joint(seed=(args.seeds or [0])[0], spec=args.spec, target_accept=args.target_accept, **kw)
    if args.which in ("flagship", "all"):
        bench_flagship(seed=(args.seeds or [0])[0], n_llms=args.n_llms, spec=args.spec,
                       target_accept=args.target_accept, out=args.out, **kw)
    return 0


if __name__ == "__main__":
    sys.exit(main())
