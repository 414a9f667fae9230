"""Item calibration accuracy: the EM's quadrature on long domains, and the estimated guessing floor.

Designs (``simulate``, ideal scenario unless named):

* ``mmlu``: 1,000 LLMs x MMLU x 0.1 (57 domains of 1-165 items), seed 0;
* ``long``: 1,000 LLMs x three domains of 300, 600 and 1,200 items, seed 1;
* ``realistic``: 1,000 LLMs x MMLU x 0.1, the realistic scenario (3PL truth on 75% of
  the domains), seed 7;
* ``flagship``: 4,272 LLMs x MMLU (14,042 items), seed 0 (for the time).

``--pooled`` calibrates all items as one domain (the pooled fit's calibration).

``--oll-v1`` instead calibrates the Open LLM Leaderboard v1 (``oll_v1`` of the shared real-data folder, the
training split of ``mtlirt fit --heldout 0.2 --seed 0``: 6,349 LLMs x 973 items, 4 domains)
without a floor and with ``guessing="estimate"``: EM sweeps, converged, CPU seconds (BLAS on
one thread), grids, floors and the penalised marginal log-likelihood.

For each, :func:`mtlirt.estimators.irt.calibrate_items` is run with the 49-node
grid alone (``node_sd_ratio=0``, the grid before the long-domain refinement),
with the default per-domain grids, and (``--reference``) on a 1,537-node
grid (E- and M-step on every node); printed: the RMSE and mean error of ``log a`` and the RMSE of ``d``
against the truth put on the scale the EM identifies (each domain's true
traits standardised over the LLMs; ``log a`` over the items with a positive
true ``a``), the largest difference from the fine-grid
reference, EM sweeps and seconds.  ``--guessing estimate`` adds the per-domain
floor.

Usage::

    .venv/bin/python benchmarks/bench_calibration.py [--designs mmlu,long] [--reference]
        [--guessing estimate] [--pooled]
    .venv/bin/python benchmarks/bench_calibration.py --oll-v1
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import mtlirt.data.simulate  # noqa: F401
from mtlirt.estimators import calibration, irt

simulate = sys.modules["mtlirt.data.simulate"].simulate

DESIGNS = {
    "mmlu": dict(n=1000, preset="mmlu", scale=0.1, seed=0),
    "long": dict(n=1000, domain_sizes=[300, 600, 1200], seed=1),
    "realistic": dict(n=1000, preset="mmlu", scale=0.1, scenario="realistic", seed=7),
    "flagship": dict(n=4272, preset="mmlu", scale=1.0, seed=0),
}


def truth_on_sample_scale(sim):
    """True ``a``, ``d`` with each domain's true traits standardised over the LLMs."""
    th = sim.domain_scores.to_numpy()
    it = sim.items
    dom = it["domain"].astype(str).map({k: i for i, k in enumerate(sim.domain_scores.columns)}).to_numpy()
    a, d = it["discrimination"].to_numpy(float), it["intercept"].to_numpy(float)
    mu, sd = th.mean(axis=0), th.std(axis=0)
    return a * sd[dom], d + a * mu[dom], it["guessing"].to_numpy(float), dom


