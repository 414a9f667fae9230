"""The leaderboard's item-level results: :class:`Responses`."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import InputError
from . import validate
from .batch_reader import _read_batched, in_order
from .cells import held_out_cells
from .summary import Summary, summarize
from .tables import Unsupported, check_file, read_table
from .validate import DataWarning


def _categorical(s: pd.Series) -> tuple[np.ndarray, pd.Index]:
    """Integer codes and names of a label column, unused categories dropped."""
    if isinstance(s.dtype, pd.CategoricalDtype):
        codes = s.cat.codes.to_numpy()
        names = pd.Index(s.cat.categories.astype(str), dtype=object)
        used = np.zeros(len(names), dtype=bool)
        used[codes[codes >= 0] if s.hasnans else codes] = True  # O(n), no sort
        if not used.all():
            remap = np.full(len(names), -1, dtype=np.int32)
            remap[used] = np.arange(int(used.sum()), dtype=np.int32)
            codes = np.where(codes >= 0, remap[codes], -1)
            names = names[used]
        return codes, names
    codes, uniques = pd.factorize(s.astype(str), sort=False)
    return codes, pd.Index(np.asarray(uniques, dtype=object), dtype=object)


class Responses:
    """Item-level results of ``N`` LLMs on ``J`` items grouped in ``K`` domains.

    Build one with :meth:`read` (a file), :meth:`from_frame` (a long
    DataFrame) or :meth:`from_wide` (an LLM x item matrix and an item-to-domain
    map); the constructor takes already-validated arrays.

    Attributes
    ----------
    llms, items, domains : pandas.Index
        Names.  LLMs keep the order of the input; domains are sorted by name;
        items are grouped by domain (each domain a contiguous block of columns,
        in the order of the input within a domain).
    item_domain : numpy.ndarray
        ``int32`` domain code of each item (non-decreasing).
    correct : numpy.ndarray
        ``int8`` ``N x J`` matrix of 0/1 answers, 0 where unobserved.
    observed : numpy.ndarray
        ``bool`` ``N x J`` observation mask.
    domain_slices : list of slice
        The columns of each domain.
    """

    def __init__(self, correct, observed, llms, items, domains, item_domain):
        self.correct = np.ascontiguousarray(correct, dtype=np.int8)
        self.observed = np.ascontiguousarray(observed, dtype=bool)
        self.llms = pd.Index(llms, dtype=object, name="llm")
        self.items = pd.Index(items, dtype=object, name="item")
        self.domains = pd.Index(domains, dtype=object, name="domain")
        self.item_domain = np.asarray(item_domain, dtype=np.int32)
        if self.correct.shape != (len(self.llms), len(self.items)):
            raise ValueError("correct must be N x J")
        if self.observed.shape != self.correct.shape:
            raise ValueError("observed must have the shape of correct")
        if len(self.item_domain) != len(self.items):
            raise ValueError("item_domain must have one entry per item")
        if len(self.item_domain) and np.any(np.diff(self.item_domain) < 0):
            raise ValueError("items must be grouped by domain (item_domain non-decreasing)")
        bounds = np.searchsorted(self.item_domain, np.arange(len(self.domains) + 1))
        self.domain_slices = [slice(int(bounds[k]), int(bounds[k + 1])) for k in range(len(self.domains))]
        self._complete: bool | None = None

    # ------------------------------------------------------------------ build
    @classmethod
    def read(
        cls,
        path: str | Path,
        *,
        domain_column: str = "domain",
        ignore_columns=(),
        drop_unassigned: bool = False,
    ) -> Responses:
        """Read a long table (CSV, gzip CSV or Parquet) and validate it.

        The table is read in batches of rows (Parquet row groups, CSV chunks)
        straight into the answer matrix, without a DataFrame of the whole
        table; where a rule is broken it is read again as a DataFrame
        (:meth:`from_frame`), whose message names the rows at fault.

        Parameters
        ----------
        path
            The file.
        domain_column
            Column holding the domain (e.g. ``subject``); see
            :func:`mtlirt.data.validate.check_columns`.
        ignore_columns
            Extra columns to drop instead of rejecting the table.
        drop_unassigned
            Drop rows without a domain (with a warning) instead of rejecting them.
        """
        path = Path(path)
        check_file(path)
        try:
            parts, notes = _read_batched(path, domain_column=domain_column, ignore_columns=ignore_columns,
                                         drop_unassigned=drop_unassigned)
            out = cls(*parts)
        except (Unsupported, ValueError, TypeError, KeyError, OSError):  # (InputError is a ValueError)
            out = None
        if out is not None:
            for note in notes:
                warnings.warn(note, DataWarning, stacklevel=2)
            out.warn_degenerate()
            return out
        # a broken rule, or a table the batched reader does not read: the DataFrame path names the rows
        return cls.from_frame(
            read_table(path),
            domain_column=domain_column,
            ignore_columns=ignore_columns,
            drop_unassigned=drop_unassigned,
        )

    @classmethod
    def from_frame(
        cls,
        df: pd.DataFrame,
        *,
        domain_column: str = "domain",
        ignore_columns=(),
        drop_unassigned: bool = False,
        domains=None,
    ) -> Responses:
        """Validate a long DataFrame ``llm, item, domain, correct`` and build the data.

        Parameters
        ----------
        df
            One row per observed response.
        domain_column
            Column holding the domain, as in :meth:`read`.
        ignore_columns
            Extra columns to drop, as in :meth:`read`.
        drop_unassigned
            Drop rows without a domain, as in :meth:`read`.
        domains
            Optional list of the domains that must be present; a listed domain
            with no response is an error (an empty domain).

        Raises
        ------
        InputError
            On any broken input rule, naming the rows or values at fault.
        """
        df = validate.check_columns(df, domain_column=domain_column, ignore_columns=ignore_columns)
        if drop_unassigned:
            dom = df["domain"]
            blank = dom.isna().to_numpy().copy()
            if not isinstance(dom.dtype, pd.CategoricalDtype):
                blank |= (dom.astype(str).str.strip() == "").to_numpy()
            if blank.any():
                warnings.warn(
                    f"dropped {int(blank.sum()):,} rows without a domain", DataWarning, stacklevel=2
                )
                df = df.loc[~blank]
        validate.check_not_empty(df)
        validate.check_labels(df)
        y = validate.to_binary(df["correct"])

        # codes stay in the smallest integer type pandas gave (int8/int16 for
        # dictionary-encoded Parquet): at 6e7 rows every byte per row counts
        llm_codes, llm_names = _categorical(df["llm"])
        item_codes, item_names = _categorical(df["item"])
        dom_codes, dom_names = _categorical(df["domain"])

        item_dom = validate.check_one_domain_per_item(item_codes, dom_codes, item_names, dom_names)
        if domains is not None:
            empty = [d for d in domains if d not in set(dom_names)]
            if empty:
                raise InputError(f"empty domain{'s' if len(empty) > 1 else ''} with no responses: "
                                 f"{', '.join(map(str, empty))}")

        # domains sorted by name; items grouped by domain, input order within
        dom_order = np.argsort(np.asarray(dom_names, dtype=str), kind="stable")
        dom_rank = np.empty_like(dom_order)
        dom_rank[dom_order] = np.arange(len(dom_order))
        item_new_dom = dom_rank[item_dom]
        item_order = np.argsort(item_new_dom, kind="stable")
        item_pos = np.empty(len(item_order), dtype=np.int32)
        item_pos[item_order] = np.arange(len(item_order), dtype=np.int32)

        n, j = len(llm_names), len(item_names)
        lin = llm_codes.astype(np.int64)  # flat cell index, built in place
        lin *= j
        lin += item_pos[item_codes]
        correct, observed, n_dup = validate.check_duplicates(
            lin, y, n * j, llm_codes, item_codes, llm_names, item_names
        )
        del lin
        if n_dup:
            warnings.warn(
                f"{n_dup:,} identical duplicate rows (same llm, item and answer): kept one of each",
                DataWarning,
                stacklevel=2,
            )
        out = cls(
            correct.reshape(n, j),
            observed.reshape(n, j),
            llm_names,
            item_names[item_order],
            dom_names[dom_order],
            item_new_dom[item_order],
        )
        validate.constant_domains(out.correct, out.observed, out.domain_slices, out.domains)  # all: an error
        out.warn_degenerate()
        return out

    @classmethod
    def from_wide(cls, matrix: pd.DataFrame, item_domain, *, domains=None) -> Responses:
        """Build from a wide LLM x item matrix (rows LLMs, columns items; NaN = missing).

        Parameters
        ----------
        matrix
            DataFrame indexed by LLM name, one column per item, cells 0/1 or NaN.
        item_domain
            Mapping or Series item -> domain.
        domains
            Optional list of domains that must each have responses.
        """
        item_domain = pd.Series(item_domain)
        unmapped = [c for c in matrix.columns if c not in item_domain.index]
        if unmapped:
            raise InputError(
                f"item{'s' if len(unmapped) > 1 else ''} without a domain: {validate._values(unmapped)}"
            )
        long = matrix.rename_axis(index="llm", columns="item").stack(future_stack=True)
        long = long[long.notna()].rename("correct").reset_index()
        long["domain"] = long["item"].map(item_domain)
        return cls.from_frame(long[["llm", "item", "domain", "correct"]], domains=domains)

    @classmethod
    def from_arrays(cls, correct, observed=None, domain_slices=None, *, llms=None, items=None,
                    domains=None) -> Responses:
        """Build from an LLM x item answer matrix whose domains are contiguous column blocks.

        Parameters
        ----------
        correct
            ``N x J`` answers, 0 or 1 where observed (anything, e.g. NaN, where not).
        observed
            ``N x J`` boolean mask; ``None``: every cell observed.
        domain_slices
            The columns of each domain, in order, covering all ``J`` (``None``: one domain).
        llms, items, domains
            Names; ``llm0``, ``item0``, ``domain0``... when not given.

        Raises
        ------
        InputError
            Shapes that do not match, answers other than 0/1, domains not contiguous
            and non-empty, names not unique.
        """
        correct = np.asarray(correct)
        if correct.ndim != 2:
            raise InputError(f"correct must be a 2-D LLM x item matrix, got shape {correct.shape}")
        n, j = correct.shape
        obs = np.ones((n, j), dtype=bool) if observed is None else np.asarray(observed, dtype=bool)
        if obs.shape != correct.shape:
            raise InputError(f"observed has shape {obs.shape}, correct has {correct.shape}")
        seen = correct[obs]
        if not np.isin(seen, (0, 1)).all():
            raise InputError("correct must hold only 0 and 1 where observed")
        slices = [slice(0, j)] if domain_slices is None else list(domain_slices)
        pos = 0
        for k, s in enumerate(slices):
            if s.start != pos or s.stop <= s.start:
                raise InputError(f"domain_slices[{k}] = {s} is not contiguous and non-empty after column {pos}")
            pos = s.stop
        if pos != j:
            raise InputError(f"domain_slices cover {pos} columns, correct has {j}")
        names = {}
        for what, given, size in (("llms", llms, n), ("items", items, j), ("domains", domains, len(slices))):
            got = [f"{what[:-1]}{i}" for i in range(size)] if given is None else [str(x) for x in given]
            if len(got) != size:
                raise InputError(f"{what} has {len(got)} names, expected {size}")
            if len(set(got)) != size:
                raise InputError(f"{what} names are not unique")
            names[what] = got
        y = np.zeros((n, j), dtype=np.int8)
        y[obs] = seen
        item_domain = np.repeat(np.arange(len(slices), dtype=np.int32), [s.stop - s.start for s in slices])
        return cls(y, obs, names["llms"], names["items"], names["domains"], item_domain)

    # ------------------------------------------------------------ properties
    @property
    def n_llms(self) -> int:
        """Number of LLMs."""
        return len(self.llms)

    @property
    def n_items(self) -> int:
        """Number of items."""
        return len(self.items)

    @property
    def n_domains(self) -> int:
        """Number of domains."""
        return len(self.domains)

    @property
    def shape(self) -> tuple[int, int]:
        """``(N, J)``."""
        return self.correct.shape

    @property
    def n_responses(self) -> int:
        """Number of observed responses."""
        return int(np.count_nonzero(self.observed))

    @property
    def complete(self) -> bool:
        """True when every LLM answered every item."""
        if self._complete is None:
            self._complete = bool(self.observed.all())
        return self._complete

    @property
    def mask(self) -> np.ndarray | None:
        """The observation mask, or ``None`` when the matrix is complete (the estimators' fast path)."""
        return None if self.complete else self.observed

    @property
    def domain_sizes(self) -> pd.Series:
        """Number of items per domain."""
        return pd.Series(np.bincount(self.item_domain, minlength=self.n_domains), index=self.domains, name="items")

    @property
    def item_domain_names(self) -> pd.Index:
        """The domain name of every item."""
        return pd.Index(self.domains[self.item_domain], dtype=object, name="domain")

    @property
    def nbytes(self) -> int:
        """Bytes held by the answer matrix and the mask."""
        return self.correct.nbytes + self.observed.nbytes

    def fingerprint(self) -> str:
        """A digest of the content, the same whatever the file's format, row order or column order.

        SHA-256 (first 16 hex digits) of the sorted LLM and item names, each
        item's domain and the observed answers in that order: two tables have
        one fingerprint exactly when they hold the same responses.  A fit
        records it (``fit.json``'s ``data``) so that ``mtlirt report --data``
        and ``mtlirt compare`` can tell fits of different tables apart.
        """
        import hashlib
        import json

        lo = np.argsort(np.asarray(self.llms, dtype=str), kind="stable")
        it = np.argsort(np.asarray(self.items, dtype=str), kind="stable")
        obs, y = in_order(self.observed, lo, it), in_order(self.correct, lo, it)
        y = np.bitwise_and(y.view(np.uint8), obs.view(np.uint8))  # the answers where observed, 0/1
        h = hashlib.sha256(b"mtlirt-responses-1\0")
        names = [[str(x) for x in self.llms[lo]], [str(x) for x in self.items[it]],
                 [str(x) for x in self.domains[self.item_domain[it]]]]
        h.update(json.dumps(names, ensure_ascii=False).encode("utf-8"))
        h.update(np.packbits(obs).tobytes())
        h.update(np.packbits(y).tobytes())
        return h.hexdigest()[:16]

    def __repr__(self) -> str:
        return (
            f"<Responses: {self.n_llms:,} LLMs x {self.n_items:,} items in {self.n_domains} domains, "
            f"{self.n_responses:,} responses>"
        )

    # -------------------------------------------------------------- views
    def to_frame(self) -> pd.DataFrame:
        """The long table ``llm, item, domain, correct`` (observed cells only, categorical labels)."""
        rows, cols = np.nonzero(self.observed)
        return pd.DataFrame(
            {
                "llm": pd.Categorical.from_codes(rows.astype(np.int32), categories=self.llms),
                "item": pd.Categorical.from_codes(cols.astype(np.int32), categories=self.items),
                "domain": pd.Categorical.from_codes(self.item_domain[cols], categories=self.domains),
                "correct": self.correct[rows, cols],
            }
        )

    def to_xarray(self):
        """An ``xarray.DataArray`` ``correct`` with dims ``llm``, ``item`` (NaN =
        unobserved) and the item's ``domain`` as a coordinate."""
        import xarray as xr

        values = self.correct.astype(np.float32)
        values[~self.observed] = np.nan
        return xr.DataArray(
            values,
            dims=("llm", "item"),
            coords={
                "llm": np.asarray(self.llms, dtype=str),
                "item": np.asarray(self.items, dtype=str),
                "domain": ("item", np.asarray(self.item_domain_names, dtype=str)),
            },
            name="correct",
        )

    def domain_block(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The answers and mask of domain ``k`` (views, no copy)."""
        s = self.domain_slices[k]
        return self.correct[:, s], self.observed[:, s]

    def with_answers(self, correct, observed=None) -> Responses:
        """The same LLMs, items and domains with other answers (a bootstrap replicate): ``N x J`` ``correct``,
        0 where unobserved, and its mask (``None``: every cell observed), taken as they are (not validated)."""
        if observed is None:
            observed = self.observed if self.complete else np.ones(self.shape, dtype=bool)
        return Responses(correct, observed, self.llms, self.items, self.domains, self.item_domain)

    # ------------------------------------------------------------ summaries
    def counts(self) -> tuple[np.ndarray, np.ndarray]:
        """Per-(LLM, domain) numbers of correct answers and of responses (``N x K`` each)."""
        n, k = self.n_llms, self.n_domains
        right = np.empty((n, k), dtype=np.int64)
        seen = np.empty((n, k), dtype=np.int64)
        for d, s in enumerate(self.domain_slices):
            right[:, d] = self.correct[:, s].sum(axis=1, dtype=np.int64)
            seen[:, d] = self.observed[:, s].sum(axis=1, dtype=np.int64)
        return right, seen

    def accuracy(self) -> pd.DataFrame:
        """Proportion correct per LLM (rows) and domain (columns); NaN where an LLM has no response in a domain."""
        right, seen = self.counts()
        with np.errstate(invalid="ignore", divide="ignore"):
            acc = right / seen
        return pd.DataFrame(acc, index=self.llms, columns=self.domains)

    def item_stats(self) -> pd.DataFrame:
        """Per item: domain, number of responses, proportion correct."""
        seen = self.observed.sum(axis=0, dtype=np.int64)
        right = self.correct.sum(axis=0, dtype=np.int64)
        with np.errstate(invalid="ignore", divide="ignore"):
            acc = right / seen
        return pd.DataFrame(
            {"domain": self.item_domain_names, "responses": seen, "accuracy": acc}, index=self.items
        )

    def degenerate(self) -> tuple[pd.DataFrame, list[str], list[str]]:
        """Constant items (all responses equal) and LLMs with every / no answer correct."""
        stats = self.item_stats()
        constant = stats[(stats["responses"] > 0) & ((stats["accuracy"] == 0) | (stats["accuracy"] == 1))]
        seen = self.observed.sum(axis=1, dtype=np.int64)
        right = self.correct.sum(axis=1, dtype=np.int64)
        perfect = [str(x) for x in self.llms[(seen > 0) & (right == seen)]]
        zero = [str(x) for x in self.llms[(seen > 0) & (right == 0)]]
        return constant, perfect, zero

    def warn_degenerate(self) -> None:
        """Warn about constant items and all-correct / all-wrong LLMs.

        Treatment (documented): they stay in the data.  Constant items carry
        no information on who is better; the estimators' priors and ridges
        keep their parameters and the LLMs' scores finite.
        """
        constant, perfect, zero = self.degenerate()
        parts = []
        if len(constant):
            parts.append(f"{len(constant):,} constant items (every response the same)")
        if perfect:
            parts.append(f"{len(perfect)} LLMs with every answer correct")
        if zero:
            parts.append(f"{len(zero)} LLMs with no answer correct")
        if parts:
            warnings.warn(
                "; ".join(parts) + ": kept; the estimators' priors keep their scores and item parameters finite",
                DataWarning,
                stacklevel=3,
            )

    def summary(self) -> Summary:
        """Counts per domain, observed share, accuracy per LLM and domain, degenerate items and LLMs."""
        return summarize(self)

    # ------------------------------------------------------------ subsets
    def holdout(self, share: float, seed: int = 0) -> tuple[Responses, np.ndarray]:
        """Hold out a random ``share`` of the observed responses.

        Returns the training data (the held-out cells unobserved) and the
        boolean ``N x J`` mask of the held-out cells.  Seeded.
        """
        if not 0 < share < 1:
            raise InputError(f"the held-out share must be in (0, 1), got {share!r}")
        held = np.zeros(self.shape, dtype=bool)
        held[held_out_cells(self.observed, self.shape, np.random.default_rng(seed), share=share)] = True
        train = Responses(
            np.where(held, 0, self.correct).astype(np.int8),
            self.observed & ~held,
            self.llms,
            self.items,
            self.domains,
            self.item_domain,
        )
        return train, held

    def subset(self, llms=None, items=None) -> Responses:
        """The data restricted to some LLMs and/or items (names or boolean masks); empty domains are dropped."""
        ri = np.arange(self.n_llms) if llms is None else _select(self.llms, llms)
        ci = np.arange(self.n_items) if items is None else _select(self.items, items)
        ci = np.sort(ci)
        dom = self.item_domain[ci]
        used = np.unique(dom)
        remap = np.full(self.n_domains, -1, dtype=np.int32)
        remap[used] = np.arange(len(used))
        return Responses(
            self.correct[np.ix_(ri, ci)],
            self.observed[np.ix_(ri, ci)],
            self.llms[ri],
            self.items[ci],
            self.domains[used],
            remap[dom],
        )


def _select(index: pd.Index, which) -> np.ndarray:
    which = np.asarray(which)
    if which.dtype == bool:
        return np.flatnonzero(which)
    pos = index.get_indexer(which)
    if (pos < 0).any():
        missing = [str(w) for w, p in zip(which, pos) if p < 0]
        raise InputError(f"unknown names: {validate._values(missing)}")
    return pos


def as_responses(data, *, domain_column: str = "domain", ignore_columns=(), drop_unassigned: bool = False,
                 what: str = "responses") -> Responses:
    """The data of an entry point as :class:`Responses`, through the one reader and validator.

    ``data`` is a :class:`Responses` (returned as it is), a long DataFrame ``llm, item, domain, correct``
    (:meth:`Responses.from_frame`) or the path of a table (:meth:`Responses.read`); the options are theirs.
    Anything else is an :class:`~mtlirt.errors.InputError` naming what was given (``what``: the argument).
    """
    if isinstance(data, Responses):
        return data
    options = dict(domain_column=domain_column, ignore_columns=ignore_columns, drop_unassigned=drop_unassigned)
    if isinstance(data, pd.DataFrame):
        return Responses.from_frame(data, **options)
    if isinstance(data, (str, os.PathLike)):
        return Responses.read(data, **options)
    raise InputError(f"{what}: expected a Responses, a long DataFrame (llm, item, domain, correct) or the path of "
                     f"a table (CSV, gzip CSV or Parquet); got {type(data).__name__}")
