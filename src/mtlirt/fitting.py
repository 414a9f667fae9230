"""One entry point for every estimator: :func:`fit` returns an :class:`~mtlirt.results.estimate.Estimate`.

Point estimates get intervals from a bootstrap (``bootstrap=B``), the
estimator refit with its tuned settings fixed (:mod:`mtlirt.estimators.bootstrap`).
For ``pooled`` it is parametric (answers redrawn from the fitted model on
the observed cells), with percentile intervals of the replicates; for
``accuracy`` items are resampled within domains.  For ``mtl`` and ``stl``
the intervals are intervals of the estimation error: their scores are
shrunk (posterior-mean-like, docs/model.md "The estimand"), so each
replicate draws a new truth (MTL: shared traits around the fitted ones, the
fit's centre, deviations with each domain's estimated spread; MTL's paper
variants: the paper's model around the fit, its general trait and each
domain's deviations, the overall truth the sine centre; STL: traits from
the population ``N(0, R)``), and the refit's error against that truth
is taken off the point estimate (``/bootstrap`` holds ``estimate -
error``; the interval is the estimate minus the error's quantiles), for
domain scores, overall scores and ranks.

Cells without responses (an LLM that did not run a domain) are *predicted*:
MTL puts them at their centre (the model's prediction from the LLM's other
domains) and its error replicates give them the spread of a deviation
(prior predictive); STL, which knows nothing there, gives the population
mean 0 and its replicates the spread of the population's ``N(0, 1)``.  Each domain is re-centred,
and keeps the fit's spread, over the LLMs with responses only (fewer than ``MIN_LLMS`` of them: the
population scale, only re-centred).  Measured coverage: ``docs/results.md`` ("Intervals").  An interval that misses its
own estimate is extended to reach it (:meth:`~mtlirt.results.estimate.Estimate.domain_scores`).

Degenerate data (docs/data.md, "Degenerate and tiny data"): nothing varying is an error, a constant
domain's responses are set aside (its scores predicted), thin domains are warned about.

Methods
-------
``mtl``       the spectral representation-MTL estimator (docs/model.md), default
``stl``       single-domain IRT, each domain alone (items by MML, traits by MAP)
``pooled``    one unidimensional 2PL over all items
``accuracy``  proportion correct per domain, macro average as overall
``bayes``     the Bayesian twin in PyMC (docs/model.md), see :mod:`mtlirt.bayes`
"""

from __future__ import annotations

import json
import os
import time
import warnings
from functools import partial

import numpy as np
import pandas as pd

from .data import validate
from .data.responses import Responses, as_responses
from .errors import InputError
from .estimators.bootstrap import deviation_spread, overall_spread, run_bootstrap
from .estimators.correlation import corr_draws, error_corrected_corr
from .estimators.pointfit import PointFit
from .progress import stage
from .results.estimate import Estimate

METHODS = ("mtl", "stl", "pooled", "accuracy", "bayes")
#: Variants of ``mtl``: the package's own estimator, and the seed paper's with its baselines
#: (:mod:`mtlirt.estimators.paper`).
MTL_VARIANTS = ("default", "paper", "paper-global", "paper-local")


class ConvergenceWarning(UserWarning):
    """A fit did not meet its convergence criteria; its numbers are not to be trusted."""


def _point_stl(correct, observed, slices, *, model, guessing, **_):
    from .estimators.baselines import posterior_mean_scale
    from .estimators.irt import fit_stl

    res = fit_stl(correct, observed, slices, model=model, guessing=guessing)
    # reported on the estimand's scale (spread of posterior means), not standardised to 1
    return posterior_mean_scale(res, _cell_counts(observed, slices, correct.shape[0]) > 0)


def _point_mtl(correct, observed, slices, *, model, guessing, rank, gamma, seed, C=None, variant="default",
               optimizer=None, cv_seed=None, **_):
    if variant != "default":  # the paper's rank-one 2PL without guessing (check_options)
        from .estimators.paper import fit_paper

        return fit_paper(correct, observed, slices, variant=variant, C=gamma if C is None else C,
                         seed=seed if cv_seed is None else cv_seed, optimizer=optimizer or "fast")
    from .estimators.mtl import fit_mtl

    res = fit_mtl(correct, observed, slices, rank=rank, gamma=gamma, C=C, model=model, guessing=guessing, seed=seed)
    if res.scores == "shrunk" and res.C == 0:  # the single-domain scores: on the estimand's scale as STL's
        from .estimators.baselines import posterior_mean_scale

        res = posterior_mean_scale(res, _cell_counts(observed, slices, correct.shape[0]) > 0)
    return res


