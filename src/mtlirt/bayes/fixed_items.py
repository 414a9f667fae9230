"""Calibrate, then score: item parameters fixed, LLM-side hierarchy sampled.

At leaderboard scale (N ~ 4e3 LLMs, J ~ 1.4e4 items) the joint model costs
O(N J) per gradient. With the items fixed at calibrated values the
log-likelihood of LLM ``i`` in domain ``k`` is a function of the single
number ``theta_ik``:

* 1PL/2PL (no guessing)::

      l_ik(theta) = s_ik * theta + const_ik - g_p(theta),
      s_ik = sum_j a_j y_ij,   g_p(theta) = sum_{j in k, observed} log(1 + exp(a_j theta + d_j))

  ``g_p`` depends only on the set of items the LLM answered in domain ``k``
  (its *pattern*): with complete data one table per domain, with missing
  data one per distinct (domain, observed set) pair.

* 3PL with fixed guessing ``c_j`` (the sufficient statistic no longer
  exists)::

      l_ik(theta) = sum_j y_ij [log P_j - log(1 - P_j)] + sum_j o_ij log(1 - P_j)

  is tabulated exactly per (LLM, domain) cell on a (coarser) grid; the two
  sums are matrix products ``Y_k @ M`` and ``O_k @ M`` (N x J_k by J_k x G).

Either way the tables (values and exact first derivatives) are built once by
matrix products on a uniform theta grid on [-6, 6], and evaluated inside the
PyTensor graph by cubic Hermite interpolation (C1, analytic derivative, error
O(h^4)); outside the grid the function is continued linearly. Each gradient
then costs O(N K) gathers instead of O(N J).

Items are calibrated by marginal maximum likelihood (Bock-Aitkin EM over a
41-point quadrature of theta ~ N(0, 1), one domain at a time, with weak
normal priors on log a and d: a MAP-EM), unless given
(:func:`calibrate_items`). Their uncertainty is not propagated: the fixed-items
posterior is conditional on the calibrated values (fine when N is in the
thousands, optimistic when N is small).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import expit

from mtlirt.bayes._built import BuiltModel
from mtlirt.bayes._data import ResponseArrays, as_arrays
from mtlirt.bayes._factor import anchor_domains, factor_parts, model_coords
from mtlirt.bayes._hermite import hermite_np, hermite_pt
from mtlirt.bayes.init import default_init, initial_values
from mtlirt.bayes.marginal import (
    kernel_inputs,
    marginal_loglik_pt,
    overall_sd_guess,
    pin_standardisation,
    quadrature_nodes,
)
from mtlirt.bayes.model import add_coords_for_centering, add_factor_block, add_traits, trait_centering
from mtlirt.bayes.spec import ModelSpec, load_spec
from mtlirt.errors import InputError

__all__ = [
    "calibrate_items",
    "build_fixed_model",
    "LikelihoodTables",
    "build_tables",
    "hermite_np",
]

GRID_LO = -6.0
GRID_HI = 6.0


def _softplus(x):
    return np.logaddexp(0.0, x)


# ---------------------------------------------------------------------------
# calibration (MML-EM)
# ---------------------------------------------------------------------------


def calibrate_items(
    responses: Any,
    spec: str | ModelSpec | None = None,
    *,
    n_quad: int = 61,
    n_quad_fine: int = 481,
    max_iter: int = 500,
    tol: float = 1e-5,
    init: dict | None = None,
    verbose: bool = False,
) -> dict:
    """Calibrate item parameters by marginal maximum likelihood (MAP-EM).

    Each domain is fitted on its own with ``theta ~ N(0, 1)`` integrated out
    on a uniform quadrature over [-6, 6] (Bock-Aitkin EM); the M-step is
    Fisher scoring on ``(log a_j, d_j)`` with weak priors ``log a ~ N(m,
    sqrt(s1^2 + s2^2))`` and ``d ~ N(0, sqrt(t1^2 + t2^2))`` taken from the
    spec's item priors. 1PL: one ``a`` per domain. 3PL: ``c`` fixed at the
    spec's guessing (its prior mean when ``guessing = "estimate"``).

    For 1PL/2PL items of a completely observed domain the EM runs on
    sufficient statistics: the E-step needs only ``s_i = sum_j a_j y_ij`` and
    the tabulated ``g(theta) = sum_j log(1 + exp(a_j theta + d_j))``, the
    M-step only ``sum_i y_ij E[theta_i]`` (one matrix-vector product), so a
    fine grid (``n_quad_fine`` points) costs little; this matters for long
    domains, whose sharp posteriors a coarse grid rounds (a few % bias in
    ``a``). Otherwise (missing responses or guessing) the E- and M-steps use
    ``N x J_k`` by ``J_k x Q`` matrix products on ``n_quad`` points.

    Parameters
    ----------
    responses : Responses-like
    spec : str or ModelSpec, optional
    n_quad : int
        Quadrature points of the general path.
    n_quad_fine : int
        Quadrature points of the sufficient-statistics path for domains of
        >= 300 items (half as many from 50 items, a quarter below).
    max_iter : int
        EM iterations per domain at most.
    tol : float
        Stop when no ``log a`` or ``d`` moves more than ``tol`` in an iteration.
    init : dict, optional
        Starting ``a``, ``d``.
    verbose : bool
        Print progress.

    Returns
    -------
    dict
        ``a``, ``d``, ``c`` (arrays of length J), ``iterations`` (per domain),
        ``seconds``.
    """
    arr = as_arrays(responses)
    spec = load_spec(spec)
    p = spec.priors
    t0 = time.perf_counter()
    J = arr.n_items
    c_val = p.guessing_mean if spec.estimate_guessing else spec.fixed_guessing
    c_all = np.full(J, float(c_val))
    pri = (p.log_discrimination_mean,
           float(np.hypot(p.log_discrimination_mean_scale, p.log_discrimination_sd_scale)),
           float(np.hypot(p.difficulty_mean_scale, p.difficulty_sd_scale)))
    if init is not None and init.get("a") is not None and init.get("d") is not None:
        a_all = np.clip(np.asarray(init["a"], float), 0.2, 8.0).copy()
        d_all = np.clip(np.asarray(init["d"], float), -8.0, 8.0).copy()
    else:
        di = default_init(arr, spec)
        a_all = np.full(J, 1.0)
        d_all = di["d"] / np.sqrt(1 + np.pi * 1.5**2 / 8) * np.sqrt(1 + np.pi / 8)
    iters = []
    one_pl = spec.item_model == "1pl"
    for k, s in enumerate(arr.domain_slices):
        O = None if arr.observed is None else arr.observed[:, s]
        if O is not None and O.all():
            O = None
        a, d = a_all[s].copy(), d_all[s].copy()
        if one_pl:
            a[:] = np.exp(np.mean(np.log(a)))
        c = c_all[s]
        if O is None and np.all(c == 0):
            Jk = s.stop - s.start
            q = n_quad_fine if Jk >= 300 else (n_quad_fine + 1) // 2 if Jk >= 50 else (n_quad_fine + 3) // 4
            a, d, it = _em_sufficient(arr.correct[:, s], a, d, q, max_iter, tol, pri, one_pl)
        else:
            a, d, it = _em_general(arr.correct[:, s], O, a, d, c, n_quad, max_iter, tol, pri, one_pl)
        a_all[s], d_all[s] = a, d
        iters.append(it)
        if verbose:
            print(f"calibrate domain {k} ({arr.domains[k]}): {it} EM iterations")
    return {"a": a_all, "d": d_all, "c": c_all, "iterations": iters,
            "seconds": time.perf_counter() - t0}


def _quadrature(n_quad: int):
    x = np.linspace(-6.0, 6.0, n_quad)
    logw = -0.5 * x**2
    logw -= np.log(np.exp(logw).sum())
    return x, logw


def _posterior(L: np.ndarray, logw: np.ndarray) -> np.ndarray:
    L = L + logw[None, :]
    L -= L.max(1, keepdims=True)
    post = np.exp(L)
    post /= post.sum(1, keepdims=True)
    return post


def _squarem(step, a, d, max_iter, tol):
    """Run the EM map ``step(a, d) -> (a, d)`` with SQUAREM acceleration
    (Varadhan and Roland 2008) on z = (log a, d); returns (a, d, EM steps)."""
    n = len(a)

    def F(z):
        a2, d2 = step(np.exp(z[:n]), z[n:])
        return np.concatenate([np.log(a2), d2])

    z = np.concatenate([np.log(a), d])
    evals = 0
    while evals < max_iter:
        z1 = F(z)
        z2 = F(z1)
        evals += 2
        r = z1 - z
        v = z2 - z1 - r
        if np.abs(z2 - z1).max() < tol:
            z = z2
            break
        nv = np.sqrt((v * v).sum())
        alpha = -np.sqrt((r * r).sum()) / nv if nv > 0 else -1.0
        alpha = min(-1.0, max(alpha, -50.0))
        zp = z - 2 * alpha * r + alpha**2 * v
        zp[:n] = np.clip(zp[:n], np.log(0.05), np.log(20.0))
        zp[n:] = np.clip(zp[n:], -15, 15)
        znew = F(zp)  # stabilising EM step
        evals += 1
        if not np.all(np.isfinite(znew)):
            znew = z2
        if np.abs(znew - z).max() < tol:
            z = znew
            break
        z = znew
    return np.exp(z[:n]), z[n:], evals


def _em_sufficient(y, a, d, n_quad, max_iter, tol, pri, one_pl):
    """EM on sufficient statistics (complete data, no guessing)."""
    mu_la, sd_la, sd_d = pri
    x, logw = _quadrature(n_quad)
    Y = y.astype(np.float32)
    T0 = Y.sum(0).astype(np.float64)  # number correct per item

    def step(a, d):
        X = a[:, None] * x[None, :] + d[:, None]  # J x Q
        G = _softplus(X).sum(0)  # Q
        sc = (Y @ a.astype(np.float32)).astype(np.float64)  # s_i
        post = _posterior(sc[:, None] * x[None, :] - G[None, :], logw)  # N x Q
        nq = post.sum(0)  # Q
        m = post @ x  # posterior means
        T1 = (Y.T @ m.astype(np.float32)).astype(np.float64)  # sum_i y_ij E[theta_i]
        la, dd = np.log(a), d.copy()
        for _ in range(2):
            aa = np.exp(la)
            X = aa[:, None] * x[None, :] + dd[:, None]
            sg = expit(X)
            w = nq[None, :] * sg * (1 - sg)
            u = aa[:, None] * x[None, :]
            g_d = T0 - (nq[None, :] * sg).sum(1) - dd / sd_d**2
            g_la = aa * T1 - (nq[None, :] * sg * u).sum(1) - (la - mu_la) / sd_la**2
            I22 = w.sum(1) + 1 / sd_d**2
            I11 = (w * u**2).sum(1) + 1 / sd_la**2
            I12 = (w * u).sum(1)
            if one_pl:
                dd = dd + np.clip(g_d / I22, -1, 1)
                la = la + np.clip(g_la.sum() / I11.sum(), -0.5, 0.5)
                continue
            det = np.maximum(I11 * I22 - I12**2, 1e-12)
            la = la + np.clip((I22 * g_la - I12 * g_d) / det, -0.5, 0.5)
            dd = dd + np.clip((I11 * g_d - I12 * g_la) / det, -1.0, 1.0)
        la = np.clip(la, np.log(0.05), np.log(20.0))
        return np.exp(la), np.clip(dd, -15, 15)

    return _squarem(step, a, d, max_iter, tol)


def _em_general(y, O, a, d, c, n_quad, max_iter, tol, pri, one_pl):
    """EM with matrix products (missing responses and/or guessing)."""
    mu_la, sd_la, sd_d = pri
    x, logw = _quadrature(n_quad)
    Y = y.astype(np.float32)
    Of = None if O is None else O.astype(np.float32)
    if Of is not None:
        Y *= Of

    def step(a, d):
        X = a[:, None] * x[None, :] + d[:, None]  # J_k x Q
        if np.all(c == 0):
            L = Y @ X.astype(np.float32)
            sp = _softplus(X)
            L = L - (sp.sum(0)[None, :] if Of is None else Of @ sp.astype(np.float32))
        else:
            P = c[:, None] + (1 - c[:, None]) * expit(X)
            lp, l1p = np.log(P), np.log1p(-P)
            L = Y @ (lp - l1p).astype(np.float32)
            L = L + (l1p.sum(0)[None, :] if Of is None else Of @ l1p.astype(np.float32))
        post = _posterior(L.astype(np.float64), logw)
        post32 = post.astype(np.float32)
        r = (Y.T @ post32).astype(np.float64)  # J_k x Q
        n = (np.broadcast_to(post.sum(0)[None, :], r.shape) if Of is None
             else (Of.T @ post32).astype(np.float64))
        return _m_step(a, d, c, x, r, n, mu_la, sd_la, sd_d, one_pl)

    return _squarem(step, a, d, max_iter, tol)


def _m_step(a, d, c, x, r, n, mu_la, sd_la, sd_d, one_pl, n_newton: int = 2):
    """Fisher scoring on (log a, d) per item given expected counts r, n (J x Q)."""
    la = np.log(a)
    for _ in range(n_newton):
        aa = np.exp(la)
        X = aa[:, None] * x[None, :] + d[:, None]
        sg = expit(X)
        P = c[:, None] + (1 - c[:, None]) * sg
        P = np.clip(P, 1e-10, 1 - 1e-10)
        dP = (1 - c[:, None]) * sg * (1 - sg)
        v = P * (1 - P)
        sc = dP * (r - n * P) / v  # score wrt x
        w = n * dP**2 / v  # Fisher info wrt x
        u = aa[:, None] * x[None, :]  # dx / dlog a
        g_d = sc.sum(1) - d / sd_d**2
        I22 = w.sum(1) + 1 / sd_d**2
        if one_pl:
            d = d + np.clip(g_d / I22, -1, 1)
            # common log a: sum over items
            g_la = (sc * u).sum() - (la[0] - mu_la) / sd_la**2
            I11 = (w * u**2).sum() + 1 / sd_la**2
            la = la + np.clip(g_la / I11, -0.5, 0.5)
            continue
        g_la = (sc * u).sum(1) - (la - mu_la) / sd_la**2
        I11 = (w * u**2).sum(1) + 1 / sd_la**2
        I12 = (w * u).sum(1)
        det = I11 * I22 - I12**2
        det = np.where(det > 1e-12, det, 1e-12)
        step_la = (I22 * g_la - I12 * g_d) / det
        step_d = (I11 * g_d - I12 * g_la) / det
        la = la + np.clip(step_la, -0.5, 0.5)
        d = d + np.clip(step_d, -1.0, 1.0)
    la = np.clip(la, np.log(0.05), np.log(20.0))
    d = np.clip(d, -15, 15)
    return np.exp(la), d


# ---------------------------------------------------------------------------
# tables
# ---------------------------------------------------------------------------


@dataclass
class LikelihoodTables:
    """Tabulated per-(LLM, domain) log-likelihoods on a uniform theta grid.

    ``loglik_ik(theta) = s[i, k] * theta + const[i, k] - F[table[i, k]](theta)``,
    ``F`` and its derivative ``dF`` tabulated at ``lo + h * arange(G)``.
    ``A``/``dA`` (K x G): sum over *all* items of domain ``k`` of ``P_j(theta)``
    (for the expected accuracy).
    """

    s: np.ndarray
    const: np.ndarray
    table: np.ndarray
    F: np.ndarray
    dF: np.ndarray
    A: np.ndarray
    dA: np.ndarray
    lo: float
    h: float
    kind: str  # "pattern" or "cell"

    @property
    def n_grid(self) -> int:
        return self.F.shape[1]

    @property
    def nbytes(self) -> int:
        return sum(getattr(self, k).nbytes for k in ("s", "const", "table", "F", "dF", "A", "dA"))


def _grid(step: float) -> tuple[np.ndarray, float]:
    G = int(round((GRID_HI - GRID_LO) / step)) + 1
    g = np.linspace(GRID_LO, GRID_HI, G)
    return g, g[1] - g[0]


def build_tables(
    responses: Any,
    a: np.ndarray,
    d: np.ndarray,
    c: np.ndarray | float = 0.0,
    *,
    step: float | None = None,
    max_cell_bytes: float = 2e9,
) -> LikelihoodTables:
    """Tabulate the fixed-item log-likelihoods (see module docstring).

    Parameters
    ----------
    responses : Responses-like
    a, d : ndarray (J,)
        Discrimination and intercept.
    c : float or ndarray (J,)
        Lower asymptote (0: the sufficient-statistic route).
    step : float, optional
        Grid step on [-6, 6]; default 0.025 for pattern tables, 0.05 (or
        coarser to fit ``max_cell_bytes``) for per-cell tables.
    max_cell_bytes : float
        Memory budget for per-cell tables.

    Returns
    -------
    LikelihoodTables
    """
    arr = as_arrays(responses)
    a = np.asarray(a, float)
    d = np.asarray(d, float)
    J = arr.n_items
    c = np.broadcast_to(np.asarray(c, float), (J,))
    n, K = arr.n_llms, arr.n_domains
    obs = arr.observed
    use_cells = bool(np.any(c > 0))
    # counting patterns
    pat_ids = np.zeros((n, K), dtype=np.int64)
    pat_masks: list[np.ndarray] = []  # per domain: P_k x J_k bool
    if not use_cells:
        total = 0
        for k, s in enumerate(arr.domain_slices):
            if obs is None:
                masks = np.ones((1, s.stop - s.start), dtype=bool)
                inv = np.zeros(n, dtype=np.int64)
            else:
                packed = np.packbits(obs[:, s], axis=1)
                _, first, inv = np.unique(packed, axis=0, return_index=True, return_inverse=True)
                masks = obs[first][:, s]
                inv = inv.reshape(-1)
            pat_ids[:, k] = total + inv
            total += len(masks)
            pat_masks.append(masks)
        if total > 0.5 * n * K:
            use_cells = True
    if use_cells:
        if step is None:
            step = 0.05
            while n * K * (int(12 / step) + 1) * 16 > max_cell_bytes and step < 0.2:
                step *= 1.25
    elif step is None:
        step = 0.025
    grid, h = _grid(step)
    G = len(grid)
    s_stat = np.zeros((n, K))
    const = np.zeros((n, K))
    A = np.zeros((K, G))
    dA = np.zeros((K, G))
    if use_cells:
        F = np.zeros((n * K, G))
        dF = np.zeros((n * K, G))
        table = (np.arange(n)[:, None] * K + np.arange(K)[None, :]).astype(np.int64)
    else:
        F = np.zeros((int(pat_ids.max()) + 1, G))
        dF = np.zeros_like(F)
        table = pat_ids
    for k, s in enumerate(arr.domain_slices):
        ak, dk, ck = a[s], d[s], c[s]
        X = ak[:, None] * grid[None, :] + dk[:, None]  # J_k x G
        sg = expit(X)
        P = ck[:, None] + (1 - ck[:, None]) * sg
        dP = (1 - ck[:, None]) * sg * (1 - sg) * ak[:, None]
        A[k] = P.sum(0)
        dA[k] = dP.sum(0)
        Y = arr.correct[:, s].astype(np.float64)
        O = None if obs is None else obs[:, s].astype(np.float64)
        if O is not None:
            Y *= O
        if not use_cells:
            s_stat[:, k] = Y @ ak
            const[:, k] = Y @ dk
            masks = pat_masks[k].astype(np.float64)
            rows = slice(int(pat_ids[:, k].min()), int(pat_ids[:, k].min()) + len(masks))
            F[rows] = masks @ _softplus(X)
            dF[rows] = masks @ (sg * ak[:, None])
        else:
            Pc = np.clip(P, 1e-300, None)
            lp = np.log(Pc)
            l1p = np.log1p(-np.minimum(P, 1 - 1e-16))
            dlp = dP / Pc
            dl1p = -dP / np.clip(1 - P, 1e-300, None)
            ll = Y @ (lp - l1p)
            dll = Y @ (dlp - dl1p)
            if O is None:
                ll += l1p.sum(0)[None, :]
                dll += dl1p.sum(0)[None, :]
            else:
                ll += O @ l1p
                dll += O @ dl1p
            F[table[:, k]] = -ll
            dF[table[:, k]] = -dll
    return LikelihoodTables(s=s_stat, const=const, table=table, F=F, dF=dF, A=A, dA=dA,
                            lo=float(grid[0]), h=float(h), kind="cell" if use_cells else "pattern")


# ---------------------------------------------------------------------------
# the model
# ---------------------------------------------------------------------------


def build_fixed_model(
    responses: Any,
    spec: str | ModelSpec | None = None,
    *,
    item_values: dict | None = None,
    init: dict | None = None,
    tables: LikelihoodTables | None = None,
):
    """PyMC model of the LLM-side hierarchy with the items fixed.

    Parameters
    ----------
    responses : Responses-like
    spec : str or ModelSpec
        The trait block (``traits``, ``rank``, ``trait_parameterization``,
        priors) is used; the item block is replaced by fixed values.
    item_values : dict, optional
        ``a``, ``d`` (and ``c``) of length J. Default: ``init``'s ``a``/``d``
        if present, else :func:`calibrate_items`.
    init : dict, optional
        Point estimate for initial values (``theta``, ``overall``,
        ``loadings``).
    tables : LikelihoodTables, optional
        Precomputed tables (else built here).

    Returns
    -------
    BuiltModel
        ``kind="fixed"``: its ``model`` has the potential ``loglik``; also
        ``tables``, ``items`` (dict a, d, c), ``spec``, ``anchors``,
        ``initvals``. Factor models with ``trait_parameterization``
        ``"auto"``/``"marginal"`` integrate the domain-specific traits out
        (free variables ``eta_raw``, ``loading_*`` only; ``marginal`` holds
        the quadrature, see :mod:`mtlirt.bayes.marginal`);
        :func:`mtlirt.bayes.fit_bayes` then draws the domain scores from
        their conditional posterior.
    """
    import pymc as pm

    arr = as_arrays(responses)
    spec = load_spec(spec)
    items = resolve_item_values(arr, spec, item_values, init)
    if tables is None:
        tables = build_tables(arr, items["a"], items["d"], items["c"])
    n, K = arr.n_llms, arr.n_domains
    anchors = anchor_domains(arr, spec.rank) if spec.traits == "factor" else []
    if use_marginal(spec):
        return _build_marginal_model(arr, spec, anchors, items, tables, init)
    G = tables.n_grid
    tc = trait_centering(arr, spec)
    coords = add_coords_for_centering(model_coords(arr, spec), list(arr.domains), tc)
    with pm.Model(coords=coords) as model:
        s = pm.Data("s", tables.s, dims=("llm", "domain"))
        Ff = pm.Data("table_values", tables.F.reshape(-1))
        dFf = pm.Data("table_slopes", tables.dF.reshape(-1))
        rows = pm.Data("table_rows", tables.table, dims=("llm", "domain"))
        theta = add_traits(spec, n, K, anchors, tc)
        g = hermite_pt(Ff, dFf, rows, theta, tables.lo, tables.h, G)
        pm.Potential("loglik", (s * theta - g).sum())
    iv = initial_values(arr, spec, anchors, init, include_items=False, trait_centered=tc)
    return BuiltModel(model=model, spec=spec, anchors=anchors, kind="fixed", initvals=iv, trait_centered=tc,
                      tables=tables, items=items)


def use_marginal(spec: ModelSpec) -> bool:
    """Whether the fixed-items model integrates the domain-specific traits out:
    factor models with ``trait_parameterization`` ``"auto"`` or ``"marginal"``."""
    return spec.traits == "factor" and spec.trait_parameterization in ("auto", "marginal")


def _build_marginal_model(arr: ResponseArrays, spec: ModelSpec, anchors: list[int], items: dict,
                          tables: LikelihoodTables, init: dict | None):
    """The fixed-items factor model with the domain traits integrated out
    (:mod:`mtlirt.bayes.marginal`): free variables ``eta_raw``,
    ``loading_free``, ``loading_diag`` only."""
    import pymc as pm
    import pytensor.tensor as pt

    n, K = arr.n_llms, arr.n_domains
    allc = np.ones(K, dtype=bool)
    iv = initial_values(arr, spec, anchors, init, include_items=False, trait_centered=allc)
    iv = {k: v for k, v in iv.items() if k in ("eta_raw", "loading_free", "loading_diag")}
    eta0, lam0, psi0 = factor_parts(iv["eta_raw"], iv.get("loading_free"), iv["loading_diag"], K, anchors)
    quad = quadrature_nodes(tables, eta0 @ lam0.T, psi0)
    with pm.Model(coords=model_coords(arr, spec)) as model:
        data = [pm.Data(f"quad_{k}", v)
                for k, v in zip(("start", "step", "weight", "logscale"), kernel_inputs(quad))]
        eta, lam, psi = add_factor_block(spec, n, K, anchors)
        pm.Potential("loglik", marginal_loglik_pt(*data, pt.dot(lam, eta.T), psi))
        if n >= 3:
            pin_standardisation(model["eta_raw"], overall_sd_guess(quad, lam0, psi0))
    return BuiltModel(model=model, spec=spec, anchors=anchors, kind="fixed", initvals=iv, trait_centered=allc,
                      tables=tables, items=items, marginal=quad)


def resolve_item_values(arr: ResponseArrays, spec: ModelSpec, item_values: dict | None,
                        init: dict | None) -> dict:
    """Item values for the fixed-items route: given, from ``init``, or calibrated."""
    J = arr.n_items
    src = None
    if item_values is not None:
        src = item_values
    elif init is not None and init.get("a") is not None and init.get("d") is not None:
        src = init
    if src is None:
        cal = calibrate_items(arr, spec)
        src = cal
    out = {}
    for key in ("a", "d"):
        if src.get(key) is None:
            raise InputError(f"item_values: missing key {key!r}")
        v = np.asarray(src[key], float).reshape(-1)
        if v.shape != (J,):
            raise InputError(f"item_values: key {key!r} has shape {v.shape}, expected ({J},)")
        if not np.isfinite(v).all():
            raise InputError(f"item_values: key {key!r} has non-finite values")
        out[key] = v
    # the spec declares the item model: a 3PL with fixed guessing uses the spec's floor
    # whatever the source says (a 2PL calibration's c = 0 must not win over it), and a
    # 1PL needs one discrimination per domain
    if spec.item_model == "1pl" or spec.item_model == "2pl":
        c = np.zeros(J)
    elif not spec.estimate_guessing:
        c = np.full(J, spec.fixed_guessing)
    elif src.get("c") is not None:
        c = np.broadcast_to(np.asarray(src["c"], float), (J,)).copy()
    else:
        c = np.full(J, spec.priors.guessing_mean)
    if spec.item_model == "1pl":
        for k, s in enumerate(arr.domain_slices):
            a_k = out["a"][s]
            if a_k.size and np.ptp(a_k) > 1e-8 * max(1.0, float(np.abs(a_k).max())):
                raise InputError(f"item_values: a 1PL spec needs one discrimination per domain; domain "
                                 f"{arr.domains[k]!r} has {a_k.min():.3g}-{a_k.max():.3g} "
                                 "(calibrate with item model 1pl)")
    if np.any((c < 0) | (c >= 1)):
        raise InputError("item_values: key 'c' must lie in [0, 1)")
    out["c"] = c
    if np.any(out["a"] <= 0):
        raise InputError("item_values: key 'a' must be positive")
    return out
