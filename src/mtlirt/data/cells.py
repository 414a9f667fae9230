"""The responses held out of a fit: :func:`held_out_cells`, the one way a leaderboard's cells are split into
those a fit sees and those it is judged on (``Responses.holdout``, MTL's held-out choice of rank and ``C``).

The seed paper's cross-validation keeps its own folds (:func:`mtlirt.estimators.paper_cv.make_folds`): they
reproduce the reference code's, LLM by LLM, so that its variant compares with the paper.
"""

from __future__ import annotations

import numpy as np

__all__ = ["held_out_cells"]


def held_out_cells(observed: np.ndarray | None, shape: tuple[int, int], rng: np.random.Generator, *,
                   share: float | None = None, n: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The observed cells held out, as row and column indices in row-major order, drawn with ``rng``.

    Either each observed cell independently with probability ``share``
    (a held-out set whose size varies as a user's split would), or exactly
    ``n`` distinct observed cells, at most all of them (a fixed budget of
    cells, drawn without touching the whole matrix when ``n`` is small: MTL
    holds out at most a few hundred thousand cells of a leaderboard of 1e8).
    ``observed`` is the ``N x J`` mask, or ``None`` when every cell is observed.
    """
    if (share is None) == (n is None):
        raise ValueError("give share or n")
    if share is not None:
        held = rng.random(shape, dtype=np.float32) < share
        if observed is not None:
            held &= observed
        return np.nonzero(held)
    return _exactly(observed, shape, int(n), rng)


def _exactly(observed, shape, n, rng):
    """``n`` distinct observed cells: from the list of all observed cells when ``n`` is a large share of them,
    else by rejection from uniform draws over the matrix (no list of the observed cells)."""
    N, J = shape
    n_obs = N * J if observed is None else int(np.count_nonzero(observed))
    n = min(n, n_obs)
    if n <= 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    if n > 0.3 * n_obs:
        flat = np.flatnonzero(observed) if observed is not None else np.arange(N * J)
        pick = np.sort(rng.choice(flat, size=n, replace=False))
        return pick // J, pick % J
    out = np.zeros(0, np.int64)
    while len(out) < n:
        m = int((n - len(out)) * 1.3 * (N * J) / n_obs) + 16
        cand = rng.integers(0, N * J, size=m)
        if observed is not None:
            cand = cand[observed.ravel()[cand]]
        out = np.concatenate([out, cand])
        out.sort()  # (np.unique by sorting: its hash table was the slower at 4e5 cells)
        out = out[np.concatenate(([True], out[1:] != out[:-1]))]
    pick = np.sort(rng.choice(out, size=n, replace=False))
    return pick // J, pick % J
