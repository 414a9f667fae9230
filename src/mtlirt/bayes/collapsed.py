"""Fixed items, factor traits: the whole LLM side integrated out.

With the items fixed, LLMs are independent given the loadings. Each LLM's
overall trait ``eta_i`` (r numbers) and domain scores ``theta_ik`` enter the
likelihood only through that LLM's own responses, so the posterior of the
structure (the loadings ``Lambda``, and with them ``psi_k = sqrt(1 -
|Lambda_k|^2)``) has the exact marginal likelihood::

    p(y | Lambda) = prod_i  integral N(eta; 0, I_r) prod_k f_ik(Lambda_k . eta; psi_k) deta,
    f_ik(m; psi)  = integral exp(l_ik(theta)) N(theta; m, psi^2) dtheta,

with ``l_ik`` the tabulated log-likelihood of :mod:`mtlirt.bayes.fixed_items`
and ``f_ik`` the domain marginal of :mod:`mtlirt.bayes.marginal`. Only the
``K r - r (r - 1) / 2`` loadings are sampled; every LLM's overall trait and
domain scores are drawn afterwards, exactly, from their conditional
posteriors given each structure draw. The overall traits here have the
population prior ``N(0, I_r)`` (LLMs independent), and each draw's overall
traits are standardised over the LLMs when the overall scores are reported.
The sampled route has the same prior, written as the standardised traits
with their mean and variance over the LLMs
(:func:`mtlirt.bayes.model.population_eta`), so both routes give the same
posterior.

:func:`sample_structure` runs the steps, each in its own module: the grid of
the two integrals (:mod:`~mtlirt.bayes.collapsed_grid`) and the kernel that
sums it (:mod:`~mtlirt.bayes.collapsed_kernel`); the structure's mode,
density and Laplace approximation (:mod:`~mtlirt.bayes.collapsed_structure`);
the loadings sampled by independence Metropolis-Hastings
(:mod:`~mtlirt.bayes.imh`) where a pilot finds the approximation close, else
NUTS; the exact draws of the LLM side (:mod:`~mtlirt.bayes.collapsed_draws`);
and the quadrature check.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from mtlirt.bayes._factor import factor_parts, loading_layout
from mtlirt.bayes.collapsed_draws import StoredNodes, draw_llm_side
from mtlirt.bayes.collapsed_grid import (
    N_OUTER,
    N_OUTER_FEW,
    build_grid,
    informative_llms,
    llm_logliks,
    llm_subset,
    psi_reach,
    quadrature_check,
    regrid,
    with_outer,
)
from mtlirt.bayes.collapsed_kernel import CollapsedGrid, structure_from_v
from mtlirt.bayes.collapsed_structure import (
    _laplace,
    _sample_loadings,
    _structure_diagnostics,
    _structure_draws,
    _v_of,
    _x_of,
    find_mode,
    structure_logp,
    structure_of_x,
)
from mtlirt.bayes.diagnostics import PARETO_K_MAX
from mtlirt.bayes.imh import (
    IMH_PILOT_K_MAX,
    IMH_PROFILE_ESS,
    IMH_PROFILE_FROM,
    KEEP_DRAWS,
    AxisProfiles,
    PilotProposals,
    _imh_loadings,
    axis_profiles,
    imh_burn_in,
    imh_pilot,
)
from mtlirt.bayes.marginal import quadrature_nodes
from mtlirt.config import NUTS_DRAWS, NUTS_TUNE, thinned_positions

__all__ = [
    "CollapsedFit",
    "choose_thin",
    "overall_spread",
    "sample_structure",
    "spread_off_prior",
]

# ---------------------------------------------------------------------------
# the fit
# ---------------------------------------------------------------------------


@dataclass
class CollapsedFit:
    """What :func:`sample_structure` returns: the posterior (``loading_free``,
    ``loading_diag``, and the drawn ``eta_raw`` and ``theta_raw``), the NUTS
    statistics, the grid and a summary (``info``: mode search, quadrature
    check, stage seconds)."""

    posterior: object
    sample_stats: object
    grid: CollapsedGrid
    info: dict


def overall_spread(eta: np.ndarray, llms: np.ndarray | None = None) -> dict:
    """How far the LLMs' overall traits spread, against the population prior
    ``N(0, 1)`` this route gives them: per factor, the sd over the LLMs
    (``llms``: those the structure's density sums over; default all) of each
    draw of ``eta`` (C, D, N, r), its median over the draws and its 5% and
    95% quantiles, and ``sd_expected``, the spread such a median has over
    samples of that many LLMs truly drawn from the prior (``1 / sqrt(2 n)``).

    Where the prior fits, a draw of the traits is a draw of ``n`` LLMs from
    it: its sd is 1 up to ``sd_expected``. A median well away from 1 says the
    LLMs are not spread like ``N(0, 1)`` (one tail far out, or clusters, as on
    real leaderboards with outlying LLMs), and the population prior fits
    them poorly."""
    x = eta if llms is None else eta[:, :, llms]
    sd = x.std(axis=2).reshape(-1, x.shape[-1])
    n = x.shape[2]
    return {"median_sd": [round(float(v), 4) for v in np.median(sd, axis=0)],
            "sd_q05": [round(float(v), 4) for v in np.quantile(sd, 0.05, axis=0)],
            "sd_q95": [round(float(v), 4) for v in np.quantile(sd, 0.95, axis=0)],
            "n_llms": int(n), "sd_expected": round(float(1 / np.sqrt(2 * max(n, 1))), 4)}


# Rank 2: Gauss-Hermite nodes per axis of the outer integral where, at the structure's mode, they give the
# density of the grid's own N_OUTER to within OUTER_FEWER_TOL nats over all LLMs (a fifth of the
# quadrature check's QUADRATURE_SPREAD_MAX): nine nodes per LLM instead of sixteen.
OUTER_FEWER = 3
OUTER_FEWER_TOL = 0.1

# How far the overall traits' spread (overall_spread's median sd) may lie from the prior's 1 before the
# fit says so: 10%, plus 4 of the sds such a median has over samples from the prior. Simulated
# populations stay within it at every size; real leaderboards with outlying LLMs (oll_v1, ChemBench) do not.
OVERALL_SPREAD_TOL = 0.10

# more outer nodes (the few-domain grid's N_OUTER_FEW per axis) where N_OUTER integrate the structure's
# density at the Laplace approximation's centre and OUTER_MORE_DRAWS of its draws differently from them,
# the differences spreading by more than OUTER_MORE_TOL nats over those points (half the quadrature
# check's bound: LLMs of few answers, whose posteriors of their overall traits are far from Gaussian)
OUTER_MORE_DRAWS = 3
OUTER_MORE_TOL = 0.25

# Passes of placing the grid at the structure's mode and finding the mode again, at most, until the grid
# resolves the mode's residual sds (:func:`_grid_resolving_mode`)
MODE_REGRIDS = 3
# the mode searched again on the grid spaced for the Laplace approximation's reach: the approximation is
# taken again where the mode moved by more than this many of its sds in some coordinate
MODE_MOVED_SDS = 0.25


def spread_off_prior(spread: dict | None) -> list[int]:
    """The factors whose traits spread too far from the ``N(0, 1)`` prior
    (:func:`overall_spread`; ``OVERALL_SPREAD_TOL``)."""
    if not spread:
        return []
    tol = OVERALL_SPREAD_TOL + 4 * spread["sd_expected"]
    return [j for j, sd in enumerate(spread["median_sd"]) if abs(sd - 1) > tol]


def choose_thin(chains: int, draws: int) -> int | float:
    """The thinning of the structure draws before the LLM side is drawn (``thin=None``): ``KEEP_DRAWS``
    of them kept, ``ceil(KEEP_DRAWS / chains)`` per chain evenly spaced (all where there are fewer), i.e.
    ``thin = draws / kept`` (a whole number where it divides; :func:`~mtlirt.config.thinned_positions`).
    The LLM side drawn for a kept structure draw is exact given it, so the kept draws' effective sample
    size is about the smaller of their number and the structure's ESS; 90% intervals from
    ``KEEP_DRAWS`` draws cover as from more (docs/results.md), and their cost is the LLM side's for
    ``KEEP_DRAWS`` draws whatever the run's length."""
    keep = min(int(draws), math.ceil(KEEP_DRAWS / chains))
    thin = draws / keep
    return int(thin) if thin.is_integer() else thin


def _pilots(sgrid: CollapsedGrid, layout, loading_scale: float, laplace: tuple, *, seed: int,
            cores: int) -> tuple[dict, AxisProfiles | None, PilotProposals | None]:
    """The IMH pilots: the Laplace approximation's; where its k-hat exceeds ``IMH_PROFILE_FROM`` (a
    skewed posterior: tiny domains, misspecified leaderboards) or its importance ratios' relative ESS falls
    below ``IMH_PROFILE_ESS`` (a tail its 200 draws may not show, but the chains' acceptance does: real
    leaderboards of domains of a few items), the axis profiles'
    (:func:`axis_profiles`), kept where its k-hat passes the chains' bound ``PARETO_K_MAX`` (and, where
    the ratios' spread alone called for them, where they spread less than the Laplace pilot's).
    Returns the pilot's record, the profiles (None: the Laplace proposal) and the chosen proposal's
    evaluated pilot draws (:class:`~mtlirt.bayes.imh.PilotProposals`)."""
    pilot, drawn = imh_pilot(sgrid, layout, loading_scale, laplace, seed=seed, cores=cores)
    close = pilot["khat"] <= IMH_PROFILE_FROM and pilot["relative_ess"] >= IMH_PROFILE_ESS
    if close or laplace[2]["kind"] != "full":
        return pilot, None, drawn
    profile = axis_profiles(structure_logp(sgrid, layout, loading_scale, gradient=False), laplace, cores=cores)
    sp, drawn_sp = imh_pilot(sgrid, layout, loading_scale, laplace, seed=seed, cores=cores, profile=profile)
    # where the Laplace pilot's k-hat passed, its ratios' spread alone called for the profiles: kept if they spread less
    worse = pilot["khat"] <= IMH_PROFILE_FROM and sp["relative_ess"] <= pilot["relative_ess"]
    if sp["khat"] > PARETO_K_MAX or worse:
        return {**pilot, "profile_khat": sp["khat"], "profile_relative_ess": sp["relative_ess"]}, None, drawn
    laplace_record = {"laplace_khat": pilot["khat"], "laplace_relative_ess": pilot["relative_ess"]} | (
        {"laplace_stopped_at": pilot["stopped_at"]} if "stopped_at" in pilot else {})
    slopes = [round(float(profile.slope.min()), 4), round(float(profile.slope.max()), 4)]
    return {**sp, "k_max": PARETO_K_MAX, **laplace_record, "tail_slopes": slopes}, profile, drawn_sp


def _sample_loadings_by(sampler: str, sgrid: CollapsedGrid, layout, loading_scale: float, V2: np.ndarray,
                        coords: dict, r: int, *, draws, tune, chains, cores, seed, target_accept, progress,
                        nuts_kwargs, whiten, stages: dict, laplace: tuple | None) -> tuple:
    """The loadings sampled as ``sampler`` asks (``"auto"``: IMH where the pilots (:func:`_pilots`) find
    the Laplace approximation ``laplace`` or its axis profiles close and its chains converge, else NUTS;
    ``"imh"``: IMH from the proposal the pilots chose);
    returns ``(posterior, sample_stats, sampler, tune, diagnostics of all draws or None, info, node totals
    of the draws or None)`` (IMH's, :func:`~mtlirt.bayes.imh._imh_loadings`), the seconds of each step added
    to ``stages``."""
    K = V2.shape[0]
    wi = {}
    stored = None
    auto, tune_given, diag_all = sampler == "auto", tune, None
    profile = drawn = None
    if sampler in ("auto", "imh"):  # the proposal, the burn-in and IMH's first draws
        t = time.perf_counter()
        pilot, profile, drawn = _pilots(sgrid, layout, loading_scale, laplace, seed=seed, cores=cores)
        stages["imh_pilot"] = time.perf_counter() - t
        if auto:
            sampler = "imh" if profile is not None or pilot["khat"] <= IMH_PILOT_K_MAX else "nutpie"
        wi["imh_pilot"] = pilot
    if tune is None:
        tune = NUTS_TUNE
        if sampler == "imh":
            pilot = wi.get("imh_pilot") or {}
            tune = imh_burn_in(pilot)
            wi["burn_in"] = {"rule": "Mengersen-Tweedie bound at twice the pilot's largest importance ratio",
                             "max_weight": pilot.get("max_weight"), "tune": int(tune)}
    t2 = time.perf_counter()
    if sampler == "imh":
        post, ss, diag_all, stored = _imh_loadings(sgrid, layout, loading_scale, laplace, draws=draws,
                                                   tune=tune, chains=chains, cores=cores, seed=seed,
                                                   progress=progress, info=wi, profile=profile, pilot=drawn)
        stages["imh"] = time.perf_counter() - t2
        if auto:  # the pilot's 200 proposals can pass where IMH's chains then fail: NUTS instead
            if diag_all is None:
                diag_all = _structure_diagnostics(post, ss, _structure_draws(post, K, layout)[0])
            if not diag_all["converged"]:
                wi["imh_fallback"] = {**{k: diag_all[k] for k in ("max_rhat", "min_ess_bulk", "min_ess_tail",
                                                                  "pareto_khat") if k in diag_all},
                                      "imh": wi.pop("imh", None), "seconds": stages.pop("imh")}
                sampler, tune, diag_all, stored = "nutpie", NUTS_TUNE if tune_given is None else tune_given, None, None
                wi.pop("run_length", None)
                wi.pop("burn_in", None)
    if sampler != "imh":
        t2 = time.perf_counter()
        if draws is None and sampler != "nutpie":
            draws = NUTS_DRAWS
            wi["run_length"] = {"rule": f"{NUTS_DRAWS} draws per chain, the NUTS default", "draws": NUTS_DRAWS}
        post, ss = _sample_loadings(sgrid, layout, loading_scale, V2, coords, r, sampler=sampler,
                                    draws=draws, tune=tune, chains=chains, cores=cores, seed=seed,
                                    target_accept=target_accept, progress=progress, nuts_kwargs=nuts_kwargs,
                                    whiten=whiten, stages=stages, whitening_info=wi, laplace=laplace)
        stages["nuts"] = time.perf_counter() - t2
    return post, ss, sampler, tune, diag_all, wi, stored


def _thinned(post, ss, lam: np.ndarray, psi: np.ndarray, thin: int, diag_all: dict | None, wi: dict,
             stored: StoredNodes | None) -> tuple:
    """Every ``thin``-th draw of the structure kept (:func:`~mtlirt.config.thinned_positions`), and of
    their node totals, the diagnostics of all draws recorded in ``wi`` first."""
    if thin > 1 or diag_all is not None:
        wi["structure_diagnostics_all_draws"] = diag_all or _structure_diagnostics(post, ss, lam)
    if thin > 1:
        keep = thinned_positions(post.sizes["draw"], thin)
        n_keep = len(keep)
        post = post.isel(draw=keep).assign_coords(draw=np.arange(n_keep))
        ss = ss.isel(draw=keep).assign_coords(draw=np.arange(n_keep))
        lam, psi = lam[:, keep], psi[:, keep]
        stored = None if stored is None else stored.thinned(keep)
    return post, ss, lam, psi, stored


def _with_llm_side(post, eta: np.ndarray, theta: np.ndarray, coords: dict, r: int):
    """The posterior with the drawn overall traits and domain scores, and their labels."""
    import xarray as xr

    # the traits' mean and variance over the LLMs, the variables of the sampled route's population model
    # (mtlirt.bayes.model.population_eta): the derived quantities then read both routes' draws alike
    post = post.assign(eta_raw=xr.Variable(("chain", "draw", "llm", "factor"), eta),
                       eta_mean=xr.Variable(("chain", "draw", "factor"), eta.mean(axis=2, dtype=np.float64)),
                       eta_var=xr.Variable(("chain", "draw", "factor"), eta.var(axis=2, dtype=np.float64)),
                       theta_raw=xr.Variable(("chain", "draw", "llm", "domain"), theta))
    post = post.assign_coords(llm=list(coords["llm"]), domain=list(coords["domain"]),
                              factor=list(coords.get("factor", range(r))))
    return post


def _fewer_outer_nodes(grid: CollapsedGrid, sgrid: CollapsedGrid, V2: np.ndarray) -> dict | None:
    """Rank 2: whether ``OUTER_FEWER`` Gauss-Hermite nodes per axis integrate the structure's density at
    its mode ``V2`` as the grid's own do, within ``OUTER_FEWER_TOL`` nats over every LLM (the LLMs'
    posteriors of their overall traits close enough to Gaussian): a record, ``used`` where they do (the
    density and the overall traits' draws then use them); None where the grid has other than the rank's
    ``N_OUTER`` (few domains, or nodes asked for)."""
    r = grid.rank
    if r != 2 or grid.rule != "hermite" or grid.n_axis != N_OUTER[r]:
        return None
    t0 = time.perf_counter()
    lam2, psi2 = structure_from_v(V2)
    own = float(llm_logliks(sgrid, lam2, psi2).sum())
    few = float(llm_logliks(with_outer(sgrid, OUTER_FEWER, rule="hermite"), lam2, psi2).sum())
    used = abs(few - own) <= OUTER_FEWER_TOL
    return {"n_outer": OUTER_FEWER if used else int(grid.n_axis), "used": bool(used),
            "difference_at_mode": round(few - own, 6), "tolerance": OUTER_FEWER_TOL,
            "seconds": time.perf_counter() - t0}


def _with_more_outer_nodes(grid: CollapsedGrid, sub: tuple, laplace: tuple, layout, go: dict,
                           seed: int) -> tuple:
    """``(grid, sub, record or None)``: the grid, and ``sub`` (the grid and tables the density sums over),
    on the few-domain grid's ``N_OUTER_FEW`` Gauss-Hermite nodes per axis where their own ``N_OUTER``
    integrate the structure's density differently from them, by amounts that spread over the Laplace
    approximation's centre and ``OUTER_MORE_DRAWS`` of its draws by more than ``OUTER_MORE_TOL`` nats
    (what would move the posterior; ``go`` then asks every later grid for as many). None where the grid
    has other nodes (few domains, fewer nodes found enough, nodes asked for)."""
    r = grid.rank
    if "n_outer" in go or grid.rule != "hermite" or grid.n_axis != N_OUTER[r]:
        return grid, sub, None
    t0 = time.perf_counter()
    sgrid = sub[0]
    xc, T, _ = laplace
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0x0E7E5]))
    xs = np.vstack([xc, xc + rng.standard_normal((OUTER_MORE_DRAWS, len(xc))) @ T.T])
    more = with_outer(sgrid, N_OUTER_FEW[r], rule="hermite")
    diff = []
    for x in xs:
        lam, psi = structure_from_v(_v_of(*structure_of_x(x, len(layout[0])), grid.shape[1], layout))
        diff.append(float(llm_logliks(more, lam, psi).sum() - llm_logliks(sgrid, lam, psi).sum()))
    used = float(np.ptp(diff)) > OUTER_MORE_TOL
    record = {"n_outer": N_OUTER_FEW[r] if used else int(grid.n_axis), "used": used,
              "differences": [round(d, 4) for d in diff], "tolerance": OUTER_MORE_TOL,
              "seconds": time.perf_counter() - t0}
    if not used:
        return grid, sub, record
    go["n_outer"] = N_OUTER_FEW[r]
    # the structure's part on more nodes is already built: the tables do not depend on the outer nodes
    return (more if sgrid is grid else with_outer(grid, N_OUTER_FEW[r], rule="hermite")), (more, sub[1]), record


