"""Profile of the real leaderboards of the shared real-data folder: the figures behind ``--scenario realistic``.

For each data set (``oll_v1``: Open LLM Leaderboard v1, 6,349 LLMs x 4
benchmarks; ``mmlu_pro``: 29 LLMs x 14 categories; ``chembench``: 24 LLMs x 9
topics) the script prints:

``accuracy``
    Quantiles, skewness and a two-lump check of each LLM's overall accuracy
    (mean over its domains' accuracies).
``near chance``
    Share of LLMs whose accuracy on a multiple-choice domain lies within 0.05
    of chance (``oll_v1``: ARC 0.25, Winogrande 0.5).
``loadings``
    Cross-domain correlations of the per-domain accuracies (logit scale),
    disattenuated by split-half reliabilities (odd/even items, Spearman-Brown),
    and one-factor loadings from them (``w_k^2`` = median over pairs
    ``l, m`` of ``r_kl r_km / r_lm``).
``specialists``
    Share of LLMs with a standardised residual beyond 3 in at least one
    domain after the one-factor fit of the standardised logit accuracies
    (the normal tail gives ``1 - (1 - 0.0027)^K``).
``flawed items``
    Share of items whose item-rest correlation (the item against the LLM's
    accuracy on the other items of its domain) is negative, and share of
    items that the top decile of LLMs answers below 0.5 while the median
    LLM answers above 0.3 (a ceiling below 1).
``block missingness``
    Share of LLMs without any response in at least one domain, and the mean
    share of domains missing per LLM.

Usage::

    .venv/bin/python benchmarks/real_data_profile.py [--data ../shared/data] [--only oll_v1,mmlu_pro]
"""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path

import numpy as np
import pandas as pd

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
CHANCE = {"oll_v1": {"arc": 0.25, "winogrande": 0.5}}


def _load(path: Path):
    df = pd.read_csv(path, usecols=["llm", "item", "domain", "correct"],
                     dtype={"llm": "category", "item": "category", "domain": "category", "correct": np.int8})
    items = df[["item", "domain"]].drop_duplicates("item")
    llms = df["llm"].cat.categories
    y = np.full((len(llms), len(df["item"].cat.categories)), np.nan, dtype=np.float32)
    y[df["llm"].cat.codes.to_numpy(), df["item"].cat.codes.to_numpy()] = df["correct"].to_numpy()
    item_domain = items.set_index("item")["domain"].reindex(df["item"].cat.categories).astype(str).to_numpy()
    return y, item_domain


def _logit(p, n):
    p = (p * n + 0.5) / (n + 1)  # continuity-corrected
    return np.log(p / (1 - p))


