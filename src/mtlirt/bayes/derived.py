"""Derived quantities of the common result layout, computed after sampling in
numpy (never as PyMC Deterministics, which would be N x K (x J) per draw).

Names and dims (every report and plot reads these)::

    theta              (chain, draw, llm, domain)
    overall            (chain, draw, llm)
    eta                (chain, draw, llm, factor)       factor models
    loadings           (chain, draw, domain, factor)    (correlated: corr of each
                                                          domain with the overall)
    discrimination     (chain, draw, item)
    intercept          (chain, draw, item)
    guessing           (chain, draw, item)
    domain_corr        (chain, draw, domain_a, domain_b)
    expected_accuracy  (chain, draw, llm)

and the non-dimension coordinate ``item_domain`` (domain name of every item).
"""

from __future__ import annotations

from functools import cache

import numpy as np
import xarray as xr

from mtlirt.bayes._factor import factor_parts, standardize_eta
from mtlirt.bayes.spec import ModelSpec, capped_discrimination
from mtlirt.data.responses import Responses
from mtlirt.results import schema
from mtlirt.results.estimate import expected_accuracy

__all__ = ["add_derived", "trait_draws", "item_draws", "factor_parts", "overall_score", "CONTAINED"]

#: Sampled variables the derived posterior drops as part of another: a centred domain's ``theta_raw`` is its
#: column of ``theta``.
CONTAINED = {"theta_raw": "theta"}



def _v(post: xr.Dataset, name: str) -> np.ndarray:
    return np.asarray(post[name].values, dtype=np.float64)


def _chunks(n_total: int, per: int):
    for s in range(0, n_total, max(per, 1)):
        yield slice(s, min(n_total, s + per))


def _positions(post: xr.Dataset, name: str, domains: list) -> np.ndarray:
    """Domain positions of the last dim of ``post[name]`` (domain, domain_c or domain_nc)."""
    dim = post[name].dims[-1]
    pos = {d: i for i, d in enumerate(domains)}
    return np.array([pos[str(x)] for x in post[dim].values], dtype=np.int64)


def overall_score(eta: np.ndarray, lam: np.ndarray) -> np.ndarray:
    """The overall score of the factor model, draw by draw: the shared part of
    the average domain trait, standardised over the LLMs (``docs/model.md``,
    "The estimand").

    ``mean_k theta_ik = lbar . eta_i + mean_k psi_k z_ik`` with
    ``lbar = mean_k Lambda_k``; its shared part ``lbar . eta_i``, scaled to
    unit variance over the LLMs, is the overall score. It does not depend on
    how the factors are rotated (the anchors, the lower-triangular zeros), and
    it is the same quantity as MTL's overall score (the standardised mean of
    its centres). At rank one it is the factor itself (whose loadings are
    oriented to sum positive).

    The traits are those the likelihood sees, not each factor standardised
    first: at rank two and more, factors whose spreads over the LLMs differ
    weigh in by their spreads.

    Parameters
    ----------
    eta : ndarray (..., N, r)
        Overall traits.
    lam : ndarray (..., K, r)
        Loadings, oriented so each factor's loadings sum >= 0.

    Returns
    -------
    ndarray (..., N)
    """
    if eta.shape[-1] == 1:
        o = eta[..., 0] - eta[..., 0].mean(axis=-1, keepdims=True)
    else:
        lbar = lam.mean(axis=-2)  # ..., r
        o = np.einsum("...nr,...r->...n", eta, lbar)
        o -= o.mean(axis=-1, keepdims=True)
    sd = o.std(axis=-1, keepdims=True)
    return o / np.where(sd > 1e-12, sd, 1.0)


