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
matrix products on a uniform theta grid on [-10, 10]
(:func:`mtlirt.numerics.llm_side.tabulate`), and evaluated inside the
PyTensor graph by cubic Hermite interpolation (:mod:`mtlirt.numerics.hermite`:
C1, analytic derivative, error O(h^4)); outside the grid the function is
continued linearly. Each gradient then costs O(N K) gathers instead of O(N J).

The grid reaches -10 because a domain score's posterior can lie beyond -6: on
ChemBench two LLMs answered 0 and 5 of a 1,001-item topic right, and their
scores there have posterior means -7.27 and -6.63 (an exact per-item integral).
A grid on [-6, 6] gave -6.71 and -6.87 on the integrated route, whose nodes
reach past the edge into the linear continuation (which overstates the
likelihood there: -13.7 alone), and -5.99 on the sampled route, whose draws
stop at the edge; on [-10, 10] both give the exact values.

Items are calibrated by penalised marginal maximum likelihood with the
frequentist fits' EM (:func:`mtlirt.estimators.irt.calibrate_items`; the
spec's item model and priors), unless given (:func:`calibrate_items`).
Their uncertainty is not propagated: the fixed-items posterior is
conditional on the calibrated values (fine when N is in the thousands,
optimistic when N is small).
"""

from __future__ import annotations

import time
import warnings
from typing import Any

import numpy as np

from mtlirt.bayes._built import BuiltModel
from mtlirt.bayes._factor import anchor_domains, factor_parts, model_coords
from mtlirt.bayes.collapsed_grid import llm_posteriors
from mtlirt.bayes.init import initial_values
from mtlirt.bayes.marginal import (
    kernel_inputs,
    marginal_loglik_pt,
    overall_sd_guess,
    pin_standardisation,
    quadrature_nodes,
)
from mtlirt.bayes.model import add_coords_for_centering, add_factor_block, add_traits, trait_centering
from mtlirt.bayes.spec import ModelSpec, load_spec
from mtlirt.config import use_marginal
from mtlirt.data.responses import Responses, as_responses
from mtlirt.data.validate import DataWarning, _values
from mtlirt.errors import InputError
from mtlirt.estimators.irt import Penalties, ResponseData, blas_threads
from mtlirt.estimators.irt import calibrate_items as _calibrate
from mtlirt.numerics.hermite import hermite_pt
from mtlirt.numerics.llm_side import LikelihoodTables, tabulate

__all__ = [
    "calibrate_items",
    "item_penalties",
    "build_fixed_model",
    "build_tables",
]

# ---------------------------------------------------------------------------
# calibration: the frequentist fits' EM (one item calibration in the package)
# ---------------------------------------------------------------------------


def item_penalties(spec: ModelSpec) -> Penalties:
    """The EM's penalties for a spec's item priors: ``log a ~ N(m, sqrt(s1^2 + s2^2))`` below
    ``discrimination_max``,
    ``d ~ N(0, sqrt(t1^2 + t2^2))`` (the hierarchical priors' mean and spread scales
    combined), and an estimated floor's ``Beta(m kappa, (1 - m) kappa)``."""
    p = spec.priors
    m, kap = p.guessing_mean, p.guessing_concentration
    return Penalties(a_max=float(p.discrimination_max), log_a_mean=float(p.log_discrimination_mean),
                     log_a_sd=float(np.hypot(p.log_discrimination_mean_scale, p.log_discrimination_sd_scale)),
                     d_sd=float(np.hypot(p.difficulty_mean_scale, p.difficulty_sd_scale)),
                     guessing_alpha=float(m * kap), guessing_beta=float((1 - m) * kap))


