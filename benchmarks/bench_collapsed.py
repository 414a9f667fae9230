"""Benchmarks of the fixed-items posterior with the whole LLM side integrated out
(:mod:`mtlirt.bayes.collapsed`), printing measured figures.

Usage::

    .venv/bin/python benchmarks/bench_collapsed.py flagship [--draws 500 --thin 2 --rank 1 --sampler auto|imh|nutpie]
    .venv/bin/python benchmarks/bench_collapsed.py flagship-routes [--draws 1000 --thin 2]
    .venv/bin/python benchmarks/bench_collapsed.py extremes [--seeds 0 --n-llms 400 --a-scale 1.15 --scenario ideal]
    .venv/bin/python benchmarks/bench_collapsed.py compare [--seeds 3]
    .venv/bin/python benchmarks/bench_collapsed.py samplers [--seeds 3 --n-llms 150]
    .venv/bin/python benchmarks/bench_collapsed.py kernel [--baseline COMMIT]
    .venv/bin/python benchmarks/bench_collapsed.py device [--n-llms N --draws 200]   # needs the jax extra
    .venv/bin/python benchmarks/bench_collapsed.py realistic [--seeds 0 1 2 --n-llms 500 --scale 0.1 --spec factor-2pl]
    .venv/bin/python benchmarks/bench_collapsed.py realdata [--data oll_v1|mmlu_pro|chembench --max-llms N]
    .venv/bin/python benchmarks/bench_collapsed.py eta-draws [--data NAME --max-llms N | --n-llms 4000 --scale 0.007]
    .venv/bin/python benchmarks/bench_collapsed.py default [--n-llms 4272 --scale 1 --missing 0.1 --rank 1
                                                           --scenario realistic | --data NAME --max-llms N --cut
                                                           --target-accept 0.95 --seeds 0 1 2 3]
    .venv/bin/python benchmarks/bench_collapsed.py imh-share [--seeds 0 1 2 3 4 5 6 7 | --n-llms 4000 --scale 0.007
                                                             --missing 0.1]

flagship: 4,272 LLMs x MMLU's 57 subjects (14,042 items), the MTL fit (as
``mtlirt fit --method bayes --items fixed`` runs it: MTL first, its item values
fixed), then the collapsed posterior: wall of each stage, the ratio of the
whole to the MTL fit's wall, R-hat and ESS of the sampled loadings, the
quadrature check, and the 90% coverage of the true domain and overall scores.

kernel: at the flagship shape, one log density + gradient, its value alone, and the exact
draws of one structure draw timed alone (CPU ms; with the kernel's pass, and from node
totals kept as IMH keeps them), and the quadrature check
at 8 structures 3% from the mode; ``--baseline`` adds the module as it was at
a commit (its own default grid, same centres).

device: the same log density and gradient in JAX (numpyro's route, the ``jax`` extra) on JAX's default
device (a GPU where one is present) against the kernel on the CPU, at the flagship shape and at 4 x its
LLMs (or ``--n-llms``), the LLMs in blocks of the default size, of four times it and all in one: the first
call's seconds (compile included), the wall per call, their agreement;
``--draws N``: numpyro's NUTS of the loadings there, N tuning steps and N draws per chain.

flagship-routes: the flagship (rank 1) fitted by both fixed-items routes from
one MTL fit at the same seed, as ``realistic`` compares them, with coverage of
the truth; the integrated route keeps every ``--thin``-th structure draw (2).

extremes: both routes on a small simulated design where they used to part at the
extremes (``--n-llms`` LLMs, six domains of 120 items; ``--scenario realistic`` for the
misspecified simulator), the items fixed at the MTL fit's values with their
discriminations divided by ``--a-scale`` (1.15: the LLMs then spread about 1.23 on the
items' scale, as on the Open LLM Leaderboard): their agreement (the five largest
differences with each LLM's place), the overall traits' spread, and both routes'
errors against the truth at the 20 best and worst LLMs.

samplers: the same integrated model sampled by IMH and by NUTS (nutpie) on the
calibration design (or ``--n-llms`` LLMs): loadings, domain and overall scores.

realistic: the realistic scenario of ``mtlirt.data.simulate`` (``scenario="realistic"``,
MMLU's subjects at ``--scale``, as ``bench_coverage.py`` builds it): the MTL fit the
CLI runs for ``--spec``, then both fixed-items routes (``llm_side="integrated"``
and ``"sampled"``) from its values at the same seed: convergence, the pilot's
choice, 90% coverage of the true domain and overall scores per route, their
interval widths and endpoint shifts against each other (and the shift that
Monte Carlo error alone would give), wall and CPU seconds against the MTL fit.

realdata: a real leaderboard of the shared real-data folder (``../shared/data``) read by ``Responses.read``, the
same two routes and comparison (no truth); ``--max-llms`` runs both on a seeded
subsample and the integrated route also on all the LLMs.

default: the default Bayesian fit (route, run length and thinning chosen by the fit) against the
default MTL fit of the same data in one process: wall and CPU ratios, the route and why, convergence,
coverage of the truth on a simulation; a real leaderboard with ``--data`` (``--cut``: 1-3 items per domain;
oll_v1: ~100 items in pseudo-domains of 1-5 items).

imh-share: the IMH chains' defensive Student-t share (``IMH_DEFENSIVE``) at 10% and at its default:
the leaderboard of ``default`` (seed 0) fitted by MTL once, then by the default route with IMH at a
fixed 250 draws per chain, once per fit seed and share: each run's largest R-hat, smallest bulk and
tail ESS and acceptance, and their means over the seeds.

eta-draws: the overall traits' draws of the default fit (rank 1) against a fine grid: the quantiles its
inverse CDF gives at three structure draws, against those of the kernel on 97 equally spaced nodes.

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
import sys
import time
import warnings
from functools import partial

import numpy as np


def _peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6


def _summary(ds, var: str):
    # by blocks of scalars: at the flagship shape a whole quantile pass would
    # copy 4,000 draws x 243,504 scores as float64 (7.8 GB)
    x = ds[var].transpose("chain", "draw", ...).values
    shape = x.shape[2:]
    x = x.reshape(x.shape[0] * x.shape[1], -1)
    out = np.empty((3, x.shape[1]))
    step = max(1, int(2e7 // x.shape[0]))
    for a in range(0, x.shape[1], step):
        sl = slice(a, min(x.shape[1], a + step))
        out[0, sl] = x[:, sl].mean(0)
        out[1:, sl] = np.quantile(x[:, sl], [0.05, 0.95], axis=0)
    return tuple(o.reshape(shape) for o in out)


def _coverage(ds, var: str, truth: np.ndarray) -> dict:
    mean, lo, hi = _summary(ds, var)
    t = np.asarray(truth).reshape(mean.shape)
    return {"coverage90": round(float(((t >= lo) & (t <= hi)).mean()), 3),
            "rmse": round(float(np.sqrt(((mean - t) ** 2).mean())), 4),
            "mean_width90": round(float((hi - lo).mean()), 4), **_tail_errors(mean, t)}


def _tail_errors(mean, t, n: int = 20) -> dict:
    """Mean error of the posterior means of the ``n`` truly best and worst
    LLMs (overall scores only): where the routes differ most."""
    if mean.ndim != 1 or len(t) < 4 * n:
        return {}
    order = np.argsort(t)
    return {f"mean_error_best_{n}": round(float((mean - t)[order[-n:]].mean()), 4),
            f"mean_error_worst_{n}": round(float((mean - t)[order[:n]].mean()), 4)}


def _simulated(n_llms, domain_sizes=None, *, preset=None, seed=0, rank=1):
    from mtlirt.data.responses import Responses
    from mtlirt.data.simulate import simulate

    sim = simulate(n_llms, domain_sizes, preset=preset, seed=seed, rank=rank)
    resp = Responses.from_frame(sim.responses)
    theta = sim.domain_scores.loc[resp.llms, resp.domains].values
    ov = sim.overall.loc[resp.llms].values[:, 0]
    return resp, theta, (ov - ov.mean()) / ov.std()


def collapsed_fit(resp, spec_name: str, init: dict, *, draws: int, tune: int | None, chains: int, seed: int,
                  grid_options: dict | None = None, sampler: str = "auto", thin: int = 1):
    """The collapsed route from an MTL init: (posterior with derived quantities,
    fit, stage seconds)."""
    from mtlirt.bayes import collapsed as cl
    from mtlirt.bayes.derived import add_derived
    from mtlirt.bayes.fixed_items import build_tables, resolve_item_values
    from mtlirt.bayes.init import initial_values
    from mtlirt.bayes.model import anchor_domains, model_coords
    from mtlirt.bayes.spec import load_spec
    from mtlirt.data.responses import as_responses

    t0 = time.perf_counter()
    arr = as_responses(resp)
    spec = load_spec(spec_name)
    items = resolve_item_values(arr, spec, None, init)
    tables = build_tables(arr, items["a"], items["d"], items["c"])
    anchors = anchor_domains(arr, spec.rank)
    iv = initial_values(arr, spec, anchors, init, include_items=False,
                        trait_centered=np.ones(arr.n_domains, dtype=bool))
    stages = {"tables": time.perf_counter() - t0}
    fit = cl.sample_structure(tables, spec, anchors, iv, model_coords(arr, spec), draws=draws, tune=tune,
                              chains=chains, cores=min(chains, os.cpu_count() or 1), seed=seed,
                              grid_options=grid_options, sampler=sampler, thin=thin)
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
    out = {k: d[k] for k in ("max_rhat", "worst_rhat", "min_ess_bulk", "min_ess_tail", "divergences",
                             "min_bfmi", "pareto_khat", "min_acceptance", "converged", "n_parameters") if k in d}
    # the rank R-hat is the larger of the bulk (rank-normalised split) and the
    # folded (spread) statistic: which one fails says whether the chains'
    # centres or their spreads disagree
    import arviz as az

    sampled = p[[v for v in ("loading_free", "loading_diag") if v in p]]
    for method, key in (("z_scale", "max_rhat_bulk"), ("folded", "max_rhat_folded")):
        r = az.rhat(sampled, method=method)
        out[key] = round(max(float(r[v].max()) for v in r.data_vars), 4)
    return out


def bench_flagship(seed: int = 0, draws: int = 250, tune: int | None = None, chains: int = 4, rank: int = 1,
                   n_llms: int = 4272, mtl_reference: float = 21.0, sampler: str = "auto", thin: int = 1) -> dict:
    from mtlirt.fitting import _mtl_init

    resp, truth, truth_ov = _simulated(n_llms, preset="mmlu", seed=seed, rank=rank)
    load0 = os.getloadavg()[0]
    print(f"flagship: {resp.n_llms} LLMs x {resp.n_items} items in {resp.n_domains} domains, rank {rank}; "
          f"load average {load0:.1f} before the fit", flush=True)
    t0, c0 = time.perf_counter(), time.process_time()
    _, init = _mtl_init(resp, model="2pl", guessing=None, seed=seed)
    t_mtl = time.perf_counter() - t0
    c_mtl = time.process_time() - c0
    spec = "factor-2pl" if rank == 1 else "factor2-2pl"
    post, fit, stages = collapsed_fit(resp, spec, init, draws=draws, tune=tune, chains=chains, seed=seed,
                                      sampler=sampler, thin=thin)
    wall = time.perf_counter() - t0
    out = {
        "benchmark": f"flagship collapsed, rank {rank}",
        "sampler": fit.info["sampler"], "imh_pilot": fit.info.get("imh_pilot"), "imh": fit.info.get("imh"),
        "draws": draws, "thin": thin, "tune": fit.info["tune"], "chains": chains,
        "mtl_seconds": round(t_mtl, 1),
        "bayes_seconds_after_mtl": round(wall - t_mtl, 1),
        "wall_seconds": round(wall, 1),
        "cpu_seconds": {"mtl": round(c_mtl, 1), "after_mtl": round(time.process_time() - c0 - c_mtl, 1)},
        "ratio_to_this_mtl": round(wall / t_mtl, 2),
        f"ratio_to_mtl_{mtl_reference:g}s": round(wall / mtl_reference, 2),
        "load_average_before": round(load0, 1),
        "load_average_after": round(os.getloadavg()[0], 1),
        "peak_rss_gb": round(_peak_rss_gb(), 2),
        "stage_seconds": {k: round(v, 1) for k, v in stages.items()},
        "leapfrog_steps_per_draw": (round(float(fit.sample_stats["n_steps"].mean()), 2)
                                    if "n_steps" in fit.sample_stats else None),
        "inner_nodes": fit.info["n_inner_nodes"], "outer_nodes": fit.info["n_outer_nodes"],
        "whitening": fit.info.get("whitening"),
        "quadrature_check": {k: v for k, v in fit.info["quadrature_check"].items() if k != "fine_grid"},
        "diagnostics_structure": fit.info.get("structure_diagnostics_all_draws") or _structure_diagnostics(post, fit),
        "diagnostics_structure_kept_draws": _structure_diagnostics(post, fit) if thin > 1 else None,
        "theta": _coverage(post, "theta", truth),
        "overall": _coverage(post, "overall", truth_ov),
    }
    print(json.dumps(out, indent=1, default=float), flush=True)
    return out


def _flagship_structure(seed: int = 0, rank: int = 1, n_llms: int = 4272):
    """The flagship's tables, the structure's mode on the default grid, as sample_structure finds them, and
    the loadings' layout and prior scale."""
    from mtlirt.bayes import collapsed_grid as cg
    from mtlirt.bayes import collapsed_kernel as ck
    from mtlirt.bayes import collapsed_structure as cs
    from mtlirt.bayes._factor import factor_parts, loading_layout
    from mtlirt.bayes.fixed_items import build_tables, resolve_item_values
    from mtlirt.bayes.init import initial_values
    from mtlirt.bayes.marginal import quadrature_nodes
    from mtlirt.bayes.model import anchor_domains
    from mtlirt.bayes.spec import load_spec
    from mtlirt.data.responses import as_responses
    from mtlirt.fitting import _mtl_init

    resp, _, _ = _simulated(n_llms, preset="mmlu", seed=seed, rank=rank)
    _, init = _mtl_init(resp, model="2pl", guessing=None, seed=seed)
    arr = as_responses(resp)
    spec = load_spec("factor-2pl" if rank == 1 else "factor2-2pl")
    items = resolve_item_values(arr, spec, None, init)
    tables = build_tables(arr, items["a"], items["d"], items["c"])
    anchors = anchor_domains(arr, rank)
    iv = initial_values(arr, spec, anchors, init, include_items=False,
                        trait_centered=np.ones(arr.n_domains, dtype=bool))
    K = arr.n_domains
    layout = loading_layout(K, rank, anchors)
    eta0, lam0, psi0 = factor_parts(np.asarray(iv["eta_raw"], float), iv.get("loading_free"),
                                    np.asarray(iv["loading_diag"], float), K, anchors)
    grid = cg.build_grid(tables, lam0, psi0, quad=quadrature_nodes(tables, eta0 @ lam0.T, psi0))
    V0 = cs._v_of(iv.get("loading_free"), np.asarray(iv["loading_diag"], float), K, layout)
    V1, _ = cs.find_mode(grid, V0, layout, spec.priors.loading_scale)
    lam, psi = ck.structure_from_v(V1)
    return tables, cg.regrid(grid, tables, lam, psi), V1, layout, spec.priors.loading_scale


