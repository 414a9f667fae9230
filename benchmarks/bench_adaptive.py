"""New LLMs from few items: random, stratified, fixed anchors and adaptive selection.

Calibrate (MTL, default settings) on ``--n-cal`` LLMs, hold out ``--n-new``
others, and score each held-out LLM from ``K`` of its responses with
:class:`mtlirt.evaluate.scoring.Scorer`, the items chosen by

``random``
    ``K`` of the LLM's items uniformly at random;
``stratified``
    ``K`` items split over the domains in proportion to their sizes (largest
    remainders), random within a domain;
``anchors``
    tinyBenchmarks-style fixed anchors: the calibration LLMs' 0/1 answer
    vectors of the items (missing: the item's mean; projected on their 50
    leading principal components) clustered into ``K`` clusters by k-means
    (``scipy.cluster.vq.kmeans2``, k-means++ start, seeded), the item
    nearest each centroid; the same items for every new LLM, scored by the
    model (``anchors``) and by tinyBenchmarks' own estimate of accuracy,
    the cluster-size-weighted mean of the anchors' answers (``anchors-w``,
    accuracy only);
``adaptive``
    :class:`mtlirt.evaluate.adaptive.AdaptiveTest` with ``--target`` (one run to the
    largest budget; a smaller budget is its prefix).

Columns: ``mae_acc`` mean absolute error of the whole-benchmark accuracy
(simulation: the true expected accuracy, ``mean_j P_ij`` at the true traits;
real data: the accuracy over all items; the new LLMs are drawn among those
with every item);
``cov_acc`` share of 90% intervals holding it; ``mae_real``, ``cov_real`` the
same for the realised accuracy (``Scores.overall["accuracy"]``: answered items
counted with their answers, the others predicted with their Bernoulli
variance) against the LLM's observed accuracy on all items (both sets);
``mae_overall``,
``cov_overall`` and ``mae_domain``, ``cov_domain`` (all domains, answered or
not) the same for the overall and domain scores (simulation: the true
scores on the population scale; real data: the posterior mean from all the
LLM's responses, so only the error of the subset against the full data);
``cov_domain_worst`` and ``cov_domain_p10`` the smallest and the 10th
percentile of the domains' own coverages (each over the new LLMs: with 100
of them a domain's coverage has a binomial sd of 0.03, so the worst of 57
domains of an exact 90% interval is about 0.83);
``cov_unanswered`` coverage over the domains with no response;
``z_real_mean``, ``z_real_sd`` the mean and sd over the new LLMs of the
realised accuracy's error in units of its interval's normal sd (width /
3.29): 0 and 1 where the interval is right.

``--scenario realistic`` simulates with :func:`mtlirt.data.simulate.simulate`'s
realistic departures (loadings 0.6-0.98, skewed traits, guessing, flawed
items, missing blocks) instead of the model itself.

``--oracle`` (simulation): rows that choose the adaptive items (``c:``)
and/or score (``s:``) with the *true* items and loadings instead of the
fit's (``adaptive c:true s:fit`` etc., ``random s:true``): choosing and
scoring with the same estimated items is what capitalises on their
calibration error. ``--split`` tests that without the truth: MTL fitted on
each half of the calibration LLMs, the adaptive items chosen with half
``A``'s fit and scored with ``A``'s (``adaptive c:A s:A``) and with ``B``'s
(``adaptive c:A s:B``), whose items' errors are independent of the choice.
``--random-share p`` adds adaptive tests whose every step, with probability
``p``, asks a random item of the pool instead (``adaptive, p random``).

Usage::

    .venv/bin/python benchmarks/bench_adaptive.py [--sets sim,oll] [--n-cal 1000] [--n-new 100]
        [--budgets 25,50,100,200] [--methods random,stratified,anchors,adaptive]
        [--target accuracy] [--seed 0] [--jobs 1] [--shared ../shared]

Cost: the adaptive replay dominates, 3-10 ms per item asked on one core
(``n-new x`` the largest budget items per set).  The defaults (100 new LLMs,
budgets to 200, all methods, both sets) took 4 min 42 s on the shared 2-core
machine at load 7 (2026-12-01; sim 3.4 min, oll 1.2 min); expect up to about
10 minutes under heavy load.  The results page's full run (``--n-new 200
--budgets 25,50,100,200,400 --jobs 2``) takes about 30 minutes; ``--methods
random,adaptive`` skips the clustering and two of the four scorings per budget.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # many tiny products: threads only contend
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from concurrent.futures import ProcessPoolExecutor  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from scipy.cluster.vq import kmeans2  # noqa: E402

from mtlirt.data.responses import Responses  # noqa: E402
from mtlirt.data.simulate import simulate  # noqa: E402
from mtlirt.data.validate import DataWarning  # noqa: E402
from mtlirt.evaluate.adaptive import AdaptiveTest  # noqa: E402
from mtlirt.evaluate.scoring import Scorer  # noqa: E402
from mtlirt.fitting import fit  # noqa: E402
from mtlirt.numerics.factor_model import _tabulate  # noqa: E402

METHODS = ("random", "stratified", "anchors", "adaptive")


# ------------------------------------------------------------------ data
def sim_set(n_cal, n_new, seed, scenario="ideal"):
    """Calibration Responses, held-out answers (N_new x J in the fit's item order, -1 missing) and truth."""
    sim = simulate(n_cal + n_new, preset="mmlu", scale=0.1, scenario=scenario, seed=seed)
    data = Responses.from_frame(sim.responses)
    cal = data.subset(llms=data.llms[:n_cal])
    new_rows = np.arange(n_cal, n_cal + n_new)
    items = np.asarray(sim.items["item"], dtype=str)
    dnames = list(sim.domain_scores.columns)
    dcode = np.array([dnames.index(d) for d in sim.items["domain"]])
    theta = sim.domain_scores.values[new_rows]
    a, d, c, u = (sim.items[k].to_numpy(float) for k in ("discrimination", "intercept", "guessing", "upper"))
    P = c + (u - c) / (1 + np.exp(-(theta[:, dcode] * a + d)))
    answers = np.where(sim.observed[new_rows], sim.correct[new_rows], -1).astype(np.int8)
    observed = sim.observed[new_rows]
    truth = dict(acc=P.mean(axis=1), overall=sim.overall["score"].to_numpy()[new_rows],
                 observed_acc=np.where(observed, sim.correct[new_rows], 0).sum(axis=1) / observed.sum(axis=1),
                 theta=pd.DataFrame(theta, columns=dnames), items=items, true_items=sim.items,
                 true_loadings=sim.loadings.iloc[:, 0])
    return cal, answers, items, truth, [str(x) for x in np.asarray(sim.llm_names)[new_rows]]


def oll_set(shared: Path, n_cal, n_new, seed):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataWarning)
        data = Responses.read(shared / "data" / "oll_v1" / "responses.csv.gz")
    rng = np.random.default_rng(seed)
    complete = np.flatnonzero(data.observed.all(axis=1))  # new LLMs: those with every item, so that
    new_rows = np.sort(rng.choice(complete, n_new, replace=False))  # their accuracy is the benchmark's
    rest = np.setdiff1d(np.arange(data.n_llms), new_rows)
    cal = data.subset(llms=data.llms[np.sort(rng.choice(rest, n_cal, replace=False))])
    answers = np.where(data.observed[new_rows], data.correct[new_rows], -1).astype(np.int8)
    obs = answers >= 0
    acc = (np.where(obs, answers, 0).sum(axis=1) / obs.sum(axis=1))
    truth = dict(acc=acc, observed_acc=acc, overall=None, theta=None, items=np.asarray(data.items, dtype=str))
    return cal, answers, np.asarray(data.items, dtype=str), truth, [str(x) for x in data.llms[new_rows]]


