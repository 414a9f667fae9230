"""Independence Metropolis-Hastings of the structure from its Laplace approximation.

Once there are a few hundred LLMs the structure's posterior is close to the
Laplace approximation at its mode. Proposals from it, with a defensive
Student-t part (:func:`imh_log_proposal`), then mix almost like independent
draws, and as they do not depend on the chain their log densities are
evaluated up front, in parallel and without gradients. A pilot of
``IMH_PILOT`` proposals (:func:`imh_pilot`) decides whether the approximation
is close enough (Pareto k-hat of their importance ratios at most
``IMH_PILOT_K_MAX``; it stops at half where those already exceed the chains'
bound), and its proposals, draws of the proposal the chains use, are their
first; the Pareto k-hat of all proposals is part of the
convergence check (:mod:`mtlirt.bayes.diagnostics`). The pilot's proposals
draw from the Student-t part five times as often as the chains' (10% against
2%): those wide draws probe the tails, where a skewed posterior shows, but
are almost never accepted, so the chains' own proposals keep few.

Where the pilot finds the posterior skewed (its k-hat above ``IMH_PROFILE_FROM``, or
its ratios' relative ESS below ``IMH_PROFILE_ESS``;
tiny domains: a loading's right tail is long where it nears 1, falling about
exponentially out to many sds, its left tail short), the proposal's Gaussian
becomes the product of each whitened axis's own profile (:class:`AxisProfiles`):
the log density read at ``PROFILE_AT`` sds either side of the mode,
interpolated between them and falling exponentially beyond. The pilot runs
again, on as many proposals from the profiles, whose k-hat must pass the
bound the chains' proposals must (``PARETO_K_MAX``); the chains' own k-hat over
all their proposals is checked again with their convergence.

The chains' burn-in follows from the pilot too (:func:`imh_burn_in`): where
the importance ratios are at most ``W`` times their mean, an IMH chain is
within ``(1 - 1/W)^n`` of its target in total variation after ``n`` steps,
from any start (Mengersen and Tweedie 1996).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from mtlirt.bayes.collapsed_draws import StoredNodes
from mtlirt.bayes.collapsed_kernel import CollapsedGrid
from mtlirt.bayes.collapsed_structure import (
    _structure_diagnostics,
    _structure_draws,
    log_densities,
    structure_logp,
    structure_of_x,
)
from mtlirt.bayes.diagnostics import PARETO_K_MAX, draws_called_for, pareto_khat

__all__ = [
    "AxisProfiles",
    "PilotProposals",
    "axis_profiles",
    "imh_burn_in",
    "imh_log_proposal",
    "imh_pilot",
    "imh_proposals",
]

# ---------------------------------------------------------------------------
# independence Metropolis-Hastings from the Laplace approximation
# ---------------------------------------------------------------------------

# the defensive Student-t's share of the chains' proposals: any share bounds the importance ratio (by
# 1 / share times the ratio to the t), and in the loadings' dimension (tens to hundreds) a draw of the
# wide t is almost never accepted, so each point of share costs a point of acceptance. The pilot's
# proposals take the larger IMH_PILOT_DEFENSIVE: its t draws probe the tails, where a skewed posterior
# shows in their importance ratios (its first steps then run on the pilot's proposal)
IMH_DEFENSIVE = 0.02
IMH_PILOT_DEFENSIVE = 0.1
IMH_DF = 4.0
IMH_WIDE = 1.5
IMH_TUNE = 100
# the burn-in from the pilot (imh_burn_in): the steps that bring a chain within BURN_IN_TV of its target
# in total variation, by Mengersen and Tweedie's bound with twice the pilot's largest importance ratio,
# within IMH_TUNE_MIN and IMH_TUNE
IMH_TUNE_MIN = 20
BURN_IN_TV = 0.01
IMH_PILOT = 200
IMH_PILOT_K_MAX = 0.5
# draws=None: IMH draws this many steps per chain at a time until the convergence checks pass, at most
# IMH_MAX_DRAWS per chain; then the LLM side is drawn for about KEEP_DRAWS of them (thin=None)
IMH_BLOCK = 250
IMH_MAX_DRAWS = 4000
# a run that fails the checks grows by what their figures call for, within IMH_MIN_MORE and IMH_BLOCK
IMH_MIN_MORE = 50
# the node totals of the visited states kept for the LLM side's draws up to this many bytes (the rest
# are computed again by the draws)
NODE_STORE_BYTES = 1e9
KEEP_DRAWS = 1000
# the axis profiles' proposal: each whitened axis's log density read at +- PROFILE_AT sds, tabulated
# every PROFILE_STEP sds out to the outermost, and beyond it falling exponentially, at least
# PROFILE_SLOPE_MIN per sd
PROFILE_AT = (1.0, 2.0, 4.0)
PROFILE_STEP = 0.05
PROFILE_SLOPE_MIN = 0.5
# the axis profiles are piloted where the Laplace pilot's k-hat exceeds IMH_PROFILE_FROM, or its
# importance ratios' relative ESS falls below IMH_PROFILE_ESS (a k-hat of 200 draws can miss a tail the
# chains then find: their acceptance follows the ratios' spread), and pass at the chains' own k-hat
# bound (PARETO_K_MAX)
IMH_PROFILE_FROM = 0.3
IMH_PROFILE_ESS = 0.8


def _log_student(z: np.ndarray, *, df: float = IMH_DF, wide: float = IMH_WIDE) -> np.ndarray:
    """Log density of the multivariate ``t_df(0, wide^2 I)`` at ``z`` (..., n)."""
    from scipy.special import gammaln

    z = np.asarray(z, dtype=np.float64)
    n = z.shape[-1]
    r2 = (z * z).sum(-1)
    return (gammaln(0.5 * (df + n)) - gammaln(0.5 * df) - 0.5 * n * math.log(df * math.pi) - n * math.log(wide)
            - 0.5 * (df + n) * np.log1p(r2 / (df * wide * wide)))


def imh_log_proposal(z: np.ndarray, *, eps: float = IMH_DEFENSIVE, df: float = IMH_DF,
                     wide: float = IMH_WIDE) -> np.ndarray:
    """Log density of the IMH proposal in the whitened coordinates ``z``: the
    mixture ``(1 - eps) N(0, I) + eps t_df(0, wide^2 I)``. The Student-t part
    (Hesterberg's defensive mixture) bounds the importance ratio wherever the
    posterior's tails are lighter than a t with ``df`` degrees of freedom, so
    the chain is uniformly ergodic even where the Laplace approximation is
    too narrow."""
    z = np.asarray(z, dtype=np.float64)
    lg = -0.5 * (z * z).sum(-1) - 0.5 * z.shape[-1] * math.log(2 * math.pi)
    return _log_mixture(lg, z, eps=eps, df=df, wide=wide)


def _log_mixture(log_main: np.ndarray, z: np.ndarray, *, eps: float = IMH_DEFENSIVE, df: float = IMH_DF,
                 wide: float = IMH_WIDE) -> np.ndarray:
    """Log density at ``z`` of the proposal: its main part (log density ``log_main``) with weight ``1 -
    eps``, the defensive Student-t with ``eps``."""
    return np.logaddexp(math.log1p(-eps) + log_main, math.log(eps) + _log_student(z, df=df, wide=wide))


def imh_proposals(rng: np.random.Generator, size: tuple, n: int, *, eps: float = IMH_DEFENSIVE,
                  df: float = IMH_DF, wide: float = IMH_WIDE, heavy: bool = False) -> np.ndarray:
    """Draws ``size + (n,)`` of :func:`imh_log_proposal`'s mixture (``heavy``:
    of its Student-t part only, the chains' overdispersed starting points)."""
    z = rng.standard_normal(tuple(size) + (n,))
    scale = wide / np.sqrt(rng.chisquare(df, size) / df)
    t = np.ones(size, dtype=bool) if heavy else rng.random(size) < eps
    z[t] *= scale[t][..., None]
    return z


def _imh_chains(log_w_start: np.ndarray, log_w: np.ndarray, u: np.ndarray,
                early: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The IMH chains from the log importance ratios: each chain starts at its
    own state (``log_w_start`` (C,)); at step ``t`` proposal ``t`` (``log_w``
    (C, S)) is accepted when ``log u < log_w[t] - log_w[state]``. Where the
    first ``P`` steps draw from another proposal (the pilot's), ``early`` (C,
    1 + P) holds the start's and their proposals' log ratios to it, which
    those steps compare instead: each step is then an IMH step of its own
    proposal, and every one leaves the posterior invariant. Returns the
    index of each step's state (-1: the start) and the acceptances."""
    C, S = log_w.shape
    P = 0 if early is None else early.shape[1] - 1
    state = np.empty((C, S), dtype=np.int64)
    acc = np.empty((C, S), dtype=bool)
    for c in range(C):
        cur = -1
        for t in range(S):
            if t < P:
                a = bool(np.log(u[c, t]) < early[c, t + 1] - early[c, cur + 1])
            else:
                a = bool(np.log(u[c, t]) < log_w[c, t] - (log_w_start[c] if cur < 0 else log_w[c, cur]))
            if a:
                cur = t
            state[c, t] = cur
            acc[c, t] = a
    return state, acc


def _log_ratios(grid: CollapsedGrid, layout, loading_scale: float, xc: np.ndarray, T: np.ndarray, u: np.ndarray,
                logq: np.ndarray, cores: int, progress: bool = False, desc: str = "",
                totals: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The structure's log density at the proposals ``xc + T u`` (value
    only; with ``totals``, the node totals too: :func:`~mtlirt.bayes.collapsed_structure.log_densities`) and
    their log importance ratios against the proposal's log densities
    ``logq`` (``-inf`` where the density is not finite)."""
    lp = log_densities(structure_logp(grid, layout, loading_scale, gradient=False), xc, T, u, cores, progress, desc,
                        totals)
    return lp, _log_weights(lp, logq)


def _log_weights(lp: np.ndarray, logq: np.ndarray) -> np.ndarray:
    """Log importance ratios ``lp - logq``, ``-inf`` where the log density ``lp`` is not finite."""
    return np.where(np.isfinite(lp), lp - logq, -np.inf)


class AxisProfiles:
    """The proposal's main part where the posterior is skewed: a product over the whitened axes of
    densities whose logs are tabulated (``lv`` (n, m) on the points ``x`` (m,), equally spaced; linear
    in between) and fall exponentially beyond, by ``slope`` (2, n) per sd below ``x[0]`` and above
    ``x[-1]``. Each axis's density is normalised here; it is drawn from exactly (inverse CDF), so the
    importance ratios need no approximation of it."""

    def __init__(self, x: np.ndarray, lv: np.ndarray, slope: np.ndarray):
        self.x = np.asarray(x, dtype=np.float64)
        self.h = float(self.x[1] - self.x[0])
        lv = np.asarray(lv, dtype=np.float64)
        self.slope = np.asarray(slope, dtype=np.float64)
        lv = lv - lv.max(axis=1, keepdims=True)
        d = np.diff(lv, axis=1)
        small = np.abs(d) < 1e-8
        seg = self.h * np.exp(lv[:, :-1]) * np.where(small, 1.0, np.expm1(d) / np.where(small, 1.0, d))
        # each axis's masses in order: the lower tail, the m - 1 segments, the upper tail
        masses = np.concatenate([np.exp(lv[:, :1]) / self.slope[0][:, None], seg,
                                 np.exp(lv[:, -1:]) / self.slope[1][:, None]], axis=1)
        total = masses.sum(axis=1, keepdims=True)
        self.lv = lv - np.log(total)
        self.masses = masses / total
        self.cum = np.cumsum(self.masses, axis=1)

    def sample(self, u: np.ndarray) -> np.ndarray:
        """The points (..., n) at the uniforms ``u`` (..., n), each axis by its inverse CDF."""
        u = np.asarray(u, dtype=np.float64)
        out = np.empty_like(u)
        m = len(self.x)
        for j in range(self.lv.shape[0]):
            uj = u[..., j]
            cum, mass, lv = self.cum[j], self.masses[j], self.lv[j]
            k = np.minimum(np.searchsorted(cum, uj, side="right"), m)
            prev = np.where(k > 0, cum[np.maximum(k - 1, 0)], 0.0)
            frac = np.clip((uj - prev) / mass[k], 0.0, 1.0)
            q = np.clip(k - 1, 0, m - 2)
            d = lv[q + 1] - lv[q]
            small = np.abs(d) < 1e-8
            t = np.where(small, frac, np.log1p(frac * np.expm1(d)) / np.where(small, 1.0, d))
            xj = self.x[q] + np.clip(t, 0.0, 1.0) * self.h
            xj = np.where(k == 0, self.x[0] + np.log(np.maximum(frac, 1e-300)) / self.slope[0, j], xj)
            out[..., j] = np.where(k == m, self.x[-1] - np.log1p(-np.minimum(frac, 1 - 1e-16)) / self.slope[1, j], xj)
        return out

    def log_density(self, z: np.ndarray) -> np.ndarray:
        """The product's log density at ``z`` (..., n)."""
        z = np.asarray(z, dtype=np.float64)
        out = np.zeros(z.shape[:-1])
        for j in range(self.lv.shape[0]):
            zj, lv = z[..., j], self.lv[j]
            v = np.interp(zj, self.x, lv)
            v = np.where(zj < self.x[0], lv[0] - self.slope[0, j] * (self.x[0] - zj), v)
            out += np.where(zj > self.x[-1], lv[-1] - self.slope[1, j] * (zj - self.x[-1]), v)
        return out


def _profile_axis(t: np.ndarray, v: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One axis's log density on the points ``x`` from its values ``v`` at the points ``t`` (0 at the
    centre, ``-inf`` beyond what the grid resolves): over the finite run around the centre, the Laplace
    approximation's ``-t^2 / 2`` plus a monotone cubic (PCHIP) through the departures from it (exact
    where the posterior is Gaussian); beyond, linear on with each side's tail slope (the fall per sd of
    its outermost segment, at least ``PROFILE_SLOPE_MIN``; steep where the density is not finite one
    point out)."""
    from scipy.interpolate import PchipInterpolator

    c = int(np.flatnonzero(t == 0)[0])
    lo, hi = c, c
    while lo > 0 and np.isfinite(v[lo - 1]):
        lo -= 1
    while hi < len(t) - 1 and np.isfinite(v[hi + 1]):
        hi += 1
    steep = 1.0 / PROFILE_STEP
    s_lo = max((v[lo + 1] - v[lo]) / (t[lo + 1] - t[lo]), PROFILE_SLOPE_MIN) if lo < c else steep
    s_hi = max((v[hi - 1] - v[hi]) / (t[hi] - t[hi - 1]), PROFILE_SLOPE_MIN) if hi > c else steep
    inside = -0.5 * x * x
    if hi > lo:
        run = t[lo:hi + 1]
        inside = inside + PchipInterpolator(run, v[lo:hi + 1] + 0.5 * run**2)(np.clip(x, t[lo], t[hi]))
    lv = np.where(x < t[lo], v[lo] - s_lo * (t[lo] - x), np.where(x > t[hi], v[hi] - s_hi * (x - t[hi]), inside))
    return lv, np.array([s_lo, s_hi])


def axis_profiles(logp, laplace: tuple, *, cores: int) -> AxisProfiles:
    """The proposal of a skewed posterior: the log density ``logp`` (value only) along each whitened
    axis of the Laplace approximation ``laplace``, at ``PROFILE_AT`` sds either side of the centre
    (``2 len(PROFILE_AT) n + 1`` evaluations, in parallel), interpolated every ``PROFILE_STEP`` sds
    (:func:`_profile_axis`). Where the posterior is Gaussian in those axes each is close to ``N(0,
    1)``; where an axis's tail is long (a tiny domain's loading, falling about exponentially over many
    sds), so is its profile's, which a Gaussian with one scale per side cannot follow."""
    xc, T, _ = laplace
    n = len(xc)
    at = np.asarray(PROFILE_AT, dtype=np.float64)
    t = np.concatenate([-at[::-1], [0.0], at])
    z = np.concatenate([s * np.eye(n) for s in t if s != 0] + [np.zeros((1, n))])
    lp = log_densities(logp, xc, T, z, cores, False, "")
    v = np.insert((lp[:-1] - lp[-1]).reshape(len(t) - 1, n), len(at), 0.0, axis=0)
    v = np.nan_to_num(v, nan=-np.inf, posinf=-np.inf, neginf=-np.inf)
    x = np.linspace(-at[-1], at[-1], int(round(2 * at[-1] / PROFILE_STEP)) + 1)
    parts = [_profile_axis(t, v[:, j], x) for j in range(n)]
    return AxisProfiles(x, np.stack([p[0] for p in parts]), np.stack([p[1] for p in parts], axis=1))


