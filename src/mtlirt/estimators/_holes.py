"""The numba kernels of the unobserved cells of answered (LLM, domain) blocks (or of the blocks of items
within one domain, as the pooled fit's: the leaderboard's domains): their lists, by LLM and by item, and
the E-step's sums over them.

With a tenth of the cells missing at random every block of a long domain has
some; the E-step (:func:`mtlirt.estimators.em_steps._estep`), the trait
step (:mod:`mtlirt.estimators.trait_scoring`) and MTL's score tables
(:mod:`mtlirt.estimators.factor_scores`) take each LLM's complete-block
terms (one sum per LLM) less its unobserved cells' terms, cell by cell.
Imported on first use (numba costs about a second to import).
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["domain_cells", "gather_rows", "unobserved_cells"]

_FAST = {"contract", "reassoc", "nsz"}


@numba.njit(error_model="numpy", boundscheck=False, cache=True)
def unobserved_cells(obs, start, stop, rows, col_block):
    """The unobserved cells of the columns ``start:stop`` of ``obs`` in the blocks of rows that have
    responses (``rows[i, col_block[j]]``: ``rows`` N x B bools, ``col_block`` the block of every column
    of ``obs``), as row lists ``(ptr, cols)`` (row ``i``'s columns, from ``start``, at
    ``cols[ptr[i]:ptr[i + 1]]``, ascending) and column lists ``(cptr, crows)`` (the same cells by column,
    rows ascending).  Two passes over the block, run by run of columns in one block (a count, then a
    branch-free fill), and one over the cells; no ``N x J`` array."""
    N = obs.shape[0]
    J = stop - start
    o8 = obs.view(np.uint8)
    bounds = [start]
    for j in range(start + 1, stop):
        if col_block[j] != col_block[j - 1]:
            bounds.append(j)
    bounds.append(stop)
    ptr = np.zeros(N + 1, dtype=np.int64)
    for i in range(N):
        n = 0
        for r in range(len(bounds) - 1):
            j0, j1 = bounds[r], bounds[r + 1]
            if rows[i, col_block[j0]]:
                seen = 0
                for j in range(j0, j1):
                    seen += o8[i, j]
                n += j1 - j0 - seen
        ptr[i + 1] = ptr[i] + n
    cols = np.empty(ptr[N] + 1, dtype=np.int32)
    for i in range(N):
        p = ptr[i]
        for r in range(len(bounds) - 1):
            j0, j1 = bounds[r], bounds[r + 1]
            if rows[i, col_block[j0]]:
                for j in range(j0, j1):
                    cols[p] = j - start
                    p += 1 - o8[i, j]
    cols = cols[:ptr[N]]
    cptr = np.zeros(J + 1, dtype=np.int64)
    for p in range(cols.shape[0]):
        cptr[cols[p] + 1] += 1
    for j in range(J):
        cptr[j + 1] += cptr[j]
    crows = np.empty(ptr[N], dtype=np.int32)
    fill = cptr[:J].copy()
    for i in range(N):
        for p in range(ptr[i], ptr[i + 1]):
            j = cols[p]
            crows[fill[j]] = i
            fill[j] += 1
    return ptr, cols, cptr, crows


def domain_cells(obs, sl, rows, max_share=0.25, block=None):
    """The unobserved cells of the domain with columns ``sl`` among the LLMs ``rows`` (bools) that
    answered in it, as :func:`unobserved_cells` lists them, or None where they are over ``max_share``
    of those LLMs' cells (the float32 mask's matrix products then cost less). With ``block`` (the
    domain's columns' blocks, 0, 1, ...), ``rows`` is N x B: the LLMs that answered in each block."""
    rows2 = rows[:, None] if rows.ndim == 1 else rows
    col_block = np.zeros(obs.shape[1], dtype=np.int64)
    if block is not None:
        col_block[sl] = block
    lists = unobserved_cells(obs, sl.start, sl.stop, rows2, col_block)
    answered = float(rows2.sum(axis=0) @ np.bincount(col_block[sl], minlength=rows2.shape[1]))
    if len(lists[1]) > max_share * max(answered, 1.0):
        return None
    return lists


@numba.njit(fastmath=_FAST, error_model="numpy", boundscheck=False, cache=True, parallel=True, nogil=True)
def gather_rows(ptr, idx, V, sign, out):
    """``out[i] += sign * sum(V[idx[p]] for p in ptr[i]:ptr[i + 1])``: a sparse 0/1 matrix given by its
    lists times the dense ``V`` (the E-step's unobserved cells: their curves' terms per LLM, their
    LLMs' posterior mass per item), one pass over the lists, the rows in parallel (each its own sum:
    the same numbers on any number of threads)."""
    Q = V.shape[1]
    for i in numba.prange(ptr.shape[0] - 1):
        for p in range(ptr[i], ptr[i + 1]):
            j = idx[p]
            for q in range(Q):
                out[i, q] += sign * V[j, q]
