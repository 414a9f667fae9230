"""The world of a fit's error bootstrap, the one copy: the truths MTL's (its paper variants') and STL's
bootstrap replicates are drawn from, and the replicates turned into draws of ``estimate - error``."""

from __future__ import annotations

import numpy as np

from .bootstrap import deviation_spread, overall_spread
from .deviations import deviation_variance


def error_world(responses, arr: dict, *, method: str, variant: str = "default", pop: dict | None = None,
                empty: np.ndarray | None = None, corr: np.ndarray | None = None) -> dict:
    """The world of a fit's error bootstrap (``bootstrap.run_bootstrap``, ``kind="world"``), the one copy:
    :func:`~mtlirt.fitting.fit`'s bootstrap draws its replicates' truths from it, and so does the correlation check's
    ``world="estimate"`` (:func:`mtlirt.evaluate.checks.correlation_check`), from what the estimate records.

    ``arr``: the reported fit (``theta``, ``overall``, ``eta``, ``centre``, ``a``, ``d``, ``c``), ``pop``
    its ``info["population_scale"]``, ``empty`` its cells without responses, ``corr`` (STL) the
    cross-domain correlations. MTL: :func:`_mtl_world`, the fitted model itself (its centre, loadings and
    items; the deviations' spread by moments); its paper variants: :func:`_paper_world`; STL:
    :func:`_stl_world`. ``psi`` holds the deviations' spreads (``info["deviation_spread"]``)."""
    if method == "stl":
        return _stl_world(arr, pop, corr)
    if method != "mtl":
        raise ValueError(f"the {method} fit has no error bootstrap")
    if variant != "default":
        return _paper_world(responses, arr)
    return _mtl_world(responses, arr, pop, empty)


def _mtl_world(responses, arr: dict, pop: dict | None = None, empty: np.ndarray | None = None) -> dict:
    """The error bootstrap's world of MTL: shared traits around the fitted ones, the fit's centre,
    deviations with each domain's estimated spread.

    A domain trait has unit variance on the population scale (``pop``: population ``= theta * scale +
    loc``), ``1 / scale^2`` on the reported one, and a deviation from it cannot have more; a domain
    without any response (``empty``) has no moments, and its deviations get what the centre leaves,
    ``1 / scale^2 - ||W_k||^2``: the prior predictive of a trait the data say nothing about."""
    eta = arr["eta"] if arr.get("eta") is not None else arr["overall"][:, None]
    eta_c = eta - eta.mean(axis=0)  # the centre's slopes on the shared traits (its loadings)
    W = np.linalg.lstsq(eta_c, arr["centre"] - arr["centre"].mean(axis=0), rcond=None)[0].T
    # the centre is fitted to these data: moments with its leverage (bootstrap.deviation_spread)
    psi, cell_info = deviation_spread(responses.correct, responses.mask, responses.domain_slices,
                                      arr["centre"], arr["a"], arr["d"], arr["c"], return_info=True,
                                      loadings=W)
    if pop is not None:
        var = 1.0 / np.asarray(pop["scale"]) ** 2
        psi = np.minimum(psi, var)
        if empty is not None:
            psi = np.where(empty.all(axis=0), np.maximum(var - (W**2).sum(axis=1), 1e-3), psi)
    return dict(centre=arr["centre"], psi=psi, eta=eta, eta_var=overall_spread(cell_info, psi, W),
                loadings=W, a=arr["a"], d=arr["d"], c=arr["c"])

def _paper_world(responses, arr: dict, n_iter: int = 3) -> dict:
    """The error bootstrap's world of the paper variants.

    The paper's model (METHOD.md §4b) around the fit: ``theta_t = sqrt(1 - psi_t) g* + sqrt(psi_t) z``,
    ``g*`` the fit's general trait ``g`` plus its approximate posterior spread
    (:func:`~mtlirt.estimators.bootstrap.overall_spread`), ``psi_t`` each domain's spread about
    ``sqrt(1 - psi_t) g`` by its posterior mean (:func:`~mtlirt.estimators.deviations.deviation_variance`,
    corrected for the domain's share of the information on ``g`` in the paper's ``1/J_t``-weighted
    objective; iterated with the loading ``sqrt(1 - psi_t)``), the fit's items.  A fused fit has no
    deviations left, so answers redrawn from it cannot show the error of fusing; this world has them."""
    g = arr["overall"]
    eta = ((g - g.mean()) / g.std())[:, None]
    slices = responses.domain_slices
    sizes = np.array([s.stop - s.start for s in slices], dtype=np.float64)
    psi = np.zeros(arr["theta"].shape[1])
    for _ in range(n_iter):
        W = np.sqrt(1.0 - psi)[:, None]
        centre = eta @ W.T
        cell_info = _cell_information(responses, centre, arr["a"], arr["d"])
        share = cell_info.mean(axis=0) / sizes
        psi_new = np.minimum(deviation_variance(responses.correct, responses.mask, slices, centre, arr["a"], arr["d"],
                                                leverage=share / share.sum()), 0.99)
        done = np.abs(psi_new - psi).max() < 1e-4
        psi = psi_new
        if done:
            break
    W = np.sqrt(1.0 - psi)[:, None]
    return dict(centre=eta @ W.T, psi=psi, eta=eta, eta_var=overall_spread(cell_info, psi, W), loadings=W,
                a=arr["a"], d=arr["d"], c=None)


