"""Adaptive testing of a new LLM across all domains of a fit.

:class:`AdaptiveTest` is a computerised adaptive test (CAT) on the grid
posterior of :mod:`mtlirt.evaluate.scoring`: it proposes the next item
(:meth:`~AdaptiveTest.next_item`), takes the answer
(:meth:`~AdaptiveTest.answer`) and scores the LLM at any point
(:meth:`~AdaptiveTest.scores`).  :func:`replay` runs it for LLMs whose
answers are already known (the oracle answers the chosen items).

The next item
-------------
Among all items not yet asked, in every domain, the one that minimises the
*expected posterior variance* of the target after its answer::

    E[Var'] = P(y = 1) Var(target | answers, y_j = 1) + P(y = 0) Var(target | answers, y_j = 0),

exactly on the grid, for every candidate at once.  An answer in domain ``k``
changes that domain's conditional ``p(theta_k | g, y)`` and, through
``Z_k(g)``, the posterior of the overall score ``g``; the other domains'
conditionals given ``g`` do not move.  Targets:

- ``overall``: the overall score ``g``;
- ``domains``: the sum over all domains of the domain scores' posterior
  variances (every domain, answered or not);
- ``accuracy``: the expected accuracy on the whole benchmark,
  ``sum_k sum_{j in k} P_j(theta_k) / J``.

The test stops at ``budget`` items, when the target's interval is narrower
than ``width`` (normal approximation: ``2 z sd``), or when no item is left.
Ties (equal expected variance to 1e-12) are broken by the seeded generator.
For a Bayesian fit the items are chosen with the posterior means of the
items and loadings; the scores average over the structure's draws.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import norm

from ..data.outputs import FolderKind, folder_output
from ..errors import InputError
from ..estimators.blas import blas_threads
from ..numerics.factor_model import G_GRID, LOG_PRIOR_G, T_GRID
from ..results.estimate import Estimate
from .scoring import Scorer, Scores

__all__ = ["AdaptiveTest", "Replay", "replay", "TARGETS"]

TARGETS = ("overall", "domains", "accuracy")
#: The folder of :meth:`Replay.write` (``mtlirt adapt --out``), recognised by its ``adapt.json``.
ADAPT_FOLDER = FolderKind("adaptive-test folder", "adapt.json",
                          ("overall.csv", "domain_scores.csv", "administered.csv", "adapt.json"))
#: Grid points of g with posterior mass below this share of the largest are skipped.
G_CUTOFF = 1e-12


class AdaptiveTest:
    """An adaptive test of one new LLM.

    Parameters
    ----------
    fit
        An :class:`~mtlirt.results.estimate.Estimate` or a prepared :class:`~mtlirt.evaluate.scoring.Scorer`
        (reuse one across many tests: the tables are built once).
    target
        ``"overall"``, ``"domains"`` or ``"accuracy"`` (see the module).
    budget
        Largest number of items (None: no limit).
    width
        Stop once the target's interval is narrower than this (None: never); the overall
        score's on the scale its scores are reported on (the fit's).
    items
        The pool (item names; default every item of the fit), e.g. the items an LLM's
        results hold.
    seed
        Seed of the tie-breaks and of the scores' expected-accuracy draws.

    Examples
    --------
    >>> test = AdaptiveTest(mtlirt.read_fit("fit/"), budget=100)  # doctest: +SKIP
    >>> while (item := test.next_item()) is not None:              # doctest: +SKIP
    ...     test.answer(item, run_my_llm_on(item))
    >>> test.scores("my-llm").overall                              # doctest: +SKIP
    """

    def __init__(self, fit: Estimate | Scorer, *, target: str = "overall", budget: int | None = None,
                 width: float | None = None, items=None, seed: int | None = 0, interval: float = 0.9):
        if target not in TARGETS:
            raise InputError(f"unknown target {target!r}; choose one of {', '.join(TARGETS)}")
        if budget is not None and budget < 0:
            raise InputError(f"budget must be >= 0, got {budget!r}")
        if width is not None and not width > 0:
            raise InputError(f"width must be > 0, got {width!r}")
        self.scorer = fit if isinstance(fit, Scorer) else Scorer(fit, interval=interval)
        self.target = target
        self.budget = budget
        self.width = width
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        sc = self.scorer
        st = sc.selection
        self._st = st
        K = sc.n_domains
        self.available = np.zeros(sc.n_items, dtype=bool)
        if items is None:
            self.available[:] = True
        else:
            pos = sc._item_pos.get_indexer(pd.Index(np.asarray(items, dtype=str)))
            if (pos < 0).any():
                bad = np.asarray(items, dtype=str)[pos < 0]
                raise InputError(f"{len(bad)} item(s) of the pool not in the fit: "
                                 f"{', '.join(repr(x) for x in bad[:5])}")
            self.available[pos] = True
        order = np.argsort(sc.item_domain, kind="stable")  # items in domain order: each domain a slice
        self._order = order
        self._dom_sorted = sc.item_domain[order]
        starts = np.searchsorted(self._dom_sorted, np.arange(K + 1))
        self._bounds = [(int(starts[k]), int(starts[k + 1])) for k in range(K)]
        self.pos: list[int] = []
        self.y: list[int] = []
        self._logL = np.zeros((K, len(T_GRID)))
        self._logZ = np.zeros((K, len(G_GRID)))
        self._cond = st.W.copy()
        self._f = {"overall": None, "domains": np.broadcast_to(T_GRID, (K, len(T_GRID))), "accuracy": st.acc}[target]
        self._mom = None if self._f is None else np.stack([self._moments(k) for k in range(K)])  # (K, 2, G)
        f_j = None if self._f is None else self._f[self._dom_sorted]  # (J, Q)
        P = st.p[order]
        self._PT = [np.ascontiguousarray(P.T)]
        if f_j is not None:
            self._PT += [np.ascontiguousarray((P * f_j).T), np.ascontiguousarray((P * f_j * f_j).T)]
        self._avail_k = np.bincount(sc.item_domain[self.available], minlength=K) > 0
        self._update_pg()

    # -------------------------------------------------------------- state
    def _moments(self, k: int) -> np.ndarray:
        f = self._f[k]
        c = self._cond[k]
        return np.stack([c @ f, c @ (f * f)])

    def _update_pg(self) -> None:
        lp = LOG_PRIOR_G + self._logZ.sum(axis=0)
        pg = np.exp(lp - lp.max())
        self.pg = pg / pg.sum()

    @property
    def n_asked(self) -> int:
        """Items answered so far."""
        return len(self.pos)

    def target_sd(self) -> float:
        """The target's current posterior sd (on the population scale)."""
        pg = self.pg
        if self.target == "overall":
            m = pg @ G_GRID
            return float(np.sqrt(max(pg @ G_GRID**2 - m * m, 0.0)))
        mu, m2 = self._mom[:, 0], self._mom[:, 1]
        if self.target == "accuracy":
            sm = mu.sum(axis=0)
            sv = (m2 - mu * mu).sum(axis=0)
            return float(np.sqrt(max(pg @ sv + pg @ sm**2 - (pg @ sm) ** 2, 0.0)))
        emu = mu @ pg
        return float(np.sqrt(max((m2 @ pg - emu**2).sum(), 0.0)))

    @property
    def done(self) -> bool:
        """True once the budget is spent, the interval is narrow enough or no item is left."""
        if self.budget is not None and self.n_asked >= self.budget:
            return True
        if not self.available.any():
            return True
        if self.width is not None:
            z = norm.ppf(0.5 + self.scorer.interval / 2)
            sd = self.target_sd()
            if self.target == "overall":  # as the scores report it: on the fit's overall scale
                sd /= self.scorer.overall_scale
            return 2 * z * sd < self.width
        return False

    # -------------------------------------------------------------- choice
    def expected_variance(self) -> np.ndarray:
        """Expected posterior variance of the target after each item's answer (NaN: not available)."""
        sc = self.scorer
        out = np.full(sc.n_items, np.nan)
        if not self.available.any():
            return out
        ga = np.flatnonzero(self.pg > G_CUTOFF * self.pg.max())
        g0, g1 = int(ga[0]), int(ga[-1]) + 1
        pg = self.pg[g0:g1]
        g = G_GRID[g0:g1]
        J = sc.n_items
        n_out = 1 if self._f is None else 3
        prod = np.empty((n_out, g1 - g0, J))  # E[P_j f^m | g] for m = 0 (, 1, 2), items in domain order
        for k, (a, b) in enumerate(self._bounds):
            if a == b or not self._avail_k[k]:
                prod[:, :, a:b] = 0.5
                continue
            c = self._cond[k, g0:g1]
            keep = np.flatnonzero(c.max(axis=0) > 1e-14 * c.max())
            q0, q1 = int(keep[0]), int(keep[-1]) + 1
            c = c[:, q0:q1]
            for m in range(n_out):
                prod[m, :, a:b] = c @ self._PT[m][q0:q1, a:b]
        A1 = prod[0]
        p1 = pg @ A1
        p0 = 1.0 - p1
        w1 = pg[:, None] * A1 / p1
        w0 = pg[:, None] * (1.0 - A1) / p0
        if self.target == "overall":
            v1 = w1.T @ g**2 - (w1.T @ g) ** 2
            v0 = w0.T @ g**2 - (w0.T @ g) ** 2
        else:
            kj = self._dom_sorted
            mu, m2 = self._mom[:, 0, g0:g1], self._mom[:, 1, g0:g1]  # (K, Gs)
            mu_j, m2_j = mu[kj].T, m2[kj].T  # (Gs, J)
            B1, C1 = prod[1], prod[2]
            A0 = 1.0 - A1
            mu1, m21 = B1 / A1, C1 / A1
            mu0, m20 = (mu_j - B1) / A0, (m2_j - C1) / A0
            if self.target == "accuracy":
                sm = mu.sum(axis=0)[:, None] - mu_j
                sv = (m2 - mu * mu).sum(axis=0)[:, None] - (m2_j - mu_j**2)
                v1 = _acc_var(w1, sm, sv, mu1, m21)
                v0 = _acc_var(w0, sm, sv, mu0, m20)
            else:
                q_rest = m2.sum(axis=0)[:, None] - m2_j
                v1 = _dom_var(w1, q_rest, m21, mu, kj, mu1)
                v0 = _dom_var(w0, q_rest, m20, mu, kj, mu0)
        ev = p1 * v1 + p0 * v0
        out[self._order] = ev
        out[~self.available] = np.nan
        return out

    def next_item(self) -> str | None:
        """The item to ask next, or None when the test is done."""
        j = self.next_position()
        return None if j is None else str(self.scorer.items[j])

    def next_position(self) -> int | None:
        """The fit's position of the item to ask next, or None when the test is done."""
        if self.done:
            return None
        ev = self.expected_variance()
        best = np.nanmin(ev)
        ties = np.flatnonzero(ev <= best + 1e-12 * max(abs(best), 1e-300))
        return int(ties[0] if len(ties) == 1 else self.rng.choice(ties))

    def answer(self, item: str | int, correct) -> None:
        """Record the answer to an item (its name, or its position in the fit) and update the posterior."""
        sc = self.scorer
        if isinstance(item, (int, np.integer)):
            j = int(item)
        else:
            j = int(sc._item_pos.get_indexer([str(item)])[0])
            if j < 0:
                raise InputError(f"item {item!r} is not in the fit")
        if j in set(self.pos):
            raise InputError(f"item {sc.items[j]!r} was already answered")
        y = int(correct)
        if y not in (0, 1):
            raise InputError(f"an answer must be 0 or 1 (or a bool), got {correct!r}")
        st = self._st
        k = int(sc.item_domain[j])
        self._logL[k] += st.logp[j] if y else st.log1mp[j]
        L = np.exp(self._logL[k] - self._logL[k].max())
        WL = st.W[k] * L
        Z = WL.sum(axis=-1)
        with np.errstate(divide="ignore", invalid="ignore"):
            self._logZ[k] = np.log(Z)
            self._cond[k] = np.where(Z[:, None] > 0, WL / Z[:, None], 0.0)
        if self._mom is not None:
            self._mom[k] = self._moments(k)
        self._update_pg()
        self.available[j] = False
        self._avail_k[k] = self.available[self._order[self._bounds[k][0]:self._bounds[k][1]]].any()
        self.pos.append(j)
        self.y.append(y)

    # -------------------------------------------------------------- results
    def administered(self, llm: str = "new") -> pd.DataFrame:
        """``llm, step, item, domain, correct`` of the items asked so far."""
        sc = self.scorer
        pos = np.asarray(self.pos, dtype=np.int64)
        return pd.DataFrame({"llm": llm, "step": np.arange(1, len(pos) + 1), "item": sc.items.values[pos],
                             "domain": sc.domains.values[sc.item_domain[pos]],
                             "correct": np.asarray(self.y, dtype=np.int8)})

    def scores(self, llm: str = "new", *, scale: str = "fit") -> Scores:
        """The LLM's scores from the answers so far (every structure draw of a Bayesian fit)."""
        parsed = [(llm, np.asarray(self.pos, dtype=np.int64), np.asarray(self.y, dtype=np.int8))]
        return self.scorer.score_parsed(parsed, seed=self.seed, scale=scale)


