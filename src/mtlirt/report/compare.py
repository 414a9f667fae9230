"""Agreement between fits: :func:`compare` (one row per pair) and :func:`fit_summary` (one row per fit).

A fit is an :class:`~mtlirt.results.estimate.Estimate`, a fit folder (holding
``posterior.nc``) or a ``posterior.nc`` file.  Fits are matched by LLM and
domain *name*; only the LLMs (domains) they share enter the comparison.
Fits of different tables (by their recorded data fingerprints) are refused
unless asked for.
This is the table behind ``mtlirt compare DIR_A DIR_B`` and the comparison
section of the HTML report.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import InputError
from ..results.estimate import Estimate, check_interval
from ..results.fitdir import check_same_data

__all__ = ["compare", "fit_diagnostics", "fit_summary", "fit_timings", "load_fit", "load_fits",
           "recorded_heldout_loglik"]

#: Keys looked up, in order, when ``info["heldout"]`` is a dict.
HELDOUT_KEYS = ("mean_loglik", "loglik_per_response", "mean_log_likelihood", "loglik_mean",
                "mean", "loglik", "log_likelihood", "elpd")


def load_fit(source) -> tuple[str, Estimate, dict]:
    """Read one fit: its name, its estimate and its ``fit.json`` record (``{}`` when absent).

    Parameters
    ----------
    source : Estimate, str or pathlib.Path
        An estimate, a fit folder or a ``posterior.nc`` file.

    Returns
    -------
    (str, Estimate, dict)
        The name is the folder's name for a folder (or a file's folder), the
        method for an estimate.
    """
    if isinstance(source, Estimate):
        return source.method, source, {}
    path = Path(source)
    if path.is_dir():
        folder, nc = path, path / "posterior.nc"
    else:
        folder, nc = path.parent, path
    if not nc.exists():
        raise FileNotFoundError(f"cannot read {nc}: no such file (is {path} a fit folder?)")
    est = Estimate.load(nc)
    record = {}
    fj = folder / "fit.json"
    if fj.exists():
        try:
            record = json.loads(fj.read_text())
        except (OSError, ValueError):
            record = {}
    name = folder.name if path.is_dir() or nc.name == "posterior.nc" else nc.stem
    return name or est.method, est, record


def load_fits(fits, names=None) -> tuple[dict[str, Estimate], dict[str, dict]]:
    """Read several fits into ``{name: Estimate}`` (and ``{name: fit.json record}``).

    Parameters
    ----------
    fits : Estimate, path, sequence of them, or mapping name -> Estimate/path
        The fits.  Names come from the mapping's keys, else ``names``, else
        folder names / methods; repeated names get a ``" (2)"`` suffix.
    names : sequence of str, optional
        Names for a sequence of fits.
    """
    if isinstance(fits, (Estimate, str, Path)):
        fits = [fits]
    if isinstance(fits, Mapping):
        items = [(str(k), v) for k, v in fits.items()]
    else:
        fits = list(fits)
        if names is not None and len(names) != len(fits):
            raise ValueError(f"{len(names)} names for {len(fits)} fits")
        items = [(None if names is None else str(names[i]), f) for i, f in enumerate(fits)]
    out: dict[str, Estimate] = {}
    records: dict[str, dict] = {}
    for given, src in items:
        name, est, rec = load_fit(src)
        name = given or name
        base, i = name, 2
        while name in out:
            name = f"{base} ({i})"
            i += 1
        out[name] = est
        records[name] = rec
    return out, records


def recorded_heldout_loglik(info: dict) -> float:
    """The held-out log-likelihood recorded in an estimate's ``info``, or NaN.

    ``info["heldout"]`` may be a number, or a dict holding one under one of
    :data:`HELDOUT_KEYS` (the first found wins; a mean per response is
    preferred to a total).
    """
    h = info.get("heldout")
    if h is None:
        return float("nan")
    if isinstance(h, (int, float)) and not isinstance(h, bool):
        return float(h)
    if isinstance(h, Mapping):
        for k in HELDOUT_KEYS:
            v = h.get(k)
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                return float(v)
    return float("nan")


def _mean_width(est: Estimate, var: str, interval: float) -> float:
    d = est.draws(var)
    if d is None:
        return float("nan")
    lo = (1 - interval) / 2
    q = np.quantile(d, [lo, 1 - lo], axis=0)
    return float(np.mean(q[1] - q[0]))


def fit_timings(info: dict) -> dict:
    """The timings recorded in an estimate's ``info`` (``timings``, else ``seconds``), seconds per stage."""
    for key in ("timings", "seconds"):
        t = info.get(key)
        if isinstance(t, Mapping) and t:
            return dict(t)
    return {}


