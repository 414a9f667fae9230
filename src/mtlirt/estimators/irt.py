"""Single-domain IRT for all ``K`` domains at once (docs/model.md, "Single-domain fits (STL)").

Item model, for item ``j`` of domain ``k``::

    P(y_ij = 1) = c_j + (1 - c_j) * sigmoid(a_j * theta_ik + d_j)

with discrimination ``a_j > 0``, intercept ``d_j`` (difficulty ``-d_j / a_j``)
and a lower asymptote ``c_j`` (0 unless ``guessing`` is given: fixed, or
``"estimate"``: one floor ``c_k`` per domain, shared by its items, estimated
with the items under a weak ``Beta(2, 4)`` prior, mode 0.25).

Estimation (a MAP: without the priors the fit does not converge; choices *(ours)*):

* **Items** by penalised *marginal* maximum likelihood: every domain's
  traits follow the population prior ``N(0, 1)`` (the identification of docs/model.md),
  integrated out on a grid of equally spaced nodes on ``[-6, 6]`` (49 for
  short domains, finer for long ones: :func:`node_levels`) by EM;
  penalties ``log a_j ~ N(0, 0.5^2)`` and ``d_j ~ N(0, 3^2)`` and box bounds
  keep constant and perfectly separating items finite.  The EM is
  accelerated by parameter expansion (each domain's posterior population is
  mapped back to mean 0, variance 1 after every M-step) and SQUAREM.  A penalised *joint* ML
  (alternating Newton steps on traits and items) was tried first: on
  10-item domains the discriminations creep to their bound and it does not
  converge (JML's inconsistency for short tests), whatever the ridge on
  ``log a``; integrating the traits out removes that, and converges in tens
  of EM sweeps.
* **Traits** by MAP given the items: 1-D Newton per (LLM, domain) with the
  ``N(0, 1)`` prior (a real ridge: all-correct / all-wrong LLMs stay finite),
  bound ``|theta| <= 6``.
* Each domain's traits are then standardised (mean 0, variance 1 over the
  LLMs) and the items transformed so that every linear predictor
  ``a_j theta_ik + d_j`` -- hence the likelihood -- is unchanged.

Speed.  With no guessing the EM needs only the sufficient statistics
``s_ik = sum_j a_j y_ij`` (one matrix-vector product per domain block) for
the E-step, and ``t_j = sum_i E[theta_ik] y_ij`` (another) for the M-step:
on a complete matrix the log-partition ``G_k(t) = sum_j log(1 + exp(a_j t +
d_j))`` is the same for every LLM of a domain (docs/model.md, "Calibrate, then score"), so it is
computed once per grid node.  The MAP trait step tabulates ``G_k`` and its
derivatives on a fine grid and interpolates (cubic Hermite), so a Newton
step costs ``O(N K)``.  Missing responses: the EM uses a ``float32``
observation mask in matrix products; the trait step subtracts the unobserved
cells of observed (LLM, domain) blocks exactly (sparse correction), and an
LLM without any response in a domain drops out of that domain's partition (it
gets the prior, or the MTL centre).  A guessing floor shared by a domain is
tabulated too (:class:`TabulatedThetaLik`: one term per correct cell);
floors that differ within a domain, or more than a quarter of cells missing
inside observed blocks, use dense per-domain blocks for the trait step
(``O(N J)`` per Newton step).

1PL: one common discrimination per domain (estimated) -- the Rasch model on
the standardised population scale.  Fixing ``a_j = 1`` would tie the trait
variance to the logit scale instead; the fitted probabilities are the same
family.
"""

from __future__ import annotations

import contextlib
import ctypes
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial

import numpy as np
from scipy.special import expit

from ..numerics import hermite, llm_side
from ..numerics.llm_side import softplus
from .pointfit import PointFit

__all__ = [
    "DEFAULT_PENALTIES",
    "DenseThetaLik",
    "Penalties",
    "ResponseData",
    "TabulatedThetaLik",
    "blas_threads",
    "calibrate_items",
    "fit_stl",
    "item_domain_of",
    "node_levels",
    "score_theta",
    "standardise",
    "theta_step",
    "to_internal",
]

Progress = Callable[[str, float], None] | None


# ---------------------------------------------------------------------------
# BLAS threads: the estimators make many small matrix-vector products (one per
# domain block); a threaded OpenBLAS spends more time waking threads than
# computing (many times slower on a loaded machine), so the fits run
# them single-threaded.  ctypes on the OpenBLAS that numpy loaded; a no-op
# where it cannot be found.
# ---------------------------------------------------------------------------
_BLAS_FUNCS: tuple | None = None


def _find_blas():
    global _BLAS_FUNCS
    if _BLAS_FUNCS is not None:
        return _BLAS_FUNCS
    _BLAS_FUNCS = ()
    try:
        with open("/proc/self/maps") as fh:
            paths = {line.split()[-1] for line in fh if "openblas" in line.lower() and ".so" in line}
    except OSError:
        return _BLAS_FUNCS
    names = [("scipy_openblas_set_num_threads64_", "scipy_openblas_get_num_threads64_"),
             ("openblas_set_num_threads64_", "openblas_get_num_threads64_"),
             ("scipy_openblas_set_num_threads", "scipy_openblas_get_num_threads"),
             ("openblas_set_num_threads", "openblas_get_num_threads")]
    found = []
    for path in sorted(paths):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for set_name, get_name in names:
            if hasattr(lib, set_name) and hasattr(lib, get_name):
                found.append((getattr(lib, set_name), getattr(lib, get_name)))
                break
    _BLAS_FUNCS = tuple(found)
    return _BLAS_FUNCS


@contextlib.contextmanager
def blas_threads(n: int = 1):
    """Context manager: run OpenBLAS with ``n`` threads inside, restore after."""
    funcs = _find_blas()
    old = []
    for set_fn, get_fn in funcs:
        try:
            old.append(int(get_fn()))
            set_fn(int(n))
        except (OSError, ValueError, TypeError, AttributeError, ctypes.ArgumentError):  # pragma: no cover
            old.append(None)
    try:
        yield
    finally:
        for (set_fn, _), o in zip(funcs, old):
            if o is not None:
                set_fn(o)


# ---------------------------------------------------------------------------
# settings and result
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Penalties:
    """Penalties, bounds and quadrature of the frequentist fits, on the internal (population) scale.

    The penalties are fixed normal log-densities (MAP-style); the Bayesian
    model's hierarchical prior scales are a different object,
    :class:`mtlirt.bayes.spec.Priors`.

    Attributes
    ----------
    theta_sd : float
        Standard deviation of the ``N(0, theta_sd^2)`` population prior on traits.
    log_a_sd, log_a_mean : float
        Normal prior on ``log a``.
    d_sd : float
        Standard deviation of the ``N(0, d_sd^2)`` prior on intercepts.
    theta_max, a_min, a_max, d_max : float
        Box bounds.
    n_nodes, node_max : int, float
        EM quadrature: ``n_nodes`` equally spaced nodes on ``[-node_max, node_max]``
        (the coarsest grid).
    node_sd_ratio, max_nodes : float, int
        Finer grids for long domains: a domain's node spacing is halved until it
        is at most ``node_sd_ratio`` times the narrowest posterior sd its items
        allow, ``1 / sqrt(1 / theta_sd^2 + sum_j a_j^2 / 4)``, with at most
        ``max_nodes`` nodes (``node_sd_ratio = 0``: ``n_nodes`` everywhere).
    mstep_stride : bool
        Let the M-step of a complete domain without guessing use every m-th
        node where that integrates alike (:func:`_mstep_stride`).
    guessing_alpha, guessing_beta : float
        ``Beta(alpha, beta)`` prior of an estimated guessing floor (one per
        domain); the default ``Beta(2, 4)`` has its mode at 0.25 (four options)
        and is weak: one domain's items outweigh it.
    guessing_max : float
        Upper bound of an estimated floor.
    """

    theta_sd: float = 1.0
    log_a_sd: float = 0.5
    log_a_mean: float = 0.0
    d_sd: float = 3.0
    theta_max: float = 6.0
    a_min: float = 0.05
    a_max: float = 8.0
    d_max: float = 15.0
    n_nodes: int = 49
    node_max: float = 6.0
    node_sd_ratio: float = 2.0
    max_nodes: int = 769
    mstep_stride: bool = True
    guessing_alpha: float = 2.0
    guessing_beta: float = 4.0
    guessing_max: float = 0.6


DEFAULT_PENALTIES = Penalties()


def item_domain_of(domain_slices, n_items: int | None = None) -> np.ndarray:
    """The domain code of every item (``J``) from contiguous domain slices."""
    J = n_items if n_items is not None else (domain_slices[-1].stop if domain_slices else 0)
    out = np.full(J, -1, dtype=np.int64)
    for k, sl in enumerate(domain_slices):
        out[sl] = k
    if (out < 0).any():
        raise ValueError("domain_slices must cover every item")
    return out


