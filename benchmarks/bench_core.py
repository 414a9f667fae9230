"""Benchmark of the core estimators (STL, pooled, accuracy, MTL) against the targets.

Sections (``--only`` picks some, comma-separated):

``sim``
    ``simulate(1000, preset="mmlu", scale=0.1, rank=1, similarity=0.1)``:
    RMSE of the domain scores (estimate and truth both standardised per
    domain) of MTL relative to STL, on average and in the smallest third of
    the domains; Spearman correlation of the overall score with the true
    overall trait, against macro-averaged accuracy and pooled.
``outliers``
    The same with ``outlier_share=0.1``: RMSE ratios on the outlier domains
    and on the rest.
``rank2``
    The same with ``rank=2``: selected rank and ratios.
``flagship``
    4,272 LLMs x MMLU (scale 1, 14,042 items): simulate, write Parquet, then in
    a fresh process ``Responses.read`` + ``fit_mtl`` (end to end), and in
    another fresh process ``fit_mtl`` alone on the dense matrix; wall time
    and peak RSS (``ru_maxrss``) of each.
``floor``
    The cost of the guessing floor: ``simulate(N, preset="mmlu", scale=S,
    scenario=SC, seed=SEED)`` (``--floor-shape N,S``, default 1000,0.1;
    ``--floor-scenario``, default realistic; ``--floor-seed``, default 7;
    the flagship shape: ``--floor-shape 4272,1 --floor-scenario ideal
    --floor-seed 0``); ``fit_mtl`` without a floor, with the floors decided
    from the data (``guessing="auto"``) and with a floor estimated in every
    domain (``"estimate"``; with ``--floor-dense`` also on the dense trait
    step), CPU seconds of the whole fit (and its ratio to the fit without a
    floor, one run) and of one trait step from 0 given the fitted items, the
    domains that got a floor (and how many of the truth's), load average
    beside.
``real``
    the shared real-data folder: MMLU-Pro by ``domain`` (14) and by ``subject`` (56),
    ChemBench (9); 20% of the responses held out at random (seed 0); held-out
    mean log-loss of STL, pooled and MTL fitted on the rest.

Usage::

    .venv/bin/python benchmarks/bench_core.py [--only sim,outliers,rank2,flagship,real]
        [--seeds 0] [--repeat 1]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

from mtlirt.data.responses import Responses
from mtlirt.data.simulate import simulate
from mtlirt.estimators import irt, mtl, trait_scoring
from mtlirt.estimators.baselines import fit_accuracy, fit_pooled
from mtlirt.estimators.heldout import cell_loglik

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"


def _slices(sim):
    out, s = [], 0
    for n in sim.settings["domain_sizes"].values():
        out.append(slice(s, s + n))
        s += n
    return out


def _rmse(est, truth):
    z = (est - est.mean(0)) / est.std(0)
    t = (truth - truth.mean(0)) / truth.std(0)
    return np.sqrt(((z - t) ** 2).mean(0))


def _peak_gib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / (2**30 if sys.platform == "darwin" else 2**20)


def sim_section(seed, rank=1, outlier_share=0.0, label="sim"):
    sim = simulate(1000, preset="mmlu", scale=0.1, rank=rank, similarity=0.1,
                   outlier_share=outlier_share, seed=seed)
    r = sim.to_responses()
    truth = sim.domain_scores.to_numpy()
    sizes = np.array(list(sim.settings["domain_sizes"].values()))
    t0 = time.perf_counter()
    f = mtl.fit_mtl(r, seed=seed)
    t_mtl = time.perf_counter() - t0
    pooled = fit_pooled(r)
    acc = fit_accuracy(r)
    r_m, r_s, r_p = _rmse(f.theta, truth), _rmse(f.stl.theta, truth), _rmse(pooled.theta, truth)
    out = np.isin(sim.domain_names, sim.outlier_domains)
    small = sizes <= np.quantile(sizes, 1 / 3)
    inl = ~out
    eta = sim.overall.to_numpy()[:, 0]
    res = {
        "section": label, "seed": seed, "rank_true": rank, "rank_selected": f.rank, "C": f.C,
        "rmse_stl": r_s[inl].mean(), "rmse_mtl": r_m[inl].mean(), "rmse_pooled": r_p[inl].mean(),
        "ratio_mean": r_m[inl].mean() / r_s[inl].mean(),
        "ratio_mean_per_domain": float((r_m / r_s)[inl].mean()),
        "ratio_small_third": r_m[small & inl].mean() / r_s[small & inl].mean(),
        "spearman_mtl": spearmanr(f.overall[:, 0], eta)[0],
        "spearman_macro_acc": spearmanr(acc.extra["overall_raw"], eta)[0],
        "spearman_pooled": spearmanr(pooled.theta[:, 0], eta)[0],
        "seconds_mtl": t_mtl,
    }
    if out.any():
        res["ratio_outliers"] = r_m[out].mean() / r_s[out].mean()
        res["ratio_outliers_max"] = float((r_m / r_s)[out].max())
    return res


_FIT_FILE = """
import json, resource, sys, time

