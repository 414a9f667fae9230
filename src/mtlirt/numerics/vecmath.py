"""Elementary functions that LLVM can vectorise, for the numba kernels.

numba's ``math.exp`` and ``math.log`` are scalar libm calls: a loop that calls
them is never vectorised (this machine's numba has no SVML). The kernels of
the item calibration (:mod:`mtlirt.estimators.irt`), of
:mod:`mtlirt.bayes._loglik` and of :mod:`mtlirt.bayes.marginal` spend most of
their time in these functions, so they are written here as polynomials with
the exponent handled through the float's bits, which LLVM vectorises.

Each is accurate to about 1 ulp over its range (``tests/test_vecmath.py``).
They are compiled with the ``contract`` fast-math flag only and left to LLVM
to inline: numba's own inlining would hand them the caller's flags, and
``reassoc`` may regroup the Cody-Waite reduction and the Horner scheme
(errors of 1e-14 instead of 1e-16).
"""

from __future__ import annotations

import math

import numba
import numpy as np
from llvmlite import ir
from numba.core import types
from numba.core.extending import intrinsic

__all__ = ["exp_nonpos", "log1p_nonneg", "log_pos"]

_FLAGS = {"contract"}

_LOG2E = 1.4426950408889634
_LN2_HI = 6.93147180369123816490e-01  # ln 2 in two parts (Cody-Waite): n * _LN2_HI is exact
_LN2_LO = 1.90821492927058770002e-10
_EXP_C = tuple(1.0 / math.factorial(k) for k in range(14))
(_E0, _E1, _E2, _E3, _E4, _E5, _E6, _E7, _E8, _E9, _E10, _E11, _E12, _E13) = _EXP_C
_MIN_EXP = -708.0  # exp(-708) = 3.3e-308, next to the smallest normal number
# 1.5 * 2**52: x + _ROUND is x rounded to an integer n (to even at ties, where |x| < 2**51), held in the sum's
# low bits (the compiled flags keep the sum and its difference from being folded away)
_ROUND = 6755399441055744.0

# log(m) = 2 atanh(s), s = (m - 1) / (m + 1), |s| <= 0.1716 for m in
# [sqrt(1/2), sqrt(2)): 2 s sum_k s^(2k) / (2k + 1), truncated after s^22
# (0.1716^24 / 25 < 1e-19)
_LOG_C = tuple(1.0 / (2 * k + 1) for k in range(12))
(_L0, _L1, _L2, _L3, _L4, _L5, _L6, _L7, _L8, _L9, _L10, _L11) = _LOG_C
_SQRT2 = 1.4142135623730951
_MANTISSA = (1 << 52) - 1
_ONE_BITS = 1023 << 52


@intrinsic
def _bits_to_float(typingctx, x):
    """Reinterpret an int64's bits as a float64 (one LLVM bitcast)."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.DoubleType())

    return types.float64(types.int64), codegen


@intrinsic
def _float_to_bits(typingctx, x):
    """Reinterpret a float64's bits as an int64 (one LLVM bitcast)."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(64))

    return types.int64(types.float64), codegen


@numba.njit(fastmath=_FLAGS, error_model="numpy", cache=True)
def exp_nonpos(t):
    """``exp(t)`` for ``t <= 0`` (0 below -708, NaN for NaN; small positive
    ``t`` also fine), to 1 ulp.

    ``t = n ln 2 + r`` with ``|r| <= ln(2)/2``; ``exp(r)`` by its Taylor
    polynomial of degree 13 (truncation < 5e-18); ``2**n`` built from its
    exponent bits. ``n`` is rounded by adding ``_ROUND`` (the sum's last bits
    are ``n``), not by ``floor`` and a float-to-integer conversion, which
    AVX2 has no vector instruction for: a loop of it would convert lane by
    lane."""
    tt = max(t, _MIN_EXP)
    kf = tt * _LOG2E + _ROUND
    n = kf - _ROUND
    r = (tt - n * _LN2_HI) - n * _LN2_LO
    p = _E13
    p = p * r + _E12
    p = p * r + _E11
    p = p * r + _E10
    p = p * r + _E9
    p = p * r + _E8
    p = p * r + _E7
    p = p * r + _E6
    p = p * r + _E5
    p = p * r + _E4
    p = p * r + _E3
    p = p * r + _E2
    p = p * r + _E1
    p = p * r + _E0
    e = p * _bits_to_float((_float_to_bits(kf) + 1023) << 52)  # (the bits above n's shift out)
    return e if t >= _MIN_EXP else (0.0 if t < _MIN_EXP else t)  # NaN stays NaN


@numba.njit(fastmath=_FLAGS, error_model="numpy", cache=True)
def log_pos(x):
    """``log(x)`` for positive normal ``x`` (not for 0, subnormals, inf or
    NaN: the callers keep those away), to about 1 ulp.

    ``x = 2**e m`` with ``m`` in ``[sqrt(1/2), sqrt(2))`` from the float's
    bits; ``log(m) = 2 atanh((m - 1) / (m + 1))`` by its series."""
    bits = _float_to_bits(x)
    e = (bits >> 52) - 1023
    m = _bits_to_float((bits & _MANTISSA) | _ONE_BITS)  # in [1, 2)
    big = m > _SQRT2
    m = m * 0.5 if big else m
    e = e + 1 if big else e
    s = (m - 1.0) / (m + 1.0)
    z = s * s
    p = _L11
    p = p * z + _L10
    p = p * z + _L9
    p = p * z + _L8
    p = p * z + _L7
    p = p * z + _L6
    p = p * z + _L5
    p = p * z + _L4
    p = p * z + _L3
    p = p * z + _L2
    p = p * z + _L1
    p = p * z + _L0
    fe = np.float64(e)
    return fe * _LN2_HI + (2.0 * s * p + fe * _LN2_LO)


@numba.njit(fastmath=_FLAGS, error_model="numpy", cache=True)
def log1p_nonneg(u):
    """``log(1 + u)`` for ``u >= 0``, accurate for small ``u`` too (to a few ulp): ``log(w)`` of ``w = 1 +
    u`` corrected by the rounding of ``w``, ``((w - 1) - u) / w``."""
    w = 1.0 + u
    return log_pos(w) - ((w - 1.0) - u) / w

