"""The batched reader of :meth:`Responses.read <mtlirt.data.responses.Responses.read>`: a long table read
batch by batch (Parquet row groups, CSV chunks) straight into the dense answer matrix, with the input rules of
``Responses.from_frame`` and its order of LLMs, items and domains."""

from __future__ import annotations

from functools import cache

import numpy as np
import pandas as pd

from . import validate
from .tables import Labels, Unsupported, iter_batches, table_columns


class _Names:
    """The distinct names of one label column across batches, each with a provisional code (its first
    sighting); the final order is decided by :meth:`order` once every batch is read."""

    def __init__(self):
        self.code: dict = {}
        self.names: list = []
        self.kind: str | None = None
        self._last = None

    def remap(self, lab) -> tuple[np.ndarray | None, np.ndarray]:
        """Provisional codes of a batch's names (new ones appended in the batch's order; None when they
        are the batch's own codes) and which names are blank."""
        if self.kind is None:
            self.kind = lab.order
        elif self.kind != lab.order:
            raise Unsupported("label types differ between batches")
        last = self._last
        if last is not None and last[0].same_names(lab):
            return last[1], last[2]  # the same dictionary as the batch before (Parquet row groups)
        kept = Labels(lab.names, lab.codes[:0], lab.order)  # the names as read, for that comparison
        code, names = self.code, self.names
        batch = lab.names_array()
        out = np.empty(len(batch), dtype=np.int64)
        for i, name in enumerate(batch):
            c = code.get(name)
            if c is None:
                c = code[name] = len(names)
                names.append(name)
            out[i] = c
        if np.array_equal(out, np.arange(len(out))):
            out = None
        blank = np.asarray(pd.Index(batch, dtype=object).astype(str).str.strip() == "", dtype=bool)
        self._last = (kept, out, blank)
        return out, blank

    def order(self, used: np.ndarray) -> tuple[np.ndarray, pd.Index]:
        """The provisional codes of the used names in their final order, and those names."""
        idx = np.flatnonzero(used)
        names = pd.Index(np.asarray(self.names, dtype=object)[idx], dtype=object)
        if self.kind.startswith("sorted"):  # a CSV category column: pandas sorts its categories
            pos = pd.Index(list(names)).argsort(kind="stable")
            idx, names = idx[pos], names[pos]
        return idx, pd.Index(np.asarray(names.astype(str), dtype=object), dtype=object)


class _Grid:
    """The growing LLM x item matrices of answers and observed cells (provisional codes)."""

    def __init__(self, n: int, j: int):
        self.correct = np.zeros((max(n, 1), max(j, 1)), dtype=np.int8)
        self.observed = np.zeros(self.correct.shape, dtype=bool)
        self.rows = 0

    def fit(self, n: int, j: int) -> None:
        """Room for ``n`` LLMs and ``j`` items (grown by half again at least, old cells kept)."""
        cn, cj = self.correct.shape
        if n <= cn and j <= cj:
            return
        nn, nj = max(n, cn if n <= cn else int(1.5 * cn) + 1), max(j, cj if j <= cj else int(1.5 * cj) + 1)
        for name in ("correct", "observed"):
            old = getattr(self, name)
            new = np.zeros((nn, nj), dtype=old.dtype)
            new[:cn, :cj] = old
            setattr(self, name, new)

    def put(self, llm: np.ndarray, item: np.ndarray, dom: np.ndarray, y: np.ndarray, item_dom: np.ndarray) -> None:
        """Scatter one batch (a duplicate cell keeps the last answer: :meth:`conflict` checks them) and
        record every item's domain in ``item_dom`` (-1: none yet); an item seen in two domains raises
        :class:`Unsupported`."""
        bad = _scatter()(llm, item, dom, np.ascontiguousarray(y, dtype=np.int8), item_dom,
                         self.correct.reshape(-1), self.observed.reshape(-1), self.correct.shape[1])
        if bad >= 0:
            raise Unsupported("an item in two domains")
        self.rows += len(y)

    def conflict(self, llm: np.ndarray, item: np.ndarray, y: np.ndarray) -> bool:
        """Whether a row of a batch (read again) differs from the answer its cell kept."""
        lin = llm.astype(np.int64)
        lin *= self.correct.shape[1]
        lin += item
        return bool(np.any(self.correct.reshape(-1)[lin] != y))


