"""Benchmarks of the fixed-items posterior with the whole LLM side integrated out
(:mod:`mtlirt.bayes.collapsed`, issue 16), printing measured figures.

Usage::

    .venv/bin/python benchmarks/bench_collapsed.py flagship [--draws 250 --tune 200 --rank 1]
    .venv/bin/python benchmarks/bench_collapsed.py compare [--seeds 3]

flagship: 4,272 LLMs x MMLU's 57 subjects (14,042 items), the MTL fit (as
``mtlirt fit --method bayes --items fixed`` runs it: MTL first, its item values
fixed), then the collapsed posterior: wall of each stage, the ratio of the
whole to the MTL fit's wall, R-hat and ESS of the sampled loadings, the
quadrature check, and the 90% coverage of the true domain and overall scores.

compare: the calibration design (150 LLMs, domains of 10-60 items) fitted by
the collapsed route and by the sampled route (overall traits sampled, domain
traits integrated out: ``fit_bayes(items="fixed")``), both from the same MTL
fit and items; posterior means and 90% interval endpoints compared.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import time
import warnings

import numpy as np


def _peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6


def _summary(ds, var: str):
    x = ds[var].transpose("chain", "draw", ...).values
    x = x.reshape(-1, *x.shape[2:])
    return x.mean(0), np.quantile(x, 0.05, axis=0), np.quantile(x, 0.95, axis=0)


def _coverage(ds, var: str, truth: np.ndarray) -> dict:
    x = ds[var].transpose("chain", "draw", ...).values
    S = x.shape[0] * x.shape[1]
    x = x.reshape(S, -1)
    t = truth.reshape(-1)
    cover = np.empty(t.shape, dtype=bool)
    sq = 0.0
    width = 0.0
    step = max(1, int(2e7 // S))
    for a in range(0, t.size, step):
        sl = slice(a, min(t.size, a + step))
        lo, hi = np.quantile(x[:, sl], [0.05, 0.95], axis=0)
        cover[sl] = (t[sl] >= lo) & (t[sl] <= hi)
        sq += float(((x[:, sl].mean(0) - t[sl]) ** 2).sum())
        width += float((hi - lo).sum())
    return {"coverage90": round(float(cover.mean()), 3), "rmse": round(float(np.sqrt(sq / t.size)), 4),
            "mean_width90": round(width / t.size, 4)}


def _simulated(n_llms, domain_sizes=None, *, preset=None, seed=0, rank=1):
    from mtlirt.io.responses import Responses
    from mtlirt.simulate import simulate

    sim = simulate(n_llms, domain_sizes, preset=preset, seed=seed, rank=rank)
    resp = Responses.from_frame(sim.responses)
    theta = sim.domain_scores.loc[resp.llms, resp.domains].values
    ov = sim.overall.loc[resp.llms].values[:, 0]
    return resp, theta, (ov - ov.mean()) / ov.std()


def collapsed_fit(resp, spec_name: str, init: dict, *, draws: int, tune: int, chains: int, seed: int,
                  grid_options: dict | None = None):
    """The collapsed route from an MTL init: (posterior with derived quantities,
    fit, stage seconds)."""
    from mtlirt.bayes import collapsed as cl
    from mtlirt.bayes._data import as_arrays
    from mtlirt.bayes.derived import add_derived
    from mtlirt.bayes.fixed_items import build_tables, resolve_item_values
    from mtlirt.bayes.init import initial_values
    from mtlirt.bayes.model import anchor_domains, model_coords
    from mtlirt.bayes.spec import load_spec

    t0 = time.perf_counter()
    arr = as_arrays(resp)
    spec = load_spec(spec_name)
    items = resolve_item_values(arr, spec, None, init)
    tables = build_tables(arr, items["a"], items["d"], items["c"])
    anchors = anchor_domains(arr, spec.rank)
    iv = initial_values(arr, spec, anchors, init, include_items=False,
                        trait_centered=np.ones(arr.n_domains, dtype=bool))
    stages = {"tables": time.perf_counter() - t0}
    fit = cl.sample_structure(tables, spec, anchors, iv, model_coords(arr, spec), draws=draws, tune=tune,
                              chains=chains, cores=min(chains, os.cpu_count() or 1), seed=seed,
                              grid_options=grid_options)
    stages.update(fit.info["stage_seconds"])
    t1 = time.perf_counter()
    post = add_derived(fit.posterior, arr, spec, anchors, fixed_items=items, tables=tables)
    stages["derived"] = time.perf_counter() - t1
    return post, fit, stages


def _structure_diagnostics(post, fit) -> dict:
    import xarray as xr

    from mtlirt.bayes.diagnostics import diagnostics

    p = post.copy()
    p.attrs = {"mtlirt_algorithm": "nuts"}
    tree = xr.DataTree.from_dict({"posterior": p, "sample_stats": fit.sample_stats})
    names = [v for v in ("loading_free", "loading_diag", "loadings") if v in p]
    d = diagnostics(tree, var_names=names, recompute=True)
    return {k: d[k] for k in ("max_rhat", "worst_rhat", "min_ess_bulk", "min_ess_tail", "divergences",
                              "min_bfmi", "converged", "n_parameters")}


def bench_flagship(seed: int = 0, draws: int = 250, tune: int = 200, chains: int = 4, rank: int = 1,
                   n_llms: int = 4272, mtl_reference: float = 21.0) -> dict:
    from mtlirt.fitting import _mtl_init

    resp, truth, truth_ov = _simulated(n_llms, preset="mmlu", seed=seed, rank=rank)
    print(f"flagship: {resp.n_llms} LLMs x {resp.n_items} items in {resp.n_domains} domains, rank {rank}; "
          f"load average {os.getloadavg()[0]:.1f} before the fit", flush=True)
    t0 = time.perf_counter()
    _, init = _mtl_init(resp, model="2pl", guessing=None, seed=seed)
    t_mtl = time.perf_counter() - t0
    spec = "factor-2pl" if rank == 1 else "factor2-2pl"
    post, fit, stages = collapsed_fit(resp, spec, init, draws=draws, tune=tune, chains=chains, seed=seed)
    wall = time.perf_counter() - t0
    out = {
        "benchmark": f"flagship collapsed, rank {rank}",
        "draws": draws, "tune": tune, "chains": chains,
        "mtl_seconds": round(t_mtl, 1),
        "bayes_seconds_after_mtl": round(wall - t_mtl, 1),
        "wall_seconds": round(wall, 1),
        "ratio_to_this_mtl": round(wall / t_mtl, 2),
        f"ratio_to_mtl_{mtl_reference:g}s": round(wall / mtl_reference, 2),
        "load_average_after": round(os.getloadavg()[0], 1),
        "peak_rss_gb": round(_peak_rss_gb(), 2),
        "stage_seconds": {k: round(v, 1) for k, v in stages.items()},
        "leapfrog_steps_per_draw": round(float(fit.sample_stats["n_steps"].mean()), 2),
        "inner_nodes": fit.info["n_inner_nodes"], "outer_nodes": fit.info["n_outer_nodes"],
        "quadrature_check": {k: v for k, v in fit.info["quadrature_check"].items() if k != "fine_grid"},
        "diagnostics_structure": _structure_diagnostics(post, fit),
        "theta": _coverage(post, "theta", truth),
        "overall": _coverage(post, "overall", truth_ov),
    }
    print(json.dumps(out, indent=1, default=float), flush=True)
    return out


def bench_compare(seed: int = 3, draws: int = 1000, tune: int = 1000, chains: int = 4, rank: int = 1) -> dict:
    from mtlirt.bayes import fit_bayes
    from mtlirt.bayes._data import as_arrays
    from mtlirt.bayes.fixed_items import resolve_item_values
    from mtlirt.bayes.spec import load_spec
    from mtlirt.fitting import _mtl_init

    resp, truth, truth_ov = _simulated(150, [10, 15, 20, 30, 40, 60], seed=seed, rank=rank)
    spec = "factor-2pl" if rank == 1 else "factor2-2pl"
    _, init = _mtl_init(resp, model="2pl", guessing=None, seed=seed)
    t0 = time.perf_counter()
    new, fit, stages = collapsed_fit(resp, spec, init, draws=draws, tune=tune, chains=chains, seed=seed)
    t_new = time.perf_counter() - t0
    items = resolve_item_values(as_arrays(resp), load_spec(spec), None, init)
    t1 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        old = fit_bayes(resp, spec, items="fixed", init=init, item_values=items, draws=draws, tune=tune,
                        chains=chains, cores=min(chains, os.cpu_count() or 1), seed=seed,
                        progress=False)["posterior"].to_dataset()
    t_old = time.perf_counter() - t1
    rows = {}
    for var, tr in (("theta", truth), ("overall", truth_ov)):
        a, b = _summary(new, var), _summary(old, var)
        w = b[2] - b[1]
        rows[var] = {
            "mean_width90_sampled_route": round(float(w.mean()), 4),
            "width_ratio_collapsed_to_sampled": round(float((a[2] - a[1]).mean() / w.mean()), 4),
            "mean_abs_endpoint_shift_share_of_width": round(
                float((np.abs(a[1] - b[1]) + np.abs(a[2] - b[2])).mean() / 2 / w.mean()), 4),
            "rms_mean_difference": round(float(np.sqrt(((a[0] - b[0]) ** 2).mean())), 4),
            "max_abs_mean_difference_share_of_width": round(float((np.abs(a[0] - b[0]) / w).max()), 3),
            "coverage90": {"collapsed": _coverage(new, var, tr)["coverage90"],
                           "sampled": _coverage(old, var, tr)["coverage90"]},
        }
    out = {"benchmark": f"calibration design seed {seed} rank {rank}: collapsed vs sampled overall traits",
           "seconds": {"collapsed": round(t_new, 1), "sampled": round(t_old, 1)},
           "collapsed_stage_seconds": {k: round(v, 1) for k, v in stages.items()},
           "quadrature_check": {k: v for k, v in fit.info["quadrature_check"].items() if k != "fine_grid"},
           "diagnostics_structure": _structure_diagnostics(new, fit), **rows}
    print(json.dumps(out, indent=1, default=float), flush=True)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("which", choices=["flagship", "compare"])
    ap.add_argument("--seeds", type=int, nargs="*", default=None)
    ap.add_argument("--draws", type=int, default=None)
    ap.add_argument("--tune", type=int, default=None)
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--rank", type=int, default=1)
    ap.add_argument("--n-llms", type=int, default=4272)
    args = ap.parse_args(argv)
    if args.which == "flagship":
        for s in args.seeds or [0]:
            bench_flagship(s, draws=args.draws or 250, tune=args.tune or 200, chains=args.chains,
                           rank=args.rank, n_llms=args.n_llms)
    else:
        for s in args.seeds or [3]:
            bench_compare(s, draws=args.draws or 1000, tune=args.tune or 1000, chains=args.chains, rank=args.rank)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