def _cpu_ms(f, repeat: int) -> dict:
    f()
    cpu, wall = [], []
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        f()
        wall.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    return {"cpu_ms_min": round(1e3 * min(cpu), 1), "cpu_ms_median": round(1e3 * float(np.median(cpu)), 1),
            "wall_ms_median": round(1e3 * float(np.median(wall)), 1)}


#: The modules of the collapsed route that bench_kernel times, in the order they import each other.
KERNEL_MODULES = ("collapsed_kernel", "collapsed_grid", "collapsed_draws")


def _current_modules():
    """The current modules of :data:`KERNEL_MODULES` as one namespace."""
    import importlib
    import types

    ns = types.SimpleNamespace()
    for name in KERNEL_MODULES:
        vars(ns).update(vars(importlib.import_module(f"mtlirt.bayes.{name}")))
    return ns


def _module_at(commit: str):
    """The collapsed route's kernel, grid and draws as they were at a commit (numba's cache off), as one
    namespace: the modules of :data:`KERNEL_MODULES` where the commit has them (each importing the others at
    that commit), else its single ``collapsed.py``."""
    import importlib.util
    import subprocess
    import tempfile
    import types

    here = os.path.dirname(os.path.abspath(__file__))

    def show(name):
        out = subprocess.run(["git", "show", f"{commit}:src/mtlirt/bayes/{name}.py"], capture_output=True,
                             text=True, cwd=here)
        return out.stdout if out.returncode == 0 else None

    names = KERNEL_MODULES if show(KERNEL_MODULES[0]) is not None else ("collapsed",)
    folder, ns = tempfile.mkdtemp(), types.SimpleNamespace()
    for name in names:
        src = show(name).replace("cache=True", "cache=False")
        for other in names:
            src = src.replace(f"mtlirt.bayes.{other} import", f"{other}_at_commit import")
        path = os.path.join(folder, f"{name}_at_commit.py")
        with open(path, "w") as fh:
            fh.write(src)
        spec = importlib.util.spec_from_file_location(f"{name}_at_commit", path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod  # dataclasses, and the later modules' imports, look it up there
        spec.loader.exec_module(mod)
        vars(ns).update(vars(mod))
    return ns


def bench_kernel(seed: int = 0, rank: int = 1, repeat: int = 7, baseline: str | None = None,
                 n_draws: int = 16) -> dict:
    """The log density + gradient and the exact draws at the flagship shape,
    timed alone (no sampling; the draws also from stored node totals, as a fit
    with IMH draws them), and the quadrature against a fine grid at 8
    structures 3% from the mode; with ``baseline`` the same for the module
    at that commit, on its own default grid around the same centres."""
    from mtlirt.bayes import collapsed_grid as cg
    from mtlirt.bayes import collapsed_kernel as ck

    load0 = os.getloadavg()[0]
    tables, grid, V, _, _ = _flagship_structure(seed, rank)
    lam, psi = ck.structure_from_v(V)
    rng = np.random.default_rng(0)
    Vs = V[None] * (1 + 0.03 * rng.standard_normal((8,) + V.shape))
    lams, psis = ck.structure_from_v(Vs)
    N, K = grid.shape

    def summary(mod, g):
        out = {"inner_nodes": int(g.logw.shape[1]), "outer_nodes": int(g.offsets.shape[0]),
               "logp_and_gradient": _cpu_ms(lambda: mod._call(g, lam, psi, mode=1), repeat),
               "logp_value_only": _cpu_ms(lambda: mod._call(g, lam, psi, mode=0), repeat)}
        L = np.broadcast_to(lam, (1, n_draws) + lam.shape).copy()
        P = np.broadcast_to(psi, (1, n_draws) + psi.shape).copy()

        def per_draw(**kw):
            mod.draw_llm_side(g, L[:, :1], P[:, :1], **kw)  # compiled and warm before the timing
            t, c = time.perf_counter(), time.process_time()
            mod.draw_llm_side(g, L, P, **kw)
            return {"cpu_ms": round(1e3 * (time.process_time() - c) / n_draws, 1),
                    "wall_ms": round(1e3 * (time.perf_counter() - t) / n_draws, 1)}

        out["llm_side_draws_per_structure_draw"] = per_draw()
        if hasattr(mod, "StoredNodes"):  # as the fit draws them: from the node totals IMH kept
            nodes = np.empty((g.offsets.shape[0], N))
            mod._call(g, lam, psi, node_out=nodes)
            kept = mod.StoredNodes([(nodes - nodes.max(0)).astype(np.float32)], np.zeros((1, n_draws), int))
            out["llm_side_draws_per_structure_draw"]["from_imh_node_totals"] = per_draw(stored=kept)
        q = mod.quadrature_check(g, tables, lams, psis)
        out["quadrature_check"] = {k: v for k, v in q.items() if k not in ("fine_grid", "seconds")}
        return out

    out = {"benchmark": f"flagship kernel, rank {rank}: {N} LLMs x {K} domains", "load_average_before": load0,
           "current": summary(_current_modules(), grid)}
    if baseline:
        old = _module_at(baseline)
        mu, cov, tm, _ = cg.posterior_moments(grid, lam, psi)
        g_old = old.build_grid(tables, lam, psi, mu=mu, cov=cov + 1e-10 * np.eye(rank)[None], theta_mean=tm,
                               info=grid.info)
        out[f"at {baseline}"] = summary(old, g_old)
    out["load_average_after"] = round(os.getloadavg()[0], 1)
    print(json.dumps(out, indent=1, default=float), flush=True)
    return out


def bench_compare(seed: int = 3, draws: int = 1000, tune: int = 1000, chains: int = 4, rank: int = 1,
                  sampler: str = "auto") -> dict:
    from mtlirt.bayes import fit_bayes
    from mtlirt.bayes.fixed_items import resolve_item_values
    from mtlirt.bayes.spec import load_spec
    from mtlirt.data.responses import as_responses
    from mtlirt.fitting import _mtl_init

    resp, truth, truth_ov = _simulated(150, [10, 15, 20, 30, 40, 60], seed=seed, rank=rank)
    spec = "factor-2pl" if rank == 1 else "factor2-2pl"
    _, init = _mtl_init(resp, model="2pl", guessing=None, seed=seed)
    t0 = time.perf_counter()
    new, fit, stages = collapsed_fit(resp, spec, init, draws=draws, tune=None if sampler != "nutpie" else tune,
                                     chains=chains, seed=seed, sampler=sampler)
    t_new = time.perf_counter() - t0
    items = resolve_item_values(as_responses(resp), load_spec(spec), None, init)
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
           "collapsed_sampler": fit.info["sampler"], "imh_pilot": fit.info.get("imh_pilot"),
           "seconds": {"collapsed": round(t_new, 1), "sampled": round(t_old, 1)},
           "collapsed_stage_seconds": {k: round(v, 1) for k, v in stages.items()},
           "quadrature_check": {k: v for k, v in fit.info["quadrature_check"].items() if k != "fine_grid"},
           "diagnostics_structure": _structure_diagnostics(new, fit), **rows}
    print(json.dumps(out, indent=1, default=float), flush=True)
    return out