def _with_fewer_outer_nodes(grid: CollapsedGrid, sgrid: CollapsedGrid, V2: np.ndarray, go: dict) -> tuple:
    """``(grid, record or None)``: the grid on ``OUTER_FEWER`` nodes per axis where
    :func:`_fewer_outer_nodes` finds them enough (``go`` then asks every later grid for as many)."""
    fewer = _fewer_outer_nodes(grid, sgrid, V2) if "n_outer" not in go else None
    if fewer is None or not fewer["used"]:
        return grid, fewer
    go["n_outer"] = fewer["n_outer"]
    return with_outer(grid, fewer["n_outer"], rule="hermite"), fewer


def _structure_mode(grid: CollapsedGrid, tables, V0: np.ndarray, layout, loading_scale: float, go: dict,
                    part) -> tuple:
    """The structure's posterior mode from ``V0``: found on ``grid``, the grid placed again there from the
    posterior moments, the mode found again, and both again until the grid resolves it
    (:func:`_grid_resolving_mode`); ``part(grid)`` is the grid of the LLMs the density sums over.
    Returns ``(grid, part(grid), V, first search, second search with its regrids)``."""
    V1, mode1 = find_mode(part(grid)[0], V0, layout, loading_scale)
    lam1, psi1 = structure_from_v(V1)
    grid = regrid(grid, tables, lam1, psi1, **go)
    sub = part(grid)
    V2, mode2 = find_mode(sub[0], V1, layout, loading_scale)
    grid, sub, V2, mode2["regrids"] = _grid_resolving_mode(grid, sub, tables, V2, layout, loading_scale, go, part)
    return grid, sub, V2, mode1, mode2


