"""Benchmark: the model checks of mtlirt.evaluate.checks (docs/model.md describes them; results.md quotes `real`).

``calibration``
    How often the checks flag a model that is right, and whether they flag one
    that is wrong, on small simulations (seeds 0-3):
    S-X2 on 2PL truth (1,000 LLMs, domains of 10 x 4 and 25 x 2 items, STL
    fit; complete, and with 5% of answers missing at random, imputed): share
    of items with p < 0.05 and items flagged; on 3PL truth (guessing 0.25,
    difficulty mean 1, 3,000 LLMs, three 12-item domains) fitted by a 2PL and
    by the right 3PL; the correlation check (400 LLMs, six 10-item domains,
    30 replicates) of rank-1 truth fitted at rank 1 and of rank-2 truth
    fitted at rank 1, rank 2 and by the pooled model: pairs flagged of 15 and
    the global p.
``scenarios``
    MMLU's 57 subjects x 0.1 (1,405 items), 1,000 LLMs, ``--scenario ideal``
    and ``realistic`` (seed 7), MTL fit: every check with its time; S-X2
    against the simulator's flawed items (negative discrimination, upper
    asymptote below 1) and multiple-choice domains.
``world``
    Rank-1 truth (400 LLMs, six 10-item domains, similarity 0.1, seed 5), MTL
    fit: the deviation variances of MTL's error-bootstrap world (moments,
    ``fit(bootstrap=B)``'s ``deviation_spread``, B the second argument,
    default 2) against the truth's 0.1; with ``B > 2`` the coverage of the
    90% intervals of the domain and overall scores (truth standardised); and
    the correlation check with replicates from that world
    (``world="estimate"``) and from the default (30 replicates).
``block``
    MMLU x 0.1, 1,000 LLMs, ideal but 40% of the LLMs running about half of
    the domains (``block_missing=0.4``, ``missing=0.05``; seed 7): mean over
    the pairs of the true correlation, of the fit's ``domain_corr`` and of
    the check's statistic, and the check (30 replicates).
``corr``
    ``domain_corr`` of an MTL fit against the truth's correlations, MMLU x
    0.1, 1,000 LLMs, seed 7: ``--scenario ideal`` and the ideal design with
    block missingness alone (``block_missing=0.4, missing=0.05``): mean over
    the pairs of the true correlation (of the simulated domain scores), of
    the point estimate and of the bootstrap draws (``fit(bootstrap=B)``, B
    the second argument, default 10), and the share of pairs whose true
    correlation lies in the draws' 90% interval.
``loo``
    A fixed-items NUTS fit (200 LLMs, MMLU x 0.05, 2 chains x 200 draws) and
    the leave-one-LLM-out check: time, Pareto k, p_loo, with the overall trait
    integrated out and given.

``real``
    The real leaderboards ChemBench, MMLU-Pro and oll_v1 (``../shared/data``, or the
    shared folder given as the second argument): the default Bayesian fit,
    then every check as ``mtlirt report FIT --data TABLE`` runs them (20
    replicates, 200 draws for leave-one-LLM-out): each check's seconds and
    what it flagged (items, pairs of domains, LLMs whose leave-one-out weights are unreliable).

``flagship``
    The flagship shape (4,272 LLMs x MMLU's 14,042 items, ``--scenario
    realistic``, seed 0): the default MTL fit and the default Bayesian fit,
    then every check of each as the report runs them: each check's seconds,
    the process's peak memory, and what it flagged.

Usage: ``python benchmarks/bench_checks.py {calibration,scenarios,world,block,corr,loo,real,flagship} [B | DIR]``
(``B``: replicates, for ``world`` and ``corr``; ``DIR``: the shared folder, for ``real``).
"""

from __future__ import annotations

import os
import sys
import time
import warnings

import numpy as np

import mtlirt
from mtlirt import simulate
from mtlirt.data.responses import Responses
from mtlirt.evaluate.checks import RMSEA_BOUND, run_checks
from mtlirt.evaluate.correlation_check import correlation_check
from mtlirt.evaluate.item_fit import item_fit
from mtlirt.evaluate.loo import loo_llm

warnings.simplefilter("ignore")


def _r(**kw):
    sim = simulate(**kw)
    return sim, Responses.from_frame(sim.responses)


