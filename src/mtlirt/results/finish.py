"""The one post-processing stage of every frequentist point fit (:func:`_finish`): what it reports (cells
without responses predicted, the population scale), its record, its bootstrap (for MTL and STL the error
bootstrap of :mod:`mtlirt.estimators.error_world`) and the error-corrected cross-domain correlations, as an
:class:`~mtlirt.results.estimate.Estimate`."""

from __future__ import annotations

import time
import warnings
from functools import partial

import numpy as np

from ..data.responses import Responses
from ..estimators.bootstrap import run_bootstrap
from ..estimators.correlation import corr_draws, error_corrected_corr
from ..estimators.error_world import _error_draws, _sine_centres, error_world
from ..estimators.point_methods import _POINT, _cell_counts
from ..estimators.pointfit import PointFit
from .estimate import Estimate


class ConvergenceWarning(UserWarning):
    """A fit did not meet its convergence criteria; its numbers are not to be trusted."""


def _finish(responses: Responses, res: PointFit, *, method: str, variant: str, settings: dict, bootstrap: int,
            seed: int, n_jobs: int | None, few: np.ndarray, timings: dict) -> Estimate:
    """The one post-processing stage of every point fit: its reported arrays (:func:`_reported`: cells
    without responses predicted, the population scale), its record (settings, the estimator's choices,
    convergence, seconds), the bootstrap (for MTL and STL the error bootstrap of :func:`error_world`),
    the error-corrected cross-domain correlations, and the :class:`~mtlirt.results.estimate.Estimate`."""
    n_resp = _cell_counts(responses)
    empty = n_resp == 0
    arr = _reported(res, method, variant, empty, responses.item_domain, few)
    info = {"settings": {"method": method, **settings, "bootstrap": bootstrap}}
    for name, v in {"rank": res.rank, **res.record, "C": res.C, "scores": res.scores}.items():
        if v is not None:  # the estimator's choices: rank, tuning, structure, ...
            info[name] = v.tolist() if isinstance(v, np.ndarray) else v
    if res.floors is not None:  # guessing="auto": which domains kept a floor, and why
        info["floors"] = {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in res.floors.items()}
    if arr["pop"] is not None:
        info["population_scale"] = arr["pop"]
    info["diagnostics"] = {"converged": bool(res.converged), "iterations": res.n_iter}
    if res.convergence is not None:  # MTL: each calibration it ran
        info["diagnostics"]["calibrations"] = dict(res.convergence)
    if not res.converged:
        warnings.warn(f"the {method} fit's item calibration (EM) did not converge within "
                      f"{res.n_iter} sweeps: its numbers are not to be trusted; "
                      "look for degenerate items and LLMs (mtlirt validate) or fit --item-model 1pl",
                      ConvergenceWarning, stacklevel=3)

    boot = None
    if bootstrap:
        t1 = time.perf_counter()
        boot = _bootstrap(responses, res, arr, empty, info, method=method, variant=variant, settings=settings,
                          bootstrap=bootstrap, seed=seed, n_jobs=n_jobs, few=few)
        timings["bootstrap"] = time.perf_counter() - t1
    info["seconds"] = {**{f"fit.{k}": v for k, v in res.seconds.items()}, **timings}

    # pairs over the LLMs with responses in both domains, reliabilities over those with responses
    corr, rel = error_corrected_corr(arr["corr_basis"], arr["basis_se"], ~empty)
    info["reliability"] = rel.tolist()
    if boot is not None:
        info["intervals"] = _interval_label(method, variant)
        corr, boot["domain_corr"] = corr_draws(arr["corr_basis"], boot.pop("corr_basis"), rel, ~empty)
        _centre_few(boot, arr["theta"], few)
        _record_reach(boot, arr, info)
    extra = {}  # the accuracy baseline's proportions correct; the centre (the checks' world="estimate" reads it)
    if method == "accuracy":
        extra["accuracy"] = (("llm", "domain"), res.extra["accuracy"])
    if arr.get("centre") is not None:
        extra["centre"] = (("llm", "domain"), arr["centre"])
    return Estimate.from_point(
        method=method,
        theta=arr["theta"],
        overall=arr.get("overall"),
        eta=arr.get("eta"),
        loadings=arr.get("loadings"),
        llms=responses.llms,
        domains=responses.domains,
        items=responses.items,
        item_domain=responses.item_domain,
        discrimination=arr["a"] if arr["a"] is not None else np.ones(responses.n_items),
        intercept=arr["d"] if arr["d"] is not None else np.zeros(responses.n_items),
        guessing=arr["c"],
        domain_corr=corr,
        extra=extra,
        info=info,
        bootstrap=boot,
        n_responses=n_resp,
    )