def profile(name: str, path: Path) -> dict:
    y, item_domain = _load(path)
    domains = sorted(set(item_domain))
    K = len(domains)
    cols = {d: np.flatnonzero(item_domain == d) for d in domains}
    n_obs = {d: np.isfinite(y[:, c]).sum(1) for d, c in cols.items()}
    acc = pd.DataFrame({d: np.where(n_obs[d] > 0, np.nansum(y[:, c], 1) / np.maximum(n_obs[d], 1), np.nan)
                        for d, c in cols.items()})
    present = pd.DataFrame({d: n_obs[d] > 0 for d in domains})
    out = {"name": name, "llms": y.shape[0], "items": y.shape[1], "domains": K}

    # -- block missingness
    out["share_llms_missing_a_domain"] = float((~present).any(axis=1).mean())
    out["mean_share_domains_missing"] = float((~present).to_numpy().mean())
    out["share_cells_missing_within_present_domains"] = float(
        1 - sum(n_obs[d][present[d]].sum() for d in domains) / sum(present[d].sum() * len(cols[d]) for d in domains))

    # -- overall accuracy distribution (LLMs with every domain)
    full = present.all(axis=1).to_numpy()
    ov = acc[full].mean(axis=1).to_numpy()
    q = np.quantile(ov, [0.05, 0.25, 0.5, 0.75, 0.95])
    out["overall_accuracy_q05_25_50_75_95"] = [round(float(v), 3) for v in q]
    z = (ov - ov.mean()) / ov.std()
    out["overall_accuracy_skewness"] = float((z**3).mean())
    hist, edges = np.histogram(ov, bins=20, range=(0, 1))
    out["overall_accuracy_histogram_0_1_by_0.05"] = hist.tolist()

    # -- near chance (multiple-choice domains with a known chance level)
    for d, c in CHANCE.get(name, {}).items():
        a = acc[d][present[d]].to_numpy()
        out[f"share_near_chance_{d}"] = float((np.abs(a - c) <= 0.05).mean())
    if name in CHANCE:
        near = np.ones(len(acc), bool)
        for d, c in CHANCE[name].items():
            near &= present[d].to_numpy() & (np.abs(acc[d].to_numpy() - c) <= 0.05)
        out["share_near_chance_all_mc_domains"] = float(near[full].mean())

    # -- split-half reliabilities and disattenuated correlations of logit accuracies
    rel = {}
    lg = {}
    for c in cols.values():
        odd, even = c[::2], c[1::2]
        no, ne = np.isfinite(y[:, odd]).sum(1), np.isfinite(y[:, even]).sum(1)
        ok = (no > 0) & (ne > 0) & full
        ao = _logit(np.nansum(y[:, odd], 1)[ok] / no[ok], no[ok])
        ae = _logit(np.nansum(y[:, even], 1)[ok] / ne[ok], ne[ok])
        r = np.corrcoef(ao, ae)[0, 1]
        rel[d] = 2 * r / (1 + r)
        lg[d] = _logit(acc[d].to_numpy()[full], n_obs[d][full])
    L = np.column_stack([lg[d] for d in domains])
    R = np.corrcoef(L.T)
    rr = np.array([rel[d] for d in domains])
    Rd = R / np.sqrt(np.outer(rr, rr))
    np.fill_diagonal(Rd, 1.0)
    load = np.full(K, np.nan)
    for k in range(K):
        vals = [Rd[k, l] * Rd[k, m] / Rd[l, m] for l, m in itertools.combinations([i for i in range(K) if i != k], 2)
                if Rd[l, m] > 0.05]
        if vals:
            load[k] = np.sqrt(max(np.median(vals), 0.0))
    off = ~np.eye(K, dtype=bool)
    out["reliability_min_median_max"] = [round(float(v), 3) for v in np.quantile(rr, [0, 0.5, 1])]
    out["corr_logit_accuracy_min_median_max"] = [round(float(v), 3) for v in np.quantile(R[off], [0, 0.5, 1])]
    out["corr_disattenuated_min_median_max"] = [round(float(v), 3) for v in np.quantile(Rd[off], [0, 0.5, 1])]
    out["one_factor_loadings"] = {d: round(float(v), 3) for d, v in zip(domains, np.minimum(load, 1.0))}

    # -- specialists: standardised residuals of a one-factor fit
    Z = (L - L.mean(0)) / L.std(0)
    u, s, vt = np.linalg.svd(Z, full_matrices=False)
    fit1 = s[0] * np.outer(u[:, 0], vt[0])
    res = Z - fit1
    res /= res.std(0)
    big = (np.abs(res) > 3).any(axis=1)
    out["share_llms_residual_beyond_3sd"] = float(big.mean())
    out["normal_tail_expectation"] = float(1 - (1 - 0.0027) ** K)
    out["share_llms_residual_beyond_3sd_in_2plus_domains"] = float(((np.abs(res) > 3).sum(1) >= 2).mean())

    # -- flawed items
    neg = ceil = n_items = 0
    top = ov >= np.quantile(ov, 0.9)
    for c in cols.values():
        yd = y[full][:, c]
        tot = np.nansum(yd, 1)
        cnt = np.isfinite(yd).sum(1)
        for j in range(len(c)):
            ok = np.isfinite(yd[:, j])
            if ok.sum() < 10 or np.nanstd(yd[ok, j]) == 0:
                continue
            rest = (tot[ok] - yd[ok, j]) / np.maximum(cnt[ok] - 1, 1)
            if np.std(rest) == 0:
                continue
            n_items += 1
            neg += np.corrcoef(yd[ok, j], rest)[0, 1] < 0
            p_top = np.nanmean(yd[top, j])
            p_med = np.nanmean(yd[:, j])
            ceil += (p_top < 0.5) and (p_med > 0.3)
    out["share_items_negative_item_rest_corr"] = float(neg / max(n_items, 1))
    out["share_items_top_decile_below_0.5_but_median_above_0.3"] = float(ceil / max(n_items, 1))
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, default=SHARED)
    p.add_argument("--only", default="oll_v1,mmlu_pro,chembench")
    args = p.parse_args(argv)
    for name in args.only.split(","):
        res = profile(name, args.data / name / "responses.csv.gz")
        print(f"== {name}")
        for k, v in res.items():
            if k != "name":
                print(f"  {k}: {v}")


if __name__ == "__main__":
    main()