def _proposed(rng: np.random.Generator, size: tuple, n: int, profile: AxisProfiles | None = None,
              heavy: bool = False, eps: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``size`` proposals in whitened coordinates and their log proposal densities (:func:`_log_q`): the
    mixture of :func:`imh_log_proposal` with defensive share ``eps`` (default: the chains',
    ``IMH_DEFENSIVE``), its normal part replaced by ``profile`` where given (``heavy``: drawn from the
    Student-t part, the chains' starting points)."""
    eps = IMH_DEFENSIVE if eps is None else eps
    if profile is None:
        z = imh_proposals(rng, size, n, heavy=heavy, eps=eps)
    else:
        z = imh_proposals(rng, size, n, heavy=True)
        main = profile.sample(rng.random(tuple(size) + (n,)))
        if not heavy:
            z = np.where((rng.random(size) >= eps)[..., None], main, z)
    return z, _log_q(z, profile, eps)


def _log_q(z: np.ndarray, profile: AxisProfiles | None, eps: float) -> np.ndarray:
    """The log density at ``z`` of the proposal of :func:`_proposed`."""
    return imh_log_proposal(z, eps=eps) if profile is None else _log_mixture(profile.log_density(z), z, eps=eps)


@dataclass
class PilotProposals:
    """A pilot's proposals in whitened coordinates ``z`` (P, n), their log densities ``lp`` and log
    importance ratios ``lw`` (P,), and node totals (``totals`` (P, G, N), or
    None past the node store's budget). They are draws of the proposal the chains then use (with the
    pilot's larger defensive share), so the chains take them as their first proposals
    (:func:`_imh_loadings`) instead of evaluating as many anew."""

    z: np.ndarray
    lp: np.ndarray
    lw: np.ndarray
    totals: np.ndarray | None


def imh_pilot(grid: CollapsedGrid, layout, loading_scale: float, laplace: tuple, *, seed: int, cores: int,
              size: int = IMH_PILOT, profile: AxisProfiles | None = None) -> tuple[dict, PilotProposals | None]:
    """Whether the proposal (the Laplace approximation, or ``profile`` where
    given: :func:`axis_profiles`) fits the structure's posterior: the
    Pareto k-hat of the importance ratios of ``size`` proposals (their own
    seed stream), their relative effective sample size and their largest
    importance ratio over the mean (``max_weight``, for :func:`imh_burn_in`).
    The first half is evaluated first; where its k-hat already exceeds the
    chains' bound ``PARETO_K_MAX`` the pilot stops there (``stopped_at``).
    Returns the record and the evaluated proposals (:class:`PilotProposals`)."""
    xc, T, winfo = laplace
    if winfo["kind"] != "full":
        return {"khat": float("inf"), "relative_ess": 0.0, "size": 0, "reason": "no full Laplace approximation"}, None
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0x1A4C1]))
    u, logq = _proposed(rng, (size,), len(xc), profile, eps=IMH_PILOT_DEFENSIVE)
    totals = _NodeStore(grid).batch(size)
    half = size // 2
    lp, lw = _log_ratios(grid, layout, loading_scale, xc, T, u[:half], logq[:half], cores,
                         totals=None if totals is None else totals[:half])
    stopped = pareto_khat(lw) > PARETO_K_MAX
    if stopped:
        size, u = half, u[:half]
        totals = None if totals is None else totals[:half]
    else:
        lp2, lw2 = _log_ratios(grid, layout, loading_scale, xc, T, u[half:], logq[half:], cores,
                               totals=None if totals is None else totals[half:])
        lp, lw = np.concatenate([lp, lp2]), np.concatenate([lw, lw2])
    w = np.exp(lw - lw.max())
    record = {"khat": round(pareto_khat(lw), 4), "relative_ess": round(float(w.sum() ** 2 / (w**2).sum() / size), 4),
              "max_weight": round(float(1.0 / w.mean()), 4), "size": int(size),
              "proposal": "laplace" if profile is None else "axis profiles"}
    if stopped:
        record["stopped_at"] = int(half)
    return record, PilotProposals(u, lp, lw, totals)