def _point_pooled(correct, observed, slices, *, model, guessing, **_):
    from .estimators.baselines import fit_pooled

    return fit_pooled(correct, observed, slices, model=model, guessing=guessing)


def _point_accuracy(correct, observed, slices, **_):
    from .estimators.baselines import fit_accuracy

    return fit_accuracy(correct, observed, slices)


_POINT = {"stl": _point_stl, "mtl": _point_mtl, "pooled": _point_pooled, "accuracy": _point_accuracy}


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


def _cell_counts(observed, slices, n_llms) -> np.ndarray:
    """Observed responses per LLM and domain (``N x K``)."""
    if observed is None:
        return np.tile([s.stop - s.start for s in slices], (n_llms, 1))
    return np.column_stack([observed[:, s].sum(axis=1) for s in slices])


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


def _replicate(correct, observed, *, method, slices, settings, few=None):
    """Refit one bootstrap replicate; module-level so worker processes can run it."""
    res = _POINT[method](correct, observed, slices, **settings)
    empty = _cell_counts(observed, slices, correct.shape[0]) == 0
    item_domain = np.concatenate([np.full(s.stop - s.start, k) for k, s in enumerate(slices)])
    arr = _reported(res, method, settings.get("variant", "default"), empty, item_domain, few)
    keep = {"theta": arr["theta"], "corr_basis": arr["corr_basis"]}
    if arr.get("overall") is not None:
        keep["overall"] = arr["overall"]
    if method != "accuracy":
        keep.update(discrimination=arr["a"], intercept=arr["d"])
    return keep


def fit(
    responses: Responses | pd.DataFrame | str | os.PathLike,
    method: str = "mtl",
    *,
    rank: int | None = None,
    gamma: float | None = None,
    model: str = "2pl",
    guessing: float | str | None = "auto",
    bootstrap: int = 0,
    seed: int = 0,
    n_jobs: int | None = None,
    variant: str | None = None,
    optimizer: str | None = None,
    cv_seed: int | None = None,
    **bayes_options,
) -> Estimate:
    """Fit a model to a leaderboard and return its :class:`Estimate`.

    Parameters
    ----------
    responses
        The data: a :class:`~mtlirt.data.responses.Responses`, a long DataFrame ``llm, item, domain,
        correct`` or the path of such a table (CSV, gzip CSV or Parquet), read and checked by
        :func:`~mtlirt.data.responses.as_responses`.
    method
        One of ``mtl`` (default), ``stl``, ``pooled``, ``accuracy``, ``bayes``.
    rank
        Number of overall traits (MTL); selected from the data when None.
    gamma
        MTL shrinkage constant ``C`` (for ``variant="paper"`` the paper's ``C``);
        tuned on held-out responses when None.
    model
        ``2pl`` or ``1pl`` item model of the frequentist methods.
    guessing
        The guessing floors (lower asymptotes) of the frequentist methods:
        ``"auto"`` (default) one floor per domain where the data call for it
        and none elsewhere (:func:`mtlirt.estimators.calibration.decide_floors`: a
        domain keeps its floor when the floor's log-likelihood gain over the
        2PL passes BIC's penalty), ``"estimate"`` one floor per domain in
        every domain, estimated with the items (weak ``Beta(2, 4)`` prior,
        mode 0.25), ``None`` none (the 2PL), or a fixed ``c`` for every item
        (e.g. 0.25 for four options). The floors are in the fit's items
        (``guessing``). MTL estimates them in its single-domain calibration
        and keeps them for the pooled fit and the tuning; the bootstrap's
        replicates decide and estimate them again. The Bayesian fit takes its
        item model from its spec (``"auto"`` is its default too: the spec).
    bootstrap
        Number of bootstrap replicates for intervals (0: none).
    seed
        Seed of every random step (held-out split, bootstrap, sampler).
    n_jobs
        Worker processes for the bootstrap (default: all cores).
    variant
        For ``method="mtl"`` only: ``default`` (the package's estimator, also
        when None), or the
        seed paper's ``paper`` (its estimator exactly, C tuned by its 5-fold
        cross-validation), ``paper-global`` or ``paper-local`` baselines
        (:mod:`mtlirt.estimators.paper`).
    optimizer
        For the paper variants: ``"adam"``, the paper's projected Adam with
        its early stop (its published output), or ``"fast"`` (default), ours,
        which reaches the exact minimiser of the paper's objective.
    cv_seed
        For ``variant="paper"``: the seed of its cross-validation folds
        (default ``seed``); the paper's own run uses the seed its code was
        given (folds from ``numpy.random.default_rng(cv_seed + 100003)``).
    **bayes_options
        For ``method="bayes"`` only: passed to :func:`mtlirt.bayes.fit_bayes`
        (``spec``, the inference settings of :class:`mtlirt.config.SamplerConfig`:
        ``items``, ``draws``, ``tune``, ``chains``, ``sampler``, ...; ``init``, ...).
        An option left at None is not given.

    Raises
    ------
    InputError
        Bad data, or settings that break a rule (:func:`check_options`), before any work.
    """
    check_options(method, rank=rank, model=model, guessing=guessing, bootstrap=bootstrap, variant=variant,
                  optimizer=optimizer, cv_seed=cv_seed, **bayes_options)  # before the table is read
    variant = variant or "default"
    bayes_options = {k: v for k, v in bayes_options.items() if v is not None}
    responses = as_responses(responses)
    check_settings(bootstrap=bootstrap, rank=rank, n_domains=responses.n_domains)
    table = responses  # the fingerprint is the table's as given, constant domains included
    responses, few = _guard(responses, method)
    if method == "bayes":
        return _record_data(_fit_bayes(responses, seed=seed, **bayes_options), table)
    settings = dict(model=model, guessing=guessing, rank=rank, gamma=gamma, seed=seed)
    if method == "mtl":
        settings["variant"] = variant
    if variant != "default":
        settings.update(optimizer=optimizer or "fast", cv_seed=seed if cv_seed is None else cv_seed)
    timings = {}
    t0 = time.perf_counter()
    stage(f"fitting {method} to {responses.n_llms:,} LLMs x {responses.n_items:,} items")
    res = _POINT[method](responses.correct, responses.mask, responses.domain_slices, **settings)
    timings["fit"] = time.perf_counter() - t0
    est = _finish(responses, res, method=method, variant=variant, settings=settings, bootstrap=bootstrap, seed=seed,
                  n_jobs=n_jobs, few=few, timings=timings)
    return _record_data(est, table)


