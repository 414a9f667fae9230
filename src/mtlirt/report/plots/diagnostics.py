"""Plots of sampler diagnostics: rank plots of the chains with their R-hat."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from ...numerics.mcmc_stats import rhat_rank


def rank_rhat(x: np.ndarray) -> np.ndarray:
    """Rank-normalised split R-hat (bulk and folded, the larger), vectorised.

    Parameters
    ----------
    x : numpy.ndarray
        Draws ``chain x draw x m``.

    Returns
    -------
    numpy.ndarray
        ``m`` values (Vehtari et al. 2021), from the package's one R-hat
        (:func:`mtlirt.numerics.mcmc_stats.rhat_rank`); used to pick the
        elements shown by :func:`convergence`.
    """
    return rhat_rank(np.asarray(x, dtype=float))


def _worst(rhat: np.ndarray, max_panels: int) -> np.ndarray:
    flat = np.nan_to_num(np.asarray(rhat, float).ravel(), nan=np.inf)
    return np.argsort(-flat, kind="stable")[:max_panels]


def convergence(est, var_names=None, kind: str = "rank", *, max_panels: int = 8, coords=None,
                **kwargs) -> Figure:
    """ArviZ convergence plot (rank, trace or ESS) of a posterior with several chains.

    Variables with more than one element (``overall`` has one per LLM) are
    cut to the ``max_panels`` elements with the largest R-hat, each drawn as
    its own panel titled ``var[label]``.

    Parameters
    ----------
    est : Estimate
        A posterior with at least two chains.
    var_names : str or sequence of str, optional
        Variables; default ``["overall"]``.
    kind : {"rank", "trace", "ess"}
        :func:`arviz_plots.plot_rank`, :func:`~arviz_plots.plot_trace` or
        :func:`~arviz_plots.plot_ess`.
    max_panels : int
        Elements per variable (those with the worst R-hat).
    coords : dict, optional
        Selection applied before (e.g. ``{"domain": ["anatomy"]}``).
    **kwargs
        Passed to the ArviZ function.

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    ValueError
        For a point estimate (one chain) or an unknown ``kind`` or variable.
    """
    import xarray as xr

    funcs = {"rank": "plot_rank", "trace": "plot_trace", "ess": "plot_ess"}
    if kind not in funcs:
        raise ValueError(f"kind must be one of {sorted(funcs)}, not {kind!r}")
    post = est.posterior
    if post.sizes["chain"] < 2 or post.sizes["draw"] < 4:
        raise ValueError(f"convergence plots need a posterior with several chains; the {est.method!r} estimate has "
                         f"{post.sizes['chain']} chain(s) x {post.sizes['draw']} draw(s)")
    if var_names is None:
        var_names = ["overall"]
    elif isinstance(var_names, str):
        var_names = [var_names]
    if coords:
        post = post.sel({k: v for k, v in coords.items() if k in post.dims})
    data = {}
    for v in var_names:
        if v not in post:
            raise ValueError(f"unknown variable {v!r}; the posterior has {sorted(post.data_vars)}")
        da = post[v].transpose("chain", "draw", ...)
        extra = [d for d in da.dims if d not in ("chain", "draw")]
        if not extra:
            data[v] = (("chain", "draw"), da.values)
            continue
        vals = da.values
        flat = vals.reshape(vals.shape[:2] + (-1,))
        rh = rank_rhat(flat)
        grid = np.meshgrid(*[da[d].values.astype(str) for d in extra], indexing="ij")
        labels = [", ".join(str(x) for x in combo) for combo in np.array(grid).reshape(len(extra), -1).T]
        for j in _worst(rh, max_panels):
            data[f"{v}[{labels[j]}]"] = (("chain", "draw"), flat[:, :, j])
    ds = xr.Dataset(data, coords={"chain": post["chain"].values, "draw": post["draw"].values})
    tree = xr.DataTree.from_dict({"posterior": ds})
    import arviz_plots as azp

    n_panels = len(data)
    fkw = dict(kwargs.pop("figure_kwargs", {}) or {})
    fkw.setdefault("layout", "constrained")
    cols = min(4, n_panels)
    rows = -(-n_panels // 4)
    fkw.setdefault("figsize", (3.4 * cols + 0.4, 2.6 * rows + 0.6))
    pc = getattr(azp, funcs[kind])(tree, backend="matplotlib", figure_kwargs=fkw, **kwargs)
    fig = pc.get_viz("figure")
    if hasattr(fig, "item") and not isinstance(fig, Figure):
        fig = fig.item()
    what = {"rank": "Rank plots", "trace": "Traces", "ess": "Local ESS"}[kind]
    cut = any(np.prod([post.sizes[d] for d in post[v].dims if d not in ("chain", "draw")]) > max_panels
              for v in var_names)
    fig.suptitle(f"{what} of {', '.join(var_names)} ({est.method}; {post.sizes['chain']} chains x "
                 f"{post.sizes['draw']} draws)" + (f"; per variable the {max_panels} elements with the largest R-hat"
                                                   if cut else ""), fontsize=9)
    return fig
