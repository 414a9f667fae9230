"""The penalties, bounds and quadrature of the frequentist fits (:class:`Penalties`), on the internal
(population) scale."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT_PENALTIES", "Penalties"]


@dataclass(frozen=True)
class Penalties:
    """Penalties, bounds and quadrature of the frequentist fits, on the internal (population) scale.

    The penalties are fixed normal log-densities (MAP-style); the Bayesian
    model's hierarchical prior scales are a different object,
    :class:`mtlirt.bayes.spec.Priors`.

    Attributes
    ----------
    theta_sd : float
        Standard deviation of the ``N(0, theta_sd^2)`` population prior on traits.
    log_a_sd, log_a_mean : float
        Normal prior on ``log a``.
    d_sd : float
        Standard deviation of the ``N(0, d_sd^2)`` prior on intercepts.
    theta_max, a_min, a_max, d_max : float
        Box bounds.
    n_nodes, node_max : int, float
        EM quadrature: ``n_nodes`` equally spaced nodes on ``[-node_max, node_max]``
        (the coarsest grid).
    node_sd_ratio, max_nodes : float, int
        Finer grids for long domains: a domain's node spacing is halved until it
        is at most ``node_sd_ratio`` times the narrowest posterior sd its items
        allow, ``1 / sqrt(1 / theta_sd^2 + sum_j a_j^2 / 4)``, with at most
        ``max_nodes`` nodes (``node_sd_ratio = 0``: ``n_nodes`` everywhere).
    mstep_stride : bool
        Let the M-step of a complete domain without guessing use every m-th
        node where that integrates alike (:func:`~mtlirt.estimators.em_steps._mstep_stride`).
    guessing_alpha, guessing_beta : float
        ``Beta(alpha, beta)`` prior of an estimated guessing floor (one per
        domain); the default ``Beta(2, 4)`` has its mode at 0.25 (four options)
        and is weak: one domain's items outweigh it.
    guessing_max : float
        Upper bound of an estimated floor.
    """

    theta_sd: float = 1.0
    log_a_sd: float = 0.5
    log_a_mean: float = 0.0
    d_sd: float = 3.0
    theta_max: float = 6.0
    a_min: float = 0.05
    a_max: float = 8.0
    d_max: float = 15.0
    n_nodes: int = 49
    node_max: float = 6.0
    node_sd_ratio: float = 2.0
    max_nodes: int = 769
    mstep_stride: bool = True
    guessing_alpha: float = 2.0
    guessing_beta: float = 4.0
    guessing_max: float = 0.6


DEFAULT_PENALTIES = Penalties()
