"""The result contract: every variable an :class:`~mtlirt.results.estimate.Estimate` may hold, with its dims.

Declared once here and read by :mod:`mtlirt.results.estimate` (point estimates and
bootstrap replicates), by the Bayesian post-processing
(:mod:`mtlirt.bayes.derived`) and by the tests, so that a plot, a report or
a comparison finds the same names and dims whatever produced the result.
Every variable carries the sample dims ``chain, draw`` in front of the dims
listed; a point estimate is one chain and one draw.
"""

from __future__ import annotations

from dataclasses import dataclass

import xarray as xr

SAMPLE_DIMS = ("chain", "draw")


@dataclass(frozen=True)
class Var:
    """One result variable: its dims after ``chain, draw`` and what it means."""

    dims: tuple[str, ...]
    doc: str
    required: bool = False


#: variable name -> dims (after chain, draw) and meaning
VARIABLES: dict[str, Var] = {
    "theta": Var(("llm", "domain"), "domain scores", required=True),
    "overall": Var(("llm",), "overall score", required=True),
    "eta": Var(("llm", "factor"), "shared (overall) traits"),
    "loadings": Var(("domain", "factor"), "loadings of the domain traits on the shared traits"),
    "discrimination": Var(("item",), "item discrimination a", required=True),
    "intercept": Var(("item",), "item intercept d (difficulty = -d / a)", required=True),
    "guessing": Var(("item",), "item guessing floor c", required=True),
    "domain_corr": Var(("domain_a", "domain_b"), "cross-domain correlation of the domain traits", required=True),
    "centre": Var(("llm", "domain"), "each domain score as the shared structure predicts it (MTL)"),
    "expected_accuracy": Var(("llm",), "expected proportion correct over all items"),
}

#: coordinates: dim -> what labels it
COORDS = {
    "llm": "LLM names",
    "domain": "domain names",
    "item": "item names (with the non-index coordinate item_domain)",
    "factor": "0 .. r-1",
    "domain_a": "domain names",
    "domain_b": "domain names",
}

#: the group with observed responses per cell: name -> dims
CELLS = {"n_responses": ("llm", "domain")}


def dims_of(name: str) -> tuple[str, ...]:
    """Full dims of a result variable, sample dims included."""
    return SAMPLE_DIMS + VARIABLES[name].dims


def check(ds: xr.Dataset, *, group: str = "posterior") -> None:
    """Raise ValueError when ``ds`` breaks the contract.

    Required variables must be present (in ``/posterior``); every declared
    variable present must have exactly its declared dims; the ``llm``,
    ``domain`` and ``item`` coordinates must be present and
    ``domain_a``/``domain_b`` must equal ``domain``. Other variables (a
    model's own parameters, such as PyMC's raw traits) are allowed.
    """
    problems = []
    if group == "posterior":
        missing = [n for n, v in VARIABLES.items() if v.required and n not in ds]
        if missing:
            problems.append(f"missing variables {missing}")
    for name, var in VARIABLES.items():
        if name in ds and tuple(ds[name].dims) != SAMPLE_DIMS + var.dims:
            problems.append(f"{name} has dims {tuple(ds[name].dims)}, expected {SAMPLE_DIMS + var.dims}")
    for c in ("llm", "domain", "item"):
        if c in ds.dims and c not in ds.coords:
            problems.append(f"dim {c} has no coordinate")
    if "domain_corr" in ds and "domain" in ds.coords:
        for c in ("domain_a", "domain_b"):
            if c in ds.coords and list(ds[c].values) != list(ds["domain"].values):
                problems.append(f"coordinate {c} differs from domain")
    if "item" in ds.dims and "item_domain" not in ds.coords:
        problems.append("coordinate item_domain is missing")
    if problems:
        raise ValueError(f"/{group} breaks the result contract (mtlirt.results.schema): " + "; ".join(problems))
