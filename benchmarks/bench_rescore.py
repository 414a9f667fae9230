"""Benchmark: MTL's reported scores and `mtlirt score`'s against the same model's posterior on fine grids.

MTL reports the rank-one factor model's posterior means given its items and structure, computed on
fixed grids (spacing 0.125 over the overall and each domain score); the scorer (``mtlirt score``,
:class:`mtlirt.evaluate.scoring.Scorer`) recomputes a posterior narrower than that on grids about its
mass. For each real leaderboard of the shared data folder this fits MTL, re-scores a sample of its
LLMs with their own answers, and computes the same posterior by brute force on grids eight times
finer (the items' curves evaluated there). It prints, in the reference's posterior sds, how far the
fit's rows and the re-scored ones lie from it (largest and median over the sampled LLMs), for the
overall score and for the domain scores.

Usage::

    .venv/bin/python benchmarks/bench_rescore.py [--shared ../shared] [--sets chembench,mmlu_pro,oll_v1] [--llms 20]
"""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

import numpy as np

from mtlirt.data.responses import Responses
from mtlirt.data.validate import DataWarning
from mtlirt.evaluate.scoring import Scorer
from mtlirt.fitting import fit
from mtlirt.numerics.llm_side import log_curves

SETS = {  # name: (file, read options)
    "chembench": ("chembench/responses.csv.gz", {}),
    "mmlu_pro": ("mmlu_pro/responses.csv.gz", dict(ignore_columns=["subject"])),
    "oll_v1": ("oll_v1/responses.csv.gz", {}),
}
FINE = 8  # the reference grids' spacing: the fixed grids' over this


def reference(st, item_domain, pos, y, K):
    """Means and sds of ``g`` and of every domain score on grids ``FINE`` times finer than the fixed ones,
    the items' curves evaluated at their nodes: ``(K + 1, 2)``, the overall score first."""
    g = np.linspace(-6, 6, 96 * FINE + 1)
    t = np.linspace(-7, 7, 112 * FINE + 1)
    a, d, c = st.items
    logL = np.zeros((K, len(t)))
    p = c[pos, None] + (1 - c[pos, None]) / (1 + np.exp(-(a[pos, None] * t[None, :] + d[pos, None])))
    lp, l1p = log_curves(p)
    np.add.at(logL, item_domain[pos], np.where(y[:, None] > 0, lp, l1p))
    answered = np.bincount(item_domain[pos], minlength=K) > 0
    log_pg = -0.5 * g**2
    parts = []
    for k in range(K):
        W = np.exp(-0.5 * ((t[None, :] - st.lam[k] * g[:, None]) / st.psi[k]) ** 2)
        W /= W.sum(axis=1, keepdims=True)
        L = np.exp(logL[k] - logL[k].max()) if answered[k] else np.ones(len(t))
        Z = W @ L
        log_pg += np.log(np.maximum(Z, 1e-300))
        parts.append((W, L, Z))
    pg = np.exp(log_pg - log_pg.max())
    pg /= pg.sum()
    out = [moments(pg, g)]
    for W, L, Z in parts:
        pt = (np.where(Z > 0, pg, 0.0) / np.maximum(Z, 1e-300)) @ W * L  # a g whose Z underflows has no mass
        out.append(moments(pt / pt.sum(), t))
    return np.array(out)


def moments(p, x):
    m = p @ x
    return m, np.sqrt(max(p @ x**2 - m * m, 0.0))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=Path(__file__).resolve().parents[2] / "shared")
    parser.add_argument("--sets", default="chembench,mmlu_pro,oll_v1")
    parser.add_argument("--llms", type=int, default=20, help="LLMs per data set (evenly spaced)")
    args = parser.parse_args(argv)
    print("| data | score | fit - reference: max / median | re-scored - reference: max / median |")
    print("| --- | --- | --- | --- |")
    for name in args.sets.split(","):
        path, kw = SETS[name]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DataWarning)
            data = Responses.read(args.shared / "data" / path, **kw)
        est = fit(data, "mtl", seed=0)
        llms = est.llms[np.unique(np.linspace(0, len(est.llms) - 1, args.llms).round().astype(int))]
        sc = Scorer(est)
        st = sc.structures[0]
        parsed = sc.parse(data.subset(llms=list(llms)))
        mine = sc.score_parsed(parsed, scale="population")
        theta = est.point("theta")
        rows = {str(x): i for i, x in enumerate(est.llms)}
        g_loc, g_scale = sc.overall_maps[0]
        errs = {"overall": ([], []), "domains": ([], [])}
        for llm, pos, y in parsed:
            ref = reference(st, sc.item_domain, pos, y, sc.n_domains)
            i = rows[llm]
            fit_g = est.point("overall")[i] * g_scale + g_loc  # overall.csv back on g's scale
            re_g = mine.overall.set_index("llm").loc[llm, "score"]
            re_t = mine.domains[mine.domains["llm"] == llm]["score"].to_numpy()
            errs["overall"][0].append(abs(fit_g - ref[0, 0]) / ref[0, 1])
            errs["overall"][1].append(abs(re_g - ref[0, 0]) / ref[0, 1])
            errs["domains"][0].extend(np.abs(theta[i] - ref[1:, 0]) / ref[1:, 1])
            errs["domains"][1].extend(np.abs(re_t - ref[1:, 0]) / ref[1:, 1])
        label = f"{name} ({data.n_llms} LLMs, {data.n_items} items, {data.n_domains} domains; {len(parsed)} scored)"
        for what, (f_err, r_err) in errs.items():
            print(f"| {label} | {what} | {max(f_err):.4f} / {np.median(f_err):.4f} | "
                  f"{max(r_err):.4f} / {np.median(r_err):.4f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
