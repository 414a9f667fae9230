"""Fixed items, factor traits: the domain-specific parts integrated out.

With the items fixed, the domain score ``theta_ik`` enters the likelihood
alone, through the tabulated ``l_ik(theta)`` of :mod:`mtlirt.bayes.fixed_items`,
and given the overall traits and loadings the domain scores are independent::

    theta_ik | eta, Lambda ~ N(m_ik, psi_k^2),   m_ik = Lambda_k . eta_i,
                                                 psi_k = sqrt(1 - |Lambda_k|^2)

So the posterior of ``(eta, Lambda)`` alone has the exact marginal likelihood

    p(y_ik | eta, Lambda) = integral exp(l_ik(theta)) N(theta; m_ik, psi_k^2) dtheta,

and NUTS needs to explore only ``N r + K r`` parameters instead of
``N (K + r) + K r``: the collective modes that couple each domain's scale
``psi_k`` to its N domain scores (slow for centred and for non-centred
traits alike when the data and the prior are of similar strength) are gone.

The integral (:func:`quadrature_nodes`, :func:`marginal_loglik_pt`)
-------------------------------------------------------------------
A trapezoid rule on ``Q`` equally spaced nodes per cell spanning the cell's
conditional posterior at the initial point (the MTL estimate): mean +-
``NODE_HALF_WIDTH`` sds, computed once on the table grid. With node ``q`` at
``t_ikq = start_ik + q step_ik`` and ``w_ikq = exp(l_ik(t_ikq) - max_q l_ik)``::

    log p(y_ik | m, psi) ~= logscale_ik + log sum_q w_ikq exp(-(t_ikq - m)^2 / (2 psi^2)) - log psi,
    logscale_ik = max_q l_ik + log step_ik - log(2 pi) / 2.

The nodes and weights are constants. One compiled loop (a PyTensor Op with a
numba implementation, so nutpie compiles it with the rest of the model)
returns the total and its gradient. It runs domain by domain over blocks of
LLMs with the LLMs innermost (the data in the domain-major layout of
:func:`kernel_inputs`), one exponential per node and cell taken relative to
the node nearest the prior mean, so that LLVM vectorises it with the
exponential and logarithm of :mod:`mtlirt.bayes._vecmath`; a cell whose sum
underflows (a prior far from every node with weight, warm-up territory) is
redone in the log domain. No loop reduces across its vectorised index, so
the kernel needs no reassociation and its result does not depend on memory
alignment. The
integrand divided by the initial conditional is nearly flat wherever the
conditional moves little from the initial point (the posterior of ``m_ik``
and ``psi_k`` is far narrower than the conditional of ``theta_ik`` at
leaderboard sizes); the error is checked in ``tests/test_bayes_marginal.py``
against the fine-grid integral.

The unidentified mean and scale of ``eta_raw`` (the model uses the
standardised ``eta``) get a tighter prior (:func:`pin_standardisation`).

The domain scores (:func:`draw_domain_scores`)
----------------------------------------------
For every posterior draw of ``(eta, Lambda)`` each ``theta_ik`` is drawn
from its conditional posterior ``exp(l_ik(theta)) N(theta; m_ik, psi_k^2)``:
a proposal from the Gaussian approximation (the likelihood's own Gaussian
approximation, backed out of the initial conditional moments, times the
draw's prior; sd inflated by ``kappa``) followed by ``steps`` independence
Metropolis-Hastings steps with the same proposal, which leave the exact
conditional invariant. The acceptance rate is recorded
(``mtlirt_theta_acceptance``); near 1 means the proposal is already close
to exact. Random numbers come from numpy's generator seeded by the fit's
seed, one stream per block of draws, so the same seed gives the same draws.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from functools import cache

import numba
import numpy as np

from mtlirt.bayes._factor import factor_parts
from mtlirt.numerics.llm_side import cell_quadrature, conditional_moments, numba_log_domain, table_value_kernel
from mtlirt.progress import progress_bar

__all__ = [
    "N_NODES",
    "add_domain_scores",
    "draw_domain_scores",
    "kernel_inputs",
    "marginal_kernel",
    "marginal_loglik_np",
    "marginal_loglik_pt",
    "overall_sd_guess",
    "pin_standardisation",
    "quadrature_nodes",
]

N_NODES = 13
NODE_HALF_WIDTH = 6.0
PROPOSAL_INFLATION = 1.1
MH_STEPS = 4


def quadrature_nodes(tables, m0: np.ndarray, psi0: np.ndarray, n_nodes: int = N_NODES,
                     half_width: float = NODE_HALF_WIDTH):
    """Per-cell quadrature for :func:`marginal_loglik`.

    Parameters
    ----------
    tables : LikelihoodTables
    m0 : ndarray (N, K)
        Prior means ``Lambda_k . eta_i`` at the initial point.
    psi0 : ndarray (K,)
        Residual sds at the initial point.
    n_nodes : int
    half_width : float
        The nodes span the initial conditional mean +- ``half_width`` sds.

    Returns
    -------
    dict
        ``start``, ``step`` (N, K): node ``q`` of cell (i, k) is
        ``start + q step``; ``weight`` (N, K, Q): ``exp(l(node) - max_q l)``;
        ``logscale`` (N, K): ``max_q l + log(step) - log(2 pi) / 2``;
        ``mean``, ``sd`` (N, K): the conditional moments at the initial
        point; ``m0``, ``psi0``.
    """
    mean, sd, _ = conditional_moments(tables, m0, psi0)
    x = np.linspace(-half_width, half_width, int(n_nodes))
    step = sd * (x[1] - x[0])
    start = mean + sd * x[0]
    logw, logscale = cell_quadrature(tables, start, step, len(x))
    return {"start": start, "step": step, "weight": np.exp(logw), "logscale": logscale,
            "mean": mean, "sd": sd, "m0": np.asarray(m0, float), "psi0": np.asarray(psi0, float)}


_TINY = 1e-280  # below it a cell's sum is redone in the log domain
_BLOCK = 256  # LLMs per block: the block's working arrays stay in L1


def kernel_inputs(quad: dict) -> tuple[np.ndarray, ...]:
    """The quadrature in the kernel's domain-major layout: ``start``,
    ``step``, ``logscale`` (K, N) and ``weight`` (K, Q, N), C-contiguous."""
    return (np.ascontiguousarray(quad["start"].T), np.ascontiguousarray(quad["step"].T),
            np.ascontiguousarray(quad["weight"].transpose(1, 2, 0)),
            np.ascontiguousarray(quad["logscale"].T))


@cache
def _sum8():
    """The compiled sum of a vector as eight partial sums in a fixed order, so that it does not depend on
    the vector's alignment in memory (the kernel's totals over the LLMs)."""
    import numba

    @numba.njit(boundscheck=False)
    def sum8(x):
        acc = np.zeros(8)
        n8 = x.shape[0] - x.shape[0] % 8
        for i in range(0, n8, 8):
            for lane in range(8):
                acc[lane] += x[i + lane]
        tail = 0.0
        for i in range(n8, x.shape[0]):
            tail += x[i]
        return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail

    return sum8


@cache
def marginal_kernel():
    """The compiled kernel ``(start, step, weight, logscale, m, psi) -> (total
    log-likelihood, d/dm (K, N), d/dpsi (K,))``, all in the layout of
    :func:`kernel_inputs` (``m`` is (K, N))."""
    import numba

    from mtlirt.bayes._vecmath import exp_nonpos, log_pos

    sum8 = _sum8()
    log_domain = numba_log_domain()

    # "contract" only: no loop here reduces across its vectorised index, so
    # nothing needs reassociation, and the result does not depend on memory
    # alignment (tests/test_bayes_marginal.py checks both, bit for bit)
    @numba.njit(fastmath={"contract"}, error_model="numpy", boundscheck=False, nogil=True)
    def kernel(start, step, weight, logscale, m, psi):
        K, Q, N = weight.shape
        dm = np.empty((K, N))
        dpsi = np.empty(K)
        lvsum = np.zeros(N)
        B = _BLOCK
        d0 = np.empty(B)
        dmin2 = np.empty(B)
        lv = np.empty(B)
        sums = np.empty((3, B))  # a block's sums over the nodes of w, w d and w d^2
        S, S1, S2 = sums[0], sums[1], sums[2]
        r2 = np.empty(N)
        total = 0.0
        for k in range(K):
            a = 0.5 / (psi[k] * psi[k])
            for b0 in range(0, N, B):
                b1 = min(N, b0 + B)
                nb = b1 - b0
                # views of the block: plain indices let LLVM vectorise
                st = start[k, b0:b1]
                hh = step[k, b0:b1]
                mk = m[k, b0:b1]
                ls = logscale[k, b0:b1]
                dmk = dm[k, b0:b1]
                r2k = r2[b0:b1]
                # d0: from the prior mean to the first node; dmin2: the squared
                # distance to the node nearest the prior mean, where the Gaussian
                # factor is largest and taken as 1
                for i in range(nb):
                    d0[i] = st[i] - mk[i]
                    j = min(max(math.floor(0.5 - d0[i] / hh[i]), 0.0), Q - 1.0)
                    d = d0[i] + j * hh[i]
                    dmin2[i] = d * d
                    S[i] = 0.0
                    S1[i] = 0.0
                    S2[i] = 0.0
                for q in range(Q):
                    wq = weight[k, q, b0:b1]
                    for i in range(nb):
                        d = d0[i] + q * hh[i]
                        w = wq[i] * exp_nonpos(-a * (d * d - dmin2[i]))
                        S[i] += w
                        S1[i] += w * d
                        S2[i] += w * d * d
                n_bad = 0
                for i in range(nb):
                    n_bad += S[i] < _TINY
                    Sv = max(S[i], _TINY)
                    lv[i] = ls[i] + log_pos(Sv) - a * dmin2[i]
                    dmk[i] = 2.0 * a * S1[i] / Sv
                    r2k[i] = S2[i] / Sv
                if n_bad:
                    for i in range(nb):
                        if S[i] < _TINY:
                            lsd, m1, m2 = log_domain(np.log(weight[k, :, b0 + i:b0 + i + 1]), 0, st[i], hh[i], mk[i], a)
                            lv[i] = ls[i] + lsd
                            dmk[i] = 2.0 * a * m1
                            r2k[i] = m2
                lvb = lvsum[b0:b1]
                for i in range(nb):
                    lvb[i] += lv[i]
            p = psi[k]
            dpsi[k] = sum8(r2) / (p * p * p) - N / p
            total -= N * np.log(p)
        return total + sum8(lvsum), dm, dpsi

    return kernel


def marginal_loglik_np(quad: dict, m: np.ndarray, psi: np.ndarray) -> np.ndarray:
    """The quadrature's ``log p(y_ik | m_ik, psi_k)`` per cell (N, K), numpy
    (log domain; the reference for the kernel)."""
    from scipy.special import logsumexp

    Q = quad["weight"].shape[-1]
    nodes = quad["start"][..., None] + quad["step"][..., None] * np.arange(Q)
    with np.errstate(divide="ignore"):
        e = np.log(quad["weight"]) - (nodes - m[..., None]) ** 2 / (2.0 * psi[None, :, None] ** 2)
    return quad["logscale"] + logsumexp(e, axis=-1) - np.log(psi)[None, :]


@cache
def _marginal_op():
    import pytensor.tensor as pt
    from pytensor.gradient import disconnected_type
    from pytensor.graph.basic import Apply
    from pytensor.graph.op import Op

    class MarginalLogLikOp(Op):
        """Total marginal log-likelihood of the fixed-items factor model and its
        gradient in one pass (outputs: value, d/dm, d/dpsi)."""

        __props__ = ()

        def make_node(self, start, step, weight, logscale, m, psi):
            ins = [pt.as_tensor_variable(v) for v in (start, step, weight, logscale, m, psi)]
            outs = [pt.dscalar(), pt.dmatrix(), pt.dvector()]
            return Apply(self, ins, outs)

        def perform(self, node, inputs, outputs):
            v, dm, dpsi = marginal_kernel()(*[np.asarray(x, dtype=np.float64) for x in inputs])
            outputs[0][0] = np.asarray(v)
            outputs[1][0] = dm
            outputs[2][0] = dpsi

        def connection_pattern(self, node):
            return [[False, False, False]] * 4 + [[True, False, False]] * 2

        def pullback(self, inputs, outputs, cotangents):
            g = cotangents[0]
            return [disconnected_type() for _ in range(4)] + [g * outputs[1], g * outputs[2]]

        L_op = pullback  # the name before PyTensor 3.3

    try:
        from pytensor.link.numba.dispatch.basic import (
            register_funcify_default_op_cache_key,
        )

        from mtlirt.bayes._vecmath import source_version

        version = source_version(__name__)

        @register_funcify_default_op_cache_key(MarginalLogLikOp)
        def _funcify(op, node=None, **kwargs):
            import numba

            kern = marginal_kernel()

            @numba.njit
            def f(start, step, weight, logscale, m, psi):
                v, dm, dpsi = kern(start, step, weight, logscale, m, psi)
                return np.asarray(v), dm, dpsi

            return f, version
    except ImportError:  # pragma: no cover - PyTensor without the numba backend
        pass
    return MarginalLogLikOp()


def marginal_loglik_pt(start, step, weight, logscale, m, psi):
    """PyTensor total of :func:`marginal_loglik_np` over all cells, computed
    with its gradient by one compiled kernel.

    The data ``start``, ``step``, ``weight``, ``logscale`` are in the
    domain-major layout of :func:`kernel_inputs`; ``m`` is the (K, N) tensor
    of prior means (``Lambda eta'``), ``psi`` the (K,) residual sds."""
    return _marginal_op()(start, step, weight, logscale, m, psi)[0]


def _likelihood_gaussian(quad: dict) -> tuple[np.ndarray, np.ndarray]:
    """The likelihood's own Gaussian approximation per cell (precision ``I``,
    centre ``that``), backed out of the conditional moments at the initial
    point: ``1/sd^2 = I + 1/psi0^2``, ``mean/sd^2 = I that + m0/psi0^2``."""
    prec0 = 1.0 / quad["sd"] ** 2
    pp = 1.0 / quad["psi0"] ** 2
    info = np.maximum(prec0 - pp[None, :], 0.0)
    num = quad["mean"] * prec0 - quad["m0"] * pp[None, :]
    that = np.where(info > 1e-8, num / np.where(info > 1e-8, info, 1.0), 0.0)
    return info, that


def overall_sd_guess(quad: dict, lam0: np.ndarray, psi0: np.ndarray) -> float:
    """Typical posterior sd of an overall trait at the initial point: the
    median over LLMs of ``(sum_k |Lambda_k|^2 / (psi_k^2 + 1 / I_ik))^(-1/2)``
    with ``I_ik`` the information of cell (i, k)."""
    info, _ = _likelihood_gaussian(quad)
    l2 = (lam0**2).sum(1)
    with np.errstate(divide="ignore"):
        prec = (l2[None, :] / (psi0[None, :] ** 2 + 1.0 / np.maximum(info, 1e-12))).sum(1)
    return float(np.clip(np.median(1.0 / np.sqrt(np.maximum(prec, 1e-12))), 0.02, 1.0))


def pin_standardisation(eta_raw, sd: float) -> None:
    """Tighten the prior of the two directions of ``eta_raw`` that the
    likelihood never sees (its mean and scale over the LLMs; the model uses
    the standardised ``eta``) to about ``sd / sqrt(N)``, the size of the other
    directions' posterior spread divided by sqrt(N). Under the N(0, 1) prior
    alone those two directions are ~1/sd^2 times wider than every other
    direction after NUTS's diagonal scaling. The posterior of everything the
    likelihood sees is unchanged; NUTS's step size can grow a little and the
    leapfrog steps per draw fall."""
    import pymc as pm
    import pytensor
    import pytensor.tensor as pt

    # shared, not a constant: the guess depends on the data, and a constant would enter the compiled
    # function's cache key (see mtlirt.bayes.model._index_data)
    sd = pytensor.shared(np.float64(sd), name="eta_raw_pin_sd")  # named: mtlirt.bayes._nutpie
    n = eta_raw.shape[0]
    mean = eta_raw.mean(axis=0)
    rms = pt.sqrt(pt.sqr(eta_raw - mean).mean(axis=0))
    pm.Potential("eta_raw_pin", -(n / (2.0 * sd**2)) * (pt.sqr(mean) + pt.sqr(rms - 1.0)).sum())


_table_value = table_value_kernel()


# Module level and cached on disk (numba's cache beside this file): it is called from Python only
# (draw_domain_scores), never inlined into PyTensor's compiled graphs, and compiles without fast-math,
# so a cached and a fresh compile give the same draws (benchmarks/bench_reproducible.py draws), and a
# new process loads it instead of compiling it.
@numba.njit(parallel=True, nogil=True, cache=True)
def _imh_kernel(m, psi, s, rows, F, dF, lo, h, info, that, kappa, zs, es, out, acc):
    # zs: standard normals (d, T + 1, N, K); es: standard exponentials
    # (d, T, N, K), so a step is accepted when -log(u) = e > lw - lw(y)
    d, N, K = m.shape
    T = es.shape[1]
    for i in numba.prange(N):
        n_acc = 0
        for t in range(d):
            for k in range(K):
                inv_ps2 = 1.0 / (psi[t, k] * psi[t, k])
                prec = info[i, k] + inv_ps2
                mu = (info[i, k] * that[i, k] + m[t, i, k] * inv_ps2) / prec
                sp = kappa / np.sqrt(prec)
                mk = m[t, i, k]
                sk = s[i, k]
                row = rows[i, k]
                x = 0.0
                lw = 0.0
                for step in range(T + 1):
                    z = zs[t, step, i, k]
                    y = mu + sp * z
                    g = _table_value(F, dF, row, y, lo, h)  # l(y) by cubic Hermite interpolation, linear outside
                    # target over proposal density, log, up to a constant
                    lwy = sk * y - g - 0.5 * (y - mk) ** 2 * inv_ps2 + 0.5 * z * z
                    if step == 0:
                        x = y
                        lw = lwy
                    elif lw - lwy < es[t, step - 1, i, k]:
                        x = y
                        lw = lwy
                        n_acc += 1
                out[t, i, k] = x
        acc[i] += n_acc


def draw_domain_scores(tables, quad: dict, m, psi, *, seed: int = 0, steps: int = MH_STEPS,
                       kappa: float = PROPOSAL_INFLATION, dtype=np.float32, max_elems: float = 2e7,
                       progress=None):
    """Draw every ``theta_ik`` from its conditional posterior given each
    posterior draw of ``(eta, Lambda)`` (see module docstring).

    Parameters
    ----------
    tables : LikelihoodTables
    quad : dict
        From :func:`quadrature_nodes`.
    m : callable or ndarray
        ``m(c, sl)`` -> (d, N, K) prior means for chain ``c`` and draws
        ``sl``, or an array (C, D, N, K).
    psi : ndarray (C, D, K)
    seed : int
    steps : int
        Independence Metropolis-Hastings steps after the first proposal.
    kappa : float
        Inflation of the proposal sd.
    dtype : numpy dtype
        Of the returned draws (float32 halves the memory of the largest
        array of a leaderboard-sized posterior; its 7 significant digits
        are far below posterior sds).
    progress : callable, optional
        Called with the fraction done.

    Returns
    -------
    theta : ndarray (C, D, N, K)
    acceptance : float
        Share of accepted Metropolis-Hastings proposals.
    """
    C, D, K = psi.shape
    N = tables.s.shape[0]
    get_m = m if callable(m) else (lambda c, sl: m[c, sl])
    info, that = _likelihood_gaussian(quad)
    F = np.ascontiguousarray(tables.F, dtype=np.float64)
    dF = np.ascontiguousarray(tables.dF, dtype=np.float64)
    rows = np.ascontiguousarray(tables.table, dtype=np.int64)
    s = np.ascontiguousarray(tables.s, dtype=np.float64)
    out = np.empty((C, D, N, K), dtype=dtype)
    acc = np.zeros(N, dtype=np.int64)
    per = max(1, int(max_elems // max(N * K * (2 * steps + 1), 1)))
    blocks = [(c, slice(a, min(D, a + per))) for c in range(C) for a in range(0, D, per)]
    seqs = np.random.SeedSequence([int(seed), 0x7E7A]).spawn(len(blocks))
    # Random numbers go into two sets of buffers reused by every block
    # (fresh arrays cost more in page faults than the numbers cost to
    # generate); a second thread fills the next block's set while the
    # kernel, which releases the GIL, works on the current one.
    pd = min(per, D)
    zbuf = np.empty((2, pd, steps + 1, N, K))  # proposals' standard normals (first: the start)
    ebuf = np.empty((2, pd, steps, N, K))  # standard exponentials of the accept steps
    bbuf = np.empty((pd, N, K))

    def fill(b):
        rng = np.random.default_rng(seqs[b])
        d = blocks[b][1].stop - blocks[b][1].start
        rng.standard_normal(out=zbuf[b % 2, :d])
        rng.standard_exponential(out=ebuf[b % 2, :d])

    kernel = _imh_kernel
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(fill, 0)
        for b, (c, sl) in enumerate(blocks):
            d = sl.stop - sl.start
            mm = np.ascontiguousarray(get_m(c, sl), dtype=np.float64)
            pending.result()
            if b + 1 < len(blocks):
                pending = pool.submit(fill, b + 1)
            buf = bbuf[:d]
            kernel(mm, np.ascontiguousarray(psi[c, sl], dtype=np.float64), s, rows, F, dF,
                   float(tables.lo), float(tables.h), info, that, float(kappa),
                   zbuf[b % 2, :d], ebuf[b % 2, :d], buf, acc)
            out[c, sl] = buf
            if progress is not None:
                progress((b + 1) / len(blocks))
    total = C * D * N * K * steps
    return out, (float(acc.sum()) / total if total else float("nan"))


def add_domain_scores(post, tables, quad: dict, anchors: list[int], *, seed: int = 0,
                      point: bool = False, progress: bool = False):
    """Add the domain scores ``theta_raw`` (chain, draw, llm, domain) to a
    posterior of the marginal model (free variables ``eta_raw``,
    ``loading_*``).

    Parameters
    ----------
    post : xarray.Dataset
    tables : LikelihoodTables
    quad : dict
        From :func:`quadrature_nodes`.
    anchors : list of int
    seed : int
    point : bool
        A point estimate (MAP): the conditional posterior means instead of
        random draws.
    progress : bool

    Returns
    -------
    xarray.Dataset
        With ``theta_raw`` and, for draws, the attribute
        ``mtlirt_theta_acceptance``.
    """
    import xarray as xr

    K = tables.s.shape[1]
    free = post["loading_free"].values if "loading_free" in post else None
    moments = {k: np.asarray(post[k].values, float) for k in ("eta_mean", "eta_var") if k in post}
    eta, lam, psi = factor_parts(np.asarray(post["eta_raw"].values, float), free,
                                 np.asarray(post["loading_diag"].values, float), K, anchors, **moments)
    C, D = psi.shape[:2]

    def m(c, sl):
        return np.einsum("dnr,dkr->dnk", eta[c, sl], lam[c, sl])

    attrs = dict(post.attrs)
    if point:
        theta = np.empty((C, D) + tables.s.shape, dtype=np.float32)
        for c in range(C):
            for t in range(D):
                theta[c, t] = conditional_moments(tables, m(c, slice(t, t + 1))[0], psi[c, t])[0]
    elif not progress:
        theta, acc = draw_domain_scores(tables, quad, m, psi, seed=seed)
        attrs["mtlirt_theta_acceptance"] = acc
    else:
        with progress_bar(100, "domain scores") as bar:
            done = [0]

            def tick(frac):
                n = int(100 * frac) - done[0]
                if n > 0:
                    bar.update(n)
                    done[0] += n

            theta, acc = draw_domain_scores(tables, quad, m, psi, seed=seed, progress=tick)
        attrs["mtlirt_theta_acceptance"] = acc
    out = post.assign(theta_raw=xr.Variable(("chain", "draw", "llm", "domain"), theta))
    out.attrs = attrs
    return out
