"""Item fit (the model checks of :mod:`mtlirt.evaluate.checks`): Orlando and Thissen's S-X2 per item
(:func:`item_fit`), as ``mirt::itemfit`` computes it, and its posterior predictive version (:func:`item_fit_ppc`)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..estimators.bootstrap import draw_responses
from ..numerics.llm_side import EPS, curves, grid_loglik, log_curves, normal_log_weights, posterior
from ..progress import progress_bar
from .check_inputs import ALPHA, _bh, _check_data, _n_item_parameters, _population_items

#: A misfitting item (adjusted p below alpha) whose S-X2 RMSEA exceeds this misfits by an amount that matters
#: (Maydeu-Olivares and Joe's 0.05 for limited-information statistics).
RMSEA_BOUND = 0.05


def _nodes(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Trapezoid nodes on [-6, 6] and weights of the ``N(0, 1)`` population.

    The step is 0.8 / sqrt(the largest information of the summed score,
    ``sum a^2 / 4``), at most 0.1: the integrands are about as narrow as the
    posterior of a trait given its summed score, and the trapezoid rule on a
    Gaussian of sd ``sigma`` with step ``sigma`` errs by about 5e-9."""
    info = float(np.sum(np.asarray(a, float) ** 2)) / 4.0
    h = min(0.1, 0.8 / np.sqrt(max(info, 1e-12)))
    x = np.linspace(-6.0, 6.0, int(np.ceil(12.0 / h)) + 1)
    return x, np.exp(normal_log_weights(x))