def calibrate_items(
    responses: Any,
    spec: str | ModelSpec | None = None,
    *,
    max_iter: int = 500,
    tol: float = 1e-4,
    init: dict | None = None,
    verbose: bool = False,
) -> dict:
    """Calibrate item parameters by penalised marginal maximum likelihood.

    The EM of the frequentist fits, :func:`mtlirt.estimators.irt.calibrate_items`
    (every domain at once, ``theta ~ N(0, 1)`` integrated out on a grid that
    is finer for long domains, PX-EM and SQUAREM), with the spec's item model
    and priors (:func:`item_penalties`): 1PL one ``a`` per domain; 3PL with
    ``c`` fixed at the spec's guessing, or, with ``guessing = "estimate"``, one
    floor per domain estimated under ``Beta(m kappa, (1 - m) kappa)`` (the
    joint model's per-item prior, here on the domain's shared floor).

    Parameters
    ----------
    responses : Responses, DataFrame or path
    spec : str or ModelSpec, optional
    max_iter : int
        EM sweeps at most.
    tol : float
        Stop when no ``log a``, ``d`` (or logit floor) moves more than ``tol`` in a sweep.
    init : dict, optional
        Starting ``a``, ``d`` (internal scale).
    verbose : bool
        Print a summary line.

    Returns
    -------
    dict
        ``a``, ``d``, ``c`` (arrays of length J), ``iterations`` (EM sweeps),
        ``converged``, ``nodes`` (quadrature nodes per domain), ``seconds``.
    """
    arr = as_responses(responses)
    spec = load_spec(spec)
    t0 = time.perf_counter()
    J = arr.n_items
    model, guessing = spec.point_item_model
    data = ResponseData.from_responses(arr, guessing=guessing)
    pen = item_penalties(spec)
    a0 = d0 = None
    if init is not None and init.get("a") is not None and init.get("d") is not None:
        a0 = np.clip(np.asarray(init["a"], float), pen.a_min, pen.a_max)
        d0 = np.clip(np.asarray(init["d"], float), -pen.d_max, pen.d_max)
    with blas_threads(1):
        a, d, info = _calibrate(data, a0, d0, priors=pen,
                                model=model, max_iter=max_iter, tol=tol)
    c = np.zeros(J) if data.c is None else data.c.copy()
    if verbose:
        print(f"calibrate: {info['n_iter']} EM sweeps, converged={info['converged']}, "
              f"nodes {int(info['nodes'].min())}-{int(info['nodes'].max())}")
    return {"a": a, "d": d, "c": c, "iterations": info["n_iter"], "converged": info["converged"],
            "nodes": info["nodes"], "seconds": time.perf_counter() - t0}


# ---------------------------------------------------------------------------
# tables
# ---------------------------------------------------------------------------


