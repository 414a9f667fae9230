"""The joint PyMC model over LLMs and items (docs/model.md, "The Bayesian model").

Parameterisation (free random variables and their names)
--------------------------------------------------------
Traits, ``traits = "factor"`` with rank ``r``::

    eta_raw[i, :]   ~ N(0, I_r)                          (llm, factor)
    eta              = eta_raw standardised over the LLMs (sample mean 0,
                       variance 1 per factor; see ``standardize_eta``)
    items fixed:     eta = eta_mean + sqrt(eta_var) * (eta_raw standardised),
                       eta_mean ~ N(0, 1 / N), eta_var ~ Gamma((N - 1) / 2, N / 2)
                       per factor: N traits drawn from N(0, 1) (``population_eta``)
    V[k, :]          = loadings before squashing, V[k, m] ~ N(0, loading_scale)
                       stored as ``loading_free`` (free entries) and
                       ``loading_diag`` ~ HalfNormal(loading_scale) (r positive
                       entries); rows of the r *anchor* domains are
                       lower-triangular: V[anchor_l, m] = 0 for m > l
    Lambda_k         = V_k / sqrt(1 + |V_k|^2)          so |Lambda_k| < 1
    psi_k            = 1 / sqrt(1 + |V_k|^2)  = sqrt(1 - |Lambda_k|^2)
    noncentered:  z[i, k] ~ N(0, 1);  theta_ik = Lambda_k . eta_i + psi_k z_ik
    centered:     theta_raw[i, k] ~ N(Lambda_k . eta_i, psi_k)

The anchors are the ``r`` domains with the most observed responses (largest
first), so the sign/rotation is pinned by well-measured domains; the sign of
every factor is finally chosen per draw so that the loadings sum to a positive
number (see :mod:`mtlirt.bayes.derived`).

Traits, ``traits = "correlated"``::

    corr_chol ~ LKJCorr(K, lkj_eta)  (Cholesky factor L, rows of unit norm)
    noncentered:  z[i, :] ~ N(0, I_K); theta_i = L z_i
    centered:     theta_raw[i, :] ~ MvNormal(0, L L')

Items (``k = k(j)``)::

    beta_k ~ N(0, difficulty_mean_scale)     tau_k ~ HalfNormal(difficulty_sd_scale)
    noncentered: b_raw_j ~ N(0, 1), b_j = beta_k + tau_k b_raw_j
    centered:    b_j ~ N(beta_k, tau_k)
    intercept_j = -b_j
    2PL/3PL: alpha_k ~ N(m, log_discrimination_mean_scale),
             sigma_log_a_k ~ HalfNormal(log_discrimination_sd_scale),
             noncentered log_a_raw_j ~ N(0, 1), log a_j = alpha_k + sigma_log_a_k log_a_raw_j
             centered    log_a_j ~ N(alpha_k, sigma_log_a_k)
    1PL:     a_j = exp(alpha_k) (one discrimination per domain; traits have unit
             variance, so this is a Rasch model with a domain-specific scale)
    every a_j smoothly capped at discrimination_max (spec.capped_discrimination)
    3PL:     c_j = guessing (fixed), or c_j ~ Beta(m kappa, (1 - m) kappa)

Likelihood over the observed responses only (index vectors, ``pm.Data``)::

    y_ij ~ Bernoulli(c_j + (1 - c_j) sigmoid(a_j theta_ik + intercept_j))

By default the likelihood is one fused Op (value and gradient in one numba
loop, :mod:`mtlirt.bayes._loglik`) added as the potential ``loglik``;
``likelihood="elementwise"`` writes it as the observed variable ``y`` (a
``CustomDist``) instead.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mtlirt.bayes._built import BuiltModel
from mtlirt.bayes._factor import anchor_domains, factor_parts, loading_layout, model_coords, standardize_eta
from mtlirt.bayes._loglik import bernoulli_logit_cells, item_layout
from mtlirt.bayes.init import initial_values
from mtlirt.bayes.marginal import pin_standardisation
from mtlirt.bayes.spec import ModelSpec, capped_discrimination, load_spec, resolve_spread
from mtlirt.data.responses import Responses, as_responses
from mtlirt.errors import InputError

# anchor_domains, loading_layout, model_coords, standardize_eta live in the leaf
# module mtlirt.bayes._factor and are re-exported here
__all__ = ["build_model", "model_coords", "anchor_domains", "loading_layout", "standardize_eta"]


AUTO_CENTER_ITEMS_PER_LLM = 40
AUTO_CENTER_LLMS_PER_ITEM = 100
AUTO_CENTER_LLMS_PER_ITEM_A = 1000


def trait_centering(arr: Responses, spec: ModelSpec) -> np.ndarray:
    """Which domains' traits use the centred parameterisation.

    ``"centered"``/``"noncentered"``: all/none. ``"auto"``: a domain is centred
    when its LLMs answered on average at least 40 of its items (the data then
    dominate the prior of ``theta_ik``; non-centred otherwise). The correlated
    model centres all domains or none (by the median domain).

    Returns
    -------
    ndarray of bool (K,)
    """
    K = arr.n_domains
    mode = spec.trait_parameterization
    if mode == "centered":
        return np.ones(K, dtype=bool)
    if mode == "noncentered":
        return np.zeros(K, dtype=bool)
    per = np.empty(K)
    for k, s in enumerate(arr.domain_slices):
        if arr.complete:
            per[k] = s.stop - s.start
        else:
            per[k] = arr.observed[:, s].sum() / max(arr.n_llms, 1)
    c = per >= AUTO_CENTER_ITEMS_PER_LLM
    if spec.traits == "correlated":
        return np.full(K, bool(np.median(per) >= AUTO_CENTER_ITEMS_PER_LLM))
    return c


def item_centering(arr: Responses, spec: ModelSpec) -> tuple[bool, bool]:
    """Whether the difficulty and the log-discrimination hierarchies are centred.

    ``"auto"``: difficulties are centred with >= 100 observed responses per
    item on average, log discriminations with >= 1000 (a discrimination needs
    far more responses than a difficulty before its likelihood dominates a
    prior of scale ~0.3; centring it earlier makes a funnel with
    ``sigma_log_a``).

    Returns
    -------
    (bool, bool)
    """
    mode = spec.item_parameterization
    if mode != "auto":
        return (mode == "centered",) * 2
    n_obs = arr.n_llms * arr.n_items if arr.complete else int(arr.observed.sum())
    per = n_obs / max(arr.n_items, 1)
    return per >= AUTO_CENTER_LLMS_PER_ITEM, per >= AUTO_CENTER_LLMS_PER_ITEM_A


SD_GUESS_INFO_PER_RESPONSE = 0.2  # a response's Fisher information about theta over a^2: p (1 - p), typical


def overall_sd_guess_joint(arr: Responses, anchors: list[int], initvals: dict,
                           init: dict | None = None) -> float:
    """Typical posterior sd of an overall trait at the initial point, for
    :func:`mtlirt.bayes.marginal.pin_standardisation` in the joint model (the
    fixed-items twin is :func:`mtlirt.bayes.marginal.overall_sd_guess`).

    The median over the LLMs of ``(1 + sum_k |Lambda_k|^2 / (psi_k^2 + 1 /
    I_ik))^(-1/2)`` with the initial loadings (``initvals``) and ``I_ik = 0.2
    n_ik mean_k(a^2)``, the information about ``theta_ik`` of LLM ``i``'s
    ``n_ik`` responses in domain ``k`` (discriminations ``init["a"]``, else 1);
    clipped to [0.02, 1]. Only the sampler's geometry depends on it, so a
    rough value serves (0.076 at 300 LLMs x 1,154 items with the MTL initial
    values, where ``eta_raw``'s coordinates had posterior sd 0.083 pinned).
    """
    K = arr.n_domains
    _, lam, psi = factor_parts(np.asarray(initvals["eta_raw"], dtype=np.float64), initvals.get("loading_free"),
                               np.asarray(initvals["loading_diag"], dtype=np.float64), K, anchors)
    a = None if init is None else init.get("a")
    a2 = np.ones(arr.n_items) if a is None else np.clip(np.asarray(a, dtype=np.float64), 0.1, 10.0) ** 2
    n_ik = np.empty((arr.n_llms, K))
    a2_k = np.empty(K)
    for k, s in enumerate(arr.domain_slices):
        n_ik[:, k] = s.stop - s.start if arr.complete else arr.observed[:, s].sum(1)
        a2_k[k] = a2[s].mean()
    info = SD_GUESS_INFO_PER_RESPONSE * n_ik * a2_k[None, :]
    w = np.where(info > 0, 1.0 / (psi[None, :] ** 2 + 1.0 / np.where(info > 0, info, 1.0)), 0.0)
    prec = 1.0 + w @ (lam**2).sum(1)
    return float(np.clip(np.median(1.0 / np.sqrt(prec)), 0.02, 1.0))


def add_traits(spec: ModelSpec, n_llms: int, n_domains: int, anchors: list[int],
               centered: np.ndarray | None = None, pin_sd: float | None = None, population: bool = False):
    """Add the trait block to the current model; return ``theta`` (N x K tensor).

    ``centered`` (bool per domain) chooses the parameterisation per domain:
    centred domains get ``theta_raw`` (dims ``llm`` x ``domain``, or
    ``domain_c`` when mixed), the others ``z`` (``domain`` or ``domain_nc``).
    The model must carry the coords ``domain_c``/``domain_nc`` when mixed.
    ``pin_sd``, ``population``: see :func:`add_factor_block`.
    """
    import pymc as pm
    import pytensor.tensor as pt

    p = spec.priors
    K = n_domains
    if centered is None:
        centered = np.full(K, spec.trait_parameterization == "centered")
    centered = np.asarray(centered, dtype=bool)
    ic = np.flatnonzero(centered)
    inc = np.flatnonzero(~centered)
    mixed = 0 < len(ic) < K
    dim_c = "domain_c" if mixed else "domain"
    dim_nc = "domain_nc" if mixed else "domain"
    if spec.traits == "factor":
        eta, lam, scale = add_factor_block(spec, n_llms, K, anchors, pin_sd, population)
        mean = pt.dot(eta, lam.T)  # N x K
        if len(ic) == K:
            return pm.Normal("theta_raw", mean, scale[None, :], dims=("llm", dim_c))
        if len(inc) == K:
            z = pm.Normal("z", 0.0, 1.0, dims=("llm", dim_nc))
            return mean + z * scale[None, :]
        ic, inc = _index_data(ic, "centred_domains"), _index_data(inc, "noncentred_domains")  # see _index_data
        th_c = pm.Normal("theta_raw", mean[:, ic], scale[ic][None, :], dims=("llm", dim_c))
        z = pm.Normal("z", 0.0, 1.0, dims=("llm", dim_nc))
        theta = pt.zeros_like(mean)
        theta = pt.set_subtensor(theta[:, ic], th_c)
        theta = pt.set_subtensor(theta[:, inc], mean[:, inc] + z * scale[inc][None, :])
        return theta
    if spec.traits == "correlated":
        if K < 2:
            raise InputError("traits = 'correlated' needs at least 2 domains")
        L = pm.LKJCorr("corr_chol", n=K, eta=p.lkj_eta, dims=("domain_a", "domain_b"))
        if centered.all():
            return pm.MvNormal("theta_raw", mu=pt.zeros(K), chol=L, dims=("llm", "domain"))
        z = pm.Normal("z", 0.0, 1.0, dims=("llm", "domain"))
        return pt.dot(z, L.T)
    raise InputError(f"unknown traits {spec.traits!r}")


def add_factor_block(spec: ModelSpec, n_llms: int, n_domains: int, anchors: list[int],
                     pin_sd: float | None = None, population: bool = False):
    """Add the overall traits and loadings of the factor model to the current
    model; return tensors ``eta`` (N x r, standardised over the LLMs when
    N >= 3), ``Lambda`` (K x r) and ``psi`` (K,) = sqrt(1 - |Lambda_k|^2).

    ``population`` (N >= 3): the standardised traits are given back the mean
    and variance over the LLMs that N draws from ``N(0, 1)`` have
    (:func:`population_eta`), so that ``eta`` is distributed exactly as
    ``eta_raw``; the fixed-items models need it, where no item parameter can
    absorb the traits' scale.

    ``pin_sd`` (N >= 3): :func:`mtlirt.bayes.marginal.pin_standardisation`
    narrows the two directions of ``eta_raw`` that the standardised ``eta``
    ignores (each column's mean and scale) to about ``pin_sd / sqrt(N)``.
    Under the isotropic N(0, 1) prior the direction of ``eta_raw - mean``
    (that is, ``eta``) is uniform and independent of the mean and the scale,
    so a factor in those two alone leaves the prior of ``eta``, and with it
    the posterior of every other quantity, as it was. It matters to NUTS: left
    to the prior, those directions are about ``1 / pin_sd`` times longer than
    the others after its diagonal scaling (in the joint model at 300 LLMs x
    1,154 items they mixed at an ESS of 0.01-0.05 per draw; 0.7 and more with
    the pin).
    """
    import pymc as pm
    import pytensor.tensor as pt

    p = spec.priors
    K, r = n_domains, spec.rank
    rows, cols, drows = loading_layout(K, r, anchors)
    eta_raw = pm.Normal("eta_raw", 0.0, 1.0, dims=("llm", "factor"))
    eta = standardize_eta(eta_raw, pt) if n_llms >= 3 else eta_raw
    if population and n_llms >= 3:
        eta = population_eta(eta)
    if pin_sd is not None and n_llms >= 3:
        pin_standardisation(eta_raw, pin_sd)
    # the layout enters as data, not constants (see _index_data)
    parts = pt.zeros((pm.modelcontext(None).dim_lengths.get("domain", K), r))
    if len(rows):
        rows, cols = _index_data(rows, "loading_free_rows"), _index_data(cols, "loading_free_cols")
        # the population model's loadings lie nearer |Lambda| = 1 (where V runs off) when the LLMs spread
        # wider than the prior: NUTS samples them in asinh coordinates there, as the integrated route does
        free = pm.Normal("loading_free", 0.0, p.loading_scale, shape=(rows.shape[0],),
                         **({"default_transform": asinh_transform()} if population else {}))
        parts = pt.set_subtensor(parts[rows, cols], free)
    diag = pm.HalfNormal("loading_diag", p.loading_scale, shape=r)
    V = pt.set_subtensor(parts[_index_data(drows, "loading_diag_rows"), np.arange(r)], diag)
    psi = 1.0 / pt.sqrt(1.0 + pt.sum(V**2, axis=1))
    return eta, V * psi[:, None], psi


def asinh_transform():
    """The transform ``x = asinh(V)`` of an unbounded variable (PyMC's ``Transform``): its
    density is ``p(sinh(x)) cosh(x)``. Heavy tails in ``V`` (a loading near 1, ``V =
    Lambda / psi``) become nearly Gaussian ones in ``x``."""
    import pytensor.tensor as pt
    from pymc.logprob.transforms import Transform

    class AsinhTransform(Transform):
        name = "asinh"
        ndim_supp = 0

        def forward(self, value, *inputs):
            return pt.arcsinh(value)

        def backward(self, value, *inputs):
            return pt.sinh(value)

        def log_jac_det(self, value, *inputs):
            a = pt.abs(value)
            return a + pt.log1p(pt.exp(-2.0 * a)) - np.log(2.0)  # log cosh, without overflow

    return AsinhTransform()


def population_eta(eta):
    """The overall traits of the population model from their standardised version.

    For N traits drawn independently from ``N(0, 1)`` (per factor) the sample mean
    ``m``, the sample variance ``v`` (over N) and the standardised traits are
    independent, with ``m ~ N(0, 1 / N)``, ``N v ~ chi2(N - 1)`` and the
    standardised traits uniform on their sphere (as ``standardize_eta`` of
    ``eta_raw`` is). Adding ``eta_mean`` (``m``) and ``eta_var`` (``v``, a
    ``Gamma((N - 1) / 2, N / 2)``) therefore restores that prior exactly, while
    the sampler still sees the traits' common scale as one coordinate per factor
    instead of a direction through all N of ``eta_raw``.

    Fixing ``m = 0`` and ``v = 1`` instead (the standardised traits alone)
    conditions the prior on the sample of LLMs having exactly the population's
    spread on the scale of the fixed items. Where the data spread the LLMs by
    ``s`` (1 up to ``O(1 / sqrt(N))`` when the LLMs are drawn from the prior),
    that condition falls on the LLMs whose traits are least determined: to first
    order it shrinks the posterior mean of LLM ``i`` by ``(s - 1)(v_i / vbar -
    1)`` relative to standardising the population model's draws, with ``v_i`` its
    posterior variance and ``vbar`` their mean, which pulls the extremes of a
    leaderboard (measured by fewer informative items) inward.
    """
    import pymc as pm
    import pytensor.tensor as pt

    n = pt.cast(eta.shape[0], "float64")
    mean = pm.Normal("eta_mean", 0.0, 1.0 / pt.sqrt(n), dims="factor")
    var = pm.Gamma("eta_var", alpha=(n - 1.0) / 2.0, beta=n / 2.0, dims="factor")
    return mean[None, :] + pt.sqrt(var)[None, :] * eta


def _index_data(index: np.ndarray, name: str):
    """A shared int64 vector holding ``index``, for the model's data-dependent positions.

    Which domains anchor the factors and which are centred depends on the data. As constants these
    positions would enter the compiled function's cache key (PyTensor's numba backend keys a graph by
    its constants), so every leaderboard with another anchor or centring would compile the model anew;
    as shared data (like the responses and the dims' lengths) the compiled code is reused by every fit
    of the same specification whose sampler sees the same shapes (nutpie and MAP join the free variables
    into one vector of fixed length).
    """
    import pytensor

    return pytensor.shared(np.asarray(index, dtype=np.int64), name=name)  # named: mtlirt.bayes._nutpie


def add_coords_for_centering(coords: dict, domains: list, centered: np.ndarray) -> dict:
    """Add ``domain_c``/``domain_nc`` coords when the centring is mixed."""
    centered = np.asarray(centered, dtype=bool)
    if 0 < centered.sum() < len(centered):
        coords = dict(coords)
        coords["domain_c"] = [d for d, c in zip(domains, centered) if c]
        coords["domain_nc"] = [d for d, c in zip(domains, centered) if not c]
    return coords


def add_items(spec: ModelSpec, item_domain: np.ndarray, centered: tuple[bool, bool] = (False, False)):
    """Add the item block; return tensors (a, intercept, c) of length J (c may be a float).

    ``centered`` = (difficulties centred, log discriminations centred); ``spec`` as :func:`build_model`
    resolved it for the data (:func:`~mtlirt.bayes.spec.resolve_spread`)."""
    import pymc as pm
    import pytensor.tensor as pt

    p = spec.priors
    dom = item_domain
    beta = pm.Normal("beta", 0.0, p.difficulty_mean_scale, dims="domain")
    tau = pm.HalfNormal("tau", p.difficulty_sd_scale, dims="domain")
    b_centered, a_centered = (centered, centered) if isinstance(centered, bool) else centered
    if b_centered:
        b = pm.Normal("b", beta[dom], tau[dom], dims="item")
    else:
        b_raw = pm.Normal("b_raw", 0.0, 1.0, dims="item")
        b = beta[dom] + tau[dom] * b_raw
    intercept = -b
    alpha = pm.Normal("alpha", p.log_discrimination_mean, p.log_discrimination_mean_scale, dims="domain")
    cap = (p.discrimination_max, pt.softplus, pt.exp)
    if spec.item_model == "1pl":
        a = capped_discrimination(alpha, *cap)[dom]
    else:
        if spec.discrimination_spread == "domain":
            sig = pm.HalfNormal("sigma_log_a", p.log_discrimination_sd_scale, dims="domain")[dom]
        else:  # one spread, or the centre of the partially pooled ones
            sig = pm.HalfNormal("sigma_log_a", p.log_discrimination_sd_scale)
            if spec.discrimination_spread == "pooled":
                u = pm.Normal("sigma_log_a_dev", 0.0, 1.0, dims="domain")
                sig = (sig * pt.exp(p.log_discrimination_sd_spread * u))[dom]
        if a_centered:
            log_a = pm.Normal("log_a", alpha[dom], sig, dims="item")
        else:
            log_a_raw = pm.Normal("log_a_raw", 0.0, 1.0, dims="item")
            log_a = alpha[dom] + sig * log_a_raw
        a = capped_discrimination(log_a, *cap)
    if spec.item_model == "3pl" and spec.estimate_guessing:
        m, kap = p.guessing_mean, p.guessing_concentration
        c = pm.Beta("c", m * kap, (1 - m) * kap, dims="item")
    else:
        c = float(spec.fixed_guessing)
    return a, intercept, c


def observed_cells(arr: Responses) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Long index vectors of the observed cells: (llm index, item index, y)."""
    if arr.complete:
        n, j = arr.correct.shape
        ii = np.repeat(np.arange(n, dtype=np.int64), j)
        jj = np.tile(np.arange(j, dtype=np.int64), n)
        y = arr.correct.reshape(-1)
    else:
        ii, jj = np.nonzero(arr.observed)
        ii = ii.astype(np.int64)
        jj = jj.astype(np.int64)
        y = arr.correct[ii, jj]
    return ii, jj, np.asarray(y, dtype=np.int64)


def _logp_2pl(value, x):
    import pytensor.tensor as pt

    return value * x - pt.softplus(x)


def _random_2pl(x, rng=None, size=None):
    x = np.asarray(x)
    return rng.binomial(1, 1.0 / (1.0 + np.exp(-x)), size=size if size is not None else x.shape)


def _logp_3pl(value, x, c):
    import pytensor.tensor as pt

    l1c = pt.log1p(-c)
    lp = pt.logaddexp(pt.log(c), l1c - pt.softplus(-x))  # log(c + (1 - c) sigmoid(x))
    l1p = l1c - pt.softplus(x)  # log((1 - c)(1 - sigmoid(x)))
    return pt.switch(pt.eq(value, 1), lp, l1p)


def _random_3pl(x, c, rng=None, size=None):
    x = np.asarray(x)
    p = c + (1 - c) / (1.0 + np.exp(-x))
    return rng.binomial(1, p, size=size if size is not None else np.shape(p))


LIKELIHOODS = ("auto", "fused", "elementwise")


def build_model(responses: Any, spec: str | ModelSpec | None = None, *, init: dict | None = None,
                likelihood: str = "auto"):
    """Build the joint PyMC model (traits and items) of docs/model.md, "The Bayesian model".

    Parameters
    ----------
    responses : Responses, DataFrame or path
        The leaderboard (a long table or its file is read as :class:`~mtlirt.data.responses.Responses`).
    spec : str, ModelSpec or None
        Model spec name/path (default ``"factor-2pl"``).
    init : dict, optional
        Point estimate (``theta``, ``overall``, ``loadings``, ``a``, ``d``,
        optional ``c``); converted to initial values (``BuiltModel.initvals``,
        a dict usable as ``initvals``).
    likelihood : {"auto", "fused", "elementwise"}
        How the likelihood enters the model. ``"fused"`` (``"auto"``): the
        potential ``loglik``, one numba Op for the value and the gradient
        (several times faster per gradient than the elementwise graph: ``benchmarks/bench_bayes.py joint-cost``).
        ``"elementwise"``: the observed variable ``y``, a Bernoulli
        ``CustomDist`` per response (what ``pm.sample_posterior_predictive``
        and ``pm.compute_log_likelihood`` need; the JAX backend too).

    Returns
    -------
    BuiltModel
        ``kind="joint"``; its ``model`` (a ``pymc.Model``) has coords ``llm``,
        ``item``, ``domain``, ``factor``, ``domain_a``, ``domain_b``; data,
        fused: ``item_ptr``, ``item_slot``, ``y_code`` (the responses item by
        item, :func:`~mtlirt.bayes._loglik.item_layout`); elementwise: coord
        ``obs`` and data ``obs_item``, ``obs_cell`` (= llm * K + domain),
        ``y_obs`` (the observed responses). Also
        ``spec``, ``anchors``, ``initvals``, ``trait_centered``,
        ``item_centered`` and ``likelihood`` (``"fused"`` or ``"elementwise"``).
    """
    import pymc as pm
    import pytensor.tensor as pt

    arr = as_responses(responses)
    spec = resolve_spread(load_spec(spec), arr.item_domain)
    if likelihood not in LIKELIHOODS:
        raise InputError(f"likelihood must be one of {', '.join(LIKELIHOODS)}; got {likelihood!r}")
    if likelihood == "auto":
        likelihood = "fused"
    if spec.trait_parameterization == "marginal":
        raise InputError("trait_parameterization = 'marginal' integrates the domain traits out "
                         "against fixed items: use items='fixed' (--items fixed)")
    n, K = arr.n_llms, arr.n_domains
    dom = arr.item_domain
    anchors = anchor_domains(arr, spec.rank) if spec.traits == "factor" else []
    ii, jj, y = observed_cells(arr)
    if len(y) == 0:
        raise InputError("no observed responses")
    tc = trait_centering(arr, spec)
    ic = item_centering(arr, spec)
    coords = add_coords_for_centering(model_coords(arr, spec), list(arr.domains), tc)
    if likelihood == "elementwise":
        coords["obs"] = np.arange(len(y))
    iv = initial_values(arr, spec, anchors, init, include_items=True, trait_centered=tc, item_centered=ic)
    pin_sd = None
    if spec.traits == "factor" and spec.eta_raw_pin == "auto" and n >= 3:
        pin_sd = overall_sd_guess_joint(arr, anchors, iv, init)
    with pm.Model(coords=coords) as model:
        theta = add_traits(spec, n, K, anchors, tc, pin_sd)
        a, intercept, c = add_items(spec, dom, ic)
        if likelihood == "fused":
            ptr, slots, codes = item_layout(ii, jj, y, dom, n)
            guess = None
            if spec.item_model == "3pl":
                guess = np.full(arr.n_items, c) if isinstance(c, float) else c
            pm.Potential("loglik", bernoulli_logit_cells(theta, a, intercept, pm.Data("item_ptr", ptr),
                                                         pm.Data("item_slot", slots), pm.Data("y_code", codes),
                                                         guess))
        else:
            obs_item = pm.Data("obs_item", jj, dims="obs")
            obs_cell = pm.Data("obs_cell", ii * K + dom[jj], dims="obs")
            y_data = pm.Data("y_obs", y, dims="obs")
            th = theta.reshape((-1,))[obs_cell]
            logit = a[obs_item] * th + intercept[obs_item]
            if spec.item_model == "3pl":
                # float64: pt.as_tensor(0.25) would be a float32 constant (exact in
                # float32), and log(c), log1p(-c) would be rounded to float32
                cc = c[obs_item] if not isinstance(c, float) else pt.constant(c, dtype="float64")
                pm.CustomDist("y", logit, cc, logp=_logp_3pl, random=_random_3pl,
                              observed=y_data, dims="obs", dtype="int64")
            else:
                # y * x - log(1 + exp(x)): a third of the cost of Bernoulli(logit_p=x)'s
                # logp (two branches and parameter checks)
                pm.CustomDist("y", logit, logp=_logp_2pl, random=_random_2pl,
                              observed=y_data, dims="obs", dtype="int64")
    return BuiltModel(model=model, spec=spec, anchors=anchors, kind="joint", initvals=iv, trait_centered=tc,
                      likelihood=likelihood, item_centered=ic)
