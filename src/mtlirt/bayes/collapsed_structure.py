"""The structure's posterior on the collapsed route: the loadings alone.

Coordinates (unsquashed loadings ``V``, ``Lambda = V psi``; sampling
coordinates ``x = (asinh(loading_free), log asinh(loading_diag))``), the
posterior mode by L-BFGS (:func:`find_mode`), the log density and its gradient
(:func:`structure_logp`; at many points, in threads: :func:`log_densities`), the Laplace
approximation at the mode that whitens
both samplers (:func:`laplace_whitening`), and NUTS (nutpie) of the whitened
loadings, chains started at draws from that approximation.
"""

from __future__ import annotations

import math
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from mtlirt.bayes._jax import sample_structure_numpyro
from mtlirt.bayes.collapsed_kernel import _EMPTY2, CollapsedGrid, _call, _kernel, structure_from_v
from mtlirt.bayes.diagnostics import diagnostics
from mtlirt.bayes.nuts_length import sample_until_converged
from mtlirt.progress import progress_bar

__all__ = [
    "find_mode",
    "laplace_whitening",
    "log_densities",
    "structure_logp",
    "structure_of_x",
]

# ---------------------------------------------------------------------------
# the structure's parameters: V (unsquashed loadings) <-> free variables
# ---------------------------------------------------------------------------


def _v_gradient(V: np.ndarray, dlam: np.ndarray, dpsi: np.ndarray) -> np.ndarray:
    """d/dV of a function of ``(Lambda, psi) = structure_from_v(V)``."""
    psi = 1.0 / np.sqrt(1.0 + (V**2).sum(-1))
    inner = (dlam * V).sum(-1) + dpsi
    return psi[:, None] * dlam - (psi**3)[:, None] * V * inner[:, None]


def find_mode(grid: CollapsedGrid, V0: np.ndarray, layout, loading_scale: float, *,
              maxiter: int = 200) -> tuple[np.ndarray, dict]:
    """Posterior mode of the unsquashed loadings (free entries ``N(0,
    loading_scale)``, diagonal entries half-normal) by L-BFGS-B; returns ``V``
    and the optimiser's summary."""
    from scipy.optimize import minimize

    rows, cols, drows = layout
    K, r = V0.shape
    n_free = len(rows)

    def unpack(x):
        V = np.zeros((K, r))
        V[rows, cols] = x[:n_free]
        V[drows, np.arange(r)] = x[n_free:]
        return V

    def f(x):
        V = unpack(x)
        lam, psi = structure_from_v(V)
        val, dl, dp = _call(grid, lam, psi, mode=1)
        gV = _v_gradient(V, dl, dp)
        val = val - 0.5 * (x**2).sum() / loading_scale**2
        g = np.concatenate([gV[rows, cols], gV[drows, np.arange(r)]]) - x / loading_scale**2
        return -val, -g

    x0 = np.concatenate([V0[rows, cols], V0[drows, np.arange(r)]])
    bounds = [(None, None)] * n_free + [(1e-3, None)] * r
    res = minimize(f, x0, jac=True, method="L-BFGS-B", bounds=bounds, options={"maxiter": maxiter})
    return unpack(res.x), {"iterations": int(res.nit), "evaluations": int(res.nfev),
                           "converged": bool(res.success), "message": str(res.message)}


def _v_of(free: np.ndarray | None, diag: np.ndarray, K: int, layout) -> np.ndarray:
    rows, cols, drows = layout
    r = diag.shape[-1]
    V = np.zeros(diag.shape[:-1] + (K, r))
    if len(rows):
        V[..., rows, cols] = free
    V[..., drows, np.arange(r)] = diag
    return V