def _acc_var(w, sm_rest, sv_rest, mu_new, m2_new):
    """Variance of the expected accuracy under the g-weights ``w`` (Gs, J): the other domains'
    summed conditional means ``sm_rest`` and variances ``sv_rest``, the item's domain's new moments."""
    SM = sm_rest + mu_new
    SV = sv_rest + (m2_new - mu_new**2)
    e = (w * SM).sum(axis=0)
    return (w * SV).sum(axis=0) + (w * SM * SM).sum(axis=0) - e * e


def _dom_var(w, q_rest, m2_new, mu, kj, mu_new):
    """Sum over domains of the domain scores' variances under the g-weights ``w`` (Gs, J):
    the item's domain (``kj``) with its new moments, the others with theirs."""
    emu_all = mu @ w  # (K, J): every domain's posterior mean under each item's weights
    own = np.take_along_axis(emu_all, kj[None], axis=0)[0]
    sq = (emu_all**2).sum(axis=0) - own**2 + ((w * mu_new).sum(axis=0)) ** 2
    return (w * (q_rest + m2_new)).sum(axis=0) - sq


# ------------------------------------------------------------------ replay
@dataclass
class Replay:
    """Result of :func:`replay`: ``scores`` (the two tables) and ``administered``
    (``llm, step, item, domain, correct``)."""

    scores: Scores
    administered: pd.DataFrame

    def write(self, out, *, overwrite: bool = True, settings: dict | None = None) -> Path:
        """Write ``overall.csv``, ``domain_scores.csv``, ``administered.csv`` and ``adapt.json`` into ``out``.

        ``out`` is a new path or an adaptive-test folder written earlier (one
        with ``adapt.json``), replaced when ``overwrite`` (the CLI's
        ``--force``); written atomically (:mod:`mtlirt.data.outputs`).
        """
        out = Path(out)
        with folder_output(out, ADAPT_FOLDER, overwrite=overwrite) as tmp:
            self.scores._write_files(tmp, ADAPT_FOLDER.marker, settings)
            self.administered.to_csv(tmp / "administered.csv", index=False)
        return out


