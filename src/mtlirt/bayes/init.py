"""Initial values: a quick data-driven point estimate and its conversion to the
free random variables of the PyMC model."""

from __future__ import annotations

from typing import Any

import numpy as np

from mtlirt.bayes._factor import loading_layout
from mtlirt.bayes.spec import ModelSpec, load_spec, resolve_spread, uncapped_log_discrimination
from mtlirt.data.responses import Responses, as_responses
from mtlirt.errors import InputError

__all__ = ["default_init", "initial_values", "align_factors"]


def _logit(p):
    return np.log(p) - np.log1p(-p)


def default_init(responses: Any, spec: str | ModelSpec | None = None) -> dict:
    """A cheap point estimate from accuracies (used when no MTL estimate is given).

    Domain scores are standardised logits of each LLM's smoothed per-domain
    accuracy; the overall score and loadings come from the SVD of that
    matrix; items get discrimination 1.5 and intercepts from the logits of
    their (guessing-corrected) proportions correct.

    Parameters
    ----------
    responses : Responses, DataFrame or path
    spec : str or ModelSpec, optional
        Only ``rank`` and the guessing level are used.

    Returns
    -------
    dict
        ``theta`` (N x K), ``overall`` (N x r), ``loadings`` (K x r), ``a``,
        ``d``, ``c`` (J,).
    """
    arr = as_responses(responses)
    spec = load_spec(spec)
    obs = arr.mask
    y = arr.correct.astype(np.float64)
    n, J = y.shape
    K = arr.n_domains
    c0 = spec.priors.guessing_mean if spec.estimate_guessing else spec.fixed_guessing
    theta = np.zeros((n, K))
    have = np.zeros((n, K), dtype=bool)
    for k, s in enumerate(arr.domain_slices):
        cnt = np.full(n, s.stop - s.start, float) if obs is None else obs[:, s].sum(1).astype(float)
        acc = (y[:, s].sum(1) + 0.5) / (cnt + 1.0)
        acc = np.clip((acc - c0) / (1 - c0), 0.02, 0.98)
        t = _logit(acc)
        ok = cnt > 0
        have[:, k] = ok
        if ok.sum() >= 2 and t[ok].std() > 0:
            t = (t - t[ok].mean()) / t[ok].std()
        else:
            t = np.zeros(n)
        theta[:, k] = np.where(ok, t, 0.0)
    # fill unobserved (llm, domain) cells with the LLM's mean over its domains
    rowmean = np.where(have.any(1), (theta * have).sum(1) / np.maximum(have.sum(1), 1), 0.0)
    theta = np.where(have, theta, rowmean[:, None])
    sd = theta.std(0)
    theta = (theta - theta.mean(0)) / np.where(sd > 0, sd, 1.0)
    overall, loadings = _factors_from_theta(theta, spec.rank)
    cnt_j = np.full(J, n, float) if obs is None else obs.sum(0).astype(float)
    p = (y.sum(0) + 0.5) / (cnt_j + 1.0)
    p = np.clip((p - c0) / (1 - c0), 0.02, 0.98)
    a = np.full(J, 1.5)
    d = _logit(p) * np.sqrt(1 + np.pi * 1.5**2 / 8)  # undo the attenuation of the marginal
    return {"theta": theta, "overall": overall, "loadings": loadings, "a": a, "d": d,
            "c": np.full(J, c0)}


def _factors_from_theta(theta: np.ndarray, rank: int) -> tuple[np.ndarray, np.ndarray]:
    n, K = theta.shape
    r = min(rank, K)
    u, s, vt = np.linalg.svd(theta - theta.mean(0), full_matrices=False)
    eta = u[:, :r] * np.sqrt(n)
    loadings = theta.T @ eta / n
    if rank > r:
        eta = np.concatenate([eta, np.zeros((n, rank - r))], 1)
        loadings = np.concatenate([loadings, np.zeros((K, rank - r))], 1)
    return eta, loadings


