"""What the model checks (:mod:`mtlirt.evaluate.checks`) read of a fit: that the responses are its data, its
item model and the free parameters of one item, its items on the population scale; and their p-values: the
two-sided predictive p-value and the Benjamini-Hochberg adjustment."""

from __future__ import annotations

import json

import numpy as np

from ..errors import InputError
from ..estimators.response_data import to_internal

#: Default significance level of the misfit flags.
ALPHA = 0.05


def _check_data(est, responses) -> None:
    """The responses must be the fit's data (same LLMs, items, domains, in order)."""
    ok = (list(map(str, responses.llms)) == list(est.llms) and list(map(str, responses.items)) == list(est.items)
          and list(map(str, responses.domains)) == list(est.domains))
    if not ok:
        raise InputError("the responses are not the data of this fit (LLMs, items or domains differ); "
                         "pass the table the fit was made from")


def _spec(est):
    """The Bayesian spec of a fit (None for other methods)."""
    raw = est.tree["posterior"].attrs.get("mtlirt_spec_json")
    if raw is None:
        return None
    from ..bayes.spec import load_spec

    return load_spec(json.loads(raw) if isinstance(raw, str) else raw)


def _item_model(est) -> tuple[str, float | np.ndarray | None]:
    """``(model, guessing)`` of the single-domain refits of the correlation statistic:
    the fit's own item model (a Bayesian spec's 3PL floor as a fixed guessing, floors the
    fit estimated or decided, ``"estimate"`` or ``"auto"``, as the fitted ones fixed)."""
    spec = _spec(est)
    if spec is not None:  # the spec's item model, an estimated floor held at its prior's mean
        model, guessing = spec.point_item_model
        return model, float(spec.priors.guessing_mean) if guessing == "estimate" else guessing
    s = est.info.get("settings", {})
    g = s.get("guessing")
    if isinstance(g, str):
        c = est.point("guessing") if "guessing" in est.posterior else None
        return str(s.get("model", "2pl")), None if c is None or not np.any(c > 0) else np.asarray(c, float)
    return str(s.get("model", "2pl")), None if g is None else float(g)


def _n_item_parameters(est) -> int:
    """Free parameters of one item: 1 (1PL), 2 (2PL, 3PL with fixed guessing), 3 (estimated guessing)."""
    spec = _spec(est)
    if spec is not None:
        if spec.item_model == "1pl":
            return 1
        return 3 if spec.item_model == "3pl" and spec.estimate_guessing else 2
    return 1 if est.info.get("settings", {}).get("model") == "1pl" else 2


def _population_items(est) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Item parameters (posterior means) on the scale where every domain trait is ``N(0, 1)``
    over the population: the item calibration's scale (``info["population_scale"]``) when the
    fit records it, else the reported one (Bayesian fits are on it already)."""
    a = est.point("discrimination")
    d = est.point("intercept")
    c = est.point("guessing") if "guessing" in est.posterior else np.zeros_like(a)
    pop = est.info.get("population_scale")
    if pop is not None:
        loc, scale = np.asarray(pop["loc"], float), np.asarray(pop["scale"], float)
        _, a, d = to_internal(np.zeros((1, len(loc))), a, d, loc, scale, est.item_domain)
    return a, d, c


def _two_sided(rep: np.ndarray, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``P(rep >= obs)`` and the two-sided ``min(1, 2 min(P(rep >= obs), P(rep <= obs)))``."""
    upper = (rep >= obs[None]).mean(0)
    lower = (rep <= obs[None]).mean(0)
    return upper, np.minimum(1.0, 2.0 * np.minimum(upper, lower))


def _bh(p: np.ndarray) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values (NaN stay NaN)."""
    p = np.asarray(p, float)
    q = np.full_like(p, np.nan)
    ok = np.isfinite(p)
    m = int(ok.sum())
    if not m:
        return q
    pv = p[ok]
    order = np.argsort(pv)
    ranked = pv[order] * m / np.arange(1, m + 1)
    ranked = np.minimum.accumulate(ranked[::-1])[::-1]
    out = np.empty(m)
    out[order] = np.minimum(ranked, 1.0)
    q[ok] = out
    return q