def structure_logp(grid: CollapsedGrid, layout, loading_scale: float, *, gradient: bool = True):
    """The log posterior density of the structure and its gradient in the
    sampling coordinates ``x = (asinh(loading_free), log asinh(loading_diag))``
    (:func:`structure_of_x`): the collapsed marginal likelihood,
    ``loading_free ~ N(0, s)``, ``loading_diag ~ HalfNormal(s)`` (as the
    sampled route's priors) and the transform's Jacobian. With
    ``gradient=False`` the function returns the value only (the kernel's
    cheaper pass; both timed by ``benchmarks/bench_collapsed.py kernel``);
    its optional second argument, a (G, N) array, then receives every LLM's
    log posterior at its outer nodes (the kernel's ``node_out``).

    At rank 1 ``asinh(V_k)`` is Fisher's z of the loading ``lambda_k = V_k /
    sqrt(1 + V_k^2)``, ``atanh(lambda_k)``: the posterior is much closer to
    Gaussian there than in ``V`` itself, whose right tail is long where
    loadings approach 1, which the Laplace approximation
    (NUTS's whitening, the IMH proposal) relies on.

    Where a residual sd ``psi_k`` falls below what the grid's inner nodes
    resolve (:meth:`~mtlirt.bayes.collapsed_kernel.CollapsedGrid.resolvable_psi`)
    the density is ``-inf``: the quadrature would overstate it there. The
    grid is spaced so that this lies beyond ``PSI_REACH`` posterior sds of
    the mode (:func:`~mtlirt.bayes.collapsed_grid.psi_reach`)."""
    rows, cols, drows = layout
    N, K = grid.shape
    r = grid.rank
    n_free = len(rows)
    inv_s2 = 1.0 / loading_scale**2
    e2 = _EMPTY2
    arrays = grid.arrays
    ar = np.arange(r)
    floor = grid.resolvable_psi()

    def logp(x, nodes=None):
        x = np.asarray(x, dtype=np.float64)
        u, w = x[:n_free], x[n_free:]
        free, diag = structure_of_x(x, n_free)
        ea = np.exp(w)
        V = np.zeros((K, r))
        V[rows, cols] = free
        V[drows, ar] = diag
        psi = 1.0 / np.sqrt(1.0 + (V**2).sum(-1))
        if np.any(psi < floor):
            return -math.inf if not gradient else (-math.inf, np.zeros(n_free + r))
        lam = V * psi[:, None]
        val, dl, dp = _kernel(*arrays, lam, psi, int(gradient), e2 if nodes is None else nodes, e2, e2)
        val = (val - 0.5 * inv_s2 * ((free**2).sum() + (diag**2).sum())
               + _log_cosh(u).sum() + (_log_cosh(ea) + w).sum())
        if not gradient:
            return float(val)
        gV = _v_gradient(V, dl, dp)
        g = np.empty(n_free + r)
        g[:n_free] = (gV[rows, cols] - inv_s2 * free) * np.cosh(u) + np.tanh(u)
        g[n_free:] = (gV[drows, ar] - inv_s2 * diag) * np.cosh(ea) * ea + np.tanh(ea) * ea + 1.0
        return float(val), g

    return logp