def replay(fit: Estimate | Scorer, responses, *, budget: int | None = 100, target: str = "overall",
           width: float | None = None, seed: int | None = 0, interval: float = 0.9,
           ignore_unknown_items: bool = False, scale: str = "fit") -> Replay:
    """Replay an adaptive test for every LLM of ``responses`` (the oracle answering the chosen items).

    Each LLM's pool is the items it has answers for.  Parameters as in
    :class:`AdaptiveTest`; ``responses`` as in :meth:`mtlirt.evaluate.scoring.Scorer.parse`.
    """
    sc = fit if isinstance(fit, Scorer) else Scorer(fit, interval=interval)
    parsed = sc.parse(responses, ignore_unknown_items=ignore_unknown_items)
    seeds = np.random.SeedSequence(seed).spawn(len(parsed))
    admin, asked = [], []
    with blas_threads(1):  # thousands of tiny products: BLAS threads would only contend
        for (llm, pos, y), ss in zip(parsed, seeds, strict=True):
            answers = dict(zip(pos.tolist(), y.tolist(), strict=True))
            test = AdaptiveTest(sc, target=target, budget=budget, width=width, seed=ss,
                                items=sc.items.values[pos] if len(pos) else [])
            while (j := test.next_position()) is not None:
                test.answer(j, answers[j])
            admin.append(test.administered(llm))
            asked.append((llm, np.asarray(test.pos, dtype=np.int64), np.asarray(test.y, dtype=np.int8)))
    scores = sc.score_parsed(asked, seed=seed, scale=scale)
    cols = ["llm", "step", "item", "domain", "correct"]
    administered = pd.concat(admin, ignore_index=True) if admin else pd.DataFrame(columns=cols)
    return Replay(scores=scores, administered=administered)
