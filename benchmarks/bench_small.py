"""MTL's domain scores against the Bayesian posterior means on small leaderboards.

Both fits at their defaults (``fit(resp, "mtl")`` and ``fit(resp, "bayes")``, the same seed); the
RMSE of each one's domain scores against the truth, estimate and truth standardised per domain, and
the ratio MTL / Bayes (below 1: MTL closer), per seed and its mean.

Simulated: ``simulate(N, sizes, similarity=0.1, seed=seed)`` with eight domains of 5-20 items
(5, 7, 9, 11, 13, 15, 18, 20): 60 LLMs, 100 LLMs, and 100 LLMs with one outlier domain
(``outlier_share=1/8``).

Real (``../shared/data``, ``--shared DIR`` elsewhere): ChemBench (24 LLMs, 9 topics), MMLU-Pro (29
LLMs, 14 categories) and the Open LLM Leaderboard v1 (70 LLMs drawn, 4 benchmarks). In each domain
``J`` items are drawn (seeded); the fits see only those, and the truth is the single-domain fit
(``fit(rest, "stl")``) on the domain's other items, hundreds per domain.

Usage::

    .venv/bin/python benchmarks/bench_small.py [--seeds 0 1 2] [--items 5 10 20] [--only sim|real]
        [--data chembench mmlu_pro oll_v1]
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

import numpy as np
from bench_collapsed import REAL_SETS

from mtlirt.data.responses import Responses
from mtlirt.data.simulate import simulate
from mtlirt.data.validate import DataWarning
from mtlirt.fitting import fit

SIZES = [5, 7, 9, 11, 13, 15, 18, 20]
REAL = ["chembench", "mmlu_pro", "oll_v1"]  # their files and read options: bench_collapsed's REAL_SETS
MAX_LLMS = {"oll_v1": 70}  # LLMs drawn from a leaderboard of thousands: a small leaderboard


def _standardised(x: np.ndarray) -> np.ndarray:
    return (x - x.mean(0)) / x.std(0)


def _rmse(est, truth: np.ndarray) -> float:
    return float(np.sqrt(np.mean((_standardised(est.point("theta")) - truth) ** 2)))


def _both(resp, truth: np.ndarray, seed: int) -> dict:
    """MTL's and the Bayesian fit's domain-score RMSE against ``truth`` (standardised per domain)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mtl = fit(resp, "mtl", seed=seed)
        t0 = time.perf_counter()
        bayes = fit(resp, "bayes", seed=seed, log_likelihood=False)
    return {"mtl": _rmse(mtl, truth), "bayes": _rmse(bayes, truth), "bayes_s": time.perf_counter() - t0,
            "converged": bool(bayes.info.get("diagnostics", {}).get("converged"))}


def simulated(n: int, outlier: bool, seed: int) -> dict:
    sim = simulate(n, SIZES, similarity=0.1, outlier_share=1 / len(SIZES) if outlier else 0.0, seed=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataWarning)  # a constant item now and then: kept, as the fits keep it
        resp = Responses.from_frame(sim.responses)
    truth = _standardised(sim.domain_scores.loc[resp.llms, resp.domains].to_numpy())
    return _both(resp, truth, seed)


def real(full, n_items: int, max_llms: int | None, seed: int) -> dict:
    """``n_items`` items drawn per domain for the fits; the truth from the domain's other items."""
    rng = np.random.default_rng(seed)
    data = full
    if max_llms is not None and max_llms < full.n_llms:
        keep_llms = np.zeros(full.n_llms, dtype=bool)
        keep_llms[rng.choice(full.n_llms, max_llms, replace=False)] = True
        data = full.subset(llms=keep_llms)
    keep = np.zeros(data.n_items, dtype=bool)
    for k in range(data.n_domains):
        items = np.flatnonzero(data.item_domain == k)
        keep[rng.choice(items, min(n_items, len(items) - 1), replace=False)] = True
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rest = fit(data.subset(items=~keep), "stl", seed=seed)
    shown = data.subset(items=keep)
    order = [list(rest.domains).index(d) for d in shown.domains]
    return _both(shown, _standardised(rest.point("theta")[:, order]), seed)


def _row(name: str, runs: list[dict]) -> None:
    ratio = [r["mtl"] / r["bayes"] for r in runs]
    print(f"| {name} | {np.mean(ratio):.3f} | {' / '.join(f'{x:.3f}' for x in ratio)} | "
          f"{np.mean([r['mtl'] for r in runs]):.3f} / {np.mean([r['bayes'] for r in runs]):.3f} | "
          f"{sum(r['converged'] for r in runs)} of {len(runs)} | {np.mean([r['bayes_s'] for r in runs]):.0f} |",
          flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--items", type=int, nargs="+", default=[5, 10, 20], help="real: items drawn per domain")
    ap.add_argument("--only", choices=["sim", "real"], default=None)
    ap.add_argument("--data", nargs="+", choices=REAL, default=REAL, help="real: the leaderboards")
    ap.add_argument("--shared", default=None, help="the shared folder holding data/ (default ../shared)")
    args = ap.parse_args(argv)
    print("| leaderboard | MTL / Bayes RMSE, mean | per seed | RMSE, MTL / Bayes | Bayes converged | Bayes s |")
    print("| --- | --- | --- | --- | --- | --- |")
    if args.only in (None, "sim"):
        for n, outlier in ((60, False), (100, False), (100, True)):
            name = f"simulated, {n} LLMs x 8 domains of 5-20 items" + (", one outlier domain" if outlier else "")
            _row(name, [simulated(n, outlier, s) for s in args.seeds])
    if args.only in (None, "real"):
        root = args.shared or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared")
        for data in args.data:
            (path, kw), max_llms = REAL_SETS[data], MAX_LLMS.get(data)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DataWarning)
                full = Responses.read(os.path.join(root, "data", path), **kw)
            for j in args.items:
                llms = f"{max_llms} of {full.n_llms:,}" if max_llms else f"{full.n_llms}"
                _row(f"{data}, {llms} LLMs x {full.n_domains} domains, {j} items each",
                     [real(full, j, max_llms, s) for s in args.seeds])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