def _finish(responses: Responses, res: PointFit, *, method: str, variant: str, settings: dict, bootstrap: int,
            seed: int, n_jobs: int | None, few: np.ndarray, timings: dict) -> Estimate:
    """The one post-processing stage of every point fit: its reported arrays (:func:`_reported`: cells
    without responses predicted, the population scale), its record (settings, the estimator's choices,
    convergence, seconds), the bootstrap (for MTL and STL the error bootstrap of :func:`error_world`),
    the error-corrected cross-domain correlations, and the :class:`~mtlirt.results.estimate.Estimate`."""
    n_resp = _cell_counts(responses.mask, responses.domain_slices, responses.n_llms)
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


def data_record(responses: Responses) -> dict:
    """What a fit records of its table (``info["data"]``): the fingerprint and the sizes."""
    return {"fingerprint": responses.fingerprint(), "llms": responses.n_llms, "items": responses.n_items,
            "domains": responses.n_domains, "responses": responses.n_responses}


def _record_data(est: Estimate, responses: Responses) -> Estimate:
    est.update_info(data=data_record(responses))
    return est


def _guard(responses: Responses, method: str) -> tuple[Responses, np.ndarray]:
    """The rules for degenerate and tiny data (docs/data.md "Degenerate and tiny data").

    No response varying within any domain is an :class:`~mtlirt.errors.InputError`. A constant domain
    (every response the same) can tell neither the LLMs apart nor the domain's tie to the others: the
    model-based methods set its responses aside, so every LLM's score there is predicted from its other
    domains (flagged ``predicted``), and the accuracy baseline keeps its proportions; a
    :class:`~mtlirt.data.validate.DataWarning` names it. A thin domain (too few LLMs, or too few
    responses per LLM) gets a warning too. Returns the responses the fit uses and the ``K`` booleans of
    the domains those leave with fewer than :data:`~mtlirt.data.validate.MIN_LLMS` LLMs.
    """
    args = (responses.correct, responses.mask, responses.domain_slices, responses.domains)
    const = validate.constant_domains(*args)
    thin = {d: v for d, v in validate.thin_domains(*args).items() if d not in const}
    if const:
        treat = ("kept with its proportions (the accuracy baseline)" if method == "accuracy" else
                 "kept, its responses set aside: every LLM's score there is predicted from its other domains")
        warnings.warn(f"constant domain{'s' if len(const) > 1 else ''} {validate.describe_constant(const)}: "
                      f"no response varies, so nothing there tells the LLMs apart; {treat}",
                      validate.DataWarning, stacklevel=3)
        if method != "accuracy":
            cols = np.isin(responses.item_domain, responses.domains.get_indexer(list(const)))
            observed = responses.observed & ~cols
            responses = Responses(np.where(observed, responses.correct, 0).astype(np.int8), observed,
                                  responses.llms, responses.items, responses.domains, responses.item_domain)
    if thin:
        warnings.warn(f"thin domain{'s' if len(thin) > 1 else ''} {validate.describe_thin(thin)}: under "
                      f"{validate.MIN_LLMS} LLMs, or under {validate.MIN_RESPONSES} responses per LLM, a "
                      "domain's scores are rough and its intervals cover less", validate.DataWarning, stacklevel=3)
    llms = validate.domain_counts(responses.correct, responses.mask, responses.domain_slices)[2]
    return responses, llms < validate.MIN_LLMS


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


