"""The algorithms of the sampled routes on a built PyMC model: NUTS (nutpie, PyMC or numpyro), ADVI or MAP,
each giving the posterior of the free variables in the ArviZ layout (chain x draw x ...)."""

from __future__ import annotations

import os
import warnings

import numpy as np
import xarray as xr

from mtlirt.bayes._nutpie import compile_model, relabel
from mtlirt.bayes.derived import trait_draws
from mtlirt.bayes.diagnostics import _QOI, _UNIDENTIFIED
from mtlirt.bayes.nuts_length import sample_until_converged
from mtlirt.config import NUTS_DRAWS, NUTS_DRAWS_MAX
from mtlirt.progress import stage

DISK_TRACE_BYTES = 1e9


def _free_names(model) -> list[str]:
    return [rv.name for rv in model.free_RVs]


def _dims_of(model, name: str, shape: tuple) -> tuple:
    dims = model.named_vars_to_dims.get(name)
    if dims is None or any(d is None for d in dims):
        return tuple(f"{name}_dim_{i}" for i in range(len(shape)))
    return tuple(dims)


def _dataset_from_draws(model, values: dict) -> xr.Dataset:
    """values: name -> array (chain, draw, ...)."""
    data = {}
    for name, v in values.items():
        v = np.asarray(v)
        data[name] = (("chain", "draw") + _dims_of(model, name, v.shape[2:]), v)
    C, D = next(iter(values.values())).shape[:2]
    coords = {"chain": np.arange(C), "draw": np.arange(D)}
    for k, v in model.coords.items():
        if k != "obs" and v is not None:
            coords[k] = list(v)
    ds = xr.Dataset(data, coords={k: v for k, v in coords.items()})
    used = set(ds.dims)
    return ds.drop_vars([c for c in list(ds.coords) if c not in used and c not in ("chain", "draw")])


def _sample_nutpie(model, initvals, *, draws, tune, chains, cores, seed, progress, kw, until=None):
    """nutpie directly (numba backend): same compile as ``pm.sample(nuts_sampler=
    "nutpie")``, but it also works with a zarr trace store. ``until`` (a dict: the variables to check and
    whether to raise the target acceptance): draws until the checks pass
    (:func:`mtlirt.bayes.nuts_length.sample_until_converged`, whose record it fills in)."""
    import nutpie

    kw = dict(kw)
    if "max_treedepth" in kw:
        kw["maxdepth"] = kw.pop("max_treedepth")
    compiled = compile_model(model, initvals)
    if until is not None:
        trace, kw["target_accept"], record = sample_until_converged(
            compiled, tune=tune, chains=chains, seed=seed, progress=progress, kw=kw, names=until["names"],
            raise_target=until["raise_target"], most=until["most"], derive=until.get("derive"))
        until.update(record=record, target_accept=kw["target_accept"])
        return relabel(trace, model)
    trace = nutpie.sample(compiled, draws=draws, tune=max(int(tune), 1), chains=chains,
                          cores=cores, seed=int(seed), save_warmup=False,
                          progress_bar=bool(progress), **kw)
    return relabel(trace, model)


def _run_algorithm(built, free, *, algorithm, sampler, draws, tune, chains, cores, seed, progress, target_accept,
                   nuts_kwargs, trace_dir, advi_iterations, map_maxiter):
    """NUTS, ADVI or MAP on the built model: ``(posterior, sample_stats or None, target_accept, run length
    record or None)``.

    NUTS's default target acceptance: 0.8 with the domain traits integrated out
    (``built.marginal``), else 0.9; raised after divergences where the checks choose the run length."""
    if algorithm == "nuts":
        given = target_accept is not None or "target_accept" in (nuts_kwargs or {})
        if target_accept is None:
            target_accept = 0.8 if built.marginal is not None else 0.9
        return _run_nuts(built.model, built.initvals, free, sampler=sampler, draws=draws, tune=tune, chains=chains,
                         cores=cores, seed=seed, progress=progress, target_accept=target_accept,
                         nuts_kwargs=nuts_kwargs, trace_dir=trace_dir, raise_target=not given,
                         derive=_reported(built, free))
    if algorithm == "advi":
        post = _run_advi(built.model, built.initvals, free, draws=draws, seed=seed, progress=progress,
                         iterations=advi_iterations)
    else:
        post = _run_map(built.model, built.initvals, free, seed=seed, progress=progress, maxiter=map_maxiter)
    return post, None, target_accept, None


