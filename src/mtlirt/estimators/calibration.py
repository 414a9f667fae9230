"""The item calibration: penalised marginal maximum likelihood by EM (:func:`calibrate_items`), every
domain at once, accelerated by parameter expansion and SQUAREM; whether a domain gets a guessing floor
(:func:`decide_floors`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from functools import partial

import numpy as np
from scipy.special import expit

from .blas import blas_threads
from .em_steps import (
    _em_kernels,
    _estep,
    _floor_logprior,
    _mstep,
    _mstep_floor,
    _mstep_stride,
    _nodes,
    _rows,
    node_levels,
)
from .penalties import DEFAULT_PENALTIES, Penalties
from .response_data import ResponseData

__all__ = ["calibrate_items", "decide_floors"]

Progress = Callable[[str, float], None] | None


def _initial_items(data: ResponseData, model, c=None):
    n = float(data.N) if data.obs is None else data.obs.sum(axis=0, dtype=np.float64)
    p = (data.n1 + 0.5) / (n + 1.0)
    c = data.c if c is None else c
    if c is not None:
        p = np.clip((p - c) / (1 - c), 0.02, 0.98)
    d = np.clip(np.log(p / (1 - p)) * 1.2, -8, 8)
    a = np.ones(data.J)
    return a, d


def calibrate_items(data: ResponseData, a=None, d=None, *, priors: Penalties = DEFAULT_PENALTIES, model="2pl",
                    max_iter=500, tol=1e-4, px=True, c=None, progress: Progress = None, stage="items"):
    """Penalised marginal-ML item calibration by EM (every domain at once).

    Each domain's traits are integrated out against the ``N(0, theta_sd^2)``
    population prior on a grid of equally spaced nodes, finer for long
    domains (:func:`~mtlirt.estimators.em_steps.node_levels`: 49 nodes for short domains, up to
    ``priors.max_nodes`` for long ones: the EM converges on 49 nodes first,
    then goes on with each domain's grid refined for the fitted
    discriminations, until no grid needs refining).  The EM is
    accelerated by SQUAREM-style extrapolation (checked: a step that lowers
    the penalised marginal likelihood falls back to plain EM) and, for the
    2PL, by parameter expansion (PX-EM): after each M-step each domain's
    population location and scale are fitted to the posterior moments and
    the items' penalties (:func:`_px_rescale`) and folded back into the
    items, which removes EM's slow scale/location mode (measured at the
    flagship shape: 13 instead of 90 sweeps).  (With the 1PL the expansion
    cycles, so it is off; the 1PL converges without it.)  Converged means
    that no item's probability of a correct response on the 49 nodes of
    the coarsest grid changes by ``tol`` or more (:func:`_curve_change`);
    the domains share no parameter, so a domain that has converged is not
    swept again while others go on.

    With ``data.estimate_floor`` (``guessing="estimate"``) every domain gets
    one lower asymptote ``c_k`` shared by its items, with the prior
    ``Beta(priors.guessing_alpha, priors.guessing_beta)``: after the M-step of
    the items, a Newton M-step of the floors on the same E-step (an ECM
    step); the floors join the SQUAREM extrapolation (on the logit scale).
    At the end ``data.c`` holds the fitted floors.

    With ``guessing="auto"`` (``data.floor_mode``) :func:`decide_floors`
    keeps a floor in the domains whose data call for one (fits of at most
    1,000 LLMs), then every LLM is calibrated once, those domains with their
    floors estimated and the others as the 2PL (floor 0), each from the
    decision's items; ``info["floors"]`` holds the decision.

    Parameters
    ----------
    data : ResponseData
    a, d : ndarray (J,), optional
        Starting values (internal scale); default a = 1 and logit intercepts.
    priors : Penalties
    model : {"2pl", "1pl"}
    max_iter, tol
        EM sweeps at most; stop when the largest change of an item's
        probability of a correct response (floor included) on the coarsest
        grid's nodes is below ``tol``.
    c : ndarray (J,), optional
        Starting floors when they are estimated (their domain means are used;
        default the prior's mode).

    Returns
    -------
    a, d : ndarray (J,)
        Internal (population-scale) item parameters.
    info : dict
        ``n_iter``, ``converged``, ``marginal_loglik`` (and ``ll_domain``, by
        domain), ``history``, ``eap``, ``nodes`` (per domain), ``c`` (floors
        per item, or None) and ``c_domain`` (per domain when estimated, else
        None); with ``"auto"`` also ``floors`` (:func:`decide_floors`).
    """
    with blas_threads(1):  # many small products, one per domain (see mtlirt.estimators.blas)
        try:
            if data.floor_mode == "auto":
                return _calibrate_auto(data, a, d, priors=priors, model=model, max_iter=max_iter, tol=tol, px=px,
                                       progress=progress, stage=stage)
            cd = _floor_start(data, c, priors) if data.estimate_floor else None
            return _calibrate(data, a, d, cd, priors=priors, model=model, max_iter=max_iter, tol=tol, px=px,
                              progress=progress, stage=stage)
        finally:  # the floored sweeps' copies of the answers, not kept beyond them
            data.drop_seen_answers()


def _calibrate(data: ResponseData, a, d, cd, *, priors: Penalties, model, max_iter, tol, px, progress=None,
               stage="items"):
    """:func:`calibrate_items` from the floors ``cd`` (K; estimated where positive, 0 where the domain
    has none; None: ``data.c`` fixed).

    The domains share no parameter, so each is swept until its own items have converged (or, near
    a fixed point on a grid too coarse for its items, until it is refined): the sweeps that follow
    cover only the domains still moving, not every domain until the last has converged."""
    item_domain, K = data.item_domain, data.K
    a, d = _start_items(data, a, d, model, cd)
    # the EM first converges on the coarsest grid (cheap sweeps), then goes on with each domain's
    # grid refined for the fitted discriminations (a few sweeps), until no grid needs refining
    levels = np.zeros(K, dtype=np.int64)
    measure = partial(_curve_change, x=_nodes(priors, 0)[0], item_domain=item_domain,
                      c_fixed=data.c if cd is None else None, by_domain=True)
    history = []
    active = np.ones(K, dtype=bool)  # the domains still swept at their grid
    held = {"ll_domain": np.zeros(K), "eap": np.zeros((data.N, K))}  # each domain's last E-step
    st = None
    n_em = 0
    while True:
        converged = False
        while n_em < max_iter:
            sweep = partial(_em_sweep, data, _node_groups(data, priors, levels, active), priors=priors, model=model,
                            px=px)
            (a, d, cd, st), n, change = _squarem_step(sweep, a, d, cd, priors, tol, measure)
            held["ll_domain"][active] = st["ll_domain"][active]
            held["eap"][:, active] = st["eap"][:, active]
            n_em += n
            history.append(float(change.max(initial=0.0)))
            if n > 1 and progress is not None:
                progress(stage, min(1.0, n_em / max_iter))
            # near a fixed point on a grid too coarse for the fitted items: refine now (on oll_v1 the
            # 49-node phase never reached 1e-4, its steep items creeping along their ridges, so the
            # grids they need were never used)
            finer = node_levels(a, item_domain, K, priors, _item_floors(data, cd)) > levels
            active &= ~((change < tol) | ((change < 10 * tol) & finer))
            if not active.any():  # (always so after a single sweep)
                converged = True
                break
        new = np.maximum(node_levels(a, item_domain, K, priors, _item_floors(data, cd)), levels)
        if not converged or np.array_equal(new, levels):
            break
        active = new > levels
        levels = new
    if cd is not None:
        data.set_floor(cd[item_domain])
    nodes = (priors.n_nodes - 1) * 2**levels + 1
    ll_domain = held["ll_domain"] if st else None
    return a, d, {"n_iter": n_em, "converged": converged,
                  "marginal_loglik": float(ll_domain.sum()) if st else float("nan"), "ll_domain": ll_domain,
                  "history": history, "eap": held["eap"] if st else None, "nodes": nodes,
                  "c": None if data.c is None else data.c.copy(), "c_domain": None if cd is None else cd.copy()}


def _item_floors(data: ResponseData, cd):
    """Every item's floor: the estimated ones ``cd`` (per domain), else the fixed ``data.c`` (or None)."""
    return data.c if cd is None else cd[data.item_domain]


def _calibrate_auto(data: ResponseData, a, d, *, priors, model, max_iter, tol, px, progress, stage):
    """``guessing="auto"``: :func:`decide_floors` on a share of the LLMs, then one calibration over every
    LLM: where a domain keeps a floor, started from the decision's items, the floors estimated where
    kept and the 2PL elsewhere; where none does, the 2PL fit."""
    data.estimate_floor, data.floor_mode = False, None
    data.set_floor(None)
    try:
        keep, floors, (a2, d2), (af, df) = decide_floors(data, a, d, priors=priors, model=model, items=True)
        cd = None
        if keep.any():
            kept = keep[data.item_domain]
            cd = np.where(keep, np.clip(floors["c"], 1e-3, priors.guessing_max - 1e-3), 0.0)
            a, d = np.where(kept, af, a2), np.where(kept, df, d2)
        # (without a floor, the 2PL fit itself: from the same start)
        a, d, info = _calibrate(data, a, d, cd, priors=priors, model=model, max_iter=max_iter, tol=tol, px=px,
                                progress=progress, stage=stage)
        floors["fitted"] = np.zeros(data.K) if cd is None else info["c_domain"].copy()
    finally:
        data.estimate_floor, data.floor_mode = True, "auto"
    info["floors"] = floors
    return a, d, info


#: :func:`decide_floors`: the LLMs its fits use at most (spread evenly over the leaderboard).
DECIDE_LLMS = 1000


def decide_floors(data: ResponseData, a, d, *, priors: Penalties = DEFAULT_PENALTIES, model="2pl",
                  max_llms: int | None = None, tol=1e-3, min_floor=0.01, start=0.05, items=False):
    """In which domains the data call for a guessing floor (``guessing="auto"``).

    Two calibrations of the same LLMs (every LLM, or ``max_llms`` spread
    evenly over the leaderboard when there are more: the decision needs no
    more): the 2PL, started from the items ``a, d`` (None: the default
    start), and from its items the 2PL with one floor per domain estimated
    under its ``Beta`` prior.  A domain
    keeps its floor when the floor's marginal log-likelihood gain over the 2PL
    exceeds half the log of the domain's number of responses (BIC: the floor
    is one parameter) and the floor is at least ``min_floor``.  Both
    calibrations run on the coarsest grid to ``tol``, the floors from
    ``start``: the decision needs the gain to within a unit or so, not the
    items to ``1e-4``.

    Returns
    -------
    keep : ndarray (K,) of bool
    evidence : dict
        ``c`` (the floors the decision estimated, per domain), ``gain``
        (log-likelihood gain per domain), ``threshold`` (per domain), ``keep``
        (list), ``llms`` (the number of LLMs the decision used).
    items : two tuples (a, d), with ``items=True``
        The items of the 2PL calibration and of the one with floors
        (``guessing="auto"`` starts its calibration over every LLM from
        them, each domain from the one it keeps).
    """
    max_llms = DECIDE_LLMS if max_llms is None else int(max_llms)
    N, K = data.N, data.K
    rows = np.arange(N) if N <= max_llms else np.unique(np.linspace(0, N - 1, max_llms).round().astype(np.int64))
    sub = ResponseData(data.correct[rows], None if data.obs is None else data.obs[rows], data.slices)
    coarse = replace(priors, node_sd_ratio=0.0)
    kw = dict(priors=coarse, model=model, max_iter=200, tol=tol, px=True)
    a2, d2, plain = _calibrate(sub, a, d, None, **kw)
    af, df, floored = _calibrate(sub, a2, d2, np.full(K, min(start, priors.guessing_max - 1e-3)), **kw)
    n_k = np.array([float(sub.n_obs_domain(k)) for k in range(K)])
    gain = floored["ll_domain"] - plain["ll_domain"]
    threshold = 0.5 * np.log(np.maximum(n_k, 2.0))
    c = floored["c_domain"]
    keep = (gain > threshold) & (c >= min_floor)
    evidence = {"c": c.copy(), "gain": gain, "threshold": threshold, "keep": keep.tolist(), "llms": int(len(rows))}
    return (keep, evidence, (a2, d2), (af, df)) if items else (keep, evidence)


def _floor_start(data: ResponseData, c, priors: Penalties):
    """Starting floors per domain (K) when they are estimated: the domain means of ``c``, or the mode
    of their Beta prior, kept inside the bounds."""
    J, K, item_domain = data.J, data.K, data.item_domain
    al, be = priors.guessing_alpha, priors.guessing_beta
    mode = (al - 1) / (al + be - 2) if al > 1 and be > 1 else al / (al + be)
    if c is not None:
        cd = np.bincount(item_domain, np.broadcast_to(np.asarray(c, float), (J,)), minlength=K)
        cd = cd / np.maximum(np.bincount(item_domain, minlength=K), 1)
    else:
        cd = np.full(K, mode)
    return np.clip(cd, 1e-3, priors.guessing_max - 1e-3)


def _start_items(data: ResponseData, a, d, model, cd):
    """Starting ``a, d`` (float64 copies): the given ones, else :func:`_initial_items` (above the
    floors ``cd``); with the 1PL each domain's discriminations set to their geometric mean."""
    K, item_domain = data.K, data.item_domain
    if a is None or d is None:
        a, d = _initial_items(data, model, None if cd is None else cd[item_domain])
    a = np.asarray(a, dtype=np.float64).copy()
    d = np.asarray(d, dtype=np.float64).copy()
    if model == "1pl":
        la = np.bincount(item_domain, np.log(a), minlength=K) / np.maximum(np.bincount(item_domain, minlength=K), 1)
        a = np.exp(la)[item_domain]
    return a, d


def _node_groups(data: ResponseData, priors: Penalties, levels, active=None):
    """The domains that share a grid level, one group per level (of the ``active`` ones, K bools, where
    given): ``(domains, or None for all, their items, or ``slice(None)``, each item's domain within the
    group, nodes, log weights)``."""
    K = data.K
    out = []
    for lev in np.unique(levels if active is None else levels[active]):
        ks = np.flatnonzero((levels == lev) if active is None else (levels == lev) & active)
        idx = np.concatenate([np.arange(data.slices[k].start, data.slices[k].stop) for k in ks])
        whole = len(ks) == K
        local = np.repeat(np.arange(len(ks)), [data.slices[k].stop - data.slices[k].start for k in ks])
        x, logw = _nodes(priors, int(lev))
        out.append((None if whole else ks, slice(None) if whole else idx, local, x, logw))
    return out


def _em_sweep(data: ResponseData, groups, a, d, cd, *, priors: Penalties, model, px):
    """One EM sweep from ``a, d`` (and the floors ``cd``, per domain, or None): per node group
    (:func:`_node_groups`) the E-step, the items' M-step and the floors'; then, for the 2PL with
    ``px``, the parameter expansion (:func:`_px_rescale`).  Returns the new ``a, d, cd`` and
    ``{"ll", "ll_domain", "eap"}`` of the E-step at the old ones."""
    K, item_domain = data.K, data.item_domain
    a2, d2 = a.copy(), d.copy()
    cd2 = None if cd is None else cd.copy()
    c_items = data.c if cd is None else cd[item_domain]
    ll = 0.0
    ll_domain = np.zeros(K)
    eap = np.zeros((data.N, K))
    mom = np.zeros((K, 3))  # (a domain in no group has no mass: the expansion leaves it)
    for ks, idx, local, x, logw in groups:
        st = _estep(data, a, d, x, logw, c=c_items, domains=ks)
        kk = slice(None) if ks is None else ks
        ll += st["ll"]
        ll_domain[kk] = st["ll_domain"]
        eap[:, kk] = st["eap"]
        mom[kk] = st["moments"]
        st["n1"] = data.n1[idx]
        st["nq_rows"] = local
        if priors.mstep_stride and st["Nq"] is None and st["R"] is None:
            m = _mstep_stride(st["nq"], x)
            if m > 1:  # the M-step on every m-th node: same integrals, J x Q / m work
                st["nq"] = st["nq"][:, ::m] * m
                x = x[::m]
        cg = None if c_items is None else c_items[idx]
        fl = st["floored"]
        if fl.all() or not fl.any():
            ag, dg = _mstep(a[idx], d[idx], st, x, cg if fl.any() else None, priors, model, local)
        else:  # domains without a floor take the 2PL's M-step (their statistics are t, not R)
            ag, dg = np.empty(len(fl)), np.empty(len(fl))
            for part, cp in ((~fl, None), (fl, cg)):
                sub = np.flatnonzero(part)
                ag[sub], dg[sub] = _mstep(a[idx][sub], d[idx][sub], _rows(st, sub), x,
                                          None if cp is None else cp[sub], priors, model,
                                          np.unique(local[sub], return_inverse=True)[1].ravel())
        if cd is not None and np.any(cd[kk] > 0):  # the floors of the domains that estimate one
            cg_d = cd[kk]
            est = cg_d > 0
            if est.all():
                cd2[kk] = _mstep_floor(ag, dg, cg_d, st, x, priors, local)
            else:
                sub = np.flatnonzero(est[local])
                cg_d[est] = _mstep_floor(ag[sub], dg[sub], cg_d[est], _rows(st, sub), x, priors,
                                         np.unique(local[sub], return_inverse=True)[1].ravel())
                cd2[kk] = cg_d
        a2[idx], d2[idx] = ag, dg
    if px and model == "2pl":
        # not in domains with fixed floors (given, or the single-domain fit's in the pooled fit): there
        # the expansion cycled against the M-step (pooled fit with the realistic simulation's floors at
        # the flagship shape: 500 sweeps, changes of 3e-3-7e-3; without it, converged in 31)
        fixed = None
        if cd is None and data.c is not None:
            fixed = np.bincount(item_domain, data.c > 0, minlength=K) > 0
        a2, d2 = _px_rescale(a2, d2, mom, item_domain, K, priors, skip=fixed)
    return a2, d2, cd2, {"ll": ll, "ll_domain": ll_domain, "eap": eap}


def _px_rescale(a, d, mom, item_domain, K, priors: Penalties, n_cycles=4, skip=None):
    """Parameter expansion: the CM-step of each domain's population location ``mu`` and scale ``s``
    (the traits ``N(mu, s^2 theta_sd^2)`` in the expanded model), folded back into the items
    (``a s``, ``d + a mu``: an exact reparametrisation, ``a theta + d`` unchanged).

    ``mu, log s`` maximise the expected complete-data log-density of the traits (posterior moments
    ``mom``, K x 3: mass, sum, sum of squares) **plus the items' penalties at the folded-back
    parameters** (coordinate ascent from the identity: ``mu`` in closed form, ``log s`` by Newton,
    each kept inside the bounds of ``a`` and ``d``), so the sweep stays an ECM step of the penalised
    marginal likelihood and its fixed point the penalised maximum.  Matching the moments alone (0 and
    1, as before) ignores the penalties: its fixed point is not the maximum (on oll_v1's training
    split with the floor the penalised marginal likelihood was 3,300 below it, and plain EM sweeps from
    there gained 8 each), and with the factor capped by the bounds the shift alone cycled against the
    M-step (oll_v1's Winogrande)."""
    n, s1, s2 = (np.asarray(v, dtype=np.float64) for v in mom.T)
    th2 = priors.theta_sd**2
    pa, pd_ = 1.0 / priors.log_a_sd**2, 1.0 / priors.d_sd**2
    cnt = np.bincount(item_domain, minlength=K).astype(np.float64)
    su = np.bincount(item_domain, np.log(a) - priors.log_a_mean, minlength=K)
    sad = np.bincount(item_domain, a * d, minlength=K)
    saa = np.bincount(item_domain, a * a, minlength=K)
    # the box: a s in [a_min, a_max] and |d + a mu| <= d_max (the identity always inside)
    a_top = np.zeros(K)
    np.maximum.at(a_top, item_domain, a)
    a_bot = np.full(K, np.inf)
    np.minimum.at(a_bot, item_domain, a)
    t_lo, t_hi = np.minimum(np.log(priors.a_min / a_bot), 0.0), np.maximum(np.log(priors.a_max / a_top), 0.0)
    m_lo = np.full(K, -np.inf)
    np.maximum.at(m_lo, item_domain, (-priors.d_max - d) / a)
    m_hi = np.full(K, np.inf)
    np.minimum.at(m_hi, item_domain, (priors.d_max - d) / a)
    m_lo, m_hi = np.minimum(m_lo, 0.0), np.maximum(m_hi, 0.0)
    mu, t = np.zeros(K), np.zeros(K)
    for _ in range(n_cycles):
        w = np.exp(-2.0 * t) / th2
        mu = np.clip((w * s1 - pd_ * sad) / (w * n + pd_ * saa), m_lo, m_hi)
        V = np.maximum(s2 - 2.0 * mu * s1 + n * mu * mu, 0.0) / th2
        for _n in range(3):  # concave in t = log s: -n + V e^{-2t} - pa (su + cnt t) = 0
            e = V * np.exp(-2.0 * t)
            t = np.clip(t + (e - n - pa * (su + cnt * t)) / np.maximum(2.0 * e + pa * cnt, 1e-12), t_lo, t_hi)
    # the gain over the identity (the step is kept only where it does not lower the objective)
    gain = -n * t - ((s2 - 2.0 * mu * s1 + n * mu * mu) * np.exp(-2.0 * t) - s2) / (2.0 * th2) \
        - 0.5 * pa * (2.0 * t * su + cnt * t * t) - 0.5 * pd_ * (2.0 * mu * sad + mu * mu * saa)
    use = (n > 1) & (gain >= 0)
    if skip is not None:  # domains left as they are (``skip``, K bools)
        use &= ~skip
    mu, s = np.where(use, mu, 0.0), np.where(use, np.exp(t), 1.0)
    return a * s[item_domain], d + a * mu[item_domain]


def _curve_change(old, new, *, x, item_domain, c_fixed=None, by_domain=False):
    """The convergence measure of :func:`calibrate_items`: the largest change of any item's
    probability of a correct response on the nodes ``x`` between ``old`` and ``new`` (each
    ``(a, d, cd)``, ``cd`` the floors per domain or None for ``c_fixed``, per item or None); with
    ``by_domain`` the largest in each domain (K).

    The item response functions are what the data identify.  An item whose curve lies on its
    domain's floor (oll_v1: five ARC and Winogrande items with ``a`` 0.7-0.8, ``d`` -8.1 to -8.6, a
    success probability within 0.002 of the floor up to theta = 3) has an intercept held by its
    penalty alone: with the floor estimated it went on moving by up to 9e-4 per SQUAREM cycle,
    back and forth, while no probability on the grid changed by more than 3e-5."""
    J = len(old[0])

    def floors(cd):
        c = c_fixed if cd is None else cd[item_domain]
        return np.zeros(J) if c is None else np.ascontiguousarray(c, dtype=np.float64)

    items = _em_kernels().curve_change(old[0], old[1], floors(old[2]), new[0], new[1], floors(new[2]),
                                       np.ascontiguousarray(x, dtype=np.float64))
    if not by_domain:
        return float(items.max(initial=0.0))
    out = np.zeros(int(item_domain.max(initial=-1)) + 1)
    np.maximum.at(out, item_domain, items)
    return out


def _pack(a, d, cd):
    """The EM's parameters as one vector: ``log a``, ``d`` and the estimated floors' ``logit c_k`` (the
    positive ones: a domain without a floor has 0)."""
    v = [np.log(a), d]
    if cd is not None:
        ce = cd[cd > 0]
        v.append(np.log(ce / (1 - ce)))
    return np.concatenate(v)


def _unpack(v, J, priors: Penalties, floors):
    """``a, d, cd`` from :func:`_pack`'s vector, clipped to their bounds; ``floors`` the domains whose
    floors it holds (``cd`` None when None)."""
    a = np.exp(np.clip(v[:J], np.log(priors.a_min), np.log(priors.a_max)))
    d = np.clip(v[J:2 * J], -priors.d_max, priors.d_max)
    cd = None
    if floors is not None:
        cd = np.zeros(len(floors))
        cd[floors] = np.clip(expit(v[2 * J:]), 1e-4, priors.guessing_max)
    return a, d, cd


def _penalised(st, a, d, cd, priors: Penalties):
    """The penalised marginal log-likelihood at ``a, d, cd`` from its E-step ``st``."""
    f = st["ll"] - 0.5 * np.sum(((np.log(a) - priors.log_a_mean) / priors.log_a_sd) ** 2) \
        - 0.5 * np.sum((d / priors.d_sd) ** 2)
    if cd is not None:
        f += np.sum(_floor_logprior(cd[cd > 0], priors))
    return f


def _squarem_step(sweep, a, d, cd, priors: Penalties, tol, measure):
    """One SQUAREM step from ``a, d, cd`` with the EM sweep ``sweep`` (:func:`_em_sweep`).

    Two sweeps, an extrapolation along them (step length at most 8), and a
    stabilising sweep from the extrapolated point, kept when the penalised
    marginal likelihood did not fall below the first sweep's start, else the
    second sweep's point.  When the first sweep already moves less than
    ``tol``, its point alone.  Returns ``(a, d, cd, estep)``, the sweeps run
    and the change from the start, ``measure(old, new)`` of the two ``(a, d, cd)``
    (:func:`_curve_change`: a number, or one per domain)."""
    v0 = _pack(a, d, cd)
    a1, d1, c1, st0 = sweep(a, d, cd)
    obj0 = _penalised(st0, a, d, cd, priors)
    v1 = _pack(a1, d1, c1)
    change = measure((a, d, cd), (a1, d1, c1))
    if np.max(change) < tol:
        return (a1, d1, c1, st0), 1, change
    a2, d2, c2, st1 = sweep(a1, d1, c1)
    n_sweeps = 2
    out = (a2, d2, c2, st1)
    r = v1 - v0
    v = _pack(a2, d2, c2) - v1 - r
    rn, vn = np.linalg.norm(r), np.linalg.norm(v)
    if vn > 0:
        alpha = -max(1.0, rn / vn)
        alpha = max(alpha, -8.0)
        vx = v0 - 2 * alpha * r + alpha * alpha * v
        ax, dx, cx = _unpack(vx, len(a), priors, None if cd is None else cd > 0)
        # stabilising EM step from the extrapolated point, then check
        a3, d3, c3, st3 = sweep(ax, dx, cx)
        n_sweeps += 1
        if _penalised(st3, ax, dx, cx, priors) >= obj0 - 1e-8 * abs(obj0):
            out = (a3, d3, c3, st3)
    change = measure((a, d, cd), out[:3])
    return out, n_sweeps, change