def run(name, *, reference, guessing, pooled=False):
    kw = dict(DESIGNS[name])
    n = kw.pop("n")
    sim = simulate(n, **kw)
    sl, start = [], 0
    for size in sim.domains["n_items"]:
        sl.append(slice(start, start + int(size)))
        start += int(size)
    obs = None if sim.observed.all() else sim.observed
    if pooled:
        sl = [slice(0, sim.correct.shape[1])]
    a_t, d_t, c_t, dom = truth_on_sample_scale(sim)
    if pooled:  # no truth on the pooled scale: the errors are against the domain truth, for reference only
        name = name + " (pooled)"
    rows = {}
    settings = {"49 nodes": irt.Penalties(node_sd_ratio=0.0), "per-domain grids": irt.Penalties()}
    if reference:
        settings["reference (1,537 nodes)"] = irt.Penalties(n_nodes=1537, node_sd_ratio=0.0, mstep_stride=False)
    for label, pen in settings.items():
        data = irt.ResponseData(sim.correct, obs, sl, guessing=guessing)
        t0 = time.perf_counter()
        with irt.blas_threads(1):
            a, d, info = irt.calibrate_items(data, priors=pen, max_iter=2000)
        secs = time.perf_counter() - t0
        rows[label] = (a, d, info, secs, data.c)
    ref = rows.get("reference (1,537 nodes)")
    print(f"\n{name}: {sim.correct.shape[0]} LLMs x {sim.correct.shape[1]} items, {len(sl)} domains "
          f"(sizes {min(s.stop - s.start for s in sl)}-{max(s.stop - s.start for s in sl)})")
    print("| grid | RMSE log a | mean error log a | RMSE d | max diff log a from reference | sweeps | converged "
          "| seconds | nodes |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    ok = a_t > 0  # flawed items of the realistic scenario can have a <= 0
    a_t = np.where(ok, a_t, 1.0)
    for label, (a, d, info, secs, _c) in rows.items():
        e = (np.log(a) - np.log(a_t))[ok]
        diff = "" if ref is None else f"{np.max(np.abs(np.log(a) - np.log(ref[0]))):.4f}"
        nodes = info.get("nodes")
        nodes = "49" if nodes is None else f"{int(np.min(nodes))}-{int(np.max(nodes))}"
        print(f"| {label} | {np.sqrt(np.mean(e**2)):.4f} | {e.mean():+.4f} | {np.sqrt(np.mean((d - d_t) ** 2)):.4f} "
              f"| {diff} | {info['n_iter']} | {info['converged']} | {secs:.1f} | {nodes} |")
    if len(sl) <= 5:
        for label, (a, *_rest) in rows.items():
            per = [float(np.mean(np.log(a[s]) - np.log(a_t[s]))) for s in sl]
            print(f"  {label}: mean error of log a by domain " + ", ".join(f"{v:+.4f}" for v in per))
    if guessing == "estimate":
        c_hat = rows["per-domain grids"][4]
        c_hat = np.zeros_like(c_t) if c_hat is None else c_hat
        true_k = np.array([c_t[s].mean() for s in sl])
        est_k = np.array([c_hat[s].mean() for s in sl])
        print(f"  floors: RMSE per domain {np.sqrt(np.mean((est_k - true_k) ** 2)):.4f}; where the truth has "
              f"none: mean {est_k[true_k == 0].mean() if (true_k == 0).any() else float('nan'):.4f}; "
              f"where it has one: mean {est_k[true_k > 0].mean() if (true_k > 0).any() else float('nan'):.4f} "
              f"(truth {true_k[true_k > 0].mean() if (true_k > 0).any() else float('nan'):.4f})")


def oll_v1():
    """The item calibration on oll_v1's training split, without and with the estimated floor."""
    import warnings
    from pathlib import Path

    from mtlirt.data.responses import Responses

    path = Path(__file__).resolve().parents[2] / "shared" / "data" / "oll_v1" / "responses.csv.gz"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        train, _ = Responses.read(path).holdout(0.2, seed=0)
    keep = train.mask.any(axis=1)
    print("| floor | EM sweeps | converged | CPU s | nodes | floors | penalised log-likelihood (last E-step) |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for g in (None, "estimate"):
        data = irt.ResponseData(train.correct[keep], train.mask[keep], train.domain_slices, guessing=g)
        t0 = time.process_time()
        with irt.blas_threads(1):
            a, d, info = irt.calibrate_items(data)
        cpu = time.process_time() - t0
        cd = info["c_domain"]
        floors = "" if cd is None else ", ".join(f"{v:.4f}" for v in cd)
        pen = calibration._penalised({"ll": info["marginal_loglik"]}, a, d, cd, irt.DEFAULT_PENALTIES)
        print(f"| {g or 'none'} | {info['n_iter']} | {info['converged']} | {cpu:.1f} | "
              f"{', '.join(str(int(n)) for n in info['nodes'])} | {floors} | {pen:.1f} |", flush=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--designs", default="mmlu,long")
    p.add_argument("--reference", action="store_true")
    p.add_argument("--guessing", default=None)
    p.add_argument("--pooled", action="store_true")
    p.add_argument("--oll-v1", action="store_true", help="oll_v1's training split instead of the designs")
    args = p.parse_args(argv)
    if args.oll_v1:
        oll_v1()
        return 0
    g = args.guessing
    if g is not None and g != "estimate":
        g = float(g)
    for name in args.designs.split(","):
        run(name, reference=args.reference, guessing=g, pooled=args.pooled)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