#: The options of the Bayesian fit (:func:`mtlirt.bayes.fit_bayes`) beyond its inference settings, with
#: their command-line names where they have one.
_BAYES_OPTIONS = {"spec": "--model", "init": None, "item_values": None, "progress": None, "cores": None,
                  "keep_raw": None, "nuts_kwargs": None, "trace_dir": None, "warn": None}


def _option(name: str) -> str:
    """An option as a message names it: the API's name and, where it has one, the command line's."""
    from .config import SamplerConfig

    flag = _BAYES_OPTIONS.get(name, "")
    if name in SamplerConfig.__dataclass_fields__:
        flag = "--" + name.replace("_", "-")
    return f"{name} ({flag})" if flag else name


def check_options(method: str = "mtl", *, rank: int | None = None, model: str = "2pl",
                  guessing: float | str | None = "auto", bootstrap: int = 0, variant: str | None = None,
                  optimizer: str | None = None, cv_seed: int | None = None, n_domains: int | None = None,
                  **bayes_options):
    """Every check of :func:`fit`'s settings that needs no data, in one place: :func:`fit` runs it first,
    and the command line runs it before it reads the table, so a notebook and ``mtlirt fit`` refuse the
    same settings with the same :class:`~mtlirt.errors.InputError`, naming the options (the API's names,
    the command line's in brackets).

    The method and its variant (the paper's options to its variants only), the bootstrap and the rank
    (:func:`check_settings`), the options each method takes (``bayes_options`` to ``method="bayes"``
    only, None counting as not given; a name :func:`mtlirt.bayes.fit_bayes` does not take is a
    ``TypeError``), the frequentist methods' guessing floors, and, for ``method="bayes"``, the spec and
    the inference settings (:meth:`mtlirt.config.SamplerConfig.validate`). Returns the validated
    :class:`~mtlirt.config.SamplerConfig` of a Bayesian fit, else None."""
    from .config import SamplerConfig

    if method not in METHODS:
        raise InputError(f"unknown method {method!r}: expected one of {', '.join(METHODS)}")
    if variant is not None:
        if variant not in MTL_VARIANTS:
            raise InputError(f"unknown variant {variant!r}: expected one of {', '.join(MTL_VARIANTS)}")
        if method != "mtl" and variant != "default":
            raise InputError(f"variant (--variant) applies to method 'mtl' only, not {method!r}")
        if variant != "default" and (model != "2pl" or guessing not in (None, "auto") or rank not in (None, 1)):
            raise InputError(f"the {variant} variant is the paper's rank-one 2PL without guessing: it takes no "
                             "rank (--rank), guessing (--guessing) or 1PL model (--item-model)")
    _check_paper_options(variant or "default", optimizer, cv_seed)
    check_settings(bootstrap=bootstrap, rank=rank, n_domains=n_domains)
    sampling = set(SamplerConfig.__dataclass_fields__)
    unknown = sorted(set(bayes_options) - sampling - set(_BAYES_OPTIONS))
    if unknown:
        raise TypeError(f"fit() got unexpected keyword argument{'s' if len(unknown) > 1 else ''} "
                        f"{', '.join(map(repr, unknown))}")
    given = {k: v for k, v in bayes_options.items() if v is not None}
    if method != "bayes":
        if given:
            names = [_option(k) for k in given]
            raise InputError(f"{', '.join(names)} appl{'y' if len(names) > 1 else 'ies'} to method 'bayes' only, "
                             f"not {method!r}")
        _check_guessing(guessing)
        return None
    from .bayes.spec import load_spec

    spec = load_spec(given.get("spec") or "factor-2pl")
    if guessing not in (None, "auto") or model not in ("2pl", spec.point_item_model[0]):
        raise InputError("the Bayesian fit takes its item model from its spec (spec, --model); "
                         "model (--item-model) and guessing (--guessing) are for the frequentist methods")
    return SamplerConfig(**{k: v for k, v in given.items() if k in sampling}).validate(spec)


