"""Benchmarks of the Bayesian model (mtlirt.bayes), printing measured figures.

Usage::

    .venv/bin/python benchmarks/bench_bayes.py calibration [--seeds 3 4 5]
    .venv/bin/python benchmarks/bench_bayes.py joint
    .venv/bin/python benchmarks/bench_bayes.py flagship [--draws 500 --tune 500]
    .venv/bin/python benchmarks/bench_bayes.py fixed-vs-joint [--seeds 3]
    .venv/bin/python benchmarks/bench_bayes.py pin [--seeds 3]
    .venv/bin/python benchmarks/bench_bayes.py real [--items joint|fixed]
    .venv/bin/python benchmarks/bench_bayes.py marginal-cost
    .venv/bin/python benchmarks/bench_bayes.py joint-cost
    .venv/bin/python benchmarks/bench_bayes.py joint-warmup [--tune 1000 --draws 100]
    .venv/bin/python benchmarks/bench_bayes.py joint-geometry [--pin none --target-accept 0.8 ...]
    .venv/bin/python benchmarks/bench_bayes.py few-llms [--seeds 0 1 2 3 --scenario realistic --draws 8000]
    .venv/bin/python benchmarks/bench_bayes.py all

(a) calibration: 150 LLMs, domains of 10, 15, 20, 30, 40, 60 items (rank 1,
    2PL), joint NUTS; 90% intervals of the domain scores should cover the true
    scores 85-95% of the time, max R-hat <= 1.01, no divergences, < 15 min.
(b) joint: 300 LLMs x MMLU sizes x 0.08 (about 1,150 items, 57 domains),
    joint NUTS (4 chains, the fit's default draws and tuning steps unless
    ``--draws``/``--tune``), converged within 5 minutes.
(c) flagship: 4,272 LLMs x 57 domains x 14,042 items (MMLU sizes), items
    calibrated by MML-EM then fixed, LLM side by NUTS; converged posterior
    of all overall and domain scores within 20 minutes and 8 GB.
(d) fixed-vs-joint: the calibration design fitted jointly and with fixed
    items; how far apart their 90% intervals are.
(i) pin: the calibration design fitted jointly with eta_raw's mean and
    scale pinned (``eta_raw_pin = "auto"``, the default) and without ("none"):
    the same posterior, so the 90% intervals should agree to Monte Carlo
    error; leapfrog steps per draw and ESS per draw of each.
(e) real: MMLU-Pro by its 56 MMLU subjects, 10% of the cells held out; the
    held-out log-likelihood of the Bayesian fit against MTL's.
(g) joint-cost: one log density and gradient of the joint model at design
    (b), elementwise and fused likelihood in one process, the fused one in
    two processes side by side (as two chains run).
(h) joint-warmup: design (b)'s warm-up, leapfrog steps and step size.
(j) joint-geometry: design (b), 2 chains x 300 draws after 300 tuning
    steps, one setting at a time: leapfrog steps per draw, step sizes, ESS
    per draw by group of free variables.
(k) few-llms: 24 LLMs on ChemBench's nine topic sizes (40-1,001 items,
    2,788 in all): the default Bayesian fit (items fixed beyond 60,000
    responses, else joint), the fit on the other route and MTL with 30
    bootstrap replicates. Coverage and width of their 90% intervals, against the
    truth standardised over the LLMs (per domain for the domain scores) and,
    for the domain scores, against the truth on the population scale.
(f) marginal-cost: one log density and gradient of the fixed-items model with
    the domain traits integrated out, compiled kernel vs PyTensor graph.

Each run prints wall time, peak resident memory, the convergence diagnostics
and the interval coverage / RMSE against the simulation's truth.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
import warnings

import numpy as np


def _peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6


def _draws(tree, var: str) -> np.ndarray:
    """Posterior draws of ``var`` as (sample, ...)."""
    x = tree["posterior"][var]
    x = x.transpose("chain", "draw", *[d for d in x.dims if d not in ("chain", "draw")]).values
    return x.reshape(-1, *x.shape[2:])


def _intervals(x: np.ndarray, level: float = 0.9):
    """Equal-tailed interval bounds and posterior mean of draws (sample, ...)."""
    lo, hi = np.quantile(x, [(1 - level) / 2, (1 + level) / 2], axis=0)
    return lo, hi, x.mean(0)


def _coverage(tree, truth: np.ndarray, var: str = "theta", level: float = 0.9) -> dict:
    """Coverage of central intervals, RMSE of the posterior mean (chunked over
    LLMs so no copy of the whole posterior is made)."""
    x = _draws(tree, var)
    S, n = x.shape[:2]
    cover = np.empty(truth.shape, dtype=bool)
    sq, width = 0.0, 0.0
    step = max(1, int(2e7 // max(S * int(np.prod(x.shape[2:], dtype=int)), 1)))
    for a in range(0, n, step):
        sl = slice(a, min(n, a + step))
        lo, hi, mean = _intervals(x[:, sl], level)
        cover[sl] = (truth[sl] >= lo) & (truth[sl] <= hi)
        sq += float(((mean - truth[sl]) ** 2).sum())
        width += float((hi - lo).sum())
    return {
        "coverage": float(cover.mean()),
        "coverage_by_domain": cover.mean(0).round(3).tolist() if cover.ndim == 2 else None,
        "rmse": float(np.sqrt(sq / truth.size)),
        "mean_width": width / truth.size,
    }


def _standardised(x: np.ndarray) -> np.ndarray:
    """True scores standardised over the LLMs (axis 0; per domain for N x K): for the overall
    scores the quantity the model's overall score estimates (its overall traits have sample mean 0
    and variance 1 by construction, like MTL's)."""
    return (x - x.mean(0)) / x.std(0)