def _reported(res: PointFit, method: str, variant: str, empty: np.ndarray, item_domain: np.ndarray,
              few: np.ndarray | None = None) -> dict:
    """What a point fit reports, read by the Estimate and by the bootstrap (whose replicates go through it too).

    ``theta``; the items ``a, d, c`` (None without items); ``overall`` (``N``) and, for shared traits,
    ``eta`` (``N x r``) and ``loadings``; ``centre``; the cells without responses predicted and each
    domain put on the reported scale (:func:`_predict_cells`); ``pop``, the population scale
    (``{"loc", "scale"}`` with ``population = theta * scale + loc``, the fit's own map composed with
    :func:`_predict_cells`' ``(theta - m) / sd``; None where the fit has none); and the basis of the
    cross-domain correlations, ``corr_basis`` and ``basis_se``: single-domain scores (MTL's shrinkage
    would inflate them) and their standard errors (None: reliability 1, the accuracy baseline's plain
    correlations; :mod:`mtlirt.estimators.correlation`)."""
    arr = {"theta": np.asarray(res.theta, dtype=np.float64)}
    for name, v in (("a", res.a), ("d", res.d), ("c", res.c)):
        arr[name] = None if v is None else np.asarray(v, dtype=np.float64)
    if res.overall is not None:
        overall = np.asarray(res.overall, dtype=np.float64)
        if overall.ndim == 2:
            arr["eta"] = overall
            overall = overall[:, 0]
        arr["overall"] = overall
    if res.loadings is not None:
        arr["loadings"] = np.asarray(res.loadings, dtype=np.float64).reshape(len(arr["theta"][0]), -1)
    if res.centre is not None:
        arr["centre"] = np.asarray(res.centre, dtype=np.float64)
    if res.scores == "posterior":  # every cell a posterior mean already, on the items' scale
        arr["posterior_scores"] = True
    fmap = None
    if res.theta_loc is not None and res.theta_scale is not None:
        fmap = np.asarray(res.theta_loc, dtype=np.float64), np.asarray(res.theta_scale, dtype=np.float64)
    arr = _predict_cells(arr, method, empty, item_domain, variant, few=few, pop=fmap)
    arr["pop"] = None
    if fmap is not None:
        loc, scale = fmap
        if "rescale" in arr:
            m, sd = arr["rescale"]
            loc, scale = loc + scale * m, scale * sd
        arr["pop"] = {"loc": loc.tolist(), "scale": scale.tolist()}
    basis = res if res.stl is None else res.stl
    arr["corr_basis"] = np.nan_to_num(np.asarray(basis.theta, dtype=np.float64))
    arr["basis_se"] = None if method == "accuracy" else basis.theta_se
    return arr