def align_factors(eta: np.ndarray, loadings: np.ndarray, anchors: list[int]):
    """Rotate (eta, loadings) so the anchor rows of the loadings are lower
    triangular with a positive diagonal (the model's identification).

    Parameters
    ----------
    eta : ndarray (N, r)
    loadings : ndarray (K, r)
    anchors : list of int

    Returns
    -------
    eta, loadings : ndarray
        Rotated so that ``eta @ loadings.T`` is unchanged.
    """
    A = loadings[anchors, :]  # r x r
    q, rr = np.linalg.qr(A.T)  # A.T = q rr  ->  A q = rr.T (lower triangular)
    lam = loadings @ q
    et = eta @ q
    sg = np.sign(np.diag(lam[anchors, :]))
    sg[sg == 0] = 1.0
    return et * sg, lam * sg


def _get(init: dict, key: str, shape: tuple, required: bool = False):
    if key not in init or init[key] is None:
        if required:
            raise InputError(f"init: missing key {key!r}")
        return None
    v = np.asarray(init[key], dtype=np.float64)
    if v.ndim == 1 and len(shape) == 2 and shape[1] == 1:
        v = v[:, None]
    if v.shape != shape:
        raise InputError(f"init: key {key!r} has shape {v.shape}, expected {shape}")
    return np.where(np.isfinite(v), v, 0.0)


def _get_factors(init: dict, key: str, rows: int, r: int):
    """``overall`` or ``loadings`` of an estimate of any rank, for a model of rank ``r``.

    An MTL estimate of a higher rank gives its first ``r`` columns (column 0
    is the overall score, the next ones the rest of the shared space, in
    order of importance); one of a lower rank gives ``None`` (the factors are
    then taken from the traits' SVD).
    """
    v = init.get(key)
    if v is None:
        return None
    v = np.asarray(v, dtype=np.float64)
    if v.ndim == 1:
        v = v[:, None]
    if v.ndim == 2 and v.shape[0] == rows and v.shape[1] != r:
        if v.shape[1] < r:
            return None
        v = v[:, :r]
    return _get({key: v}, key, (rows, r))


def initial_values(
    arr: Responses,
    spec: ModelSpec,
    anchors: list[int],
    init: dict | None,
    *,
    include_items: bool = True,
    trait_centered: np.ndarray | None = None,
    item_centered: bool | None = None,
) -> dict:
    """Convert a point estimate to initial values of the model's free variables.

    Parameters
    ----------
    arr : Responses
    spec : ModelSpec
    anchors : list of int
        Anchor domains of the factor model.
    init : dict or None
        ``theta`` (N x K) and optionally ``overall`` (N x r), ``loadings``
        (K x r), ``a``, ``d``, ``c`` (J,). ``None``: :func:`default_init`.
    include_items : bool
        Also the item variables (joint model).
    trait_centered : ndarray of bool (K,), optional
        Centred domains (default from the spec).
    item_centered : bool, optional
        Centred item hierarchy (default from the spec).

    Returns
    -------
    dict
        RV name -> value (constrained space), usable as ``initvals``.
    """
    n, K = arr.n_llms, arr.n_domains
    if trait_centered is None:
        trait_centered = np.full(K, spec.trait_parameterization == "centered")
    tc = np.asarray(trait_centered, dtype=bool)
    if init is None:
        init = default_init(arr, spec)
    init = dict(init)
    theta = _get(init, "theta", (n, K))
    if theta is None:
        theta = default_init(arr, spec)["theta"]
    sd = theta.std(0)
    theta = (theta - theta.mean(0)) / np.where(sd > 0, sd, 1.0)
    out: dict[str, np.ndarray] = {}
    if spec.traits == "factor":
        r = spec.rank
        eta = _get_factors(init, "overall", n, r)
        lam = _get_factors(init, "loadings", K, r)
        if eta is None or lam is None:
            eta, lam = _factors_from_theta(theta, r)
        esd = eta.std(0)
        eta = (eta - eta.mean(0)) / np.where(esd > 0, esd, 1.0)
        eta, lam = align_factors(eta, lam, anchors)
        norm = np.sqrt((lam**2).sum(1))
        lam = lam * np.minimum(1.0, 0.95 / np.maximum(norm, 1e-12))[:, None]
        psi = np.sqrt(1 - (lam**2).sum(1))
        V = lam / psi[:, None]
        rows, cols, drows = loading_layout(K, r, anchors)
        out["eta_raw"] = eta
        if len(rows):
            out["loading_free"] = V[rows, cols]
        out["loading_diag"] = np.maximum(V[drows, np.arange(r)], 0.05)
        V[drows, np.arange(r)] = out["loading_diag"]
        psi = 1 / np.sqrt(1 + (V**2).sum(1))
        lam = V * psi[:, None]
        z = np.clip((theta - eta @ lam.T) / psi[None, :], -5, 5)
        if tc.any():
            out["theta_raw"] = theta[:, tc]
        if not tc.all():
            out["z"] = z[:, ~tc]
    else:
        R = np.corrcoef(theta, rowvar=False) if n > 2 else np.eye(K)
        R = np.where(np.isfinite(R), R, 0.0)
        R = 0.8 * R + 0.2 * np.eye(K)
        L = np.linalg.cholesky(R)
        out["corr_chol"] = L
        if tc.all():
            out["theta_raw"] = theta
        else:
            out["z"] = np.clip(np.linalg.solve(L, theta.T).T, -5, 5)
    if include_items:
        if item_centered is None:
            item_centered = spec.item_parameterization == "centered"
        out.update(item_initial_values(arr, spec, init, centered=item_centered))
    return out