def _grid_resolving_mode(grid: CollapsedGrid, sub: tuple, tables, V: np.ndarray, layout, loading_scale: float,
                         go: dict, part) -> tuple:
    """The grid placed again at the mode ``V``, and the mode found again on it, until the grid resolves the
    mode's residual sds (:meth:`~mtlirt.bayes.collapsed_kernel.CollapsedGrid.resolvable_psi`; at most
    ``MODE_REGRIDS`` times). The mode search follows the kernel, which overstates the density below them:
    on a grid placed where the residual sds were larger, it can end where the structure's density is
    ``-inf``, and the Laplace approximation there fails (domains of a few items with loadings near 1).
    ``part(grid)`` is the grid and tables of the LLMs the density sums over (``sub``: ``grid``'s). Returns
    ``(grid, part(grid), V, record)``, the record of each pass (the smallest ratio of a residual sd to what
    the grid resolved, the mode search's summary)."""
    record = []
    for _ in range(MODE_REGRIDS):
        lam, psi = structure_from_v(V)
        ratio = float(np.min(psi / sub[0].resolvable_psi()))
        if ratio >= 1.0:
            break
        grid = regrid(grid, tables, lam, psi, **go)
        sub = part(grid)
        V, found = find_mode(sub[0], V, layout, loading_scale)
        record.append({"psi_over_resolvable": round(ratio, 4), **found})
    return grid, sub, V, record


