"""Leaderboard simulator with known truth (the model of docs/model.md, the design of docs/simulation_study.md).

The simulator draws overall traits, domain traits that lie near a shared
``rank``-dimensional subspace (with a similarity gap ``h`` and optional outlier
domains), 2PL items with an optional fixed guessing floor and per-domain
difficulty shifts, and binary responses, missing at random with a given share.

Generative model
----------------
For ``N`` LLMs, ``K`` domains and rank ``r``:

- overall traits ``eta`` (N x r), iid ``N(0, 1)``;
- loading directions ``u_k`` on the unit sphere of ``R^r`` (first component
  positive), loadings ``w_k = sqrt(1 - h) * u_k`` for inlier domains and
  ``w_k = 0`` for outlier domains;
- domain traits ``theta_k = eta @ w_k + sqrt(h) * z_k`` for inliers and
  ``theta_k = z_k`` for outliers, with ``z_k`` iid ``N(0, 1)``; every domain
  trait therefore has population mean 0 and variance 1, and
  ``corr(theta_k, theta_l) = w_k . w_l`` for ``k != l``;
- items: ``log a_j ~ N(log discrimination_median, discrimination_sd)``,
  ``b_j ~ N(beta_k, difficulty_sd)`` with a domain shift
  ``beta_k ~ N(difficulty_mean, domain_shift_sd)``, intercept
  ``d_j = -a_j * b_j``;
- responses ``y_ij ~ Bernoulli(c + (1 - c) * sigmoid(a_j * theta_ik + d_j))``;
- each ``(i, j)`` pair is unobserved with probability ``missing``.

The truth is the generating values themselves: traits are *not* re-standardised
on the realised sample, so they have mean 0 and variance 1 over the population
(the sample moments differ by ``O(1/sqrt(N))``). Estimators standardise over
the sample; compare after aligning scales, as the simulation study does.

Random streams: ``numpy.random.default_rng(seed)`` is split with
``Generator.spawn`` into four independent streams (traits, items, responses,
missingness), so the same seed gives identical output, and changing, say,
``missing`` or ``guessing`` leaves the traits and items unchanged; changing
``similarity`` keeps the same ``eta`` and ``z`` (paired designs).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from .sim_items import _draw_items
from .sim_presets import _resolve_domains
from .sim_responses import _draw_responses, _mask_responses
from .sim_scenarios import (
    SCENARIOS,
    _check_int,
    _check_item_settings,
    _check_number,
    _resolve_seed,
    _scenario_departures,
    _settings_record,
)
from .sim_traits import _draw_llm_side
from .simulation import TRUTH_FOLDER, Simulation, _llm_table, _long_table, _names, _truth_frames  # noqa: F401  (TRUTH_FOLDER: cli.py)

__all__ = ["simulate", "SCENARIOS"]


def simulate(
    n_llms: int = 1000,
    domain_sizes: Sequence[int] | Mapping[str, int] | None = None,
    *,
    preset: str | None = None,
    scale: float = 1.0,
    scenario: str = "ideal",
    rank: int = 1,
    similarity: float = 0.1,
    outlier_share: float = 0.0,
    guessing: float | None = None,
    missing: float | None = None,
    loading_range: tuple[float, float] | None = None,
    skew: float | None = None,
    chance_cluster: float | None = None,
    guessing_sd: float | None = None,
    mc_share: float | None = None,
    flawed_share: float | None = None,
    specialist_share: float | None = None,
    block_missing: float | None = None,
    discrimination_median: float = 1.2,
    discrimination_sd: float = 0.3,
    difficulty_mean: float = -0.3,
    difficulty_sd: float = 1.0,
    domain_shift_sd: float = 0.5,
    seed: int | None = 0,
) -> Simulation:
    """Simulate an item-level leaderboard with known truth (the model of docs/model.md).

    Parameters
    ----------
    n_llms : int, default 1000
        Number of LLMs ``N`` (named ``llm0001``, ``llm0002``, ...).
    domain_sizes : sequence of int or mapping of str to int, optional
        Items per domain; a sequence gets names ``d01``, ``d02``, ...
        Exclusive with ``preset``. When both are omitted, ``preset="mmlu"``.
    preset : {"mmlu"}, optional
        Named domain sizes: MMLU's 57 subjects (14,042 items).
    scale : float, default 1.0
        Multiplier of the preset's sizes (rounded, at least 1 item each).
    scenario : {"ideal", "realistic"}, default "ideal"
        Default levels of the departures below (:data:`SCENARIOS`).
        ``ideal`` is the model itself (every departure off); ``realistic``
        turns each on at a level measured on real leaderboards. An argument
        given explicitly overrides its scenario level, so each departure can
        also be set alone.
    rank : int, default 1
        Number ``r`` of overall traits.
    similarity : float, default 0.1
        ``h`` in [0, 1]: the share of an inlier domain trait's variance that the
        overall traits do not explain. 0 puts every inlier domain exactly on the
        shared subspace; 1 makes all domains independent.
    outlier_share : float, default 0.0
        ``eps`` in [0, 1]: ``round(eps * K)`` domains, chosen at random, get
        traits independent of the overall traits.
    guessing : float, optional
        Lower asymptote ``c`` in [0, 1) of the items of multiple-choice
        domains (e.g. 0.25 for four options); scenario level when omitted
        (ideal 0, realistic 0.2).
    missing : float, optional
        Probability in [0, 1) that a response is unobserved (missing at
        random, independently per LLM and item); ideal 0, realistic 0.05.
    loading_range : (float, float), optional
        Per-domain loading norms ``|w_k|`` drawn uniformly from this range in
        [0, 1] (domain traits then load unequally on the overall traits;
        ``similarity`` is ignored for inlier domains). Ideal: off (every
        inlier domain has ``|w_k| = sqrt(1 - h)``); realistic (0.6, 0.98).
    skew : float, optional
        Shape of a skew-normal population of the first overall trait (a long
        upper tail when positive); ideal 0 (normal), realistic 4.
    chance_cluster : float, optional
        Share in [0, 1) of LLMs in a tight lump 3 body sds below the rest of
        the population of the first overall trait (near chance on every
        domain); ideal 0, realistic 0.05.
    guessing_sd : float, optional
        Standard deviation of the per-item guessing ``c_j`` (a Beta with mean
        ``guessing``); 0 gives every multiple-choice item ``c_j = guessing``
        (ideal); realistic 0.05 (3PL truth).
    mc_share : float, optional
        Share of domains (chosen at random) that are multiple choice and so
        get guessing; the rest have ``c_j = 0`` (generative answers). Ideal
        1, realistic 0.75.
    flawed_share : float, optional
        Share of items that are flawed: half of them (rounded down) get an
        upper asymptote ``u_j ~ U(0.5, 0.9)``, the rest a negative
        discrimination ``-a_j / 2`` (e.g. a wrong key). Ideal 0, realistic 0.04.
    specialist_share : float, optional
        Share of LLMs that are specialists: a deviation ``+-U(1.5, 3)`` trait
        sds added in 1-3 random domains (each domain then rescaled to
        population variance 1). Ideal 0, realistic 0.03.
    block_missing : float, optional
        Share of LLMs that ran only some domains: each of their domains is
        dropped with probability 1/2 (at least one kept). Ideal 0, realistic 0.4.
    discrimination_median : float, default 1.2
        Median of the lognormal discriminations ``a_j``.
    discrimination_sd : float, default 0.3
        Standard deviation of ``log a_j`` (about 90% of ``a_j`` in 0.7-2.0).
    difficulty_mean : float, default -0.3
        Mean of the domain difficulty shifts ``beta_k``.
    difficulty_sd : float, default 1.0
        Standard deviation of item difficulties ``b_j`` within a domain.
    domain_shift_sd : float, default 0.5
        Standard deviation of the domain difficulty shifts ``beta_k``.
    seed : int or None, default 0
        Seed of ``numpy.random.default_rng``; ``None`` draws fresh entropy and
        records it in ``settings["seed"]``.

    Returns
    -------
    Simulation
        Responses (long table and dense matrix) and the truth.

    Notes
    -----
    **The truth's scale.** Whatever the departures, every true domain score
    and overall score is on the *population scale*: mean 0 and variance 1
    over the population of LLMs (the mixture population is standardised by
    its exact moments, specialist domains by their exact variance), so over
    the simulated LLMs it is standardised up to ``O(1/sqrt(N))``. The
    overall score is the first overall trait ``eta``, the common factor of
    the domain traits (``theta_k = eta @ w_k + sqrt(1 - |w_k|^2) z_k``, plus
    specialist deviations); the responses follow
    ``P = c_j + (u_j - c_j) sigmoid(a_j theta_ik + d_j)``. Estimators
    standardise over the LLMs: compare after standardising the truth over
    the same LLMs.

    Each departure draws from its own random stream, so switching one on
    leaves everything else of the same seed unchanged (the skewed population
    changes ``eta`` and hence ``theta``; specialists rescale their domain).

    With the defaults and no guessing, the average accuracy is about 0.55 and
    domain accuracies spread over roughly 0.35-0.75, as on MMLU. The long
    table is compact (int16 codes for ``llm`` and ``item``, int8 for
    ``domain`` and ``correct``), so the flagship shape (4,272 LLMs x MMLU,
    6.0e7 responses) simulates in seconds and well under a GiB.

    Raises
    ------
    InputError
        An argument out of range.
    """
    n_llms = _check_int("n_llms", n_llms, 1)
    rank = _check_int("rank", rank, 1)
    similarity = _check_number("similarity", similarity, 0.0, 1.0, hi_open=False)
    outlier_share = _check_number("outlier_share", outlier_share, 0.0, 1.0, hi_open=False)
    dep = _scenario_departures(scenario, dict(
        loading_range=loading_range, skew=skew, chance_cluster=chance_cluster, guessing=guessing,
        guessing_sd=guessing_sd, mc_share=mc_share, flawed_share=flawed_share, specialist_share=specialist_share,
        block_missing=block_missing, missing=missing))
    item_settings = _check_item_settings(discrimination_median, discrimination_sd, difficulty_mean, difficulty_sd,
                                         domain_shift_sd)
    seed = _resolve_seed(seed)
    sizes_by_name = _resolve_domains(domain_sizes, preset, scale)
    domain_names = list(sizes_by_name)
    sizes = np.array([sizes_by_name[d] for d in domain_names], dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(sizes)])

    rngs = _streams(seed)
    llm_side = _draw_llm_side(n_llms, sizes.size, rank, similarity, outlier_share, dep,
                              rngs["trait"], rngs["load"], rngs["pop"], rngs["spec"])
    item_side = _draw_items(
        sizes, rngs["item"], rngs["guess"], rngs["flaw"], guessing=dep["guessing"], guessing_sd=dep["guessing_sd"],
        mc_share=dep["mc_share"], flawed_share=dep["flawed_share"], **item_settings)
    _, _, _, discrimination, guess, upper, intercept = item_side
    # -- responses, one domain block at a time --------------------------------
    correct = _draw_responses(llm_side[0], discrimination, intercept, guess, upper, starts, rngs["response"])
    observed = _mask_responses(correct, starts, dep["missing"], dep["block_missing"], rngs["missing"], rngs["block"])

    settings = _settings_record(
        n_llms=n_llms, preset=None if domain_sizes is not None else str(preset or "mmlu").lower(), scale=scale,
        domain_names=domain_names, sizes=sizes, rank=rank, similarity=similarity, outlier_share=outlier_share,
        scenario=scenario, dep=dep, item_settings=item_settings, seed=seed)
    return _simulation(domain_names, sizes, starts, llm_side, item_side, correct, observed, settings,
                       has_missing=dep["missing"] > 0 or dep["block_missing"] > 0)


def _streams(seed: int) -> dict[str, np.random.Generator]:
    """The independent random streams of :func:`simulate`, by name: traits, items, responses and
    missingness, then one more per departure, so that each departure changes only what it should."""
    rng = np.random.default_rng(seed)
    names = ("trait", "item", "response", "missing")
    rngs = dict(zip(names, rng.spawn(4)))
    rngs.update(zip(("load", "pop", "spec", "guess", "flaw", "block"), rng.spawn(6)))
    return rngs


def _simulation(domain_names, sizes, starts, llm_side, item_side, correct, observed, settings, *,
                has_missing: bool) -> Simulation:
    """The :class:`Simulation` of the drawn truth and responses: names, the long table and the truth's tables."""
    theta, eta, loadings, outlier, in_cluster, deviation = llm_side
    shift, item_domain, difficulty, discrimination, guess, upper, intercept = item_side
    llm_names, item_names = _names(theta.shape[0], domain_names, sizes)
    responses = _long_table(correct, observed, has_missing, llm_names, item_names, domain_names, item_domain)
    domain_scores, overall, loadings_df, items, domains = _truth_frames(
        llm_names, item_names, domain_names, item_domain, theta, eta, loadings, sizes, shift, outlier,
        discrimination=discrimination, intercept=intercept, difficulty=difficulty, guess=guess, upper=upper)
    return Simulation(
        responses=responses,
        correct=correct,
        observed=observed,
        domain_scores=domain_scores,
        overall=overall,
        loadings=loadings_df,
        outlier_domains=[d for d, o in zip(domain_names, outlier) if o],
        items=items,
        domains=domains,
        settings=settings,
        llms=_llm_table(llm_names, in_cluster, deviation, domain_names, observed, starts),
    )