def check_settings(*, bootstrap: int = 0, rank: int | None = None, n_domains: int | None = None) -> None:
    """The settings every method shares: the bootstrap's replicates and the rank against the domains.

    Part of :func:`check_options` (``n_domains`` None: before the table is read), and checked again by
    :func:`fit` against the table's domains.
    """
    if isinstance(bootstrap, bool) or not isinstance(bootstrap, (int, np.integer)) or bootstrap < 0 or bootstrap == 1:
        raise InputError(f"bootstrap (--bootstrap) must be 0 (none) or at least 2 replicates, got {bootstrap!r}")
    if rank is not None:
        if isinstance(rank, bool) or not isinstance(rank, (int, np.integer)) or rank < 1:
            raise InputError(f"rank (--rank) must be an integer of at least 1, got {rank!r}")
        if n_domains is not None and rank > n_domains:
            raise InputError(f"rank (--rank) {rank} exceeds the number of domains ({n_domains})")


def _check_paper_options(variant: str, optimizer, cv_seed) -> None:
    """``optimizer`` and ``cv_seed`` given to the paper variants only, and valid."""
    if optimizer is not None:
        if variant == "default":
            raise InputError("optimizer (--optimizer) applies to the paper variants of mtl only (variant paper, "
                             "paper-global or paper-local)")
        if optimizer not in ("fast", "adam"):
            raise InputError(f"unknown optimizer {optimizer!r}: expected 'fast' or 'adam'")
    if cv_seed is not None:
        if variant != "paper":
            raise InputError("cv_seed (--cv-seed) applies to variant 'paper' only (its cross-validation folds; "
                             "the others have none)")
        if isinstance(cv_seed, bool) or not isinstance(cv_seed, (int, np.integer)) or cv_seed < 0:
            raise InputError(f"cv_seed must be an integer >= 0, got {cv_seed!r}")


def _check_guessing(guessing) -> None:
    """The frequentist methods' ``guessing``: None, a number in [0, 1), ``"estimate"`` or ``"auto"``."""
    if isinstance(guessing, str):
        if guessing not in ("estimate", "auto"):
            raise InputError(f"guessing must be a number in [0, 1), 'estimate', 'auto' or None, got {guessing!r}")
    elif guessing is not None and not 0 <= guessing < 1:
        raise InputError(f"guessing must be in [0, 1), got {guessing}")


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
        partial(_replicate, method=method, slices=responses.domain_slices, settings=fixed, few=few),
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


def error_world(responses, arr: dict, *, method: str, variant: str = "default", pop: dict | None = None,
                empty: np.ndarray | None = None, corr: np.ndarray | None = None) -> dict:
    """The world of a fit's error bootstrap (``bootstrap.run_bootstrap``, ``kind="world"``), the one copy:
    :func:`fit`'s bootstrap draws its replicates' truths from it, and so does the correlation check's
    ``world="estimate"`` (:func:`mtlirt.evaluate.checks.correlation_check`), from what the estimate records.

    ``arr``: the reported fit (``theta``, ``overall``, ``eta``, ``centre``, ``a``, ``d``, ``c``), ``pop``
    its ``info["population_scale"]``, ``empty`` its cells without responses, ``corr`` (STL) the
    cross-domain correlations. MTL: :func:`_mtl_world`, the fitted model itself (its centre, loadings and
    items; the deviations' spread by moments); its paper variants: :func:`_paper_world`; STL:
    :func:`_stl_world`. ``psi`` holds the deviations' spreads (``info["deviation_spread"]``)."""
    if method == "stl":
        return _stl_world(arr, pop, corr)
    if method != "mtl":
        raise ValueError(f"the {method} fit has no error bootstrap")
    if variant != "default":
        return _paper_world(responses, arr)
    return _mtl_world(responses, arr, pop, empty)