def _spaced_for_reach(grid: CollapsedGrid, tables, laplace: tuple, V2: np.ndarray, layout, go: dict) -> tuple:
    """The grid with its inner nodes spaced for the smallest residual sds within ``PSI_REACH``
    posterior sds of the mode (the Laplace approximation ``laplace``), where its own are too far
    apart, summed on every second of them where that resolves the residual sd and keeps as many as
    the grid at the mode had (:meth:`~mtlirt.bayes.collapsed_kernel.CollapsedGrid.with_half_nodes`):
    ``(grid, record or None)``."""
    xc, T, _ = laplace
    psi_low = psi_reach(xc, np.sqrt((T**2).sum(1)), V2.shape[0], layout)
    if not np.any(grid.domain_step() > psi_low):
        return grid, None
    t0 = time.perf_counter()
    lam2, psi2 = structure_from_v(V2)
    q0 = int(grid.logw.shape[1])
    grid = regrid(grid, tables, lam2, psi2, psi_low=psi_low, **go).with_half_nodes(q0)
    half = grid.half_from
    return grid, {"inner_nodes_at_mode": q0, "inner_nodes": int(grid.logw.shape[1]),
                  "smallest_psi": round(float(psi_low.min()), 4),
                  "every_second_node_from_psi": [round(float(half.min()), 4), round(float(half.max()), 4)]
                  if np.isfinite(half).all() else None, "seconds": time.perf_counter() - t0}