def _run_nuts(model, initvals, free, *, sampler, draws, tune, chains, cores, seed, progress, target_accept,
              nuts_kwargs, trace_dir, raise_target=False, derive=None):
    """NUTS on a PyMC model: (posterior of the free variables, sample stats,
    target acceptance used, run length record or None). ``draws=None``: nutpie draws until the
    convergence checks pass (:mod:`mtlirt.bayes.nuts_length`; with the reported quantities ``derive``
    computes, :func:`_reported`) where its trace stays in memory and every chain may run at once;
    ``NUTS_DRAWS`` per chain elsewhere."""
    import pymc as pm

    kw = dict(nuts_kwargs or {})
    kw.setdefault("target_accept", target_accept)
    target_accept = kw["target_accept"]
    n_stored = sum(int(np.size(v)) for v in model.initial_point().values()) if sampler == "nutpie" else 0
    until, why = _until(free, n_stored, sampler=sampler, draws=draws, chains=chains, cores=cores, kw=kw,
                        trace_dir=trace_dir, raise_target=raise_target)
    if until is not None and derive is not None:
        until["derive"] = derive
    fixed_rule = None if why is None else {"rule": f"{NUTS_DRAWS:,} draws per chain: {why}", "draws": NUTS_DRAWS}
    draws = until["most"] if until is not None else (NUTS_DRAWS if draws is None else draws)
    cores = cores or max(1, min(chains, os.cpu_count() or 1))
    trace_tmp = None
    if sampler == "nutpie" and "zarr_store" not in kw and until is None:
        est = 8.0 * chains * draws * n_stored
        if trace_dir is not None or est > DISK_TRACE_BYTES:
            import tempfile

            import nutpie

            trace_tmp = tempfile.mkdtemp(prefix="mtlirt-trace-", dir=trace_dir)
            kw["zarr_store"] = nutpie.zarr_store.LocalStore(trace_tmp)
    stage(f"sampling {chains} chains x " + (f"{NUTS_DRAWS:,}-{draws:,} draws (until the checks pass)"
                                             if until is not None else f"{draws:,} draws")
          + f" after {tune:,} tuning steps ({sampler})")
    sample_stats = None
    try:
        if sampler == "nutpie":
            idata = _sample_nutpie(model, initvals, draws=draws, tune=tune, chains=chains,
                                   cores=cores, seed=seed, progress=progress, kw=kw, until=until)
        else:
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=".*idata_kwargs.*")
                idata = pm.sample(
                    draws=draws, tune=tune, chains=chains, cores=cores, random_seed=seed,
                    nuts_sampler=sampler, initvals=initvals, progressbar=progress,
                    compute_convergence_checks=False, model=model, nuts=kw,
                )
        post = idata["posterior"].to_dataset()
        post = post[[v for v in free if v in post]].load()
        post = post.assign_coords(chain=np.arange(post.sizes["chain"]), draw=np.arange(post.sizes["draw"]))
        if "sample_stats" in idata.children:
            ss = idata["sample_stats"].to_dataset()
            ss = ss[[v for v in ss.data_vars if set(ss[v].dims) <= {"chain", "draw"}]].load()
            sample_stats = ss.assign_coords(chain=np.arange(ss.sizes["chain"]), draw=np.arange(ss.sizes["draw"]))
        del idata
    finally:
        if trace_tmp is not None:
            import shutil

            shutil.rmtree(trace_tmp, ignore_errors=True)
    if until is None:
        return post, sample_stats, target_accept, fixed_rule
    return post, sample_stats, until["target_accept"], until["record"]