def imh_burn_in(pilot: dict | None) -> int:
    """The steps each IMH chain discards, from its proposal's pilot (:func:`imh_pilot`).

    Where every importance ratio ``p / q`` is at most ``W`` times its mean, an
    independence sampler is within ``(1 - 1/W)^n`` of its target in total
    variation after ``n`` steps, whatever its start (Mengersen and Tweedie
    1996, Theorem 2.1). ``W`` is taken as twice the largest ratio of the
    pilot's proposals (a sample's largest falls short of the bound); ``n``
    brings the distance to ``BURN_IN_TV``, within ``IMH_TUNE_MIN`` and
    ``IMH_TUNE`` (``IMH_TUNE`` without a pilot). A proposal close to the
    posterior (ratios near 1) needs few steps; a skewed posterior, whose
    axis profiles leave ratios of several times their mean, more."""
    w = (pilot or {}).get("max_weight")
    if w is None or not np.isfinite(w) or w <= 0:
        return IMH_TUNE
    bound = max(2.0 * float(w), 1.0 + 1e-12)
    n = math.ceil(math.log(BURN_IN_TV) / math.log1p(-1.0 / bound))
    return int(min(max(n, IMH_TUNE_MIN), IMH_TUNE))


class _NodeStore:
    """The node totals of the states the chains visit after their burn-in, kept for the LLM side's
    draws (:class:`~mtlirt.bayes.collapsed_draws.StoredNodes`) within ``NODE_STORE_BYTES``: each batch
    of proposals is evaluated with its totals, then only the visited states' are kept."""

    def __init__(self, grid: CollapsedGrid, budget: float | None = None):
        self.shape = (grid.offsets.shape[0], grid.shape[0])
        self.row_bytes = 4 * self.shape[0] * self.shape[1]
        self.budget = NODE_STORE_BYTES if budget is None else budget
        self.rows: dict[tuple[int, int], np.ndarray] = {}

    def batch(self, n: int, held: int = 0) -> np.ndarray | None:
        """An array for ``n`` evaluations' totals, or None past the budget (``held``: rows evaluated
        elsewhere, the pilot's, that may be kept too)."""
        if (len(self.rows) + held + n) * self.row_bytes > self.budget:
            return None
        return np.empty((n, *self.shape), dtype=np.float32)

    def keep(self, totals: np.ndarray | None, keys: list, lp: np.ndarray, state: np.ndarray, tune: int):
        """The rows of ``totals`` (keys ``(chain, step)``, step -1: the start) that are states after the
        burn-in, of finite density."""
        if totals is None:
            return
        visited = {(c, int(t)) for c in range(state.shape[0]) for t in np.unique(state[c, tune:])}
        for row, key in enumerate(keys):
            if key in visited and np.isfinite(lp[row]):
                self.rows[key] = totals[row].copy()

    def stored(self, state: np.ndarray, tune: int) -> StoredNodes | None:
        """The kept totals and each draw's row in them."""
        if not self.rows:
            return None
        keys = list(self.rows)
        where = {k: i for i, k in enumerate(keys)}
        index = np.array([[where.get((c, int(t)), -1) for t in state[c, tune:]] for c in range(state.shape[0])])
        return StoredNodes([self.rows[k] for k in keys], index)