def _mtl_world(responses, arr: dict, pop: dict | None = None, empty: np.ndarray | None = None) -> dict:
    """The error bootstrap's world of MTL: shared traits around the fitted ones, the fit's centre,
    deviations with each domain's estimated spread.

    A domain trait has unit variance on the population scale (``pop``: population ``= theta * scale +
    loc``), ``1 / scale^2`` on the reported one, and a deviation from it cannot have more; a domain
    without any response (``empty``) has no moments, and its deviations get what the centre leaves,
    ``1 / scale^2 - ||W_k||^2``: the prior predictive of a trait the data say nothing about."""
    eta = arr["eta"] if arr.get("eta") is not None else arr["overall"][:, None]
    eta_c = eta - eta.mean(axis=0)  # the centre's slopes on the shared traits (its loadings)
    W = np.linalg.lstsq(eta_c, arr["centre"] - arr["centre"].mean(axis=0), rcond=None)[0].T
    # the centre is fitted to these data: moments with its leverage (bootstrap.deviation_spread)
    psi, cell_info = deviation_spread(responses.correct, responses.mask, responses.domain_slices,
                                      arr["centre"], arr["a"], arr["d"], arr["c"], return_info=True,
                                      loadings=W)
    if pop is not None:
        var = 1.0 / np.asarray(pop["scale"]) ** 2
        psi = np.minimum(psi, var)
        if empty is not None:
            psi = np.where(empty.all(axis=0), np.maximum(var - (W**2).sum(axis=1), 1e-3), psi)
    return dict(centre=arr["centre"], psi=psi, eta=eta, eta_var=overall_spread(cell_info, psi, W),
                loadings=W, a=arr["a"], d=arr["d"], c=arr["c"])


def _interval_label(method: str, variant: str) -> str:
    """What the bootstrap intervals of ``method`` are, for ``fit.json``'s ``intervals``."""
    if method == "mtl" and variant != "default":
        return ("estimate minus quantiles of the bootstrap error (world: the fit's general trait, each domain "
                "sqrt(1 - psi_k) times it plus deviations of estimated variance psi_k; overall truth the sine "
                "centre of the domain truths)")
    return {"mtl": "estimate minus quantiles of the bootstrap error (world: centre plus deviations)",
            "stl": "estimate minus quantiles of the bootstrap error (world: population N(0, 1))"
            }.get(method, "bootstrap percentile")


def _paper_world(responses, arr: dict, n_iter: int = 3) -> dict:
    """The error bootstrap's world of the paper variants.

    The paper's model (METHOD.md §4b) around the fit: ``theta_t = sqrt(1 - psi_t) g* + sqrt(psi_t) z``,
    ``g*`` the fit's general trait ``g`` plus its approximate posterior spread
    (:func:`~mtlirt.estimators.bootstrap.overall_spread`), ``psi_t`` each domain's spread about
    ``sqrt(1 - psi_t) g`` by its posterior mean (:func:`~mtlirt.estimators.deviations.deviation_variance`,
    corrected for the domain's share of the information on ``g`` in the paper's ``1/J_t``-weighted
    objective; iterated with the loading ``sqrt(1 - psi_t)``), the fit's items.  A fused fit has no
    deviations left, so answers redrawn from it cannot show the error of fusing; this world has them."""
    from .estimators.deviations import deviation_variance

    g = arr["overall"]
    eta = ((g - g.mean()) / g.std())[:, None]
    slices = responses.domain_slices
    sizes = np.array([s.stop - s.start for s in slices], dtype=np.float64)
    psi = np.zeros(arr["theta"].shape[1])
    for _ in range(n_iter):
        W = np.sqrt(1.0 - psi)[:, None]
        centre = eta @ W.T
        cell_info = _cell_information(responses, centre, arr["a"], arr["d"])
        share = cell_info.mean(axis=0) / sizes
        psi_new = np.minimum(deviation_variance(responses.correct, responses.mask, slices, centre, arr["a"], arr["d"],
                                                leverage=share / share.sum()), 0.99)
        done = np.abs(psi_new - psi).max() < 1e-4
        psi = psi_new
        if done:
            break
    W = np.sqrt(1.0 - psi)[:, None]
    return dict(centre=eta @ W.T, psi=psi, eta=eta, eta_var=overall_spread(cell_info, psi, W), loadings=W,
                a=arr["a"], d=arr["d"], c=None)