def build_tables(
    responses: Any,
    a: np.ndarray,
    d: np.ndarray,
    c: np.ndarray | float = 0.0,
    *,
    step: float | None = None,
    max_cell_bytes: float = 2e9,
) -> LikelihoodTables:
    """Tabulate the fixed-item log-likelihoods of a leaderboard (see module docstring):
    :func:`mtlirt.numerics.llm_side.tabulate` of its answers.

    Parameters
    ----------
    responses : Responses, DataFrame or path
    a, d : ndarray (J,)
        Discrimination and intercept.
    c : float or ndarray (J,)
        Lower asymptote (0: the sufficient-statistic route).
    step : float, optional
        Grid step on [-10, 10]; default 0.025 for pattern tables, 0.05 (or
        coarser to fit ``max_cell_bytes``) for per-cell tables.
    max_cell_bytes : float
        Memory budget for per-cell tables.

    Returns
    -------
    LikelihoodTables
    """
    arr = as_responses(responses)
    return tabulate(arr.correct, arr.mask, arr.domain_slices, a, d, c, step=step, max_cell_bytes=max_cell_bytes)


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
    responses : Responses, DataFrame or path
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
        (free variables ``eta_raw``, ``eta_mean``, ``eta_var`` and
        ``loading_*`` only; ``marginal`` holds the quadrature, see
        :mod:`mtlirt.bayes.marginal`);
        :func:`mtlirt.bayes.fit_bayes` then draws the domain scores from
        their conditional posterior.
    """
    import pymc as pm

    arr = as_responses(responses)
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
        theta = add_traits(spec, n, K, anchors, tc, population=True)
        g = hermite_pt(Ff, dFf, rows, theta, tables.lo, tables.h, G)
        pm.Potential("loglik", (s * theta - g).sum())
    iv = initial_values(arr, spec, anchors, init, include_items=False, trait_centered=tc)
    return BuiltModel(model=model, spec=spec, anchors=anchors, kind="fixed", initvals=iv, trait_centered=tc,
                      tables=tables, items=items)


def _build_marginal_model(arr: Responses, spec: ModelSpec, anchors: list[int], items: dict,
                          tables: LikelihoodTables, init: dict | None):
    """The fixed-items factor model with the domain traits integrated out
    (:mod:`mtlirt.bayes.marginal`): free variables ``eta_raw``, ``eta_mean``,
    ``eta_var`` (the overall traits' population prior,
    :func:`mtlirt.bayes.model.population_eta`), ``loading_free`` (in asinh
    coordinates) and ``loading_diag`` only."""
    import pymc as pm
    import pytensor.tensor as pt

    n, K = arr.n_llms, arr.n_domains
    allc = np.ones(K, dtype=bool)
    iv = initial_values(arr, spec, anchors, init, include_items=False, trait_centered=allc)
    iv = {k: v for k, v in iv.items() if k in ("eta_raw", "loading_free", "loading_diag")}
    eta0, lam0, psi0 = factor_parts(iv["eta_raw"], iv.get("loading_free"), iv["loading_diag"], K, anchors)
    quad = quadrature_nodes(tables, eta0 @ lam0.T, psi0)
    if n >= 3:
        quad, iv = _population_start(tables, quad, lam0, psi0, iv)
    with pm.Model(coords=model_coords(arr, spec)) as model:
        data = [pm.Data(f"quad_{k}", v)
                for k, v in zip(("start", "step", "weight", "logscale"), kernel_inputs(quad))]
        eta, lam, psi = add_factor_block(spec, n, K, anchors, population=True)
        pm.Potential("loglik", marginal_loglik_pt(*data, pt.dot(lam, eta.T), psi))
        if n >= 3:
            pin_standardisation(model["eta_raw"], overall_sd_guess(quad, lam0, psi0))
    return BuiltModel(model=model, spec=spec, anchors=anchors, kind="fixed", initvals=iv, trait_centered=allc,
                      tables=tables, items=items, marginal=quad)


def _population_start(tables: LikelihoodTables, quad: dict, lam0: np.ndarray, psi0: np.ndarray, iv: dict):
    """The quadrature nodes and the overall traits' initial values where the
    population model puts the LLMs at the initial loadings.

    The start point's overall traits are standardised (the MTL fit's), but the
    population model's spread them as the data do (1.8 on ChemBench, whose
    lowest LLM then lies at -5.6 instead of -3). Nodes placed at the
    standardised traits miss such an LLM's domain scores, and the truncated
    integrals pull it in. So the nodes are placed at every LLM's posterior mean
    of its overall trait under ``N(0, I)`` at the initial loadings
    (:func:`mtlirt.bayes.collapsed_grid.llm_posteriors`), and the sampler starts
    there: ``eta_raw`` at those means standardised (where the potential
    ``eta_raw_pin`` wants its mean and scale), ``eta_mean`` and ``eta_var`` at
    the mean and the variance over the LLMs that draws of them have."""
    mu, cov = llm_posteriors(tables, quad, lam0, psi0)
    iv = dict(iv)
    iv["eta_raw"] = (mu - mu.mean(0)) / np.maximum(mu.std(0), 1e-12)
    iv["eta_mean"] = mu.mean(0)
    iv["eta_var"] = mu.var(0) + np.diagonal(cov, axis1=1, axis2=2).mean(0)
    return quadrature_nodes(tables, mu @ lam0.T, psi0), iv


def resolve_item_values(arr: Responses, spec: ModelSpec, item_values: dict | None,
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
    out["a"] = _capped(out["a"], spec.priors.discrimination_max, arr.items, given=item_values is not None)
    return out


def _capped(a: np.ndarray, cap: float, items, *, given: bool) -> np.ndarray:
    """The fixed discriminations within the spec's ``discrimination_max``, which bounds every
    discrimination of the model: the calibration's (on its scores' scale, where an item that separates
    the LLMs sits at the bound) or a user's can lie above it, and the model fitted would not be the
    spec's. Warns, naming the items it moved (a :class:`~mtlirt.data.validate.DataWarning` for the
    calibration's: such items split the LLMs almost perfectly)."""
    over = np.flatnonzero(a > cap)
    if over.size:
        names = _values([str(items[j]) for j in over[np.argsort(-a[over])]])
        msg = (f"{over.size} fixed item discrimination{'s' if over.size > 1 else ''} above the spec's "
               f"discrimination_max {cap:g} (largest {a[over].max():.3g}: {names}) set to it")
        warnings.warn(msg, UserWarning if given else DataWarning, stacklevel=3)
    return np.minimum(a, cap)