def _imh_datasets(xc: np.ndarray, T: np.ndarray, z: np.ndarray, lp: np.ndarray, lw: np.ndarray, state: np.ndarray,
                  acc: np.ndarray, tune: int, n_free: int) -> tuple:
    """The chains' draws after the burn-in as the posterior and sample-stats datasets: ``z`` (C, 1 + S,
    n) the start and every proposal in whitened coordinates (``xc + T z``), ``lp`` (C, 1 + S) their log
    densities, ``lw`` (C, S) the proposals' log importance ratios, ``state`` and ``acc`` (C, S) from
    :func:`_imh_chains`."""
    import xarray as xr

    C = state.shape[0]
    pick = state[:, tune:] + 1  # index 0: the start
    free, diag = structure_of_x(xc + np.take_along_axis(z, pick[..., None], axis=1) @ T.T, n_free)
    data = {"loading_free": (("chain", "draw", "loading_free_dim_0"), free)} if n_free else {}
    data["loading_diag"] = (("chain", "draw", "loading_diag_dim_0"), diag)
    coords = {"chain": np.arange(C), "draw": np.arange(pick.shape[1])}
    post = xr.Dataset(data, coords=coords)
    ss = xr.Dataset({
        "accepted": (("chain", "draw"), acc[:, tune:]),
        "proposal_log_weight": (("chain", "draw"), lw[:, tune:]),
        "lp": (("chain", "draw"), np.take_along_axis(lp, pick, axis=1)),
    }, coords=coords)
    return post, ss


