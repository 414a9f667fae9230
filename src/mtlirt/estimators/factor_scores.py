"""MTL's reported scores: the factor model's posterior means given the fit's items and structure
(:func:`factor_structure`, :func:`factor_scores` with its in-sample scale step), their posterior sds
(:func:`posterior_mean_sd`), the shrunk estimate on that scale, and the overall score's axes and
loadings."""

from __future__ import annotations

import math

import numpy as np

from ..data.validate import MIN_LLMS, MIN_RESPONSES
from ..numerics.factor_grid import grid_quantiles
from ..numerics.factor_model import G_GRID, T_GRID, _moments, _tabulate, factor_posterior, overall_loadings
from ..numerics.llm_side import grid_loglik, logits, partition, softplus
from .bootstrap import deviation_spread
from .centre import _normalise
from .correlation import reliability_from_se
from .em_steps import _holes_kernels, seen_rows
from .response_data import standardise

__all__ = ["factor_scores", "factor_structure", "posterior_mean_sd", "structure_and_scores"]

#: :func:`structure_and_scores`: how far the in-sample scale step may move a domain (its location, in
#: sds, or its log-scale) beyond what its LLMs' sampling error explains (3 standard errors) and leave
#: the structure as estimated on the calibration's scale.
STRUCTURE_SHIFT_TOL = 0.1
#: :func:`factor_scores`' safety net: the scale step shifts a domain by at most this many sds and rescales
#: it by at most ``MAX_SCALE`` either way (:func:`structure_and_scores` reads a domain at them as too short to say).
MAX_SHIFT, MAX_SCALE = 3.0, 4.0
#: :func:`factor_scores`: a domain run by fewer than ``min_llms`` LLMs but by at least half of a small
#: leaderboard's takes the scale step where its LLMs gave it at least this many answers each (the median).
SMALL_STEP_RESPONSES = 10


def posterior_mean_sd(correct, observed, slices, centre, a, d, c, info, loadings=None) -> np.ndarray:
    """Per domain, the spread over LLMs that posterior means of unit-variance traits have.

    With each domain trait its centre plus a deviation ``N(0, psi_k)``
    (``psi_k`` by moments of the likelihood score at the centre,
    :func:`mtlirt.estimators.bootstrap.deviation_spread`), an LLM's posterior
    variance is about ``1 / (I_ik + 1 / psi_k)`` (``I_ik`` its information at
    the estimate; a cell without responses keeps ``psi_k``), and the posterior
    means of traits of population variance 1 have variance ``1 - mean_i`` of
    it. Scaling the standardised shrunk scores to that spread puts them on the
    scale of the truth (a regression of the truth on them has slope about 1),
    as the Bayesian posterior means are.

    Parameters
    ----------
    correct, observed, slices
        The data.
    centre : numpy.ndarray
        ``N x K`` centres on the internal (population) scale of ``a``, ``d``.
    a, d, c : numpy.ndarray
        Items on that scale (``c`` the lower asymptotes).
    info : numpy.ndarray
        ``N x K`` information of each cell at the estimate.
    loadings : numpy.ndarray, optional
        ``K x r`` slopes of the centre on its shared traits (standardised over
        the LLMs): the centre is fitted to these data, and the moments take its
        leverage into account as the error bootstrap's do.
    """
    psi = deviation_spread(correct, observed, slices, centre, a, d, c, loadings=loadings)
    pv = 1.0 / (info + 1.0 / psi)
    return np.sqrt(np.clip(1.0 - pv.mean(axis=0), 0.05, 1.0))


# ---------------------------------------------------------------------------
# the reported scores: the factor model's posterior means, given the fit's items and structure
# ---------------------------------------------------------------------------
def factor_structure(correct, observed, slices, centre, W, a, d, c=None, lik=None):
    """The rank-one structure of the reported scores: ``lambda_k`` and ``psi_k``.

    ``psi_k`` is the variance of domain ``k``'s deviations from its centre
    ``A w_k`` (:func:`mtlirt.estimators.bootstrap.deviation_spread`, leverage
    corrected and partially pooled); the factor loadings of unit-variance
    traits are ``Lambda_k = W_k / sqrt(|W_k|^2 + psi_k)`` (``W`` the ``K x r``
    slopes of the centre on its standardised shared traits), and ``lambda_k``
    their correlation with the overall score (:func:`mtlirt.numerics.factor_model.overall_loadings`:
    ``Lambda_k`` itself at rank one), signed so that they sum positive. ``lik``: the data's trait
    evaluator with the floors ``c``, where the caller has one (:func:`deviation_spread`).
    """
    psi = deviation_spread(correct, observed, slices, centre, a, d, c, loadings=W, lik=lik)
    W = np.asarray(W, dtype=np.float64).reshape(len(psi), -1)
    Lam = W / np.sqrt((W * W).sum(axis=1) + psi)[:, None]
    lam = overall_loadings(Lam)
    return (lam if lam.sum() >= 0 else -lam), psi