def _reported(built, free):
    """Where NUTS samples the LLM side (the joint and sampled routes): a function of a trace's free
    variables (chain, draw, ...) giving the reported traits the fit's verdict checks (``theta``,
    ``overall``, ``eta``, ``loadings``: :func:`mtlirt.bayes.derived.trait_draws`), so the run-length
    checks stop a run only where the verdict then passes; else None."""
    factor = built.spec.traits == "factor"
    needs = ("eta_raw",) if factor else ("corr_chol",)
    if not all(v in free for v in needs) or not any(v in free for v in ("z", "theta_raw")):
        return None
    domains = [str(d) for d in built.model.coords["domain"]]

    def derive(post: xr.Dataset) -> dict:
        traits = trait_draws(relabel(post, built.model), built.spec, built.anchors, domains)
        return {k: xr.Variable(("chain", "draw") + tuple(f"{k}_dim_{i}" for i in range(v.ndim - 2)), v)
                for k, v in traits.items() if k in _QOI}

    return derive


def _until(free, n_stored: int, *, sampler, draws, chains, cores, kw, trace_dir, raise_target) -> tuple:
    """Whether nutpie's run length is left to the checks (``draws=None``; a trace of more than
    ``NUTS_DRAWS`` draws per chain of ``n_stored`` values each within ``DISK_TRACE_BYTES`` in memory, at
    most ``NUTS_DRAWS_MAX``:
    ``most``; no trace store asked for; ``cores``, where given, runs every chain at
    once): ``(the variables to check and whether to raise the target acceptance, None)`` (``eta_raw``'s
    location and scale over the LLMs are not identified), or ``(None, why not)`` where ``draws`` is None,
    ``(None, None)`` where it was given."""
    if draws is not None:
        return None, None
    if sampler != "nutpie":
        return None, f"the {sampler} sampler cannot be stopped when the checks pass"
    if "zarr_store" in kw or trace_dir is not None:
        return None, "a trace written to disk"
    if cores is not None and cores < chains:
        return None, f"{cores} cores for {chains} chains (the checks need every chain running)"
    most = min(NUTS_DRAWS_MAX, int(DISK_TRACE_BYTES // (8 * chains * max(n_stored, 1))))
    if most <= NUTS_DRAWS:
        return None, f"a longer trace in memory would exceed {DISK_TRACE_BYTES / 1e9:g} GB"
    return {"names": [v for v in free if v not in _UNIDENTIFIED], "raise_target": raise_target, "most": most}, None


def _run_advi(model, initvals, free, *, draws, seed, progress, iterations):
    import pymc as pm

    with model:
        approx = pm.fit(n=iterations, method="advi", random_seed=seed, start=initvals,
                        progressbar=progress)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with model:
            idata = approx.sample(draws, random_seed=int(seed))
    post = idata["posterior"].to_dataset()
    post = post[[v for v in free if v in post]]
    post.attrs["advi_final_loss"] = float(approx.hist[-1]) if len(approx.hist) else float("nan")
    return post


def _run_map(model, initvals, free, *, seed, progress, maxiter):
    """The posterior mode (L-BFGS). The fixed-items models' overall traits' mean and variance over the
    LLMs (``eta_mean``, ``eta_var``) stay at the prior's 0 and 1: a mode over them as well is one in
    the coordinates of the standardised traits, where the N(0, 1) prior no longer shrinks each LLM's
    trait, and its scores spread like unshrunk estimates (on ``simulate(300, [8, 8, 10, 12, 30, 40],
    similarity=0.2, seed=13)`` the mean slope of the true domain scores on them was 0.939, where
    ``tests/test_mtl.py`` wants 0.95-1.03); held at the prior's, the mode reports the posterior-mean-like
    scale of "The estimand"."""
    import pymc as pm

    held = [v for v in ("eta_mean", "eta_var") if v in free]
    opt = None
    if held:
        r = len(model.coords["factor"])
        initvals = {**(initvals or {}), "eta_mean": np.zeros(r), "eta_var": np.ones(r)}
        opt = [model[v] for v in free if v not in held]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        point = pm.find_MAP(initvals=initvals, model=model, progressbar=progress, vars=opt,
                            random_seed=seed, jitter=False, maxiter=maxiter)
    msgs = [str(w.message) for w in caught if "did not converge" in str(w.message)]
    post = _dataset_from_draws(model, {v: np.asarray(point[v])[None, None] for v in free})
    post.attrs["mtlirt_map_converged"] = int(not msgs)
    if msgs:
        post.attrs["mtlirt_map_message"] = msgs[0]
    return post
