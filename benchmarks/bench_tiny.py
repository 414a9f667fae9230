"""Benchmark: tiny domains (1-5 items) with many LLMs and missing responses, simulated and real.

Three leaderboards, each fitted by mtl, stl, pooled and accuracy on 80% of the
responses (20% held out, seeded):

* ``sim``: ``simulate(4000, preset="mmlu", scale=0.007, missing=0.1)`` -- the
  57 MMLU subjects cut to 1-11 items (102 in all), one trait plus domain
  deviations; the overall score is compared with the true overall trait.
* ``oll``: a proxy of a real MMLU leaderboard with tiny subjects, built from
  ``oll_v1`` of the shared real-data folder (6,349 LLMs, 973 items of ARC, GSM8K, TruthfulQA,
  Winogrande): ~100 items drawn at random (seeded, in proportion to each
  benchmark) and split within each benchmark into pseudo-domains of 1-5 items
  (~40 domains).  The overall score is compared with each LLM's accuracy on
  all the other ~870 items (Spearman over the LLMs with at least 100 of them,
  and overlap of the top 100).
* ``mmlu_pro``: ``mmlu_pro`` of the shared real-data folder, every MMLU subject cut to its
  first 1-3 items (seeded), the subjects as domains; overall compared with the
  accuracy on all the other items.

Printed per leaderboard and method: held-out log-loss (lower is better), its
ratio to the better of STL and pooled, Spearman of the overall score, top-100
overlap (real data), fit seconds, and MTL's chosen rank and C.

With ``--recal``, instead: the experiment behind MTL's items staying at their
single-domain calibration for ``0 < C < inf``.  On the
training split, with 10% of its cells held out as in the tuning, the held-out
log-likelihood per cell of the prox estimate at ``C`` with the STL items,
against the same after recalibrating the items given the shrunk traits (per
item, penalised ML with the traits fixed; then the prox again), alternated 1-3
times; and of the pooled fit.  ``--sets`` also takes ``core``,
``simulate(1000, "mmlu", scale=0.1, similarity=0.1)`` (``bench_core.py``'s design).

Usage::

    .venv/bin/python benchmarks/bench_tiny.py [--sets sim,oll,mmlu_pro,core] [--seed 0] [--recal]
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.special import expit
from scipy.stats import spearmanr

from mtlirt.data.responses import Responses
from mtlirt.data.simulate import simulate
from mtlirt.data.validate import DataWarning
from mtlirt.estimators.heldout import cell_loglik, heldout_loglik
from mtlirt.fitting import fit

METHODS = ("mtl", "stl", "pooled", "accuracy")


def _read(path, **kw) -> Responses:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataWarning)
        return Responses.read(path, **kw)


def _from_frame(df) -> Responses:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataWarning)
        return Responses.from_frame(df)


def sim_set(seed):
    sim = simulate(4000, preset="mmlu", scale=0.007, missing=0.1, seed=seed)
    data = _from_frame(sim.responses)
    truth = sim.overall["score"].reindex(data.llms).to_numpy()
    return data, truth, None


def core_set(seed):
    sim = simulate(1000, preset="mmlu", scale=0.1, similarity=0.1, seed=seed)
    data = _from_frame(sim.responses)
    return data, sim.overall["score"].reindex(data.llms).to_numpy(), None


def _items_given_traits(Y, obs, theta, a, d, idom, priors, n_newton=8):
    """Penalised ML of every item with the traits fixed (2-D Newton per item, same priors and bounds)."""
    T = theta[:, idom]
    la, d = np.log(a), d.copy()
    for _ in range(n_newton):
        aa = np.exp(la)
        p = expit(aa * T + d)
        r, w = (Y - p) * obs, p * (1 - p) * obs
        gd = r.sum(0) - d / priors.d_sd**2
        ga = (r * T).sum(0) * aa - (la - priors.log_a_mean) / priors.log_a_sd**2
        Hd = w.sum(0) + 1 / priors.d_sd**2
        Ha = (w * T * T).sum(0) * aa * aa + 1 / priors.log_a_sd**2
        Had = (w * T).sum(0) * aa
        det = Ha * Hd - Had**2
        la = np.clip(la + np.clip((Hd * ga - Had * gd) / det, -0.5, 0.5), np.log(priors.a_min), np.log(priors.a_max))
        d = np.clip(d + np.clip((Ha * gd - Had * ga) / det, -1, 1), -priors.d_max, priors.d_max)
    return np.exp(la), d


def recalibration(name, data, seed, grid=(0.2, 0.4, 0.8, 1.6, 3.2, 6.4), sweeps=3):
    """Held-out log-likelihood of the prox path with STL items vs items recalibrated given the shrunk traits."""
    from mtlirt.data.cells import held_out_cells
    from mtlirt.estimators import irt
    from mtlirt.estimators.baselines import fit_pooled
    from mtlirt.estimators.centre import _lambda, _rank_one_centre, prox_step
    from mtlirt.estimators.trait_scoring import theta_likelihood

    train, _ = data.holdout(0.2, seed=seed)
    Y, O, sl = train.correct.astype(np.int8), train.observed, train.domain_slices
    N, J = Y.shape
    sizes = np.array([s.stop - s.start for s in sl], dtype=float)
    stl, pooled = irt.fit_stl(train), fit_pooled(train)
    th, a, d = stl.internal()
    eta, a_p, d_p = pooled.internal()
    eta = eta[:, :1]  # the pooled trait (internal() repeats it in every domain)
    rows, cols = held_out_cells(O, (N, J), np.random.default_rng(seed), n=int(0.1 * O.sum()))
    tr = irt.ResponseData(Y, O, sl, exclude=(rows, cols))
    obs = np.ones((N, J), bool) if tr.obs is None else tr.obs
    idom, priors = tr.item_domain, irt.DEFAULT_PENALTIES
    lik = theta_likelihood(tr)
    lik.set_items(a, d)
    A, W, _ = _rank_one_centre(lik, eta[:, 0])
    centre = A @ W.T
    one = irt.ResponseData(Y, O, [slice(0, J)], exclude=(rows, cols))
    eta_tr, _ = irt.score_theta(one, a_p, d_p, eta)
    ll_pooled = cell_loglik(Y, rows, cols, eta_tr, a_p, d_p, None, np.zeros(J, dtype=np.int64)).mean()
    print(f"\n### {name}: held-out log-likelihood per cell, rank one; pooled fit {ll_pooled:.5f}")
    print("| C | domains on the centre | STL items | " + " | ".join(f"recalibrated x{k + 1}" for k in range(sweeps))
          + " |")
    print("|---|---|---|" + "---|" * sweeps)
    th = irt.theta_step(lik, th)
    for C in grid:
        lam, _ = _lambda(C, N, len(sl), sizes)
        th, _, on = prox_step(lik, th, centre, lam, tol=1e-5, psi_tol=1e-3)
        cells = [cell_loglik(Y, rows, cols, th, a, d, None, idom).mean()]
        a2, d2, th2 = a, d, th
        for _ in range(sweeps):
            a2, d2 = _items_given_traits(Y, obs, th2, a2, d2, idom, priors)
            lik2 = tr.theta_likelihood()
            lik2.set_items(a2, d2)
            th2, _, _ = prox_step(lik2, th2, centre, lam, tol=1e-5, psi_tol=1e-3)
            cells.append(cell_loglik(Y, rows, cols, th2, a2, d2, None, idom).mean())
        print(f"| {C:g} | {int(on.sum())}/{len(sl)} | " + " | ".join(f"{v:.5f}" for v in cells) + " |", flush=True)


def _tiny_split(df, n_items, rng, group="domain", max_size=5):
    """Draw ``n_items`` items (in proportion to each group) and split each group's draw into
    pseudo-domains of 1..max_size items (sizes drawn uniformly)."""
    items = df.groupby(group, observed=True)["item"].unique()
    total = sum(len(v) for v in items)
    dom = {}
    for g, its in items.items():
        m = max(1, round(n_items * len(its) / total))
        pick = rng.choice(np.sort(its), size=min(m, len(its)), replace=False)
        k = 0
        while k < len(pick):
            size = int(rng.integers(1, max_size + 1))
            for it in pick[k:k + size]:
                dom[it] = f"{g}:{k // max_size:02d}-{k}"
            k += size
    return dom


def _others_accuracy(full: Responses, chosen, llms):
    """Each LLM's accuracy on the items not chosen (NaN with fewer than 100 answers)."""
    other = ~np.isin(full.items, list(chosen))
    Y, O = full.correct[:, other], full.observed[:, other]
    n = O.sum(axis=1)
    acc = np.where(n >= 100, Y.sum(axis=1) / np.maximum(n, 1), np.nan)
    return pd.Series(acc, index=full.llms).reindex(llms).to_numpy()