def structure_and_scores(correct, observed, slices, a, d, c, centre, W, lik, recentre, stl_se, *,
                         max_rounds=3, tol=STRUCTURE_SHIFT_TOL):
    """:func:`factor_structure`, then :func:`factor_scores`, the structure estimated again where the
    scale step moved a domain further than its LLMs' sampling error explains.

    The centre ``A w_k`` has mean 0 and ``|w_k| <= 1``: it assumes each domain's traits spread like
    ``N(0, 1)`` on its calibration's scale. With few LLMs the items' priors set that scale instead
    (MMLU-Pro's 29 LLMs sat a whole sd below 0 in its hardest categories, ChemBench's 24 spread 1.4-2.7
    times wider), and the deviations' spread ``psi_k`` took up the offset: such domains got loadings
    far below their correlation with the others. So, while the scale step moves a domain's location
    by more than ``tol + 3 / sqrt(n_k rho_k)`` or its log-scale by more than ``tol + 3 / sqrt(2 n_k
    rho_k)`` (``n_k`` LLMs answered it, ``rho_k`` the reliability of their single-domain scores, from
    their standard errors ``stl_se``: about the standard errors of the step's fixed point), the items of
    every domain not at the step's bounds (one too short to say) are set to their in-sample ones (``lik``
    too), the centre is refitted (``recentre(lik) -> (centre, W)``) and the structure estimated again,
    at most ``max_rounds`` times.

    Returns ``factor_scores``' dict (``loc``, ``scale`` composed over the rounds: the calibration's
    traits are ``theta * scale + loc``; ``n_iter`` summed), ``lam``, ``psi``, the centre on the
    reported scale and the number of structures.
    """
    K = len(slices)
    item_domain = np.repeat(np.arange(K), [s.stop - s.start for s in slices])
    n_k = np.full(K, correct.shape[0]) if observed is None else np.array(
        [max(int(observed[:, s].any(axis=1).sum()), 1) for s in slices])  # the LLMs with answers in each
    a0, d0 = np.asarray(a, dtype=np.float64), np.asarray(d, dtype=np.float64)
    rho = np.clip(np.nan_to_num(reliability_from_se(stl_se)), 0.05, 1.0)
    loc, scale, n_iter = np.zeros(K), np.ones(K), 0  # the current items': a0 * scale, d0 + a0 * loc
    for rounds in range(1, max_rounds + 1):  # noqa: B007 (the count is returned)
        a, d = a0 * scale[item_domain], d0 + a0 * loc[item_domain]
        lam, psi = factor_structure(correct, observed, slices, centre, W, a, d, c, lik=lik)
        fs = factor_scores(correct, observed, slices, a, d, c, lam)
        n_iter += fs["n_iter"]
        step_loc, step_log = np.abs(fs["loc"]), np.abs(np.log(fs["scale"]))
        moved = ((step_loc > tol + 3.0 / np.sqrt(n_k * rho)) | (step_log > tol + 3.0 / np.sqrt(2 * n_k * rho)))
        ok = (step_loc < MAX_SHIFT - 1e-6) & (step_log < math.log(MAX_SCALE) - 1e-6)  # not at the step's bounds
        if not (moved & ok).any() or rounds == max_rounds:
            break
        loc, scale = np.where(ok, loc + scale * fs["loc"], loc), np.where(ok, scale * fs["scale"], scale)
        lik.set_items(a0 * scale[item_domain], d0 + a0 * loc[item_domain])
        centre, W = recentre(lik)
    centre_out = (centre - fs["loc"]) / fs["scale"]
    fs.update(loc=loc + scale * fs["loc"], scale=scale * fs["scale"], n_iter=n_iter)
    return fs, lam, psi, centre_out, rounds