def _mode_on_spaced(sgrid: CollapsedGrid, V: np.ndarray, layout, loading_scale: float, laplace: tuple,
                    spacing: dict, cores: int) -> tuple:
    """The mode searched again on the grid spaced for the Laplace approximation's reach (``sgrid``, the
    structure's part), from the mode ``V`` found on the grid before: the spacing resolves residual sds the
    earlier nodes did not, and the density there can differ by nats (domains of a few items whose
    loadings near 1: a mode off by tens of nats, whose Laplace approximation, and axis profiles, then
    missed the posterior). Where the mode moved by more than ``MODE_MOVED_SDS`` of the approximation's
    sds in some coordinate, the approximation is taken again there. Returns ``(V, laplace)`` and records
    the move and its seconds in ``spacing``."""
    t0 = time.perf_counter()
    V_new, found = find_mode(sgrid, V, layout, loading_scale)
    x_new = _x_of(V_new, layout)
    moved = float(np.max(np.abs(x_new - _x_of(V, layout)) / np.sqrt((laplace[1] ** 2).sum(1))))
    if moved > MODE_MOVED_SDS:
        V, laplace = V_new, _laplace(sgrid, layout, loading_scale, x_new, cores=cores)
    spacing["mode_again"] = {"moved_sds": round(moved, 4), "laplace_again": moved > MODE_MOVED_SDS,
                             "iterations": found["iterations"]}
    spacing["seconds"] += time.perf_counter() - t0
    return V, laplace


