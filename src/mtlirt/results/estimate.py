"""The common result of every estimator: :class:`Estimate`.

An estimate is an :class:`xarray.DataTree` laid out like an ArviZ posterior.
Its ``/posterior`` group holds draws with dims ``chain, draw`` followed by the
model's dims; a point estimate (MTL, STL, pooled, accuracy, MAP) is one chain
and one draw.  Parametric-bootstrap replicates of a point estimate sit in
``/bootstrap`` with the same layout (one chain, ``B`` draws).  Summaries take
their uncertainty from the posterior when it has more than one draw, else
from the bootstrap, else report none (``sd`` and interval bounds NaN).

Variables and their dims are the result contract every plot and report
reads, declared once in :mod:`mtlirt.results.schema`: ``theta`` (llm, domain),
``overall`` (llm), ``eta`` (llm, factor), ``loadings`` (domain, factor),
``discrimination``, ``intercept``, ``guessing`` (item), ``domain_corr``
(domain_a, domain_b), ``expected_accuracy`` (llm), each after ``chain, draw``.

A ``/cells`` group, when present, holds ``n_responses`` (llm, domain): the
number of observed responses of each LLM in each domain; a cell with none is
*predicted* (its score comes from the model given the LLM's other domains)
and flagged so in :meth:`Estimate.domain_scores`.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from ..errors import InputError
from ..estimators.correlation import column_corr
from . import schema
from .schema import SAMPLE_DIMS

INFO_ATTR = "mtlirt_info"


def _names(index) -> np.ndarray:
    return np.asarray([str(x) for x in index], dtype=str)


def _ranks(values: np.ndarray) -> np.ndarray:
    """Ranks along the last axis, 1 = highest value; ties share the best rank of their group
    ("competition" ranking: 1, 2, 2, 4).

    Values within ``1e-9 (1 + |value|)`` of the next higher one count as equal: LLMs with the same
    answers get the same score up to the last bits of floating point.
    """
    values = np.asarray(values, dtype=np.float64)
    order = np.argsort(-values, axis=-1, kind="stable")
    desc = np.take_along_axis(values, order, axis=-1)
    pos = np.broadcast_to(np.arange(values.shape[-1]), desc.shape)
    new = np.ones(desc.shape, dtype=bool)  # the first of a group of equal values
    new[..., 1:] = ~(desc[..., :-1] - desc[..., 1:] <= 1e-9 * (1.0 + np.abs(desc[..., 1:])))  # NaN: its own
    first = np.maximum.accumulate(np.where(new, pos, 0), axis=-1)
    ranks = np.empty(values.shape, dtype=np.int64)
    np.put_along_axis(ranks, order, first + 1, axis=-1)
    return ranks


def expected_accuracy(theta: np.ndarray, a, d, c, item_domain: np.ndarray) -> np.ndarray:
    """Each LLM's expected proportion correct over all items, ``mean_j P_ij``.

    ``theta`` is ``N x K``; item arrays have one entry per item.  One pass
    per LLM (:func:`mtlirt.estimators._kernels.expected_correct`): the ``N x
    J`` probabilities are never in memory.
    """
    from ..estimators._kernels import expected_correct

    theta = np.ascontiguousarray(theta, dtype=np.float64)
    a = np.ascontiguousarray(a, dtype=np.float64)
    d = np.ascontiguousarray(d, dtype=np.float64)
    c = np.zeros_like(a) if c is None else np.ascontiguousarray(c, dtype=np.float64)
    out = np.empty(theta.shape[0])
    expected_correct(theta, a, d, c, np.ascontiguousarray(item_domain, dtype=np.int64), out)
    return out


def check_interval(interval) -> None:
    """The probability of reported intervals: a number in (0, 1), else an :class:`~mtlirt.errors.InputError`.
    Checked by every table of intervals, :func:`~mtlirt.results.fitdir.write_fit`, the report and the comparison,
    and by ``mtlirt fit`` before it fits."""
    if isinstance(interval, bool) or not isinstance(interval, (int, float, np.number)) or not 0 < interval < 1:
        raise InputError(f"interval (--interval) must be a probability in (0, 1), got {interval!r}")


def _quantiles(x: np.ndarray, interval: float) -> tuple[np.ndarray, np.ndarray]:
    check_interval(interval)
    lo = (1 - interval) / 2
    q = np.quantile(x, [lo, 1 - lo], axis=0)
    return q[0], q[1]


class Estimate:
    """A fitted model's result, read the same way whatever produced it.

    The layout (an ArviZ-style posterior; a point estimate is one chain and
    one draw, bootstrap replicates in ``/bootstrap``) is described in the
    module :mod:`mtlirt.results.estimate`.

    Parameters
    ----------
    tree
        An :class:`xarray.DataTree` with a ``/posterior`` group in the layout
        described in this module's docstring, and optionally ``/bootstrap``,
        ``/sample_stats``, ``/log_likelihood`` and the rest of ArviZ's groups.
    """

    def __init__(self, tree: xr.DataTree):
        if "posterior" not in tree.children:
            raise ValueError("an Estimate needs a /posterior group")
        schema.check(tree["posterior"].to_dataset())
        self.tree = tree

    # ------------------------------------------------------------ build
    @classmethod
    def from_point(
        cls,
        *,
        method: str,
        theta,
        llms,
        domains,
        items,
        item_domain,
        discrimination,
        intercept,
        guessing=None,
        overall=None,
        eta=None,
        loadings=None,
        domain_corr=None,
        info: dict | None = None,
        bootstrap: dict | None = None,
        extra: dict | None = None,
        n_responses=None,
    ) -> Estimate:
        """Wrap a point estimate (one chain, one draw) and optional bootstrap replicates.

        Parameters
        ----------
        method
            Name of the estimator (``mtl``, ``stl``, ``pooled``, ``accuracy``, ...).
        theta
            ``N x K`` domain scores.
        llms, domains, items
            Names.
        item_domain
            Integer domain code of each item.
        discrimination, intercept, guessing
            Item parameters (``guessing`` defaults to 0).
        overall
            ``N`` overall score; defaults to ``eta[:, 0]``, else the first
            principal component of ``theta`` scaled to unit variance.
        eta, loadings
            ``N x r`` shared traits and ``K x r`` loadings, when the method has them.
        domain_corr
            ``K x K`` cross-domain correlation; defaults to the correlation of
            the columns of ``theta``.
        info
            Settings, timings and diagnostics (stored as JSON, written to ``fit.json``).
        bootstrap
            Replicates: a dict with the same keys as the point arguments
            (``theta``, ``overall``, ``discrimination``, ...) each with a
            leading axis of length ``B``.
        extra
            Further point variables, ``name -> (dims, array)`` with dims among
            ``llm``, ``domain``, ``item`` (e.g. the accuracy baseline's raw
            proportions ``accuracy`` on ``(llm, domain)``).
        n_responses
            ``N x K`` observed responses per LLM and domain (the ``/cells`` group).
        """
        point = dict(
            theta=theta, overall=overall, eta=eta, loadings=loadings,
            discrimination=discrimination, intercept=intercept, guessing=guessing,
            domain_corr=domain_corr,
        )
        item_domain = np.asarray(item_domain)
        post = _dataset({k: None if v is None else np.asarray(v)[None] for k, v in point.items()},
                        llms, domains, items, item_domain)
        for name, (dims, value) in (extra or {}).items():
            post[name] = (SAMPLE_DIMS + tuple(dims), np.asarray(value, dtype=np.float64)[None, None])
        children = {"posterior": post}
        if bootstrap is not None:
            children["bootstrap"] = _dataset(
                {k: np.asarray(v) for k, v in bootstrap.items() if v is not None},
                llms, domains, items, item_domain,
                fill_from=post,
            )
        if n_responses is not None:
            children["cells"] = _cells(n_responses, llms, domains)
        tree = xr.DataTree.from_dict(children)
        tree.attrs[INFO_ATTR] = json.dumps({"method": method, **(info or {})}, default=_json_default)
        return cls(tree)

    def attach_cells(self, n_responses) -> None:
        """Record the observed responses per LLM and domain (``N x K``) in ``/cells``."""
        self.tree["cells"] = xr.DataTree(_cells(n_responses, self.llms, self.domains))

    @property
    def predicted(self) -> np.ndarray | None:
        """``N x K`` booleans: cells without responses (None when ``/cells`` is absent)."""
        if "cells" not in self.tree.children:
            return None
        return self.tree["cells"].to_dataset()["n_responses"].values == 0

    # ------------------------------------------------------------ io
    def save(self, path: str | Path) -> Path:
        """Write the DataTree to netCDF (h5netcdf)."""
        path = Path(path)
        self.tree.to_netcdf(path, engine="h5netcdf")
        return path

    @classmethod
    def load(cls, path: str | Path) -> Estimate:
        """Read an estimate written by :meth:`save` (or an ArviZ posterior with the same variables).

        A file that is not one (truncated, another format, no ``/posterior``
        group) is an :class:`~mtlirt.errors.InputError` naming it.
        """
        try:
            tree = xr.open_datatree(path, engine="h5netcdf").load()
            tree.close()
            return cls(tree)
        except FileNotFoundError:
            raise
        except Exception as exc:  # h5py, netCDF and xarray errors of a damaged or foreign file
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise InputError(f"cannot read {path}: {first} (damaged, or not written by mtlirt; refit to write it "
                             "again)") from exc

    # ------------------------------------------------------------ access
    @property
    def info(self) -> dict:
        """Method, settings, timings and diagnostics."""
        raw = self.tree.attrs.get(INFO_ATTR)
        return json.loads(raw) if raw else {}

    def update_info(self, **kw) -> None:
        """Add or replace entries of :attr:`info`."""
        info = self.info
        info.update(kw)
        self.tree.attrs[INFO_ATTR] = json.dumps(info, default=_json_default)

    @property
    def method(self) -> str:
        """Name of the estimator."""
        return self.info.get("method", "unknown")

    @property
    def posterior(self) -> xr.Dataset:
        """The ``/posterior`` group as a Dataset."""
        return self.tree["posterior"].to_dataset()

    @property
    def llms(self) -> pd.Index:
        """LLM names."""
        return pd.Index(self.posterior["llm"].values.astype(str), name="llm")

    @property
    def domains(self) -> pd.Index:
        """Domain names."""
        return pd.Index(self.posterior["domain"].values.astype(str), name="domain")

    @property
    def items(self) -> pd.Index:
        """Item names."""
        return pd.Index(self.posterior["item"].values.astype(str), name="item")

    @property
    def n_draws(self) -> int:
        """Number of posterior draws (chains x draws)."""
        p = self.posterior
        return int(p.sizes["chain"] * p.sizes["draw"])

    @property
    def uncertainty_source(self) -> str | None:
        """``"posterior"``, ``"bootstrap"`` or ``None`` (a bare point estimate)."""
        if self.n_draws > 1:
            return "posterior"
        if "bootstrap" in self.tree.children:
            return "bootstrap"
        return None

    def point(self, var: str) -> np.ndarray:
        """The point value of a variable: the posterior mean over chains and draws."""
        return self.posterior[var].mean(SAMPLE_DIMS).values

    @property
    def item_domain(self) -> np.ndarray:
        """The domain code of every item (``J``, positions in :attr:`domains`)."""
        return self.domains.get_indexer(self.posterior["item_domain"].values.astype(str)).astype(np.int64)

    def draws(self, var: str, *, source: str | None = None, max_draws: int | None = None,
              by_chain: bool = False) -> np.ndarray | None:
        """Draws of a variable, or None where the source or the variable is absent.

        Parameters
        ----------
        var
            A variable of the source group.
        source
            ``"posterior"`` (a point estimate's is its one draw), ``"bootstrap"``,
            or None: the :attr:`uncertainty_source` (None for a bare point estimate).
        max_draws
            At most this many draws, evenly spaced over all of them (the first and
            the last kept).
        by_chain
            ``(chain, draw, ...)`` instead of ``(sample, ...)`` (all draws).
        """
        src = self.uncertainty_source if source is None else source
        if src is None or src not in self.tree.children:
            return None
        ds = self.tree[src].to_dataset()
        if var not in ds:
            return None
        v = ds[var].transpose(*SAMPLE_DIMS, ...).values
        if by_chain:
            if max_draws is not None:
                raise ValueError("max_draws thins the stacked draws; by_chain returns them all")
            return v
        v = v.reshape((-1,) + v.shape[2:])
        if max_draws is not None and len(v) > max_draws:
            v = v[np.unique(np.linspace(0, len(v) - 1, max_draws).round().astype(int))]
        return v

    def item_model_draws(self, *, max_draws: int | None = None, by_chain: bool = False) -> tuple:
        """``theta``, ``discrimination``, ``intercept`` and ``guessing`` of the posterior's draws
        (:meth:`draws` with ``source="posterior"``; a point estimate's one draw): the arrays the
        item model's probability of every (LLM, item) cell needs, for the held-out log-likelihood,
        the pointwise log-likelihood and the item-fit checks alike."""
        return tuple(self.draws(v, source="posterior", max_draws=max_draws, by_chain=by_chain)
                     for v in ("theta", "discrimination", "intercept", "guessing"))

    def rank_draws(self) -> np.ndarray | None:
        """Each draw's ranking of the LLMs by overall score (``sample x N``, 1 = best)."""
        d = self.draws("overall")
        return None if d is None else _ranks(d)

    # ------------------------------------------------------------ tables
    def domain_scores(self, interval: float = 0.9) -> pd.DataFrame:
        """Long table ``llm, domain, score, sd, lower, upper`` (equal-tailed interval), and
        ``predicted`` (True where the LLM has no response in the domain) when known."""
        score = self.point("theta")
        d = self.draws("theta")
        sd, lo, hi = _spread(score, d, interval)
        n, k = score.shape
        out = pd.DataFrame(
            {
                "llm": np.repeat(self.llms.values, k),
                "domain": np.tile(self.domains.values, n),
                "score": score.ravel(),
                "sd": sd.ravel(),
                "lower": lo.ravel(),
                "upper": hi.ravel(),
            }
        )
        pred = self.predicted
        if pred is not None:
            out["predicted"] = pred.ravel()
        return out

    def overall_scores(self, interval: float = 0.9) -> pd.DataFrame:
        """Table ``llm, score, sd, lower, upper, rank, rank_lower, rank_upper, expected_accuracy``, best first.

        Tied scores share a rank (1, 2, 2, 4), in the point ranks and in every draw's. ``rank_lower``
        and ``rank_upper`` (nullable integers) are the interval of the draws' ranks, missing for a point
        estimate without draws."""
        score = self.point("overall")
        d = self.draws("overall")
        sd, lo, hi = _spread(score, d, interval)
        rank = _ranks(score)
        if d is not None:
            rd = _ranks(d)
            rlo, rhi = _quantiles(rd, interval)
            rlo = pd.array(np.minimum(np.floor(rlo), rank).astype(np.int64), dtype="Int64")
            rhi = pd.array(np.maximum(np.ceil(rhi), rank).astype(np.int64), dtype="Int64")
        else:  # no draws, no rank interval: missing, not a zero-width interval that reads as certain
            rlo = rhi = pd.array([pd.NA] * len(rank), dtype="Int64")
        out = pd.DataFrame(
            {
                "llm": self.llms.values,
                "score": score,
                "sd": sd,
                "lower": lo,
                "upper": hi,
                "rank": rank,
                "rank_lower": rlo,
                "rank_upper": rhi,
            }
        )
        if "expected_accuracy" in self.posterior:
            out["expected_accuracy"] = self.point("expected_accuracy")
        return out.sort_values("rank", kind="stable").reset_index(drop=True)

    def item_parameters(self) -> pd.DataFrame:
        """Table ``item, domain, discrimination, intercept, difficulty, guessing`` (posterior means);
        an item with discrimination 0 (possible at the paper variant's bound) has difficulty -inf, inf or NaN."""
        a = self.point("discrimination")
        d = self.point("intercept")
        c = self.point("guessing") if "guessing" in self.posterior else np.zeros_like(a)
        with np.errstate(divide="ignore", invalid="ignore"):
            difficulty = -d / a
        return pd.DataFrame(
            {
                "item": self.items.values,
                "domain": self.posterior["item_domain"].values.astype(str),
                "discrimination": a,
                "intercept": d,
                "difficulty": difficulty,
                "guessing": c,
            }
        )

    def domain_correlation(self, interval: float = 0.9) -> pd.DataFrame:
        """Long table ``domain_a, domain_b, estimate, lower, upper`` over pairs a < b."""
        est = self.point("domain_corr")
        d = self.draws("domain_corr")
        _, lo, hi = _spread(est, d, interval)
        k = est.shape[0]
        ia, ib = np.triu_indices(k, 1)
        names = self.domains.values
        return pd.DataFrame(
            {"domain_a": names[ia], "domain_b": names[ib], "estimate": est[ia, ib],
             "lower": lo[ia, ib], "upper": hi[ia, ib]}
        )

    def score(self, responses, **kw):
        """Score new LLMs against this fit's fixed items and structure (:func:`mtlirt.evaluate.scoring.score`;
        keyword arguments as there): returns :class:`~mtlirt.evaluate.scoring.Scores`."""
        from ..evaluate.scoring import score

        return score(self, responses, **kw)

    def prob_top(self, k: int = 10) -> pd.Series:
        """Probability that each LLM ranks in the top ``k`` (from draws; 0/1 for a bare point estimate)."""
        rd = self.rank_draws()
        if rd is None:
            rd = _ranks(self.point("overall"))[None]
        return pd.Series((rd <= k).mean(axis=0), index=self.llms, name=f"p_top{k}")

    def __repr__(self) -> str:
        p = self.posterior
        return (
            f"<Estimate {self.method}: {p.sizes['llm']} LLMs, {p.sizes['domain']} domains, "
            f"{p.sizes['item']} items, {self.n_draws} draw(s), uncertainty: {self.uncertainty_source}>"
        )


def _cells(n_responses, llms, domains) -> xr.Dataset:
    n = np.asarray(n_responses, dtype=np.int64)
    return xr.Dataset({"n_responses": (("llm", "domain"), n)},
                      coords={"llm": _names(llms), "domain": _names(domains)})


def _spread(point, draws, interval):
    """``sd, lower, upper`` of the draws (NaN without draws); the interval always holds the point.

    An equal-tailed interval of the draws can miss the point estimate: a bootstrap whose error is
    off-centre (its bias-corrected interval beyond the estimate, as on thin data), or a posterior mean
    of a very skewed posterior. The interval is then extended to reach the point, the conservative
    choice: a score never lies outside its own interval (a bootstrap fit counts these in
    ``info["intervals_extended"]``).
    """
    check_interval(interval)
    if draws is None:
        nan = np.full(np.shape(point), np.nan)
        return nan, nan.copy(), nan.copy()
    lo, hi = _quantiles(draws, interval)
    with np.errstate(invalid="ignore"):
        lo, hi = np.fmin(lo, point), np.fmax(hi, point)
    return draws.std(axis=0, ddof=1), lo, hi


def _first_pc(theta: np.ndarray) -> np.ndarray:
    """Unit-variance first principal component of ``theta`` (``... x N x K``), sign so loadings are positive."""
    t = theta - theta.mean(axis=-2, keepdims=True)
    u, s, vt = np.linalg.svd(t, full_matrices=False)
    pc = u[..., :, 0] * np.sign(vt[..., 0, :].sum(axis=-1))[..., None]
    return pc / pc.std(axis=-1, keepdims=True)


def _dataset(arrays: dict, llms, domains, items, item_domain, fill_from: xr.Dataset | None = None) -> xr.Dataset:
    """Build a posterior-shaped dataset; ``arrays`` have a leading sample axis (1 for a point, B for bootstrap).

    Missing ``overall``, ``domain_corr``, ``guessing`` and ``expected_accuracy``
    are derived from ``theta`` and the items; ``fill_from`` (the point
    estimate) supplies item parameters that bootstrap replicates kept fixed.
    """
    dom_names = _names(domains)
    theta = arrays["theta"]
    lead = theta.shape[:-2]
    if arrays.get("overall") is None:
        if arrays.get("eta") is not None:
            arrays["overall"] = arrays["eta"][..., 0]
        else:
            arrays["overall"] = _first_pc(theta)
    if arrays.get("domain_corr") is None:
        arrays["domain_corr"] = column_corr(np.nan_to_num(theta))
    if arrays.get("guessing") is None and arrays.get("discrimination") is not None:
        arrays["guessing"] = np.zeros_like(arrays["discrimination"])
    if arrays.get("expected_accuracy") is None:
        if arrays.get("discrimination") is not None:
            a, d, c = arrays["discrimination"], arrays["intercept"], arrays["guessing"]
        else:  # replicates that kept the items fixed: use the point's items
            a, d, c = (fill_from[v].values[0, 0] for v in ("discrimination", "intercept", "guessing"))
        flat = theta.reshape((-1,) + theta.shape[-2:])
        ia = np.broadcast_to(a, lead + a.shape[-1:]).reshape(-1, a.shape[-1])
        idd = np.broadcast_to(d, lead + d.shape[-1:]).reshape(-1, d.shape[-1])
        ic = np.broadcast_to(c, lead + c.shape[-1:]).reshape(-1, c.shape[-1])
        ea = np.stack([expected_accuracy(flat[s], ia[s], idd[s], ic[s], item_domain) for s in range(flat.shape[0])])
        arrays["expected_accuracy"] = ea.reshape(lead + (theta.shape[-2],))
    data_vars = {}
    for name, value in arrays.items():
        if value is None:
            continue
        value = np.asarray(value, dtype=np.float64)
        value = value.reshape((1,) + value.shape)  # chain axis
        data_vars[name] = (schema.dims_of(name), value)
    coords = {
        "chain": [0],
        "draw": np.arange(lead[0]),
        "llm": _names(llms),
        "domain": dom_names,
        "item": _names(items),
        "item_domain": ("item", dom_names[np.asarray(item_domain)]),
        "domain_a": dom_names,
        "domain_b": dom_names,
    }
    if any("factor" in schema.VARIABLES[n].dims for n in data_vars):
        r = next(np.asarray(arrays[n]).shape[-1] for n in ("eta", "loadings") if arrays.get(n) is not None)
        coords["factor"] = np.arange(r)
    return xr.Dataset(data_vars, coords=coords)


def _json_default(o):
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")