def to_internal(theta, a, d, loc, scale, item_domain):
    """Map a standardised solution back to the internal scale (inverse of :func:`standardise`)."""
    theta_i = theta * scale + loc
    a_i = a / scale[item_domain]
    d_i = d - a_i * loc[item_domain]
    return theta_i, a_i, d_i


def standardise(theta, a, d, item_domain):
    """Standardise every trait column and transform the items alike.

    Parameters
    ----------
    theta : ndarray (N, K)
    a, d : ndarray (J,)
    item_domain : ndarray (J,)

    Returns
    -------
    theta_std, a_std, d_std, loc, scale
        ``theta = theta_std * scale + loc``; ``a theta + d`` is unchanged.
    """
    loc = theta.mean(axis=0)
    scale = theta.std(axis=0)
    scale = np.where(scale > 1e-12, scale, 1.0)
    theta_std = (theta - loc) / scale
    a_std = a * scale[item_domain]
    d_std = d + a * loc[item_domain]
    return theta_std, a_std, d_std, loc, scale


# ---------------------------------------------------------------------------
# the data, as the estimators use it
# ---------------------------------------------------------------------------
class ResponseData:
    """A response matrix prepared for fitting: the answers, the mask, the domains, and the ``float32``
    copies the EM's matrix products take (built on first use).

    Parameters
    ----------
    correct : ndarray (N, J) of int8
        0/1 answers, 0 where unobserved (kept as given, not copied).
    observed : ndarray (N, J) of bool or None
        Observation mask; ``None`` means complete.
    domain_slices : list of slice
        Contiguous item columns of each domain.
    guessing : float or ndarray (J,) or "estimate" or "auto", optional
        Fixed lower asymptotes; ``"estimate"``: one floor per domain, estimated
        by :func:`calibrate_items` (which then sets ``c``); ``"auto"``: one
        floor per domain where the data call for one (:func:`decide_floors`),
        none elsewhere.
    exclude : tuple (rows, cols), optional
        Observed cells to treat as unobserved (held-out responses).
    share : ResponseData, optional
        Data of the same answers and mask (other domains or floors allowed)
        and the same ``exclude`` (the same object): this one uses its mask,
        ``float32`` copies and column sums instead of making its own (at the
        flagship shape each copy of the answers is 240 MB).

    Attributes
    ----------
    correct : ndarray (N, J) int8
        The answers as given.
    Y : ndarray (N, J) float32
        Answers, 0 where unobserved or excluded (built on first use).
    O : ndarray (N, J) float32 or None
        Observation mask (``None`` when complete; built on first use).
    obs : ndarray (N, J) bool or None
    row_obs : ndarray (N, K) bool or None
        Whether LLM ``i`` has any response in domain ``k`` (``None``: all).
    n1 : ndarray (J,)
        Correct answers per item.
    c : ndarray (J,) or None
        Guessing floors (``None`` when all zero).
    estimate_floor : bool
        Whether the floors are to be estimated (``guessing="estimate"`` or ``"auto"``).
    floor_mode : str or None
        ``"estimate"``, ``"auto"`` or None (floors fixed or none).
    """

    def __init__(self, correct, observed, domain_slices, *, guessing=None, exclude=None, share=None):
        correct = np.asarray(correct)
        if correct.ndim != 2:
            raise ValueError("correct must be an N x J matrix")
        N, J = correct.shape
        self.N, self.J = N, J
        self.slices = [slice(int(s.start), int(s.stop)) for s in domain_slices]
        self.K = len(self.slices)
        self.item_domain = item_domain_of(self.slices, J)
        c = None
        self.estimate_floor = isinstance(guessing, str)
        self.floor_mode = guessing if self.estimate_floor else None
        if self.estimate_floor:
            if guessing not in ("estimate", "auto"):
                raise ValueError(f"guessing must be a number in [0, 1), 'estimate' or 'auto', got {guessing!r}")
        elif guessing is not None:
            c = np.broadcast_to(np.asarray(guessing, dtype=np.float64), (J,)).copy()
            if np.any((c < 0) | (c >= 1)):
                raise ValueError("guessing must be in [0, 1)")
            if not np.any(c > 0):
                c = None
        self.c = c
        if observed is not None:
            observed = np.asarray(observed, dtype=bool)
            if observed.shape != correct.shape:
                raise ValueError("observed must have the shape of correct")
        self.correct = correct if correct.dtype == np.int8 else correct.astype(np.int8)
        self._exclude = exclude
        same = share is not None and share.correct is self.correct and share._exclude is exclude and (
            share._observed is observed or (share._observed is None and observed is None))
        self._observed = observed
        obs = observed
        if same:  # the mask, the float32 copies and the column sums are share's
            obs = share.obs
        elif exclude is not None and len(exclude[0]) > 0:
            if obs is None:
                obs = np.ones((N, J), dtype=bool)
            else:
                obs = obs.copy()
            obs[exclude[0], exclude[1]] = False
        if obs is not None and obs.all():
            obs = None
        self.obs = obs
        self._copies = share._copies if same else {}
        if obs is not None:
            self.row_obs = np.column_stack([obs[:, sl].any(axis=1) for sl in self.slices])
            if self.row_obs.all():
                self.row_obs = None
        else:
            self.row_obs = None
        self._theta_lik = None
        self._patterns = {}
        self._masks = {}

    @property
    def Y(self):
        """``float32`` answers, 0 where unobserved or excluded (built on first use, shared)."""
        Y = self._copies.get("Y")
        if Y is None:
            Y = self.correct.astype(np.float32)
            if self.obs is not None:
                Y[~self.obs] = 0.0
            self._copies["Y"] = Y
        return Y

    @property
    def n1(self):
        """Correct answers per item (float64)."""
        n1 = self._copies.get("n1")
        if n1 is None:
            n1 = np.zeros(self.J, dtype=np.int64)
            step = max(1, 2**22 // max(self.J, 1))
            for i0 in range(0, self.N, step):
                block = self.correct[i0:i0 + step]
                n1 += (block if self.obs is None else block * self.obs[i0:i0 + step]).sum(axis=0, dtype=np.int64)
            n1 = self._copies["n1"] = n1.astype(np.float64)
        return n1

    def patterns(self, k, max_items=8):
        """The distinct response patterns of a short domain ``k`` (``None`` above ``max_items`` items).

        Returns ``(Yu, Ou, count, inverse)``: float64 answers and observation
        indicators of every distinct pattern (``U x J_k``), how many LLMs
        give it, and the pattern of every LLM.  The E-step of a short domain
        then costs ``O(U Q)`` instead of ``O(N Q)`` (a 1-item domain has at
        most 3 patterns, whatever the number of LLMs).
        """
        sl = self.slices[k]
        if sl.stop - sl.start > max_items:
            return None
        if k not in self._patterns:
            Yk = self.correct[:, sl].astype(np.int64)
            if self.obs is not None:
                Yk *= self.obs[:, sl]
            code = Yk + (1 if self.obs is None else self.obs[:, sl].astype(np.int64))
            key = code @ (3 ** np.arange(code.shape[1], dtype=np.int64))
            _, first, inv, cnt = np.unique(key, return_index=True, return_inverse=True, return_counts=True)
            Ou = (code[first] > 0).astype(np.float64)
            Yu = (code[first] == 2).astype(np.float64)
            self._patterns[k] = (Yu, Ou, cnt.astype(np.float64), inv.ravel())
        return self._patterns[k]

    def mask_of(self, k, max_share=0.25):
        """How the EM sees domain ``k``'s missing cells: None when every cell is observed; ``("sparse",
        rows, cells)`` with ``rows`` (N, float) 1 where the LLM has responses in the domain and
        ``cells`` the unobserved cells of those LLMs (a sparse N x J_k matrix of ones), while they are at
        most ``max_share`` of those LLMs' cells; else ``("dense", O_k)``, the float32 mask (cached)."""
        if self.obs is None:
            return None
        if k not in self._masks:
            from scipy import sparse

            sl = self.slices[k]
            ro = self.obs[:, sl].any(axis=1)
            miss = ~self.obs[:, sl] & ro[:, None]
            n_miss = int(np.count_nonzero(miss))
            if n_miss > max_share * max(int(ro.sum()) * (sl.stop - sl.start), 1):
                self._masks[k] = ("dense",)
            else:
                self._masks[k] = ("sparse", ro.astype(np.float64), sparse.csr_matrix(miss, dtype=np.float64))
        m = self._masks[k]
        return m if m[0] == "sparse" else ("dense", self.O[:, self.slices[k]])

    def n_obs_domain(self, k) -> int:
        """The number of responses in domain ``k``."""
        sl = self.slices[k]
        return self.N * (sl.stop - sl.start) if self.obs is None else int(np.count_nonzero(self.obs[:, sl]))

    @property
    def O(self):
        """``float32`` observation mask for the EM's matrix products (``None`` when complete; built on first use)."""
        if self.obs is None:
            return None
        O = self._copies.get("O")
        if O is None:
            O = self._copies["O"] = self.obs.astype(np.float32)
        return O

    def set_floor(self, c) -> None:
        """Set the guessing floors (``J``, or ``None``) and drop the cached trait evaluator, unless
        the floors are the ones it has (``fit_mtl`` sets the STL's floors again: with a floor the
        evaluator's list of correct cells costs seconds at the flagship shape)."""
        c = None if c is None else np.broadcast_to(np.asarray(c, dtype=np.float64), (self.J,)).copy()
        c = c if c is not None and np.any(c > 0) else None
        same = (c is None and self.c is None) or (c is not None and self.c is not None and np.array_equal(c, self.c))
        self.c = c
        if not same:
            self._theta_lik = None

    @property
    def complete(self) -> bool:
        return self.obs is None

    def theta_likelihood(self, *, max_sparse_share=0.25):
        """The evaluator of trait log-likelihoods (tabulated or dense), cached."""
        if self._theta_lik is None:
            self._theta_lik = _make_theta_lik(self, max_sparse_share)
        return self._theta_lik


# ---------------------------------------------------------------------------
# item calibration: penalised marginal ML by EM
# ---------------------------------------------------------------------------
def _nodes(priors: Penalties, level: int = 0):
    """Quadrature of level ``level``: ``(n_nodes - 1) 2^level + 1`` equally spaced nodes
    on ``[-node_max, node_max]`` (each level halves the spacing and keeps the nodes)."""
    x = np.linspace(-priors.node_max, priors.node_max, (priors.n_nodes - 1) * 2**int(level) + 1)
    return x, llm_side.normal_log_weights(x, priors.theta_sd)


def node_levels(a, item_domain, K, priors: Penalties = DEFAULT_PENALTIES) -> np.ndarray:
    """The quadrature level of every domain (see :class:`Penalties`).

    Equally spaced nodes integrate a smooth posterior of sd ``s`` with a
    relative error of about ``2 exp(-2 pi^2 s^2 / h^2)`` (the trapezoidal rule
    on a Gaussian): negligible at spacing ``h = s``, 3e-4 at ``1.5 s``, 0.2 at
    ``3 s``.  A long domain's posterior of one LLM's trait is narrow (sd
    about ``1 / sqrt(sum_j a_j^2 p_j (1 - p_j))``): 49 nodes on ``[-6, 6]``
    (``h = 0.25``) round it, which biases the discriminations (measured with
    ``benchmarks/bench_calibration.py``).  The bound uses ``p (1 - p) <= 1/4``,
    so the chosen spacing is finer than needed where the items spread.
    """
    K = int(K)
    if not priors.node_sd_ratio > 0 or K == 0:
        return np.zeros(K, dtype=np.int64)
    info = np.bincount(item_domain, np.asarray(a, dtype=np.float64) ** 2, minlength=K) / 4.0
    sd = 1.0 / np.sqrt(info + 1.0 / priors.theta_sd**2)
    h0 = 2.0 * priors.node_max / (priors.n_nodes - 1)
    need = np.ceil(np.log2(np.maximum(h0 / (priors.node_sd_ratio * sd), 1.0)) - 1e-9)
    top = int(np.floor(np.log2(max(priors.max_nodes - 1, 1) / (priors.n_nodes - 1)) + 1e-9))
    return np.clip(need, 0, max(top, 0)).astype(np.int64)


def _estep(data: ResponseData, a, d, x, logw, c=None, domains=None):
    """Posterior over the nodes for every (LLM, domain); sufficient statistics for the M-step.

    Parameters
    ----------
    c : ndarray (J,), optional
        Guessing floors (default ``data.c``); a domain whose floors are all 0
        takes the 2PL's sufficient statistics.
    domains : sequence of int, optional
        Only these domains (default all); the item statistics are then over
        their items, in order.

    Returns
    -------
    stats : dict
        ``t`` (J) = sum_i E[theta] y_ij (items without a floor), ``R`` (J x Q,
        or None) expected correct counts (items with one; ``floored`` says
        which); ``Nq`` (J x Q) or ``nq`` (K x Q) expected numbers of responses
        at each node; ``eap`` (N x K); ``ll`` marginal log-likelihood and
        ``ll_domain`` its split by domain.
    """
    if c is None:
        c = data.c
    ks = list(range(data.K)) if domains is None else [int(k) for k in domains]
    sizes = [data.slices[k].stop - data.slices[k].start for k in ks]
    floored = [c is not None and bool(np.any(c[data.slices[k]] > 0)) for k in ks]
    Jg = int(sum(sizes))
    N, Kg, Q = data.N, len(ks), len(x)
    eap = np.empty((N, Kg))
    ll_domain = np.zeros(Kg)
    t = np.zeros(Jg)
    R = np.zeros((Jg, Q)) if any(floored) else None
    Nq_items = None if data.obs is None else np.empty((Jg, Q))
    nq = np.zeros((Kg, Q))
    mom = np.zeros((Kg, 3))
    a32 = a.astype(np.float32)
    kern = _em_kernels()
    e2, lml = np.empty(N), np.empty(N)
    off = 0
    for g, k in enumerate(ks):
        sl = data.slices[k]
        loc = slice(off, off + sizes[g])
        off = loc.stop
        fl = floored[g]
        if not fl:
            ll_domain[g] += float(np.dot(data.n1[sl], d[sl]))
        pat = data.patterns(k)
        if pat is not None:
            ll_domain[g] += _estep_patterns(data, g, sl, loc, pat, a, d, c if fl else None, x, logw, eap, mom, t, R,
                                            Nq_items, nq)
            continue
        Yk = data.Y[:, sl]
        mk = data.mask_of(k)
        Ok = mk[1] if mk is not None and mk[0] == "dense" else None
        P32 = np.empty((N, Q), dtype=np.float32) if fl or mk is not None else _NO_P
        nq_g = nq[g] if mk is None else _NO_CELLS_F
        eap_g = np.empty(N)
        if not fl:  # the answers through s = Y a; sum_j n1_j d_j is added above
            s_k = (Yk @ a32[sl]).astype(np.float64)
            if mk is None:
                kern.posterior_linear(s_k, x, logw - llm_side.partition(None, a[sl], d[sl], x), eap_g, e2, nq_g,
                                      lml, P32)
            else:
                L = np.multiply.outer(s_k, x)
                if Ok is not None:
                    L -= llm_side.partition(Ok, a[sl], d[sl], x, np.float32)
                else:  # the observed LLMs' whole partition, less their unobserved cells' terms
                    sp = llm_side.softplus(llm_side.logits(a[sl], d[sl], x))
                    L -= np.multiply.outer(mk[1], sp.sum(axis=0))
                    L += mk[2] @ sp
                kern.posterior_rows(L, logw, x, eap_g, e2, nq_g, lml, P32)
        else:
            lp, l1p = llm_side.log_curves(llm_side.curves(a[sl], d[sl], c[sl], x))
            if mk is None or Ok is not None:
                L = llm_side.grid_loglik(Yk, Ok, lp, l1p, np.float32)
            else:  # as above: the wrong answers' log(1 - P) over the observed cells
                L = llm_side.grid_loglik(Yk, None, lp, l1p, np.float32)
                L -= np.multiply.outer(1.0 - mk[1], l1p.sum(axis=0))
                L -= mk[2] @ l1p
            kern.posterior_rows(L, logw, x, eap_g, e2, nq_g, lml, P32)
        eap[:, g] = eap_g
        ll_domain[g] += float(np.sum(lml))
        if data.row_obs is None:
            mom[g] = (float(N), eap_g.sum(), e2.sum())
        else:
            ro = data.row_obs[:, k]
            mom[g] = (float(ro.sum()), eap_g[ro].sum(), e2[ro].sum())
        if fl:
            R[loc] = (P32.T @ Yk).T
        else:
            t[loc] = eap_g.astype(np.float32) @ Yk
        if Ok is not None:
            Nq_items[loc] = (P32.T @ Ok).T
        elif mk is not None:  # the observed LLMs' posterior mass, less that of each item's unobserved cells
            Nq_items[loc] = mk[1] @ P32
            Nq_items[loc] -= (mk[2].T @ P32)
    fl_items = np.repeat(np.asarray(floored, dtype=bool), sizes)
    return {"t": t, "R": R, "floored": fl_items, "nq": nq, "Nq": Nq_items, "eap": eap,
            "ll": float(ll_domain.sum()), "ll_domain": ll_domain, "moments": mom}


_NO_P = np.zeros((0, 0), dtype=np.float32)
_NO_MASK = np.zeros((0, 0), dtype=bool)
_NO_CELLS_F = np.zeros(0)


def _em_kernels():
    """The EM's numba kernels (:mod:`mtlirt.estimators._kernels`), imported on first use."""
    from . import _kernels

    return _kernels


def _estep_patterns(data, g, sl, loc, pat, a, d, c, x, logw, eap, mom, t, R, Nq_items, nq):
    """The E-step of one short domain, computed once per distinct response
    pattern (same statistics as the per-LLM loop of :func:`_estep`).  Returns
    its marginal log-likelihood (without the ``sum_j n1_j d_j`` term that
    :func:`_estep` adds for every item)."""
    Yu, Ou, cnt, inv = pat
    if c is None:
        L = Yu @ (a[sl][:, None] * x[None, :]) - llm_side.partition(Ou, a[sl], d[sl], x)
    else:
        L = llm_side.grid_loglik(Yu, Ou, *llm_side.log_curves(llm_side.curves(a[sl], d[sl], c[sl], x)))
    P, lml = llm_side.posterior(L, logw)
    e_u = P @ x
    e2_u = P @ (x * x)
    eap[:, g] = e_u[inv]
    ro = Ou.any(axis=1) if data.row_obs is not None else np.ones(len(cnt), dtype=bool)
    w = cnt * ro
    mom[g] = (w.sum(), w @ e_u, w @ e2_u)
    if c is None:
        t[loc] = (cnt * e_u) @ Yu
    else:
        R[loc] = ((cnt[:, None] * P).T @ Yu).T
    if data.obs is None:
        nq[g] = cnt @ P
    else:
        Nq_items[loc] = ((cnt[:, None] * P).T @ Ou).T
    return float(cnt @ lml)


def _nq_of(stats, n):
    """The M-step's expected numbers of responses: a matrix and each item's row in it."""
    if stats["Nq"] is not None:
        return stats["Nq"], np.arange(n)
    return stats["nq"], stats["nq_rows"]


def _mstep_objective(a, d, stats, x, c, priors):
    """Every item's expected complete-data log-likelihood plus its penalties (:mod:`._kernels`)."""
    NqM, rows = _nq_of(stats, len(a))
    f = np.empty(len(a))
    _em_kernels().mstep_objective(a, d, x, NqM, rows, _NO_CELLS_F if c is None else c,
                                  _NO_P_F if c is None else stats["R"], f)
    if c is None:
        f += a * stats["t"] + d * stats["n1"]
    f -= 0.5 * ((np.log(a) - priors.log_a_mean) / priors.log_a_sd) ** 2
    f -= 0.5 * (d / priors.d_sd) ** 2
    return f


_NO_P_F = np.zeros((0, 0))


def _mstep(a, d, stats, x, c, priors, model, item_domain, n_newton=2, backtrack=5):
    """Penalised Fisher-scoring steps on every item's expected complete-data log-likelihood.

    ``stats`` holds the E-step's statistics of these items (``nq_rows``: each item's row of
    ``nq``); ``item_domain`` their domains numbered from 0 (the 1PL's blocks)."""
    a = a.copy()
    d = d.copy()
    pa = 1.0 / priors.log_a_sd**2
    pd_ = 1.0 / priors.d_sd**2
    lo_u, hi_u = np.log(priors.a_min), np.log(priors.a_max)
    K = int(item_domain.max()) + 1 if len(item_domain) else 0
    first = np.searchsorted(item_domain, np.arange(K))
    kern = _em_kernels()
    NqM, rows = _nq_of(stats, len(a))
    cc = _NO_CELLS_F if c is None else np.ascontiguousarray(c, dtype=np.float64)
    RR = _NO_P_F if c is None else stats["R"]
    der = np.empty((len(a), 5))
    f0 = _mstep_objective(a, d, stats, x, c, priors)
    for _ in range(n_newton):
        kern.mstep_derivs(a, d, x, NqM, rows, cc, RR, der)
        ga, gd, Iaa, Iad, Idd = der.T
        if c is None:  # the answers' part: t and n1
            ga = ga + stats["t"]
            gd = gd + stats["n1"]
        u = np.log(a)
        gu = a * ga - pa * (u - priors.log_a_mean)
        gdd = gd - pd_ * d
        # curvature in log a: Fisher information plus the term of the chain
        # rule, -a ga, where it adds curvature (an item whose likelihood pulls
        # a toward 0 against the prior: without it the step overshoots and the
        # backtracking crawls, measured on oll_v1 at 0.0024 per sweep)
        Iuu = a * a * Iaa + pa + np.maximum(-a * ga, 0.0)
        Iud = a * Iad
        Idd = Idd + pd_
        if model == "2pl":
            det = np.maximum(Iuu * Idd - Iud * Iud, 1e-12 * Iuu * Idd)
            du = (Idd * gu - Iud * gdd) / det
            dd = (Iuu * gdd - Iud * gu) / det
            # projected Newton: an item held at its discrimination bound moves
            # its intercept alone (the joint step assumes log a moves too and
            # overshoots d; measured on oll_v1: items at a_max cycling in d)
            held = ((u >= hi_u - 1e-9) & (du > 0)) | ((u <= lo_u + 1e-9) & (du < 0))
            du = np.where(held, 0.0, du)
            dd = np.where(held, gdd / Idd, dd)
        else:  # 1pl: one log a per domain, d per item (block step ignoring the cross term)
            dd = gdd / Idd
            gk = np.bincount(item_domain, a * ga, minlength=K) - pa * (u[first] - priors.log_a_mean)
            Ik = np.bincount(item_domain, a * a * Iaa - Iud * Iud / Idd, minlength=K) + pa
            du = (gk / np.maximum(Ik, 1e-12))[item_domain]
        np.clip(du, -0.7, 0.7, out=du)
        np.clip(dd, -3.0, 3.0, out=dd)
        step = np.ones_like(a)
        a_new = np.exp(np.clip(u + step * du, lo_u, hi_u))
        d_new = np.clip(d + step * dd, -priors.d_max, priors.d_max)
        f1 = _mstep_objective(a_new, d_new, stats, x, c, priors)
        for _b in range(backtrack + 1):
            diff = f1 - f0
            if model != "2pl":
                diff = np.bincount(item_domain, diff, minlength=K)[item_domain]
            bad = diff < -1e-10 * (1 + np.abs(f0))
            if not bad.any() or _b == backtrack:
                break
            step = np.where(bad, step * 0.5, step)
            # the objective is a sum per item: only the items still backtracking are evaluated
            # again (same values; a few stubborn items made every backtrack cost J x Q)
            sub = np.flatnonzero(bad)  # (1pl: whole domains)
            a_new[sub] = np.exp(np.clip(u[sub] + step[sub] * du[sub], lo_u, hi_u))
            d_new[sub] = np.clip(d[sub] + step[sub] * dd[sub], -priors.d_max, priors.d_max)
            f1[sub] = _mstep_objective(a_new[sub], d_new[sub], _rows(stats, sub), x, None if c is None else c[sub],
                                       priors)
        a = np.where(bad, a, a_new)
        d = np.where(bad, d, d_new)
        f0 = np.where(bad, f0, f1)  # the objective at the new items
    return a, d


def _rows(stats, sub):
    """The M-step's statistics of the items ``sub`` only."""
    out = {k: (None if stats.get(k) is None else stats[k][sub]) for k in ("t", "n1", "R", "Nq", "nq_rows")}
    out["nq"] = stats["nq"]
    return out


def _mstep_stride(nq, x, tol=1e-7):
    """The largest stride ``m`` (a power of 2) at which every m-th node integrates the M-step.

    A fine grid is needed for one LLM's narrow posterior (the E-step), not
    for the M-step of a complete domain without guessing: that integrates
    smooth item curves against ``nq``, the posterior mass summed over the
    LLMs (``t`` is exact), which is smooth wherever many LLMs spread; there
    every m-th node times ``m`` (the trapezoidal rule at spacing ``m h``)
    gives the same integrals.  The stride is accepted when the moments 0-4 of
    every domain's ``nq`` agree within ``tol`` times its mass (a few LLMs
    with sharp posteriors fail it and keep every node)."""
    Q = nq.shape[1]
    mass = np.maximum(nq.sum(axis=1), 1e-300)
    pw = np.vstack([x**p for p in range(5)])  # 5 x Q
    full = nq @ pw.T
    bound = tol * np.maximum(mass[:, None], np.abs(full))
    m = 1
    while (Q - 1) % (2 * m) == 0 and (Q - 1) // (2 * m) >= 48:
        mm = 2 * m
        sub = (nq[:, ::mm] * mm) @ pw[:, ::mm].T
        if np.any(np.abs(sub - full) > bound):
            break
        m = mm
    return m


def _floor_logprior(cd, priors):
    """The floors' ``Beta(guessing_alpha, guessing_beta)`` log-density, per domain (up to a constant)."""
    return (priors.guessing_alpha - 1) * np.log(cd) + (priors.guessing_beta - 1) * np.log1p(-cd)


def _mstep_floor(a, d, cd, stats, x, priors, item_domain, n_newton=3, backtrack=8):
    """Newton steps on every domain's floor ``c_k`` (shared by its items) given the E-step's counts.

    The expected complete-data log-likelihood is concave in ``c_k``
    (``P = c + (1 - c) sigma`` is linear in it), and so is the log of the
    Beta prior for ``alpha, beta >= 1``: a safeguarded 1-D Newton per domain
    (per item terms: :func:`mtlirt.estimators._kernels.floor_terms`)."""
    K = len(cd)
    NqM, rows = _nq_of(stats, len(a))
    R = stats["R"]
    kern = _em_kernels()
    terms = np.empty((len(a), 3))
    al, be = priors.guessing_alpha - 1.0, priors.guessing_beta - 1.0
    lo, hi = 1e-4, priors.guessing_max

    def at(cdv):
        kern.floor_terms(a, d, cdv[item_domain], x, NqM, rows, R, terms)
        return [np.bincount(item_domain, terms[:, m], minlength=K) for m in range(3)]

    cd = np.clip(np.asarray(cd, dtype=np.float64), lo, hi)
    fb, gb, Hb = at(cd)
    f0 = fb + _floor_logprior(cd, priors)
    for _ in range(n_newton):
        g = gb + al / cd - be / (1 - cd)
        H = Hb + al / cd**2 + be / (1 - cd) ** 2
        step = g / np.maximum(H, 1e-12)
        # at most half-way to a bound
        step = np.clip(step, -0.5 * (cd - lo), 0.5 * (hi - cd))
        t = np.ones(K)
        for _b in range(backtrack + 1):
            c1 = cd + t * step
            f1b, g1b, H1b = at(c1)
            f1 = f1b + _floor_logprior(c1, priors)
            bad = f1 < f0 - 1e-10 * (1 + np.abs(f0))
            if not bad.any():
                break
            t = np.where(bad, 0.5 * t, t)
        cd = np.where(bad, cd, c1)
        f0 = np.where(bad, f0, f1)
        gb = np.where(bad, gb, g1b)
        Hb = np.where(bad, Hb, H1b)
    return cd


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
    domains (:func:`node_levels`: 49 nodes for short domains, up to
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
    the coarsest grid changes by ``tol`` or more (:func:`_curve_change`).

    With ``data.estimate_floor`` (``guessing="estimate"``) every domain gets
    one lower asymptote ``c_k`` shared by its items, with the prior
    ``Beta(priors.guessing_alpha, priors.guessing_beta)``: after the M-step of
    the items, a Newton M-step of the floors on the same E-step (an ECM
    step); the floors join the SQUAREM extrapolation (on the logit scale).
    At the end ``data.c`` holds the fitted floors.

    With ``guessing="auto"`` (``data.floor_mode``) the 2PL is calibrated
    first, then :func:`decide_floors` keeps a floor in the domains whose data
    call for one, and those domains' items and floors are calibrated with
    the floors estimated (the other domains' floors 0); ``info["floors"]``
    holds the decision.

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
    if data.floor_mode == "auto":
        return _calibrate_auto(data, a, d, priors=priors, model=model, max_iter=max_iter, tol=tol, px=px,
                               progress=progress, stage=stage)
    cd = _floor_start(data, c, priors) if data.estimate_floor else None
    return _calibrate(data, a, d, cd, priors=priors, model=model, max_iter=max_iter, tol=tol, px=px,
                      progress=progress, stage=stage)


def _calibrate(data: ResponseData, a, d, cd, *, priors: Penalties, model, max_iter, tol, px, progress=None,
               stage="items"):
    """:func:`calibrate_items` from the floors ``cd`` (K; estimated where positive, 0 where the domain
    has none; None: ``data.c`` fixed)."""
    item_domain, K = data.item_domain, data.K
    a, d = _start_items(data, a, d, model, cd)
    # the EM first converges on the coarsest grid (cheap sweeps), then goes on with each domain's
    # grid refined for the fitted discriminations (a few sweeps), until no grid needs refining
    levels = np.zeros(K, dtype=np.int64)
    measure = partial(_curve_change, x=_nodes(priors, 0)[0], item_domain=item_domain,
                      c_fixed=data.c if cd is None else None)
    history = []
    converged = False
    st = None
    n_em = 0
    while True:
        sweep = partial(_em_sweep, data, _node_groups(data, priors, levels), priors=priors, model=model, px=px)
        converged = False
        while n_em < max_iter:
            (a, d, cd, st), n, change = _squarem_step(sweep, a, d, cd, priors, tol, measure)
            n_em += n
            history.append(change)
            if n > 1 and progress is not None:
                progress(stage, min(1.0, n_em / max_iter))
            if change < tol:  # (always so after a single sweep)
                converged = True
                break
            if change < 10 * tol and np.any(node_levels(a, item_domain, K, priors) > levels):
                # near a fixed point on a grid too coarse for the fitted items: refine now (on
                # oll_v1 the 49-node phase never reached 1e-4, its steep items creeping along
                # their ridges, so the grids they need were never used)
                converged = True
                break
        new = np.maximum(node_levels(a, item_domain, K, priors), levels)
        if not converged or np.array_equal(new, levels):
            break
        levels = new
    if cd is not None:
        data.set_floor(cd[item_domain])
    nodes = (priors.n_nodes - 1) * 2**levels + 1
    return a, d, {"n_iter": n_em, "converged": converged, "marginal_loglik": st["ll"] if st else float("nan"),
                  "ll_domain": st["ll_domain"] if st else None,
                  "history": history, "eap": st["eap"] if st else None, "nodes": nodes,
                  "c": None if data.c is None else data.c.copy(), "c_domain": None if cd is None else cd.copy()}


def _calibrate_auto(data: ResponseData, a, d, *, priors, model, max_iter, tol, px, progress, stage):
    """``guessing="auto"``: the 2PL, :func:`decide_floors`, then the floors estimated where kept."""
    data.estimate_floor, data.floor_mode = False, None
    data.set_floor(None)
    try:
        a, d, info = _calibrate(data, a, d, None, priors=priors, model=model, max_iter=max_iter, tol=tol, px=px,
                                progress=progress, stage=stage)
        keep, floors = decide_floors(data, a, d, priors=priors, model=model)
        floors["fitted"] = np.zeros(data.K)
        if keep.any():  # the kept domains' items and floors, from the decision's floors; the rest stay 2PL
            cd = np.where(keep, np.clip(floors["c"], 1e-3, priors.guessing_max - 1e-3), 0.0)
            a, d, info = _calibrate(data, a, d, cd, priors=priors, model=model, max_iter=max_iter, tol=tol, px=px,
                                    progress=progress, stage=stage)
            floors["fitted"] = info["c_domain"].copy()
    finally:
        data.estimate_floor, data.floor_mode = True, "auto"
    info["floors"] = floors
    return a, d, info


#: :func:`decide_floors`: the LLMs its fits use at most (spread evenly over the leaderboard).
DECIDE_LLMS = 1000


def decide_floors(data: ResponseData, a, d, *, priors: Penalties = DEFAULT_PENALTIES, model="2pl",
                  max_llms: int | None = None, tol=1e-3, min_floor=0.01, start=0.05):
    """In which domains the data call for a guessing floor (``guessing="auto"``).

    Two calibrations of the same LLMs (every LLM, or ``max_llms`` spread
    evenly over the leaderboard when there are more: the decision needs no
    more), started from the items ``a, d`` (a 2PL fit): the 2PL, and the 2PL
    with one floor per domain estimated under its ``Beta`` prior.  A domain
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
    """
    max_llms = DECIDE_LLMS if max_llms is None else int(max_llms)
    N, K = data.N, data.K
    rows = np.arange(N) if N <= max_llms else np.unique(np.linspace(0, N - 1, max_llms).round().astype(np.int64))
    sub = ResponseData(data.correct[rows], None if data.obs is None else data.obs[rows], data.slices)
    coarse = replace(priors, node_sd_ratio=0.0)
    kw = dict(priors=coarse, model=model, max_iter=200, tol=tol, px=True)
    _, _, plain = _calibrate(sub, a, d, None, **kw)
    _, _, floored = _calibrate(sub, a, d, np.full(K, min(start, priors.guessing_max - 1e-3)), **kw)
    n_k = np.array([float(sub.n_obs_domain(k)) for k in range(K)])
    gain = floored["ll_domain"] - plain["ll_domain"]
    threshold = 0.5 * np.log(np.maximum(n_k, 2.0))
    c = floored["c_domain"]
    keep = (gain > threshold) & (c >= min_floor)
    return keep, {"c": c.copy(), "gain": gain, "threshold": threshold, "keep": keep.tolist(),
                  "llms": int(len(rows))}


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


def _node_groups(data: ResponseData, priors: Penalties, levels):
    """The domains that share a grid level, one group per level: ``(domains, or None for all,
    their items, or ``slice(None)``, each item's domain within the group, nodes, log weights)``."""
    K = data.K
    out = []
    for lev in np.unique(levels):
        ks = np.flatnonzero(levels == lev)
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
    eap = np.empty((data.N, K))
    mom = np.empty((K, 3))
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


def _curve_change(old, new, *, x, item_domain, c_fixed=None):
    """The convergence measure of :func:`calibrate_items`: the largest change of any item's
    probability of a correct response on the nodes ``x`` between ``old`` and ``new`` (each
    ``(a, d, cd)``, ``cd`` the floors per domain or None for ``c_fixed``, per item or None).

    The item response functions are what the data identify.  An item whose curve lies on its
    domain's floor (oll_v1: five ARC and Winogrande items with ``a`` 0.7-0.8, ``d`` -8.1 to -8.6, a
    success probability within 0.002 of the floor up to theta = 3) has an intercept held by its
    penalty alone: with the floor estimated it went on moving by up to 9e-4 per SQUAREM cycle,
    back and forth, while no probability on the grid changed by more than 3e-5."""
    J = len(old[0])

    def floors(cd):
        c = c_fixed if cd is None else cd[item_domain]
        return np.zeros(J) if c is None else np.ascontiguousarray(c, dtype=np.float64)

    return float(_em_kernels().curve_change(old[0], old[1], floors(old[2]), new[0], new[1], floors(new[2]),
                                            np.ascontiguousarray(x, dtype=np.float64)))


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
    (:func:`_curve_change`)."""
    v0 = _pack(a, d, cd)
    a1, d1, c1, st0 = sweep(a, d, cd)
    obj0 = _penalised(st0, a, d, cd, priors)
    v1 = _pack(a1, d1, c1)
    change = measure((a, d, cd), (a1, d1, c1))
    if change < tol:
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


# ---------------------------------------------------------------------------
# trait log-likelihood evaluators (items fixed)
# ---------------------------------------------------------------------------
_NO_ROWS = np.zeros((0, 0))
_NO_CELLS = np.zeros(0, dtype=np.int64)
_NO_ITEMS = np.zeros(0, dtype=np.int32)  # item columns of cell lists: int32 (30M correct cells at the flagship)
_NO_PTR = np.zeros((0, 0), dtype=np.int64)
_NO_DOMAINS = np.zeros(0, dtype=np.bool_)


def _tab_derivs(*args):
    """:func:`mtlirt.estimators._kernels.tab_derivs` (numba, imported on first use)."""
    return _em_kernels().tab_derivs(*args)


def _csr(rows, cols, n):
    """Row pointer and columns, grouped by row (stable), of the cells ``(rows, cols)``."""
    order = np.argsort(rows, kind="stable")
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n), out=ptr[1:])
    return ptr, np.ascontiguousarray(cols[order], dtype=np.int32)


class TabulatedThetaLik:
    """Trait log-likelihood of every (LLM, domain) block by tabulation; guessing floors allowed.

    With ``P_ij = c_j + (1 - c_j) sigmoid(z_ij)``, ``z_ij = a_j theta_ik + d_j``
    and ``log(1 - P) = log(1 - c_j) - softplus(z)``::

        loglik_ik(theta) = sum_{j wrong} log(1 - c_j) - G_ik(theta) + sum_{j correct} log(c_j + exp(z_ij))

    (the floors may differ within a domain: the pooled fit's one domain has the
    single-domain fits' floors), with ``G_ik(t) = r_ik G_k(t) - sum_{j
    unobserved} softplus(a_j t + d_j)``: ``G_k = sum_j softplus`` over the
    domain's items and its derivatives are tabulated on a grid and interpolated
    by cubic Hermite polynomials; unobserved cells of observed blocks are
    subtracted exactly.  Without a floor the correct cells' sum is ``theta s_ik
    + sum_j y_ij d_j`` (``s_ik = sum_j a_j y_ij``), so a Newton step costs
    ``O(N K)``; with one, each correct cell adds ``a_j / (1 + c_j exp(-z))`` to
    the gradient (one exponential per correct cell, none per wrong one).  The
    Fisher information ``sum_j a_j^2 (1 - c_j) s^2 (1 - s) / P`` (observed
    information without a floor) depends on the answers only through which
    cells are observed: tabulated too.  Use :meth:`set_items` first.
    """

    kind = "tabulated"

    def __init__(self, data: ResponseData, cells=None, *, grid_step=0.05, theta_max=6.0):
        self.data = data
        self.N, self.K, self.J = data.N, data.K, data.J
        self.item_domain = data.item_domain
        self.rw = None if data.row_obs is None else data.row_obs.astype(np.float64)
        if cells is not None and len(cells[0]):
            self.uptr, self.uj = _csr(np.asarray(cells[0], dtype=np.int64), np.asarray(cells[1]), self.N)
            self.n_cells = len(self.uj)
        else:
            self.uptr = np.zeros(self.N + 1, dtype=np.int64)
            self.uj = _NO_ITEMS
            self.n_cells = 0
        # the floors per item; a domain is floored when any of its items has one (its correct
        # cells are then summed cell by cell)
        self.citem = np.zeros(self.J) if data.c is None else np.asarray(data.c, dtype=np.float64)
        self.floored = np.bincount(self.item_domain, self.citem > 0, minlength=self.K) > 0
        if self.floored.any():  # the correct cells of the domains with a floor, by LLM and domain
            self.ykptr, self.yj = _em_kernels().correct_cells(
                data.correct, _NO_MASK if data.obs is None else data.obs, self.floored[self.item_domain],
                self.item_domain, self.K)
        else:
            self.ykptr = _NO_PTR
            self.yj = _NO_ITEMS
        self.grid = np.arange(-theta_max, theta_max + 1e-9, grid_step)
        self.h = float(self.grid[1] - self.grid[0])

    def set_items(self, a, d):
        """Tabulate ``G_k``, its derivatives and the information; compute ``s_ik`` and the constant terms
        (nothing to do when the items are the ones set last)."""
        data = self.data
        a = np.asarray(a, dtype=np.float64)
        d = np.asarray(d, dtype=np.float64)
        if getattr(self, "a", None) is not None and np.array_equal(a, self.a) and np.array_equal(d, self.d):
            return
        M, K = len(self.grid), self.K
        T = np.empty((6, M, K))
        s = np.empty((self.N, K))
        starts = np.array([sl.start for sl in data.slices], dtype=np.int64)
        stops = np.array([sl.stop for sl in data.slices], dtype=np.int64)
        _em_kernels().item_tables(self.grid, a, d, self.citem, starts, stops, self.floored, T)
        # the answers' sums in float64 (float32 ones were off by 4e-6 in s on 40-item domains), one
        # pass over the int8 answers: s = Y a and Y d without a floor; with one, the wrong answers'
        # sum of log(1 - c_j) (s is 0: the correct cells are summed one by one)
        lc = np.log1p(-self.citem)
        fl_items = self.floored[self.item_domain]
        w1 = np.where(fl_items, 0.0, a)
        w2 = np.where(fl_items, lc, d)
        y_w2 = np.empty((self.N, K))
        o_w2 = np.empty((self.N, K)) if self.floored.any() else np.zeros((0, 0))
        _em_kernels().block_sums(data.correct, _NO_MASK if data.obs is None else data.obs, starts, stops, w1, w2,
                                 s, y_w2, o_w2)
        const = y_w2
        if self.floored.any():
            const[:, self.floored] = o_w2[:, self.floored] - y_w2[:, self.floored]
        self.T = [np.ascontiguousarray(T[m]).ravel() for m in range(6)]
        self.s = s
        self.const = const
        self.a = a.copy()
        self.d = d.copy()

    def _interp(self, theta, f, df):
        """The table ``f`` (with derivative ``df``) at ``theta`` (N x K), as :func:`_tab_derivs_py` finds it."""
        pos = (theta - self.grid[0]) / self.h
        g = np.clip(np.floor(pos).astype(np.int64), 0, len(self.grid) - 2)
        i0 = g * self.K + np.arange(self.K)
        i1 = i0 + self.K
        return hermite.combine(hermite.weights(np.clip(pos - g, 0.0, 1.0), self.h), f[i0], f[i1], df[i0], df[i1])

    def theta_derivs(self, theta, rows=None, observed=False, domains=None):
        """Gradient and Fisher information of the log-likelihood in every ``theta_ik``
        (``observed``: the observed information instead, the same without a floor; it
        may be negative with one); with ``rows``, ``theta`` holds those LLMs' traits only;
        with ``domains`` (K bools), only those domains' (the others' are 0)."""
        theta = np.ascontiguousarray(theta, dtype=np.float64)
        rows = _NO_CELLS if rows is None else np.ascontiguousarray(rows, dtype=np.int64)
        kact = _NO_DOMAINS if domains is None else np.ascontiguousarray(domains, dtype=np.bool_)
        T = self.T
        g, fisher, obs = _tab_derivs(theta, rows, self.s, self.grid[0], self.h, T[1], T[2], T[3], T[4], T[5],
                                     self.rw if self.rw is not None else _NO_ROWS, self.a, self.d, self.citem,
                                     self.item_domain, self.uptr, self.uj, self.ykptr, self.yj, kact)
        return g, (obs if observed else fisher)

    def newton(self, theta, *, prec, bound, centre, weight, tol, max_newton, domains):
        """:func:`theta_step` on the tables, one fused loop per LLM
        (:func:`mtlirt.estimators._kernels.theta_newton`); returns the traits and the information."""
        theta = np.ascontiguousarray(theta, dtype=np.float64)
        kact = _NO_DOMAINS if domains is None else np.ascontiguousarray(domains, dtype=np.bool_)
        if weight is None or centre is None:
            centre = weight = _NO_ROWS
        else:
            centre = np.ascontiguousarray(np.broadcast_to(centre, theta.shape), dtype=np.float64)
            weight = np.ascontiguousarray(np.broadcast_to(np.asarray(weight, dtype=np.float64), theta.shape))
        T = self.T
        return _em_kernels().theta_newton(theta, self.s, self.grid[0], self.h, T[1], T[2], T[3], T[4], T[5],
                                          self.rw if self.rw is not None else _NO_ROWS, self.a, self.d, self.citem,
                                          self.item_domain, self.uptr, self.uj, self.ykptr, self.yj, kact,
                                          float(prec), float(bound), centre, weight, float(tol), int(max_newton))

    def theta_loglik(self, theta):
        """Log-likelihood of every (LLM, domain) block at ``theta`` (N x K)."""
        theta = np.ascontiguousarray(theta, dtype=np.float64)
        G0 = self._interp(theta, self.T[0], self.T[1])
        if self.rw is not None:
            G0 *= self.rw
        kern = _em_kernels()
        if self.n_cells:
            G0 -= kern.cell_sums(theta, self.uptr, self.uj, self.a, self.d, self.citem, self.item_domain, False)
        out = theta * self.s + self.const - G0
        if len(self.yj):
            out += self._correct_sums(theta)
        return out

    def _correct_sums(self, theta):
        """``sum log(c_j + exp(z_ij))`` over the correct cells of the floored blocks (N x K)."""
        ptr = np.append(self.ykptr[:, 0], self.ykptr[-1, -1]) if self.N else np.zeros(1, dtype=np.int64)
        return _em_kernels().cell_sums(theta, ptr, self.yj, self.a, self.d, self.citem, self.item_domain, True)


class DenseThetaLik:
    """Trait log-likelihood on dense per-domain blocks (mask, guessing). ``O(N J)`` per call.

    Computed in float64 (the Newton steps are iterated to 1e-8)."""

    kind = "dense"

    def __init__(self, data: ResponseData):
        self.data = data
        self.N, self.K, self.J = data.N, data.K, data.J
        self.item_domain = data.item_domain

    def set_items(self, a, d):
        self._a = np.asarray(a, dtype=np.float64)
        self._d = np.asarray(d, dtype=np.float64)

    def _block(self, k, theta_col, want_ll=False, rows=None, observed=False):
        """Residual ``r = dl/dz``, weight ``w`` (Fisher information in ``z``, or the observed
        one) and, optionally, the log-likelihood of every cell of domain ``k`` (float64)
        (of the LLMs ``rows`` only, if given)."""
        data = self.data
        sl = data.slices[k]
        Z = np.multiply.outer(theta_col, self._a[sl])
        Z += self._d[sl]
        sig = expit(Z)
        y = data.Y[:, sl] if rows is None else data.Y[rows, sl]
        ll = None
        if data.c is None:
            r = y - sig
            w = sig * (1 - sig)
            if want_ll:
                ll = y * Z - softplus(Z)
        else:
            c = data.c[sl]
            P = np.clip(c + (1 - c) * sig, 1e-12, 1 - 1e-12)
            dP = (1 - c) * sig * (1 - sig)
            q = dP / (P * (1 - P))
            r = (y - P) * q
            if observed:  # -d2 log P / dz2 = s (1 - s) - u / (1 + u)^2 with u = c exp(-z) where correct
                u = c * np.exp(-np.clip(Z, -700.0, 700.0))
                w = sig * (1 - sig) - y * u / ((1 + u) * (1 + u))
            else:
                w = dP * q
            if want_ll:
                ll = y * np.log(P) + (1 - y) * np.log1p(-P)
        if data.obs is not None:
            m = data.obs[:, sl] if rows is None else data.obs[rows, sl]
            r *= m
            w *= m
            if want_ll:
                ll *= m
        return r, w, ll

    def theta_derivs(self, theta, rows=None, observed=False, domains=None):
        n = theta.shape[0]
        g = np.zeros((n, self.K))
        info = np.zeros((n, self.K))
        for k, sl in enumerate(self.data.slices):
            if domains is not None and not domains[k]:
                continue
            r, w, _ = self._block(k, theta[:, k], rows=rows, observed=observed)
            ak = self._a[sl]
            g[:, k] = r @ ak
            info[:, k] = w @ (ak * ak)
        return g, info

    def theta_loglik(self, theta):
        out = np.empty((self.N, self.K))
        for k in range(self.K):
            out[:, k] = self._block(k, theta[:, k], want_ll=True)[2].sum(axis=1)
        return out


def _make_theta_lik(data: ResponseData, max_sparse_share=0.25):
    if data.obs is None:
        return TabulatedThetaLik(data)
    if data._observed is None:  # complete but for held-out cells: those are the unobserved ones
        rows, cols = (np.asarray(v, dtype=np.int64) for v in data._exclude)
        keep = np.ones(len(rows), dtype=bool) if data.row_obs is None else data.row_obs[rows, data.item_domain[cols]]
        order = np.argsort(rows[keep] * data.J + cols[keep], kind="stable")
        return TabulatedThetaLik(data, (rows[keep][order], cols[keep][order].astype(np.int32)))
    ci_list, cj_list = [], []
    n_cells = 0
    for k, sl in enumerate(data.slices):
        miss = ~data.obs[:, sl]
        if data.row_obs is not None:
            miss &= data.row_obs[:, k][:, None]
        i, j = np.nonzero(miss)
        n_cells += len(i)
        if n_cells > max_sparse_share * data.N * data.J:
            return DenseThetaLik(data)
        ci_list.append(i.astype(np.int32))
        cj_list.append((j + sl.start).astype(np.int32))
    return TabulatedThetaLik(data, (np.concatenate(ci_list), np.concatenate(cj_list)))


# ---------------------------------------------------------------------------
# trait MAP
# ---------------------------------------------------------------------------
def theta_step(lik, theta, *, priors: Penalties = DEFAULT_PENALTIES, centre=None, weight=None,
               tol=1e-7, max_newton=50, return_info=False, domains=None):
    """Maximise every ``theta_ik`` given the items (1-D Newton, vectorised).

    Objective per LLM and domain: ``loglik_ik(theta) - theta^2 / (2 theta_sd^2)
    - weight / 2 * (theta - centre_ik)^2`` (concave without guessing).

    Parameters
    ----------
    lik
        Trait evaluator with items set (``set_items``).
    theta : ndarray (N, K)
        Starting values.
    centre : ndarray (N, K), optional
        Centre of the optional quadratic penalty.
    weight : ndarray broadcastable to (N, K), optional
        Its weight (per domain ``(K,)`` or per cell).
    domains : ndarray (K,) of bool, optional
        Only these domains' traits are moved (the others are kept, their
        information returned as 0): the evaluator then skips the others' cells.

    Returns
    -------
    theta : ndarray (N, K)
    info : ndarray (N, K)
        Only with ``return_info``: the log-likelihood information at the
        last-but-one iterate (for the MTL root finding).
    """
    prec = 1.0 / priors.theta_sd**2
    B = priors.theta_max
    if getattr(lik, "kind", None) == "tabulated":  # the same steps, one fused loop per LLM
        th, info = lik.newton(theta, prec=prec, bound=B, centre=centre, weight=weight, tol=tol,
                              max_newton=max_newton, domains=domains)
    else:
        th, info = _theta_step_arrays(lik, theta, prec, B, centre, weight, tol, max_newton, domains)
    return (th, info) if return_info else th


def _theta_step_arrays(lik, theta, prec, B, centre, weight, tol, max_newton, domains):
    """:func:`theta_step` by whole-array steps over the LLMs still moving (any evaluator)."""
    th = np.array(theta, dtype=np.float64, copy=True)
    # safeguarded Newton: the maximiser is bracketed by the iterates (concave
    # objective: above where the gradient is positive, below where negative),
    # and a step moves at most half-way to the far end of the bracket.  Plain
    # Newton (steps capped at +-1) cycled between two points on one oll_v1
    # cell (a steep item: curvature 3 at the iterate, far more at the root),
    # so every call there ran to max_newton.
    # Only the LLMs whose step is still above ``tol`` in some domain are iterated
    # (their traits are independent given the items); a finished LLM keeps its
    # last iterate and the information there.
    lo = np.full_like(th, -B)
    hi = np.full_like(th, B)
    penal = centre is not None and weight is not None
    if penal:
        centre = np.broadcast_to(centre, th.shape)
        weight = np.broadcast_to(np.asarray(weight, dtype=np.float64), th.shape)
    info = np.zeros_like(th)
    act = np.arange(th.shape[0])
    for _ in range(max_newton):
        full = len(act) == th.shape[0]
        x = th if full else th[act]
        # Newton on the observed information (quadratic convergence; with a floor Fisher
        # scoring converged linearly: 27 evaluations instead of 8 from 0 on the realistic
        # scenario, 1,000 x 1,405), kept >= 0: where the log-likelihood is convex the
        # bracket bounds the step
        g, inf = lik.theta_derivs(x, rows=None if full else act, observed=True, domains=domains)
        np.maximum(inf, 0.0, out=inf)
        info[act] = inf
        g -= prec * x
        tot = inf + prec
        if penal:
            g -= weight[act] * (x - centre[act])
            tot += weight[act]
        lo_a, hi_a = lo[act], hi[act]
        np.copyto(lo_a, x, where=g > 0)
        np.copyto(hi_a, x, where=g < 0)
        lo[act], hi[act] = lo_a, hi_a
        cap = np.minimum(0.5 * (hi_a - lo_a), 1.0)
        new = x + np.clip(g / tot, -cap, cap)
        np.clip(new, -B, B, out=new)
        if domains is not None:
            new[:, ~domains] = x[:, ~domains]
        step = np.max(np.abs(new - x), axis=1)
        th[act] = new
        act = act[step >= tol]
        if not len(act):
            break
    return th, info


def score_theta(data: ResponseData, a, d, theta0=None, *, priors: Penalties = DEFAULT_PENALTIES):
    """MAP traits of every LLM in every domain given internal-scale items.

    Returns
    -------
    theta : ndarray (N, K)
        Internal scale.
    info : ndarray (N, K)
        Fisher information of the log-likelihood at ``theta`` (no prior).
    """
    lik = data.theta_likelihood()
    lik.set_items(a, d)
    th0 = np.zeros((data.N, data.K)) if theta0 is None else theta0
    th = theta_step(lik, th0, priors=priors)
    info = lik.theta_derivs(th)[1]
    return th, info


def fit_stl(correct, observed, domain_slices, *, model="2pl", guessing=None, max_iter=500,
            tol=1e-4, priors: Penalties | None = None, init=None, exclude=None, data=None,
            progress: Progress = None, verbose=False) -> PointFit:
    """Fit a 2PL (or 1PL) in every domain separately (STL).

    Items by penalised marginal ML (EM), traits by MAP given the items; see
    the module docstring for the penalties.

    Parameters
    ----------
    correct : ndarray (N, J) of int8
        0/1 answers, 0 where unobserved.
    observed : ndarray (N, J) of bool or None
        Observation mask; ``None`` means complete (fast path).
    domain_slices : list of slice
        The contiguous item columns of each of the ``K`` domains.
    model : {"2pl", "1pl"}
        1PL: one common discrimination per domain.
    guessing : float or ndarray (J,) or "estimate", optional
        Fixed lower asymptotes ``c_j`` (e.g. 0.25 for four options), or
        ``"estimate"``: one floor per domain, estimated with the items
        (:func:`calibrate_items`).
    max_iter, tol : int, float
        EM sweeps at most; stop when the largest change of ``log a`` or ``d``
        is below ``tol``.
    priors : Penalties, optional
        Penalties, bounds and quadrature.
    init : PointFit or tuple (theta, a, d), optional
        Warm start (a single-domain fit or internal-scale arrays).
    exclude : tuple (rows, cols), optional
        Observed cells to leave out (held-out responses).
    data : ResponseData, optional
        Prebuilt data for these arguments (saves the set-up).
    progress : callable (stage, fraction), optional
    verbose : bool
        Print a summary line.

    Returns
    -------
    PointFit
        ``theta`` (``N x K``, each column standardised: mean 0, variance 1 over the LLMs), the items
        ``a, d, c`` on that scale, ``theta_loc``/``theta_scale`` (the population-scale MAP traits are
        ``theta * theta_scale + theta_loc``), ``theta_se`` (inverse penalised information, on the
        standardised scale), ``loglik`` (plug-in), ``n_iter`` and ``converged`` of the EM, ``floors``
        (with ``guessing="auto"``: the decision of :func:`decide_floors` and ``fitted``, every domain's
        floor); in ``extra``: ``loglik_domain`` (``K``), ``marginal_loglik`` of the item calibration and
        ``history`` (the largest item-parameter change per EM sweep).
    """
    with blas_threads(1):
        return _fit_stl(correct, observed, domain_slices, model=model, guessing=guessing,
                        max_iter=max_iter, tol=tol, priors=priors, init=init, exclude=exclude,
                        data=data, progress=progress, verbose=verbose)


def _fit_stl(correct, observed, domain_slices, *, model, guessing, max_iter, tol, priors, init,
             exclude, data, progress, verbose):
    t0 = time.perf_counter()
    priors = priors or Penalties()
    model = model.lower()
    if model not in ("2pl", "1pl"):
        raise ValueError("model must be '2pl' or '1pl'")
    if data is None:
        data = ResponseData(correct, observed, domain_slices, guessing=guessing, exclude=exclude)
    theta0 = a0 = d0 = c0 = None
    if isinstance(init, PointFit):
        theta0, a0, d0 = init.internal()
        c0 = init.c if data.estimate_floor and np.any(init.c > 0) else None
    elif init is not None:
        theta0, a0, d0 = (np.array(v, dtype=np.float64, copy=True) for v in init)
    a, d, info = calibrate_items(data, a0, d0, priors=priors, model=model, max_iter=max_iter,
                                 tol=tol, c=c0, progress=progress)
    if progress is not None:
        progress("theta", 0.0)
    theta, tinfo = score_theta(data, a, d, theta0 if theta0 is not None else info["eap"], priors=priors)
    fit = _finish(data, theta, a, d, tinfo, priors=priors, model=model, info=info, t0=t0)
    if progress is not None:
        progress("theta", 1.0)
    if verbose:
        print(f"stl: {fit.n_iter} EM sweeps, converged={fit.converged}, {fit.seconds['total']:.2f} s")
    return fit


def _finish(data, theta, a, d, tinfo, *, priors, model, info, t0, extra_precision=None):
    lik = data.theta_likelihood()
    lik.set_items(a, d)
    ll_blocks = lik.theta_loglik(theta)
    th_s, a_s, d_s, loc, scale = standardise(theta, a, d, data.item_domain)
    prec = tinfo + 1.0 / priors.theta_sd**2
    if extra_precision is not None:
        prec = prec + extra_precision
    se = 1.0 / np.sqrt(prec) / scale
    c = np.zeros(data.J) if data.c is None else data.c.copy()
    return PointFit(
        theta=th_s, a=a_s, d=d_s, c=c, loglik=float(ll_blocks.sum()),
        n_iter=int(info.get("n_iter", 0)), converged=bool(info.get("converged", True)),
        seconds={"total": time.perf_counter() - t0}, model=model, theta_loc=loc, theta_scale=scale,
        theta_se=se, item_domain=data.item_domain, floors=info.get("floors"),
        extra={"loglik_domain": ll_blocks.sum(axis=0),
               "marginal_loglik": float(info.get("marginal_loglik", np.nan)),
               "history": list(info.get("history", []))},
    )