def item_initial_values(arr: Responses, spec: ModelSpec, init: dict, *,
                        centered: bool | tuple[bool, bool] = False) -> dict:
    """Initial values of the item variables from ``a``, ``d`` (and ``c``);
    ``centered`` = (difficulties, log discriminations) or one bool for both."""
    spec = resolve_spread(spec, arr.item_domain)
    b_c, a_c = (centered, centered) if isinstance(centered, bool) else centered
    J, K = arr.n_items, arr.n_domains
    a = _get(init, "a", (J,))
    d = _get(init, "d", (J,))
    if a is None or d is None:
        di = default_init(arr, spec)
        a = di["a"] if a is None else a
        d = di["d"] if d is None else d
    cap = spec.priors.discrimination_max
    a = np.clip(a, 0.1, 0.9 * cap)  # (below the model's cap on a)
    d = np.clip(d, -10.0, 10.0)
    b = -d
    la = uncapped_log_discrimination(a, cap)
    dom = arr.item_domain
    beta = np.zeros(K)
    tau = np.zeros(K)
    alpha = np.zeros(K)
    sig = np.zeros(K)
    for k, s in enumerate(arr.domain_slices):
        beta[k] = b[s].mean()
        tau[k] = max(b[s].std(), 0.2)
        alpha[k] = la[s].mean()
        sig[k] = max(la[s].std(), 0.1)
    out = {"beta": beta, "tau": tau, "alpha": alpha}
    if b_c:
        out["b"] = b
    else:
        out["b_raw"] = (b - beta[dom]) / tau[dom]
    if spec.item_model != "1pl":
        if spec.discrimination_spread == "domain":
            sig_j = sig[dom]
            out["sigma_log_a"] = sig
        else:  # one spread (or the centre of the pooled ones): the pooled within-domain sd
            sig_j = np.full(J, max(float(np.sqrt(np.mean((la - alpha[dom]) ** 2))), 0.1))
            out["sigma_log_a"] = sig_j[0]
            if spec.discrimination_spread == "pooled":
                out["sigma_log_a_dev"] = np.zeros(K)
        if a_c:
            out["log_a"] = la
        else:
            out["log_a_raw"] = (la - alpha[dom]) / sig_j
    if spec.item_model == "3pl" and spec.estimate_guessing:
        c = _get(init, "c", (J,))
        if c is None:
            c = np.full(J, spec.priors.guessing_mean)
        out["c"] = np.clip(c, 0.02, 0.6)
    return out