# ------------------------------------------------------------------ item choice
def stratified(rng, avail, item_domain, K_dom, k):
    sizes = np.bincount(item_domain[avail], minlength=K_dom).astype(float)
    share = sizes / sizes.sum() * k
    n = np.floor(share).astype(int)
    rest = k - n.sum()
    if rest > 0:
        n[np.argsort(-(share - n), kind="stable")[:rest]] += 1
    out = []
    for dom in range(K_dom):
        pool = avail[item_domain[avail] == dom]
        out.append(rng.choice(pool, min(n[dom], len(pool)), replace=False))
    return np.concatenate(out)


def anchor_sets(cal: Responses, fit_pos_of_cal_items, budgets, seed):
    """Per budget: anchor positions (the fit's) and cluster-size weights."""
    X = np.where(cal.observed, cal.correct, np.nan).T.astype(np.float64)  # items x LLMs
    mean = np.nanmean(X, axis=1, keepdims=True)
    X = np.where(np.isnan(X), mean, X)
    Xc = X - X.mean(axis=0, keepdims=True)  # items are the points: centre over items, keeping their difficulty
    u, sv, _ = np.linalg.svd(Xc, full_matrices=False)  # k-means on the leading 50 principal components:
    X = u[:, :50] * sv[:50]  # the distances to a close approximation, 20x faster to seed with k-means++
    out = {}
    for k in budgets:
        cent, lab = kmeans2(X, k, seed=np.random.default_rng(seed), minit="++")
        anchors, weights = [], []
        for c in range(k):
            members = np.flatnonzero(lab == c)
            if not len(members):
                continue
            dist = ((X[members] - cent[c]) ** 2).sum(axis=1)
            anchors.append(members[np.argmin(dist)])
            weights.append(len(members))
        out[k] = (fit_pos_of_cal_items[np.asarray(anchors)], np.asarray(weights, float) / sum(weights))
    return out