def sx2_expected(a, d, c=None, *, nodes: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Model-implied proportions correct of every item by summed score, for one domain.

    Parameters
    ----------
    a, d, c : ndarray (J,)
        Items on the population scale (traits ``N(0, 1)``).
    nodes : (x, w), optional
        Quadrature nodes and weights of the population (default :func:`_nodes`).

    Returns
    -------
    expected : ndarray (J, J + 1)
        ``E[j, s]``: probability that item ``j`` is correct given the summed
        score ``s`` (NaN at ``s = 0`` and ``s = J``, where it is 0 and 1).
    score_prob : ndarray (J + 1,)
        The marginal probability of each summed score.
    """
    a, d = np.asarray(a, float), np.asarray(d, float)
    c = np.zeros_like(a) if c is None else np.asarray(c, float)
    x, w = nodes if nodes is not None else _nodes(a)
    J, w = len(a), np.ascontiguousarray(w, dtype=np.float64)
    P = np.ascontiguousarray(np.clip(curves(a, d, c, x), EPS, 1 - EPS), dtype=np.float64)
    from ._summed_score import leave_one_out, lord_wingersky

    f = lord_wingersky(P)
    den = f @ w
    num = leave_one_out(P, w, f)  # item j left out by deconvolution
    with np.errstate(invalid="ignore", divide="ignore"):
        E = num / den[None, :]
    E[:, 0] = np.nan
    E[:, J] = np.nan
    return E, den


def _sx2_block(y: np.ndarray, E: np.ndarray, n_par: int, min_expected: float):
    """S-X2, df, groups and the model's proportion correct of every item of one complete block
    ``y`` (n x J) given the expected proportions ``E`` (J x J+1) of :func:`sx2_expected`.

    The inner score groups (1 to J - 1) are merged in order, for every item, until each merged
    group expects at least ``min_expected`` correct and as many wrong answers; a short last run
    joins the group before it (:func:`mtlirt.evaluate._summed_score.sx2_groups`). Empty score
    groups change no group, so only the scores that occur are visited (a few dozen LLMs on a
    domain of a thousand items visit a few dozen)."""
    from ._summed_score import sx2_groups

    N, J = y.shape
    S = y.sum(1)
    Ns = np.bincount(S, minlength=J + 1).astype(float)
    Os = np.zeros((J, J + 1))  # Os[j, s]: correct answers to item j in score group s
    order = np.argsort(S, kind="stable")
    scores, starts = np.unique(S[order], return_index=True)
    Os[:, scores] = np.add.reduceat(y[order], starts, axis=0).T
    occur = 1 + np.flatnonzero(Ns[1:J] > 0)
    Es = np.nan_to_num(E[:, occur]) * Ns[occur]
    sx2, groups = np.empty(J), np.empty(J, np.int64)
    sx2_groups(Ns, Os, Es, occur, float(min_expected), sx2, groups)
    expected = np.where(groups > 0, (Es.sum(1) + Ns[J]) / N, np.nan)
    return sx2, groups - n_par, groups, expected


def _impute(y: np.ndarray, obs: np.ndarray, a, d, c, rng: np.random.Generator, n_nodes: int = 121) -> np.ndarray:
    """One completion of a block: each row's trait drawn from its posterior given its observed
    answers (``N(0, 1)`` population, on a grid), its missing answers drawn from the model."""
    x = np.linspace(-6.0, 6.0, n_nodes)
    P = curves(a, d, c, x)
    L = grid_loglik((y * obs).astype(float), obs.astype(float), *log_curves(P))
    cdf = np.cumsum(posterior(L, -0.5 * x**2)[0], 1)
    node = (cdf < rng.random(len(y))[:, None] * cdf[:, -1:]).sum(1)
    draw = (rng.random(y.shape) < P[:, node].T).astype(y.dtype)
    return np.where(obs, y, draw)


def item_fit(est, responses, *, alpha: float = ALPHA, min_expected: float = 1.0, impute: int = 5,
             seed: int = 0) -> pd.DataFrame | None:
    """S-X2 item fit of every item (module docstring).

    Parameters
    ----------
    est : Estimate
        A fit with item parameters.
    responses : Responses
        The fit's data.
    alpha : float
        Items with a Benjamini-Hochberg adjusted p-value below ``alpha`` are
        flagged (``misfit``).
    min_expected : float
        Smallest expected count of correct and of wrong answers in a score group.
    impute : int
        LLMs that answered only part of a domain: their missing answers in it
        are imputed this many times (each LLM's trait drawn from its posterior
        given its observed answers, the answers from the model) and the S-X2
        averaged over the completed data sets, as ``mirt::itemfit(impute=)``
        does; 0 uses the LLMs that answered the whole domain only. LLMs without
        any answer in a domain are left out of it either way.
    seed : int
        Seed of the imputations.

    Returns
    -------
    pandas.DataFrame or None
        ``item, domain, n`` (LLMs used), ``imputed`` (share of the used
        answers that were imputed), ``groups, s_x2, df, p_value, q_value``
        (BH), ``misfit``, ``rmsea`` (the misfit's size, as ``mirt``'s
        ``RMSEA.S_X2``: with thousands of LLMs a departure too small to matter
        is significant; a misfit with an RMSEA above :data:`RMSEA_BOUND` is
        not small; with a few dozen LLMs the RMSEA alone is noise), and
        ``observed`` / ``expected`` (proportion correct among the LLMs used:
        observed answers only, and the model's). None for the accuracy
        baseline (no item model).
    """
    from scipy.stats import chi2

    _check_data(est, responses)
    if est.method == "accuracy":
        return None
    a, d, c = _population_items(est)
    n_par = _n_item_parameters(est)
    rng = np.random.default_rng(seed)
    rows = []
    for k, sl in enumerate(responses.domain_slices):
        J = sl.stop - sl.start
        y = responses.correct[:, sl].astype(np.int64)
        obs = np.ones(y.shape, bool) if responses.mask is None else responses.mask[:, sl]
        keep = obs.all(1) if impute <= 0 else obs.any(1)
        y, obs = y[keep], obs[keep]
        N = len(y)
        partial = not obs.all()
        sx2, df, groups, expected = np.full(J, np.nan), np.zeros(J, int), np.zeros(J, int), np.full(J, np.nan)
        if J >= 2 and N > 0:
            E, _ = sx2_expected(a[sl], d[sl], c[sl])
            if not partial:
                sx2, df, groups, expected = _sx2_block(y, E, n_par, min_expected)
            else:
                runs = [_sx2_block(_impute(y, obs, a[sl], d[sl], c[sl], rng), E, n_par, min_expected)
                        for _ in range(impute)]
                sx2 = np.mean([r[0] for r in runs], axis=0)
                df = np.rint(np.mean([r[1] for r in runs], axis=0)).astype(int)
                groups = np.rint(np.mean([r[2] for r in runs], axis=0)).astype(int)
                expected = np.mean([r[3] for r in runs], axis=0)
        with np.errstate(invalid="ignore", divide="ignore"):
            observed = (y * obs).sum(0) / obs.sum(0)
        share_imputed = 1.0 - obs.mean() if N else 0.0
        for j in range(J):
            df_j = int(df[j])
            ok = df_j > 0 and np.isfinite(sx2[j])
            rows.append({"item": responses.items[sl.start + j], "domain": responses.domains[k], "n": N,
                         "imputed": float(share_imputed), "groups": int(groups[j]),
                         "s_x2": float(sx2[j]) if ok else np.nan, "df": df_j,
                         "p_value": float(chi2.sf(sx2[j], df_j)) if ok else np.nan,
                         "rmsea": _rmsea(sx2[j], df_j, N) if ok and N > 1 else np.nan,
                         "observed": float(observed[j]) if N else np.nan, "expected": float(expected[j])})
    out = pd.DataFrame(rows)
    out["item"] = out["item"].astype(str)
    out["domain"] = out["domain"].astype(str)
    out["q_value"] = _bh(out["p_value"].to_numpy())
    out["misfit"] = out["q_value"] < alpha
    return out[["item", "domain", "n", "imputed", "groups", "s_x2", "df", "p_value", "q_value", "misfit",
                "rmsea", "observed", "expected"]]


def large_misfits(table: pd.DataFrame) -> int:
    """The misfitting items of an :func:`item_fit` table whose RMSEA exceeds :data:`RMSEA_BOUND`."""
    return int((table["misfit"] & (table["rmsea"] > RMSEA_BOUND)).sum())


def _rmsea(sx2: float, df: int, n: int) -> float:
    """The misfit's size, as ``mirt::itemfit``'s ``RMSEA.S_X2``: ``sqrt(max(S-X2 - df, 0) / (df (n - 1)))``,
    about the root mean square of the Pearson residuals per LLM, whatever the number of LLMs."""
    return float(np.sqrt(max(sx2 - df, 0.0) / (df * (n - 1))))


def item_fit_ppc(est, responses, *, n_draws: int = 50, seed: int = 0, min_expected: float = 1.0) -> pd.DataFrame | None:
    """Posterior predictive S-X2: for each of ``n_draws`` posterior draws, the S-X2 of the data
    and of answers replicated from the draw (its traits and items), both at the draw's items;
    ``ppp = P(S-X2(replicated) >= S-X2(data))`` per item. Answers missing inside a domain an LLM
    ran are completed from the same draw in both. A point estimate is one draw (``ppp`` 0 or 1).

    Returns
    -------
    pandas.DataFrame or None
        ``item, domain, s_x2_data, s_x2_replicated`` (means over the draws), ``ppp``; None for
        the accuracy baseline.
    """
    _check_data(est, responses)
    if est.method == "accuracy":
        return None
    n_par = _n_item_parameters(est)
    rng = np.random.default_rng(seed)
    S = est.n_draws
    take = np.sort(rng.choice(S, size=min(n_draws, S), replace=False))
    theta, a_all, d_all, c_all = est.item_model_draws()
    # replicates from the reported scores and items; the expected proportions on the population
    # scale (a point fit's items mapped there; a posterior's items are on it)
    fixed = all(np.ptp(v, axis=0).max() == 0 for v in (a_all, d_all, c_all))
    J = responses.n_items
    obs_all = np.ones((responses.n_llms, J), bool) if responses.mask is None else responses.mask
    sx_d, sx_r, exceed = np.zeros(J), np.zeros(J), np.zeros(J)
    cache: dict = {}
    with progress_bar(len(take), "posterior predictive item fit") as bar:
        for s in take:
            a, d, c = a_all[s], d_all[s], c_all[s]
            rep = draw_responses(theta[s], a, d, c if np.any(c > 0) else None, responses.domain_slices, None, rng)
            for k, sl in enumerate(responses.domain_slices):
                if sl.stop - sl.start < 2:
                    continue
                obs = obs_all[:, sl]
                rows = obs.any(1)
                key = k if fixed else (k, s)
                if key not in cache:
                    E, _ = sx2_expected(a[sl], d[sl], c[sl]) if S > 1 or est.info.get("population_scale") is None \
                        else sx2_expected(*(v[sl] for v in _population_items(est)))
                    cache[key] = E
                E = cache[key]
                y_rep = rep[:, sl][rows].astype(np.int64)  # the domain's columns first: one copy of J_k columns
                y_dat = np.where(obs[rows], responses.correct[:, sl][rows], y_rep).astype(np.int64)
                if not fixed:
                    cache.pop(key)
                t_d = _sx2_block(y_dat, E, n_par, min_expected)[0]
                t_r = _sx2_block(y_rep, E, n_par, min_expected)[0]
                sx_d[sl] += np.nan_to_num(t_d)
                sx_r[sl] += np.nan_to_num(t_r)
                exceed[sl] += np.nan_to_num(t_r) >= np.nan_to_num(t_d)
            bar.update()
    m = len(take)
    return pd.DataFrame({"item": [str(x) for x in responses.items],
                         "domain": [str(responses.domains[k]) for k in responses.item_domain],
                         "s_x2_data": sx_d / m, "s_x2_replicated": sx_r / m, "ppp": exceed / m})