def oll_set(seed, shared):
    full = _read(shared / "data" / "oll_v1" / "responses.csv.gz")
    df = full.to_frame()
    dom = _tiny_split(df, 100, np.random.default_rng(seed))
    sub = df[df["item"].isin(list(dom))].copy()
    sub["domain"] = sub["item"].map(dom)
    data = _from_frame(sub[["llm", "item", "domain", "correct"]])
    return data, _others_accuracy(full, dom, data.llms), full


def mmlu_pro_set(seed, shared):
    path = shared / "data" / "mmlu_pro" / "responses.csv.gz"
    full = _read(path, ignore_columns=["subject"])
    df = pd.read_csv(path)
    df = df[df["subject"].notna()]
    rng = np.random.default_rng(seed)
    dom = {}
    for subj, its in df.groupby("subject")["item"].unique().items():
        m = int(rng.integers(1, 4))
        for it in rng.choice(np.sort(its), size=min(m, len(its)), replace=False):
            dom[it] = subj
    sub = df[df["item"].isin(list(dom))].copy()
    sub["domain"] = sub["item"].map(dom)
    data = _from_frame(sub[["llm", "item", "domain", "correct"]])
    return data, _others_accuracy(full, dom, data.llms), full


def top_overlap(score, ref, k=100):
    ok = np.isfinite(ref)
    idx = np.flatnonzero(ok)
    top_s = set(idx[np.argsort(-score[ok])[:k]])
    top_r = set(idx[np.argsort(-ref[ok])[:k]])
    return len(top_s & top_r)