def calibration() -> None:
    for missing in (0.0, 0.05):
        shares, flags = [], []
        for seed in range(4):
            _, r = _r(n_llms=1000, domain_sizes=[10] * 4 + [25] * 2, similarity=0.3, seed=seed, missing=missing)
            t = item_fit(mtlirt.fit(r, "stl"), r)
            shares.append((t["p_value"] < 0.05).mean())
            flags.append(int(t["misfit"].sum()))
        print(f"S-X2, 2PL truth, STL, missing {missing}: share p<0.05 per seed {np.round(shares, 3).tolist()} "
              f"(mean {np.mean(shares):.3f} of 90 items), flagged {flags}")
    for fit_guess in (None, 0.25):
        shares, flags = [], []
        for seed in range(4):
            _, r = _r(n_llms=3000, domain_sizes=[12] * 3, similarity=0.3, seed=seed, guessing=0.25, difficulty_mean=1.0)
            t = item_fit(mtlirt.fit(r, "stl", guessing=fit_guess), r)
            shares.append((t["p_value"] < 0.05).mean())
            flags.append(int(t["misfit"].sum()))
        print(f"S-X2, 3PL truth (c 0.25), fit guessing {fit_guess}: share p<0.05 {np.round(shares, 3).tolist()} "
              f"(mean {np.mean(shares):.3f} of 36 items), flagged {flags}")
    for truth, fits in ((1, (("mtl", 1),)), (2, (("mtl", 1), ("mtl", 2), ("pooled", None)))):
        for method, rank in fits:
            out = []
            for seed in range(4):
                _, r = _r(n_llms=400, domain_sizes=[10] * 6, rank=truth, similarity=0.1, seed=seed)
                c = correlation_check(mtlirt.fit(r, method, rank=rank), r, n_replicates=30, seed=seed)
                out.append(f"{c.n_misfit}/15 p={c.global_p:.2f}")
            print(f"correlation check, rank-{truth} truth, {method} rank {rank}: {', '.join(out)}")


def scenarios() -> None:
    for scenario in ("ideal", "realistic"):
        sim, r = _r(n_llms=1000, preset="mmlu", scale=0.1, scenario=scenario, seed=7)
        t0 = time.perf_counter()
        est = mtlirt.fit(r, "mtl")
        t_fit = time.perf_counter() - t0
        mc = run_checks(est, r, n_replicates=50, seed=7)
        cc, it = mc.correlation, mc.items
        print(f"{scenario}: {r}; MTL rank {est.info['rank']}, fit {t_fit:.1f} s")
        print(f"  correlation: {cc.n_misfit} of {len(cc.table)} pairs flagged, global p {cc.global_p:.3f}, "
              f"{mc.seconds['correlation']:.1f} s (50 replicates); observed mean {cc.table['observed'].mean():.3f}, "
              f"replicated mean {cc.table['replicated_mean'].mean():.3f}")
        items = sim.items.set_index("item")
        neg = (items["discrimination"] < 0).reindex(it["item"]).to_numpy()
        upper = (items["upper"] < 1).reindex(it["item"]).to_numpy()
        guess = (items["guessing"] > 0).reindex(it["item"]).to_numpy()
        good = ~(neg | upper)
        print(f"  item fit: {mc.seconds['item_fit']:.1f} s; flagged {int(it['misfit'].sum())} of {len(it)}; "
              f"negative discrimination {int(it['misfit'][neg].sum())}/{int(neg.sum())}, upper asymptote < 1 "
              f"{int(it['misfit'][upper].sum())}/{int(upper.sum())}, others {int(it['misfit'][good].sum())}/"
              f"{int(good.sum())} (guessing items among them {int(it['misfit'][good & guess].sum())}/"
              f"{int((good & guess).sum())}); share p<0.05 of the others {(it['p_value'][good] < 0.05).mean():.3f}")


def world() -> None:
    B = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    sim, r = _r(n_llms=400, domain_sizes=[10] * 6, rank=1, similarity=0.1, seed=5)
    est = mtlirt.fit(r, "mtl", bootstrap=B, n_jobs=2 if B > 2 else 1)
    print(f"MTL world's deviation variances {np.round(est.info['deviation_spread'], 3).tolist()} (truth 0.1)")
    if B > 2:  # the error bootstrap's 90% intervals against the standardised truth
        truth = sim.domain_scores.to_numpy()
        truth = (truth - truth.mean(0)) / truth.std(0)
        ds = est.domain_scores(0.9)
        lo, hi = (ds[c].to_numpy().reshape(truth.shape) for c in ("lower", "upper"))
        eta = sim.overall["score"].to_numpy()
        ov = est.overall_scores(0.9).set_index("llm").loc[sim.llm_names]
        eta = (eta - eta.mean()) / eta.std()
        print(f"  {B} replicates: domain coverage {((truth >= lo) & (truth <= hi)).mean():.3f} (width "
              f"{(hi - lo).mean():.3f}), overall {((eta >= ov['lower']) & (eta <= ov['upper'])).mean():.3f}")
    for w in ("estimate", "structure"):
        c = correlation_check(est, r, n_replicates=30, seed=1, world=w)
        print(f"  world={w}: observed {c.table['observed'].min():.2f}-{c.table['observed'].max():.2f}, replicated "
              f"means {c.table['replicated_mean'].min():.2f}-{c.table['replicated_mean'].max():.2f}; "
              f"{c.n_misfit} of 15 pairs flagged, global p {c.global_p:.3f}")


