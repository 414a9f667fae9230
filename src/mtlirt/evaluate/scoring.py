"""Score new LLMs against a fit's fixed items and structure.

A fit folder holds the items (``a, d, c`` per item, its domain) and the
structure of the LLM population (the cross-domain correlation, the loadings).
A new LLM -- any subset of the fit's items answered, in any domains, none
required -- gets a posterior for its overall score and for *every* domain
score of the fit, including domains it never ran, and its expected accuracy on
the whole benchmark, without refitting anything.

The model for a new LLM
-----------------------
With ``g`` its overall score and ``theta_k`` its domain scores, on the
population scale of the item calibration (every trait ``N(0, 1)`` over the
population of LLMs)::

    g ~ N(0, 1),    theta_k | g ~ N(lambda_k g, psi_k^2),    psi_k^2 = 1 - lambda_k^2,
    P(correct on item j) = c_j + (1 - c_j) sigmoid(a_j theta_k(j) + d_j).

Given ``g`` the domains are independent, so the posterior is exact on a grid:
an equally spaced grid over ``g`` times, per domain, an equally spaced grid
over ``theta_k``::

    p(g | y) ~ N(g; 0, 1) prod_k Z_k(g),     Z_k(g) = sum_t N(t; lambda_k g, psi_k^2) L_k(t),
    p(theta_k = t | g, y) = N(t; lambda_k g, psi_k^2) L_k(t) / Z_k(g),

``L_k(t)`` the likelihood of the LLM's responses in domain ``k`` (1 where it
has none: that domain's posterior is the prior predictive given the others,
through ``g``).  The grids are fine enough (spacing 0.125 on both) that the
trapezoid sums are exact to far below the reported digits for posteriors with
sd above 0.1; a narrower one (many sharp items: the sums then misstate the sd
by a third or more) is recomputed by the :class:`Scorer` on grids of the same
sizes about its mass (:func:`~mtlirt.numerics.factor_model.refined_posterior`, whenever the sd of ``g`` or
of any domain score is below :data:`REFINE_SD`). The fit computes its own
scores on the fixed grids (:func:`~mtlirt.numerics.factor_model.factor_posterior`), so a fitted LLM re-scored
with its answers gets the fit's numbers back where its posterior sds are at
least :data:`REFINE_SD`, and the more exact ones where they are narrower
(``Scorer(refine=False)`` gives the fit's numbers there too). The accuracy
draws stay on the fixed grids.

Where the structure comes from
------------------------------
- **MTL** (its default scores): the fit's own ``lambda_k`` (``fit.json``'s
  ``structure``) and items, whose scale is the scores' own (the population
  scale is the identity): the fit's scores are this model's posterior means
  (:func:`factor_posterior` over all its LLMs), so re-scoring a fitted LLM
  with its own answers gives its scores back.
- **Other point fits** (STL, pooled, the paper's variants, MTL with a given
  ``C``): the items are put on
  the calibration's population scale (``fit.json``'s ``population_scale``:
  the reported scores are ``theta_population = theta * scale + loc``); the
  loadings ``lambda`` are the first factor (principal axes) of the fit's
  error-corrected domain correlation ``domain_corr`` -- at rank ``r > 1`` the
  projection of the ``r`` factors on the overall direction (their mean over
  domains, as MTL's overall score is the mean of the domain centres).
- **Bayesian fits**: per posterior draw (a subsample of ``draws`` of them) the
  draw's items and its loadings' correlation with the overall score
  (:func:`overall_loadings`: the first column at rank one, else the
  projection on the mean loading, as the Bayesian overall score is defined);
  the new LLM's posterior is the equal-weight mixture over the draws (the new LLM does not update the
  structure: the items stay fixed).

At rank ``r > 1`` the factors other than the overall one are folded into the
domain-specific part (``psi_k^2 = 1 - lambda_k^2``): the marginal prior of
every domain score and its correlation with the overall score are kept, the
correlations the other factors add between domains are not.

Outputs
-------
Domain scores are reported on the fit's scale (the scale of its
``domain_scores.csv``; ``scale="population"`` gives the population scale).
The overall score is the posterior mean of ``g`` (``N(0, 1)`` over the
population of LLMs), on the fit's scale as its ``overall.csv`` has it: MTL
standardises the fitted LLMs' posterior means of ``g`` (``structure``'s
``overall_loc`` and ``overall_scale``), a Bayesian fit each draw's ``g`` over
the fitted LLMs (:func:`~mtlirt.numerics.factor_model.overall_standardisation`), so a new LLM compares with the
leaderboard and a re-scored MTL LLM gets its row back.  Other point fits, and
``scale="population"``, keep ``g``'s own scale (``docs/new_llms.md``).
Expected accuracy is the mean over all the
fit's items of ``P(correct)`` (``docs/model.md``), its interval from
``n_draws`` posterior draws; accuracy (``accuracy``) is the realised proportion
right on all the fit's items, the answered ones known and the others drawn
from the posterior predictive -- the quantity to compare with an observed
whole-benchmark accuracy (see :meth:`Scorer.posterior`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ..data import validate
from ..data.outputs import FolderKind, folder_output
from ..data.tables import read_table, write_csv
from ..errors import InputError
from ..estimators.correlation import principal_axes
from ..numerics.factor_grid import grid_quantiles, mixture_summary
from ..numerics.factor_model import (
    G_GRID,
    T_GRID,
    _moments,
    _Structure,
    _tabulate,
    _windows,
    domain_sums,
    grid_posterior,
    overall_loadings,
    overall_standardisation,
    refined_posterior,
)
from ..numerics.llm_side import grid_loglik
from ..results.estimate import Estimate, _json_default
from ..results.fitdir import package_versions, read_fit

__all__ = ["Scorer", "Scores", "score", "factor_loadings", "overall_loadings"]

#: Below this posterior sd (of ``g`` or of a domain score, on the fixed grids) the Scorer recomputes the posterior
#: on grids about its mass (:func:`~mtlirt.numerics.factor_model.refined_posterior`): the fixed spacing of 0.125
#: misstates smaller sds.
REFINE_SD = 0.15
#: Items shown in an unknown-item message.
SHOW = 5
#: The folder of :meth:`Scores.write` (``mtlirt score --out``), recognised by its ``score.json``.
SCORE_FOLDER = FolderKind("score folder", "score.json", ("overall.csv", "domain_scores.csv", "score.json"))


# ------------------------------------------------------------------ structure
def factor_loadings(R: np.ndarray, rank: int = 1, n_iter: int = 200, tol: float = 1e-7) -> np.ndarray:
    """Loadings of each domain on the overall factor of a correlation matrix.

    Iterated principal axes with ``rank`` factors (communalities capped below
    1); at ``rank > 1`` the loadings are projected on the overall direction,
    the mean of the loading rows.  Sign: positive sum.

    Parameters
    ----------
    R : ndarray (K, K)
        Correlation matrix (unit diagonal; NaN entries read as 0).
    rank : int
        Number of factors.

    Returns
    -------
    ndarray (K,)
        Correlation of each domain score with the overall score.
    """
    K = np.shape(R)[0]
    if K == 1:
        return np.ones(1)
    rank = max(1, min(int(rank), K - 1))
    lam = principal_axes(R, rank, communality=(0.005, 0.995), n_iter=n_iter, tol=tol)
    out = overall_loadings(lam)
    return out if out.sum() >= 0 else -out


# ------------------------------------------------------------------ results
@dataclass
class Scores:
    """Scores of new LLMs.

    Attributes
    ----------
    overall : pandas.DataFrame
        ``llm, score, sd, lower, upper, expected_accuracy, expected_accuracy_lower,
        expected_accuracy_upper, n_responses, accuracy, accuracy_lower, accuracy_upper``
        (``accuracy``: the realised whole-benchmark accuracy, the answered items
        counted as answered, the others predicted; see :meth:`Scorer.posterior`).
    domains : pandas.DataFrame
        ``llm, domain, score, sd, lower, upper, n_responses`` (every domain of
        the fit for every LLM; ``n_responses`` 0: predicted from the others).
    interval : float
        Probability mass of the intervals.
    """

    overall: pd.DataFrame
    domains: pd.DataFrame
    interval: float = 0.9

    def write(self, out: str | Path, *, overwrite: bool = True, settings: dict | None = None) -> Path:
        """Write ``overall.csv``, ``domain_scores.csv`` and ``score.json`` into the new folder ``out``.

        ``out`` is a new path or a score folder written earlier (one with
        ``score.json``), replaced when ``overwrite`` (the CLI's ``--force``);
        the folder is written atomically (:mod:`mtlirt.data.outputs`).
        ``score.json`` records the interval, the sizes, ``settings`` and the
        package versions.
        """
        out = Path(out)
        with folder_output(out, SCORE_FOLDER, overwrite=overwrite) as tmp:
            self._write_files(tmp, SCORE_FOLDER.marker, settings)
        return out

    def _write_files(self, folder: Path, marker: str, settings: dict | None) -> None:
        """The two tables and the record ``marker`` (settings, sizes, versions), into ``folder``."""
        import json

        write_csv(self.overall, folder / "overall.csv")
        write_csv(self.domains, folder / "domain_scores.csv")
        record = {"interval": self.interval, "llms": len(self.overall),
                  "domains": int(self.domains["domain"].nunique()) if len(self.domains) else 0,
                  "settings": settings or {}, "versions": package_versions()}
        (folder / marker).write_text(json.dumps(record, indent=2, default=_json_default))


def _domain_mismatch(items, given, fit, fit_domains) -> str:
    """The message for responses whose ``domain`` is not the fit's domain of their item, names as plain strings."""
    pairs = pd.DataFrame({"item": items, "given": given, "fit": fit}).drop_duplicates("item")
    shown = ", ".join(f"'{r.item}' ('{r.given}', the fit: '{r.fit}')" for r in pairs.head(SHOW).itertuples())
    more = f" and {len(pairs) - SHOW} more" if len(pairs) > SHOW else ""
    unknown = sorted(set(map(str, given)) - {str(d) for d in fit_domains})
    note = ""
    if unknown:
        names = ", ".join(f"'{d}'" for d in unknown[:SHOW]) + (f" and {len(unknown) - SHOW} more"
                                                                if len(unknown) > SHOW else "")
        note = f"; the fit has no domain {names}"
    return (f"{len(pairs)} item{'s' if len(pairs) > 1 else ''} of the table in another domain than in the fit: "
            f"{shown}{more}{note} (give the fit's domains, or leave the domain column out)")


# ------------------------------------------------------------------ scorer
class Scorer:
    """A fit's items and structure, tabulated once, ready to score any number of new LLMs.

    Parameters
    ----------
    fit
        An :class:`~mtlirt.results.estimate.Estimate` (``read_fit(folder)``) with item
        parameters: MTL, STL, pooled, the paper's variants or a Bayesian fit.
    draws
        Bayesian fits: how many posterior draws of the structure to average
        over (evenly spaced over the chains' draws); point fits use their one.
    interval
        Probability mass of the reported intervals.
    refine
        Recompute a posterior whose sd (overall or any domain) falls below
        :data:`REFINE_SD` on grids about its mass (:func:`~mtlirt.numerics.factor_model.refined_posterior`);
        False keeps the fixed grids (the fit's own computation).
    """

    def __init__(self, fit: Estimate, *, draws: int = 20, interval: float = 0.9, refine: bool = True):
        if not 0 < interval < 1:
            raise InputError(f"interval must be in (0, 1), got {interval!r}")
        if fit.method == "accuracy":
            raise InputError("scoring needs a fit with item parameters; an accuracy fit has none")
        self.fit = fit
        self.interval = float(interval)
        self.refine = bool(refine)
        post = fit.posterior
        self.items = fit.items
        self.domains = fit.domains
        self.item_domain = self.domains.get_indexer(post["item_domain"].values.astype(str)).astype(np.int64)
        self.n_items = len(self.items)
        self.n_domains = len(self.domains)
        self.domain_sizes = np.bincount(self.item_domain, minlength=self.n_domains)
        self._item_pos = pd.Index(self.items)
        pop = fit.info.get("population_scale")
        K = self.n_domains
        self.loc = np.asarray(pop["loc"], dtype=np.float64) if pop else np.zeros(K)
        self.scale = np.asarray(pop["scale"], dtype=np.float64) if pop else np.ones(K)
        self.overall_maps = None  # per structure (mean, sd) of g that put the overall score on the fit's scale
        self.structures = self._structures(int(draws))
        self.selection = self.structures[0] if len(self.structures) == 1 else self._mean_structure()

    @property
    def overall_scale(self) -> float:
        """How much wider the overall score spreads on the population scale than on the fit's (the mean over
        the structures; 1 where the fit records none)."""
        return 1.0 if self.overall_maps is None else float(self.overall_maps[:, 1].mean())

    def _structures(self, draws: int) -> list[_Structure]:
        fit = self.fit
        post = fit.posterior
        K = self.n_domains
        jd = self.item_domain

        def pop_items(a, d, c):  # reported scale -> population scale (estimators.response_data.to_internal)
            a_i = a / self.scale[jd]
            return a_i, d - a_i * self.loc[jd], c

        if fit.n_draws > 1 and "discrimination" in post:
            flat = {v: fit.draws(v, source="posterior", max_draws=draws)
                    for v in ("discrimination", "intercept", "guessing", "loadings", "domain_corr") if v in post}
            out = []
            for s in range(len(flat["discrimination"])):
                c = flat["guessing"][s] if "guessing" in flat else np.zeros(self.n_items)
                a, d, c = pop_items(flat["discrimination"][s], flat["intercept"][s], c)
                lam = (overall_loadings(flat["loadings"][s]) if "loadings" in flat
                       else factor_loadings(flat["domain_corr"][s]))
                out.append(_tabulate(a, d, c, jd, lam, K))
            eta = fit.draws("eta_raw", source="posterior", max_draws=draws)
            eta = fit.draws("eta", source="posterior", max_draws=draws) if eta is None else eta
            if eta is not None and "loadings" in flat and len(eta) == len(flat["loadings"]):
                self.overall_maps = overall_standardisation(eta, flat["loadings"])
            return out
        a = fit.point("discrimination")
        d = fit.point("intercept")
        c = fit.point("guessing") if "guessing" in post else np.zeros_like(a)
        a, d, c = pop_items(a, d, c)
        structure = fit.info.get("structure") or {}
        if "overall_scale" in structure:  # MTL standardises E[g | answers] over its LLMs and records how
            self.overall_maps = np.array([[structure["overall_loc"], structure["overall_scale"]]], dtype=np.float64)
        return [_tabulate(a, d, c, jd, self._point_loadings(), K)]

    def _point_loadings(self) -> np.ndarray:
        """A point fit's ``lambda``: the fit's own structure where it records one (MTL's posterior scores,
        ``info["structure"]``: the scorer then computes what the fit did), else the first factor of its
        error-corrected domain correlation."""
        fit = self.fit
        structure = fit.info.get("structure")
        if structure is not None:
            return np.asarray(structure["lambda"], dtype=np.float64)
        rank = fit.posterior.sizes.get("factor", 1) if "loadings" in fit.posterior else 1
        return factor_loadings(fit.point("domain_corr"), rank=rank)

    def _mean_structure(self) -> _Structure:
        """The posterior means of the items and loadings, tabulated (an adaptive test's item choice)."""
        fit = self.fit
        jd = self.item_domain
        a = fit.point("discrimination") / self.scale[jd]
        d = fit.point("intercept") - a * self.loc[jd]
        c = fit.point("guessing") if "guessing" in fit.posterior else np.zeros_like(a)
        if fit.info.get("structure") is not None:
            lam = self._point_loadings()
        else:
            lam = (overall_loadings(fit.point("loadings")) if "loadings" in fit.posterior
                   else factor_loadings(fit.point("domain_corr")))
        return _tabulate(a, d, c, jd, lam, self.n_domains)

    # -------------------------------------------------------------- input
    def parse(self, responses, *, ignore_unknown_items: bool = False) -> list[tuple[str, np.ndarray, np.ndarray]]:
        """Each LLM's responses as ``(llm, item positions in the fit, 0/1 answers)``.

        ``responses`` is a :class:`~mtlirt.data.responses.Responses` or a long
        DataFrame ``llm, item, correct`` (a ``domain`` column, if given, must
        agree with the fit's).

        Raises
        ------
        InputError
            Items the fit does not hold (unless ``ignore_unknown_items``), a
            domain that disagrees with the fit's, or a non-binary answer.
        """
        if isinstance(responses, pd.DataFrame):
            missing = [col for col in ("llm", "item", "correct") if col not in responses.columns]
            if missing:
                raise InputError(f"responses lack the column{'s' if len(missing) > 1 else ''} "
                                 f"{', '.join(missing)} (need llm, item, correct)")
            df = responses
            llm = df["llm"].astype(str).to_numpy()
            item = df["item"].astype(str).to_numpy()
            y = validate.to_binary(df["correct"]).astype(np.int8)
            dom = df["domain"].astype(str).to_numpy() if "domain" in df.columns else None
        else:
            obs = responses.observed
            rows, cols = np.nonzero(obs)
            llm = np.asarray(responses.llms, dtype=str)[rows]
            item = np.asarray(responses.items, dtype=str)[cols]
            y = responses.correct[rows, cols].astype(np.int8)
            dom = np.asarray(responses.domains, dtype=str)[responses.item_domain[cols]]
        pos = self._item_pos.get_indexer(item)
        unknown = pos < 0
        if unknown.any():
            names = pd.unique(item[unknown])
            if not ignore_unknown_items:
                shown = ", ".join(repr(str(x)) for x in names[:SHOW])
                more = f" and {len(names) - SHOW} more" if len(names) > SHOW else ""
                raise InputError(f"{len(names)} item{'s' if len(names) > 1 else ''} not in the fit: {shown}{more} "
                                 "(score only the fit's items, or pass --ignore-unknown-items)")
            keep = ~unknown
            llm, item, y, pos = llm[keep], item[keep], y[keep], pos[keep]
            dom = None if dom is None else dom[keep]
        if dom is not None:
            fit_dom = np.asarray(self.domains, dtype=str)[self.item_domain[pos]]
            bad = dom != fit_dom
            if bad.any():
                raise InputError(_domain_mismatch(item[bad], dom[bad], fit_dom[bad], self.domains))
        key = pd.DataFrame({"llm": llm, "pos": pos, "y": y})
        dup = key.duplicated(["llm", "pos"], keep=False)
        if dup.any():
            clash = key[dup].groupby(["llm", "pos"])["y"].nunique()
            clash = clash[clash > 1]
            if len(clash):
                (l0, p0) = clash.index[0]
                raise InputError(f"{len(clash)} (llm, item) pair(s) answered both right and wrong, "
                                 f"e.g. {l0!r} on {self.items[p0]!r}")
            key = key.drop_duplicates(["llm", "pos"])
        out = []
        order = pd.unique(key["llm"]) if len(key) else []
        if not isinstance(responses, pd.DataFrame):  # every LLM of the table, even one left without items
            order = list(np.asarray(responses.llms, dtype=str))
        groups = {k: g for k, g in key.groupby("llm", sort=False)} if len(key) else {}
        for name in order:
            g = groups.get(name)
            if g is None:
                out.append((str(name), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int8)))
            else:
                out.append((str(name), g["pos"].to_numpy(np.int64), g["y"].to_numpy(np.int8)))
        return out

    # -------------------------------------------------------------- core
    def loglik_table(self, st: _Structure, pos: np.ndarray, y: np.ndarray) -> np.ndarray:
        """(K, Q): each domain's log-likelihood of the answers on ``T_GRID`` (each domain one row of
        :func:`~mtlirt.numerics.llm_side.grid_loglik`, its answers a sparse row)."""
        from scipy.sparse import csr_matrix

        cells = (self.item_domain[pos], np.arange(len(pos)))
        shape = (self.n_domains, len(pos))
        Y = csr_matrix((np.asarray(y, dtype=np.float64), cells), shape=shape)
        O = csr_matrix((np.ones(len(pos)), cells), shape=shape)
        return grid_loglik(Y, O, st.logp[pos], st.log1mp[pos])

    def posterior(self, pos: np.ndarray, y: np.ndarray, *, seed=0, n_draws: int = 2000, scale: str = "fit") -> dict:
        """One LLM's posterior summaries (a dict of arrays; see :meth:`score`).

        Two accuracies: ``expected_accuracy``, the mean over all items of
        ``P(correct)`` at the LLM's traits (what the model says the LLM *would*
        score on average), and ``accuracy``, the proportion of the benchmark's
        items it *does* answer right: the answered items count with their
        answers, each unanswered item is a Bernoulli draw with its ``P(correct)``
        (the posterior predictive; their sum normal with the summed Bernoulli
        variances given the traits).  With every item answered ``accuracy`` is
        the observed accuracy and its interval a point.  The realised accuracy's
        interval is the one to hold against an observed accuracy: an adaptive
        test asks the items whose answers are least predictable and leaves the
        rest, whose answers still vary about their ``P(correct)``.
        """
        pos = np.asarray(pos, dtype=np.int64)
        y = np.asarray(y, dtype=np.int8)
        K = self.n_domains
        answered = np.bincount(self.item_domain[pos], minlength=K)
        S = len(self.structures)
        pgs = []
        pt_sum = np.zeros((K, len(T_GRID)))
        rng = np.random.default_rng(seed)
        per = np.full(S, n_draws // S)
        per[: n_draws - per.sum()] += 1
        J = self.n_items
        n_right = float(y.sum())
        acc_draws, real_draws = [], []
        acc_mean = real_mean = 0.0
        for st, n_s in zip(self.structures, per, strict=True):
            logL = self.loglik_table(st, pos, y)
            pg, cond = grid_posterior(st, logL, answered > 0)
            pgs.append(pg)
            pt_sum += np.einsum("g,kgq->kq", pg, cond)
            m = np.einsum("kgq,kq->kg", cond, st.acc)
            acc_mean += float(pg @ m.sum(axis=0))
            # the unanswered items' summed P(correct) and Bernoulli variances, per domain on the grid
            rest_p = st.acc * J
            rest_v = st.pq.copy()
            if len(pos):
                pp = st.p[pos]
                rest_p -= domain_sums(self.item_domain[pos], pp, K)
                rest_v -= domain_sums(self.item_domain[pos], pp * (1.0 - pp), K)
            rest_v = np.clip(rest_v, 0.0, None)
            real_mean += (n_right + float(pg @ np.einsum("kgq,kq->kg", cond, rest_p).sum(axis=0))) / J
            ea, rp, rv = _draw_accuracy(rng, pg, cond, (st.acc, rest_p, rest_v), int(n_s))
            acc_draws.append(ea)
            real_draws.append((n_right + rp + np.sqrt(rv) * rng.standard_normal(len(rv))) / J)
        pg = sum(pgs) / S
        pt = pt_sum / S
        g_grid, t_grids = G_GRID, np.broadcast_to(T_GRID, (K, len(T_GRID)))
        if self.refine and min(_moments(pg, G_GRID)[1], _moments(pt, T_GRID)[1].min()) < REFINE_SD:
            g_grid, t_grids = _windows(pg, pt, len(G_GRID), len(T_GRID))
            fine = [refined_posterior(st, self.item_domain, pos, y, g_grid, t_grids) for st in self.structures]
            pgs = [f[0] for f in fine]
            pt = sum(f[1] for f in fine) / S
        acc_mean /= S
        real_mean /= S
        draws = np.concatenate(acc_draws)
        real = np.clip(np.concatenate(real_draws), 0.0, 1.0)
        lo_q = (1 - self.interval) / 2
        qs = (lo_q, 1 - lo_q)
        if scale not in ("fit", "population"):
            raise InputError(f"scale must be 'fit' or 'population', got {scale!r}")
        maps = self.overall_maps if scale == "fit" and self.overall_maps is not None else np.tile([0.0, 1.0], (S, 1))
        g_mean, g_sd, (g_lo, g_hi) = mixture_summary(pgs, g_grid, maps, qs)
        t_mean = (pt * t_grids).sum(axis=-1)
        t_sd = np.sqrt(np.clip((pt * t_grids**2).sum(axis=-1) - t_mean**2, 0.0, None))
        t_q = np.stack([grid_quantiles(pt[k], t_grids[k], qs) for k in range(K)])
        t_lo, t_hi = t_q[:, 0], t_q[:, 1]
        if scale == "fit":
            t_mean = (t_mean - self.loc) / self.scale
            t_sd = t_sd / self.scale
            t_lo, t_hi = (t_lo - self.loc) / self.scale, (t_hi - self.loc) / self.scale
        a_lo, a_hi = np.quantile(draws, qs)
        r_lo, r_hi = np.quantile(real, qs)
        if len(pos) == J:  # every item answered: the accuracy is observed
            real_mean = r_lo = r_hi = n_right / J
        return dict(overall=g_mean, overall_sd=g_sd, overall_lower=g_lo, overall_upper=g_hi,
                    expected_accuracy=acc_mean, expected_accuracy_sd=float(draws.std(ddof=1)),
                    expected_accuracy_lower=float(a_lo), expected_accuracy_upper=float(a_hi),
                    accuracy=float(real_mean), accuracy_sd=float(real.std(ddof=1)),
                    accuracy_lower=float(r_lo), accuracy_upper=float(r_hi),
                    theta=t_mean, theta_sd=t_sd, theta_lower=t_lo, theta_upper=t_hi, n_responses=answered)

    def score(self, responses, *, ignore_unknown_items: bool = False, seed: int | None = 0,
              n_draws: int = 2000, scale: str = "fit") -> Scores:
        """Score every LLM of ``responses`` (see :meth:`parse`); ``seed`` drives the
        expected-accuracy draws (one stream per LLM, so an LLM's numbers do not depend
        on the others in the table)."""
        parsed = self.parse(responses, ignore_unknown_items=ignore_unknown_items)
        return self.score_parsed(parsed, seed=seed, n_draws=n_draws, scale=scale)

    def score_parsed(self, parsed, *, seed: int | None = 0, n_draws: int = 2000, scale: str = "fit") -> Scores:
        """Score LLMs given as ``(llm, positions, answers)`` (the output of :meth:`parse`)."""
        seeds = np.random.SeedSequence(seed).spawn(len(parsed))
        rows, dom_rows = [], []
        names = np.asarray(self.domains, dtype=str)
        for (llm, pos, y), ss in zip(parsed, seeds, strict=True):
            r = self.posterior(pos, y, seed=ss, n_draws=n_draws, scale=scale)
            rows.append(dict(llm=llm, score=r["overall"], sd=r["overall_sd"], lower=r["overall_lower"],
                             upper=r["overall_upper"], expected_accuracy=r["expected_accuracy"],
                             expected_accuracy_lower=r["expected_accuracy_lower"],
                             expected_accuracy_upper=r["expected_accuracy_upper"],
                             n_responses=int(r["n_responses"].sum()), accuracy=r["accuracy"],
                             accuracy_lower=r["accuracy_lower"], accuracy_upper=r["accuracy_upper"]))
            dom_rows.append(pd.DataFrame(dict(llm=llm, domain=names, score=r["theta"], sd=r["theta_sd"],
                                              lower=r["theta_lower"], upper=r["theta_upper"],
                                              n_responses=r["n_responses"])))
        overall = pd.DataFrame(rows, columns=["llm", "score", "sd", "lower", "upper", "expected_accuracy",
                                              "expected_accuracy_lower", "expected_accuracy_upper", "n_responses",
                                              "accuracy", "accuracy_lower", "accuracy_upper"])
        domains = (pd.concat(dom_rows, ignore_index=True) if dom_rows else
                   pd.DataFrame(columns=["llm", "domain", "score", "sd", "lower", "upper", "n_responses"]))
        return Scores(overall=overall, domains=domains, interval=self.interval)


def _draw_accuracy(rng: np.random.Generator, pg: np.ndarray, cond: np.ndarray, acc, n: int):
    """``n`` draws of the expected accuracy: ``g`` from its grid posterior, each domain score
    from its conditional given ``g`` (uniform within a grid cell), the domains' accuracy
    contributions interpolated on the grid.  ``acc`` a (K, Q) table, or a tuple of them
    (one sum per table at the same draws of the traits)."""
    tables = acc if isinstance(acc, tuple) else (acc,)
    if n <= 0:
        out = tuple(np.zeros(0) for _ in tables)
        return out if isinstance(acc, tuple) else out[0]
    K, G, Q = cond.shape
    h = T_GRID[1] - T_GRID[0]
    gi = rng.choice(G, size=n, p=pg)
    used = np.unique(gi)
    # one increasing array: row (k, g) holds k * len(used) + i + its CDF in (0, 1]
    cdf = np.cumsum(cond[:, used], axis=-1)
    cdf /= np.where(cdf[..., -1:] > 0, cdf[..., -1:], 1.0)
    row = np.arange(K * len(used), dtype=np.float64).reshape(K, len(used), 1)
    flat = (cdf * (1 - 1e-12) + row).ravel()
    gpos = np.searchsorted(used, gi)
    key = np.arange(K)[None, :] * len(used) + gpos[:, None] + rng.random((n, K))
    qi = np.searchsorted(flat, key.ravel()).reshape(n, K) - (np.arange(K)[None, :] * len(used) + gpos[:, None]) * Q
    qi = np.clip(qi, 0, Q - 1)
    t = T_GRID[qi] + (rng.random((n, K)) - 0.5) * h
    out = tuple(np.zeros(n) for _ in tables)
    for k in range(K):
        for o, tab in zip(out, tables, strict=True):
            o += np.interp(t[:, k], T_GRID, tab[k])
    return out if isinstance(acc, tuple) else out[0]


def score(fit: Estimate | str | Path, responses, *, interval: float = 0.9, draws: int = 20,
          ignore_unknown_items: bool = False, seed: int | None = 0, scale: str = "fit") -> Scores:
    """Score new LLMs against a fit's fixed items and structure.

    Parameters
    ----------
    fit
        An :class:`~mtlirt.results.estimate.Estimate` or a fit folder.
    responses
        A :class:`~mtlirt.data.responses.Responses`, a long DataFrame ``llm,
        item, correct`` (optional ``domain``) or the path of such a table (read
        as ``mtlirt score`` reads it): any subset of the fit's items.
    interval
        Probability mass of the intervals.
    draws
        Bayesian fits: posterior draws of the structure averaged over.
    ignore_unknown_items
        Drop items the fit does not hold instead of raising :class:`InputError`.
    seed
        Seed of the expected-accuracy draws.
    scale
        ``"fit"``: domain scores on the fit's reported scale; ``"population"``:
        on the item calibration's population scale.

    Returns
    -------
    Scores
        ``overall`` and ``domains`` tables.
    """
    if not isinstance(fit, Estimate):
        fit = read_fit(fit)
    if isinstance(responses, (str, os.PathLike)):
        responses = read_table(responses)
    return Scorer(fit, draws=draws, interval=interval).score(
        responses, ignore_unknown_items=ignore_unknown_items, seed=seed, scale=scale)