def run(name, data, ref, seed, real):
    train, held = data.holdout(0.2, seed=seed)
    sizes = data.domain_sizes
    print(f"\n### {name}: {data.n_llms:,} LLMs x {data.n_items} items in {data.n_domains} domains "
          f"({sizes.min()}-{sizes.max()} items), {1 - data.n_responses / (data.n_llms * data.n_items):.1%} missing")
    rows = {}
    for m in METHODS:
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est = fit(train, m, seed=seed)
        secs = time.perf_counter() - t0
        loss = heldout_loglik(est, data, held)["log_loss"]
        ov = est.point("overall")
        ok = np.isfinite(ref) & np.isfinite(ov)
        rho = spearmanr(ov[ok], ref[ok])[0]
        rows[m] = dict(loss=loss, rho=rho, top=top_overlap(ov, ref) if real else None, secs=secs, info=est.info)
    best = min(rows["stl"]["loss"], rows["pooled"]["loss"])
    top_rho = max(rows["stl"]["rho"], rows["pooled"]["rho"])
    print("| method | held-out log-loss | / best of STL, pooled | Spearman overall | top-100 overlap | fit s |")
    print("|---|---|---|---|---|---|")
    for m, r in rows.items():
        print(f"| {m} | {r['loss']:.4f} | {r['loss'] / best:.4f} | {r['rho']:.4f} | "
              f"{'' if r['top'] is None else r['top']} | {r['secs']:.1f} |")
    mi = rows["mtl"]["info"]
    print(f"MTL: rank {mi.get('rank')}, C {mi.get('C')}, converged {mi['diagnostics']['converged']}; "
          f"log-loss ratio {rows['mtl']['loss'] / best:.4f} (target <= 1.002), "
          f"Spearman minus max(STL, pooled) {rows['mtl']['rho'] - top_rho:+.4f} (target >= -0.002)", flush=True)
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=Path(__file__).resolve().parents[2] / "shared")
    parser.add_argument("--sets", default="sim,oll,mmlu_pro")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--recal", action="store_true", help="the item recalibration experiment instead")
    args = parser.parse_args(argv)
    for name in args.sets.split(","):
        if args.recal:
            sets = {"sim": lambda: sim_set(args.seed), "core": lambda: core_set(args.seed),
                    "oll": lambda: oll_set(args.seed, args.shared),
                    "mmlu_pro": lambda: mmlu_pro_set(args.seed, args.shared)}
            if name not in sets:
                raise SystemExit(f"unknown set {name!r}")
            recalibration(name, sets[name]()[0], args.seed)
        elif name == "core":
            data, ref, _ = core_set(args.seed)
            run("simulated, MMLU sizes x 0.1 (bench_core's design; truth: overall trait)", data, ref, args.seed,
                real=False)
        elif name == "sim":
            data, ref, _ = sim_set(args.seed)
            run("simulated, MMLU sizes x 0.007 (truth: overall trait)", data, ref, args.seed, real=False)
        elif name == "oll":
            data, ref, _ = oll_set(args.seed, args.shared)
            run("oll_v1 proxy: ~100 items in 1-5 item pseudo-domains (ref: accuracy on the other items)",
                data, ref, args.seed, real=True)
        elif name == "mmlu_pro":
            data, ref, _ = mmlu_pro_set(args.seed, args.shared)
            run("MMLU-Pro, 1-3 items per MMLU subject (ref: accuracy on the other items)", data, ref, args.seed,
                real=True)
        else:
            raise SystemExit(f"unknown set {name!r}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
