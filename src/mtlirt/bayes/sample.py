"""Fitting the Bayesian model: NUTS (nutpie, PyMC or numpyro), ADVI or MAP,
jointly over items and LLMs or with the items fixed (calibrate, then score)."""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import time
import warnings
from typing import Any

import numpy as np
import xarray as xr

from mtlirt.bayes._built import BuiltModel
from mtlirt.bayes._factor import anchor_domains, model_coords
from mtlirt.bayes.algorithms import _free_names, _run_algorithm
from mtlirt.bayes.collapsed import sample_structure, spread_off_prior
from mtlirt.bayes.fit_tree import _finish
from mtlirt.bayes.fixed_items import build_fixed_model, build_tables, resolve_item_values
from mtlirt.bayes.init import initial_values
from mtlirt.bayes.marginal import add_domain_scores
from mtlirt.bayes.model import build_model
from mtlirt.bayes.spec import ModelSpec, load_spec
from mtlirt.config import (
    JOINT_MAX_LLMS,
    JOINT_MAX_RESPONSES,
    NUTS_DRAWS,
    NUTS_DRAWS_MAX,
    NUTS_TUNE,
    Route,
    SamplerConfig,
)
from mtlirt.data.responses import as_responses
from mtlirt.errors import InputError
from mtlirt.progress import stage

__all__ = ["fit_bayes", "build", "resolve_route", "SamplerConfig", "Route", "JOINT_MAX_LLMS", "JOINT_MAX_RESPONSES"]

_ITEMS = ("joint", "fixed")


class QuadratureWarning(UserWarning):
    """The integrated route's quadrature is not accurate at the structure's posterior draws."""


class _QuadratureFallback(Exception):
    """The integrated route's quadrature check failed where ``llm_side="auto"`` may take the sampled route."""

    def __init__(self, check: dict):
        super().__init__("quadrature check failed")
        self.check = check


class PriorSpreadWarning(UserWarning):
    """The LLMs' overall traits spread far from the fixed-items model's ``N(0, 1)`` population prior."""


# The integrated route's quadrature check: the largest tolerated range, over posterior draws of the
# structure, of the error of the total log-likelihood (fine grid against working grid). A range d tilts
# the structure's posterior by up to a factor exp(d) between draws. Accurate grids stay far below it on
# simulated and real leaderboards; a grid placed away from the LLMs' posteriors exceeds it many times over.
QUADRATURE_SPREAD_MAX = 0.5