def bench_samplers(seed: int = 3, draws: int = 1000, tune: int = 1000, chains: int = 4, rank: int = 1,
                   n_llms: int = 150) -> dict:
    """The same integrated model sampled by IMH and by NUTS (nutpie, ``tune``
    tuning steps): the structure's and the LLM side's posteriors compared."""
    from mtlirt.fitting import _mtl_init

    resp, truth, truth_ov = _simulated(n_llms, [10, 15, 20, 30, 40, 60], seed=seed, rank=rank)
    spec = "factor-2pl" if rank == 1 else "factor2-2pl"
    _, init = _mtl_init(resp, model="2pl", guessing=None, seed=seed)
    fits, secs, diag = {}, {}, {}
    for name, smp, tn in (("imh", "imh", None), ("nuts", "nutpie", tune)):
        t0 = time.perf_counter()
        post, fit, stages = collapsed_fit(resp, spec, init, draws=draws, tune=tn, chains=chains, seed=seed,
                                          sampler=smp)
        secs[name] = {"wall": round(time.perf_counter() - t0, 1), "sampling": round(stages.get(name, 0.0), 1)}
        fits[name] = post
        diag[name] = _structure_diagnostics(post, fit)
        if name == "imh":
            diag[name]["imh"] = fit.info["imh"]
    rows = {}
    for var, tr in (("loadings", None), ("theta", truth), ("overall", truth_ov)):
        a, b = _summary(fits["imh"], var), _summary(fits["nuts"], var)
        w = b[2] - b[1]
        rows[var] = {
            "width_ratio_imh_to_nuts": round(float((a[2] - a[1]).mean() / w.mean()), 4),
            "mean_abs_endpoint_shift_share_of_width": round(
                float((np.abs(a[1] - b[1]) + np.abs(a[2] - b[2])).mean() / 2 / w.mean()), 4),
            "max_abs_mean_difference_share_of_width": round(float((np.abs(a[0] - b[0]) / w).max()), 3),
        }
        if tr is not None:
            rows[var]["coverage90"] = {"imh": _coverage(fits["imh"], var, tr)["coverage90"],
                                       "nuts": _coverage(fits["nuts"], var, tr)["coverage90"]}
    out = {"benchmark": f"IMH vs NUTS on the integrated route, {n_llms} LLMs, seed {seed}, rank {rank}",
           "seconds": secs, "diagnostics_structure": diag, **rows}
    print(json.dumps(out, indent=1, default=float), flush=True)
    return out


