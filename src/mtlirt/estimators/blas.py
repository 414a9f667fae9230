"""BLAS threads of the estimators: many small matrix-vector products (one per domain block), which a
threaded OpenBLAS makes many times slower by waking its threads, so the fits run them single-threaded
(:func:`blas_threads`); the E-step's large products run in fixed blocks of rows on every core instead
(:func:`matmul_rows`), which keeps their numbers independent of the number of threads."""

from __future__ import annotations

import contextlib
import ctypes
from concurrent.futures import ThreadPoolExecutor
from functools import cache

import numpy as np

__all__ = ["blas_threads", "matmul_rows"]

# ---------------------------------------------------------------------------
# BLAS threads: the estimators make many small matrix-vector products (one per
# domain block); a threaded OpenBLAS spends more time waking threads than
# computing (many times slower on a loaded machine), so the fits run
# them single-threaded.  ctypes on the OpenBLAS that numpy loaded; a no-op
# where it cannot be found.
# ---------------------------------------------------------------------------
_BLAS_FUNCS: tuple | None = None


def _find_blas():
    global _BLAS_FUNCS
    if _BLAS_FUNCS is not None:
        return _BLAS_FUNCS
    _BLAS_FUNCS = ()
    try:
        with open("/proc/self/maps") as fh:
            paths = {line.split()[-1] for line in fh if "openblas" in line.lower() and ".so" in line}
    except OSError:
        return _BLAS_FUNCS
    names = [("scipy_openblas_set_num_threads64_", "scipy_openblas_get_num_threads64_"),
             ("openblas_set_num_threads64_", "openblas_get_num_threads64_"),
             ("scipy_openblas_set_num_threads", "scipy_openblas_get_num_threads"),
             ("openblas_set_num_threads", "openblas_get_num_threads")]
    found = []
    for path in sorted(paths):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for set_name, get_name in names:
            if hasattr(lib, set_name) and hasattr(lib, get_name):
                found.append((getattr(lib, set_name), getattr(lib, get_name)))
                break
    _BLAS_FUNCS = tuple(found)
    return _BLAS_FUNCS


@contextlib.contextmanager
def blas_threads(n: int = 1):
    """Context manager: run OpenBLAS with ``n`` threads inside, restore after."""
    funcs = _find_blas()
    old = []
    for set_fn, get_fn in funcs:
        try:
            old.append(int(get_fn()))
            set_fn(int(n))
        except (OSError, ValueError, TypeError, AttributeError, ctypes.ArgumentError):  # pragma: no cover
            old.append(None)
    try:
        yield
    finally:
        for (set_fn, _), o in zip(funcs, old):
            if o is not None:
                set_fn(o)


#: :func:`matmul_rows`: products of fewer multiply-adds run whole; the others in at most ``_BLOCKS`` blocks
#: of rows, of at least ``_MIN_ROWS`` rows each.
_MIN_WORK = 5e7
_BLOCKS = 8
_MIN_ROWS = 128


@cache
def _pool() -> ThreadPoolExecutor | None:
    """The threads of :func:`matmul_rows`: as many as numba's (``NUMBA_NUM_THREADS``); None for one."""
    import numba

    n = int(numba.config.NUMBA_NUM_THREADS)
    return ThreadPoolExecutor(n, thread_name_prefix="mtlirt-matmul") if n > 1 else None


def matmul_rows(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """``A @ B`` (``B`` a matrix or a vector) by blocks of rows of ``A``, the blocks on numba's threads
    (each a single-threaded BLAS call, which releases the GIL).

    The blocks depend on the shapes alone, never on the threads, so the
    result has the same bits on any number of them (a threaded BLAS splits
    its sums by thread count). Small products run whole."""
    n = A.shape[0]
    out = np.empty((n,) + B.shape[1:], dtype=np.result_type(A, B))
    nb = min(_BLOCKS, n // _MIN_ROWS)
    if nb < 2 or float(n) * A.shape[1] * (B.shape[1] if B.ndim == 2 else 1) < _MIN_WORK:
        np.matmul(A, B, out=out)
        return out
    edges = np.linspace(0, n, nb + 1).round().astype(np.int64)

    def block(b):
        np.matmul(A[edges[b]:edges[b + 1]], B, out=out[edges[b]:edges[b + 1]])

    pool = _pool()
    with blas_threads(1):
        if pool is None:
            for b in range(nb):
                block(b)
        else:
            list(pool.map(block, range(nb)))
    return out
