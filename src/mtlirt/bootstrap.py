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
from typing import Callable

import numpy as np

from .progress import progress_bar

Refit = Callable[[np.ndarray, "np.ndarray | None"], dict]

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


def _one(b: int, state: dict):
    """Replicate ``b``: new answers (parametric) or resampled items, then the refit."""
    rng = np.random.default_rng(state["seeds"][b])
    if state["kind"] == "parametric":
        p = state["point"]
        y = draw_responses(p["theta"], p["a"], p["d"], p.get("c"), state["slices"], state["observed"], rng)
        obs = state["observed"]
    else:
        y, obs = resample_items(state["correct"], state["observed"], state["slices"], rng)
    return b, state["refit"](y, obs)


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
        tuned settings fixed (a picklable function, e.g. a ``functools.partial``
        of a module-level function).
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
        Workers are joblib's loky processes (large arrays are shared by memory
        mapping; each worker uses one BLAS thread), which also work from
        scripts without an ``if __name__ == "__main__"`` guard and from notebooks.

    Returns
    -------
    dict
        Each key of ``refit``'s result stacked over replicates (leading axis ``n``).
    """
    if n < 2:
        raise ValueError("a bootstrap needs at least 2 replicates")
    state = dict(kind=kind, refit=refit, seeds=np.random.SeedSequence(seed).spawn(n), slices=domain_slices,
                 observed=observed, point=point, correct=correct)
    n_jobs = min(n_jobs or os.cpu_count() or 1, n)
    results: list = [None] * n
    with progress_bar(total=n, desc=desc) as bar:
        if n_jobs == 1:
            for b in range(n):
                results[b] = _one(b, state)[1]
                bar.update(1)
        else:
            from joblib import Parallel, delayed

            with Parallel(n_jobs=n_jobs, backend="loky", return_as="generator_unordered",
                          inner_max_num_threads=1) as parallel:
                for b, res in parallel(delayed(_one)(b, state) for b in range(n)):
                    results[b] = res
                    bar.update(1)
    keys = results[0].keys()
    return {k: np.stack([r[k] for r in results]) for k in keys}