def _predict_cells(arr: dict, method: str, empty: np.ndarray, item_domain: np.ndarray,
                   variant: str = "default", few: np.ndarray | None = None, pop: tuple | None = None) -> dict:
    """Scores of cells without responses, and domain scales from the LLMs with responses.

    MTL: an empty cell gets its centre (the model's prediction from the
    LLM's other domains); STL: the population mean 0. Each domain is
    re-centred over the LLMs that have responses in it and given, over them,
    the fit's own spread of the domain (the spread of posterior means, below
    1: docs/model.md "The estimand"; STL's by
    :func:`~mtlirt.estimators.baselines.posterior_mean_scale`).

    A domain with empty cells answered by fewer than
    :data:`~mtlirt.data.validate.MIN_LLMS` LLMs (``few``) is not re-scaled: the
    spread of its few LLMs' estimates is mostly noise (none at all for one
    LLM, or for LLMs that gave the same answers), and dividing by it
    stretched its predicted cells without bound. It keeps the fit's population scale
    (``pop = (loc, scale)``, ``internal = theta * scale + loc``: the item
    calibration's ``N(0, 1)``), re-centred over the LLMs with responses
    (over none: not at all). The items follow, so ``a theta + d`` is
    unchanged; ``arr["rescale"]`` records ``(m, sd)``, the new scores being
    ``(theta - m) / sd``. Other methods, and MTL's paper variants (their
    ``theta_t`` as the paper's estimator gives them: centred, norm ``sqrt(N)``
    over all LLMs), are left alone.
    """
    if method not in ("mtl", "stl") or variant != "default" or not empty.any() or arr.get("posterior_scores"):
        return arr
    arr = dict(arr)
    theta = arr["theta"].copy()
    if method == "mtl" and "centre" in arr:
        theta[empty] = arr["centre"][empty]
    seen = ~empty
    cnt = np.maximum(seen.sum(axis=0), 1)
    m = np.where(seen, theta, 0.0).sum(axis=0) / cnt
    sd = np.sqrt(np.where(seen, (theta - m) ** 2, 0.0).sum(axis=0) / cnt)
    sd = np.where(sd > 1e-12, sd, 1.0)
    own = arr["theta"].std(axis=0)  # keep the fit's own spread of the domain, now over the LLMs with responses
    sd = sd / np.where(own > 1e-12, own, 1.0)
    if few is not None and pop is not None:
        loc, scale = (np.asarray(v, dtype=np.float64) for v in pop)
        keep = np.asarray(few, dtype=bool) & empty.any(axis=0)
        m = np.where(keep & ~seen.any(axis=0), -loc / scale, m)  # no LLM with responses: the population's mean
        sd = np.where(keep, 1.0 / scale, sd)
    theta = (theta - m) / sd
    if method == "stl":
        theta[empty] = 0.0
    arr["theta"] = theta
    arr["rescale"] = (m, sd)
    if "centre" in arr:
        arr["centre"] = (arr["centre"] - m) / sd
    if arr.get("a") is not None:
        arr["d"] = arr["d"] + arr["a"] * m[item_domain]
        arr["a"] = arr["a"] * sd[item_domain]
    return arr

def _replicate(correct, observed, *, method, responses: Responses, settings, few=None):
    """Refit one bootstrap replicate, the fitted ``responses`` with the answers ``correct`` (mask ``observed``);
    module-level so worker processes can run it."""
    rep = responses.with_answers(correct, observed)
    res = _POINT[method](rep, **settings)
    arr = _reported(res, method, settings.get("variant", "default"), _cell_counts(rep) == 0, rep.item_domain, few)
    keep = {"theta": arr["theta"], "corr_basis": arr["corr_basis"]}
    if arr.get("overall") is not None:
        keep["overall"] = arr["overall"]
    if method != "accuracy":
        keep.update(discrimination=arr["a"], intercept=arr["d"])
    return keep