def hwm():
    # peak RSS of this process image (VmHWM resets at exec; ru_maxrss can carry the parent's over fork+exec)
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 2**20
    return float("nan")
t0 = time.perf_counter()
from mtlirt.data.responses import Responses
from mtlirt.estimators.mtl import fit_mtl
r = Responses.read(sys.argv[1])
t1 = time.perf_counter()
peak_load = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
hwm_load = hwm()
f = fit_mtl(r, seed=0)
t2 = time.perf_counter()
print(json.dumps({"load_s": t1 - t0, "fit_s": t2 - t1, "total_s": t2 - t0, "peak_load_gib": peak_load,
                  "peak_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
                  "hwm_load_gib": hwm_load, "hwm_gib": hwm(),
                  "stages": f.seconds, "rank": f.rank, "C": f.C}))
"""

_FIT_NPY = """
import json, resource, sys, time

def hwm():
    # peak RSS of this process image (VmHWM resets at exec; ru_maxrss can carry the parent's over fork+exec)
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 2**20
    return float("nan")
import numpy as np
Y = np.load(sys.argv[1])
sizes = json.loads(sys.argv[2])
sl, s = [], 0
for n in sizes:
    sl.append(slice(s, s + n)); s += n
from mtlirt.data.responses import Responses
from mtlirt.estimators.mtl import fit_mtl
r = Responses.from_arrays(Y, None, sl)
del Y
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
hwm_base = hwm()
t0 = time.perf_counter()
f = fit_mtl(r, seed=0)
t1 = time.perf_counter()
print(json.dumps({"fit_s": t1 - t0, "peak_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
                  "before_fit_gib": base, "hwm_gib": hwm(), "hwm_before_fit_gib": hwm_base,
                  "stages": f.seconds, "rank": f.rank, "C": f.C}))