def _domain_table(correct, observed, s, st, dtype=np.float64, cells=None, answers=None):
    """``N x Q``: each LLM's log-likelihood of its answers in the domain of items ``s`` on the scorer's
    grid, the matrix products in ``dtype``; with ``cells`` (:func:`_cells`) the wrong answers' terms
    over the observed cells as all of them less the unobserved ones; ``answers``: the answers of the
    LLMs that answered in the domain (:func:`_seen_answers`) where the caller keeps them."""
    if cells is None:
        Y = correct[:, s].astype(dtype)
        O = None if observed is None else observed[:, s].astype(dtype)
        return grid_loglik(Y if O is None else Y * O, O, st.logp[s], st.log1mp[s], dtype=dtype)
    seen = seen_rows(cells[0])
    if seen is not None:  # the product over the LLMs that answered here; the others' rows 0
        L = np.zeros((len(cells[0]), st.logp.shape[1]))
        L[seen] = grid_loglik(_seen_answers(correct, observed, s, seen, dtype) if answers is None else answers,
                              None, st.logp[s], st.log1mp[s], dtype=dtype)
        _holes_kernels().gather_rows(cells[1], cells[2], st.log1mp[s], -1.0, L)
        return L
    Y = np.multiply(correct[:, s], observed[:, s], dtype=dtype)
    L = grid_loglik(Y, None, st.logp[s], st.log1mp[s], dtype=dtype)
    L += np.multiply.outer(cells[0] - 1.0, st.log1mp[s].sum(axis=0))
    _holes_kernels().gather_rows(cells[1], cells[2], st.log1mp[s], -1.0, L)
    return L


def _seen_answers(correct, observed, s, seen, dtype):
    """The answers (0 where unobserved) of the LLMs ``seen`` in the domain of items ``s``, in ``dtype``."""
    return np.multiply(correct[seen, s], observed[seen, s], dtype=dtype)


def _domain_tables(correct, observed, slices, st, cells):
    """``N x K x Q``: :func:`_domain_table` of every domain."""
    out = np.empty((correct.shape[0], len(slices), len(T_GRID)))
    for k, s in enumerate(slices):
        out[:, k] = _domain_table(correct, observed, s, st, cells=cells[k])
    return out


def _cells(observed, s, seen):
    """The unobserved cells of domain ``s`` among the LLMs that answered in it (``seen``): ``(seen`` as
    floats``, ptr, cols)`` (:func:`mtlirt.estimators._holes.domain_cells`; none where every LLM that
    answered in it answered all of it), or None where every cell is observed or there are too many for
    the lists to pay."""
    if observed is None:
        return None
    lists = _holes_kernels().domain_cells(observed, s, seen)
    if lists is None or (len(lists[1]) == 0 and seen.all()):
        return None
    return seen.astype(np.float64), lists[0], lists[1]