def _shared_out(pilot: PilotProposals | None, chains: int, steps: int, n: int) -> tuple:
    """The pilot's proposals shared out as each chain's first ``P`` (at most ``steps``): ``P``, their
    whitened coordinates (C, P, n), log densities and log importance ratios (C, P), and their node totals,
    store keys ``(chain, step)`` and log densities for :meth:`_NodeStore.keep`."""
    if pilot is None:
        return 0, (np.empty((chains, 0, n)), np.empty((chains, 0)), np.empty((chains, 0))), (None, [], None)
    P = min(len(pilot.z) // chains, steps)
    m = chains * P
    arrays = (pilot.z[:m].reshape(chains, P, n), pilot.lp[:m].reshape(chains, P), pilot.lw[:m].reshape(chains, P))
    keys = [(c, t) for c in range(chains) for t in range(P)]
    return P, arrays, (None if pilot.totals is None else pilot.totals[:m], keys, pilot.lp[:m])


def _imh_loadings(grid: CollapsedGrid, layout, loading_scale: float, laplace: tuple, *, draws, tune, chains, cores,
                  seed, progress, info: dict, profile: AxisProfiles | None = None,
                  pilot: PilotProposals | None = None):
    """Independence Metropolis-Hastings on the structure: proposals from the
    Laplace approximation at the mode (``laplace``: :func:`~mtlirt.bayes.collapsed_structure._laplace`;
    or the axis profiles ``profile`` where given, :func:`axis_profiles`) with a
    defensive Student-t part (:func:`imh_log_proposal`), chains started at
    draws of that t. Each chain's first proposals are the pilot's (``pilot``:
    draws of the same proposal with the pilot's defensive share, already
    evaluated), shared out among the chains. The proposals do not depend on the chains' states, so
    every log density is evaluated first, in parallel (value only, no
    gradient); the accept steps then cost nothing. Returns ``(posterior,
    sample_stats, diagnostics or None, stored node totals or None)``, the first two as
    :func:`~mtlirt.bayes.collapsed_structure._sample_loadings`, the last the visited states' node totals
    (:class:`_NodeStore`) for the LLM side's draws;
    the sample stats hold each step's acceptance, the log importance ratio of its proposal
    (``proposal_log_weight``: their Pareto k-hat checks that the proposal
    covers the posterior, :func:`mtlirt.bayes.diagnostics.diagnostics`) and
    the state's log density (``lp``).

    ``draws=None``: the run length is chosen by the convergence checks. The
    chains draw ``IMH_BLOCK`` steps each, then as many more as the checks'
    figures call for (:func:`~mtlirt.bayes.diagnostics.draws_called_for`), continued from their last
    state with new proposals of the same random stream, until the loadings
    pass :func:`~mtlirt.bayes.collapsed_structure._structure_diagnostics` (R-hat, bulk and tail ESS, Pareto k-hat)
    or reach ``IMH_MAX_DRAWS`` (``info["run_length"]`` records each block)."""

    n_free = len(layout[0])
    t0 = time.perf_counter()
    xc, T, winfo = laplace
    n = len(xc)
    info["whitening"] = winfo
    if winfo["kind"] != "full":
        raise RuntimeError("the structure's Laplace approximation is not positive definite at the mode: "
                           "independence Metropolis-Hastings needs it; sample with NUTS (sampler='nutpie')")
    adaptive = draws is None
    S = int(tune) + (IMH_BLOCK if adaptive else int(draws))
    P, (z0, lp0, lw0), kept = _shared_out(pilot, chains, S, n)
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0x1A4C0]))
    z_start, q_start = _proposed(rng, (chains,), n, profile, heavy=True)
    z, q = _proposed(rng, (chains, S - P), n, profile)
    u = rng.random((chains, S))
    flat = np.concatenate([z_start, z.reshape(chains * (S - P), n)])
    store = _NodeStore(grid)
    totals = store.batch(len(flat), held=0 if kept[0] is None else len(kept[1]))
    keys = [(c, -1) for c in range(chains)] + [(c, t) for c in range(chains) for t in range(P, S)]
    lp, lw = _log_ratios(grid, layout, loading_scale, xc, T, flat, np.concatenate([q_start, q.reshape(-1)]), cores,
                         progress, "IMH: log densities of the proposals", totals)
    pending = [kept, (totals, keys, lp)]  # (node totals, keys, log densities) the store keeps the visited of
    lp_start, lw_start = lp[:chains], lw[:chains]
    # the first P steps propose the pilot's draws: their states compare ratios to the pilot's proposal
    early = np.concatenate([_log_weights(lp_start, _log_q(z_start, profile, IMH_PILOT_DEFENSIVE))[:, None], lw0],
                           axis=1)
    z = np.concatenate([z0, z], axis=1)
    lp = np.concatenate([lp0, lp[chains:].reshape(chains, S - P)], axis=1)
    lw = np.concatenate([_log_weights(lp0, _log_q(z0, profile, IMH_DEFENSIVE)), lw[chains:].reshape(chains, S - P)],
                        axis=1)
    blocks = []
    while True:
        S = z.shape[1]
        D = S - int(tune)
        state, acc = _imh_chains(lw_start, lw, u, early)
        for batch in pending:
            store.keep(*batch, state, tune)
        pending = []
        own = np.concatenate([lw0, lw[:, P:]], axis=1)  # each proposal's ratio to its own proposal
        post, ss = _imh_datasets(xc, T, np.concatenate([z_start[:, None, :], z], axis=1),
                                 np.concatenate([lp_start[:, None], lp], axis=1), own, state, acc, tune, n_free)
        if not adaptive:
            checked = None
            break
        r = len(layout[2])
        K = (n_free + r + r * (r - 1) // 2) // r  # the loadings' K r - r (r - 1) / 2 entries
        checked = _structure_diagnostics(post, ss, _structure_draws(post, K, layout)[0])
        blocks.append({"draws": int(D), **{k: checked[k] for k in ("max_rhat", "min_ess_bulk", "min_ess_tail",
                                                                     "pareto_khat") if k in checked}})
        if checked["converged"] or D >= IMH_MAX_DRAWS:
            break
        more = min(draws_called_for(D, chains, checked, IMH_MIN_MORE, IMH_BLOCK), IMH_MAX_DRAWS - D)
        z2, q2 = _proposed(rng, (chains, more), n, profile)
        u2 = rng.random((chains, more))
        totals = store.batch(chains * more)
        keys = [(c, S + t) for c in range(chains) for t in range(more)]
        lp2, lw2 = _log_ratios(grid, layout, loading_scale, xc, T, z2.reshape(chains * more, n), q2.reshape(-1),
                               cores, progress, "IMH: log densities of more proposals", totals)
        pending.append((totals, keys, lp2))
        z, u = np.concatenate([z, z2], axis=1), np.concatenate([u, u2], axis=1)
        lp = np.concatenate([lp, lp2.reshape(chains, more)], axis=1)
        lw = np.concatenate([lw, lw2.reshape(chains, more)], axis=1)
    if not (np.isfinite(lp).all() and np.isfinite(lp_start).all()):
        info["imh_nonfinite_proposals"] = int((~np.isfinite(lp)).sum() + (~np.isfinite(lp_start)).sum())
    if adaptive:
        info["run_length"] = {"rule": f"{IMH_BLOCK} draws per chain, then as many more as the checks call for "
                                      f"({IMH_MIN_MORE}-{IMH_BLOCK} at a time) until they pass, at most "
                                      f"{IMH_MAX_DRAWS}", "blocks": blocks, "draws": int(D),
                              "converged": bool(checked["converged"])}
    info["imh"] = {"acceptance": [round(float(a), 4) for a in acc[:, tune:].mean(1)],
                   "evaluations": int(chains * (S + 1 - P)), "pilot_proposals": int(chains * P), "tune": int(tune),
                   "seconds": time.perf_counter() - t0}
    stored = store.stored(state, tune)
    info["imh"]["stored_node_totals"] = 0 if stored is None else len(stored.totals)
    return post, ss, checked, stored