def _cpu_seconds() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _route(resp, spec: str, init: dict, llm_side: str, *, draws: int, chains: int, seed: int, thin: int = 1):
    """One fixed-items Bayesian fit as ``mtlirt fit --method bayes --items fixed
    --llm-side <llm_side>`` runs it after its MTL fit (``init``: that fit's
    values, so both routes share the items): (estimate, record)."""
    from mtlirt.fitting import fit

    load0 = os.getloadavg()[0]
    t0, c0 = time.perf_counter(), _cpu_seconds()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est = fit(resp, "bayes", spec=spec, items="fixed", init=init, llm_side=llm_side, draws=draws,
                  chains=chains, seed=seed, progress=False, log_likelihood=False, keep_raw=False,
                  **({"thin": thin} if thin > 1 else {}))
    info = est.info
    diag = info.get("diagnostics", {})
    rec = {
        "llm_side": llm_side, "sampler": info.get("sampler"), "tune": info.get("tune"), "draws": draws,
        "thin": thin, "chains": chains,
        "wall_seconds": round(time.perf_counter() - t0, 1), "cpu_seconds": round(_cpu_seconds() - c0, 1),
        "load_average_before_after": [round(load0, 1), round(os.getloadavg()[0], 1)],
        "stage_seconds": {k: round(v, 1) for k, v in (info.get("stage_seconds") or {}).items()},
        "diagnostics": {k: diag[k] for k in ("converged", "max_rhat", "worst_rhat", "min_ess_bulk", "min_ess_tail",
                                             "divergences", "min_bfmi", "pareto_khat", "n_parameters")
                        if k in diag},
        "warnings": sorted({f"{w.category.__name__}: {str(w.message)[:160]}" for w in caught}),
    }
    if llm_side == "integrated":
        rec["imh_pilot"] = info.get("imh_pilot")
        rec["imh_acceptance"] = (info.get("imh") or {}).get("acceptance")
        rec["overall_spread"] = info.get("overall_spread")
        rec["quadrature_check"] = {k: v for k, v in (info.get("quadrature_check") or {}).items()
                                   if k != "fine_grid"}
    return est, rec


def _tail_ess_median(ds, var: str, n: int = 2000) -> float:
    """Median tail ESS of (at most ``n``, evenly spread) scalars of a variable:
    the Monte Carlo yardstick of the interval endpoints."""
    import arviz as az

    x = ds[var].transpose("chain", "draw", ...).values
    x = x.reshape(x.shape[0], x.shape[1], -1)
    cols = np.unique(np.linspace(0, x.shape[2] - 1, min(n, x.shape[2])).astype(int))
    import xarray as xr

    ess = az.ess(xr.DataArray(x[:, :, cols], dims=("chain", "draw", "scalar")), method="tail")
    return float(np.median(ess.values))


def _agreement(a_ds, b_ds, var: str) -> dict:
    """The integrated route (``a``) against the sampled one (``b``) on one
    variable: widths, endpoint shifts, means, and what Monte Carlo error alone
    would shift (two independent 5%/95% quantile estimates at the median tail
    ESS of each route: sqrt(2 / pi) sqrt(1 / ess_a + 1 / ess_b)
    sqrt(0.05 x 0.95) / phi(1.645), in shares of a 3.29-sd width)."""
    from scipy.stats import spearmanr

    a, b = _summary(a_ds, var), _summary(b_ds, var)
    w = b[2] - b[1]
    ea, eb = _tail_ess_median(a_ds, var), _tail_ess_median(b_ds, var)
    mc = np.sqrt(2 / np.pi) * np.sqrt(1 / ea + 1 / eb) * np.sqrt(0.05 * 0.95) / 0.10314 / 3.29
    return {
        "mean_width90_sampled_route": round(float(w.mean()), 4),
        "width_ratio_integrated_to_sampled": round(float((a[2] - a[1]).mean() / w.mean()), 4),
        "mean_abs_endpoint_shift_share_of_width": round(
            float((np.abs(a[1] - b[1]) + np.abs(a[2] - b[2])).mean() / 2 / w.mean()), 4),
        "monte_carlo_expected_shift_share_of_width": round(float(mc), 4),
        "median_tail_ess": {"integrated": round(ea), "sampled": round(eb)},
        "rms_mean_difference": round(float(np.sqrt(((a[0] - b[0]) ** 2).mean())), 4),
        "max_abs_mean_difference_share_of_width": round(float((np.abs(a[0] - b[0]) / w).max()), 3),
        "spearman_posterior_means": round(float(spearmanr(a[0].ravel(), b[0].ravel())[0]), 5),
        "largest_mean_differences": _largest_differences(a, b, w),
    }


def _largest_differences(a, b, w, n: int = 5) -> list[dict]:
    """The ``n`` scores whose posterior means differ most between the routes
    (shares of the sampled route's width), with where their LLM stands: the
    share of LLMs whose overall (mean over the domains) posterior mean on the
    sampled route lies below it."""
    share = np.abs(a[0] - b[0]) / w
    level = b[0] if b[0].ndim == 1 else b[0].mean(1)
    pct = np.argsort(np.argsort(level)) / max(1, len(level) - 1)
    out = []
    for flat in np.argsort(-share, axis=None)[:n]:
        idx = np.unravel_index(flat, share.shape)
        out.append({"llm": int(idx[0]), **({"domain": int(idx[1])} if len(idx) > 1 else {}),
                    "share_of_width": round(float(share[idx]), 3),
                    "integrated_mean": round(float(a[0][idx]), 4), "sampled_mean": round(float(b[0][idx]), 4),
                    "llm_percentile": round(float(pct[idx[0]]), 4)})
    return out


def _both_routes(resp, spec: str, *, draws: int, chains: int, seed: int, thin: int = 1,
                 routes=("integrated", "sampled")):
    """The MTL fit that ``mtlirt fit --method bayes --items fixed --model spec``
    runs, then each route from its values at the same seed."""
    from mtlirt.bayes.spec import load_spec
    from mtlirt.fitting import _mtl_init

    model, guessing = load_spec(spec).point_item_model
    load0 = os.getloadavg()[0]
    t0, c0 = time.perf_counter(), _cpu_seconds()
    res, init = _mtl_init(resp, model=model, guessing=guessing, seed=seed)
    mtl = {"wall_seconds": round(time.perf_counter() - t0, 1), "cpu_seconds": round(_cpu_seconds() - c0, 1),
           "load_average_before_after": [round(load0, 1), round(os.getloadavg()[0], 1)],
           "rank": int(res.rank), "C": res.C, "model": model, "guessing": guessing}
    print(f"  MTL fit: {json.dumps(mtl, default=float)}", flush=True)
    ests, recs = {}, {}
    for side in routes:
        ests[side], recs[side] = _route(resp, spec, init, side, draws=draws, chains=chains, seed=seed,
                                        thin=thin if side == "integrated" else 1)
        recs[side]["ratio_wall_to_mtl"] = round(recs[side]["wall_seconds"] / mtl["wall_seconds"], 2)
        recs[side]["ratio_cpu_to_mtl"] = round(recs[side]["cpu_seconds"] / mtl["cpu_seconds"], 2)
        print(f"  {side}: {json.dumps(recs[side], default=float)}", flush=True)
    return ests, recs, mtl


