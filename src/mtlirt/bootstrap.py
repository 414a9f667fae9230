"""Bootstrap replicates of a point estimate, in parallel over cores and seeded.

Parametric bootstrap (METHOD.md §4 step 6): new answers are drawn from the
fitted item model on the observed cells only, and the same estimator, with its
tuned settings held fixed (the selected rank, the chosen shrinkage), is refit
to each replicate.  Replicate ``b`` draws from
``numpy.random.default_rng(SeedSequence(seed).spawn(B)[b])``, so the result
does not depend on the number of workers.
"""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_all_start_methods, get_context
from typing import Callable

import numpy as np

from .progress import progress_bar

Refit = Callable[[np.ndarray, "np.ndarray | None"], dict]

_STATE: dict = {}


def draw_responses(theta, a, d, c, domain_slices, observed, rng: np.random.Generator) -> np.ndarray:
    """Draw an ``N x J`` ``int8`` answer matrix from the item model (0 where unobserved)."""
    n = theta.shape[0]
    j = len(a)
    out = np.empty((n, j), dtype=np.int8)
    a32, d32 = np.asarray(a, np.float32), np.asarray(d, np.float32)
    c32 = np.zeros(j, np.float32) if c is None else np.asarray(c, np.float32)
    for k, s in enumerate(domain_slices):
        logit = np.multiply.outer(theta[:, k].astype(np.float32), a32[s])
        logit += d32[s]
        np.negative(logit, out=logit)
        np.exp(logit, out=logit)
        logit += 1.0
        np.reciprocal(logit, out=logit)  # sigmoid
        p = logit
        if c is not None:
            p *= 1 - c32[s]
            p += c32[s]
        out[:, s] = rng.random(p.shape, dtype=np.float32) < p
    if observed is not None:
        out &= observed
    return out


def resample_items(correct, observed, domain_slices, rng: np.random.Generator):
    """Resample items with replacement within each domain (a nonparametric replicate)."""
    cols = np.concatenate([rng.integers(s.start, s.stop, s.stop - s.start) for s in domain_slices])
    return correct[:, cols], None if observed is None else observed[:, cols]


def _one(b: int):
    st = _STATE
    rng = np.random.default_rng(st["seeds"][b])
    if st["kind"] == "parametric":
        p = st["point"]
        y = draw_responses(p["theta"], p["a"], p["d"], p.get("c"), st["slices"], st["observed"], rng)
        obs = st["observed"]
    else:
        y, obs = resample_items(st["correct"], st["observed"], st["slices"], rng)
    return b, st["refit"](y, obs)


def _init_worker(state: dict | None = None):
    if state is not None:  # a fresh worker process (forkserver/spawn) gets the data once
        _STATE.clear()
        _STATE.update(state)
    try:  # one BLAS thread per worker: the workers already use every core
        from threadpoolctl import threadpool_limits

        threadpool_limits(1)
    except ImportError:
        pass


def run_bootstrap(
    refit: Refit,
    *,
    n: int,
    seed: int,
    domain_slices,
    observed: np.ndarray | None,
    point: dict | None = None,
    correct: np.ndarray | None = None,
    kind: str = "parametric",
    n_jobs: int | None = None,
    desc: str = "bootstrap",
) -> dict:
    """Run ``n`` bootstrap replicates and stack their results.

    Parameters
    ----------
    refit
        ``refit(correct, observed) -> dict of arrays``: the estimator with its
        tuned settings fixed.  Must be a module-level function or a
        ``functools.partial`` of one when ``n_jobs > 1``.
    n, seed
        Number of replicates and the seed.
    domain_slices, observed
        The data's layout and observation mask (``None`` when complete).
    point
        For ``kind="parametric"``: the point estimate's ``theta`` (N x K),
        ``a``, ``d`` and optionally ``c``.
    correct
        For ``kind="items"``: the observed answers, resampled by item within domain.
    n_jobs
        Worker processes (default: the number of cores); 1 runs in-process.

    Returns
    -------
    dict
        Each key of ``refit``'s result stacked over replicates (leading axis ``n``).
    """
    if n < 2:
        raise ValueError("a bootstrap needs at least 2 replicates")
    seeds = np.random.SeedSequence(seed).spawn(n)
    _STATE.clear()
    _STATE.update(kind=kind, refit=refit, seeds=seeds, slices=domain_slices, observed=observed,
                  point=point, correct=correct)
    n_jobs = n_jobs or os.cpu_count() or 1
    results: list = [None] * n
    try:
        with progress_bar(total=n, desc=desc) as bar:
            if n_jobs == 1:
                for b in range(n):
                    results[b] = _one(b)[1]
                    bar.update(1)
            else:
                # forkserver (spawn where it is missing): forking a process that
                # runs BLAS threads can deadlock; each worker receives the data once
                method = "forkserver" if "forkserver" in get_all_start_methods() else "spawn"
                with ProcessPoolExecutor(max_workers=min(n_jobs, n), mp_context=get_context(method),
                                         initializer=_init_worker, initargs=(dict(_STATE),)) as pool:
                    futures = [pool.submit(_one, b) for b in range(n)]
                    for fut in as_completed(futures):
                        b, res = fut.result()
                        results[b] = res
                        bar.update(1)
    finally:
        _STATE.clear()
    keys = results[0].keys()
    return {k: np.stack([r[k] for r in results]) for k in keys}