def _bootstrap(responses, res, arr: dict, empty: np.ndarray, info: dict, *, method: str,
               variant: str, settings: dict, bootstrap: int, seed: int, n_jobs: int | None,
               few: np.ndarray | None = None) -> dict:
    """The bootstrap's replicates of a point fit (``estimators.bootstrap.run_bootstrap``): MTL's (its paper
    variants' too) and STL's error bootstrap draw a new truth from the fit's world, the others are parametric
    or resample items.  MTL's world records its deviations' spread in ``info["deviation_spread"]``."""
    # replicates keep the tuned settings fixed: the selected rank and shrinkage
    fixed = dict(settings)
    if method == "mtl":
        fixed.update(rank=res.rank, C=None if res.scores == "posterior" else res.C, gamma=None)
    kind = {"accuracy": "items", "mtl": "world", "stl": "world"}.get(method, "parametric")
    point = arr if kind == "parametric" else None
    if kind == "world":
        corr = error_corrected_corr(arr["corr_basis"], arr["basis_se"], ~empty)[0] if method == "stl" else None
        point = error_world(responses, arr, method=method, variant=variant, pop=arr["pop"], empty=empty, corr=corr)
        if method == "mtl":
            info["deviation_spread"] = point["psi"].tolist()
    boot = run_bootstrap(
        partial(_replicate, method=method, responses=responses, settings=fixed, few=few),
        n=bootstrap,
        seed=seed,
        domain_slices=responses.domain_slices,
        observed=responses.mask,
        point=point,
        correct=responses.correct if kind == "items" else None,
        kind=kind,
        n_jobs=n_jobs,
        desc=f"{method} bootstrap",
    )
    if method == "mtl" and variant != "default":  # the paper's overall truth: the sine centre of the domain truths
        boot["world_overall"] = _sine_centres(boot["world_theta"], boot["world_overall"])
    if kind == "world":  # STL's cells without responses: 0 minus an error of a N(0, 1) truth
        _error_draws(boot, arr, empty, None if few is None else few & empty.any(axis=0))
    return boot

def _interval_label(method: str, variant: str) -> str:
    """What the bootstrap intervals of ``method`` are, for ``fit.json``'s ``intervals``."""
    if method == "mtl" and variant != "default":
        return ("estimate minus quantiles of the bootstrap error (world: the fit's general trait, each domain "
                "sqrt(1 - psi_k) times it plus deviations of estimated variance psi_k; overall truth the sine "
                "centre of the domain truths)")
    return {"mtl": "estimate minus quantiles of the bootstrap error (world: centre plus deviations)",
            "stl": "estimate minus quantiles of the bootstrap error (world: population N(0, 1))"
            }.get(method, "bootstrap percentile")

def _centre_few(boot: dict, theta: np.ndarray, few: np.ndarray | None) -> None:
    """Centre the bootstrap draws of the scores of domains with few LLMs at the estimate (in place).

    An error bootstrap's interval is bias-corrected: the estimate minus the error's quantiles, whose
    median need not be 0 (MTL's shrinkage). That correction is only as good as the bootstrap's world,
    and the world of a domain answered by fewer than :data:`~mtlirt.data.validate.MIN_LLMS` LLMs rests on
    a handful of them (loadings fitted at their bound, items at their priors): its refits then look
    shrunk against it, and the "correction" pushed intervals beyond the estimate. There the draws keep
    their spread but not their offset (their median is the estimate); every other domain keeps its
    bias-corrected interval.
    """
    if few is None or not few.any() or boot.get("theta") is None:
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN cells (the accuracy baseline's unrun cells)
        med = np.nanmedian(boot["theta"][:, :, few], axis=0)
    boot["theta"][:, :, few] += np.where(np.isfinite(med), theta[:, few] - med, 0.0)

def _record_reach(boot: dict, arr: dict, info: dict, interval: float = 0.9) -> None:
    """Count the scores whose bootstrap interval (at the default level) misses the estimate itself.

    MTL's error bootstrap gives the estimate minus the error's quantiles, an interval corrected for
    the shrinkage's bias: for an LLM far from its centre its error is off-centre, and the interval can
    lie wholly beyond the estimate. The tables extend such an interval to reach the estimate
    (:meth:`~mtlirt.results.estimate.Estimate.domain_scores`), which only widens it; the counts go to
    ``info["intervals_extended"]``.
    """
    lo = (1 - interval) / 2
    counts = {}
    for name, what in (("theta", "domain_scores"), ("overall", "overall")):
        if boot.get(name) is None or arr.get(name) is None:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN cells (no responses, accuracy)
            q = np.nanquantile(boot[name], [lo, 1 - lo], axis=0)
        counts[what] = int(np.count_nonzero((arr[name] < q[0]) | (arr[name] > q[1])))
    info["intervals_extended"] = counts
