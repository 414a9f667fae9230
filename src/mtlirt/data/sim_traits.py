"""The simulator's LLM side: overall traits, loadings, domain traits, and the departures that act on them
(unequal loadings, a skewed or clustered population, specialists)."""

from __future__ import annotations

import math

import numpy as np

# Largest polar angle of a loading direction away from the first (general)
# factor, for rank > 1. With pi/3 the first loading of every inlier domain is
# at least half of its norm, and for rank 2 the second factor carries about
# 30% of the loading variance (singular values of W about 0.84 : 0.54).
_MAX_LOADING_ANGLE = math.pi / 3


def _loading_directions(n: int, rank: int, rng: np.random.Generator) -> np.ndarray:
    """Unit loading directions (n x rank) with a positive first component.

    Rank 1: all ones. Rank 2: angles from the first axis stratified over
    ``(-pi/3, pi/3)`` and shuffled, so both factors are strong even for a
    handful of domains. Rank >= 3: polar angle stratified over ``(0, pi/3)``,
    the remaining direction uniform on the sphere of the other axes.
    """
    if n == 0:
        return np.zeros((0, rank))
    if rank == 1:
        return np.ones((n, 1))
    strata = (rng.permutation(n) + rng.random(n)) / n  # stratified U(0, 1)
    if rank == 2:
        phi = _MAX_LOADING_ANGLE * (2.0 * strata - 1.0)
        return np.column_stack([np.cos(phi), np.sin(phi)])
    phi = _MAX_LOADING_ANGLE * strata
    rest = rng.standard_normal((n, rank - 1))
    rest /= np.linalg.norm(rest, axis=1, keepdims=True)
    return np.column_stack([np.cos(phi), np.sin(phi)[:, None] * rest])


def _draw_traits(
    n_llms: int,
    n_domains: int,
    rank: int,
    similarity: float,
    outlier_share: float,
    rng: np.random.Generator,
    norms: np.ndarray | None = None,
    population=None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Return (theta N x K, eta N x r, loadings K x r, outlier mask K).

    ``norms`` (K) replaces the common loading norm ``sqrt(1 - h)`` per domain;
    ``population`` maps the normal ``eta`` to another population with mean 0
    and variance 1. Neither changes what ``rng`` draws.
    """
    n_out = int(math.floor(outlier_share * n_domains + 0.5))
    outlier = np.zeros(n_domains, dtype=bool)
    if n_out:
        outlier[rng.choice(n_domains, size=n_out, replace=False)] = True
    inliers = np.flatnonzero(~outlier)
    norm = np.full(inliers.size, math.sqrt(1.0 - similarity)) if norms is None else norms[inliers]
    loadings = np.zeros((n_domains, rank))
    loadings[inliers] = norm[:, None] * _loading_directions(inliers.size, rank, rng)
    eta = rng.standard_normal((n_llms, rank))
    z = rng.standard_normal((n_llms, n_domains))
    if population is not None:
        eta = population(eta)
    theta = z.copy()
    theta[:, inliers] = eta @ loadings[inliers].T + np.sqrt(1.0 - norm**2) * z[:, inliers]
    return theta, eta, loadings, outlier


def _population(skew: float, cluster: float, rng: np.random.Generator):
    """The overall trait's population: a skew-normal body (shape ``skew``, a long
    upper tail when positive) and a share ``cluster`` of LLMs in a tight lump 3
    body sds below the body's mean (near chance), standardised to mean 0 and
    variance 1 over the population (exact mixture moments). Acts on column 0
    of ``eta`` (the general factor); draws ``|u0|`` and the membership from ``rng``."""
    delta = skew / math.sqrt(1.0 + skew * skew)
    m_b = delta * math.sqrt(2.0 / math.pi)
    v_b = 1.0 - 2.0 * delta * delta / math.pi
    m_c, s_c = m_b - 3.0 * math.sqrt(v_b), 0.3 * math.sqrt(v_b)
    mean = (1 - cluster) * m_b + cluster * m_c
    var = (1 - cluster) * (v_b + m_b**2) + cluster * (s_c**2 + m_c**2) - mean**2

    def apply(eta: np.ndarray) -> np.ndarray:
        n = eta.shape[0]
        u0 = np.abs(rng.standard_normal(n))
        member = rng.random(n) < cluster
        u1 = eta[:, 0]
        raw = np.where(member, m_c + s_c * u1, delta * u0 + math.sqrt(1.0 - delta * delta) * u1)
        out = eta.copy()
        out[:, 0] = (raw - mean) / math.sqrt(var)
        apply.member = member
        return out

    apply.member = None
    return apply


# specialist deviations: |D| ~ U(1.5, 3) trait sds in 1-3 domains, random sign
_SPEC_LO, _SPEC_HI, _SPEC_MAX_DOMAINS = 1.5, 3.0, 3


def _specialists(theta: np.ndarray, share: float, rng: np.random.Generator):
    """Add large deviations to a share of LLMs in 1-3 domains each, then rescale
    every domain to population variance 1 (exactly: ``1 + q E[D^2]``, ``q`` the
    chance that an LLM is a specialist in the domain). Returns
    ``(theta, deviation N x K, scale K)``."""
    n, k = theta.shape
    member = rng.random(n) < share
    dev = np.zeros((n, k))
    for i in np.flatnonzero(member):
        m = int(rng.integers(1, _SPEC_MAX_DOMAINS + 1))
        cols = rng.choice(k, size=min(m, k), replace=False)
        dev[i, cols] = rng.choice([-1.0, 1.0], size=cols.size) * rng.uniform(_SPEC_LO, _SPEC_HI, cols.size)
    e_m = np.mean([min(m, k) for m in range(1, _SPEC_MAX_DOMAINS + 1)])
    e_d2 = (_SPEC_LO**2 + _SPEC_LO * _SPEC_HI + _SPEC_HI**2) / 3.0
    scale = math.sqrt(1.0 + share * e_m / k * e_d2)
    return (theta + dev) / scale, dev / scale, np.full(k, scale)


def _draw_llm_side(n_llms, n_domains, rank, similarity, outlier_share, dep, trait_rng, load_rng, pop_rng, spec_rng):
    """The true traits with the LLM-side departures (unequal loadings, skewed or clustered population,
    specialists), each from its own stream: ``theta`` (N, K), ``eta`` (N, r), loadings (K, r), the outlier
    domains (K,), the chance cluster's members (N,) and the specialists' deviations (N, K)."""
    norms = None
    if dep["loading_range"] is not None:
        norms = load_rng.uniform(*dep["loading_range"], size=n_domains)
    skew, chance_cluster = dep["skew"], dep["chance_cluster"]
    population = _population(skew, chance_cluster, pop_rng) if (skew or chance_cluster) else None
    theta, eta, loadings, outlier = _draw_traits(
        n_llms, n_domains, rank, similarity, outlier_share, trait_rng, norms=norms, population=population
    )
    in_cluster = np.zeros(n_llms, bool) if population is None else population.member
    deviation = np.zeros_like(theta)
    if dep["specialist_share"] > 0:
        theta, deviation, spec_scale = _specialists(theta, dep["specialist_share"], spec_rng)
        loadings = loadings / spec_scale[:, None]
    return theta, eta, loadings, outlier, in_cluster, deviation