def bench_flagship_routes(seed: int = 0, draws: int = 1000, chains: int = 4, thin: int = 2,
                          n_llms: int = 4272) -> dict:
    """The flagship (ideal scenario, rank 1): the MTL fit that ``mtlirt fit
    --method bayes --items fixed`` runs, then both routes from its values at
    the same seed (the integrated route keeping every ``thin``-th structure
    draw for its LLM side): their agreement and coverage of the truth."""
    resp, truth, truth_ov = _simulated(n_llms, preset="mmlu", seed=seed)
    print(f"flagship routes seed {seed}: {resp.n_llms} LLMs x {resp.n_items} items in {resp.n_domains} domains",
          flush=True)
    ests, recs, mtl = _both_routes(resp, "factor-2pl", draws=draws, chains=chains, seed=seed, thin=thin)
    posts = {k: e.posterior for k, e in ests.items()}
    out = {"benchmark": f"flagship routes seed {seed}: {resp.n_llms} LLMs x {resp.n_items} items, "
                        f"{resp.n_domains} domains, factor-2pl",
           "mtl": mtl, **recs, "peak_rss_gb": round(_peak_rss_gb(), 2)}
    for var, tr in (("theta", truth), ("overall", truth_ov)):
        out[var] = _agreement(posts["integrated"], posts["sampled"], var)
        out[var]["coverage90"] = {k: _coverage(p, var, tr) for k, p in posts.items()}
    print(json.dumps(out, indent=1, default=float), flush=True)
    return out


def bench_extremes(seed: int = 0, n_llms: int = 400, a_scale: float = 1.0, scenario: str = "ideal",
                   draws: int = 1000, chains: int = 4) -> dict:
    """Both fixed-items routes at the extremes of a small design (see the module docstring)."""
    from mtlirt.data.responses import Responses
    from mtlirt.data.simulate import simulate

    sim = simulate(n_llms, [120] * 6, seed=seed, scenario=scenario)
    resp = Responses.from_frame(sim.responses)
    truth = sim.domain_scores.loc[resp.llms, resp.domains].values
    truth_ov = _std_cols(sim.overall.loc[resp.llms, "score"].values)
    print(f"extremes seed {seed}: {resp.n_llms} LLMs x {resp.n_items} items in {resp.n_domains} domains, "
          f"{scenario} scenario, discriminations / {a_scale}", flush=True)
    from mtlirt.bayes.spec import load_spec
    from mtlirt.fitting import _mtl_init

    model, guessing = load_spec("factor-2pl").point_item_model
    res, init = _mtl_init(resp, model=model, guessing=guessing, seed=seed)
    init = {**init, "a": np.asarray(init["a"]) / a_scale}
    ests, recs = {}, {}
    for side in ("integrated", "sampled"):
        ests[side], recs[side] = _route(resp, "factor-2pl", init, side, draws=draws, chains=chains, seed=seed)
        recs[side]["overall_spread"] = ests[side].info.get("overall_spread")
        print(f"  {side}: {json.dumps(recs[side], default=float)}", flush=True)
    posts = {k: e.posterior for k, e in ests.items()}
    out = {"benchmark": f"extremes seed {seed}: {resp.n_llms} LLMs x {resp.n_items} items, {scenario}, "
                        f"a / {a_scale}", "mtl_rank": int(res.rank), **recs}
    for var, tr in (("theta", truth), ("overall", truth_ov)):
        out[var] = _agreement(posts["integrated"], posts["sampled"], var)
        out[var]["coverage90"] = {k: _coverage(p, var, tr) for k, p in posts.items()}
    print(json.dumps(out, indent=1, default=float), flush=True)
    return out


def _std_cols(x):
    return (x - x.mean(0)) / x.std(0)


def bench_realistic(seed: int = 0, n_llms: int = 500, scale: float = 0.1, spec: str = "factor-2pl",
                    draws: int = 1000, chains: int = 4, thin: int = 1) -> dict:
    """The realistic scenario (``simulate(..., preset="mmlu", scale=scale,
    scenario="realistic")``, as ``bench_coverage.py`` builds it): MTL fit, then
    both routes; coverage of the true domain scores (population scale) and of
    the overall score (standardised over the LLMs, as ``_simulated``)."""
    from mtlirt.data.responses import Responses

    simulate = sys.modules["mtlirt.data.simulate"].simulate
    sim = simulate(n_llms, preset="mmlu", scale=scale, scenario="realistic", similarity=0.1, seed=seed)
    resp = Responses.from_frame(sim.responses)
    truth = sim.domain_scores.loc[resp.llms, resp.domains].values
    truth_ov = _std_cols(sim.overall.loc[resp.llms, "score"].values)
    print(f"realistic seed {seed}: {resp.n_llms} LLMs x {resp.n_items} items in {resp.n_domains} domains, "
          f"spec {spec}", flush=True)
    ests, recs, mtl = _both_routes(resp, spec, draws=draws, chains=chains, seed=seed, thin=thin)
    posts = {k: e.posterior for k, e in ests.items()}
    out = {"benchmark": f"realistic scenario seed {seed}: {resp.n_llms} LLMs x {resp.n_items} items, "
                        f"{resp.n_domains} domains, {spec}",
           "mtl": mtl, **recs}
    for var, tr in (("theta", truth), ("overall", truth_ov)):
        out[var] = _agreement(posts["integrated"], posts["sampled"], var)
        out[var]["coverage90"] = {k: _coverage(p, var, tr) for k, p in posts.items()}
    print(json.dumps(out, indent=1, default=float), flush=True)
    return out


REAL_SETS = {
    "oll_v1": ("oll_v1/responses.csv.gz", {}),
    "mmlu_pro": ("mmlu_pro/responses.csv.gz", dict(ignore_columns=["subject"])),
    "chembench": ("chembench/responses.csv.gz", {}),
}


def bench_realdata(data: str = "oll_v1", max_llms: int | None = None, spec: str = "factor-2pl", seed: int = 0,
                   draws: int = 1000, chains: int = 4, thin: int = 1,
                   shared: str | None = None, routes=("integrated", "sampled"), all_llms: bool = True) -> dict:
    """A real leaderboard from the shared real-data folder (read by ``Responses.read``):
    the MTL fit as ``mtlirt fit --method bayes --items fixed`` runs it, then
    both routes at the same seed and their agreement. With ``max_llms`` both
    routes run on a seeded subsample of that many LLMs (its own MTL fit), and
    the integrated route also on all of them."""
    from mtlirt.data.responses import Responses
    from mtlirt.data.validate import DataWarning

    root = shared or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared")
    path, kw = REAL_SETS[data]
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataWarning)
        full = Responses.read(os.path.join(root, "data", path), **kw)
    print(f"{data}: {full.n_llms} LLMs x {full.n_items} items in {full.n_domains} domains "
          f"(read in {time.perf_counter() - t0:.1f} s)", flush=True)
    out = {"benchmark": f"real data {data}: {full.n_llms} LLMs x {full.n_items} items, {full.n_domains} domains, "
                        f"{spec}, seed {seed}"}
    resp = full
    if max_llms is not None and max_llms < full.n_llms:
        keep = np.sort(np.random.default_rng(seed).choice(full.n_llms, max_llms, replace=False))
        resp = full.subset(llms=[full.llms[i] for i in keep])
        out["subsample"] = f"{max_llms} of {full.n_llms} LLMs, numpy default_rng({seed}).choice"
        print(f"  both routes on {out['subsample']}", flush=True)
    ests, recs, mtl = _both_routes(resp, spec, draws=draws, chains=chains, seed=seed, thin=thin, routes=routes)
    posts = {k: e.posterior for k, e in ests.items()}
    out.update({"mtl": mtl, **recs})
    for var in ("theta", "overall"):
        if len(posts) == 2:
            out[var] = _agreement(posts["integrated"], posts["sampled"], var)
    if resp is not full and all_llms:
        del ests, posts
        print("  the integrated route on all LLMs", flush=True)
        _, recs_full, mtl_full = _both_routes(full, spec, draws=draws, chains=chains, seed=seed, thin=thin,
                                              routes=("integrated",))
        out["all_llms"] = {"mtl": mtl_full, "integrated": recs_full["integrated"]}
    print(json.dumps(out, indent=1, default=float), flush=True)
    return out


