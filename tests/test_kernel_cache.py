"""A kernel loaded from numba's on-disk cache computes the same bits as the one compiled afresh, so the same
seed gives the same numbers in a user's first run (an empty cache, as in CI) and in every later one."""

import os
import subprocess
import sys

_SCRIPT = r"""
import hashlib
import numpy as np
from mtlirt.estimators import _kernels as K

rng = np.random.default_rng(0)
N, Q, J = 300, 41, 40
x = np.linspace(-4.0, 4.0, Q)
Lg = 5.0 * rng.normal(size=(N, Q))
logw = rng.normal(size=Q)
eap, e2, lml = np.empty(N), np.empty(N), np.empty(N)
nq = np.zeros(Q)
P32 = np.zeros((N, Q), np.float32)
K.posterior_rows(Lg, logw, x, eap, e2, nq, lml, P32)
a, d, c = rng.uniform(0.5, 2.0, J), rng.normal(size=J), rng.uniform(0.0, 0.3, J)
Nq = rng.uniform(1.0, 50.0, (3, Q))
R = Nq[np.arange(J) % 3] * rng.uniform(0.1, 0.9, (J, Q))
rows = np.arange(J) % 3
derivs = np.empty((J, 5))
K.mstep_derivs(a, d, x, Nq, rows, c, R, derivs)
terms = np.empty((J, 3))
sig = np.empty((J, Q))
K.sigmoid_table(a, d, x, sig)
K.floor_terms(sig, c, Nq, rows, R, terms)
# the trait step's parallel kernels, with unobserved cells and a floor
from mtlirt.data.simulate import simulate
from mtlirt.estimators import _holes, irt
from mtlirt.estimators.trait_scoring import theta_likelihood
sim = simulate(200, domain_sizes=[30, 12], missing=0.1, seed=1)
floors = np.repeat([0.0, 0.2], [30, 12])
data = irt.ResponseData(sim.correct, sim.observed, [slice(0, 30), slice(30, 42)], guessing=floors)
lik = theta_likelihood(data)
lik.set_items(rng.uniform(0.5, 2.0, 42), rng.normal(size=42))
theta = rng.normal(size=(200, 2))
g, info = lik.theta_derivs(theta)
ll = lik.theta_loglik(theta)
th, inf = lik.newton(theta, prec=1.0, bound=6.0, centre=None, weight=None, tol=1e-9, max_newton=30, domains=None)
out = np.zeros((200, Q))
_holes.gather_rows(*data.mask_of(0)[2], Lg[:30], 1.0, out)
# the E-step's large products, in blocks of rows on numba's threads
from mtlirt.estimators.blas import matmul_rows
Yb = (rng.random((2000, 600)) < 0.6).astype(np.float32)
prod = matmul_rows(Yb, rng.normal(size=(600, 49)).astype(np.float32))
# the S-X2 item fit's summed-score tables
from mtlirt.evaluate import _summed_score as S
Ps = np.clip(1 / (1 + np.exp(-(a[:, None] * x + d[:, None]))), 1e-12, 1 - 1e-12)
f = S.lord_wingersky(Ps)
num = S.leave_one_out(Ps, np.exp(-x**2 / 2), f)
ys = (rng.random((300, J)) < Ps[:, 20]).astype(np.int64)
Ns = np.bincount(ys.sum(1), minlength=J + 1).astype(float)
occ = 1 + np.flatnonzero(Ns[1:J] > 0)
sx2, grp = np.empty(J), np.empty(J, np.int64)
S.sx2_groups(Ns, rng.uniform(0.0, 9.0, (J, J + 1)), rng.uniform(0.0, 9.0, (J, len(occ))), occ, 1.0, sx2, grp)
# the leave-one-LLM-out check's quadrature sums (parallel over the LLMs)
from mtlirt.evaluate import _loo_sums
ml = np.empty(200)
_loo_sums.marginal_loglik(-rng.gamma(2.0, 3.0, (200, 2, Q)), rng.normal(size=(200, 2, Q)), rng.normal(size=Q),
                          rng.normal(size=(200, 2)), rng.random((200, 2)) < 0.1, rng.normal(size=(200, 5, 1)),
                          np.array([[0.6], [0.4]]), np.array([0.8, 0.9]), rng.normal(size=(200, 5)), ml)
bits = b"".join(v.tobytes() for v in (eap, e2, lml, nq, P32, derivs, sig, terms, g, info, ll, th, inf, out, prod, f,
                                      num, ml, sx2, grp))
kernels = (K.posterior_rows, K.mstep_derivs, K.sigmoid_table, K.floor_terms, K.tab_derivs, K.theta_newton, K.cell_sums,
           K.block_sums, _holes.gather_rows, S.lord_wingersky, S.leave_one_out, S.sx2_groups,
           _loo_sums.marginal_loglik)
hits = sum(sum(f.stats.cache_hits.values()) for f in kernels)
print(hashlib.sha1(bits).hexdigest(), hits)
"""


def test_cached_kernels_give_the_bits_of_a_fresh_compile(tmp_path):
    """Also on one thread: the parallel kernels (the trait step's, the unobserved cells' sums) give each
    LLM its own sums, and the E-step's large products split their rows by their shapes alone, so the thread
    count does not change a bit."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}

    def run(**extra):
        proc = subprocess.run([sys.executable, "-c", _SCRIPT], env={**env, **extra}, capture_output=True, text=True,
                              check=True)
        digest, hits = proc.stdout.split()
        return digest, int(hits)

    fresh, fresh_hits = run(NUMBA_NUM_THREADS="2")
    cached, cached_hits = run(NUMBA_NUM_THREADS="2")
    assert (fresh_hits, cached_hits) == (0, 13)  # the first run compiled, the second loaded all thirteen kernels
    assert cached == fresh
    assert run(NUMBA_NUM_THREADS="1")[0] == fresh


_CALLEE = r"""
import numpy as np
from mtlirt.data.simulate import simulate
from mtlirt.estimators import irt
from mtlirt.estimators.trait_scoring import theta_likelihood
from mtlirt.numerics import hermite

sim = simulate(50, domain_sizes=[10, 5], missing=0.1, seed=1)
data = irt.ResponseData(sim.correct, sim.observed, [slice(0, 10), slice(10, 15)])
lik = theta_likelihood(data)
lik.set_items(np.ones(15), np.zeros(15))
lik.theta_derivs(np.zeros((50, 2)))  # a fast-math kernel compiles the interpolation it calls
w_nb, c_nb = hermite.numba_versions()
t = np.linspace(0.0, 1.0, 101)
ref = hermite.combine(hermite.weights(t, 0.37), 0.3, -1.2, 2.5, 0.4)
got = np.array([c_nb(w_nb(v, 0.37), 0.3, -1.2, 2.5, 0.4) for v in t])
print(bool(np.array_equal(got, ref)))
"""


def test_a_fast_math_caller_leaves_the_interpolation_exact(tmp_path):
    """The trait step's kernels are compiled with fast-math flags and call the Hermite interpolation;
    compiled first there (an empty cache), the interpolation still gives numpy's bits to every later
    caller (without ``fastmath=False`` it took the caller's flags, and the cache handed that copy on)."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    for _ in range(2):  # compiled afresh, then loaded from the cache
        proc = subprocess.run([sys.executable, "-c", _CALLEE], env=env, capture_output=True, text=True, check=True)
        assert proc.stdout.split() == ["True"]