def _simulated(n_llms: int, domain_sizes=None, *, preset: str | None = None, scale: float = 1.0,
               scenario: str = "ideal", seed: int = 0):
    """A simulated leaderboard as ``Responses`` with its true domain scores
    (N x K, in the data's order) and standardised true overall scores."""
    from mtlirt.data.responses import Responses
    from mtlirt.data.simulate import simulate

    sim = simulate(n_llms, domain_sizes, preset=preset, scale=scale, scenario=scenario, seed=seed)
    resp = Responses.from_frame(sim.responses)
    theta = sim.domain_scores.loc[resp.llms, resp.domains].values
    overall = _standardised(sim.overall.loc[resp.llms].values[:, 0])
    return resp, theta, overall


def _fit(resp, **kwargs):
    """``mtlirt.fit`` (what ``mtlirt fit`` runs) with its warnings silenced."""
    from mtlirt import fit

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fit(resp, **kwargs)


def _cpu_seconds() -> float:
    """User + system CPU seconds of this process so far (nutpie's chains run
    as threads in it)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _spec_with(spec: str, pin: str | None):
    """``spec`` as a name, or a ``ModelSpec`` with ``eta_raw_pin`` set."""
    if pin is None:
        return spec
    from mtlirt.bayes.spec import load_spec

    return load_spec(spec).with_changes(eta_raw_pin=pin)


def _nuts_kwargs(adaptation: str | None) -> dict:
    return {} if adaptation is None else {"nuts_kwargs": {"adaptation": adaptation}}


def _report(name: str, tree, seconds: float, extra: dict | None = None) -> dict:
    from mtlirt.bayes import diagnostics

    d = diagnostics(tree)  # computed once by fit_bayes (stored in the attrs)
    n_draws = int(tree["posterior"].sizes["chain"]) * int(tree["posterior"].sizes["draw"])
    out = {
        "benchmark": name,
        "seconds": round(seconds, 1),
        "peak_rss_gb": round(_peak_rss_gb(), 2),
        "max_rhat": round(d["max_rhat"], 4),
        "worst_rhat": d["worst_rhat"],
        "min_ess_bulk": round(d["min_ess_bulk"], 1),
        "min_ess_tail": round(d["min_ess_tail"], 1),
        "min_ess_bulk_per_draw": round(d["min_ess_bulk"] / n_draws, 3),
        "divergences": d["divergences"],
        "min_bfmi": round(d["min_bfmi"], 3),
        "converged": d["converged"],
        "n_parameters": d.get("n_parameters"),
        "share_rhat_above_1.01": d.get("share_rhat_above"),
    }
    if "sample_stats" in tree.children and "n_steps" in tree["sample_stats"]:
        out["mean_leapfrog_steps"] = round(float(tree["sample_stats"]["n_steps"].mean()), 1)
    attrs = tree["posterior"].attrs
    for key in ("mtlirt_target_accept", "mtlirt_theta_acceptance"):
        if key in attrs:
            out[key.removeprefix("mtlirt_")] = round(float(attrs[key]), 3)
    if "mtlirt_stage_seconds" in attrs:
        out["stage_seconds"] = {k: round(v, 1) for k, v in json.loads(attrs["mtlirt_stage_seconds"]).items()}
    out.update(extra or {})
    print(json.dumps(out, indent=1), flush=True)
    return out


def bench_calibration(seed: int = 3, draws: int | None = None, tune: int | None = None, chains: int = 4,
                      spec: str = "factor-2pl", target_accept: float | None = None) -> dict:
    """(a) 150 LLMs, domains of 10-60 items, joint NUTS, coverage of 90% intervals.

    Runs what ``mtlirt simulate --domain-sizes 10,15,20,30,40,60 --n-llms 150
    --seed S`` then ``mtlirt fit --method bayes`` run: ``mtlirt.fit`` with the
    MTL initial values and the default sampler settings (the run length the
    convergence checks choose, unless ``draws`` is given).
    """
    resp, truth, truth_overall = _simulated(150, [10, 15, 20, 30, 40, 60], seed=seed)
    opts = {} if target_accept is None else {"target_accept": target_accept}
    t0 = time.perf_counter()
    est = _fit(resp, method="bayes", spec=spec, seed=seed, draws=draws, tune=tune,
               chains=chains, progress=False, **opts)
    sec = time.perf_counter() - t0
    tree = est.tree
    cov = _coverage(tree, truth)
    ov = _coverage(tree, truth_overall, "overall")
    return _report(f"calibration seed={seed}", tree, sec, {
        "draws": int(tree["posterior"].sizes["draw"]), "tune": est.info.get("tune"), "chains": chains,
        "theta_coverage90": round(cov["coverage"], 3),
        "theta_coverage90_by_domain": cov["coverage_by_domain"],
        "theta_rmse": round(cov["rmse"], 3),
        "overall_coverage90": round(ov["coverage"], 3),
        "overall_rmse": round(ov["rmse"], 3),
    })


def bench_joint(seed: int = 0, draws: int | None = None, tune: int | None = None, chains: int = 4,
                spec: str = "factor-2pl", target_accept: float | None = None, pin: str | None = None,
                adaptation: str | None = None) -> dict:
    """(b) 300 LLMs x MMLU x 0.08 (about 1,150 items, 57 domains), joint NUTS
    (``mtlirt.fit(method="bayes", items="joint")``: MTL initial values; by default a leaderboard of this size
    has its items fixed at their calibration; ``draws`` and ``tune`` default to the fit's own). ``pin`` sets the
    spec's ``eta_raw_pin``, ``adaptation`` nutpie's mass-matrix adaptation
    (``"diag"``, its default, or ``"low_rank"``). Reports the wall and CPU
    seconds of the fit (MTL initial values included) and the load average
    before and after it."""
    resp, truth, truth_overall = _simulated(300, preset="mmlu", scale=0.08, seed=seed)
    print(f"joint: {resp.n_llms} LLMs x {resp.n_items} items in {resp.n_domains} domains", flush=True)
    opts = {} if target_accept is None else {"target_accept": target_accept}
    load0, cpu0 = os.getloadavg()[0], _cpu_seconds()
    t0 = time.perf_counter()
    est = _fit(resp, method="bayes", spec=_spec_with(spec, pin), items="joint", seed=seed, draws=draws, tune=tune,
               chains=chains, progress=False, log_likelihood=False, **_nuts_kwargs(adaptation), **opts)
    sec = time.perf_counter() - t0
    cpu = _cpu_seconds() - cpu0
    tree = est.tree
    cov = _coverage(tree, truth)
    ov = _coverage(tree, truth_overall, "overall")
    return _report("joint 300 x mmlu*0.08", tree, sec, {
        "cpu_seconds": round(cpu, 1), "load_average_before_after": [round(load0, 2), round(os.getloadavg()[0], 2)],
        "eta_raw_pin": (pin or "spec default"), "adaptation": adaptation or "diag",
        "n_items": resp.n_items, "draws": int(tree["posterior"].sizes["draw"]), "tune": est.info.get("tune"),
        "chains": chains, "theta_coverage90": round(cov["coverage"], 3),
        "theta_rmse": round(cov["rmse"], 3),
        "overall_coverage90": round(ov["coverage"], 3),
        "overall_rmse": round(ov["rmse"], 3),
        "sampling_seconds": round(float(tree["posterior"].attrs["mtlirt_sampling_seconds"]), 1),
    })


def bench_joint_warmup(seed: int = 0, tune: int = 1000, draws: int = 100, chains: int = 2) -> dict:
    """(h) the warm-up of design (b): leapfrog steps per block of 50 tuning
    draws and the step size along the way (nutpie directly, ``save_warmup``;
    same model and MTL initial values as ``mtlirt.fit``)."""
    import nutpie

    from mtlirt.bayes.sample import build
    from mtlirt.fitting import _mtl_init

    resp, _, _ = _simulated(300, preset="mmlu", scale=0.08, seed=seed)
    _, init = _mtl_init(resp, model="2pl", guessing=None, seed=seed)
    built = build(resp, "factor-2pl", items="joint", init=init)
    compiled = nutpie.compile_pymc_model(built.model, backend="numba", initial_points=built.initvals)
    t = time.perf_counter()
    idata = nutpie.sample(compiled, draws=draws, tune=tune, chains=chains, seed=seed,
                          save_warmup=True, progress_bar=False, target_accept=0.9)
    sec = time.perf_counter() - t
    warm = idata["warmup_sample_stats"]
    steps = warm["n_steps"].values
    size = warm["step_size"].values
    out = {"benchmark": "warm-up of the joint model, 300 LLMs x MMLU x 0.08",
           "tune": tune, "draws": draws, "chains": chains, "sampling_seconds": round(sec, 1),
           "leapfrog_steps_per_50_tuning_draws": [[int(steps[c, i:i + 50].sum()) for i in range(0, tune, 50)]
                                                  for c in range(chains)],
           "step_size_every_100_tuning_draws": [[round(float(size[c, i]), 3) for i in range(0, tune, 100)]
                                                for c in range(chains)],
           "mean_leapfrog_steps_after_tuning": round(float(idata["sample_stats"]["n_steps"].values.mean()), 1)}
    print(json.dumps(out, indent=1), flush=True)
    return out


def bench_flagship(seed: int = 0, draws: int = 500, tune: int = 500, chains: int = 4,
                   n_llms: int = 4272, spec: str = "factor-2pl", target_accept: float | None = None,
                   out: str | None = None, bootstrap: int = 0) -> dict:
    """(c) the flagship shape with the items fixed at the MTL fit's (MML-EM)
    values: ``mtlirt.fit(method="bayes", items="fixed")``; with ``bootstrap``
    > 0 also MTL with that many bootstrap replicates, whose overall scores
    and 90% intervals are compared with the posterior's."""
    t0 = time.perf_counter()
    resp, truth_theta, truth_overall = _simulated(n_llms, preset="mmlu", seed=seed)
    t_sim = time.perf_counter() - t0
    print(f"flagship: {resp.n_llms} LLMs x {resp.n_items} items in {resp.n_domains} domains "
          f"(simulated in {t_sim:.0f} s)", flush=True)
    opts = {} if target_accept is None else {"target_accept": target_accept}
    t1 = time.perf_counter()
    est = _fit(resp, method="bayes", spec=spec, items="fixed", seed=seed, draws=draws, tune=tune,
               chains=chains, progress=False, log_likelihood=False, keep_raw=False, **opts)
    t_fit = time.perf_counter() - t1
    rss_fit = _peak_rss_gb()
    tree = est.tree
    cov = _coverage(tree, truth_theta)
    ov = _coverage(tree, truth_overall, "overall")
    if out:
        est.save(out)
    secs = est.info.get("seconds", {})
    res = _report("flagship fixed-items", tree, t_fit, {
        "peak_rss_gb_after_fit": round(rss_fit, 2),
        "mtl_calibration_seconds": round(float(secs.get("mtl_init", float("nan"))), 1),
        "sampling_seconds": round(float(tree["posterior"].attrs["mtlirt_sampling_seconds"]), 1),
        "draws": draws, "tune": tune, "chains": chains,
        "theta_coverage90": round(cov["coverage"], 3),
        "theta_rmse": round(cov["rmse"], 3),
        "overall_coverage90": round(ov["coverage"], 3),
        "overall_rmse": round(ov["rmse"], 3),
    })
    if not bootstrap:
        return res
    from scipy.stats import spearmanr

    bayes_ov = est.overall_scores(0.9).set_index("llm").loc[resp.llms]
    del est, tree
    t2 = time.perf_counter()
    mtl = _fit(resp, method="mtl", bootstrap=bootstrap, seed=seed)
    mtl_ov = mtl.overall_scores(0.9).set_index("llm").loc[resp.llms]

    def cover(t):
        return round(float(((truth_overall >= t["lower"]) & (truth_overall <= t["upper"])).mean()), 3)

    def rmse(t):
        return round(float(np.sqrt(np.mean((t["score"] - truth_overall) ** 2))), 4)

    vs = {
        "benchmark": "flagship: Bayes (items fixed) vs MTL bootstrap, overall scores",
        "mtl_bootstrap": bootstrap,
        "mtl_seconds": round(time.perf_counter() - t2, 1),
        "spearman_bayes_mtl": round(float(spearmanr(bayes_ov["score"], mtl_ov["score"])[0]), 4),
        "rmse_vs_truth": {"bayes": rmse(bayes_ov), "mtl": rmse(mtl_ov)},
        "mean_width90": {"bayes": round(float((bayes_ov["upper"] - bayes_ov["lower"]).mean()), 4),
                         "mtl_bootstrap": round(float((mtl_ov["upper"] - mtl_ov["lower"]).mean()), 4)},
        "coverage90": {"bayes": cover(bayes_ov), "mtl_bootstrap": cover(mtl_ov)},
        "median_rank_interval_width": {
            "bayes": float((bayes_ov["rank_upper"] - bayes_ov["rank_lower"]).median()),
            "mtl_bootstrap": float((mtl_ov["rank_upper"] - mtl_ov["rank_lower"]).median())},
    }
    print(json.dumps(vs, indent=1), flush=True)
    return {**res, "vs_mtl": vs}


def bench_fixed_vs_joint(seed: int = 3, draws: int = 1000, tune: int = 1000, chains: int = 4,
                         n_llms: int = 150, spec: str = "factor-2pl") -> dict:
    """(d) how far the fixed-items intervals are from the joint model's: the
    calibration design fitted both ways; 90% intervals of the domain and
    overall scores compared (endpoints, widths, means) and their coverage."""
    from mtlirt.bayes import diagnostics

    resp, truth_theta, truth_overall = _simulated(n_llms, [10, 15, 20, 30, 40, 60], seed=seed)
    truth = {"theta": truth_theta, "overall": truth_overall}
    trees, secs = {}, {}
    for items in ("joint", "fixed"):
        t0 = time.perf_counter()
        est = _fit(resp, method="bayes", spec=spec, items=items, seed=seed, draws=draws, tune=tune,
                   chains=chains, progress=False, log_likelihood=False)
        secs[items] = round(time.perf_counter() - t0, 1)
        trees[items] = est.tree
    out = {"benchmark": f"fixed vs joint, {n_llms} LLMs, seed={seed}", "seconds": secs}
    for items, tree in trees.items():
        d = diagnostics(tree)
        out[f"{items}_max_rhat"] = round(d["max_rhat"], 4)
        out[f"{items}_converged"] = d["converged"]
    out.update(_compare_intervals(trees, truth, "joint", "fixed"))
    print(json.dumps(out, indent=1), flush=True)
    return out


def _compare_intervals(trees: dict, truth: dict, ref: str, other: str) -> dict:
    """90% intervals of the domain and overall scores of two fits of the same
    data: widths, endpoint shifts (as a share of ``ref``'s width), means and
    coverage of the truth."""
    out = {}
    for var in ("theta", "overall"):
        lj, hj, mj = _intervals(_draws(trees[ref], var))
        lf, hf, mf = _intervals(_draws(trees[other], var))
        wj = hj - lj
        out[var] = {
            f"{ref}_mean_width": round(float(wj.mean()), 3),
            f"{other}_over_{ref}_width": round(float((hf - lf).mean() / wj.mean()), 3),
            f"mean_abs_endpoint_shift_over_{ref}_width": round(
                float(((np.abs(lf - lj) + np.abs(hf - hj)) / 2 / wj).mean()), 3),
            "rms_mean_difference": round(float(np.sqrt(np.mean((mf - mj) ** 2))), 3),
            f"{ref}_coverage90": round(float(((truth[var] >= lj) & (truth[var] <= hj)).mean()), 3),
            f"{other}_coverage90": round(float(((truth[var] >= lf) & (truth[var] <= hf)).mean()), 3),
        }
    return out


def bench_pin(seed: int = 3, draws: int = 1000, tune: int = 1000, chains: int = 4, n_llms: int = 150,
                spec: str = "factor-2pl") -> dict:
    """(i) pinning eta_raw changes the sampler's geometry, not the
    posterior: the calibration design fitted jointly without the pin
    (``eta_raw_pin = "none"``) and with it (``"auto"``, the default); the
    90% intervals compared as in (d), with each fit's leapfrog steps per draw,
    smallest ESS per draw, R-hat and wall / CPU seconds."""
    from mtlirt.bayes import diagnostics

    resp, truth_theta, truth_overall = _simulated(n_llms, [10, 15, 20, 30, 40, 60], seed=seed)
    truth = {"theta": truth_theta, "overall": truth_overall}
    trees = {}
    out = {"benchmark": f"eta_raw pin none vs auto, {n_llms} LLMs, seed={seed}",
           "draws": draws, "tune": tune, "chains": chains}
    for pin in ("none", "auto"):
        load0, cpu0, t0 = os.getloadavg()[0], _cpu_seconds(), time.perf_counter()
        est = _fit(resp, method="bayes", spec=_spec_with(spec, pin), seed=seed, draws=draws, tune=tune,
                   chains=chains, progress=False, log_likelihood=False)
        tree = trees[pin] = est.tree
        d = diagnostics(tree)
        out[pin] = {"seconds": round(time.perf_counter() - t0, 1), "cpu_seconds": round(_cpu_seconds() - cpu0, 1),
                      "load_average_before": round(load0, 2),
                      "sampling_seconds": round(float(tree["posterior"].attrs["mtlirt_sampling_seconds"]), 1),
                      "mean_leapfrog_steps": round(float(tree["sample_stats"]["n_steps"].mean()), 1),
                      "max_rhat": round(d["max_rhat"], 4), "worst_rhat": d["worst_rhat"],
                      "min_ess_bulk_per_draw": round(d["min_ess_bulk"] / (chains * draws), 3),
                      "divergences": d["divergences"], "converged": d["converged"]}
    out.update(_compare_intervals(trees, truth, "none", "auto"))
    print(json.dumps(out, indent=1), flush=True)
    return out


def bench_real(seed: int = 0, draws: int = 1000, tune: int = 1000, chains: int = 4,
               spec: str = "factor-2pl", items: str = "joint", share: float = 0.1) -> dict:
    """(e) MMLU-Pro by its 56 MMLU subjects (the shared real-data folder): 10% of the cells
    held out (seeded); MTL and the Bayesian fit on the rest; held-out mean
    log-likelihood of each (posterior predictive for the Bayesian fit)."""
    from pathlib import Path

    from mtlirt.bayes import diagnostics
    from mtlirt.data.responses import Responses
    from mtlirt.estimators.heldout import heldout_loglik

    path = Path(__file__).resolve().parents[2] / "shared" / "data" / "mmlu_pro" / "responses.csv.gz"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        resp = Responses.read(path, domain_column="subject", drop_unassigned=True)
    train, mask = resp.holdout(share, seed=seed)
    print(f"real: {resp.n_llms} LLMs x {resp.n_items} items in {resp.n_domains} domains, "
          f"{int(mask.sum()):,} cells held out", flush=True)
    out = {"benchmark": f"MMLU-Pro 56 subjects, held-out {share}", "items": items}
    t0 = time.perf_counter()
    mtl = _fit(train, method="mtl", seed=seed)
    out["mtl_seconds"] = round(time.perf_counter() - t0, 1)
    out["mtl_heldout_mean_loglik"] = round(heldout_loglik(mtl, resp, mask)["mean_loglik"], 5)
    t0 = time.perf_counter()
    est = _fit(train, method="bayes", spec=spec, items=items, seed=seed, draws=draws, tune=tune,
               chains=chains, progress=False, log_likelihood=False)
    out["bayes_seconds"] = round(time.perf_counter() - t0, 1)
    out["bayes_heldout_mean_loglik"] = round(heldout_loglik(est, resp, mask)["mean_loglik"], 5)
    d = diagnostics(est.tree)
    out.update({k: d[k] for k in ("max_rhat", "worst_rhat", "min_ess_bulk", "min_ess_tail",
                                  "divergences", "min_bfmi", "converged")})
    print(json.dumps(out, indent=1, default=float), flush=True)
    return out


def bench_marginal_cost(seed: int = 0, n_llms: int = 4272, repeat: int = 20) -> dict:
    """(f) one log density and gradient of the fixed-items factor model with the
    domain traits integrated out, at the flagship shape: the compiled kernel
    (what the model uses) against the same quadrature written as a PyTensor
    graph (logsumexp over the 13 nodes), both in PyTensor's numba mode, mean of
    ``repeat`` calls on one core."""
    import pymc as pm
    import pytensor.tensor as pt

    from mtlirt.bayes.sample import build
    from mtlirt.fitting import _mtl_init

    resp, _, _ = _simulated(n_llms, preset="mmlu", seed=seed)
    _, init = _mtl_init(resp, model="2pl", guessing=None, seed=seed)
    built = build(resp, "factor-2pl", items="fixed", init=init)
    model, q = built.model, built.marginal
    Q = q["weight"].shape[-1]

    def timed(m):
        ip = m.initial_point()
        fn = m.compile_fn([m.logp(), pt.concatenate([g.ravel() for g in pt.grad(m.logp(), m.value_vars)])],
                          mode="NUMBA")
        fn(ip)
        t = time.perf_counter()
        for _ in range(repeat):
            fn(ip)
        return (time.perf_counter() - t) / repeat * 1e3

    ms_kernel = timed(model)
    with pm.Model(coords=model.coords) as graph:
        from mtlirt.bayes.model import add_factor_block

        nodes = q["start"][..., None] + q["step"][..., None] * np.arange(Q)
        with np.errstate(divide="ignore"):
            logw = np.log(q["weight"])
        eta, lam, psi = add_factor_block(built.spec, resp.n_llms, resp.n_domains, built.anchors)
        e = pm.Data("logw", logw) - pt.sqr(pm.Data("nodes", nodes) - pt.dot(eta, lam.T)[:, :, None]) / (
            2 * pt.sqr(psi))[None, :, None]
        pm.Potential("loglik", pt.logsumexp(e, axis=2).sum() - resp.n_llms * pt.log(psi).sum()
                     + float(q["logscale"].sum()))
    ms_graph = timed(graph)
    out = {"benchmark": "marginal log density + gradient at the flagship shape",
           "cells": int(resp.n_llms * resp.n_domains), "nodes": Q,
           "ms_compiled_kernel": round(ms_kernel, 1), "ms_pytensor_graph": round(ms_graph, 1)}
    print(json.dumps(out, indent=1), flush=True)
    return out


def _joint_grad_ms(seed: int, repeat: int, ready=None, likelihood: str = "auto",
                   spec: str = "factor-2pl") -> float:
    import pytensor.tensor as pt

    from mtlirt.bayes.model import build_model

    resp, _, _ = _simulated(300, preset="mmlu", scale=0.08, seed=seed)
    m = build_model(resp, spec, likelihood=likelihood).model
    fn = m.compile_fn([m.logp(), pt.concatenate([g.ravel() for g in pt.grad(m.logp(), m.value_vars)])],
                      mode="NUMBA")
    ip = m.initial_point()
    fn(ip)
    if ready is not None:
        ready.wait()  # start timing together
    t = time.perf_counter()
    for _ in range(repeat):
        fn(ip)
    return (time.perf_counter() - t) / repeat * 1e3


def _joint_grad_worker(seed, repeat, ready, q, spec):
    q.put(_joint_grad_ms(seed, repeat, ready, spec=spec))


def bench_joint_cost(seed: int = 0, repeat: int = 300, spec: str = "factor-2pl") -> dict:
    """(g) one log density and gradient of the joint model (design (b): 300
    LLMs x 1,154 items, 345,000 responses) in PyTensor's numba mode, mean of
    ``repeat`` calls: in one process alone with the elementwise and the fused
    likelihood, then the fused one in two processes at once (what two chains
    on two cores do)."""
    import multiprocessing as mp

    elementwise = _joint_grad_ms(seed, repeat, likelihood="elementwise", spec=spec)
    alone = _joint_grad_ms(seed, repeat, spec=spec)
    ctx = mp.get_context("spawn")
    ready = ctx.Barrier(2)
    q = ctx.Queue()
    procs = [ctx.Process(target=_joint_grad_worker, args=(seed, repeat, ready, q, spec)) for _ in range(2)]
    for p in procs:
        p.start()
    both = [q.get() for _ in procs]
    for p in procs:
        p.join()
    out = {"benchmark": f"joint log density + gradient, 300 LLMs x MMLU x 0.08, {spec}",
           "ms_elementwise_one_process": round(elementwise, 2),
           "ms_fused_one_process": round(alone, 2),
           "ms_fused_two_processes_side_by_side": [round(x, 2) for x in both]}
    print(json.dumps(out, indent=1), flush=True)
    return out


def bench_joint_geometry(seed: int = 0, tune: int = 300, draws: int = 300, chains: int = 2,
                         target_accept: float = 0.9, pin: str | None = None, adaptation: str | None = None,
                         item_parameterization: str | None = None,
                         trait_parameterization: str | None = None) -> dict:
    """(j) where design (b)'s leapfrog steps go: nutpie directly on the joint
    model (MTL initial values, as in (h)), one setting at a time (the spec's
    ``eta_raw_pin``, item / trait parameterisation, nutpie's mass-matrix
    adaptation, target acceptance); reports leapfrog steps per draw, final
    step sizes, sampling wall and CPU seconds, and per group of free
    variables the smallest and median bulk ESS per draw and the largest
    R-hat, plus the ESS per draw of ``eta_raw``'s mean and scale (the two
    directions the likelihood never sees)."""
    import arviz as az
    import nutpie
    import xarray as xr

    from mtlirt.bayes.sample import build
    from mtlirt.bayes.spec import load_spec
    from mtlirt.fitting import _mtl_init

    resp, _, _ = _simulated(300, preset="mmlu", scale=0.08, seed=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, init = _mtl_init(resp, model="2pl", guessing=None, seed=seed)
    changes = {k: v for k, v in (("eta_raw_pin", pin), ("item_parameterization", item_parameterization),
                                 ("trait_parameterization", trait_parameterization)) if v is not None}
    built = build(resp, load_spec("factor-2pl").with_changes(**changes), items="joint", init=init)
    compiled = nutpie.compile_pymc_model(built.model, backend="numba", initial_points=built.initvals)
    load0, cpu0, t0 = os.getloadavg()[0], _cpu_seconds(), time.perf_counter()
    idata = nutpie.sample(compiled, draws=draws, tune=tune, chains=chains, seed=seed, save_warmup=False,
                          progress_bar=False, target_accept=target_accept, adaptation=adaptation or "diag")
    wall, cpu = time.perf_counter() - t0, _cpu_seconds() - cpu0
    post = idata["posterior"].to_dataset()
    ss = idata["sample_stats"]
    n = draws * chains
    ess, rhat = az.ess(post), az.rhat(post)
    groups = {v: {"n": int(ess[v].size),
                  "min_ess_per_draw": round(float(ess[v].min()) / n, 3),
                  "median_ess_per_draw": round(float(ess[v].median()) / n, 3),
                  "max_rhat": round(float(rhat[v].max()), 4)} for v in ess.data_vars}
    er = post["eta_raw"].values[..., 0]  # chain, draw, llm
    both = az.ess(xr.Dataset({"mean": (("chain", "draw"), er.mean(-1)), "scale": (("chain", "draw"), er.std(-1))}))
    out = {"benchmark": "joint geometry, 300 LLMs x MMLU x 0.08", "settings": changes or "spec defaults",
           "adaptation": adaptation or "diag", "target_accept": target_accept, "tune": tune, "draws": draws,
           "chains": chains, "trait_centred_domains": int(np.sum(built.trait_centered)),
           "item_centred": list(built.item_centered),
           "sampling_seconds": round(wall, 1), "sampling_cpu_seconds": round(cpu, 1),
           "load_average_before_after": [round(load0, 2), round(os.getloadavg()[0], 2)],
           "mean_leapfrog_steps": round(float(ss["n_steps"].mean()), 1),
           "final_step_sizes": [round(float(x), 4) for x in ss["step_size"].values[:, -1]],
           "divergences": int(ss["diverging"].sum()),
           "eta_raw_mean_scale_ess_per_draw": [round(float(both["mean"]) / n, 3), round(float(both["scale"]) / n, 3)],
           "eta_raw_coordinate_sd_median": round(float(np.median(er.reshape(-1, er.shape[-1]).std(0))), 3),
           "groups": groups}
    print(json.dumps(out, indent=1), flush=True)
    return out


FEW_LLMS_SIZES = [152, 1001, 149, 92, 84, 430, 165, 40, 675]  # ChemBench's topics


def _interval_check(est, truth: dict) -> dict:
    """Coverage, mean width and RMSE of an estimate's 90% intervals (its own tables) of the domain
    scores against the truth standardised per domain over the LLMs (``theta``) and on the population
    scale (``theta_population``), and of the overall scores against the standardised truth."""
    llms = est.llms
    dsc = est.domain_scores(0.9)
    osc = est.overall_scores(0.9).set_index("llm").loc[llms]
    theta = truth["theta"]
    cols = {"theta": [dsc[c].to_numpy().reshape(theta.shape) for c in ("lower", "upper", "score")],
            "overall": [osc[c].to_numpy() for c in ("lower", "upper", "score")]}
    targets = {"theta": _standardised(theta), "theta_population": theta,
               "overall": truth["overall"]}
    out = {}
    for name, t in targets.items():
        lo, hi, m = cols["overall" if name == "overall" else "theta"]
        out[name] = {"coverage90": round(float(((t >= lo) & (t <= hi)).mean()), 3),
                     "mean_width90": round(float((hi - lo).mean()), 3),
                     "rmse": round(float(np.sqrt(np.mean((m - t) ** 2))), 3)}
    return out


def bench_few_llms(seed: int = 0, scenario: str = "ideal", n_llms: int = 24, bootstrap: int = 30,
                   draws: int | None = None) -> dict:
    """(k) few LLMs, many items: the default Bayesian fit, the one on the other items route and MTL's
    bootstrap, their 90% intervals against the truth (:func:`_interval_check`); ``draws``: the
    Bayesian fits' draws per chain (default: the convergence checks choose)."""
    resp, theta, overall = _simulated(n_llms, FEW_LLMS_SIZES, scenario=scenario, seed=seed)
    truth = {"theta": theta, "overall": overall}
    out = {"benchmark": f"few LLMs: {resp.n_llms} LLMs x {resp.n_items} items in {resp.n_domains} domains, "
                        f"{scenario}, seed {seed}"}
    def run(name, **kw):
        t0 = time.perf_counter()
        est = _fit(resp, seed=seed, **kw)
        out[name] = {"seconds": round(time.perf_counter() - t0, 1), **_interval_check(est, truth)}
        if kw["method"] == "bayes":
            out[name]["route"] = est.info["route"]["items"]
            d = est.info["diagnostics"]
            out[name].update(converged=bool(d["converged"]), max_rhat=round(d["max_rhat"], 4),
                             worst_rhat=d["worst_rhat"], min_ess_bulk=round(d["min_ess_bulk"], 1))

    bayes = dict(method="bayes", progress=False, log_likelihood=False, draws=draws)
    run("bayes_default", **bayes)
    other = "joint" if out["bayes_default"]["route"] == "fixed" else "fixed"  # the route the default did not take
    run(f"bayes_{other}", items=other, **bayes)
    run(f"mtl_bootstrap_{bootstrap}", method="mtl", bootstrap=bootstrap)
    print(json.dumps(out, indent=1), flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("which", choices=["calibration", "joint", "flagship", "fixed-vs-joint", "pin", "real",
                                      "marginal-cost", "joint-cost", "joint-warmup", "joint-geometry",
                                      "few-llms", "all"])
    ap.add_argument("--items", default="joint", choices=["joint", "fixed"], help="real: items joint or fixed")
    ap.add_argument("--seeds", type=int, nargs="*", default=None)
    ap.add_argument("--draws", type=int, default=None)
    ap.add_argument("--tune", type=int, default=None)
    ap.add_argument("--chains", type=int, default=None)
    ap.add_argument("--n-llms", type=int, default=4272)
    ap.add_argument("--spec", default="factor-2pl")
    ap.add_argument("--target-accept", type=float, default=None)
    ap.add_argument("--pin", default=None, choices=["auto", "none"],
                    help="joint: the spec's eta_raw_pin (default: the spec's own, auto)")
    ap.add_argument("--adaptation", default=None, choices=["diag", "low_rank"],
                    help="joint, joint-geometry: nutpie's mass-matrix adaptation (default diag)")
    ap.add_argument("--item-parameterization", default=None, choices=["auto", "noncentered", "centered"],
                    help="joint-geometry: the spec's item_parameterization")
    ap.add_argument("--trait-parameterization", default=None, choices=["auto", "noncentered", "centered"],
                    help="joint-geometry: the spec's trait_parameterization")
    ap.add_argument("--bootstrap", type=int, default=0,
                    help="flagship: also MTL with this many bootstrap replicates, compared with the posterior")
    ap.add_argument("--out", default=None, help="flagship: save the Estimate here (posterior.nc)")
    ap.add_argument("--scenario", default="ideal", help="few-llms: simulate()'s scenario")
    args = ap.parse_args(argv)
    kw = {k: v for k, v in (("draws", args.draws), ("tune", args.tune), ("chains", args.chains))
          if v is not None}
    if args.which in ("calibration", "all"):
        for s in args.seeds or [3]:
            bench_calibration(seed=s, spec=args.spec, target_accept=args.target_accept, **kw)
    if args.which in ("joint", "all"):
        bench_joint(seed=(args.seeds or [0])[0], spec=args.spec, target_accept=args.target_accept,
                    pin=args.pin, adaptation=args.adaptation, **kw)
    if args.which in ("flagship", "all"):
        bench_flagship(seed=(args.seeds or [0])[0], n_llms=args.n_llms, spec=args.spec,
                       target_accept=args.target_accept, out=args.out, bootstrap=args.bootstrap, **kw)
    if args.which in ("fixed-vs-joint", "all"):
        bench_fixed_vs_joint(seed=(args.seeds or [3])[0], spec=args.spec, **kw)
    if args.which in ("pin", "all"):
        bench_pin(seed=(args.seeds or [3])[0], spec=args.spec, **kw)
    if args.which in ("real", "all"):
        bench_real(seed=(args.seeds or [0])[0], spec=args.spec, items=args.items, **kw)
    if args.which in ("marginal-cost", "all"):
        bench_marginal_cost(seed=(args.seeds or [0])[0], n_llms=args.n_llms)
    if args.which in ("joint-cost", "all"):
        bench_joint_cost(seed=(args.seeds or [0])[0], spec=args.spec)
    if args.which in ("joint-warmup", "all"):
        bench_joint_warmup(seed=(args.seeds or [0])[0], **kw)
    if args.which in ("few-llms", "all"):
        for s in args.seeds or [0]:
            bench_few_llms(seed=s, scenario=args.scenario, draws=args.draws)
    if args.which == "joint-geometry":
        bench_joint_geometry(seed=(args.seeds or [0])[0], target_accept=args.target_accept or 0.9, pin=args.pin,
                             adaptation=args.adaptation, item_parameterization=args.item_parameterization,
                             trait_parameterization=args.trait_parameterization, **kw)
    return 0


if __name__ == "__main__":
    sys.exit(main())