def _cpu_now() -> float:
    t = os.times()
    return t.user + t.system


def _cut_per_domain(resp, seed: int, most: int = 3):
    """Each domain cut to 1-``most`` of its items (seeded: ``default_rng(seed)``), every LLM kept."""
    rng = np.random.default_rng(seed)
    keep = []
    for sl in resp.domain_slices:
        items = resp.items[sl]
        n = min(len(items), int(rng.integers(1, most + 1)))
        keep += list(rng.choice(items, n, replace=False))
    return resp.subset(items=keep)


def _default_data(*, data: str | None, preset: str, scale: float, n_llms: int, missing: float | None,
                  scenario: str, rank: int, seed: int, max_llms: int | None, cut: bool, shared: str | None) -> tuple:
    """The leaderboard of ``default``: ``(responses, name, true domain scores or None, true overall or None)``."""
    from mtlirt.data.responses import Responses
    from mtlirt.data.simulate import simulate
    from mtlirt.data.validate import DataWarning

    truth = truth_ov = None
    if data is not None:
        root = shared or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared")
        path, kw = REAL_SETS[data]
        if data == "mmlu_pro" and cut:
            kw = dict(domain_column="subject", ignore_columns=["domain"], drop_unassigned=True)
        if data == "oll_v1" and cut:  # four benchmarks of hundreds of items: bench_tiny's pseudo-domains
            from pathlib import Path

            from bench_tiny import oll_set

            resp = oll_set(seed, Path(root))[0]
            name = f"{data} cut to ~100 items in pseudo-domains of 1-5 items"
        else:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DataWarning)
                resp = Responses.read(os.path.join(root, "data", path), **kw)
            name = f"{data}{' cut to 1-3 items per domain' if cut else ''}"
        if max_llms is not None and max_llms < resp.n_llms:
            keep = np.sort(np.random.default_rng(seed).choice(resp.n_llms, max_llms, replace=False))
            resp = resp.subset(llms=[resp.llms[i] for i in keep])
        if cut and data != "oll_v1":
            resp = _cut_per_domain(resp, seed)
    else:
        sim = simulate(n_llms, preset=preset, scale=scale, missing=missing, scenario=scenario, rank=rank, seed=seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DataWarning)
            resp = Responses.from_frame(sim.responses)
        truth = sim.domain_scores.loc[resp.llms, resp.domains].values
        ov = sim.overall.loc[resp.llms].values[:, 0]
        truth_ov = (ov - ov.mean()) / ov.std()
        name = f"simulate(preset={preset}, scale={scale}, missing={missing}, scenario={scenario}, rank={rank})"
    return resp, name, truth, truth_ov