def _laplace_and_its_grid(grid: CollapsedGrid, sub: tuple, tables, V: np.ndarray, layout, loading_scale: float,
                          go: dict, part, stages: dict, cores: int, seed: int) -> tuple:
    """The Laplace approximation at the mode ``V`` and the grid the loadings are then sampled on: spaced
    for the approximation's reach (:func:`_spaced_for_reach`; the mode searched again there,
    :func:`_mode_on_spaced`), on more outer nodes where they integrate differently
    (:func:`_with_more_outer_nodes`). ``sub = part(grid)``: the grid and tables the density sums over.
    Returns ``(grid, part(grid), V, laplace, spacing record, outer nodes' record)``."""
    laplace = _laplace(sub[0], layout, loading_scale, _x_of(V, layout), cores=cores)
    stages["laplace"] = laplace[2]["seconds"]
    grid, spacing = _spaced_for_reach(grid, tables, laplace, V, layout, go)
    if spacing is not None:
        sub = part(grid)
        V, laplace = _mode_on_spaced(sub[0], V, layout, loading_scale, laplace, spacing, cores)
        stages["inner_spacing"] = spacing["seconds"]
    grid, sub, more = _with_more_outer_nodes(grid, sub, laplace, layout, go, seed)
    return grid, sub, V, laplace, spacing, more