# ------------------------------------------------------------------ adaptive (workers)
_SC = None


def _init(sc):
    global _SC
    _SC = sc


def _adaptive_one(args):
    pos, y, target, budget, seed, share = (*args, 0.0)[:6]
    answers = dict(zip(pos.tolist(), y.tolist(), strict=True))
    test = AdaptiveTest(_SC, target=target, budget=budget, seed=seed, items=_SC.items.values[pos])
    rng = np.random.default_rng(seed)
    while not test.done:  # with probability ``share`` a step asks an item of the pool at random
        j = int(rng.choice(np.flatnonzero(test.available))) if rng.random() < share else test.next_position()
        test.answer(j, answers[j])
    return np.asarray(test.pos), np.asarray(test.y)


# ------------------------------------------------------------------ evaluation
def evaluate(sc: Scorer, parsed, truth, names) -> dict:
    s = sc.score_parsed(parsed, seed=0, n_draws=1000, scale="population")
    o = s.overall
    acc = truth["acc"]
    row = dict(mae_acc=np.abs(o["expected_accuracy"].to_numpy() - acc).mean(),
               cov_acc=((o["expected_accuracy_lower"] <= acc) & (acc <= o["expected_accuracy_upper"])).mean())
    real = truth["observed_acc"]
    row["mae_real"] = np.abs(o["accuracy"].to_numpy() - real).mean()
    row["cov_real"] = ((o["accuracy_lower"] <= real) & (real <= o["accuracy_upper"])).mean()
    z = (real - o["accuracy"].to_numpy()) / ((o["accuracy_upper"] - o["accuracy_lower"]).to_numpy() / 3.29)
    row["z_real_mean"], row["z_real_sd"] = np.mean(z), np.std(z)
    ref_g, ref_t = truth.get("ref_overall"), truth.get("ref_theta")
    if ref_g is not None:
        row["mae_overall"] = np.abs(o["score"].to_numpy() - ref_g).mean()
        row["cov_overall"] = ((o["lower"] <= ref_g) & (ref_g <= o["upper"])).mean()
    if ref_t is not None:
        d = s.domains
        n = len(parsed)
        K = sc.n_domains
        mu, lo, hi, nr = (d[c].to_numpy().reshape(n, K) for c in ("score", "lower", "upper", "n_responses"))
        inside = (lo <= ref_t) & (ref_t <= hi)
        row["mae_domain"] = np.abs(mu - ref_t).mean()
        row["cov_domain"] = inside.mean()
        per = inside.mean(axis=0)  # each domain's coverage over the new LLMs
        row["cov_domain_worst"] = per.min()
        row["cov_domain_p10"] = np.quantile(per, 0.1)
        row["cov_unanswered"] = inside[nr == 0].mean() if (nr == 0).any() else np.nan
    return row