def _cell_information(responses, theta: np.ndarray, a: np.ndarray, d: np.ndarray) -> np.ndarray:
    """Fisher information ``sum_j a_j^2 p (1 - p)`` of each LLM's observed answers in each domain at ``theta``."""
    out = np.empty(theta.shape)
    for k, s in enumerate(responses.domain_slices):
        p = 1.0 / (1.0 + np.exp(-(theta[:, k][:, None] * a[s] + d[s])))
        v = a[s] ** 2 * p * (1.0 - p)
        out[:, k] = (v if responses.mask is None else v * responses.mask[:, s]).sum(axis=1)
    return out


def _sine_centres(world_theta: np.ndarray, world_shared: np.ndarray) -> np.ndarray:
    """Each replicate's sine centre of its true domain traits (B x N), signed like its shared trait."""
    from .sine_centre import sine_centre

    out = np.empty(world_shared.shape)
    for b, (truth, shared) in enumerate(zip(world_theta, world_shared)):
        t = truth - truth.mean(axis=0)
        c = sine_centre(t.T, start=shared)[0]
        out[b] = c if c @ shared >= 0 else -c
    return out


def _stl_world(arr: dict, pop: dict, corr: np.ndarray) -> dict:
    """The error bootstrap's world of STL.

    New traits from the population, ``N(0, R)`` on the population scale
    (unit variances, ``R`` the estimated cross-domain correlations: STL
    fits each domain alone, so ``R`` changes no domain's error, only the
    correlations' replicates), mapped to the reported scale
    (``population = theta * scale + loc``); the items are the fit's.
    """
    loc, scale = np.asarray(pop["loc"]), np.asarray(pop["scale"])
    N, K = arr["theta"].shape
    w, v = np.linalg.eigh(np.nan_to_num(corr))
    L = v * np.sqrt(np.clip(w, 0.0, None))
    L /= np.maximum(np.linalg.norm(L, axis=1, keepdims=True), 1e-12)  # unit variances
    return dict(centre=np.tile(-loc / scale, (N, 1)), psi=np.zeros(K), eta=np.zeros((N, K)),
                eta_var=np.ones((N, K)), loadings=L / scale[:, None], a=arr["a"], d=arr["d"], c=arr["c"])


def _error_draws(boot: dict, arr: dict, empty: np.ndarray, population: np.ndarray | None = None) -> None:
    """Turn world replicates into draws of ``estimate - error`` (in place).

    The error of replicate ``b`` is its refit minus its truth, the truth
    standardised per domain over the LLMs with responses (the scale of the
    estimate), or, in the domains on the population scale (``population``:
    those with few LLMs, :func:`~mtlirt.results.finish._predict_cells`), only re-centred over them; the overall
    score's truth is the world's first shared trait, standardised over the
    LLMs.  Quantiles of ``estimate - error`` are the estimate minus the
    error's quantiles.
    """
    world = boot.pop("world_theta")
    world_overall = boot.pop("world_overall")
    seen = ~empty
    cnt = np.maximum(seen.sum(axis=0), 1)
    m = np.where(seen, world, 0.0).sum(axis=1, keepdims=True) / cnt
    sd = np.sqrt(np.where(seen, (world - m) ** 2, 0.0).sum(axis=1, keepdims=True) / cnt)
    sd = np.where(sd > 1e-12, sd, 1.0)
    if population is not None:
        m = np.where(population & ~seen.any(axis=0), 0.0, m)
        sd = np.where(population, 1.0, sd)
    truth = (world - m) / sd
    boot["theta"] = arr["theta"][None] - (boot["theta"] - truth)
    if "overall" in boot and arr.get("overall") is not None:
        z = world_overall - world_overall.mean(axis=1, keepdims=True)
        z /= z.std(axis=1, keepdims=True)
        boot["overall"] = arr["overall"][None] - (boot["overall"] - z)