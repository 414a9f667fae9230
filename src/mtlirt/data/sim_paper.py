"""The seed paper's simulation design (docs/model.md, "The seed paper's estimator")."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from mtlirt.errors import InputError

from .sim_scenarios import _check_int, _check_number, _resolve_seed
from .simulation import Simulation, _long_table

__all__ = ["PAPER_DOMAIN_SIZES", "simulate_paper"]

#: Domain sizes of the paper's design: 50, 60, ..., 100 items, three times over
#: (18 domains; the paper's code ``settings_unequalJ_T18_R100``).
PAPER_DOMAIN_SIZES = (50, 60, 70, 80, 90, 100) * 3


def _paper_tangents(centre: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` orthonormal directions (rows) orthogonal to the ones vector and to ``centre``."""
    u = centre / np.linalg.norm(centre)
    raw = rng.standard_normal((centre.size, n))
    for _ in range(2):  # centre and project out u, orthonormalise; twice for round-off
        raw -= raw.mean(axis=0)
        raw -= np.outer(u, u @ raw)
        raw, _ = np.linalg.qr(raw)
    return raw.T


def simulate_paper(similarity: float, *, n_llms: int = 100, domain_sizes: Sequence[int] = PAPER_DOMAIN_SIZES,
                   seed: int | None = 0, bound_check: Sequence[float] = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5)) -> Simulation:
    """The seed paper's simulation design (its ``random_alpha`` structure; docs/model.md).

    The generation centre ``c`` is an evenly spaced grid over ``[-1, 1]``,
    shuffled over LLMs, centred and scaled to norm ``sqrt(N)``.  Domain traits
    are ``theta_t = sqrt(1 - alpha_t^2) c + sqrt(N) alpha_t v_t`` with
    ``alpha_1 = h``, the other ``alpha_t = h U(-1, 1)`` and ``v_t`` orthonormal
    directions orthogonal to the ones vector and to ``c``; the directions are
    redrawn (at most 100 times) until ``|theta| <= 4`` for every ``h`` in
    ``bound_check`` with the same relative ``alpha``.  Items: ``a ~ U(0.5, 1.5)``,
    ``d ~ U(-1, 1)``; complete 2PL responses.  The true overall trait is, as in
    the paper, the *sine centre* of the true domain traits (the minimiser of
    ``sum_t sin angle(g, theta_t)``, started at ``c``); it equals ``c`` when
    ``h = 0``.

    Parameters
    ----------
    similarity : float
        ``h`` in ``[0, 1)``: the largest sine between a domain trait and the centre.
    n_llms : int, default 100
    domain_sizes : sequence of int, default ``PAPER_DOMAIN_SIZES`` (50, 60, ..., 100 items, three times over)
    seed : int or None, default 0
        Split into independent streams for traits, items and responses.
    bound_check : sequence of float
        The ``h`` values whose traits must all stay within ``|theta| <= 4``
        (the paper's grid of ``h``, so its designs are paired over ``h``).

    Returns
    -------
    Simulation
        Truth: ``domain_scores`` (each centred, variance 1), ``overall``
        (the sine centre, mean 0 and variance 1), ``loadings`` (``cos`` of
        each domain trait with it), ``settings["alpha"]``.
    """
    from ..estimators.sine_centre import sine_centre

    h = _check_number("similarity", similarity, 0.0, 1.0, hi_open=True)
    n_llms = _check_int("n_llms", n_llms, 4)
    sizes = np.array([_check_int("domain size", s, 1) for s in domain_sizes], dtype=np.int64)
    K = len(sizes)
    if K < 2 or K > n_llms - 2:
        raise InputError(f"the paper design needs 2 <= domains <= n_llms - 2, got {K} domains and {n_llms} LLMs")
    seed = _resolve_seed(seed)
    trait_rng, item_rng, response_rng = np.random.default_rng(seed).spawn(3)
    N = n_llms
    grid = np.linspace(-1.0, 1.0, N)[trait_rng.permutation(N)]
    centre = (grid - grid.mean()) * (math.sqrt(N) / np.linalg.norm(grid - grid.mean()))
    for _ in range(100):
        rel = trait_rng.uniform(-1.0, 1.0, K)
        rel[0] = 1.0
        v = _paper_tangents(centre, K, trait_rng)

        def traits(hh, rel=rel, v=v):
            al = hh * rel
            return np.sqrt(1.0 - al**2)[:, None] * centre + math.sqrt(N) * al[:, None] * v

        if max(np.abs(traits(x)).max() for x in (*bound_check, h)) <= 4.0 + 1e-10:
            break
    else:
        raise InputError(f"could not draw paper-design traits within |theta| <= 4 for h = {h}")
    theta = traits(h)  # K x N
    overall, _, _ = sine_centre(theta, start=centre)
    item_domain = np.repeat(np.arange(K), sizes)
    a = item_rng.uniform(0.5, 1.5, sizes.sum())
    d = item_rng.uniform(-1.0, 1.0, sizes.sum())
    p = 1.0 / (1.0 + np.exp(-(theta[item_domain].T * a + d)))
    correct = (response_rng.random(p.shape) < p).astype(np.int8)
    observed = np.ones(correct.shape, dtype=bool)

    width = max(4, len(str(N)))
    llm_names = [f"llm{i + 1:0{width}d}" for i in range(N)]
    domain_names = [f"d{k + 1:02d}" for k in range(K)]
    item_names = [f"{domain_names[k]}_{j + 1:04d}" for k in range(K) for j in range(sizes[k])]
    cos = theta @ overall / N
    settings = {"preset": "paper", "n_llms": N, "similarity": h,
                "domain_sizes": {nm: int(s) for nm, s in zip(domain_names, sizes)},
                "alpha": (h * rel).tolist(), "seed": seed}
    return Simulation(
        responses=_long_table(correct, observed, False, llm_names, item_names, domain_names, item_domain),
        correct=correct,
        observed=observed,
        domain_scores=pd.DataFrame(theta.T, index=pd.Index(llm_names, name="llm"),
                                   columns=pd.Index(domain_names, name="domain")),
        overall=pd.DataFrame({"score": overall}, index=pd.Index(llm_names, name="llm")),
        loadings=pd.DataFrame({"score": cos}, index=pd.Index(domain_names, name="domain")),
        outlier_domains=[],
        items=pd.DataFrame({"item": item_names, "domain": np.asarray(domain_names, dtype=object)[item_domain],
                            "discrimination": a, "intercept": d, "difficulty": -d / a,
                            "guessing": np.zeros(a.size), "upper": np.ones(a.size)}),
        domains=pd.DataFrame({"domain": domain_names, "n_items": sizes, "difficulty_shift": np.zeros(K),
                              "outlier": np.zeros(K, dtype=bool)}),
        settings=settings,
        llms=pd.DataFrame({"llm": llm_names, "chance_cluster": np.zeros(N, dtype=bool),
                           "specialist_domains": [""] * N, "domains_run": np.full(N, K)}),
    )
