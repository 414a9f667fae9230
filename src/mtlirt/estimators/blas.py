"""BLAS threads of the estimators: many small matrix-vector products (one per domain block), which a
threaded OpenBLAS makes many times slower by waking its threads, so the fits run them single-threaded
(:func:`blas_threads`)."""

from __future__ import annotations

import contextlib
import ctypes

__all__ = ["blas_threads"]

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