class _StepTables:
    """The scale step's log-likelihood tables, cheap to recompute for any location and scale per domain.

    A domain without a floor has logits linear in the trait, ``a_j (s t + m) + d_j``, so an LLM's
    log-likelihood on the grid is, up to a constant, ``S (s t + m) - sum_j o_j softplus(a_j (s t + m) +
    d_j)`` with ``S = sum_j y_j a_j`` computed once: the last sum is one row per domain when every LLM
    answered every item, one float32 matrix product otherwise (:func:`~mtlirt.numerics.llm_side.partition`;
    the posterior ignores the constant). Domains with floors take the float32 product of
    :func:`_domain_table`. The tables leave out the
    probabilities' clipping to ``[EPS, 1 - EPS]``: the step's moments only steer the scale; the
    reported scores use the exact tables.
    """

    def __init__(self, correct, observed, slices, a0, d0, c, seen):
        self.correct, self.observed, self.slices = correct, observed, slices
        self.a0, self.d0 = a0, d0
        self.linear = [not np.any(c[s] > 0) for s in slices]
        self.complete = [observed is None or bool(observed[:, s].all()) for s in slices]
        self.cells = [None if self.complete[k] else _cells(observed, s, seen[:, k]) for k, s in enumerate(slices)]
        # the floored domains' answers of the LLMs that answered there, for every pass (gathering them
        # cost as much as the passes' products)
        self.answers = {}
        for k, s in enumerate(slices):
            rows = None if self.linear[k] or self.cells[k] is None else seen_rows(self.cells[k][0])
            if rows is not None:
                self.answers[k] = _seen_answers(correct, observed, s, rows, np.float32)
        self.S = np.zeros((correct.shape[0], len(slices)))  # 0 in the domains with floors
        self.out = None
        for k, s in enumerate(slices):
            if self.linear[k]:
                Y = correct[:, s].astype(np.float64)
                if observed is not None:
                    Y *= observed[:, s]
                self.S[:, k] = Y @ a0[s]

    def __call__(self, loc, scale, st):
        U = scale[:, None] * T_GRID + loc[:, None]  # (K, Q): the calibration's traits at the grid
        if self.out is None:  # one buffer for every pass (the posterior has read the last one)
            self.out = np.empty(self.S.shape + (len(T_GRID),))
        out = np.multiply(self.S[:, :, None], U, out=self.out)
        for k, s in enumerate(self.slices):
            cells = self.cells[k]
            if not self.linear[k]:
                out[:, k] = _domain_table(self.correct, self.observed, s, st, np.float32, cells, self.answers.get(k))
            elif cells is None:
                O = None if self.complete[k] else self.observed[:, s].astype(np.float32)
                out[:, k] -= partition(O, self.a0[s], self.d0[s], U[k], np.float32)
            else:  # the answered LLMs' whole partition, less their unobserved cells' terms
                sp = softplus(logits(self.a0[s], self.d0[s], U[k]))
                out[:, k] -= np.multiply.outer(cells[0], sp.sum(axis=0))
                _holes_kernels().gather_rows(cells[1], cells[2], sp, 1.0, out[:, k])
        return out


