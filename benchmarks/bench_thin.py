"""How few LLMs and responses a domain can have: the thresholds of a *thin* domain.

For each number of LLMs ``N`` and of items per domain ``J`` (every LLM answers
every item of ``K`` domains: a domain holds ``N J`` responses), ``--seeds``
leaderboards ``simulate(N, [J] * K, similarity=h, seed=seed)`` are fitted by
MTL with an error bootstrap (``fit(..., bootstrap=B)``, 90% intervals), and
the domain scores compared with the truth, standardised over the LLMs, cell by
cell (``N x K`` cells per leaderboard):

``r``
    Correlation of the domain scores with the truth, per domain, averaged
    (how well a domain orders its LLMs).
``rmse``
    Root mean squared error of the domain scores (their own, posterior-mean
    scale) against the truth; 1 is what the population mean 0 scores.
``cover``, ``width``
    Share of the cells whose truth lies in the 90% interval; mean width.
``C``
    Mean shrinkage chosen (``inf``: every domain on its centre, the pooled fit).

``--missing`` adds block missingness (LLMs that did not run a domain), where
the predicted cells are made; ``--method stl`` measures the single-domain fit
instead. With ``--among M`` the leaderboard has ``M`` LLMs and the first
domain alone is thin: only ``N`` of them ran it (``--pick random``, or the
``N`` best by overall score, ``--pick best``), and ``rmse`` is that domain's
over those ``N`` LLMs (``rmse_rest``: the other domains'). ``--step-llms 2``
gives every domain of at least 2 LLMs MTL's in-sample scale step (the
threshold of :func:`mtlirt.estimators.factor_scores.factor_scores`, by
default ``MIN_LLMS`` unless the domain's LLMs are most of the leaderboard's).
The table ends with each ``(N, J)``'s number of responses per domain. The
thresholds ``mtlirt.data.validate.MIN_LLMS`` and ``MIN_RESPONSES``
are read from it (docs/data.md, "Degenerate and tiny data").

Usage::

    .venv/bin/python benchmarks/bench_thin.py [--llms 4,6,10,15,25,50,100] [--items 1,2,3,5,10,20]
        [--seeds 0,1,2] [--bootstrap 20] [--missing 0] [--method mtl] [--among M [--pick random|best]]
        [--step-llms N]
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import pandas as pd

from mtlirt.data.responses import Responses
from mtlirt.data.simulate import simulate
from mtlirt.data.validate import DataWarning
from mtlirt.fitting import fit


def one(n, j, seed, *, k, similarity, bootstrap, missing, method, among=None, pick="random"):
    """Fit one leaderboard; per-cell errors and interval hits, per-domain correlations (with ``among``:
    those of the thin first domain's ``n`` LLMs, and the other domains' squared errors)."""
    sim = simulate(among or n, [j] * k, similarity=similarity, block_missing=missing, seed=seed)
    frame = sim.responses
    if among:
        llms = sim.overall.index.to_numpy()
        ran = (sim.overall.iloc[:, 0].sort_values().index[-n:].to_numpy() if pick == "best"
               else np.random.default_rng(seed).choice(llms, n, replace=False))
        frame = frame[(frame.domain != sorted(frame.domain.unique())[0]) | frame.llm.isin(ran)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataWarning)
        r = Responses.from_frame(frame)
        est = fit(r, method, bootstrap=bootstrap, seed=seed, n_jobs=1)
    ds = est.domain_scores(0.9)
    shape = (r.n_llms, k)
    score, lo, hi = (ds[c].to_numpy().reshape(shape) for c in ("score", "lower", "upper"))
    truth = sim.domain_scores.loc[r.llms, r.domains].to_numpy()
    truth = (truth - truth.mean(0)) / truth.std(0)
    if among:
        rows = np.isin(np.asarray(r.llms), ran)
        score, lo, hi, truth, rest = (score[rows, :1], lo[rows, :1], hi[rows, :1], truth[rows, :1],
                                      ((score - truth)[:, 1:] ** 2).ravel())
        k = 1
    with np.errstate(invalid="ignore", divide="ignore"):
        r_dom = [np.corrcoef(score[:, d], truth[:, d])[0, 1] if score[:, d].std() > 0 else 0.0 for d in range(k)]
    return {"sq": ((score - truth) ** 2).ravel(), "hit": ((truth >= lo) & (truth <= hi)).ravel(),
            "width": (hi - lo).ravel(), "r": np.nan_to_num(r_dom), "C": est.info.get("C", np.nan),
            "rest": rest if among else np.zeros(0)}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--llms", default="4,6,10,15,25,50,100")
    p.add_argument("--items", default="1,2,3,5,10,20")
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--domains", type=int, default=6)
    p.add_argument("--similarity", type=float, default=0.2)
    p.add_argument("--bootstrap", type=int, default=20)
    p.add_argument("--missing", type=float, default=0.0, help="block missingness of simulate (default 0)")
    p.add_argument("--method", default="mtl")
    p.add_argument("--among", type=int, default=None, help="LLMs of the leaderboard; the first domain run by --llms")
    p.add_argument("--pick", default="random", choices=["random", "best"], help="which LLMs ran it (with --among)")
    p.add_argument("--step-llms", type=int, default=None, help="the scale step's threshold of LLMs for this run")
    args = p.parse_args(argv)
    if args.step_llms is not None:
        from mtlirt.estimators import factor_scores

        factor_scores.MIN_LLMS = args.step_llms
    rows = []
    for n in (int(v) for v in args.llms.split(",")):
        for j in (int(v) for v in args.items.split(",")):
            t0 = time.perf_counter()
            res = [one(n, j, int(s), k=args.domains, similarity=args.similarity, bootstrap=args.bootstrap,
                       missing=args.missing, method=args.method, among=args.among, pick=args.pick)
                   for s in args.seeds.split(",")]
            cat = {key: np.concatenate([x[key] for x in res]) for key in ("sq", "hit", "width", "r", "rest")}
            rows.append({"llms": n, "items": j, "responses": n * j, "r": cat["r"].mean(),
                         "rmse": float(np.sqrt(cat["sq"].mean())),
                         **({"rmse_rest": float(np.sqrt(cat["rest"].mean()))} if args.among else {}),
                         "cover": cat["hit"].mean(),
                         "width": cat["width"].mean(), "C": float(np.mean([x["C"] for x in res])),
                         "seconds": time.perf_counter() - t0})
            print(pd.DataFrame(rows[-1:]).to_string(index=False, header=len(rows) == 1,
                                                    float_format=lambda v: f"{v:.3f}"), flush=True)
    table = pd.DataFrame(rows)
    print()
    for metric in ("r", "rmse", "cover"):
        print(f"{metric} (rows: LLMs, columns: items per domain)")
        print(table.pivot(index="llms", columns="items", values=metric).to_string(float_format=lambda v: f"{v:.2f}"))
        print()


if __name__ == "__main__":
    main()