def sample_structure(tables, spec, anchors: list[int], initvals: dict, coords: dict, *,
                     draws: int | None = None,
                     tune: int | None = None, chains: int = 4, cores: int = 1, seed: int = 0,
                     target_accept: float | None = None, progress: bool = False, nuts_kwargs: dict | None = None,
                     check: bool = True, grid_options: dict | None = None,
                     sampler: str = "auto", whiten: bool = True, thin: int | None = 1) -> CollapsedFit:
    """The fixed-items factor model with the LLM side integrated out: the
    structure's posterior mode, the grid placed there, the loadings sampled
    (IMH or NUTS, see ``sampler``), then exact draws of every LLM's overall
    trait and domain scores.

    Parameters
    ----------
    tables : LikelihoodTables
    spec : ModelSpec
        A factor spec of rank 1 or 2.
    anchors : list of int
    initvals : dict
        ``eta_raw`` (N, r), ``loading_diag`` (r,), ``loading_free`` (start
        point, e.g. from the MTL fit).
    coords : dict
        The model's coordinates (``llm``, ``domain``, ``factor`` ...).
    draws, tune, chains, cores, seed, target_accept, progress, nuts_kwargs
        As for :func:`mtlirt.bayes.fit_bayes` (nutpie).
    check : bool
        Run :func:`~mtlirt.bayes.collapsed_grid.quadrature_check` at posterior draws.
    grid_options : dict, optional
        ``n_inner``, ``inner_half_width``, ``n_outer``, ``outer_half_width``.
    sampler : {"auto", "imh", "nutpie", "numpyro"}
        How the structure is sampled: ``"imh"``, independence
        Metropolis-Hastings from the Laplace approximation
        (:func:`~mtlirt.bayes.imh._imh_loadings`; ``tune`` is then the burn-in each chain
        discards); NUTS by nutpie; or NUTS by numpyro on the JAX version of
        the likelihood (:mod:`mtlirt.bayes._jax`; optional ``jax`` extra).
        ``"auto"``: IMH where a pilot of ``IMH_PILOT`` proposals finds the
        Laplace approximation good enough (Pareto k-hat of their importance
        ratios at most ``IMH_PILOT_K_MAX``: large designs, whose posterior
        of the structure is close to Gaussian) or its axis profiles do
        (:func:`_pilots`: skewed posteriors, tiny domains), else nutpie; and nutpie
        too where IMH's chains then fail the convergence check (R-hat,
        ESS, k-hat of all proposals: ``info["imh_fallback"]``; a pilot can
        pass where IMH then fails, on small or real leaderboards). ``tune``
        defaults to the burn-in the pilot's importance ratios call for
        (:func:`~mtlirt.bayes.imh.imh_burn_in`) for IMH and ``NUTS_TUNE`` (500) for NUTS.
    whiten : bool
        nutpie samples the loadings whitened by the Laplace approximation
        at the mode (:func:`~mtlirt.bayes.collapsed_structure.laplace_whitening`).
    thin : int or float
        Keep every ``thin``-th of the ``draws`` structure draws per chain (a number >= 1:
        :func:`~mtlirt.config.thinned_positions`)
        and draw the LLM side for those only (the LLM-side draws are most of
        the cost at leaderboard scale, and an IMH chain's draws are nearly
        independent); the convergence diagnostics of all ``draws`` are in
        ``info["structure_diagnostics_all_draws"]``.

    Returns
    -------
    CollapsedFit
    """

    r = spec.rank
    if r not in (1, 2):
        raise ValueError("the collapsed route supports rank 1 and 2")
    N, K = tables.s.shape
    layout = loading_layout(K, r, anchors)
    stages = {}
    t0 = time.perf_counter()
    eta0, lam0, psi0 = factor_parts(np.asarray(initvals["eta_raw"], float), initvals.get("loading_free"),
                                    np.asarray(initvals["loading_diag"], float), K, anchors)
    go = dict(grid_options or {})
    quad = quadrature_nodes(tables, eta0 @ lam0.T, psi0)
    grid = build_grid(tables, lam0, psi0, quad=quad, **go)
    del quad
    V0 = _v_of(initvals.get("loading_free"), np.asarray(initvals["loading_diag"], float), K, layout)
    stages["grid"] = time.perf_counter() - t0
    t1 = time.perf_counter()
    # the structure's density over the LLMs answered in two domains or more
    # (the others' likelihood does not depend on it); the draws use them all
    informative = informative_llms(tables)
    if len(informative) in (0, N):
        informative = None

    def structure_part(g):
        """The grid and tables of the LLMs the structure's density sums over."""
        return (g, tables) if informative is None else llm_subset(g, tables, informative)

    grid, (sgrid, stables), V2, mode1, mode2 = _structure_mode(grid, tables, V0, layout, spec.priors.loading_scale,
                                                               go, structure_part)
    stages["mode"] = time.perf_counter() - t1
    grid, fewer = _with_fewer_outer_nodes(grid, sgrid, V2, go)
    if fewer is not None and fewer["used"]:
        sgrid, stables = structure_part(grid)
    laplace, spacing, more = None, None, None
    if sampler in ("auto", "imh") or (sampler == "nutpie" and whiten):
        grid, (sgrid, stables), V2, laplace, spacing, more = _laplace_and_its_grid(
            grid, (sgrid, stables), tables, V2, layout, spec.priors.loading_scale, go, structure_part, stages, cores,
            seed)
    post, ss, sampler, tune, diag_all, wi, stored = _sample_loadings_by(
        sampler, sgrid, layout, spec.priors.loading_scale, V2, coords, r, draws=draws, tune=tune, chains=chains,
        cores=cores, seed=seed, target_accept=target_accept, progress=progress, nuts_kwargs=nuts_kwargs,
        whiten=whiten, stages=stages, laplace=laplace)
    wi["inner_spacing"] = spacing
    t3 = time.perf_counter()
    lam, psi = _structure_draws(post, K, layout)
    C, D = lam.shape[:2]
    if thin is None:
        diag_all = diag_all or _structure_diagnostics(post, ss, lam)
        thin = choose_thin(C, D)
        wi["thin_rule"] = {"rule": f"{KEEP_DRAWS} of the structure draws kept, evenly spaced",
                           "structure_draws": int(C * D), "min_ess_bulk": diag_all["min_ess_bulk"], "thin": thin}
    post, ss, lam, psi, stored = _thinned(post, ss, lam, psi, thin, diag_all, wi, stored)
    if stored is not None:
        stored.llms = informative
    eta, theta = draw_llm_side(grid, lam, psi, seed=seed, cores=cores, stored=stored)
    post = _with_llm_side(post, eta, theta, coords, r)
    stages["llm_side_draws"] = time.perf_counter() - t3
    info = {"mode": mode1, "mode_refit": mode2, "n_outer_nodes": int(grid.offsets.shape[0]), "fewer_outer_nodes": fewer,
            "more_outer_nodes": more,
            "sampler": sampler, "tune": int(tune), "draws": int(D), "thin": thin, **wi,
            "n_inner_nodes": int(grid.logw.shape[1]), "stage_seconds": stages,
            "n_llms_structure": N if informative is None else len(informative),
            "overall_spread": overall_spread(eta, informative)}
    if check:
        C, D = psi.shape[:2]
        info["quadrature_check"] = quadrature_check(sgrid, stables, lam.reshape(C * D, K, r),
                                                    psi.reshape(C * D, K), cores=cores)
        stages["quadrature_check"] = info["quadrature_check"]["seconds"]
    return CollapsedFit(posterior=post, sample_stats=ss, grid=grid, info=info)
