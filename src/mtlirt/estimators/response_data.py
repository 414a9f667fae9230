"""The response matrix as the estimators use it (:class:`ResponseData`), the domain of every item and the
map between the internal (population) scale and the standardised one (:func:`standardise`,
:func:`to_internal`)."""

from __future__ import annotations

import numpy as np

__all__ = ["ResponseData", "item_domain_of", "standardise", "to_internal"]


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


def same_floors(c1, c2) -> bool:
    """Whether two sets of guessing floors (per item, or None for none) are the same."""
    return (c1 is None and c2 is None) or (c1 is not None and c2 is not None and np.array_equal(c1, c2))


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
        by :func:`~mtlirt.estimators.calibration.calibrate_items` (which then sets ``c``); ``"auto"``: one
        floor per domain where the data call for one (:func:`~mtlirt.estimators.calibration.decide_floors`),
        none elsewhere.
    exclude : tuple (rows, cols), optional
        Observed cells to treat as unobserved (held-out responses).
    share : ResponseData, optional
        Data of the same answers and mask (other domains or floors allowed)
        and the same ``exclude`` (the same object): this one uses its mask,
        ``float32`` copies and column sums instead of making its own (at the
        flagship shape each copy of the answers is 240 MB).
    blocks : list of slice, optional
        Contiguous item columns that an LLM tends to answer all or none of
        (the leaderboard's domains, where one domain here spans several: the
        pooled fit): the E-step takes a block an LLM did not answer as one
        term, not cell by cell (:meth:`mask_of`).

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

    def __init__(self, correct, observed, domain_slices, *, guessing=None, exclude=None, share=None, blocks=None):
        correct = np.asarray(correct)
        if correct.ndim != 2:
            raise ValueError("correct must be an N x J matrix")
        N, J = correct.shape
        self.N, self.J = N, J
        self.slices = [slice(int(s.start), int(s.stop)) for s in domain_slices]
        self.K = len(self.slices)
        self.item_domain = item_domain_of(self.slices, J)
        self._blocks = None if blocks is None else item_domain_of(blocks, J)
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

    @classmethod
    def from_responses(cls, responses, *, guessing=None, exclude=None, share=None) -> ResponseData:
        """The data of a :class:`~mtlirt.data.responses.Responses`: its answers, its mask (``None`` when
        complete, the fast path) and its domains; the options as in the constructor."""
        return cls(responses.correct, responses.mask, responses.domain_slices, guessing=guessing, exclude=exclude,
                   share=share)

    @property
    def Y(self):
        """``float32`` answers, 0 where unobserved or excluded (built on first use, shared)."""
        Y = self._copies.get("Y")
        if Y is None:  # one pass over the answers and the mask
            Y = self.correct.astype(np.float32) if self.obs is None else np.multiply(self.correct, self.obs,
                                                                                      dtype=np.float32)
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
        rows, by_llm, by_item, block, starts)`` with ``rows`` (N, B float) 1 where the LLM has responses
        in the domain's block (one block, the domain, unless ``blocks`` split it; ``block`` (J_k,) each
        item's, ``starts`` (B,) each block's first item) and the other unobserved cells of those LLMs
        listed by LLM (``(ptr, item columns)``) and by item (``(ptr, LLM rows)``), while they are at most
        ``max_share`` of those LLMs' cells; else ``("dense", O_k)``, the float32 mask (cached)."""
        if self.obs is None:
            return None
        if k not in self._masks:
            from ._holes import domain_cells  # numba: loaded on first use

            sl = self.slices[k]
            blk = np.zeros(sl.stop - sl.start, dtype=np.int64) if self._blocks is None else self._blocks[sl]
            first = np.r_[True, blk[1:] != blk[:-1]]  # the domain's blocks, numbered 0, 1, ... in order
            block, starts = np.cumsum(first) - 1, np.flatnonzero(first)
            ro = np.logical_or.reduceat(self.obs[:, sl], starts, axis=1)
            lists = domain_cells(self.obs, sl, ro, max_share, block)
            if lists is None:
                self._masks[k] = ("dense",)
            else:
                ptr, cols, cptr, crows = lists
                self._masks[k] = ("sparse", ro.astype(np.float64), (ptr, cols), (cptr, crows), block, starts)
        m = self._masks[k]
        return m if m[0] == "sparse" else ("dense", self.O[:, self.slices[k]])

    def seen_answers(self, k, rows) -> np.ndarray:
        """Domain ``k``'s ``float32`` answers (:attr:`Y`) of the LLMs ``rows`` (those that answered in
        it, :func:`~mtlirt.estimators.em_steps.seen_rows`), contiguous: the floored E-step's products
        run over them every sweep, and gathering the rows cost as much as the two products. Kept until
        :meth:`drop_seen_answers`."""
        sl = self.slices[k]
        key = ("seen", sl.start, sl.stop)  # by columns: datasets of other domains may share the copies
        Yk = self._copies.get(key)
        if Yk is None:
            Yk = self._copies[key] = self.Y[rows, sl]
        return Yk

    def drop_seen_answers(self) -> None:
        """Free :meth:`seen_answers`' copies (a calibration keeps them for its sweeps only)."""
        for key in [key for key in self._copies if isinstance(key, tuple) and key[0] == "seen"]:
            del self._copies[key]

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
        same = same_floors(c, self.c)
        self.c = c
        if not same:
            self._theta_lik = None

    @property
    def complete(self) -> bool:
        return self.obs is None
