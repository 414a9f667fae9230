"""Leave-one-LLM-out (the model checks of :mod:`mtlirt.evaluate.checks`): every LLM's marginal likelihood,
its domain traits (and by default its overall trait) integrated out by adaptive Gauss-Hermite quadrature
(:func:`llm_marginal_loglik`), and PSIS-LOO on it (:func:`loo_llm`)."""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from ..errors import InputError
from ..numerics.llm_side import gauss_hermite, node_loglik
from ..progress import progress_bar
from .check_inputs import _check_data


def llm_marginal_loglik(est, responses, *, integrate_overall: bool = True, n_theta_nodes: int = 32,
                        n_eta_nodes: int = 12, max_draws: int = 400, max_elems: float = 2e7) -> dict:
    """Per draw and LLM, the log-likelihood of all of the LLM's responses with its domain traits
    (and, with ``integrate_overall``, its overall traits) integrated out.

    Adaptive Gauss-Hermite quadrature: the domain trait of cell ``(i, k)`` on
    ``n_theta_nodes`` nodes around its posterior mean with its posterior sd,
    the overall traits on ``n_eta_nodes`` per factor around theirs; with the
    draw's loadings ``Lambda`` and ``psi = sqrt(1 - |Lambda|^2)``::

        log p(y_i | eta_i, draw) = sum_k log int exp(l_ik(t)) N(t; Lambda_k eta_i, psi_k^2) dt
        log p(y_i | draw)        = log int p(y_i | eta, draw) N(eta; 0, I) d eta

    Cells without responses contribute 0.

    Returns
    -------
    dict
        ``loglik`` (chain, draw', llm) over the draws kept (every ``t``-th
        draw of each chain, at most ``max_draws`` in all), ``draws`` (their
        indices), ``overall_integrated`` (bool).
    """
    post = est.posterior
    if "eta" not in post or "loadings" not in post:
        raise InputError("the leave-one-LLM-out check needs a factor-model fit (overall traits and loadings)")
    C, D = post.sizes["chain"], post.sizes["draw"]
    step = max(1, int(np.ceil(C * D / max_draws)))
    keep = np.arange(0, D, step)
    th_all, eta_all, lam, a_all, d_all = (est.draws(v, source="posterior", by_chain=True).astype(np.float64)
                                          for v in ("theta", "eta", "loadings", "discrimination", "intercept"))
    c_all = est.draws("guessing", source="posterior", by_chain=True) if "guessing" in post else np.zeros_like(a_all)
    theta, eta, lam, a_all, d_all, c_all = (v[:, keep] for v in (th_all, eta_all, lam, a_all, d_all, c_all))
    Dk = len(keep)
    N, K = theta.shape[2:]
    r = eta.shape[-1]
    mu = th_all.mean((0, 1))
    sd = np.maximum(th_all.std((0, 1)), 0.02)
    xq, lwq = gauss_hermite(n_theta_nodes)
    nodes = mu[..., None] + sd[..., None] * xq  # N K Q
    # importance form: int f(t) dt = sum_q w_q f(t_q) / N(x_q; 0, 1) / sd
    lbase = lwq + 0.5 * xq**2 + 0.5 * np.log(2 * np.pi)  # Q
    lsd = np.log(sd)
    empty = np.zeros((N, K), bool)
    if responses.mask is not None:
        empty = np.column_stack([~responses.mask[:, s].any(1) for s in responses.domain_slices])
    fixed = all(np.ptp(v.reshape(-1, v.shape[-1]), axis=0).max() == 0 for v in (a_all, d_all, c_all))
    L = None
    if fixed:
        L = node_loglik(responses.correct, responses.mask, responses.domain_slices, a_all[0, 0], d_all[0, 0],
                        c_all[0, 0], nodes, max_elems=max_elems)

    overall = integrate_overall and r <= 2
    if overall:
        xe, lwe = gauss_hermite(n_eta_nodes)
        grids = np.stack(np.meshgrid(*([xe] * r), indexing="ij"), -1).reshape(-1, r)  # P r
        lw_grid = np.stack(np.meshgrid(*([lwe] * r), indexing="ij"), -1).reshape(-1, r).sum(-1)
        nu = eta_all.mean((0, 1))  # N r
        tau = np.maximum(eta_all.std((0, 1)), 0.02)
        eta_nodes = nu[:, None, :] + tau[:, None, :] * grids[None]  # N P r
        # importance form against N(nu, tau^2) per factor, prior N(0, I)
        lprior = -0.5 * (eta_nodes**2).sum(-1) + 0.5 * (grids**2).sum(-1)[None] + np.log(tau).sum(-1)[:, None]
        lweta = lw_grid[None] + lprior  # N P
    else:  # the draw's overall traits: one node each
        lweta = np.zeros((N, 1))
    from ._loo_sums import marginal_loglik

    out = np.empty((C, Dk, N))
    with progress_bar(C * Dk, "leave-one-LLM-out") as bar:
        for ch in range(C):
            for t in range(Dk):
                Ln = L if fixed else node_loglik(responses.correct, responses.mask, responses.domain_slices,
                                                 a_all[ch, t], d_all[ch, t], c_all[ch, t], nodes, max_elems=max_elems)
                lm = np.ascontiguousarray(lam[ch, t])
                psi = np.sqrt(np.clip(1.0 - (lm**2).sum(-1), 1e-8, None))
                at = eta_nodes if overall else np.ascontiguousarray(eta[ch, t][:, None, :])
                marginal_loglik(Ln, nodes, lbase, lsd, empty, at, lm, psi, lweta, out[ch, t])
                bar.update()
    return {"loglik": out, "draws": keep, "overall_integrated": bool(overall)}


