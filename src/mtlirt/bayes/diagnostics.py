"""Convergence diagnostics, pointwise log-likelihood and posterior predictive
checks for fits of :func:`mtlirt.bayes.fit_bayes` (their held-out
log-likelihood: :func:`mtlirt.heldout_loglik`, as of every fit).

Two pointwise log-likelihoods for LOO: ``y`` (:func:`add_log_likelihood`),
one element per (LLM, domain), *conditional* on that cell's domain trait;
and ``llm_marginal`` (:func:`add_llm_marginal_log_likelihood`), one element
per LLM, its domain traits and (rank 1-2) its overall traits integrated out
(:func:`mtlirt.evaluate.loo.llm_marginal_loglik`). Importance sampling fails on
the first for most elements (each moves with a trait that only its own data
inform: Pareto k above 0.7); the second depends on the shared parameters
only. :func:`loo` and :func:`compare` take either by ``var_name``; the model
checks (:mod:`mtlirt.evaluate.checks`) use the second.

Convergence thresholds (Vehtari, Gelman, Simpson, Carpenter and Buerkner 2021;
Betancourt 2016)::

    max R-hat (rank-normalised, split, bulk and folded)  <= 1.01
    min bulk ESS and min tail ESS  >= min(400, 100 * chains)
    divergent transitions           == 0
    min E-BFMI over chains          >= 0.3
    Pareto k-hat of the proposals   <= 0.7   (independence Metropolis-Hastings,
                                              Vehtari et al. 2024's PSIS threshold)

computed over the sampled parameters (the model's free random variables
still stored in the posterior, e.g. ``z``, ``eta_raw``, ``loading_free``,
``b_raw``...) together with the reported ``theta``, ``overall`` and
``loadings``; components that are constant over all draws (fixed items, the
unit diagonal of a correlation matrix, structural zeros) are left out.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import xarray as xr
from scipy.special import expit

from mtlirt.bayes._loglik import cell_layout, cell_logliks
from mtlirt.bayes.model import observed_cells
from mtlirt.data.responses import as_responses
from mtlirt.numerics.llm_side import loglik_points
from mtlirt.numerics.mcmc_stats import summary_stats

__all__ = [
    "checked_variables",
    "diagnostics",
    "draws_called_for",
    "RHAT_MAX",
    "ESS_MIN",
    "ESS_MIN_PER_CHAIN",
    "BFMI_MIN",
    "PARETO_K_MAX",
    "pareto_khat",
    "pointwise_loglik",
    "add_log_likelihood",
    "add_llm_marginal_log_likelihood",
    "posterior_predictive_checks",
    "loo",
    "compare",
]

RHAT_MAX = 1.01
ESS_MIN = 400
ESS_MIN_PER_CHAIN = 100
BFMI_MIN = 0.3
PARETO_K_MAX = 0.7

_QOI = ("theta", "overall", "eta", "loadings")
# sampled, but not checked: the factor model's ``eta_raw`` enters only through
# its standardised version ``eta`` (a QOI), so its mean and scale over the LLMs
# are set by the prior alone; their slow wandering is no lack of convergence
_UNIDENTIFIED = ("eta_raw",)


def _post(tree) -> xr.Dataset:
    return tree["posterior"].to_dataset() if hasattr(tree["posterior"], "to_dataset") else tree["posterior"]


def _attrs(tree) -> dict:
    return dict(tree["posterior"].attrs)


CHUNK_ELEMS = 2e7  # draws x parameters per chunk of the R-hat/ESS computation


def diagnostics(tree, var_names: list[str] | None = None, *, recompute: bool = False) -> dict:
    """Convergence diagnostics of a fit (see module docstring for thresholds).

    Parameters
    ----------
    tree : xarray.DataTree
        Result of :func:`mtlirt.bayes.fit_bayes` (ArviZ layout).
    var_names : list of str, optional
        Variables to check; default the sampled variables plus ``theta``,
        ``overall``, ``eta``, ``loadings`` (``eta_raw`` is replaced by its
        standardised version ``eta``: its mean and scale over the LLMs are
        not identified by the likelihood).
    recompute : bool
        Recompute even when ``fit_bayes`` stored the diagnostics in the
        posterior's ``mtlirt_diagnostics`` attribute (returned otherwise).

    Returns
    -------
    dict
        ``max_rhat``, ``min_ess_bulk``, ``min_ess_tail``, ``divergences``,
        ``min_bfmi``, ``converged`` (bool; ``None`` for MAP/ADVI fits, which
        have no MCMC diagnostics), ``worst_rhat`` (variable of the largest
        R-hat), ``n_parameters`` (scalars checked), ``share_rhat_above``
        (share of them with R-hat > 1.01), ``ess_threshold``, ``n_chains``,
        ``n_draws``, ``algorithm``.
    """
    post = _post(tree)
    attrs = _attrs(tree)
    if var_names is None and not recompute and isinstance(attrs.get("mtlirt_diagnostics"), str):
        return json.loads(attrs["mtlirt_diagnostics"])  # computed by fit_bayes
    # mtlirt_method: fits written before the name became algorithm
    algorithm = attrs.get("mtlirt_algorithm", attrs.get("mtlirt_method", "nuts"))
    C = post.sizes.get("chain", 1)
    D = post.sizes.get("draw", 1)
    thr = min(ESS_MIN, ESS_MIN_PER_CHAIN * C)
    out: dict[str, Any] = {
        "max_rhat": float("nan"),
        "min_ess_bulk": float("nan"),
        "min_ess_tail": float("nan"),
        "divergences": 0,
        "min_bfmi": float("nan"),
        "converged": None,
        "worst_rhat": None,
        "n_parameters": 0,
        "share_rhat_above": float("nan"),
        "ess_threshold": thr,
        "n_chains": int(C),
        "n_draws": int(D),
        "algorithm": algorithm,
    }
    if algorithm != "nuts" or D < 4:
        return out
    out.update(_rhat_and_ess(post, _checked_vars(post, attrs, var_names), C, D))
    out.update(_sampler_checks(tree))
    out["converged"] = bool(
        np.isfinite(out["max_rhat"]) and out["max_rhat"] <= RHAT_MAX
        and out["min_ess_bulk"] >= thr and out["min_ess_tail"] >= thr
        and out["divergences"] == 0
        and (not np.isfinite(out["min_bfmi"]) or out["min_bfmi"] >= BFMI_MIN)
        and out.get("pareto_khat", 0.0) <= PARETO_K_MAX
    )
    return out


def draws_called_for(D: int, chains: int, checked: dict, least: int, most: int) -> int:
    """Draws per chain to add to a run of ``D`` that failed the checks ``checked``: the ESS grows and
    R-hat - 1 shrinks in proportion to the draws of chains that mix, so the run the worst figure calls
    for, 10% beyond, within ``least`` and ``most`` (``most`` where a figure is missing)."""
    need = float(D)
    floor = min(ESS_MIN, ESS_MIN_PER_CHAIN * chains)
    for key in ("min_ess_bulk", "min_ess_tail"):
        e = checked.get(key)
        if e is None or not np.isfinite(e) or e <= 0:
            return most
        need = max(need, D * floor / e)
    rhat = checked.get("max_rhat")
    if rhat is None or not np.isfinite(rhat):
        return most
    need = max(need, D * (rhat - 1.0) / (RHAT_MAX - 1.0))
    return int(min(max(math.ceil(1.1 * need - 1e-9) - D, least), most))


def _checked_vars(post, attrs: dict, var_names: list[str] | None) -> list[str]:
    """The posterior's variables to check, each once: ``var_names``, or the sampled
    ones (``eta_raw`` replaced by ``eta``) and the derived quantities of interest,
    or else every variable."""
    if var_names is None:
        sampled = attrs.get("mtlirt_sampled_vars")
        sampled = json.loads(sampled) if isinstance(sampled, str) else list(sampled or [])
        var_names = [v for v in sampled if v in post and not (v in _UNIDENTIFIED and "eta" in post)]
        var_names += [v for v in _QOI if v in post]
        if not var_names:
            var_names = [v for v in post.data_vars]
    seen = []
    for v in var_names:
        if v not in seen and v in post:
            seen.append(v)
    return seen


def checked_variables(tree, var_names: list[str] | None = None) -> list[str]:
    """The variables :func:`diagnostics` checks in ``tree`` (see its ``var_names``)."""
    return _checked_vars(_post(tree), _attrs(tree), var_names)


def _rhat_and_ess(post, names: list[str], C: int, D: int) -> dict:
    """Largest R-hat (and its variable), smallest bulk and tail ESS, number of
    scalars checked and share above ``RHAT_MAX``, over the non-constant scalars of
    ``names``, in chunks of bounded memory."""
    max_r, worst, min_b, min_t = -np.inf, None, np.inf, np.inf
    n_par, n_above = 0, 0
    for v in names:
        da = post[v]
        if "chain" not in da.dims or "draw" not in da.dims:
            continue
        x = np.asarray(da.transpose("chain", "draw", ...).values)
        x = x.reshape(C, D, -1)
        per = max(1, int(CHUNK_ELEMS // (C * D)))  # parameters per chunk: bounded memory
        for j in range(0, x.shape[2], per):
            xc = x[:, :, j:j + per]
            rng = xc.max((0, 1)) - xc.min((0, 1))
            keep = rng > 1e-12 * np.maximum(1.0, np.abs(xc[0, 0]))
            if not keep.any():
                continue
            if not keep.all():
                xc = xc[:, :, keep]
            r, b, t = summary_stats(xc)
            if np.isfinite(r).any() and np.nanmax(r) > max_r:
                max_r, worst = float(np.nanmax(r)), v
            n_par += r.size
            n_above += int(np.sum(r > RHAT_MAX))
            min_b = min(min_b, float(np.nanmin(b)))
            min_t = min(min_t, float(np.nanmin(t)))
    return {
        "n_parameters": n_par,
        "share_rhat_above": n_above / n_par if n_par else float("nan"),
        "max_rhat": max_r if np.isfinite(max_r) else float("nan"),
        "worst_rhat": worst,
        "min_ess_bulk": min_b if np.isfinite(min_b) else float("nan"),
        "min_ess_tail": min_t if np.isfinite(min_t) else float("nan"),
    }


def pareto_khat(log_weights) -> float:
    """The Pareto k-hat of importance ratios given by their logs (ArviZ's
    PSIS; draws with ratio 0 are left out). Above ``PARETO_K_MAX`` (0.7) the
    ratios' right tail is too heavy for importance sampling, or for an
    independence sampler with that proposal, to be trusted."""
    from arviz_stats.base import array_stats

    lw = np.asarray(log_weights, dtype=float).ravel()
    lw = lw[np.isfinite(lw)]
    if lw.size < 25:  # PSIS fits the largest fifth of the ratios, and needs five of them at least
        return float("inf")
    # psislw smooths the log weights -x (it is written for LOO's log-likelihoods)
    k = float(array_stats.psislw(lw.max() - lw, r_eff=1.0)[1])
    return k if not np.isnan(k) else float("inf")  # no tail fitted: nothing bounds the ratios


def _sampler_checks(tree) -> dict:
    """From the sampler's stats, where recorded: NUTS's number of divergences and
    smallest E-BFMI over the chains; independence Metropolis-Hastings's
    acceptance rate and the Pareto k-hat of its proposals' importance ratios
    (``pareto_khat``, at most ``PARETO_K_MAX``: the proposal covers the
    posterior's tails)."""
    out = {}
    ss = tree["sample_stats"] if "sample_stats" in tree.children else None
    if ss is not None:
        ss = ss.to_dataset() if hasattr(ss, "to_dataset") else ss
        if "proposal_log_weight" in ss:
            out["pareto_khat"] = pareto_khat(ss["proposal_log_weight"].values)
            out["min_acceptance"] = float(np.asarray(ss["accepted"].values).mean(-1).min())
        if "diverging" in ss:
            out["divergences"] = int(np.asarray(ss["diverging"].values).sum())
        if "energy" in ss:
            e = np.asarray(ss["energy"].transpose("chain", "draw").values, dtype=float)
            num = np.square(np.diff(e, axis=1)).sum(1)
            den = np.square(e - e.mean(1, keepdims=True)).sum(1)
            with np.errstate(divide="ignore", invalid="ignore"):
                out["min_bfmi"] = float(np.min(num / den))
    return out


# ---------------------------------------------------------------------------
# log-likelihood
# ---------------------------------------------------------------------------


def pointwise_loglik(tree, responses: Any, *, tables=None, max_elems: float = 4e6) -> np.ndarray:
    """Log-likelihood per draw aggregated per (LLM, domain).

    Parameters
    ----------
    tree : xarray.DataTree
        A fit with the derived quantities.
    responses : Responses, DataFrame or path
        The data the fit used.
    tables : LikelihoodTables, optional
        Fixed-items tables (then O(N K) per draw); without them every response's term is summed
        into its cell (:func:`~mtlirt.bayes._loglik.cell_logliks`, no N x J temporaries).
    max_elems : float
        Chunk size of the tables' route (elements of its per-draw N x K arrays).

    Returns
    -------
    ndarray (chain, draw, llm, domain)
    """
    from mtlirt.results.estimate import Estimate

    arr = as_responses(responses)
    est = Estimate(tree)
    th, a, d, c = est.item_model_draws(by_chain=True)
    item_domain = est.item_domain
    C, D, N, K = th.shape
    out = np.empty((C, D, N, K))
    if tables is not None:
        per = max(1, int(max_elems // max(N * K, 1)))
        for ch in range(C):
            for s in range(0, D, per):
                out[ch, s:s + per] = loglik_points(tables, th[ch, s:s + per])
        return out
    rows, cols, y = observed_cells(arr)  # the joint model's own list of the observed cells
    ptr, order = cell_layout(rows * K + item_domain[cols], cols, N * K)
    items, y = cols[order], y[order]
    contig = np.ascontiguousarray
    for ch in range(C):  # the cells' sums, one pass over the responses per draw (_loglik.cell_logliks)
        guess = c[ch] if np.any(c[ch]) else np.zeros((D, 0))
        cell_logliks(contig(th[ch].reshape(D, N * K)), contig(a[ch]), contig(d[ch]), contig(guess), ptr, items, y,
                     out[ch].reshape(D, N * K))
    return out


def add_log_likelihood(tree, responses: Any, *, tables=None):
    """Add a ``log_likelihood`` group with ``y`` (chain, draw, llm, domain).

    Each pointwise element is the log-likelihood of one LLM's responses in
    one domain, so :func:`loo` is leave-one-(LLM, domain)-out.

    Parameters
    ----------
    tree : xarray.DataTree
    responses : Responses, DataFrame or path
    tables : LikelihoodTables, optional

    Returns
    -------
    xarray.DataTree
        The same tree (modified in place and returned).
    """
    post = _post(tree)
    ll = pointwise_loglik(tree, responses, tables=tables)
    ds = xr.Dataset(
        {"y": (("chain", "draw", "llm", "domain"), ll)},
        coords={"chain": post["chain"].values, "draw": post["draw"].values,
                "llm": post["llm"].values, "domain": post["domain"].values},
    )
    tree["log_likelihood"] = xr.DataTree(ds)
    return tree


def add_llm_marginal_log_likelihood(tree, responses: Any, *, integrate_overall: bool = True, **quadrature):
    """Add ``llm_marginal`` (chain, draw, llm) to the ``log_likelihood`` group: each LLM's
    log-likelihood of all its responses with its domain traits (and, with ``integrate_overall``
    and rank <= 2, its overall traits) integrated out, for every draw of a factor-model fit
    (:func:`mtlirt.evaluate.loo.llm_marginal_loglik`).

    Parameters
    ----------
    tree : xarray.DataTree
    responses : Responses
        The data the fit used.
    integrate_overall : bool
    **quadrature
        ``n_theta_nodes``, ``n_eta_nodes``.

    Returns
    -------
    xarray.DataTree
        The same tree (modified in place and returned); ``loo(tree, var_name="llm_marginal")``
        is then leave-one-LLM-out.
    """
    from mtlirt.evaluate.loo import llm_marginal_loglik
    from mtlirt.results.estimate import Estimate

    post = _post(tree)
    n = int(post.sizes.get("chain", 1) * post.sizes.get("draw", 1))
    ml = llm_marginal_loglik(Estimate(tree), responses, integrate_overall=integrate_overall, max_draws=n,
                             **quadrature)
    var = xr.Variable(("chain", "draw", "llm"), ml["loglik"])
    if "log_likelihood" in tree.children:
        ds = tree["log_likelihood"].to_dataset().assign(llm_marginal=var)
    else:
        ds = xr.Dataset({"llm_marginal": var}, coords={"chain": post["chain"].values, "draw": post["draw"].values,
                                                       "llm": post["llm"].values})
    ds["llm_marginal"].attrs["overall_integrated"] = int(ml["overall_integrated"])
    tree["log_likelihood"] = xr.DataTree(ds)
    return tree


def posterior_predictive_checks(tree, responses: Any, *, n_draws: int = 200, seed: int = 0,
                                n_bins: int = 10, max_elems: float = 3e7) -> dict:
    """Posterior predictive checks on the observed cells.

    Replicated responses ``y_rep ~ Bernoulli(P_ij)`` are drawn for
    ``n_draws`` posterior draws (chosen with ``seed``) and compared to the
    data.

    Parameters
    ----------
    tree : xarray.DataTree
    responses : Responses, DataFrame or path
    n_draws : int
        Posterior draws used (at most all).
    seed : int
    n_bins : int
        Bins of predicted probability for the calibration table.
    max_elems : float
        Chunk size.

    Returns
    -------
    dict of pandas.DataFrame
        ``domain``: per domain observed accuracy, replicated mean, 5% and 95%
        quantiles, posterior predictive p-value ``P(rep >= obs)``;
        ``item``: the same per item (observed proportion correct vs
        replicated); ``calibration``: observed cells binned by their posterior
        mean probability, with mean predicted and observed frequency.
    """
    import pandas as pd

    from mtlirt.results.estimate import Estimate

    arr = as_responses(responses)
    est = Estimate(tree)
    th, a, d, c = est.item_model_draws(by_chain=True)
    item_domain = est.item_domain
    C, D, N, K = th.shape
    J = a.shape[-1]
    rng = np.random.default_rng(seed)
    S = C * D
    take = np.sort(rng.choice(S, size=min(n_draws, S), replace=False))
    thf = th.reshape(S, N, K)[take]
    af, df, cf = a.reshape(S, J)[take], d.reshape(S, J)[take], c.reshape(S, J)[take]
    y = arr.correct.astype(np.float64)
    obs = arr.observed
    n_obs_item = obs.sum(0)
    starts = np.array([s.start for s in arr.domain_slices])
    n_obs_dom = np.add.reduceat(n_obs_item, starts)
    rep_item = np.empty((len(take), J))
    pmean = np.zeros((N, J))
    per = max(1, int(max_elems // max(N * J, 1)))
    for s in range(0, len(take), per):
        sl = slice(s, min(len(take), s + per))
        x = af[sl][:, None, :] * thf[sl][:, :, item_domain] + df[sl][:, None, :]
        p = cf[sl][:, None, :] + (1 - cf[sl][:, None, :]) * expit(x)
        pmean += p.sum(0)
        yr = (rng.random(p.shape) < p) & obs[None]
        rep_item[sl] = yr.sum(1)
    pmean /= len(take)
    obs_item = (y * obs).sum(0)
    rep_dom = np.add.reduceat(rep_item, starts, axis=1)
    obs_dom = np.add.reduceat(obs_item, starts)

    def table(rep, obs_count, n, index):
        with np.errstate(divide="ignore", invalid="ignore"):
            acc_rep = rep / n
            acc_obs = obs_count / n
        return pd.DataFrame({
            "n": n,
            "observed": acc_obs,
            "replicated_mean": acc_rep.mean(0),
            "replicated_q05": np.quantile(acc_rep, 0.05, axis=0),
            "replicated_q95": np.quantile(acc_rep, 0.95, axis=0),
            "ppp": (rep >= obs_count[None, :]).mean(0),
        }, index=pd.Index(index, name=index.name if hasattr(index, "name") else None))

    dom_tab = table(rep_dom, obs_dom, n_obs_dom, pd.Index(list(arr.domains), name="domain"))
    item_tab = table(rep_item, obs_item, n_obs_item, pd.Index(list(arr.items), name="item"))
    item_tab.insert(0, "domain", [arr.domains[k] for k in arr.item_domain])
    pm_obs = pmean[obs]
    y_obs = y[obs]
    edges = np.linspace(0, 1, n_bins + 1)
    b = np.clip(np.digitize(pm_obs, edges) - 1, 0, n_bins - 1)
    cnt = np.bincount(b, minlength=n_bins)
    with np.errstate(divide="ignore", invalid="ignore"):
        cal = pd.DataFrame({
            "bin_lo": edges[:-1], "bin_hi": edges[1:], "n": cnt,
            "predicted": np.bincount(b, pm_obs, n_bins) / cnt,
            "observed": np.bincount(b, y_obs, n_bins) / cnt,
        })
    return {"domain": dom_tab, "item": item_tab, "calibration": cal}


def loo(tree, var_name: str = "y", **kwargs):
    """PSIS-LOO (``arviz.loo``) over a pointwise log-likelihood.

    Parameters
    ----------
    tree : xarray.DataTree
        With a ``log_likelihood`` group (see :func:`add_log_likelihood`,
        :func:`add_llm_marginal_log_likelihood`).
    var_name : str
        ``"y"``: leave one (LLM, domain) out, conditional on its trait (most
        Pareto k above 0.7); ``"llm_marginal"``: leave one LLM out, its traits
        integrated out (an LLM whose likelihood no draw changes gets equal
        weights and a Pareto k of NaN: :func:`mtlirt.evaluate.loo.psis_loo_llm`).
    **kwargs
        Passed to ``arviz.loo``.

    Returns
    -------
    arviz.ELPDData
    """
    import arviz as az

    if var_name == "llm_marginal" and not {"log_weights", "pareto_k"} & set(kwargs):
        from mtlirt.evaluate.loo import psis_loo_llm

        return psis_loo_llm(tree, **kwargs)
    return az.loo(tree, var_name=var_name, **kwargs)


def compare(trees: dict, var_name: str = "y", **kwargs):
    """Compare fits by PSIS-LOO (``arviz.compare``).

    Parameters
    ----------
    trees : dict of str -> xarray.DataTree
        Fits of the same data, each with a ``log_likelihood`` group.
    var_name : str
        The pointwise log-likelihood (see :func:`loo`).
    **kwargs
        Passed to ``arviz.compare``.

    Returns
    -------
    pandas.DataFrame
    """
    import arviz as az

    return az.compare(trees, var_name=var_name, **kwargs)