def _cell_information(responses, theta: np.ndarray, a: np.ndarray, d: np.ndarray) -> np.ndarray:
    """Fisher information ``sum_j a_j^2 p (1 - p)`` of each LLM's observed answers in each domain at ``theta``."""
    out = np.empty(theta.shape)
    for k, s in enumerate(responses.domain_slices):
        p = 1.0 / (1.0 + np.exp(-(theta[:, k][:, None] * a[s] + d[s])))
        v = a[s] ** 2 * p * (1.0 - p)
        out[:, k] = (v if responses.mask is None else v * responses.mask[:, s]).sum(axis=1)
    return out


def _sine_centres(world_theta: np.ndarray, world_shared: np.ndarray) -> np.ndarray:
    """Each replicate's sine centre of its true domain traits (B x N), signed like its shared trait."""
    from .estimators.sine_centre import sine_centre

    out = np.empty(world_shared.shape)
    for b, (truth, shared) in enumerate(zip(world_theta, world_shared)):
        t = truth - truth.mean(axis=0)
        c = sine_centre(t.T, start=shared)[0]
        out[b] = c if c @ shared >= 0 else -c
    return out


def _stl_world(arr: dict, pop: dict, corr: np.ndarray) -> dict:
    """The error bootstrap's world of STL.

    New traits from the population, ``N(0, R)`` on the population scale
    (unit variances, ``R`` the estimated cross-domain correlations: STL
    fits each domain alone, so ``R`` changes no domain's error, only the
    correlations' replicates), mapped to the reported scale
    (``population = theta * scale + loc``); the items are the fit's.
    """
    loc, scale = np.asarray(pop["loc"]), np.asarray(pop["scale"])
    N, K = arr["theta"].shape
    w, v = np.linalg.eigh(np.nan_to_num(corr))
    L = v * np.sqrt(np.clip(w, 0.0, None))
    L /= np.maximum(np.linalg.norm(L, axis=1, keepdims=True), 1e-12)  # unit variances
    return dict(centre=np.tile(-loc / scale, (N, 1)), psi=np.zeros(K), eta=np.zeros((N, K)),
                eta_var=np.ones((N, K)), loadings=L / scale[:, None], a=arr["a"], d=arr["d"], c=arr["c"])


def _error_draws(boot: dict, arr: dict, empty: np.ndarray, population: np.ndarray | None = None) -> None:
    """Turn world replicates into draws of ``estimate - error`` (in place).

    The error of replicate ``b`` is its refit minus its truth, the truth
    standardised per domain over the LLMs with responses (the scale of the
    estimate), or, in the domains on the population scale (``population``:
    those with few LLMs, :func:`_predict_cells`), only re-centred over them; the overall
    score's truth is the world's first shared trait, standardised over the
    LLMs.  Quantiles of ``estimate - error`` are the estimate minus the
    error's quantiles.
    """
    world = boot.pop("world_theta")
    world_overall = boot.pop("world_overall")
    seen = ~empty
    cnt = np.maximum(seen.sum(axis=0), 1)
    m = np.where(seen, world, 0.0).sum(axis=1, keepdims=True) / cnt
    sd = np.sqrt(np.where(seen, (world - m) ** 2, 0.0).sum(axis=1, keepdims=True) / cnt)
    sd = np.where(sd > 1e-12, sd, 1.0)
    if population is not None:
        m = np.where(population & ~seen.any(axis=0), 0.0, m)
        sd = np.where(population, 1.0, sd)
    truth = (world - m) / sd
    boot["theta"] = arr["theta"][None] - (boot["theta"] - truth)
    if "overall" in boot and arr.get("overall") is not None:
        z = world_overall - world_overall.mean(axis=1, keepdims=True)
        z /= z.std(axis=1, keepdims=True)
        boot["overall"] = arr["overall"][None] - (boot["overall"] - z)


