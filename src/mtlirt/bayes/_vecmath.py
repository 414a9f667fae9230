"""The vectorisable elementary functions of the numba likelihood kernels, and their numba cache key.

``exp_nonpos`` and ``log_pos`` are :mod:`mtlirt.numerics.vecmath`'s (the
item calibration's kernels use them too). :func:`source_version` gives the
kernels' PyTensor Ops a numba cache key that changes with their code.
"""

from __future__ import annotations

import hashlib
import inspect
import sys

from mtlirt.numerics.vecmath import exp_nonpos, log_pos

__all__ = ["exp_nonpos", "log_pos", "source_version"]


def source_version(*module_names: str) -> int:
    """An integer that changes whenever the code of the named modules or of
    this one changes.

    PyTensor caches the numba function of an Op on disk under a key made of
    the Op's type, its props and this integer; without it an edited kernel
    would be served from the cache in its old form."""
    src = "".join(inspect.getsource(sys.modules[m]) for m in (*module_names, __name__, "mtlirt.numerics.vecmath"))
    return int(hashlib.sha256(src.encode()).hexdigest()[:12], 16)