def in_order(m: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """``m[np.ix_(rows, cols)]``, without a pass along an axis whose order is already the identity (a view
    of ``m`` when both are)."""
    if len(rows) != m.shape[0] or (rows != np.arange(len(rows))).any():
        m = m[rows]
    if len(cols) != m.shape[1] or (cols != np.arange(len(cols))).any():
        m = np.take(m, cols, axis=1)
    return m


def _scatter_py(llm, item, dom, y, item_dom, correct, observed, n_items):
    """Every row's answer into the flat matrices (row ``llm * n_items + item``) and its item's domain into
    ``item_dom``; returns the first row whose item already has another domain, or -1."""
    for r in range(len(y)):
        it = item[r]
        cur = item_dom[it]
        if cur < 0:
            item_dom[it] = dom[r]
        elif cur != dom[r]:
            return r
        at = np.int64(llm[r]) * n_items + it
        correct[at] = y[r]
        observed[at] = True
    return -1


@cache
def _scatter():
    """:func:`_scatter_py` compiled by numba (imported on first use)."""
    import numba

    return numba.njit(cache=True, boundscheck=False)(_scatter_py)


def _read_batched(path, *, domain_column, ignore_columns, drop_unassigned) -> tuple[tuple, list[str]]:
    """:meth:`Responses.read` batch by batch (:func:`mtlirt.data.tables.iter_batches`): the labels become
    codes and the answers go straight into the dense matrix, with the rules of :meth:`Responses.from_frame`
    and its order of LLMs, items and domains.  Returns the arguments of :class:`~mtlirt.data.responses.Responses`
    (answers, mask, LLM, item and domain names, every item's domain) and the warnings to give (dropped rows,
    identical duplicates).  Raises :class:`~mtlirt.data.tables.Unsupported` where a rule is broken or the
    table is not one it reads: the caller then reads it as a DataFrame, whose messages name the rows."""
    cols = table_columns(path)
    validate.check_columns(pd.DataFrame(columns=cols), domain_column=domain_column, ignore_columns=ignore_columns)
    names = {"llm": _Names(), "item": _Names(), "domain": _Names()}
    item_dom = np.full(0, -1, dtype=np.int32)
    grid = None
    dropped = 0

    def batches():
        """Every batch's provisional codes of ``llm``, ``item``, ``domain`` and its answers, the rules on
        labels and domains checked (rows without a domain dropped with ``drop_unassigned``)."""
        nonlocal dropped
        for labels, y in iter_batches(path, ("llm", "item", domain_column)):
            if domain_column != "domain":
                labels["domain"] = labels.pop(domain_column)
            codes = {}
            for key in ("domain", "llm", "item"):
                lab = labels[key]
                remap, blank = names[key].remap(lab)
                if lab.missing or blank.any():
                    bad = (lab.codes < 0) | blank[lab.codes]
                    if key == "domain" and drop_unassigned:
                        # the rows without a domain go (blank text too, unless the column is categorical)
                        gone = lab.codes < 0 if lab.order != "appearance" else bad
                        dropped += int(gone.sum())
                        keep = ~gone
                        labels = {c: Labels(v.names, v.codes[keep], v.order, v.missing) for c, v in labels.items()}
                        y, lab, bad = y[keep], labels[key], bad[keep]
                    if bad.any():
                        raise Unsupported(f"empty {key}")
                codes[key] = lab.codes if remap is None else remap[lab.codes]
            if len(y):
                yield codes["llm"], codes["item"], codes["domain"], y

    for llm, item, dom, y in batches():
        n_item = len(names["item"].names)
        if n_item > len(item_dom):
            item_dom = np.concatenate([item_dom, np.full(n_item - len(item_dom), -1, dtype=np.int32)])
        if grid is None:
            grid = _Grid(len(names["llm"].names), n_item)
        grid.fit(len(names["llm"].names), n_item)
        grid.put(llm, item, dom, y, item_dom)
    if grid is None:
        raise Unsupported("no rows")
    nl, ni = len(names["llm"].names), len(names["item"].names)
    obs = grid.observed[:nl, :ni]
    rows, llm_names = names["llm"].order(obs.any(axis=1))
    used_items = obs.any(axis=0)
    cols, item_names = names["item"].order(used_items)
    used_doms = np.zeros(len(names["domain"].names), dtype=bool)
    used_doms[item_dom[:ni][used_items]] = True
    doms, dom_names = names["domain"].order(used_doms)
    dom_code = np.full(len(used_doms), -1, dtype=np.int64)
    dom_code[doms] = np.arange(len(doms))
    # as from_frame: domains sorted by name; items grouped by domain, in their order within a domain
    dom_order = np.argsort(np.asarray(dom_names, dtype=str), kind="stable")
    dom_rank = np.empty_like(dom_order)
    dom_rank[dom_order] = np.arange(len(dom_order))
    item_new_dom = dom_rank[dom_code[item_dom[cols]]]
    item_order = np.argsort(item_new_dom, kind="stable")
    correct = np.ascontiguousarray(in_order(grid.correct, rows, cols[item_order]))
    observed = np.ascontiguousarray(in_order(grid.observed, rows, cols[item_order]))
    n_dup = grid.rows - int(np.count_nonzero(observed))
    if n_dup:  # duplicates: a second pass finds whether any cell was given two answers
        dropped = 0
        for llm, item, _, y in batches():
            if grid.conflict(llm, item, y):
                raise Unsupported("conflicting duplicates")
    del grid, obs
    notes = [f"dropped {dropped:,} rows without a domain"] if dropped else []
    if n_dup:
        notes.append(f"{n_dup:,} identical duplicate rows (same llm, item and answer): kept one of each")
    parts = (correct, observed, llm_names, item_names[item_order], dom_names[dom_order], item_new_dom[item_order])
    return parts, notes
