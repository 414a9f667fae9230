"""The built model: a PyMC model and what fitting it needs to know about it.

:func:`mtlirt.bayes.build_model`, :func:`mtlirt.bayes.build_fixed_model` and
:func:`mtlirt.bayes.build` return a :class:`BuiltModel` rather than attaching
attributes to the ``pymc.Model``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from mtlirt.bayes.spec import ModelSpec

__all__ = ["BuiltModel"]

KINDS = ("joint", "fixed")


@dataclass(frozen=True, eq=False)
class BuiltModel:
    """A built PyMC model with the facts :func:`mtlirt.bayes.fit_bayes` reads.

    Attributes
    ----------
    model : pymc.Model
    spec : ModelSpec
    anchors : list of int
        Anchor domains of the factor model, one per factor (empty otherwise).
    kind : {"joint", "fixed"}
        Items sampled with the traits, or fixed at given/calibrated values.
    initvals : dict
        Initial values of the free variables (usable as ``initvals``).
    trait_centered : ndarray of bool (K,)
        Domains whose traits use the centred parameterisation.
    likelihood : {"fused", "elementwise"} or None
        ``kind="joint"``: how the likelihood enters the model.
    item_centered : (bool, bool) or None
        ``kind="joint"``: difficulties / log discriminations centred.
    tables : LikelihoodTables or None
        ``kind="fixed"``: the tabulated per-cell likelihood.
    items : dict or None
        ``kind="fixed"``: the fixed item values ``a``, ``d``, ``c``.
    marginal : dict or None
        ``kind="fixed"`` factor models with the domain traits integrated
        out: the quadrature (:func:`mtlirt.bayes.marginal.quadrature_nodes`).
    """

    model: Any
    spec: ModelSpec
    anchors: list[int]
    kind: str
    initvals: dict
    trait_centered: np.ndarray
    likelihood: str | None = None
    item_centered: tuple[bool, bool] | None = None
    tables: Any = None
    items: dict | None = None
    marginal: dict | None = None

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}; got {self.kind!r}")
