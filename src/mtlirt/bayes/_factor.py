"""The factor model's layout, shared by the model builders, the initial values,
the derived quantities and the integrated-out routes: the anchor domains, the
positions of the free loadings, the coordinates, and the overall traits and
loadings computed in numpy from the free variables.

A leaf module (numpy only) so that :mod:`mtlirt.bayes.model`,
:mod:`~mtlirt.bayes.init`, :mod:`~mtlirt.bayes.derived`,
:mod:`~mtlirt.bayes.marginal` and :mod:`~mtlirt.bayes.collapsed` import it at
module level without cycles.
"""

from __future__ import annotations

import numpy as np

from mtlirt.bayes.spec import ModelSpec
from mtlirt.data.responses import Responses
from mtlirt.errors import InputError

__all__ = ["anchor_domains", "loading_layout", "model_coords", "standardize_eta", "factor_parts"]


def anchor_domains(arr: Responses, rank: int) -> list[int]:
    """The ``rank`` anchor domains: most observed responses first.

    Parameters
    ----------
    arr : Responses
    rank : int

    Returns
    -------
    list of int
        Domain indices.
    """
    counts = []
    for s in arr.domain_slices:
        if arr.complete:
            counts.append(arr.n_llms * (s.stop - s.start))
        else:
            counts.append(int(arr.observed[:, s].sum()))
    order = np.argsort(-np.asarray(counts), kind="stable")
    if rank > len(order):
        raise InputError(f"rank {rank} exceeds the number of domains {len(order)}")
    return [int(k) for k in order[:rank]]


def loading_layout(n_domains: int, rank: int, anchors: list[int]):
    """Positions of the free and the positive (diagonal) loading entries.

    Parameters
    ----------
    n_domains, rank : int
    anchors : list of int
        Anchor domains, one per factor.

    Returns
    -------
    free_rows, free_cols, diag_rows : ndarray of int
        ``V[free_rows, free_cols] = loading_free``;
        ``V[diag_rows, arange(rank)] = loading_diag``; other entries 0.
    """
    fixed = np.zeros((n_domains, rank), dtype=bool)
    for l, a in enumerate(anchors):
        fixed[a, l:] = True
    rows, cols = np.nonzero(~fixed)
    return rows.astype(np.int64), cols.astype(np.int64), np.asarray(anchors, dtype=np.int64)


def model_coords(arr: Responses, spec: ModelSpec) -> dict:
    """Coordinates shared by every model and result."""
    return {
        "llm": list(arr.llms),
        "item": list(arr.items),
        "domain": list(arr.domains),
        "factor": list(range(spec.rank)),
        "domain_a": list(arr.domains),
        "domain_b": list(arr.domains),
    }


def standardize_eta(eta_raw, xp=np, axis: int = 0):
    """Overall traits standardised over the sample of LLMs (per factor).

    ``eta = (eta_raw - mean) / sd`` over the LLMs: the sample mean and scale
    of ``eta_raw`` are left to its N(0, 1) prior (directions the likelihood
    never sees, cheap for NUTS), which removes the slow collective mode in
    which all overall traits shrink while all loadings grow. The model's
    overall traits therefore have sample mean 0 and variance 1 exactly (the
    MTL convention), instead of population moments 0 and 1 up to
    ``O(1/sqrt(N))`` sampling noise.
    """
    m = eta_raw.mean(axis=axis, keepdims=True)
    c = eta_raw - m
    return c / xp.sqrt((c**2).mean(axis=axis, keepdims=True) + 1e-12)  # finite at eta_raw = 0


def factor_parts(eta_raw: np.ndarray, loading_free: np.ndarray | None, loading_diag: np.ndarray,
                 n_domains: int, anchors: list[int], eta_mean: np.ndarray | None = None,
                 eta_var: np.ndarray | None = None):
    """Overall traits, loadings and residual scales from the factor model's free
    variables, as the model computes them (any leading dims, e.g. chain, draw).

    Parameters
    ----------
    eta_raw : ndarray (..., N, r)
    loading_free : ndarray (..., F) or None
    loading_diag : ndarray (..., r)
    n_domains : int
    anchors : list of int
    eta_mean, eta_var : ndarray (..., r), optional
        The overall traits' mean and variance over the LLMs, where the model
        samples them (:func:`population_eta`).

    Returns
    -------
    eta (..., N, r) standardised over the LLMs (when N >= 3), then given the
    mean ``eta_mean`` and variance ``eta_var`` when these are given (the traits
    the likelihood sees), lam (..., K, r), psi (..., K) with ``psi_k = sqrt(1 -
    |lam_k|^2)``.
    """
    r = eta_raw.shape[-1]
    lead = loading_diag.shape[:-1]
    eta = standardize_eta(eta_raw, np, axis=-2) if eta_raw.shape[-2] >= 3 else eta_raw
    if eta_var is not None:
        eta = eta * np.sqrt(np.asarray(eta_var, dtype=np.float64))[..., None, :]
    if eta_mean is not None:
        eta = eta + np.asarray(eta_mean, dtype=np.float64)[..., None, :]
    V = np.zeros(lead + (n_domains, r))
    rows, cols, drows = loading_layout(n_domains, r, anchors)
    if len(rows):
        V[..., rows, cols] = loading_free
    V[..., drows, np.arange(r)] = loading_diag
    psi = 1.0 / np.sqrt(1.0 + (V**2).sum(-1))
    return eta, V * psi[..., None], psi
