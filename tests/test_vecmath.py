"""The vectorisable exp, log and log1p of mtlirt.numerics.vecmath (the Bayesian kernels' through
mtlirt.bayes._vecmath): accuracy over their ranges, and the same bits whether a loop runs them
vectorised or not."""

from __future__ import annotations

import platform

import numba
import numpy as np
import pytest

from mtlirt.bayes._vecmath import exp_nonpos, log_pos
from mtlirt.numerics.vecmath import log1p_nonneg


@numba.njit(fastmath={"contract"}, error_model="numpy")
def _exp_loop(t, out):
    for j in range(t.shape[0]):
        out[j] = exp_nonpos(t[j])


@numba.njit(fastmath={"reassoc", "contract", "arcp", "nsz"}, error_model="numpy")
def _exp_loop_fast(t, out):
    """As the kernels call it: in a loop compiled with their fast-math flags, which must not reach the
    exponential's own steps (``(x + _ROUND) - _ROUND`` folded to ``x`` would break its rounding)."""
    for j in range(t.shape[0]):
        out[j] = exp_nonpos(t[j])


@numba.njit(fastmath={"contract"}, error_model="numpy")
def _log_loop(x, out):
    for j in range(x.shape[0]):
        out[j] = log_pos(x[j])


def test_exp_is_accurate():
    t = -np.linspace(0.0, 707.9, 200_001)
    got = np.array([exp_nonpos(v) for v in t])
    assert np.max(np.abs(got / np.exp(t) - 1.0)) <= 2.3e-16  # 1 ulp
    assert exp_nonpos(0.0) == 1.0
    assert exp_nonpos(-709.0) == 0.0 and exp_nonpos(-np.inf) == 0.0
    assert np.isnan(exp_nonpos(np.nan))
    assert abs(exp_nonpos(1e-12) / np.exp(1e-12) - 1.0) < 2.3e-16  # rounding may make t > 0
    vec = np.empty_like(t)
    _exp_loop(t, vec)
    assert np.array_equal(vec, got)
    _exp_loop_fast(t, vec)
    assert np.array_equal(vec, got)


def test_exp_is_accurate_where_its_reduction_ties():
    """At ``t = (k + 1/2) ln 2`` the rounding of ``t / ln 2`` to ``n`` ties; either neighbour leaves
    ``|r| = ln(2)/2``, within the polynomial's range."""
    t = (np.arange(-1021, 1) + 0.5) * np.log(2.0)
    got = np.array([exp_nonpos(v) for v in t])
    assert np.max(np.abs(got / np.exp(t) - 1.0)) <= 2.3e-16


def test_exp_loop_has_no_float_to_integer_conversion():
    """AVX2 has no vector instruction that converts a double to an integer: an exponential that took
    ``n`` by ``floor`` and a conversion ran that step lane by lane (about half its time)."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        pytest.skip("the instruction names checked are x86's")
    t = -np.linspace(0.0, 50.0, 1001)
    out = np.empty_like(t)
    _exp_loop(t, out)
    asm = "".join(_exp_loop.inspect_asm().values())
    assert "vfmadd" in asm or "mulpd" in asm  # the compiled loop itself
    assert "cvttsd2si" not in asm and "cvtsd2si" not in asm


def test_log_is_accurate():
    x = np.concatenate([np.geomspace(1e-300, 1e300, 200_001), np.linspace(0.5, 2.0, 100_001)])
    got = np.array([log_pos(v) for v in x])
    ref = np.log(x)
    assert np.max(np.abs(got - ref) / np.maximum(np.abs(ref), 1e-300)) < 5e-16
    near1 = np.linspace(1 - 1e-6, 1 + 1e-6, 1001)
    assert np.max(np.abs(np.array([log_pos(v) for v in near1]) - np.log(near1))) < 1e-21
    assert log_pos(1.0) == 0.0
    vec = np.empty_like(x)
    _log_loop(x, vec)
    assert np.array_equal(vec, got)


@numba.njit(fastmath={"contract"}, error_model="numpy")
def _log1p_loop(u, out):
    for j in range(u.shape[0]):
        out[j] = log1p_nonneg(u[j])


def test_log1p_is_accurate_for_small_arguments_too():
    """The EM's softplus ``max(z, 0) + log1p(exp(-|z|))`` takes it for ``u`` in ``[0, 1]``."""
    u = np.concatenate([[0.0], np.geomspace(1e-300, 1.0, 200_001), np.linspace(0.0, 1e3, 10_001)])
    got = np.array([log1p_nonneg(v) for v in u])
    ref = np.log1p(u)
    assert np.max(np.abs(got - ref) / np.maximum(ref, 1e-300)) < 6e-16
    assert log1p_nonneg(0.0) == 0.0 and log1p_nonneg(1e-300) == 1e-300
    vec = np.empty_like(u)
    _log1p_loop(u, vec)
    assert np.array_equal(vec, got)
