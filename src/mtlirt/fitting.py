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

import numpy as np
import pandas as pd

from .data import validate
from .data.responses import Responses, as_responses
from .estimators.point_methods import _POINT, _cell_counts, _point_mtl
from .estimators.response_data import to_internal
from .fit_options import check_options, check_settings
from .memory import small_pages
from .progress import stage
from .results.estimate import Estimate
from .results.finish import _finish


@small_pages()  # numpy's large arrays without huge-page advice while fitting (mtlirt.memory)
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
    res = _POINT[method](responses, **settings)
    timings["fit"] = time.perf_counter() - t0
    est = _finish(responses, res, method=method, variant=variant, settings=settings, bootstrap=bootstrap, seed=seed,
                  n_jobs=n_jobs, few=few, timings=timings)
    return _record_data(est, table)


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


def init_from(est: Estimate) -> dict:
    """Initial values (and fixed-item calibration) for the Bayesian fit from a point estimate.

    Traits and items go on the population scale the Bayesian model assumes
    when the estimate records it (``info["population_scale"]``, IRT fits)."""
    init = {"theta": est.point("theta"), "a": est.point("discrimination"), "d": est.point("intercept"),
            "c": est.point("guessing")}
    pop = est.info.get("population_scale")
    if pop is not None:
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
    res = _point_mtl(responses, model=model, guessing=guessing, rank=None, gamma=None, seed=seed)
    theta, a, d = to_internal(res.theta, res.a, res.d, res.theta_loc, res.theta_scale, res.item_domain)
    return res, {"theta": theta, "overall": res.overall, "loadings": res.loadings, "a": a, "d": d, "c": res.c}


#: Options of the Bayesian fit that change what it shows, not what it computes: left out of its settings.
_DISPLAY_OPTIONS = ("progress", "warn")


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
    est.attach_cells(_cell_counts(responses))
    post_attrs = tree["posterior"].attrs
    stages = post_attrs.get("mtlirt_stage_seconds")
    if isinstance(stages, str):  # build, sampling, domain-score draws, derived, log-lik, diagnostics
        timings.update({f"bayes.{k}": v for k, v in json.loads(stages).items()})
    diag = diagnostics(tree)
    info = {
        "method": "bayes",
        "settings": {"method": "bayes", "spec": str(spec or "factor-2pl"), "algorithm": algorithm, "seed": seed,
                     **{k: v for k, v in options.items()
                        if isinstance(v, (int, float, str, bool)) and k not in _DISPLAY_OPTIONS}},
        "diagnostics": diag,
        "seconds": timings,
        **mtl_info,
    }
    if "rank" in post_attrs:
        info["rank"] = post_attrs["rank"]
    est.update_info(**info)
    return est