def init_from(est: Estimate) -> dict:
    """Initial values (and fixed-item calibration) for the Bayesian fit from a point estimate.

    Traits and items go on the population scale the Bayesian model assumes
    when the estimate records it (``info["population_scale"]``, IRT fits)."""
    init = {"theta": est.point("theta"), "a": est.point("discrimination"), "d": est.point("intercept"),
            "c": est.point("guessing")}
    pop = est.info.get("population_scale")
    if pop is not None:
        from .estimators.response_data import to_internal

        init["theta"], init["a"], init["d"] = to_internal(
            init["theta"], init["a"], init["d"], np.asarray(pop["loc"]), np.asarray(pop["scale"]),
            est.domains.get_indexer(est.posterior["item_domain"].values.astype(str)))
    post = est.posterior
    if "eta" in post:
        init["overall"] = est.point("eta")
    else:
        init["overall"] = est.point("overall")[:, None]
    if "loadings" in post:
        init["loadings"] = est.point("loadings")
    return init


def _mtl_init(responses, *, model, guessing, seed):
    """The MTL point fit (rank and C selected) and the Bayesian model's initial
    values from it: ``(result, {"theta", "overall", "loadings", "a", "d", "c"})``.

    Traits and items are on the population scale the Bayesian model assumes
    (the item calibration's ``N(0, 1)`` traits, the fit's ``theta_loc`` /
    ``theta_scale``), not re-standardised by the sample spread of the shrunk
    scores: with short domains that spread is well under 1, and items scaled to
    it would be too discriminating for unit-variance traits. MTL's default
    (posterior) scores are on the scale of their items already, the in-sample
    scale, and the map is the identity."""
    from .estimators.response_data import to_internal

    res = _point_mtl(responses.correct, responses.mask, responses.domain_slices, model=model,
                     guessing=guessing, rank=None, gamma=None, seed=seed)
    theta, a, d = to_internal(res.theta, res.a, res.d, res.theta_loc, res.theta_scale, res.item_domain)
    return res, {"theta": theta, "overall": res.overall, "loadings": res.loadings, "a": a, "d": d, "c": res.c}


def _fit_bayes(responses, *, seed, spec=None, algorithm="nuts", init=None, **options) -> Estimate:
    """The Bayesian fit, initialised (and, with ``items="fixed"``, calibrated) by MTL; ``options`` checked by
    :func:`check_options`."""
    from .bayes import diagnostics, fit_bayes
    from .bayes.spec import load_spec

    spec_model, spec_guessing = load_spec(spec or "factor-2pl").point_item_model
    if isinstance(init, Estimate):
        init = init_from(init)
    timings = {}
    mtl_info = {}
    if init is None:
        t0 = time.perf_counter()
        stage("fitting MTL for the initial values and item calibration")
        res, init = _mtl_init(responses, model=spec_model, guessing=spec_guessing, seed=seed)
        timings["mtl_init"] = time.perf_counter() - t0
        mtl_info = {"mtl_rank": res.rank, "mtl_C": res.C}
    t1 = time.perf_counter()
    stage(f"fitting the Bayesian model ({algorithm})")
    tree = fit_bayes(responses, spec or "factor-2pl", algorithm=algorithm, seed=seed, init=init, **options)
    timings["bayes"] = time.perf_counter() - t1
    est = Estimate(tree)
    est.attach_cells(_cell_counts(responses.mask, responses.domain_slices, responses.n_llms))
    post_attrs = tree["posterior"].attrs
    stages = post_attrs.get("mtlirt_stage_seconds")
    if isinstance(stages, str):  # build, sampling, domain-score draws, derived, log-lik, diagnostics
        timings.update({f"bayes.{k}": v for k, v in json.loads(stages).items()})
    diag = diagnostics(tree)
    info = {
        "method": "bayes",
        "settings": {"method": "bayes", "spec": str(spec or "factor-2pl"), "algorithm": algorithm, "seed": seed,
                     **{k: v for k, v in options.items() if isinstance(v, (int, float, str, bool))}},
        "diagnostics": diag,
        "seconds": timings,
        **mtl_info,
    }
    if "rank" in post_attrs:
        info["rank"] = post_attrs["rank"]
    est.update_info(**info)
    return est