def fit_diagnostics(est: Estimate) -> dict:
    """The diagnostics of a fit: ``info["diagnostics"]``, else the posterior's ``mtlirt_diagnostics`` attribute."""
    d = est.info.get("diagnostics")
    if isinstance(d, Mapping) and d:
        return dict(d)
    raw = est.tree["posterior"].attrs.get("mtlirt_diagnostics")
    if isinstance(raw, str):
        try:
            d = json.loads(raw)
        except ValueError:
            return {}
        return dict(d) if isinstance(d, Mapping) else {}
    return {}


def _total_time(info: dict) -> float:
    t = fit_timings(info) or info.get("timings")
    if isinstance(t, (int, float)):
        return float(t)
    if not isinstance(t, Mapping):
        return float("nan")
    for k in ("total", "total_s", "wall", "wall_s"):
        if isinstance(t.get(k), (int, float)):
            return float(t[k])
    vals = [float(v) for v in t.values() if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return float(sum(vals)) if vals else float("nan")


def fit_summary(estimates_or_dirs, *, names=None, interval: float = 0.9) -> pd.DataFrame:
    """One row per fit: method, uncertainty, sizes, rank, mean interval widths, held-out fit, convergence, time.

    Parameters
    ----------
    estimates_or_dirs
        As in :func:`load_fits`.
    names : sequence of str, optional
        Names of the fits.
    interval : float
        Probability mass of the intervals whose mean width is reported.

    Returns
    -------
    pandas.DataFrame
        Indexed by fit name; columns ``method, uncertainty, draws, llms,
        domains, items, rank, mean_width_overall, mean_width_domain,
        heldout_loglik, converged, time_s``.
    """
    check_interval(interval)
    fits, _ = load_fits(estimates_or_dirs, names)
    rows = []
    for name, est in fits.items():
        info = est.info
        p = est.posterior
        diag = fit_diagnostics(est)
        rows.append({
            "fit": name,
            "method": est.method,
            "uncertainty": est.uncertainty_source or "none",
            "draws": est.n_draws if est.uncertainty_source != "bootstrap" else _boot_size(est),
            "llms": p.sizes["llm"],
            "domains": p.sizes["domain"],
            "items": p.sizes["item"],
            "rank": info.get("rank", np.nan),
            "mean_width_overall": _mean_width(est, "overall", interval),
            "mean_width_domain": _mean_width(est, "theta", interval),
            "heldout_loglik": recorded_heldout_loglik(info),
            "converged": diag.get("converged", None),
            "time_s": _total_time(info),
        })
    return pd.DataFrame(rows).set_index("fit")


def _boot_size(est: Estimate) -> int:
    b = est.tree["bootstrap"].to_dataset()
    return int(b.sizes.get("chain", 1) * b.sizes.get("draw", 1))


def _corr(x, y, kind: str) -> float:
    from scipy import stats

    x, y = np.asarray(x, float), np.asarray(y, float)
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if kind == "pearson":
            return float(np.corrcoef(x, y)[0, 1])
        if kind == "spearman":
            return float(stats.spearmanr(x, y).statistic)
        if kind == "kendall":
            return float(stats.kendalltau(x, y).statistic)
    raise ValueError(kind)


def _slope(x, y) -> float:
    """Least-squares slope of ``y`` on ``x``: 1 when two fits report the same quantity on the same scale."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok] - x[ok].mean(), y[ok] - y[ok].mean()
    sxx = float((x * x).sum())
    return float((x * y).sum() / sxx) if len(x) >= 3 and sxx > 0 else float("nan")


def _pair(est_a: Estimate, est_b: Estimate, interval: float, top_k: int, names=("a", "b")) -> dict:
    la, lb = list(est_a.llms), list(est_b.llms)
    common = [x for x in la if x in set(lb)]
    if len(common) < 2:
        raise InputError(f"fits {names[0]} and {names[1]} share {len(common)} LLM(s); "
                         "comparing needs at least 2 in common")
    ia = pd.Index(la).get_indexer(common)
    ib = pd.Index(lb).get_indexer(common)
    oa, ob = est_a.point("overall")[ia], est_b.point("overall")[ib]
    k = min(top_k, len(common))
    top_a = set(np.asarray(common)[np.argsort(-oa, kind="stable")[:k]])
    top_b = set(np.asarray(common)[np.argsort(-ob, kind="stable")[:k]])
    doms = [d for d in est_a.domains if d in set(est_b.domains)]
    da = pd.Index(est_a.domains).get_indexer(doms)
    db = pd.Index(est_b.domains).get_indexer(doms)
    ta = est_a.point("theta")[np.ix_(ia, da)]
    tb = est_b.point("theta")[np.ix_(ib, db)]
    pear = [_corr(ta[:, j], tb[:, j], "pearson") for j in range(len(doms))]
    spear = [_corr(ta[:, j], tb[:, j], "spearman") for j in range(len(doms))]
    slopes = [_slope(ta[:, j], tb[:, j]) for j in range(len(doms))]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        out = {
            "n_llms": len(common),
            "n_domains": len(doms),
            "pearson_overall": _corr(oa, ob, "pearson"),
            "spearman_overall": _corr(oa, ob, "spearman"),
            "kendall_overall": _corr(oa, ob, "kendall"),
            f"top{top_k}_overlap": len(top_a & top_b) / k if k else float("nan"),
            "pearson_domain": float(np.nanmean(pear)) if doms else float("nan"),
            "pearson_domain_min": float(np.nanmin(pear)) if doms else float("nan"),
            "spearman_domain": float(np.nanmean(spear)) if doms else float("nan"),
            "slope_overall": _slope(oa, ob),
            "slope_domain": float(np.nanmean(slopes)) if doms else float("nan"),
            "rmsd_domain": float(np.sqrt(np.nanmean((ta - tb) ** 2))) if doms else float("nan"),
        }
    return out


def compare(estimates_or_dirs, *, names=None, interval: float = 0.9, top_k: int = 10,
            allow_different_data: bool = False) -> pd.DataFrame:
    """Agreement of every pair of fits: scores, ranks, interval widths and held-out fit.

    Parameters
    ----------
    estimates_or_dirs : sequence or mapping
        Two or more fits: :class:`~mtlirt.results.estimate.Estimate` objects, fit
        folders or ``posterior.nc`` files (see :func:`load_fits`).
    names : sequence of str, optional
        Names of the fits (default: folder names, else methods).
    interval : float
        Probability mass of the intervals whose mean width is reported.
    top_k : int
        Size of the top set whose overlap is reported.
    allow_different_data : bool
        Compare fits of different tables (by the LLMs and domains they
        share); by default fits whose recorded data fingerprints differ are
        refused (:meth:`mtlirt.data.responses.Responses.fingerprint`).

    Returns
    -------
    pandas.DataFrame
        One row per pair ``(a, b)`` with columns

        - ``a``, ``b``: fit names; ``n_llms``, ``n_domains``: shared LLMs and domains;
        - ``pearson_overall``, ``spearman_overall``, ``kendall_overall``: agreement
          of the overall scores (Spearman and Kendall: of the rankings);
        - ``top{k}_overlap``: share of each fit's top ``k`` (among shared LLMs)
          in the other's;
        - ``pearson_domain``, ``pearson_domain_min``, ``spearman_domain``: the
          per-domain correlation of the domain scores across LLMs, averaged
          over domains (and its minimum);
        - ``slope_overall``, ``slope_domain``: the least-squares slope of
          ``b``'s scores on ``a``'s (per domain, averaged over domains), and
          ``rmsd_domain``, the root mean squared difference of the domain
          scores: every fit reports the same estimand on the same scale
          (``docs/model.md``, "The estimand"), so agreeing fits have slopes
          near 1 and a small ``rmsd_domain``; a slope away from 1 is a scale
          difference that the correlations cannot show;
        - ``mean_width_overall_a/_b``, ``mean_width_domain_a/_b``: mean width
          of the intervals of each fit (NaN without draws);
        - ``heldout_loglik_a/_b``: held-out log-likelihood (see :func:`recorded_heldout_loglik`).

    Raises
    ------
    InputError
        With fewer than two fits, when two fits share fewer than two LLMs, or
        were fitted to different tables (unless ``allow_different_data``).
    """
    check_interval(interval)
    fits, records = load_fits(estimates_or_dirs, names)
    if len(fits) < 2:
        raise InputError(f"compare needs two or more fits (fit folders), got {len(fits)}")
    check_same_data({n: records.get(n) or e.info for n, e in fits.items()},
                    allow_different_data=allow_different_data, warn_missing=False,
                    hint="compare fits of one table, or pass allow_different_data=True to compare the LLMs and "
                    "domains they share")
    per = {n: (_mean_width(e, "overall", interval), _mean_width(e, "theta", interval),
               recorded_heldout_loglik(e.info))
           for n, e in fits.items()}
    rows = []
    for a, b in combinations(fits, 2):
        row = {"a": a, "b": b, **_pair(fits[a], fits[b], interval, top_k, names=(a, b))}
        row.update({
            "mean_width_overall_a": per[a][0], "mean_width_overall_b": per[b][0],
            "mean_width_domain_a": per[a][1], "mean_width_domain_b": per[b][1],
            "heldout_loglik_a": per[a][2], "heldout_loglik_b": per[b][2],
        })
        rows.append(row)
    return pd.DataFrame(rows)
