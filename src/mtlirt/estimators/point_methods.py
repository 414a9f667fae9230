"""The point estimator of each frequentist method (``mtl``, its paper variants, ``stl``, ``pooled``,
``accuracy``), called with :func:`mtlirt.fitting.fit`'s settings: the fit itself and every bootstrap refit."""

from __future__ import annotations

import numpy as np

from ..data.responses import Responses
from .baselines import fit_accuracy, fit_pooled, posterior_mean_scale
from .irt import fit_stl
from .mtl import fit_mtl


def _point_stl(responses: Responses, *, model, guessing, **_):
    res = fit_stl(responses, model=model, guessing=guessing)
    # reported on the estimand's scale (spread of posterior means), not standardised to 1
    return posterior_mean_scale(res, _cell_counts(responses) > 0)


def _point_mtl(responses: Responses, *, model, guessing, rank, gamma, seed, C=None, variant="default",
               optimizer=None, cv_seed=None, **_):
    if variant != "default":  # the paper's rank-one 2PL without guessing (check_options)
        from .paper import fit_paper

        return fit_paper(responses, variant=variant, C=gamma if C is None else C,
                         seed=seed if cv_seed is None else cv_seed, optimizer=optimizer or "fast")

    res = fit_mtl(responses, rank=rank, gamma=gamma, C=C, model=model, guessing=guessing, seed=seed)
    if res.scores == "shrunk" and res.C == 0:  # the single-domain scores: on the estimand's scale as STL's

        res = posterior_mean_scale(res, _cell_counts(responses) > 0)
    return res


def _point_pooled(responses: Responses, *, model, guessing, **_):
    return fit_pooled(responses, model=model, guessing=guessing)


def _point_accuracy(responses: Responses, **_):
    return fit_accuracy(responses)


_POINT = {"stl": _point_stl, "mtl": _point_mtl, "pooled": _point_pooled, "accuracy": _point_accuracy}

def _cell_counts(responses: Responses) -> np.ndarray:
    """Observed responses per LLM and domain (``N x K``)."""
    if responses.mask is None:
        return np.tile([s.stop - s.start for s in responses.domain_slices], (responses.n_llms, 1))
    return np.column_stack([responses.mask[:, s].sum(axis=1) for s in responses.domain_slices])