@dataclass
class LooCheck:
    """Result of :func:`loo_llm`.

    Attributes
    ----------
    elpd : arviz ELPDData
        ``arviz.loo``'s result (pointwise).
    table : pandas.DataFrame
        Per LLM: ``llm, elpd_loo, pareto_k, k_ok`` (``pareto_k <= good_k``).
    good_k : float
        ArviZ's threshold of a reliable importance-sampling estimate.
    overall_integrated : bool
        Whether the overall traits were integrated out too.
    n_draws : int
    seconds : float
    """

    elpd: Any
    table: pd.DataFrame
    good_k: float
    overall_integrated: bool
    n_draws: int
    seconds: float

    def summary(self) -> dict:
        """Short JSON-ready record."""
        e = self.elpd
        return {"elpd_loo": float(e.elpd), "se": float(e.se), "p_loo": float(e.p),
                "llms": len(self.table), "high_k": int((~self.table["k_ok"]).sum()),
                "max_k": float(self.table["pareto_k"].max()), "good_k": self.good_k,
                "overall_integrated": self.overall_integrated, "draws": self.n_draws, "seconds": self.seconds}


#: An LLM whose marginal log-likelihood moves by less than this (nats) over the draws has equal weights.
_FLAT = 1e-9


def psis_loo_llm(tree, **kwargs):
    """``arviz.loo`` of ``tree``'s ``llm_marginal`` (chain, draw, llm), also where some LLM's
    likelihood is the same in every draw: an LLM that ran one domain only, its traits integrated out
    with items fixed, has a likelihood that no sampled parameter changes. Its importance weights are
    equal (leaving it out changes no draw's weight), which PSIS cannot fit a tail to; those LLMs get
    the equal weights and a Pareto k of NaN, the others PSIS's, and the summary counts every LLM.
    ``kwargs`` go to ``arviz.loo`` (``pointwise`` defaults to True)."""
    import arviz as az

    kwargs.setdefault("pointwise", True)
    ll = tree["log_likelihood"]["llm_marginal"].transpose("chain", "draw", "llm").values
    flat = np.ptp(ll.reshape(-1, ll.shape[-1]), axis=0) < _FLAT
    if not flat.any():
        return az.loo(tree, var_name="llm_marginal", **kwargs)
    n = ll.shape[0] * ll.shape[1]
    log_w = xr.full_like(tree["log_likelihood"]["llm_marginal"], -np.log(n)).transpose("llm", ...)
    pareto_k = xr.full_like(log_w.isel(chain=0, draw=0, drop=True), np.nan)
    if not flat.all():
        part = az.loo(tree.isel(llm=np.flatnonzero(~flat)), var_name="llm_marginal", **{**kwargs, "pointwise": True})
        moving = {"llm": log_w["llm"].values[~flat]}
        log_w.loc[moving] = part.log_weights.transpose(*log_w.dims).values
        pareto_k.loc[moving] = part.pareto_k.values
    return az.loo(tree, var_name="llm_marginal", log_weights=log_w, pareto_k=pareto_k, **kwargs)


def loo_llm(est, responses, *, integrate_overall: bool = True, max_draws: int = 400, **quadrature) -> LooCheck | None:
    """PSIS-LOO with one observation per LLM on its marginal likelihood (module docstring).

    Parameters
    ----------
    est : Estimate
        A Bayesian factor-model fit with several draws.
    responses : Responses
        The fit's data.
    integrate_overall : bool
        Integrate each LLM's overall traits out too (rank 1 or 2); else they
        are given (conditional on the draw).
    max_draws : int
        Posterior draws used at most (every ``t``-th draw of each chain).
    **quadrature
        ``n_theta_nodes``, ``n_eta_nodes`` of :func:`llm_marginal_loglik`.

    Returns
    -------
    LooCheck or None
        None for point fits and models without overall traits.
    """
    _check_data(est, responses)
    post = est.posterior
    if est.n_draws < 2 or "eta" not in post or "loadings" not in post:
        return None
    t0 = time.perf_counter()
    ml = llm_marginal_loglik(est, responses, integrate_overall=integrate_overall, max_draws=max_draws,
                             **quadrature)
    ll = ml["loglik"]
    C, Dk, N = ll.shape
    coords = {"chain": np.arange(C), "draw": np.arange(Dk), "llm": list(est.llms)}
    tree = xr.DataTree.from_dict({
        "posterior": xr.Dataset({"overall": (("chain", "draw", "llm"),
                                             post["overall"].values[:, ml["draws"]].astype(np.float64))},
                                coords=coords),
        "log_likelihood": xr.Dataset({"llm_marginal": (("chain", "draw", "llm"), ll)}, coords=coords),
    })
    with warnings.catch_warnings():  # high Pareto k are reported in the table, not warned about
        warnings.filterwarnings("ignore", message="Estimated shape parameter of Pareto", category=UserWarning)
        res = psis_loo_llm(tree)
    k = np.asarray(res.pareto_k.values, float).reshape(-1)
    good = float(getattr(res, "good_k", 0.7))
    table = pd.DataFrame({"llm": list(est.llms), "elpd_loo": np.asarray(res.elpd_i.values, float).reshape(-1),
                          "pareto_k": k, "k_ok": ~(k > good)})
    return LooCheck(elpd=res, table=table, good_k=good, overall_integrated=ml["overall_integrated"],
                    n_draws=C * Dk, seconds=time.perf_counter() - t0)
