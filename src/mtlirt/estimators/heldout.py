"""Held-out log-likelihood of an estimate on cells it was not fitted to.

One computation serves every fit: :func:`log_predictive`, the log of the
mean over draws of ``p(y | draw)`` of each cell (a point estimate is one
draw). :func:`heldout_loglik` (the package's held-out log-likelihood,
``mtlirt.heldout_loglik``) and :func:`cell_probabilities` apply it to any
:class:`~mtlirt.results.estimate.Estimate`, Bayesian fits included;
:func:`cell_loglik` to one set of arrays (the MTL tuning's
cross-validation).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from scipy.special import expit

from ..errors import InputError
from ..numerics.llm_side import bernoulli_loglik

if TYPE_CHECKING:
    from ..results.estimate import Estimate

__all__ = ["cell_loglik", "cell_probabilities", "heldout_loglik", "log_predictive"]

_TINY = 1e-280  # below this mean probability the log is taken as a log-mean-exp of the draws' logs


def log_predictive(theta, a, d, c, item_domain, rows, cols, y, *, max_elems: float = 4e6) -> np.ndarray:
    """``log mean_s p(y_m | draw s)`` of the cells ``(rows[m], cols[m])``.

    Parameters
    ----------
    theta : ndarray (S, N, K)
        Domain traits of ``S`` draws, on the items' scale.
    a, d : ndarray (S, J)
        Discriminations and intercepts of the same draws.
    c : ndarray (S, J) or None
        Guessing floors (None: none).
    item_domain : ndarray (J,)
        Domain code of every item.
    rows, cols : ndarray of int (M,)
        The cells.
    y : ndarray (M,) or scalar
        Their answers (0/1); ``1`` gives ``log P(correct)``.
    max_elems : float
        Draws x cells per chunk.

    Returns
    -------
    ndarray (M,)
        ``log`` of the mean over the draws of each cell's probability (the
        draws' probabilities are accurate in both tails; where their mean is
        below 1e-280 the log-mean-exp of their logs, which does not underflow).
    """
    rows = np.asarray(rows)
    cols = np.asarray(cols)
    y = np.broadcast_to(np.asarray(y), rows.shape)
    kk = np.asarray(item_domain)[cols]
    S, M = theta.shape[0], len(rows)
    out = np.empty(M)
    per = max(1, int(max_elems // max(S, 1)))
    for s in range(0, M, per):
        sl = slice(s, min(M, s + per))
        j = cols[sl]
        x = a[:, j] * theta[:, rows[sl], kk[sl]] + d[:, j]
        yy = y[sl][None, :] > 0
        p = expit(x * np.where(yy, 1.0, -1.0))  # p(y | draw) without guessing, accurate in both tails
        if c is not None and np.any(c[:, j]):
            cj = c[:, j]
            p = np.where(yy, cj + (1 - cj) * p, (1 - cj) * p)
        m = p.mean(0)
        out[sl] = np.log(np.maximum(m, _TINY))
        low = np.flatnonzero(m < _TINY)  # every draw's p(y) near underflow: log-mean-exp of the logs
        if len(low):
            ll = bernoulli_loglik(x[:, low], yy[:, low], None if c is None else c[:, j][:, low])
            mx = ll.max(0)
            out[s + low] = mx + np.log(np.exp(ll - mx).mean(0))
    return out


def cell_loglik(correct, rows, cols, theta, a, d, c=None, item_domain=None) -> np.ndarray:
    """``log p(y_m)`` of the cells ``(rows[m], cols[m])`` under one set of arrays
    (:func:`log_predictive` with one draw).

    Parameters
    ----------
    correct : ndarray (N, J)
        Answers (the values at the cells are used).
    rows, cols : ndarray of int
        Cell coordinates.
    theta : ndarray (N, K)
        Traits on the same scale as the items.
    a, d : ndarray (J,)
        Item parameters.
    c : ndarray (J,) or None
        Guessing floors.
    item_domain : ndarray (J,)
        Domain code of every item.
    """
    rows = np.asarray(rows)
    cols = np.asarray(cols)
    c1 = None if c is None or not np.any(c) else np.asarray(c, dtype=np.float64)[None]
    return log_predictive(np.asarray(theta)[None], np.asarray(a)[None], np.asarray(d)[None], c1, item_domain,
                          rows, cols, correct[rows, cols])


def _accuracy(est: Estimate, rows, cols, item_domain) -> np.ndarray | None:
    """The accuracy baseline predicts its own proportions (None for a fit with an item model)."""
    post = est.posterior
    if "accuracy" not in post:
        return None
    acc = post["accuracy"].mean(("chain", "draw")).values
    p = acc[rows, item_domain[cols]]
    return np.where(np.isnan(p), np.nanmean(acc), p)


def cell_probabilities(est: Estimate, rows: np.ndarray, cols: np.ndarray, item_domain: np.ndarray,
                       max_draws: int = 200) -> np.ndarray:
    """Posterior-predictive ``P(correct)`` of the given (LLM, item) cells.

    Averages the item model's probability over up to ``max_draws`` posterior
    draws (evenly thinned); a point estimate has one draw.
    """
    p = _accuracy(est, rows, cols, item_domain)
    if p is not None:
        return p
    return np.exp(log_predictive(*est.item_model_draws(max_draws=max_draws), item_domain, rows, cols, 1))


def heldout_loglik(est: Estimate, responses, mask: np.ndarray, *, eps: float = 1e-9, max_draws: int | None = 200,
                   pointwise: bool = False) -> dict:
    """Mean log-likelihood (and log-loss, Brier score) of the cells in ``mask``.

    Each cell's log-likelihood is ``log mean_s p(y | draw s)`` over the
    posterior's draws (:func:`log_predictive`; the accuracy baseline: its
    proportions), kept in ``[log(eps), log(1 - eps)]``; the sum over the cells
    with ``eps=0`` and ``max_draws=None`` is the log pointwise predictive
    density of the held-out responses.

    Parameters
    ----------
    est
        An estimate (or a fit's :class:`xarray.DataTree`) fitted without the cells in ``mask``.
    responses
        The full data (the answers of the held-out cells are read from it).
    mask
        Boolean ``N x J`` mask of the held-out cells.
    eps
        Predicted probabilities are kept in ``[eps, 1 - eps]`` (0: as they are).
    max_draws
        Posterior draws used at most, evenly thinned (None: all).
    pointwise
        Also return every cell's log-likelihood.

    Returns
    -------
    dict
        ``n`` cells, ``mean_loglik``, ``log_loss`` (= ``-mean_loglik``), ``brier``;
        with ``pointwise`` also ``pointwise`` (the cells in ``np.nonzero(mask)`` order).
    """
    from ..results.estimate import Estimate

    est = est if isinstance(est, Estimate) else Estimate(est)
    correct = np.asarray(responses.correct)
    mask = np.asarray(mask, dtype=bool)
    shape = (len(est.llms), len(est.items))
    if correct.shape != shape or mask.shape != shape:
        raise InputError(f"the responses and the held-out mask must have the fit's shape {shape} "
                         f"(LLMs x items), got {correct.shape} and {mask.shape}")
    rows, cols = np.nonzero(mask)
    y = correct[rows, cols].astype(np.float64)
    item_domain = est.item_domain
    p = _accuracy(est, rows, cols, item_domain)
    if p is None:
        ll = log_predictive(*est.item_model_draws(max_draws=max_draws), item_domain, rows, cols, y)
        if eps > 0:
            ll = np.clip(ll, np.log(eps), np.log1p(-eps))
        p = np.where(y > 0, np.exp(ll), -np.expm1(ll))  # P(correct) = 1 - P(wrong)
    else:
        p = np.clip(p, eps, 1 - eps)
        ll = np.where(y > 0, np.log(p), np.log1p(-p))
    out = {"n": int(len(rows)), "mean_loglik": float(ll.mean()) if len(rows) else float("nan"),
           "log_loss": float(-ll.mean()) if len(rows) else float("nan"),
           "brier": float(((p - y) ** 2).mean()) if len(rows) else float("nan")}
    if pointwise:
        out["pointwise"] = ll
    return out