def bench_eta_draws(*, data: str | None = None, preset: str = "mmlu", scale: float = 1.0, n_llms: int = 4272,
                    missing: float | None = None, scenario: str = "ideal", seed: int = 0,
                    max_llms: int | None = None, n_fine: int = 97) -> dict:
    """The overall traits' draws against a fine grid (rank 1): the default Bayesian fit of the leaderboard
    (as ``default`` reads it), its grid and structure draws recorded as it draws the LLM side; at three
    structure draws, every LLM's overall trait drawn by the fit's own inverse CDF (the polynomial through
    the grid's Gauss-Hermite nodes) at the uniforms 0.05, 0.5 and 0.95, against the same quantiles of the
    kernel on ``n_fine`` equally spaced nodes over the same span (log-linear between them), in posterior
    sds: the largest error and its 99th percentile over the LLMs."""
    from mtlirt.bayes import collapsed as cl
    from mtlirt.bayes import collapsed_draws as cd
    from mtlirt.bayes import collapsed_grid as cg
    from mtlirt.bayes import collapsed_kernel as ck
    from mtlirt.fitting import fit

    resp, name, _, _ = _default_data(data=data, preset=preset, scale=scale, n_llms=n_llms, missing=missing,
                                     scenario=scenario, rank=1, seed=seed, max_llms=max_llms, cut=False,
                                     shared=None)
    seen = {}
    real = cl.draw_llm_side

    def recording(grid, lam, psi, **kw):
        seen.update(grid=grid, lam=lam, psi=psi)
        return real(grid, lam, psi, **kw)

    cl.draw_llm_side = recording
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit(resp, "bayes", seed=seed, progress=False)
    finally:
        cl.draw_llm_side = real
    grid, lam, psi = seen["grid"], seen["lam"], seen["psi"]
    N = grid.shape[0]
    hw = grid.outer_half_width
    mu, sd_g = grid.mu[0], grid.chol[0, 0]
    fine_grid = cg.with_outer(grid, n_fine)
    x = np.linspace(-hw, hw, n_fine)
    xx = np.linspace(-hw, hw, 10 * (n_fine - 1) + 1)
    pts = cd._eta_points(grid)
    C, D = lam.shape[:2]
    errors = []
    for c, t in ((0, 0), (C // 2, D // 2), (C - 1, D - 1)):
        nodes = np.empty((grid.offsets.shape[0], N))
        ck._call(grid, lam[c, t], psi[c, t], node_out=nodes)
        fine = np.empty((n_fine, N))
        ck._call(fine_grid, lam[c, t], psi[c, t], node_out=fine)
        lp = np.stack([np.interp(xx, x, fine[:, i]) for i in range(N)], axis=1)
        p = np.exp(lp - lp.max(0))
        cdf = np.concatenate([np.zeros((1, N)), np.cumsum(0.5 * (p[1:] + p[:-1]), axis=0)])
        cdf /= cdf[-1]
        w = p / p.sum(0)
        sd = np.sqrt((xx[:, None] ** 2 * w).sum(0) - ((xx[:, None] * w).sum(0)) ** 2)
        for q in (0.05, 0.5, 0.95):
            eta = np.empty((N, 1))
            cd._draw_eta(nodes, *pts, grid.mu, grid.chol, np.full((N, 1), q), eta)
            z = (eta[:, 0] - mu) / sd_g
            ref = np.array([np.interp(q, cdf[:, i], xx) for i in range(N)])
            errors.append(np.abs(z - ref) / sd)
    err = np.concatenate(errors)
    out = {"benchmark": f"overall-trait draws against {n_fine} equally spaced nodes: {name}, seed {seed}",
           "llms": N, "gauss_hermite_nodes": int(grid.n_axis), "structure_draws": 3,
           "max_error_sd": round(float(err.max()), 5), "p99_error_sd": round(float(np.quantile(err, 0.99)), 5)}
    print(json.dumps(out, indent=1), flush=True)
    return out


def bench_default(*, data: str | None = None, preset: str = "mmlu", scale: float = 1.0, n_llms: int = 4272,
                  missing: float | None = None, scenario: str = "ideal", rank: int = 1, seed: int = 0,
                  max_llms: int | None = None, cut: bool = False, shared: str | None = None,
                  target_accept: float | None = None, spread: str | None = None,
                  llm_side: str | None = None) -> dict:
    """The default Bayesian fit (``mtlirt fit DATA --method bayes``: the route, run length and thinning
    chosen by the fit) against the default MTL fit (``--method mtl``) of the same data, one after the
    other in one process: wall and CPU seconds of each and their ratios (and of a second MTL fit, without
    the process's first-call costs: imports, compiled code loaded from its cache), the route chosen and why, the
    convergence checks and, on a simulation, the 90% coverage of the true domain and overall scores.
    ``data``: a shared real leaderboard (``--max-llms`` a seeded subsample; ``--cut``: each domain cut to
    1-3 items, mmlu_pro by its ``subject`` column, oll_v1 into bench_tiny.py's pseudo-domains of 1-5
    items); else ``mtlirt.data.simulate`` with ``preset``, ``scale``, ``missing``, ``scenario`` and
    ``rank``. Rank 2 fits the ``factor2-2pl`` spec. ``target_accept``: NUTS's, where the fit samples by
    NUTS (default: the fit's own); ``spread``: the spec's ``discrimination_spread`` (default: the spec's
    own); ``llm_side``: the fit's (default: its own choice)."""
    from mtlirt.bayes.spec import load_spec
    from mtlirt.fitting import fit

    resp, name, truth, truth_ov = _default_data(data=data, preset=preset, scale=scale, n_llms=n_llms,
                                                missing=missing, scenario=scenario, rank=rank, seed=seed,
                                                max_llms=max_llms, cut=cut, shared=shared)
    print(f"{name}: {resp.n_llms} LLMs x {resp.n_items} items in {resp.n_domains} domains; "
          f"load average {os.getloadavg()[0]:.1f}", flush=True)
    out = {"benchmark": f"default fits of {name}, seed {seed}", "llms": resp.n_llms, "items": resp.n_items,
           "domains": resp.n_domains, "load_average_before": round(os.getloadavg()[0], 1)}
    t0, c0 = time.perf_counter(), _cpu_now()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit(resp, "mtl", seed=seed)
    wall_mtl, cpu_mtl = time.perf_counter() - t0, _cpu_now() - c0
    print(f"MTL fit: wall {wall_mtl:.1f} s, CPU {cpu_mtl:.1f} s", flush=True)
    t0, c0 = time.perf_counter(), _cpu_now()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit(resp, "mtl", seed=seed)  # the same fit again: without the process's first-call costs
    wall_mtl2, cpu_mtl2 = time.perf_counter() - t0, _cpu_now() - c0
    t0, c0 = time.perf_counter(), _cpu_now()
    spec = load_spec("factor-2pl" if rank == 1 else f"factor{rank}-2pl")
    if spread is not None:
        spec = spec.with_changes(discrimination_spread=spread)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est = fit(resp, "bayes", seed=seed, spec=spec, progress=False, target_accept=target_accept,
                  **({} if llm_side is None else {"llm_side": llm_side}))
    wall_b, cpu_b = time.perf_counter() - t0, _cpu_now() - c0
    info = est.info
    d = info.get("diagnostics", {})
    out.update({
        "mtl": {"wall": round(wall_mtl, 1), "cpu": round(cpu_mtl, 1)},
        "bayes": {"wall": round(wall_b, 1), "cpu": round(cpu_b, 1)},
        "ratio_wall": round(wall_b / wall_mtl, 2), "ratio_cpu": round(cpu_b / cpu_mtl, 2),
        "mtl_second_fit": {"wall": round(wall_mtl2, 1), "cpu": round(cpu_mtl2, 1)},
        "ratio_wall_second": round(wall_b / wall_mtl2, 2),
        "load_average_after": round(os.getloadavg()[0], 1),
        "route": info.get("route"), "sampler": info.get("sampler"), "draws": info.get("draws"),
        "thin": info.get("thin"), "tune": info.get("tune"), "run_length": info.get("run_length"),
        "imh_pilot": info.get("imh_pilot"), "imh_fallback": info.get("imh_fallback"),
        "imh_acceptance": (info.get("imh") or {}).get("acceptance"),
        "inner_spacing": info.get("inner_spacing"), "fewer_outer_nodes": info.get("fewer_outer_nodes"),
        "more_outer_nodes": info.get("more_outer_nodes"), "outer_nodes": info.get("outer_nodes"),
        "converged": d.get("converged"),
        "diagnostics": {k: d.get(k) for k in ("max_rhat", "worst_rhat", "min_ess_bulk", "min_ess_tail",
                                              "divergences", "min_bfmi", "pareto_khat") if k in d},
        "quadrature_check": {k: v for k, v in (info.get("quadrature_check") or {}).items() if k != "fine_grid"},
        "seconds": {k: round(v, 1) for k, v in info.get("seconds", {}).items() if isinstance(v, (int, float))},
        "warnings": sorted({f"{w.category.__name__}: {str(w.message)[:120]}" for w in caught}),
        "peak_rss_gb": round(_peak_rss_gb(), 2),
    })
    out["at_divergences"] = _at_divergences(est)
    if truth is not None:
        post = est.posterior
        out["theta"] = _coverage(post, "theta", truth)
        out["overall"] = _coverage(post, "overall", truth_ov)
    print(json.dumps(out, indent=1, default=float), flush=True)
    return out


def _at_divergences(est) -> dict | None:
    """Where NUTS diverged: each scalar parameter's values at the divergent draws beside its 1st and 99th
    percentiles over all draws (None without divergences)."""
    tree = est.tree
    if "sample_stats" not in tree.children or "diverging" not in tree["sample_stats"]:
        return None
    div = np.asarray(tree["sample_stats"]["diverging"].values, dtype=bool)
    if not div.any():
        return None
    post = tree["posterior"].to_dataset()
    return {v: {"at": [round(float(x), 3) for x in post[v].values[div]],
                "q01_q99": [round(float(q), 3) for q in np.quantile(post[v].values, [0.01, 0.99])]}
            for v in post.data_vars if set(post[v].dims) == {"chain", "draw"}}


def bench_imh_share(*, seeds, preset: str = "mmlu", scale: float = 1.0, n_llms: int = 4272,
                    missing: float | None = None, shares=(0.1, None)) -> dict:
    """The IMH chains' convergence figures at fixed length against their defensive share (see module
    docstring); ``None`` in ``shares``: the default, ``IMH_DEFENSIVE``."""
    from mtlirt.bayes import imh as mh
    from mtlirt.fitting import fit

    resp, name, _, _ = _default_data(data=None, preset=preset, scale=scale, n_llms=n_llms, missing=missing,
                                     scenario="ideal", rank=1, seed=0, max_llms=None, cut=False, shared=None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mtl = fit(resp, "mtl", seed=0)
    default = mh.IMH_DEFENSIVE
    out = {"benchmark": f"IMH chains' defensive share at 250 draws per chain: {name}", "runs": {}, "mean": {}}
    try:
        for share in shares:
            mh.IMH_DEFENSIVE = default if share is None else share
            key = f"{mh.IMH_DEFENSIVE:g}"
            rows = []
            for s in seeds:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    est = fit(resp, "bayes", seed=s, init=mtl, draws=250, thin=1, sampler="imh", progress=False)
                d = est.info["diagnostics"]
                rows.append([d["max_rhat"], d["min_ess_bulk"], d["min_ess_tail"],
                             float(np.mean(est.info["imh"]["acceptance"]))])
                print(f"share {key}, seed {s}: R-hat {rows[-1][0]:.4f}, ESS bulk {rows[-1][1]:.0f}, tail "
                      f"{rows[-1][2]:.0f}, acceptance {rows[-1][3]:.3f}", flush=True)
            r = np.array(rows)
            out["runs"][key] = np.round(r, 4).tolist()
            out["mean"][key] = {"max_rhat_minus_1": round(float(r[:, 0].mean() - 1), 5),
                                "min_ess_bulk": round(float(r[:, 1].mean())),
                                "min_ess_tail": round(float(r[:, 2].mean())),
                                "acceptance": round(float(r[:, 3].mean()), 3)}
    finally:
        mh.IMH_DEFENSIVE = default
    print(json.dumps(out, indent=1), flush=True)
    return out


def bench_device(*, sizes=(4272, 17088), seed: int = 0, repeat: int = 5, draws: int = 0, chains: int = 4) -> list:
    """The collapsed log density and gradient in JAX (numpyro's route) on JAX's default device, a GPU where
    one is present, against the numba kernel on the CPU, at each number of LLMs of ``sizes`` (MMLU's
    subjects, rank 1); with ``draws``, numpyro's NUTS of the loadings on that device (as many tuning steps)."""
    import jax

    from mtlirt.bayes import collapsed_kernel as ck
    from mtlirt.bayes._jax import BLOCK, collapsed_loglik_jax, prepare, sample_structure_numpyro

    rows = []
    for n in sizes:
        t0 = time.perf_counter()
        tables, grid, V, layout, scale = _flagship_structure(seed, 1, n_llms=n)
        lam, psi = ck.structure_from_v(V)
        out = {"benchmark": f"collapsed log density and gradient, {grid.shape[0]} LLMs x {grid.shape[1]} domains",
               "device": str(jax.devices()[0]), "setup_seconds": round(time.perf_counter() - t0, 1),
               "numba_cpu": _cpu_ms(partial(ck._call, grid, lam, psi, mode=1), repeat)}
        v, dl, dp = ck._call(grid, lam, psi, mode=1)
        f = jax.jit(jax.value_and_grad(collapsed_loglik_jax, argnums=(1, 2)))
        for block in sorted({min(m, grid.shape[0]) for m in (BLOCK, 4 * BLOCK, grid.shape[0])}):  # LLMs per block
            blocked = prepare(grid, block=block)
            t = time.perf_counter()
            vj, (glj, gpj) = jax.block_until_ready(f(blocked, lam, psi))
            first = time.perf_counter() - t  # tracing and compiling included
            walls = []
            for _ in range(repeat):
                t = time.perf_counter()
                jax.block_until_ready(f(blocked, lam, psi))
                walls.append(time.perf_counter() - t)
            out[f"jax_block_{block}"] = {
                "first_call_seconds": round(first, 2), "wall_ms_median": round(1e3 * float(np.median(walls)), 2),
                "value_relative_difference": float(abs(float(vj) - v) / abs(v)),
                "gradient_largest_difference": float(max(np.abs(np.asarray(glj) - dl).max(),
                                                         np.abs(np.asarray(gpj) - dp).max()))}
        if draws:
            t = time.perf_counter()
            _, stats = sample_structure_numpyro(grid, layout, scale, V, draws=draws, tune=draws, chains=chains,
                                                seed=seed)
            out["numpyro_nuts"] = {"chains": chains, "tune_and_draws": draws, "wall_seconds": round(
                time.perf_counter() - t, 1), "leapfrog_steps_per_draw": round(float(stats["n_steps"].mean()), 1),
                "divergences": int(stats["diverging"].sum())}
        print(json.dumps(out, indent=1, default=float), flush=True)
        rows.append(out)
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("which", choices=["flagship", "flagship-routes", "compare", "samplers", "kernel", "realistic",
                                      "realdata", "extremes", "default", "eta-draws", "imh-share", "device"])
    ap.add_argument("--sampler", default="auto", choices=["auto", "imh", "nutpie"],
                    help="the structure's sampler on the integrated route (default: chosen by the IMH pilot)")
    ap.add_argument("--baseline", default=None, help="kernel: also time the module at this commit")
    ap.add_argument("--seeds", type=int, nargs="*", default=None)
    ap.add_argument("--draws", type=int, default=None)
    ap.add_argument("--tune", type=int, default=None)
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--rank", type=int, default=1)
    ap.add_argument("--n-llms", type=int, default=4272)
    ap.add_argument("--thin", type=int, default=1,
                    help="flagship, realistic, realdata: keep every n-th structure draw for the LLM side")
    ap.add_argument("--spec", default="factor-2pl", help="realistic, realdata: the model spec (CLI --model)")
    ap.add_argument("--scale", type=float, default=None,
                    help="realistic (default 0.1), default (default 1): multiplier of MMLU's domain sizes")
    ap.add_argument("--missing", type=float, default=None, help="default: share of missing responses")
    ap.add_argument("--cut", action="store_true", help="default --data: each domain cut to 1-3 items "
                    "(oll_v1: ~100 items in pseudo-domains of 1-5 items, as bench_tiny.py)")
    ap.add_argument("--target-accept", type=float, default=None, help="default: NUTS's target acceptance")
    ap.add_argument("--spread", default=None, choices=["auto", "pooled", "shared", "domain"],
                    help="default: the spec's discrimination_spread (the spread of the log discriminations)")
    ap.add_argument("--llm-side", default=None, choices=["auto", "integrated", "sampled"],
                    help="default: the fit's LLM side (CLI --llm-side; default: the fit's own choice)")
    ap.add_argument("--a-scale", type=float, default=1.0,
                    help="extremes: divide the fixed discriminations by this (spreads the LLMs wider)")
    ap.add_argument("--scenario", default="ideal", choices=["ideal", "realistic"],
                    help="extremes, default: the simulator")
    ap.add_argument("--data", default=None, choices=sorted(REAL_SETS),
                    help="realdata (default oll_v1), default (default: a simulation): the leaderboard")
    ap.add_argument("--max-llms", type=int, default=None,
                    help="realdata: both routes on a seeded subsample of this many LLMs (the integrated route "
                    "also on all)")
    ap.add_argument("--routes", default="integrated,sampled", help="realdata: the routes to run")
    ap.add_argument("--no-all-llms", action="store_true",
                    help="realdata --max-llms: skip the integrated route on all the LLMs")
    args = ap.parse_args(argv)
    if args.which == "realistic":
        for s in args.seeds or [0, 1, 2]:
            bench_realistic(s, n_llms=args.n_llms if args.n_llms != 4272 else 500, scale=args.scale or 0.1,
                            spec=args.spec, draws=args.draws or 1000, chains=args.chains, thin=args.thin)
    elif args.which == "realdata":
        for s in args.seeds or [0]:
            bench_realdata(args.data or "oll_v1", max_llms=args.max_llms, spec=args.spec, seed=s,
                           draws=args.draws or 1000, chains=args.chains, thin=args.thin,
                           routes=tuple(args.routes.split(",")), all_llms=not args.no_all_llms)
    elif args.which == "extremes":
        for s in args.seeds or [0]:
            bench_extremes(s, n_llms=args.n_llms if args.n_llms != 4272 else 400, a_scale=args.a_scale,
                           scenario=args.scenario, draws=args.draws or 1000, chains=args.chains)
    elif args.which == "flagship-routes":
        for s in args.seeds or [0]:
            bench_flagship_routes(s, draws=args.draws or 1000, chains=args.chains,
                                  thin=args.thin if args.thin > 1 else 2, n_llms=args.n_llms)
    elif args.which == "default":
        for s in args.seeds or [0]:
            bench_default(data=args.data, scale=args.scale or 1.0, n_llms=args.n_llms, missing=args.missing,
                          scenario=args.scenario, rank=args.rank, seed=s, max_llms=args.max_llms, cut=args.cut,
                          target_accept=args.target_accept, spread=args.spread, llm_side=args.llm_side)
    elif args.which == "imh-share":
        bench_imh_share(seeds=args.seeds or list(range(8)), scale=args.scale or 1.0, n_llms=args.n_llms,
                        missing=args.missing)
    elif args.which == "eta-draws":
        bench_eta_draws(data=args.data, scale=args.scale or 1.0, n_llms=args.n_llms, missing=args.missing,
                        scenario=args.scenario, max_llms=args.max_llms)
    elif args.which == "kernel":
        bench_kernel(rank=args.rank, baseline=args.baseline)
    elif args.which == "device":
        sizes = [args.n_llms] if args.n_llms != 4272 else [4272, 4 * 4272]
        bench_device(sizes=sizes, seed=(args.seeds or [0])[0], draws=args.draws or 0, chains=args.chains)
    elif args.which == "flagship":
        for s in args.seeds or [0]:
            bench_flagship(s, draws=args.draws or 250, tune=args.tune, chains=args.chains,
                           rank=args.rank, n_llms=args.n_llms, sampler=args.sampler, thin=args.thin)
    elif args.which == "samplers":
        for s in args.seeds or [3]:
            bench_samplers(s, draws=args.draws or 1000, tune=args.tune or 1000, chains=args.chains, rank=args.rank,
                           n_llms=args.n_llms if args.n_llms != 4272 else 150)
    else:
        for s in args.seeds or [3]:
            bench_compare(s, draws=args.draws or 1000, tune=args.tune or 1000, chains=args.chains, rank=args.rank,
                          sampler=args.sampler)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
