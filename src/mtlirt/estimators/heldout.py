"""Held-out log-likelihood of an estimate on cells it was not fitted to."""

from __future__ import annotations

import numpy as np

from ..estimate import Estimate


def cell_probabilities(est: Estimate, rows: np.ndarray, cols: np.ndarray, item_domain: np.ndarray,
                       max_draws: int = 200) -> np.ndarray:
    """Posterior-predictive ``P(correct)`` of the given (LLM, item) cells.

    Averages the item model's probability over up to ``max_draws`` posterior
    draws (evenly thinned); a point estimate has one draw.
    """
    post = est.posterior
    n_draws = est.n_draws

    def flat(var):
        v = post[var].values
        return v.reshape((-1,) + v.shape[2:])

    if "accuracy" in post:  # the accuracy baseline predicts its own proportions
        acc = post["accuracy"].mean(("chain", "draw")).values
        p = acc[rows, item_domain[cols]]
        return np.where(np.isnan(p), np.nanmean(acc), p)
    theta = flat("theta")
    a, d = flat("discrimination"), flat("intercept")
    c = flat("guessing") if "guessing" in post else np.zeros_like(a)
    pick = np.unique(np.linspace(0, n_draws - 1, min(n_draws, max_draws)).round().astype(int))
    dom = item_domain[cols]
    p = np.zeros(len(rows))
    for s in pick:
        z = theta[s][rows, dom] * a[s][cols] + d[s][cols]
        p += c[s][cols] + (1 - c[s][cols]) / (1 + np.exp(-z))
    return p / len(pick)


def heldout_loglik(est: Estimate, responses, mask: np.ndarray, eps: float = 1e-9) -> dict:
    """Mean log-likelihood (and log-loss, accuracy of rounded predictions) of the cells in ``mask``.

    Parameters
    ----------
    est
        An estimate fitted without the cells in ``mask``.
    responses
        The full data (the answers of the held-out cells are read from it).
    mask
        Boolean ``N x J`` mask of the held-out cells.

    Returns
    -------
    dict
        ``n`` cells, ``mean_loglik``, ``log_loss`` (= ``-mean_loglik``), ``brier``.
    """
    rows, cols = np.nonzero(mask)
    y = responses.correct[rows, cols].astype(np.float64)
    p = np.clip(cell_probabilities(est, rows, cols, responses.item_domain), eps, 1 - eps)
    ll = y * np.log(p) + (1 - y) * np.log1p(-p)
    return {"n": int(len(rows)), "mean_loglik": float(ll.mean()), "log_loss": float(-ll.mean()),
            "brier": float(((p - y) ** 2).mean())}