"""


def flagship_section(repeat=1):
    with tempfile.TemporaryDirectory(prefix="mtlirt-bench-core-") as tmp:
        tmp = Path(tmp)
        t0 = time.perf_counter()
        sim = simulate(4272, preset="mmlu", scale=1.0, seed=0)
        path = sim.write(tmp / "responses.parquet")
        np.save(tmp / "Y.npy", sim.correct)
        sizes = json.dumps([int(v) for v in sim.settings["domain_sizes"].values()])
        print(f"  simulated and wrote {sim.correct.shape} in {time.perf_counter() - t0:.1f} s", flush=True)
        del sim
        results = []
        for _ in range(repeat):
            p = subprocess.run([sys.executable, "-c", _FIT_FILE, str(path)], capture_output=True, text=True,
                               check=True)
            e2e = json.loads(p.stdout.strip().splitlines()[-1])
            p = subprocess.run([sys.executable, "-c", _FIT_NPY, str(tmp / "Y.npy"), sizes],
                               capture_output=True, text=True, check=True)
            est = json.loads(p.stdout.strip().splitlines()[-1])
            results.append({"end_to_end": e2e, "estimator": est})
        return results


def floor_section(n, scale, dense=False, seed=7, scenario="realistic"):
    """CPU seconds of MTL fits and trait steps without a floor, with the floors decided from the data
    (``guessing="auto"``, the default) and estimated in every domain (see the docstring)."""
    import os

    sim = simulate(n, preset="mmlu", scale=scale, scenario=scenario, seed=seed)
    sl = _slices(sim)
    Y, r = sim.correct, sim.to_responses()
    truth = sim.domain_scores.to_numpy()
    true_floor = np.array([sim.items["guessing"].to_numpy()[s].mean() for s in sl])
    make = trait_scoring._make_theta_lik
    # compile (or load) the kernels first: their first call is not the fit's cost
    for g in (None, "auto", "estimate"):
        mtl.fit_mtl(Responses.from_arrays(Y[:60, :300], None, [slice(0, 100), slice(100, 300)]), guessing=g, seed=0)
    cases = [("none", None, "tabulated"), ("auto", "auto", "tabulated"), ("estimate", "estimate", "tabulated")]
    if dense:
        cases.append(("estimate", "estimate", "dense"))
    out = []
    for label, guessing, kind in cases:
        if kind == "dense":
            trait_scoring._make_theta_lik = lambda data, share=0.25: trait_scoring.DenseThetaLik(data)
        try:
            load0 = os.getloadavg()[0]
            c0 = time.process_time()
            f = mtl.fit_mtl(r, guessing=guessing, seed=0)
            cpu_fit = time.process_time() - c0
            data = irt.ResponseData.from_responses(r, guessing=f.c if np.any(f.c > 0) else None)
            th, a, d = f.stl.internal()
            lik = data.theta_likelihood()
            lik.set_items(a, d)
            c0 = time.process_time()
            irt.theta_step(lik, np.zeros((data.N, data.K)))
            cpu_step = time.process_time() - c0
        finally:
            trait_scoring._make_theta_lik = make
        floors = np.array([f.c[s.start] for s in sl])
        res = {"floor": label, "trait_step": lik.kind, "shape": f"{Y.shape[0]}x{Y.shape[1]}",
               "cpu_fit_s": cpu_fit, "cpu_trait_step_s": cpu_step, "stages_wall_s": f.seconds,
               "rmse_domain": float(_rmse(f.theta, truth).mean()), "mean_floor": float(np.mean(floors)),
               "domains_with_floor": f"{int(np.sum(floors > 0))}/{len(sl)}",
               "of_true_floors": f"{int(np.sum((floors > 0) & (true_floor > 0)))}/{int(np.sum(true_floor > 0))}",
               "stl_converged": bool(f.stl.converged), "load_before": load0, "load_after": os.getloadavg()[0]}
        if out:
            res["cpu_vs_none"] = cpu_fit / out[0]["cpu_fit_s"]
        out.append(res)
    return out


def _logloss(correct, rows, cols, fit, item_domain):
    return float(-cell_loglik(correct, rows, cols, fit.theta, fit.a, fit.d, None, item_domain).mean())


def real_section():
    from mtlirt.data.responses import Responses

    sets = {
        "mmlu_pro/domain": (SHARED / "mmlu_pro/responses.csv.gz", {"ignore_columns": ["subject"]}),
        "mmlu_pro/subject": (SHARED / "mmlu_pro/responses.csv.gz",
                             {"domain_column": "subject", "drop_unassigned": True}),
        "chembench": (SHARED / "chembench/responses.csv.gz", {}),
    }
    out = []
    for name, (path, opts) in sets.items():
        if not path.exists():
            print(f"  {name}: {path} missing, skipped")
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = Responses.read(path, **opts)
        train, held = r.holdout(0.2, seed=0)
        rows, cols = np.nonzero(held)
        idom = r.item_domain.astype(np.int64)
        t0 = time.perf_counter()
        stl = irt.fit_stl(train)
        pooled = fit_pooled(train)
        f = mtl.fit_mtl(train, stl=stl, seed=0)
        secs = time.perf_counter() - t0

        ls, lp, lm = (_logloss(r.correct, rows, cols, fit, idom) for fit in (stl, pooled, f))
        out.append({
            "data": name, "N": r.n_llms, "J": r.n_items, "K": r.n_domains,
            "logloss_stl": ls, "logloss_pooled": lp, "logloss_mtl": lm,
            "mtl_vs_stl": lm / ls, "mtl_vs_best": lm / min(ls, lp), "rank": f.rank, "C": f.C,
            "eigenvalues": np.round(f.record["rank_evidence"]["eigenvalues"][:3], 2).tolist(),
            "thresholds": np.round(f.record["rank_evidence"]["thresholds"][:3], 2).tolist(),
            "seconds": secs,
        })
    return out


# the simulation sections' rows: (label, section, how to read a result, target)
_TARGETS = (
    ("rank selected (true rank 1)", "sim", lambda r: str(r["rank_selected"]), "1"),
    ("MTL / STL domain-score RMSE, all domains", "sim", lambda r: f"{r['ratio_mean']:.3f}", "at most 0.7"),
    ("same, smallest third of the domains", "sim", lambda r: f"{r['ratio_small_third']:.3f}", "at most 0.6"),
    ("10% outlier domains: MTL / STL on the outliers", "outliers", lambda r: f"{r['ratio_outliers']:.3f}",
     "at most 1.05"),
    ("10% outlier domains: MTL / STL on the rest", "outliers", lambda r: f"{r['ratio_mean']:.3f}", "at most 0.7"),
    ("rank selected (true rank 2)", "rank2", lambda r: str(r["rank_selected"]), "2"),
    ("Spearman with the true overall score: MTL / macro accuracy", "sim",
     lambda r: f"{r['spearman_mtl']:.4f} / {r['spearman_macro_acc']:.4f}", "MTL at least accuracy"),
)


def _print_targets(results: dict, seeds: list[int]) -> None:
    """The simulation sections as one markdown table: a row per target, a column per seed."""
    print("\n| case | " + " | ".join(f"seed {s}" for s in seeds) + " | target |")
    print("| --- |" + " --- |" * (len(seeds) + 1))
    for name, label, read, target in _TARGETS:
        if all((label, s) in results for s in seeds):
            print(f"| {name} | " + " | ".join(read(results[label, s]) for s in seeds) + f" | {target} |")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="sim,outliers,rank2,flagship,real", help="sections, or floor")
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--repeat", type=int, default=1, help="flagship repetitions")
    ap.add_argument("--floor-shape", default="1000,0.1", help="floor section: N LLMs, MMLU scale")
    ap.add_argument("--floor-dense", action="store_true", help="floor section: also the dense trait step")
    ap.add_argument("--floor-scenario", default="realistic", help="floor section: the simulate scenario")
    ap.add_argument("--floor-seed", type=int, default=7, help="floor section: the simulation's seed")
    args = ap.parse_args(argv)
    which = set(args.only.split(","))
    seeds = [int(s) for s in args.seeds.split(",")]
    def fmt(v):
        return f"{v:.4f}" if isinstance(v, float) else str(v)

    results = {}
    for label, kw in (("sim", {}), ("outliers", {"outlier_share": 0.1}), ("rank2", {"rank": 2})):
        if label not in which:
            continue
        print(f"== {label}: simulate(1000, preset='mmlu', scale=0.1, similarity=0.1, {kw})")
        for seed in seeds:
            res = results[label, seed] = sim_section(seed, label=label, **kw)
            print("  " + ", ".join(f"{k}={fmt(v)}" for k, v in res.items() if k != "section"), flush=True)
    if results:
        _print_targets(results, seeds)
    if "flagship" in which:
        print("== flagship: 4,272 LLMs x 14,042 items (MMLU sizes), complete")
        for res in flagship_section(args.repeat):
            e, s = res["end_to_end"], res["estimator"]
            print(f"  end to end (read Parquet + fit_mtl): load {e['load_s']:.1f} s, fit {e['fit_s']:.1f} s, "
                  f"total {e['total_s']:.1f} s; peak RSS (VmHWM) {e['hwm_gib']:.2f} GiB (after load "
                  f"{e['hwm_load_gib']:.2f}); ru_maxrss {e['peak_gib']:.2f} GiB")
            print(f"  estimator alone (dense int8 matrix in memory): fit {s['fit_s']:.1f} s, peak RSS (VmHWM) "
                  f"{s['hwm_gib']:.2f} GiB (before fit {s['hwm_before_fit_gib']:.2f}); ru_maxrss "
                  f"{s['peak_gib']:.2f} (before {s['before_fit_gib']:.2f}); stages "
                  + ", ".join(f"{k} {v:.1f}" for k, v in s["stages"].items()) + f"; rank {s['rank']}, C {s['C']}",
                  flush=True)
    if "floor" in which:
        n, scale = args.floor_shape.split(",")
        print(f"== floor: simulate({n}, preset='mmlu', scale={scale}, scenario='{args.floor_scenario}', "
              f"seed={args.floor_seed}), fit_mtl")
        for res in floor_section(int(n), float(scale), dense=args.floor_dense, seed=args.floor_seed,
                                 scenario=args.floor_scenario):
            print("  " + ", ".join(f"{k}={fmt(v) if k != 'stages_wall_s' else v}" for k, v in res.items()),
                  flush=True)
    if "real" in which:
        print("== real data, 20% of responses held out (seed 0): held-out mean log-loss")
        for res in real_section():
            print("  " + ", ".join(f"{k}={fmt(v)}" for k, v in res.items()), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