def run_set(name, cal, answers, items, truth, llm_names, args):
    t0 = time.perf_counter()
    est = fit(cal, "mtl", seed=args.seed)
    t_fit = time.perf_counter() - t0
    sc = Scorer(est)
    fit_pos = sc._item_pos.get_indexer(pd.Index(items))
    if (fit_pos < 0).any():  # items the calibration LLMs never answered: not in the fit
        answers = answers.copy()
        answers[:, fit_pos < 0] = -1
    n_new = answers.shape[0]
    avail = [np.flatnonzero(answers[i] >= 0) for i in range(n_new)]

    def parsed_for(cols_per_llm):
        return [(llm_names[i], fit_pos[c], answers[i, c]) for i, c in enumerate(cols_per_llm)]

    # references: the truth (simulation) or the full-response scores (real data)
    if truth["theta"] is not None:
        dn = list(sc.domains)
        truth["ref_theta"] = truth["theta"][dn].to_numpy()
        truth["ref_overall"] = truth["overall"]
    else:
        full = sc.score_parsed(parsed_for(avail), seed=0, n_draws=1000, scale="population")
        truth["ref_overall"] = full.overall["score"].to_numpy()
        truth["ref_theta"] = full.domains["score"].to_numpy().reshape(n_new, sc.n_domains)
    rows = []
    full_row = evaluate(sc, parsed_for(avail), truth, llm_names)
    rows.append(dict(set=name, method="all items", budget=int(np.mean([len(a) for a in avail])), **full_row))
    print(f"[{name}] fit {t_fit:.1f} s on {cal.n_llms} LLMs x {cal.n_items} items; "
          f"rank {est.info.get('rank')}, C {est.info.get('C')}", flush=True)
    item_dom_cols = sc.item_domain[np.clip(fit_pos, 0, None)]
    budgets = args.budgets
    if "anchors" in args.methods:
        t1 = time.perf_counter()
        cal_fit_pos = sc._item_pos.get_indexer(pd.Index(np.asarray(cal.items, dtype=str)))
        anchors = anchor_sets(cal, cal_fit_pos, budgets, args.seed)
        col_of_fit = np.full(sc.n_items, -1)
        col_of_fit[fit_pos[fit_pos >= 0]] = np.flatnonzero(fit_pos >= 0)
        print(f"[{name}] anchors clustered in {time.perf_counter() - t1:.1f} s", flush=True)
    def replay_all(scorer, pos_of=None, pools=None, share=0.0):
        t1 = time.perf_counter()
        pos_of = fit_pos if pos_of is None else pos_of
        pools = avail if pools is None else pools
        seeds = np.random.SeedSequence(args.seed).spawn(n_new)
        work = [(pos_of[a], answers[i, a], args.target, max(budgets), seeds[i], share) for i, a in enumerate(pools)]
        if args.jobs > 1:
            with ProcessPoolExecutor(args.jobs, initializer=_init, initargs=(scorer,)) as ex:
                out = list(ex.map(_adaptive_one, work, chunksize=4))
        else:
            _init(scorer)
            out = [_adaptive_one(w) for w in work]
        t_ad = time.perf_counter() - t1
        print(f"[{name}] adaptive ({args.target}) to {max(budgets)} items for {n_new} LLMs: {t_ad:.1f} s "
              f"({t_ad / max(1, sum(len(p) for p, _ in out)) * 1e3:.1f} ms per item)", flush=True)
        return out

    if "adaptive" in args.methods:
        adaptive = replay_all(sc)
    if args.random_share and "adaptive" in args.methods:
        mixed = replay_all(sc, share=args.random_share)
    if args.split and "adaptive" in args.methods:  # choose with one half's items, score with the other's
        order = np.random.default_rng(args.seed).permutation(cal.n_llms)
        halves = [Scorer(fit(cal.subset(llms=cal.llms[np.sort(h)]), "mtl", seed=args.seed))
                  for h in (order[: cal.n_llms // 2], order[cal.n_llms // 2:])]
        hpos = [h._item_pos.get_indexer(pd.Index(items)) for h in halves]
        pools = [a[(hpos[0][a] >= 0) & (hpos[1][a] >= 0)] for a in avail]  # items both halves hold
        chosen = replay_all(halves[0], hpos[0], pools)
        col_of = np.full(halves[0].n_items, -1)
        col_of[hpos[0][hpos[0] >= 0]] = np.flatnonzero(hpos[0] >= 0)
        split_cols = [col_of[p] for p, _ in chosen]
    oracle = args.oracle and truth.get("true_items") is not None
    if oracle:  # the true items and loadings (ideal scenario: 2PL, rank 1), tabulated like the fit's
        it = truth["true_items"].set_index("item").loc[list(sc.items)]
        st = _tabulate(*(it[k].to_numpy(float) for k in ("discrimination", "intercept", "guessing")),
                       sc.item_domain, truth["true_loadings"].reindex(list(sc.domains)).to_numpy(), sc.n_domains)
        sc_true = Scorer(est)
        sc_true.structures, sc_true.selection = [st], st
        adaptive_true = replay_all(sc_true)
    for k in budgets:
        for m in args.methods:
            rng = np.random.default_rng([args.seed, k, METHODS.index(m)])
            if m == "random":
                cols = [rng.choice(a, min(k, len(a)), replace=False) for a in avail]
            elif m == "stratified":
                cols = [stratified(rng, a, item_dom_cols, sc.n_domains, min(k, len(a))) for a in avail]
            elif m == "anchors":
                apos, w = anchors[k]
                acols = col_of_fit[apos]
                cols = [acols[answers[i, acols] >= 0] for i in range(n_new)]
                wacc = np.array([np.sum(w[answers[i, acols] >= 0] * answers[i, acols][answers[i, acols] >= 0])
                                 / max(np.sum(w[answers[i, acols] >= 0]), 1e-12) for i in range(n_new)])
                rows.append(dict(set=name, method="anchors-w", budget=k,
                                 mae_acc=np.abs(wacc - truth["acc"]).mean(),
                                 mae_real=np.abs(wacc - truth["observed_acc"]).mean()))
            else:
                parsed = [(llm_names[i], p[:k], y[:k]) for i, (p, y) in enumerate(adaptive)]
                rows.append(dict(set=name, method=m, budget=k, **evaluate(sc, parsed, truth, llm_names)))
                if args.random_share:
                    parsed = [(llm_names[i], p[:k], y[:k]) for i, (p, y) in enumerate(mixed)]
                    rows.append(dict(set=name, method=f"adaptive, {args.random_share:g} random", budget=k,
                                     **evaluate(sc, parsed, truth, llm_names)))
                if args.split:
                    for lab, h in (("adaptive c:A s:A", 0), ("adaptive c:A s:B", 1)):
                        parsed = [(llm_names[i], hpos[h][c[:k]], answers[i, c[:k]]) for i, c in enumerate(split_cols)]
                        rows.append(dict(set=name, method=lab, budget=k,
                                         **evaluate(halves[h], parsed, truth, llm_names)))
                if oracle:
                    rows.append(dict(set=name, method="adaptive c:fit s:true", budget=k,
                                     **evaluate(sc_true, parsed, truth, llm_names)))
                    parsed = [(llm_names[i], p[:k], y[:k]) for i, (p, y) in enumerate(adaptive_true)]
                    for lab, scorer in (("adaptive c:true s:fit", sc), ("adaptive c:true s:true", sc_true)):
                        rows.append(dict(set=name, method=lab, budget=k, **evaluate(scorer, parsed, truth, llm_names)))
                continue
            rows.append(dict(set=name, method=m, budget=k, **evaluate(sc, parsed_for(cols), truth, llm_names)))
            if oracle and m == "random":
                rows.append(dict(set=name, method="random s:true", budget=k,
                                 **evaluate(sc_true, parsed_for(cols), truth, llm_names)))
        print(f"[{name}] budget {k} done ({time.perf_counter() - t0:.0f} s)", flush=True)
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", default="sim,oll")
    parser.add_argument("--n-cal", type=int, default=1000)
    parser.add_argument("--n-new", type=int, default=100)
    parser.add_argument("--budgets", default="25,50,100,200")
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--target", default="accuracy", choices=("overall", "domains", "accuracy"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--scenario", default="ideal", choices=("ideal", "realistic"),
                        help="the simulated set's scenario (mtlirt.data.simulate)")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--shared", type=Path, default=Path(__file__).resolve().parents[2] / "shared")
    parser.add_argument("--out", type=Path, default=None, help="also write the table as CSV")
    parser.add_argument("--random-share", type=float, default=0.0,
                        help="also replay adaptive tests whose every step asks a random item of the pool with "
                             "this probability")
    parser.add_argument("--split", action="store_true",
                        help="also fit each half of the calibration LLMs: choose with half A's items, score with "
                             "A's (c:A s:A) and with B's (c:A s:B), whose calibration error is independent")
    parser.add_argument("--oracle", action="store_true",
                        help="simulation: also choose (c:) and/or score (s:) with the true items and loadings")
    args = parser.parse_args(argv)
    args.budgets = [int(b) for b in args.budgets.split(",")]
    args.methods = [m for m in args.methods.split(",") if m]
    bad = [m for m in args.methods if m not in METHODS]
    if bad:
        parser.error(f"unknown methods {bad}; choose from {METHODS}")
    t0 = time.perf_counter()
    rows = []
    for name in args.sets.split(","):
        if name == "sim":
            data = sim_set(args.n_cal, args.n_new, args.seed, args.scenario)
        elif name == "oll":
            data = oll_set(args.shared, args.n_cal, args.n_new, args.seed)
        else:
            parser.error(f"unknown set {name!r} (sim, oll)")
        rows += run_set(name, *data, args)
    table = pd.DataFrame(rows)
    cols = ["set", "method", "budget", "mae_acc", "cov_acc", "mae_real", "cov_real", "mae_overall", "cov_overall",
            "mae_domain", "cov_domain", "cov_domain_worst", "cov_domain_p10", "cov_unanswered", "z_real_mean",
            "z_real_sd"]
    table = table.reindex(columns=cols)
    print()
    print(table.to_markdown(index=False, floatfmt=".3f") if _has_tabulate() else table.to_string(index=False))
    print(f"\ntotal {time.perf_counter() - t0:.0f} s")
    if args.out:
        table.to_csv(args.out, index=False)
    return 0


def _has_tabulate() -> bool:
    try:
        import tabulate  # noqa: F401
    except ImportError:
        return False
    return True


if __name__ == "__main__":
    raise SystemExit(main())
