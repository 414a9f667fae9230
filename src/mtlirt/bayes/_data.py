"""Array-level view of a leaderboard for the Bayesian model.

The Bayesian code reads any object with the attributes of
``mtlirt.data.responses.Responses`` (duck typing): ``correct`` (int8 LLM x item, 0 where
unobserved), ``observed`` (bool LLM x item, or None when fully observed),
``domain_slices`` (list of K slices, items of a domain contiguous), ``llms``,
``items``, ``domains`` (names) and ``item_domain`` (int code per item).
:class:`ResponseArrays` is a minimal such object built from arrays.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from mtlirt.errors import InputError

__all__ = ["ResponseArrays", "as_arrays"]


@dataclass
class ResponseArrays:
    """A leaderboard as arrays (the attributes the Bayesian code reads).

    Parameters
    ----------
    correct : ndarray of int8, shape (N, J)
        1 correct, 0 wrong or unobserved.
    observed : ndarray of bool, shape (N, J), or None
        Observation mask; None means fully observed.
    domain_slices : list of slice
        K contiguous column blocks, one per domain, covering all items in order.
    llms, items, domains : sequence of str
        Names (length N, J, K).
    """

    correct: np.ndarray
    observed: np.ndarray | None
    domain_slices: list
    llms: Any
    items: Any
    domains: Any

    def __post_init__(self) -> None:
        self.correct = np.asarray(self.correct, dtype=np.int8)
        if self.observed is not None:
            self.observed = np.asarray(self.observed, dtype=bool)
            if self.observed.all():
                self.observed = None
        self.domain_slices = [slice(int(s.start), int(s.stop)) for s in self.domain_slices]
        self.llms = [str(x) for x in self.llms]
        self.items = [str(x) for x in self.items]
        self.domains = [str(x) for x in self.domains]
        _check(self)

    @property
    def item_domain(self) -> np.ndarray:
        """Domain code (0..K-1) of every item."""
        out = np.empty(self.correct.shape[1], dtype=np.int64)
        for k, s in enumerate(self.domain_slices):
            out[s] = k
        return out

    @property
    def n_llms(self) -> int:
        return self.correct.shape[0]

    @property
    def n_items(self) -> int:
        return self.correct.shape[1]

    @property
    def n_domains(self) -> int:
        return len(self.domain_slices)

    @classmethod
    def from_arrays(
        cls,
        correct: np.ndarray,
        observed: np.ndarray | None,
        domain_slices: Sequence[slice],
        llm_names: Sequence[str] | None = None,
        item_names: Sequence[str] | None = None,
        domain_names: Sequence[str] | None = None,
    ) -> ResponseArrays:
        """Build from arrays; missing names become ``llm0``, ``item0``, ``domain0``...

        Parameters
        ----------
        correct, observed, domain_slices
            As in the class docstring.
        llm_names, item_names, domain_names : sequence of str, optional
            Names; defaults are generated.

        Returns
        -------
        ResponseArrays
        """
        correct = np.asarray(correct)
        n, j = correct.shape
        k = len(domain_slices)
        return cls(
            correct=correct,
            observed=observed,
            domain_slices=list(domain_slices),
            llms=llm_names if llm_names is not None else [f"llm{i}" for i in range(n)],
            items=item_names if item_names is not None else [f"item{i}" for i in range(j)],
            domains=domain_names if domain_names is not None else [f"domain{i}" for i in range(k)],
        )


def _check(r: ResponseArrays) -> None:
    c = r.correct
    if c.ndim != 2:
        raise InputError(f"correct must be a 2-D LLM x item matrix, got shape {c.shape}")
    n, j = c.shape
    if r.observed is not None and r.observed.shape != c.shape:
        raise InputError(f"observed has shape {r.observed.shape}, correct has {c.shape}")
    if not np.isin(c, (0, 1)).all():
        raise InputError("correct must hold only 0 and 1")
    pos = 0
    for k, s in enumerate(r.domain_slices):
        if s.start != pos or s.stop <= s.start:
            raise InputError(f"domain_slices[{k}] = {s} is not contiguous/non-empty after column {pos}")
        pos = s.stop
    if pos != j:
        raise InputError(f"domain_slices cover {pos} columns, correct has {j}")
    for what, names, size in (("llms", r.llms, n), ("items", r.items, j),
                              ("domains", r.domains, len(r.domain_slices))):
        if len(names) != size:
            raise InputError(f"{what} has {len(names)} names, expected {size}")
        if len(set(names)) != size:
            raise InputError(f"{what} names are not unique")


def as_arrays(responses: Any) -> ResponseArrays:
    """Coerce a ``Responses``-like object into :class:`ResponseArrays`.

    Parameters
    ----------
    responses : object
        Anything with ``correct``, ``observed``, ``domain_slices`` and names
        ``llms``, ``items``, ``domains`` (pandas Index or sequences); or a
        long DataFrame or the path of a table, read as ``Responses``
        (:func:`mtlirt.data.responses.as_responses`).

    Returns
    -------
    ResponseArrays

    Raises
    ------
    InputError
        Missing attributes or inconsistent shapes.
    """
    if isinstance(responses, ResponseArrays):
        return responses
    if isinstance(responses, (str, os.PathLike, pd.DataFrame)):
        from mtlirt.data.responses import as_responses

        responses = as_responses(responses)
    missing = [a for a in ("correct", "domain_slices") if not hasattr(responses, a)]
    if missing:
        raise InputError(
            f"expected a Responses-like object with attributes correct, observed, domain_slices, "
            f"llms, items, domains; missing {', '.join(missing)}"
        )
    correct = np.asarray(responses.correct)
    n, j = correct.shape
    k = len(responses.domain_slices)

    def names(attr, size, prefix):
        v = getattr(responses, attr, None)
        if v is None:
            return [f"{prefix}{i}" for i in range(size)]
        return list(v)

    return ResponseArrays(
        correct=correct,
        observed=getattr(responses, "observed", None),
        domain_slices=list(responses.domain_slices),
        llms=names("llms", n, "llm"),
        items=names("items", j, "item"),
        domains=names("domains", k, "domain"),
    )


def arrays_from_simulation(sim: Any) -> ResponseArrays:
    """A :class:`ResponseArrays` from a ``mtlirt.data.simulation.Simulation`` (its
    ``correct``, ``observed`` and ``items`` table, domains in column order)."""
    dom = list(sim.items["domain"].astype(str))
    names, starts = [], []
    for j, dname in enumerate(dom):
        if not names or names[-1] != dname:
            names.append(dname)
            starts.append(j)
    stops = starts[1:] + [len(dom)]
    return ResponseArrays(
        correct=sim.correct,
        observed=sim.observed,
        domain_slices=[slice(a, b) for a, b in zip(starts, stops)],
        llms=sim.llm_names,
        items=list(sim.items["item"].astype(str)),
        domains=names,
    )