def _exact_compile(func):
    """Run ``func`` with PyTensor's numba backend compiling without fast-math.

    PyTensor's default fast-math flags (reassociation, approximate functions)
    let LLVM reorder the arithmetic differently when a function is compiled
    fresh than when it is loaded from PyTensor's on-disk cache, so the same
    seed gave different draws on a machine's first run and on its later ones;
    without fast-math both agree to the bit (``benchmarks/bench_reproducible.py``).
    The heavy kernels are the package's own numba functions, whose flags this
    does not change."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        import pytensor

        with pytensor.config.change_flags(numba__fastmath=False):
            return func(*args, **kwargs)

    return wrapper


def build(responses: Any, spec: str | ModelSpec | None = None, *, items: str = "joint",
          init: dict | None = None, item_values: dict | None = None, likelihood: str = "auto") -> BuiltModel:
    """Build the PyMC model for ``items="joint"`` or ``"fixed"``.

    Parameters
    ----------
    responses : Responses, DataFrame or path
    spec : str or ModelSpec
    items : {"joint", "fixed"}
    init : dict, optional
        Point estimate for initial values.
    item_values : dict, optional
        Fixed item values (``items="fixed"``).
    likelihood : {"auto", "fused", "elementwise"}
        ``items="joint"`` only: see :func:`mtlirt.bayes.model.build_model`.

    Returns
    -------
    BuiltModel
        The ``pymc.Model`` (``.model``) with its spec, anchors, initial values
        and, items fixed, the likelihood tables and item values.
    """
    if items == "joint":
        if item_values is not None:
            raise InputError("item_values is only used with items='fixed'")
        return build_model(responses, spec, init=init, likelihood=likelihood)
    if items == "fixed":
        return build_fixed_model(responses, spec, item_values=item_values, init=init)
    raise InputError(f"items must be one of {', '.join(_ITEMS)}; got {items!r}")


@_exact_compile
def fit_bayes(
    responses: Any,
    spec: str | ModelSpec | None = "factor-2pl",
    *,
    algorithm: str = "nuts",
    sampler: str | None = None,
    draws: int | None = None,
    tune: int | None = None,
    chains: int = 4,
    seed: int = 0,
    init: dict | None = None,
    items: str = "auto",
    item_values: dict | None = None,
    progress: bool = True,
    cores: int | None = None,
    target_accept: float | None = None,
    log_likelihood: bool | None = None,
    keep_raw: bool = True,
    advi_iterations: int = 30000,
    map_maxiter: int = 3000,
    nuts_kwargs: dict | None = None,
    trace_dir: str | None = None,
    warn: bool = True,
    llm_side: str = "auto",
    thin: int | None = None,
):
    """Fit the Bayesian multi-domain IRT model and return an ArviZ-layout tree.

    The inference settings (``algorithm``, ``sampler``, ``items``, ``llm_side``, ``draws``, ``tune``,
    ``chains``, ``thin``, ``target_accept``, ``log_likelihood``, ``advi_iterations``, ``map_maxiter``) make a
    :class:`mtlirt.config.SamplerConfig`, whose one ``validate`` holds the rules of their combinations;
    the fit records them as it ran them, every default filled in (``info["sampler_config"]``, the
    posterior's ``mtlirt_sampler_config``), and :func:`mtlirt.results.fitdir.read_fit` checks them.

    Parameters
    ----------
    responses : Responses, DataFrame or path
        The leaderboard (a long table or its file is read as :class:`~mtlirt.data.responses.Responses`).
    spec : str, path, dict or ModelSpec
        Model spec (name in ``models/``, e.g. ``"factor-2pl"``,
        ``"factor-3pl-mcq"``, ``"correlated-2pl"``).
    algorithm : {"nuts", "advi", "map"}
        NUTS sampling; mean-field ADVI (``draws`` draws from the
        approximation, one chain); MAP (one chain, one draw).
    sampler : {None, "nutpie", "pymc", "numpyro", "imh"}
        NUTS implementation (numpyro needs the optional ``jax`` extra), or
        ``"imh"``: independence Metropolis-Hastings from the Laplace
        approximation, for the structure of the route with the whole LLM
        side integrated out (``llm_side="integrated"``; see
        :mod:`mtlirt.bayes.collapsed`). Default (``None``): on that route
        IMH where a pilot of 200 proposals finds the Laplace approximation
        close to the posterior (Pareto k-hat <= 0.5; large designs), else
        nutpie; ``"nutpie"`` elsewhere. The sampler used is recorded
        (``mtlirt_sampler``).
    draws, tune, chains : int
        Draws and tuning steps per chain, number of chains. ``draws=None``
        (default): the convergence checks choose the run length: IMH in
        blocks until they pass (:func:`mtlirt.bayes.collapsed.sample_structure`),
        nutpie's NUTS from 1,000 to 4,000 draws per chain until they pass
        (:mod:`mtlirt.bayes.nuts_length`; 1,000 where its trace would not fit
        in memory or ``cores`` is fewer than ``chains``); 1,000 with the other
        NUTS samplers.
        ``tune`` defaults to 500 for NUTS (``mtlirt.config.NUTS_TUNE``); IMH adapts nothing, its tuning
        steps are only the burn-in each chain discards, 20-100 as its pilot
        calls for (:func:`mtlirt.bayes.imh.imh_burn_in`).
    seed : int
        Random seed: the same seed gives the same numbers.
    init : dict, optional
        Point estimate (``theta`` N x K, ``overall`` N x r, ``loadings``
        K x r, ``a``, ``d``, optional ``c``) for initial values; default a
        quick estimate from accuracies (:func:`mtlirt.bayes.init.default_init`).
    items : {"auto", "joint", "fixed"}
        Sample items jointly, or fix them (calibrate, then score; see
        :mod:`mtlirt.bayes.fixed_items`). ``"auto"`` (default): joint with
        at most ``JOINT_MAX_LLMS`` LLMs and ``JOINT_MAX_RESPONSES``
        responses, else fixed (:func:`resolve_route`).
    item_values : dict, optional
        ``items="fixed"``: the item values ``a``, ``d`` (``c``). Default
        ``init``'s ``a``/``d``, else calibrated by MML-EM.
    progress : bool
        Show progress bars.
    cores : int, optional
        Chains run in parallel (default ``min(chains, cpu count)``).
    target_accept : float, optional
        NUTS target acceptance rate; default 0.8 for the fixed-items factor
        model with the domain traits integrated out (a smooth, nearly
        Gaussian posterior, where 0.9 costs about half again as many leapfrog
        steps per draw), 0.9 otherwise (funnels between the hierarchies' scales
        and their members); a default is raised halfway to 1 once where a run
        whose length the checks choose diverges.
    log_likelihood : bool or None
        Add the ``log_likelihood`` group (per LLM x domain) for
        :func:`~mtlirt.bayes.loo` and :func:`~mtlirt.bayes.compare`. ``None``
        (default): only when it holds at most ``LOGLIK_AUTO_MAX`` = 1e8
        values (0.8 GB; at the flagship shape 4 x 1,000 draws would need
        7.8 GB), with a warning when it is left out; ``True`` forces it.
    keep_raw : bool
        Keep the large free variables (``z``, ``eta_raw``) in the posterior;
        ``False`` drops them after the diagnostics are computed.
    advi_iterations : int
        ADVI optimisation steps.
    map_maxiter : int
        L-BFGS-B iterations at most for ``algorithm="map"``.
    nuts_kwargs : dict, optional
        Extra keyword arguments for the NUTS sampler.
    trace_dir : str, optional
        nutpie only: stream the draws to a temporary zarr store in this
        folder (removed afterwards) instead of memory, so the trace is held
        in memory once rather than twice. Used automatically (in the system's
        temporary folder) when the trace would exceed 1 GB.
    warn : bool
        Warn when a NUTS fit fails the convergence checks.
    llm_side : {"auto", "integrated", "sampled"}
        NUTS with ``items="fixed"`` and factor traits of rank 1 or 2:
        ``"integrated"`` integrates every LLM's overall trait and domain
        scores out, samples only the loadings and draws the LLM side exactly
        afterwards (:mod:`mtlirt.bayes.collapsed`; convergence is checked on
        the sampled loadings, and the fit records a quadrature check);
        ``"sampled"`` samples the overall traits with the loadings
        (domain traits integrated out, :mod:`mtlirt.bayes.marginal`).
        ``"auto"`` (default): ``"integrated"`` when it applies and the spec's
        ``trait_parameterization`` is ``"auto"``, else ``"sampled"``; and
        ``"sampled"`` where the integrated route's quadrature check fails
        (few LLMs with few items per domain). The choice and its reason:
        ``info["route"]`` (:func:`resolve_route`).

    thin : int or float, optional
        ``llm_side="integrated"`` only: sample ``draws`` structure draws per
        chain, keep every ``thin``-th (a number >= 1, evenly spaced where it
        is not whole: :func:`mtlirt.config.thinned_positions`) and draw the
        LLM side for those (its cost dominates at leaderboard scale).
        Convergence is judged on all ``draws`` structure draws (recorded with
        ``computed_on``). Default (``None``): 1,000 kept
        (:func:`mtlirt.bayes.collapsed.choose_thin`).

    Returns
    -------
    xarray.DataTree
        Groups ``posterior`` (free variables and the derived quantities
        ``theta``, ``overall``, ``eta``, ``loadings``, ``discrimination``,
        ``intercept``, ``guessing``, ``domain_corr``, ``expected_accuracy``;
        coords ``llm``, ``domain``, ``item``, ``factor``, ``domain_a``,
        ``domain_b`` and ``item_domain`` on ``item``), ``sample_stats`` (NUTS),
        ``log_likelihood`` (optional). Attributes ``mtlirt_*`` on the
        posterior record the spec, algorithm, seed and diagnostics.

    Raises
    ------
    InputError
        Bad arguments or data.
    ImportError
        ``sampler="numpyro"`` without jax/numpyro.

    Warns
    -----
    NotConvergedWarning
        A NUTS fit with R-hat > 1.01, low ESS, divergences or low BFMI.
    """
    config = SamplerConfig(algorithm=algorithm, sampler=sampler, items=items, llm_side=llm_side, draws=draws,
                           tune=tune, chains=chains, thin=thin, target_accept=target_accept,
                           log_likelihood=log_likelihood, advi_iterations=advi_iterations,
                           map_maxiter=map_maxiter).validate()  # before the data are read
    spec, arr = load_spec(spec), as_responses(responses)
    route = config.resolve(arr, spec)
    config = route.config
    chains, target_accept, advi_iterations, map_maxiter = (config.chains, config.target_accept,
                                                           config.advi_iterations, config.map_maxiter)
    side = f"; LLM side {route.llm_side} ({route.reasons['llm_side']})" if route.llm_side else ""
    stage(f"route: items {route.items} ({route.reasons['items']}){side}; {route.reasons['draws']}")
    items, sampler, tune, draws, thin = route.items, route.sampler, route.tune, route.draws, route.thin
    if route.integrated:
        # llm_side="auto": where the quadrature check fails (few LLMs, few items per domain), the sampled route
        fallback = llm_side == "auto" and sampler in ("auto", "nutpie")
        try:
            return _fit_integrated(arr, spec, sampler=sampler, draws=draws, tune=tune, chains=chains, seed=seed,
                                   init=init, item_values=item_values, progress=progress, cores=cores,
                                   target_accept=target_accept, log_likelihood=log_likelihood, keep_raw=keep_raw,
                                   nuts_kwargs=nuts_kwargs, warn=warn, thin=thin, route=route, fallback=fallback)
        except _QuadratureFallback as e:
            route = _sampled_after_fallback(route, e.check)
            sampler, tune, thin = route.sampler, route.tune, route.thin
    if draws is None and algorithm != "nuts":
        draws = NUTS_DRAWS
    t0 = time.perf_counter()
    # the fused likelihood Op has no JAX implementation
    likelihood = "elementwise" if algorithm == "nuts" and sampler == "numpyro" else "auto"
    stage(f"building the {spec.name} model ({arr.n_llms:,} LLMs x {arr.n_items:,} items, items {items})")
    built = build(arr, spec, items=items, init=init, item_values=item_values, likelihood=likelihood)
    spec = built.spec  # as the data resolved it (discrimination_spread "auto"), for the fit's record
    stages = {"build": time.perf_counter() - t0}
    free = _free_names(built.model)
    t1 = time.perf_counter()
    post, sample_stats, target_accept, run_length = _run_algorithm(
        built, free, algorithm=algorithm, sampler=sampler, draws=draws, tune=tune, chains=chains, cores=cores,
        seed=seed, progress=progress, target_accept=target_accept, nuts_kwargs=nuts_kwargs, trace_dir=trace_dir,
        advi_iterations=advi_iterations, map_maxiter=map_maxiter)
    stages[algorithm] = time.perf_counter() - t1
    draws, route = _as_run(post, draws, route, run_length)
    anchors = list(built.anchors)
    if built.marginal is not None:  # domain traits integrated out: draw them back
        post = _draw_domain_scores(post, arr, built, anchors, seed=seed, point=algorithm == "map",
                                   progress=progress, stages=stages)
    extra = _sampled_route_record(post, arr, route, warn=warn and algorithm == "nuts")
    if run_length is not None:
        extra["run_length"] = run_length
    fixed = built.items if items == "fixed" else None
    tables = built.tables if items == "fixed" else None
    return _finish(post, sample_stats, arr, spec, anchors, t0=t0, t_sample=time.perf_counter() - t1,
                   stages=stages, algorithm=algorithm, sampler=sampler, items=items, seed=seed, draws=draws,
                   tune=tune, target_accept=target_accept, free=free, fixed=fixed, tables=tables,
                   log_likelihood=log_likelihood, keep_raw=keep_raw, warn=warn, extra_info=extra,
                   diagnostics_override=_last_checkpoint(run_length), config=route.config)


def _last_checkpoint(run_length: dict | None) -> dict | None:
    """The last convergence checkpoint of a run whose length the checks chose (its kept draws), which
    the fit's verdict takes where it checked the same variables (:func:`~mtlirt.bayes.fit_tree.
    checkpoint_verdict`)."""
    attempts = (run_length or {}).get("attempts") or []
    checkpoints = attempts[-1].get("checkpoints") if attempts else None
    return checkpoints[-1] if checkpoints else None


def _as_run(post, draws: int | None, route: Route, run_length: dict | None) -> tuple:
    """``(draws, route)`` as the sampled route ran: the draws per chain the convergence checks chose where
    ``draws`` was None, and the route's reason for them where the checks could not choose (``run_length``'s
    rule says why)."""
    if draws is None:
        draws = int(post.sizes["draw"])
    if run_length is not None and "attempts" not in run_length:
        route = dataclasses.replace(route, reasons={**route.reasons, "draws": run_length["rule"]})
    return draws, route


def _sampled_after_fallback(route: Route, check: dict) -> Route:
    """The sampled route that ``llm_side="auto"`` takes where the integrated route's quadrature check
    (``check``) failed, with its reason."""
    reason = (f"auto: the integrated route's quadrature check failed (its error moved by "
              f"{check['spread_diff']:.3g} log units over the loadings' draws, more than "
              f"{QUADRATURE_SPREAD_MAX}), so the overall traits are sampled")
    route = dataclasses.replace(route, integrated=False, llm_side="sampled", sampler="nutpie",
                                tune=NUTS_TUNE if route.tune is None else route.tune, thin=1,
                                reasons={**route.reasons, "llm_side": reason,
                                         "draws": (f"{route.draws:,} draws per chain, as asked" if route.draws
                                                   else "run length chosen by the convergence checks "
                                                        f"({NUTS_DRAWS:,}-{NUTS_DRAWS_MAX:,} draws per chain)")})
    stage(f"route: {reason}")
    return route


def _draw_domain_scores(post, arr, built: BuiltModel, anchors, *, seed, point, progress, stages) -> xr.Dataset:
    """The domain traits that the model integrated out (``built.marginal``), drawn back from their
    conditionals given every posterior draw (:func:`mtlirt.bayes.marginal.add_domain_scores`)."""
    t2 = time.perf_counter()
    post = post.assign_coords(llm=list(arr.llms), domain=list(arr.domains))
    post = add_domain_scores(post, built.tables, built.marginal, anchors, seed=seed, point=point, progress=progress)
    stages["domain_score_draws"] = time.perf_counter() - t2
    return post


def _sampled_route_record(post, arr, route: Route, *, warn: bool) -> dict:
    """The sampled route's own entries of the fit record: the route, and for the fixed-items models the
    population prior's fit (the overall traits' spread, as on the integrated route), warned of when off."""
    extra = {"route": route.record()}
    if "eta_var" in post:
        extra["overall_spread"] = _variance_spread(post["eta_var"].values, arr.n_llms)
        if warn:
            _warn_spread(extra["overall_spread"], stacklevel=4)
    return extra


def resolve_route(arr, spec: ModelSpec, *, algorithm: str = "nuts", sampler: str | None = None,
                  items: str = "auto", llm_side: str = "auto", draws: int | None = None, tune: int | None = None,
                  chains: int = 4, thin: int | None = None) -> Route:
    """The route of a fit with these settings: :meth:`mtlirt.config.SamplerConfig.resolve`, which holds every
    rule of the settings and chooses every default."""
    return SamplerConfig(algorithm=algorithm, sampler=sampler, items=items, llm_side=llm_side, draws=draws,
                         tune=tune, chains=chains, thin=thin).resolve(arr, spec)



def _fit_integrated(arr, spec: ModelSpec, *, sampler, draws, tune, chains, seed, init, item_values, progress,
                    cores, target_accept, log_likelihood, keep_raw, nuts_kwargs, warn, thin=1, route=None,
                    fallback=False):
    """The fixed-items factor model with the whole LLM side integrated out
    (:mod:`mtlirt.bayes.collapsed`)."""
    t0 = time.perf_counter()
    stage(f"building the {spec.name} structure model ({arr.n_llms:,} LLMs x {arr.n_items:,} items, items fixed, "
          "LLM side integrated out)")
    fixed = resolve_item_values(arr, spec, item_values, init)
    tables = build_tables(arr, fixed["a"], fixed["d"], fixed["c"])
    anchors = anchor_domains(arr, spec.rank)
    iv = initial_values(arr, spec, anchors, init, include_items=False,
                        trait_centered=np.ones(arr.n_domains, dtype=bool))
    stages = {"build": time.perf_counter() - t0}
    t1 = time.perf_counter()
    # NUTS samples the loadings only where IMH's Laplace proposal does not fit (small, skewed posteriors
    # near the loadings' bound): there 0.8 left divergences that 0.9 does not
    target_accept = None if target_accept is None else float(target_accept)  # None: 0.9, raised if it diverges
    steps = "the default tuning steps" if tune is None else f"{tune:,} tuning steps"
    n_draws = "draws in blocks until the convergence checks pass" if draws is None else f"{draws:,} draws"
    stage(f"sampling the loadings: {chains} chains x {n_draws} after {steps} ({sampler}), "
          "then the LLM side exactly")
    fit = sample_structure(tables, spec, anchors, iv, model_coords(arr, spec), draws=draws, tune=tune,
                           chains=chains, cores=cores or max(1, min(chains, os.cpu_count() or 1)), seed=seed,
                           target_accept=target_accept, progress=progress, nuts_kwargs=nuts_kwargs,
                           sampler=sampler, thin=thin)
    stages.update({f"integrated.{k}": v for k, v in fit.info["stage_seconds"].items()})
    sampler, tune, draws, thin = fit.info["sampler"], fit.info["tune"], fit.info["draws"], fit.info["thin"]
    target_accept = float("nan") if sampler == "imh" else fit.info["target_accept"]
    qc = fit.info.get("quadrature_check") or {}
    if fallback and qc.get("spread_diff", 0.0) > QUADRATURE_SPREAD_MAX:
        raise _QuadratureFallback(qc)
    if warn and qc.get("spread_diff", 0.0) > QUADRATURE_SPREAD_MAX:
        warnings.warn(
            f"QUADRATURE NOT ACCURATE: the integrated log-likelihood's error moves by {qc['spread_diff']:.3g} log "
            f"units over the loadings' posterior draws (<= {QUADRATURE_SPREAD_MAX} wanted; up to "
            f"{qc['max_abs_diff_per_llm']:.3g} for one LLM), so the loadings' posterior may be off. LLMs with "
            "extreme scores (near all right or all wrong) are the usual cause; fit with llm_side='sampled' to "
            "compare.", QuadratureWarning, stacklevel=3)
    if warn:
        _warn_spread(fit.info.get("overall_spread"), stacklevel=4)
    post = fit.posterior
    post.attrs["mtlirt_llm_side"] = "integrated"
    post.attrs["mtlirt_quadrature_check"] = json.dumps(qc, default=float)
    post.attrs["mtlirt_structure_mode"] = json.dumps(fit.info["mode_refit"], default=str)
    free = [v for v in ("loading_free", "loading_diag") if v in post]
    return _finish(post, fit.sample_stats, arr, spec, anchors, t0=t0, t_sample=time.perf_counter() - t1,
                   stages=stages, algorithm="nuts", sampler=sampler, items="fixed", seed=seed, draws=draws,
                   tune=tune, target_accept=target_accept, free=free, fixed=fixed, tables=tables,
                   log_likelihood=log_likelihood, keep_raw=keep_raw, warn=warn,
                   check_vars=free + ["loadings"], diagnostics_override=fit.info.get("structure_diagnostics_all_draws"),
                   config=route.config if route is not None else None,
                   extra_info={"llm_side": "integrated", "thin": thin,
                               "route": route.record() if route is not None else None,
                               "run_length": fit.info.get("run_length"),
                               "thin_rule": fit.info.get("thin_rule"),
                               "imh": fit.info.get("imh"),
                               "imh_pilot": fit.info.get("imh_pilot"),
                               "burn_in": fit.info.get("burn_in"),
                               "imh_fallback": fit.info.get("imh_fallback"),
                               "whitening": fit.info.get("whitening"),
                               "quadrature_check": fit.info.get("quadrature_check"),
                               "overall_spread": fit.info.get("overall_spread"),
                               "inner_nodes": fit.info["n_inner_nodes"],
                               "inner_spacing": fit.info.get("inner_spacing"),
                               "outer_nodes": fit.info["n_outer_nodes"],
                               "fewer_outer_nodes": fit.info.get("fewer_outer_nodes"),
                               "more_outer_nodes": fit.info.get("more_outer_nodes")})


def _variance_spread(eta_var: np.ndarray, n_llms: int) -> dict:
    """:func:`mtlirt.bayes.collapsed.overall_spread` from the draws of the overall traits'
    variance over the LLMs (``eta_var``, chain x draw x factor) of the sampled route."""
    sd = np.sqrt(np.asarray(eta_var, dtype=np.float64)).reshape(-1, eta_var.shape[-1])
    return {"median_sd": [round(float(v), 4) for v in np.median(sd, axis=0)],
            "sd_q05": [round(float(v), 4) for v in np.quantile(sd, 0.05, axis=0)],
            "sd_q95": [round(float(v), 4) for v in np.quantile(sd, 0.95, axis=0)],
            "n_llms": int(n_llms), "sd_expected": round(float(1 / np.sqrt(2 * max(n_llms, 1))), 4)}


def _warn_spread(spread: dict | None, stacklevel: int) -> None:
    """``PriorSpreadWarning`` where the overall traits spread far from their ``N(0, 1)`` prior
    (:func:`mtlirt.bayes.collapsed.spread_off_prior`)."""
    off = spread_off_prior(spread)
    if off:
        sds = ", ".join(f"{spread['median_sd'][j]:.2f}" for j in off)
        warnings.warn(
            f"OVERALL TRAITS SPREAD OFF THE PRIOR: their sd over the {spread['n_llms']:,} LLMs is {sds} (median over "
            "the draws) where the fixed-items model gives them the population prior N(0, 1) on the scale of the "
            "fixed items. The calibration did not put these LLMs on that scale (few LLMs, or some far out), so "
            "the prior shrinks the overall traits of the LLMs measured least (the extremes, LLMs with few "
            "responses) by the wrong amount; their intervals are the least reliable.",
            PriorSpreadWarning, stacklevel=stacklevel)