def trait_draws(post: xr.Dataset, spec: ModelSpec, anchors: list[int], domains: list) -> dict:
    """Traits per draw from the free variables.

    Parameters
    ----------
    post : xarray.Dataset
        Free variables (chain, draw, ...).
    spec : ModelSpec
    anchors : list of int
    domains : list of str
        Domain names in model order.

    Returns
    -------
    dict
        ``theta`` (C, D, N, K); factor: ``eta`` (C, D, N, r), ``loadings``
        (C, D, K, r) with signs fixed so every factor's loadings sum >= 0;
        correlated: ``loadings`` (C, D, K, 1) = correlation of each domain
        with the overall score. Always ``overall`` (C, D, N) and
        ``domain_corr`` (C, D, K, K).
    """
    domains = [str(d) for d in domains]
    K = len(domains)
    out = {}
    if spec.traits == "factor":
        free = _v(post, "loading_free") if "loading_free" in post else None
        moments = {k: _v(post, k) for k in ("eta_mean", "eta_var") if k in post}
        eta, lam, psi = factor_parts(_v(post, "eta_raw"), free, _v(post, "loading_diag"), K, anchors, **moments)
        C, D, N, _ = eta.shape
        if "z" not in post and post["theta_raw"].dims[-1] == "domain":
            theta = post["theta_raw"].values  # all centred: no copy (float32 kept)
        else:
            theta = np.empty((C, D, N, K))
        if "theta_raw" in post and "z" in post:
            pc = _positions(post, "theta_raw", domains)
            theta[:, :, :, pc] = post["theta_raw"].values
        if "z" in post:
            pn = _positions(post, "z", domains)
            z = post["z"].values
            per = max(1, int(2e7 // max(N * K, 1)))
            for c in range(C):
                for sl in _chunks(D, per):
                    t = np.einsum("dnr,dkr->dnk", eta[c, sl], lam[c, sl][:, pn, :])
                    t += z[c, sl] * psi[c, sl][:, None, pn]
                    theta[c, sl][:, :, pn] = t
        sgn = np.sign(lam.sum(-2))  # C D r
        sgn[sgn == 0] = 1.0
        lam = lam * sgn[:, :, None, :]
        eta = eta * sgn[:, :, None, :]
        corr = np.einsum("cdkr,cdlr->cdkl", lam, lam)
        idx = np.arange(K)
        corr[:, :, idx, idx] = 1.0
        overall = overall_score(eta, lam)
        if moments:  # reported standardised over the LLMs, as where the model has no eta_mean, eta_var
            eta = standardize_eta(eta, np, axis=-2)
        out.update(theta=theta, eta=eta, loadings=lam, overall=overall, domain_corr=corr)
        return out
    # correlated
    L = _v(post, "corr_chol")  # C D K K
    C, D = L.shape[:2]
    corr = np.einsum("cdkm,cdlm->cdkl", L, L)
    idx = np.arange(K)
    corr[:, :, idx, idx] = 1.0
    if "theta_raw" in post:
        theta = _v(post, "theta_raw")
        N = theta.shape[2]
    else:
        z = post["z"].values
        N = z.shape[2]
        theta = np.empty((C, D, N, K))
        per = max(1, int(2e7 // max(N * K, 1)))
        for c in range(C):
            for sl in _chunks(D, per):
                theta[c, sl] = np.einsum("dnm,dkm->dnk", z[c, sl], L[c, sl])
    w, vec = np.linalg.eigh(corr)  # ascending
    v1 = vec[..., -1]  # C D K
    l1 = np.maximum(w[..., -1], 1e-12)
    sgn = np.sign(v1.sum(-1))
    sgn[sgn == 0] = 1.0
    v1 = v1 * sgn[..., None]
    overall = np.einsum("cdnk,cdk->cdn", theta, v1) / np.sqrt(l1)[..., None]
    loadings = (v1 * np.sqrt(l1)[..., None])[..., None]
    out.update(theta=theta, overall=overall, loadings=loadings, domain_corr=corr)
    return out


def item_draws(post: xr.Dataset, spec: ModelSpec, item_domain: np.ndarray) -> dict:
    """Item parameters per draw (joint model): ``discrimination``, ``intercept``,
    ``guessing`` (C, D, J)."""
    dom = item_domain
    beta = _v(post, "beta")
    tau = _v(post, "tau")
    if "b" in post:
        b = _v(post, "b")
    else:
        b = beta[..., dom] + tau[..., dom] * _v(post, "b_raw")
    alpha = _v(post, "alpha")
    cap = spec.priors.discrimination_max
    if spec.item_model == "1pl":
        a = capped_discrimination(alpha[..., dom], cap)
    else:
        if "log_a" in post:
            la = _v(post, "log_a")
        else:
            sig = _v(post, "sigma_log_a")
            if "sigma_log_a_dev" in post:  # partially pooled spreads
                sig = sig[..., None] * np.exp(spec.priors.log_discrimination_sd_spread
                                              * _v(post, "sigma_log_a_dev"))
            sig = sig[..., dom] if sig.ndim == alpha.ndim else sig[..., None]
            la = alpha[..., dom] + sig * _v(post, "log_a_raw")
        a = capped_discrimination(la, cap)
    if spec.item_model == "3pl" and spec.estimate_guessing:
        c = _v(post, "c")
    else:
        c = np.full(a.shape, float(spec.fixed_guessing))
    return {"discrimination": a, "intercept": -b, "guessing": c}


def expected_accuracy_joint(theta, a, d, c, item_domain) -> np.ndarray:
    """Mean over all items of P_ij for every draw: the package's one expected
    accuracy (:func:`mtlirt.results.estimate.expected_accuracy`) draw by draw."""
    C, D, N, _ = theta.shape
    out = np.empty((C, D, N))
    for ch in range(C):
        for dr in range(D):
            out[ch, dr] = expected_accuracy(theta[ch, dr], a[ch, dr], d[ch, dr], c[ch, dr], item_domain)
    return out


def expected_accuracy_tables(theta, tables) -> np.ndarray:
    """Sum over all items of P_ij per draw, from the per-domain tables
    ``A_k(theta) = sum_{j in k} P_j(theta)`` (O(N K) per draw); divide by J
    for the expected accuracy. Linear interpolation on the fine grid (error
    below 1e-4 items per domain), clamped at the grid ends (P is flat there).
    Compiled, the draws in parallel: a leaderboard's fit has 1,000 draws of
    every LLM's domain scores."""
    C, D, N, K = theta.shape
    out = np.empty((C * D, N))
    flat = np.ascontiguousarray(theta).reshape(C * D, N, K)
    _accuracy_kernel()(flat, np.ascontiguousarray(tables.A, dtype=np.float64), float(tables.lo), float(tables.h),
                       out)
    return out.reshape(C, D, N)


def _accuracy_sums(theta, A, lo, h, out):
    """``out[m, i] = sum_k A_k(theta[m, i, k])``, ``A`` (K, G) interpolated linearly on ``lo + h q``."""
    M, N, K = theta.shape
    G = A.shape[1]
    hi = lo + h * (G - 1)
    for m in numba.prange(M):
        for i in range(N):
            s = 0.0
            for k in range(K):
                u = (min(max(np.float64(theta[m, i, k]), lo), hi) - lo) / h
                j = min(int(u), G - 2)
                t = u - j
                s += A[k, j] * (1.0 - t) + A[k, j + 1] * t
            out[m, i] = s


@cache
def _accuracy_kernel():
    """:func:`_accuracy_sums` compiled by numba (imported on first use), the draws in parallel."""
    global numba
    import numba

    return numba.njit(parallel=True, nogil=True, boundscheck=False, cache=True)(_accuracy_sums)


def add_derived(
    post: xr.Dataset,
    arr: Responses,
    spec: ModelSpec,
    anchors: list[int],
    *,
    fixed_items: dict | None = None,
    tables=None,
) -> xr.Dataset:
    """Return the posterior dataset with the derived quantities added.

    Parameters
    ----------
    post : xarray.Dataset
        Free variables with dims (chain, draw, ...).
    arr : Responses
    spec : ModelSpec
    anchors : list of int
    fixed_items : dict, optional
        ``a``, ``d``, ``c`` when the items were fixed (broadcast over draws).
    tables : LikelihoodTables, optional
        Fixed-items tables (fast expected accuracy).

    Returns
    -------
    xarray.Dataset
    """
    J = arr.n_items
    tr = trait_draws(post, spec, anchors, list(arr.domains))
    C, D = tr["theta"].shape[:2]
    if fixed_items is not None:
        it = {
            "discrimination": np.broadcast_to(fixed_items["a"], (C, D, J)),
            "intercept": np.broadcast_to(fixed_items["d"], (C, D, J)),
            "guessing": np.broadcast_to(fixed_items["c"], (C, D, J)),
        }
    else:
        it = item_draws(post, spec, arr.item_domain)
    if tables is not None:
        ea = expected_accuracy_tables(tr["theta"], tables) / J
    else:
        ea = expected_accuracy_joint(tr["theta"], it["discrimination"], it["intercept"],
                                     it["guessing"], arr.item_domain)
    new = {
        "theta": (schema.dims_of("theta"), tr["theta"]),
        "overall": (schema.dims_of("overall"), tr["overall"]),
        "loadings": (schema.dims_of("loadings"), tr["loadings"]),
        "discrimination": (schema.dims_of("discrimination"), it["discrimination"]),
        "intercept": (schema.dims_of("intercept"), it["intercept"]),
        "guessing": (schema.dims_of("guessing"), it["guessing"]),
        "domain_corr": (schema.dims_of("domain_corr"), tr["domain_corr"]),
        "expected_accuracy": (schema.dims_of("expected_accuracy"), ea),
    }
    if "eta" in tr:
        new["eta"] = (schema.dims_of("eta"), tr["eta"])
    n_factor = tr["loadings"].shape[-1]
    coords = {
        "chain": post["chain"].values,
        "draw": post["draw"].values,
        "llm": list(arr.llms),
        "domain": list(arr.domains),
        "item": list(arr.items),
        "factor": np.arange(n_factor),
        "domain_a": list(arr.domains),
        "domain_b": list(arr.domains),
    }
    keep = post.drop_vars([v for v in CONTAINED if v in post])  # duplicates of parts of theta
    keep = keep.drop_dims([d for d in ("domain_c",) if d in keep.dims])
    # assign (no copies of the arrays) rather than merge
    keep = keep.drop_vars([c for c in ("llm", "domain", "item", "factor", "domain_a", "domain_b")
                           if c in keep.coords])
    out = keep.assign_coords({k: v for k, v in coords.items() if k not in ("chain", "draw")})
    out = out.assign({k: xr.Variable(*v) for k, v in new.items()})
    out = out.assign_coords(item_domain=("item", [arr.domains[k] for k in arr.item_domain]))
    out.attrs = dict(post.attrs)
    return out