def block() -> None:
    sim, r = _r(n_llms=1000, preset="mmlu", scale=0.1, seed=7, missing=0.05, block_missing=0.4)
    est = mtlirt.fit(r, "mtl")
    iu = np.triu_indices(r.n_domains, 1)
    truth = np.corrcoef(sim.domain_scores.to_numpy().T)[iu].mean()
    c = correlation_check(est, r, n_replicates=30, seed=7)
    fit_corr = est.point("domain_corr")[iu].mean()
    obs, rep = c.table["observed"].mean(), c.table["replicated_mean"].mean()
    print(f"{r}: true correlation mean {truth:.3f}, the fit's domain_corr {fit_corr:.3f}, the check's statistic "
          f"{obs:.3f} (replicates {rep:.3f}); {c.n_misfit} of {len(c.table)} pairs flagged, global p {c.global_p:.3f}")


def corr() -> None:
    B = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    for name, kw in (("ideal", {}), ("block missingness", dict(block_missing=0.4, missing=0.05))):
        sim, r = _r(n_llms=1000, preset="mmlu", scale=0.1, seed=7, **kw)
        t0 = time.perf_counter()
        est = mtlirt.fit(r, "mtl", bootstrap=B, seed=7, n_jobs=2)
        iu = np.triu_indices(r.n_domains, 1)
        truth = np.corrcoef(sim.domain_scores.to_numpy().T)[iu]
        draws = est.draws("domain_corr")[:, iu[0], iu[1]]
        tab = est.domain_correlation(0.9)  # pairs a < b in the order of np.triu_indices
        point, lo, hi = (tab[c].to_numpy() for c in ("estimate", "lower", "upper"))
        print(f"{name}: {r}; true correlation mean {truth.mean():.3f}, domain_corr {point.mean():.3f} "
              f"(mean abs error {np.abs(point - truth).mean():.3f}), draws mean {draws.mean():.3f}, "
              f"90% interval covers {((truth >= lo) & (truth <= hi)).mean():.3f} of {len(truth)} pairs "
              f"(width {(hi - lo).mean():.3f}); {time.perf_counter() - t0:.0f} s with {B} replicates")


def loo() -> None:
    _, r = _r(n_llms=200, preset="mmlu", scale=0.05, seed=3)
    t0 = time.perf_counter()
    est = mtlirt.fit(r, "bayes", items="fixed", draws=200, tune=200, chains=2, progress=False)
    print(f"{r}: fixed-items NUTS fit {time.perf_counter() - t0:.1f} s")
    for overall in (True, False):
        res = loo_llm(est, r, integrate_overall=overall)
        s = res.summary()
        print(f"  overall integrated {overall}: {s['seconds']:.1f} s, elpd {s['elpd_loo']:.1f} (se {s['se']:.1f}), "
              f"p_loo {s['p_loo']:.1f}, Pareto k > {s['good_k']:.2f}: {s['high_k']} of {s['llms']} LLMs, "
              f"max k {s['max_k']:.2f}")


def _fit_and_check(label: str, r, method: str) -> None:
    """The default fit of ``r`` by ``method``, then every check as the report runs them: one line of
    each check's seconds and what it flagged, and the process's peak memory."""
    import resource

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        est = mtlirt.fit(r, method, seed=0, **({"progress": False} if method == "bayes" else {}))
        t_fit = time.perf_counter() - t0
        t0 = time.perf_counter()
        mc = run_checks(est, r, n_replicates=20, max_draws=200)
        t_all = time.perf_counter() - t0
    secs = ", ".join(f"{k} {v:.1f} s" for k, v in mc.seconds.items())
    it = mc.items
    big = it["rmsea"] > RMSEA_BOUND
    loo = "" if mc.loo is None else (f"; leave-one-LLM-out: Pareto k > {mc.loo.good_k:.2f} for "
                                     f"{int((~mc.loo.table['k_ok']).sum())} LLMs, equal weights (k NaN) for "
                                     f"{int(mc.loo.table['pareto_k'].isna().sum())}")
    print(f"{label}: {r}; default {method} fit {t_fit:.1f} s; checks {t_all:.1f} s ({secs}); items flagged "
          f"{int(it['misfit'].sum())} of {len(it)}, {int((it['misfit'] & big).sum())} of them with an RMSEA above "
          f"{RMSEA_BOUND:g} (all items: {int(big.sum())}, largest {it['rmsea'].max():.3f}); correlation pairs "
          f"flagged {mc.correlation.n_misfit} of {len(mc.correlation.table)}, global p "
          f"{mc.correlation.global_p:.3f}{loo}; peak memory "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GiB", flush=True)


def real() -> None:
    root = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                                              "shared")
    for name in ("chembench", "mmlu_pro", "oll_v1"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = Responses.read(os.path.join(root, "data", name, "responses.csv.gz"), ignore_columns=["subject"])
        _fit_and_check(name, r, "bayes")


def flagship() -> None:
    sim = simulate(4272, preset="mmlu", scenario="realistic", seed=0)
    r = Responses.from_frame(sim.responses)
    del sim
    for method in ("mtl", "bayes"):
        _fit_and_check("flagship", r, method)


if __name__ == "__main__":
    which = sys.argv[1] if len(sys.argv) > 1 else "scenarios"
    {"calibration": calibration, "scenarios": scenarios, "block": block, "world": world, "corr": corr,
     "loo": loo, "real": real, "flagship": flagship}[which]()