def factor_scores(correct, observed, slices, a, d, c, lam, *, max_iter=100, tol=1e-3, max_scale=MAX_SCALE,
                  min_llms=None, min_responses=None):
    """Posterior means of the domain and overall scores under the rank-one factor model.

    The model of :mod:`mtlirt.evaluate.scoring` (``g ~ N(0, 1)``, ``theta_k | g ~
    N(lambda_k g, 1 - lambda_k^2)``, the items fixed), on its grids, for every
    LLM of the leaderboard: a fitted LLM re-scored by the :class:`~mtlirt.evaluate.scoring.Scorer`
    gets these numbers. First the **in-sample scale step**: per domain the items
    are shifted and rescaled (``a <- a s_k``, ``d <- d + a m_k``) until the
    posterior estimates of the LLMs' mean and variance of the domain trait
    are 0 and 1 (``mean_i E[theta_ik | y] = 0``, ``mean_i E[theta_ik^2 | y] =
    1`` over the LLMs with responses in the domain): the single-domain
    calibration's ``N(0, 1)`` is not the leaderboard's own spread (real
    leaderboards spread wider), and posterior means under a prior narrower
    than the LLMs over-disperse. The step stops when no domain's location or
    log-scale moves by ``tol`` (a thousandth of a score's spread: far below
    the spread's own sampling error). A *thin* domain keeps its calibration's scale:
    one whose LLMs gave it fewer than ``min_responses`` answers each (the
    median; default :data:`mtlirt.data.validate.MIN_RESPONSES`: its posterior
    is mostly the prior's, and its moments barely depend on its scale, so the
    fixed point drifts), or one run by fewer than ``min_llms`` LLMs (default
    :data:`mtlirt.data.validate.MIN_LLMS`) that are a few of the leaderboard's:
    their own moments are not the leaderboard's spread. On a small
    leaderboard, where the domain's LLMs are at least half of all, they are:
    such a domain takes the step where they gave it at least
    :data:`SMALL_STEP_RESPONSES` answers each, since with so few LLMs the items'
    priors, not the LLMs, set the calibration's scale. As a safety net no
    domain is rescaled by more than ``max_scale`` either way.

    Returns
    -------
    dict
        ``theta``, ``theta_sd`` (``N x K``), ``lower``, ``upper`` (``N x K x 2``
        grid quantiles 0.05, 0.95), ``g``, ``g_sd`` (``N``), the items ``a``,
        ``d`` on the scale of ``theta``, the step's ``loc``, ``scale`` (the
        calibration's traits are ``theta * scale + loc``) and ``n_iter``.
    """
    min_llms = MIN_LLMS if min_llms is None else int(min_llms)
    min_responses = MIN_RESPONSES if min_responses is None else min_responses
    K = len(slices)
    item_domain = np.concatenate([np.full(s.stop - s.start, k) for k, s in enumerate(slices)])
    c = np.zeros(len(a)) if c is None else np.broadcast_to(np.asarray(c, dtype=np.float64), (len(a),))
    a0 = np.asarray(a, dtype=np.float64)
    d0 = np.asarray(d, dtype=np.float64)
    N = correct.shape[0]
    counts = (np.tile([s.stop - s.start for s in slices], (N, 1)) if observed is None
              else np.column_stack([observed[:, s].sum(axis=1) for s in slices]))  # answers per LLM and domain
    seen = counts > 0
    n_llms = seen.sum(axis=0)
    n_seen = np.maximum(n_llms, 1)
    median = np.array([np.median(counts[seen[:, k], k]) if n_llms[k] else 0.0 for k in range(K)])
    # a thin domain (few answers each, or a few of many LLMs) says little about its spread: kept as
    # calibrated; most LLMs of a small leaderboard are its own population
    most = (2 * n_llms >= N) & (median >= SMALL_STEP_RESPONSES)
    has = ((n_llms >= min_llms) | most) & (median >= min_responses)

    tables = _StepTables(correct, observed, slices, a0, d0, c, seen)

    def posterior(x, exact=True):  # x = (loc, log scale): the calibration's traits are theta * scale + loc
        loc, scale = x[:K], np.exp(x[K:])
        st = _tabulate(a0 * scale[item_domain], d0 + a0 * loc[item_domain], c, item_domain, lam, K)
        logL = _domain_tables(correct, observed, slices, st, tables.cells) if exact else tables(loc, scale, st)
        return factor_posterior(st, logL, seen)

    def step(x):  # one pass of the moment matching: the new x and the moments' distance from (0, 1)
        pg, pt = posterior(x, exact=False)
        m1 = pt @ T_GRID
        mk = np.where(seen, m1, 0.0).sum(axis=0) / n_seen
        vk = np.where(seen, pt @ T_GRID**2, 0.0).sum(axis=0) / n_seen - mk**2
        sk = np.where(has, np.sqrt(np.clip(vk, 1e-4, None)), 1.0)
        mk = np.where(has, mk, 0.0)
        new = bound(np.concatenate([x[:K] + np.exp(x[K:]) * mk, x[K:] + np.log(sk)]))
        return new, float(np.max(np.abs(new - x)))

    def bound(x):  # the step rescales a domain by at most max_scale either way (and shifts it by MAX_SHIFT)
        x[:K] = np.clip(x[:K], -MAX_SHIFT, MAX_SHIFT)
        x[K:] = np.clip(x[K:], -math.log(max_scale), math.log(max_scale))
        return x

    # the plain fixed-point pass converges slowly where the posterior leans on the prior (short domains,
    # few LLMs); SQUAREM (Varadhan & Roland 2008) extrapolates along its path, with a plain pass after,
    # whose own move is the test: below tol, its result is where the next pass would have stopped
    x = np.zeros(2 * K)
    n_iter = 0
    while n_iter < max_iter:
        x1, gap = step(x)
        n_iter += 1
        if gap < tol:
            break
        x2, _ = step(x1)
        r, v = x1 - x, x2 - 2 * x1 + x
        nv = np.linalg.norm(v)
        alpha = -np.linalg.norm(r) / nv if nv > 0 else -1.0
        alpha = min(alpha, -1.0)
        x, gap = step(bound(x - 2 * alpha * r + alpha * alpha * v))
        n_iter += 2
        if gap < tol:
            break
    tables.out = None  # the passes' buffer, freed before the reported pass's tables
    loc, scale = x[:K], np.exp(x[K:])
    a = a0 * scale[item_domain]
    d = d0 + a0 * loc[item_domain]
    pg, pt = posterior(x)
    theta, theta_sd = _moments(pt, T_GRID)
    q = grid_quantiles(pt, T_GRID, (0.05, 0.95))
    g, g_sd = _moments(pg, G_GRID)
    return dict(theta=theta, theta_sd=theta_sd, lower=q[..., 0], upper=q[..., 1], g=g, g_sd=g_sd, a=a, d=d,
                loc=loc, scale=scale, n_iter=n_iter)