def log_densities(f, xc: np.ndarray, T: np.ndarray, z: np.ndarray, cores: int, progress: bool,
                   desc: str, totals: np.ndarray | None = None) -> np.ndarray:
    """``f(xc + T z_j)`` for every row of ``z``, in ``cores`` threads (the
    kernel releases the GIL); with ``totals`` (len(z), G, N), each
    evaluation's node totals (``f``'s second argument) less each LLM's
    largest go to its row (left unset where the density is -inf: beyond
    what the nodes resolve, ``f`` does not evaluate them)."""
    lp = np.empty(len(z))
    chunk = max(1, len(z) // (50 * max(1, cores)))

    def run(a):
        b = min(len(z), a + chunk)
        buf = None if totals is None else np.empty(totals.shape[1:])
        for j in range(a, b):
            if buf is None:
                lp[j] = f(xc + T @ z[j])
            else:
                lp[j] = f(xc + T @ z[j], buf)
                if np.isfinite(lp[j]):  # else the density was not evaluated and buf holds no totals
                    totals[j] = buf - buf.max(axis=0)
        return b - a

    with ThreadPoolExecutor(max(1, int(cores))) as pool:
        if progress:
            with progress_bar(len(z), desc) as bar:
                for done in pool.map(run, range(0, len(z), chunk)):
                    bar.update(done)
        else:
            list(pool.map(run, range(0, len(z), chunk)))
    return lp


def _log_cosh(t: np.ndarray) -> np.ndarray:
    a = np.abs(t)
    return a + np.log1p(np.exp(-2.0 * a)) - math.log(2.0)


def structure_of_x(x: np.ndarray, n_free: int) -> tuple[np.ndarray, np.ndarray]:
    """``(loading_free, loading_diag)`` from the sampling coordinates ``x``
    (last axis): ``sinh(x_free)`` and ``sinh(exp(x_diag))``."""
    x = np.asarray(x, dtype=np.float64)
    return np.sinh(x[..., :n_free]), np.sinh(np.exp(x[..., n_free:]))


def _x_of(V: np.ndarray, layout) -> np.ndarray:
    """The sampling coordinates of the structure ``V`` (inverse of :func:`structure_of_x`)."""
    rows, cols, drows = layout
    r = len(drows)
    return np.concatenate([np.arcsinh(V[rows, cols]), np.log(np.arcsinh(np.maximum(V[drows, np.arange(r)], 1e-3)))])


def laplace_whitening(logp, x0: np.ndarray, *, eps: float = 1e-4,
                      cores: int = 1) -> tuple[np.ndarray, np.ndarray, dict]:
    """The Laplace approximation of a log density at (near) its mode: centre
    ``xc`` (one Newton step from ``x0``) and a square root ``T`` of its
    covariance (``T T' = (-H)^-1``, ``H`` the Hessian by forward differences
    of the gradient, symmetrised: ``n + 1`` evaluations, ``cores`` at a time; its
    relative error, of the order of ``eps``, moves a proposal or a mass matrix
    by nothing that matters). In ``z = T^-1 (x - xc)`` the
    posterior is close to ``N(0, I)``: NUTS starts with the right scales and
    correlations instead of learning them in the warm-up. Where ``-H`` is not
    positive definite, ``T`` is diagonal (or the identity)."""
    x0 = np.asarray(x0, dtype=np.float64)
    n = len(x0)

    f0, g0 = logp(x0)[:2]

    def column(j):
        e = np.zeros(n)
        e[j] = eps
        return (logp(x0 + e)[1] - g0) / eps

    with ThreadPoolExecutor(max(1, int(cores))) as pool:
        H = np.column_stack(list(pool.map(column, range(n))))
    H = 0.5 * (H + H.T)
    try:
        L = np.linalg.cholesky(-H)
        T = np.linalg.solve(L, np.eye(n)).T
        step = T @ (T.T @ g0)
        kind = "full"
    except np.linalg.LinAlgError:
        d = -np.diagonal(H)
        T = np.diag(np.where(d > 0, 1.0 / np.sqrt(np.where(d > 0, d, 1.0)), 1.0))
        step = np.zeros(n)
        kind = "diagonal"
    # one Newton step, kept only if it does not lower the density (x0 is the
    # mode on a slightly different scale: the log transform's Jacobian)
    xc = x0 + step
    if not logp(xc)[0] >= f0:
        xc = x0
    sd = np.sqrt((T**2).sum(1))
    return xc, T, {"kind": kind, "sd_min": float(sd.min()), "sd_max": float(sd.max()),
                   "newton_step_max": float(np.abs(xc - x0).max())}


def _nutpie_model(grid: CollapsedGrid, layout, loading_scale: float, V0: np.ndarray, coords: dict, r: int,
                  whiten: bool = True, info: dict | None = None, laplace: tuple | None = None):
    """nutpie's model of the structure from a Python log density (no graph to
    compile; the kernel releases the GIL, so chains run in parallel). With
    ``whiten``, NUTS samples ``z`` with ``x = xc + T z``
    (:func:`laplace_whitening`), chains started at draws of ``N(0, I)``."""
    from nutpie.compiled_pyfunc import from_pyfunc

    rows, cols, drows = layout
    n_free = len(rows)
    x0 = _x_of(V0, layout)
    names, shapes = (["loading_free"], [(n_free,)]) if n_free else ([], [])
    names, shapes = names + ["loading_diag"], shapes + [(r,)]
    if whiten:
        xc, T, winfo = laplace if laplace is not None else _laplace(grid, layout, loading_scale, x0)
        if info is not None:
            info["whitening"] = winfo
    else:
        xc, T = x0, np.eye(len(x0))

    def make_logp():
        f = structure_logp(grid, layout, loading_scale)
        if not whiten:
            return f

        def logp(z):
            v, g = f(xc + T @ z)
            return v, T.T @ g

        return logp

    def make_expand(seed1, seed2, chain):
        def expand(z):
            x = xc + T @ np.asarray(z, dtype=np.float64) if whiten else np.asarray(z, dtype=np.float64)
            free, diag = structure_of_x(x, n_free)
            out = {"loading_free": free} if n_free else {}
            out["loading_diag"] = diag
            return out

        return expand

    def init_point(seed):
        rng = np.random.default_rng(seed)
        if whiten:
            return rng.standard_normal(x0.shape)
        return x0 + 1e-3 * rng.standard_normal(x0.shape)

    return from_pyfunc(len(x0), make_logp, make_expand, [np.dtype("float64")] * len(names), shapes, names,
                       make_initial_point_fn=init_point)


def _sample_loadings(grid: CollapsedGrid, layout, loading_scale: float, V2: np.ndarray, coords: dict, r: int, *,
                     sampler, draws, tune, chains, cores, seed, target_accept, progress, nuts_kwargs, whiten,
                     stages: dict, whitening_info: dict, laplace: tuple | None = None):
    """NUTS on the loadings from the mode ``V2``, by nutpie (whitened by the
    Laplace approximation when ``whiten``: its record in ``whitening_info``) or
    numpyro: ``(posterior, sample_stats)``, the free loadings and the per-draw
    stats, with integer chain and draw coordinates; the compile time in
    ``stages["compile"]``."""
    import xarray as xr

    t2 = time.perf_counter()
    kw = dict(nuts_kwargs or {})
    if "max_treedepth" in kw:
        kw["maxdepth"] = kw.pop("max_treedepth")
    target_given = target_accept is not None or "target_accept" in kw
    kw.setdefault("target_accept", 0.9 if target_accept is None else target_accept)
    rows = layout[0]
    free_names = ["loading_free", "loading_diag"] if len(rows) else ["loading_diag"]
    if sampler == "numpyro":
        stages["compile"] = 0.0
        pd, sd = sample_structure_numpyro(grid, layout, loading_scale, V2, draws=draws, tune=tune,
                                          chains=chains, seed=seed, target_accept=kw["target_accept"],
                                          progress=progress)
        post = xr.Dataset({k: (("chain", "draw") + tuple(f"{k}_dim_{i}" for i in range(v.ndim - 2)), v)
                           for k, v in pd.items()})
        ss = xr.Dataset({k: (("chain", "draw"), v) for k, v in sd.items()})
    else:
        import nutpie

        compiled = _nutpie_model(grid, layout, loading_scale, V2, coords, r, whiten=whiten, info=whitening_info,
                                 laplace=laplace)
        stages["compile"] = time.perf_counter() - t2
        if draws is None:  # until the checks pass; the target acceptance raised after a divergence
            idata, kw["target_accept"], whitening_info["run_length"] = sample_until_converged(
                compiled, tune=tune, chains=chains, seed=seed, progress=progress, kw=kw, names=free_names,
                raise_target=not target_given)
        else:
            idata = nutpie.sample(compiled, draws=draws, tune=max(int(tune), 1), chains=chains, cores=cores,
                                  seed=int(seed), save_warmup=False, progress_bar=bool(progress), **kw)
        post = idata["posterior"].to_dataset()
        ss = idata["sample_stats"].to_dataset()
        del idata
    whitening_info["target_accept"] = kw["target_accept"]
    post = post[free_names].load()
    post = post.assign_coords(chain=np.arange(post.sizes["chain"]), draw=np.arange(post.sizes["draw"]))
    ss = ss[[v for v in ss.data_vars if set(ss[v].dims) <= {"chain", "draw"}]].load()
    ss = ss.assign_coords(chain=np.arange(ss.sizes["chain"]), draw=np.arange(ss.sizes["draw"]))
    return post, ss

def _laplace(grid: CollapsedGrid, layout, loading_scale: float, x0: np.ndarray, cores: int = 1) -> tuple:
    """:func:`laplace_whitening` of the structure at ``x0`` (the kernel releases the GIL: ``cores``
    gradients at a time), timed: ``(xc, T, info)``."""
    t0 = time.perf_counter()
    xc, T, winfo = laplace_whitening(structure_logp(grid, layout, loading_scale), x0, cores=cores)
    winfo["seconds"] = time.perf_counter() - t0
    return xc, T, winfo

def _structure_draws(post, K: int, layout) -> tuple[np.ndarray, np.ndarray]:
    """The loadings and residual scales (C, D, K, r), (C, D, K) of the sampled structure's draws."""
    free = post["loading_free"].values if "loading_free" in post else None
    return structure_from_v(_v_of(free, post["loading_diag"].values, K, layout))


def _structure_diagnostics(post, ss, lam: np.ndarray) -> dict:
    """The convergence diagnostics of the sampled loadings and the reported
    loadings ``lam`` (C, D, K, r), as :func:`mtlirt.bayes.fit_bayes` checks
    them, on these draws."""
    import xarray as xr

    p = post.assign(loadings=xr.Variable(("chain", "draw", "domain", "factor"), lam))
    p.attrs = {"mtlirt_algorithm": "nuts"}
    names = [v for v in ("loading_free", "loading_diag") if v in p] + ["loadings"]
    out = diagnostics(xr.DataTree.from_dict({"posterior": p, "sample_stats": ss}), var_names=names, recompute=True)
    out["computed_on"] = f"all {p.sizes['chain']} x {p.sizes['draw']} structure draws, before thinning"
    return out