def _overall_axes(A, W, loc, scale):
    """Rotate the shared traits so that column 0 is *the overall score*.

    The overall score is the shared part of an LLM's average domain trait:
    ``mean_k (A w_k - loc_k) / scale_k``, i.e. the mean over domains of the
    centres on the scale ``scale`` gives (the callers' 1: the calibration's
    population scale, as the Bayesian ``lbar``), standardised.  Whatever
    the rank, it is the same estimand (at rank one it is the shared trait
    itself; an outlier domain with ``w_k ~ 0`` adds nothing).  The remaining
    columns span the rest of the shared space, orthogonal to it, in the
    principal axes of the coefficients.  ``A W^T`` is unchanged.
    """
    N, r = A.shape
    A, W = _normalise(A, W)  # unit-variance, uncorrelated columns
    v = (W / scale[:, None]).mean(axis=0)
    nv = np.linalg.norm(v)
    if nv < 1e-12:
        v, nv = W[0].copy(), max(np.linalg.norm(W[0]), 1e-12)
    u = v / nv
    if r == 1:
        R = u[:, None]
    else:
        Q, _ = np.linalg.qr(np.column_stack([u, np.eye(r)]))
        comp = Q[:, 1:r]
        if comp.shape[1] > 1:  # principal axes of W in the complement
            _, _, Rt = np.linalg.svd(W @ comp, full_matrices=False)
            comp = comp @ Rt.T
        R = np.column_stack([u, comp])
    return A @ R, W @ R


def _shrunk_outputs(lik, theta, mu, a, d, c, centre, W, data, item_domain, priors):
    """The shrunk estimate (internal ``theta``, items ``a``, ``d``, ``c``) on the reported scale.

    Returns traits, items, location and scale, log-likelihood, standard errors (inverse penalised
    information, the ridge ``mu`` included) and the centres. Each domain is standardised and then
    scaled to the spread of a posterior mean, ``sqrt(1 - mean posterior variance)``
    (:func:`posterior_mean_sd`, ``data`` = ``(correct, observed, slices)``), not to 1 (which
    over-disperses short domains): the shrunk scores on the scale of the truth.
    """
    th_s, a_s, d_s, loc, scale = standardise(theta, a, d, item_domain)
    ll = float(lik.theta_loglik(theta).sum())
    info = lik.theta_derivs(theta)[1]
    prec = info + 1.0 / priors.theta_sd**2 + np.where(np.isfinite(mu), mu, 1e6)
    se = 1.0 / np.sqrt(prec) / scale
    centre_s = (centre - loc) / scale
    sd = posterior_mean_sd(*data, centre, a, d, c, info, loadings=W)
    return th_s * sd, a_s / sd[item_domain], d_s, loc, scale / sd, ll, se * sd, centre_s * sd



def _overall_and_loadings(stl, A_rot, W_rot):
    """The overall traits (``A_rot`` standardised), the loadings and the centre's coefficients ``W_rot``,
    each shared trait's sign such that its loadings sum positive.

    Loadings: correlations of the domain traits with the overall traits, corrected for the
    measurement error of the single-domain scores exactly as domain_correlation.csv is
    (estimators.correlation), so that loadings_k . loadings_l matches it and they estimate the
    Bayesian Lambda_k; the shrunk scores' own correlations would be 1 for every domain set onto
    its centre (the centre's slopes are attenuated by the deviations the centre's fit ignores).
    """
    N = A_rot.shape[0]
    overall = A_rot - A_rot.mean(axis=0)
    sd = overall.std(axis=0)
    overall /= np.where(sd > 1e-12, sd, 1.0)  # a replicate of a tiny leaderboard can leave no spread
    basis = np.nan_to_num(stl.theta)
    basis = (basis - basis.mean(axis=0)) / np.where(basis.std(axis=0) > 1e-12, basis.std(axis=0), 1.0)
    loadings = basis.T @ overall / N / np.sqrt(reliability_from_se(stl.theta_se))[:, None]
    norm = np.sqrt((loadings**2).sum(axis=1, keepdims=True))
    loadings /= np.maximum(norm, 1.0)  # a correlation cannot exceed 1
    sign = np.where(loadings.sum(axis=0) >= 0, 1.0, -1.0)
    return overall * sign, loadings * sign, W_rot * sign
