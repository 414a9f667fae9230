"""``Simulation``: a simulated leaderboard and the truth that generated it, its tables (names, the long
response table, the truth as frames) and its writers (the response table, the truth folder)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mtlirt.errors import InputError

from .outputs import FolderKind, file_output, folder_output
from .responses import Responses
from .tables import write_csv

__all__ = ["Simulation", "TRUTH_FOLDER"]

#: The folder of :meth:`Simulation.write_truth`, recognised by its ``truth.json``.
TRUTH_FOLDER = FolderKind("truth folder", "truth.json",
                          ("domain_scores.csv", "overall.csv", "items.csv", "domains.csv", "llms.csv", "truth.json"))


@dataclass(eq=False)
class Simulation:
    """A simulated leaderboard and the truth that generated it.

    Attributes
    ----------
    responses : pandas.DataFrame
        Long table, one row per observed response, ordered by LLM then item:
        ``llm``, ``item``, ``domain`` (pandas ``Categorical``) and ``correct``
        (``int8``).
    correct : numpy.ndarray
        Dense ``int8`` LLM x item matrix (0 where unobserved); columns in the
        order of ``items`` (each domain a contiguous block).
    observed : numpy.ndarray
        Boolean LLM x item mask of observed responses.
    domain_scores : pandas.DataFrame
        True domain traits, N x K, index LLM names, columns domain names.
    overall : pandas.DataFrame
        True overall traits ``eta``, N x r; columns ``score``, ``score_2``, ...
    loadings : pandas.DataFrame
        K x r loadings ``w_k`` (rows of outlier domains are 0); columns
        ``score``, ``score_2``, ...
    outlier_domains : list of str
        Names of the outlier domains.
    items : pandas.DataFrame
        ``item, domain, discrimination, intercept, difficulty, guessing,
        upper`` (``upper``: upper asymptote, 1 unless the item is flawed).
    domains : pandas.DataFrame
        Per domain: ``domain, n_items, difficulty_shift, outlier``.
    settings : dict
        The arguments of :func:`simulate` (JSON-serialisable), with the
        resolved ``domain_sizes``, the ``scenario``'s levels and the ``seed``.
    llms : pandas.DataFrame
        Per LLM: ``llm``, ``chance_cluster`` (in the near-chance lump),
        ``specialist_domains`` (``;``-joined domains with a specialist
        deviation, empty if none) and ``domains_run`` (domains with at least
        one observed response).
    """

    responses: pd.DataFrame
    correct: np.ndarray
    observed: np.ndarray
    domain_scores: pd.DataFrame
    overall: pd.DataFrame
    loadings: pd.DataFrame
    outlier_domains: list[str]
    items: pd.DataFrame
    domains: pd.DataFrame
    settings: dict[str, Any] = field(default_factory=dict)
    llms: pd.DataFrame | None = None

    # -- conveniences -----------------------------------------------------

    @property
    def llm_names(self) -> list[str]:
        """LLM names in row order."""
        return list(self.domain_scores.index)

    @property
    def domain_names(self) -> list[str]:
        """Domain names in column order."""
        return list(self.domain_scores.columns)

    @property
    def rank(self) -> int:
        """Number of overall traits."""
        return int(self.overall.shape[1])

    @property
    def seed(self) -> int:
        """The seed that reproduces this simulation."""
        return int(self.settings["seed"])

    def to_responses(self) -> Responses:
        """The simulated answers as :class:`~mtlirt.data.responses.Responses` (its ``from_arrays``), in the
        simulation's column order and with its names: what the estimators take."""
        stops = np.cumsum(self.domains["n_items"].to_numpy())
        slices = [slice(int(a), int(b)) for a, b in zip(np.r_[0, stops[:-1]], stops)]
        return Responses.from_arrays(self.correct, self.observed, slices, llms=self.llm_names,
                                     items=self.items["item"], domains=self.domain_names)

    def __repr__(self) -> str:
        n, k = self.domain_scores.shape
        return (
            f"Simulation({n} LLMs x {self.items.shape[0]} items in {k} domains, "
            f"rank {self.rank}, {len(self.responses)} responses, seed {self.seed})"
        )

    # -- writing ------------------------------------------------------------

    def write(self, path: str | Path, *, overwrite: bool = True) -> Path:
        """Write the long response table; the format follows the extension.

        Parameters
        ----------
        path : str or pathlib.Path
            ``*.parquet`` / ``*.pq`` (pyarrow; ``llm``, ``item``, ``domain``
            dictionary-encoded, ``correct`` int8, zstd-compressed; no
            statistics for ``item``),
            ``*.csv`` or ``*.csv.gz``.  Written to a temporary sibling and
            renamed into place (:mod:`mtlirt.data.outputs`).
        overwrite : bool
            Replace an existing file (the CLI's ``--force``); a folder is
            never replaced.

        Returns
        -------
        pathlib.Path
            The path written.

        Raises
        ------
        InputError
            An extension other than the above.
        """
        import pyarrow as pa

        path = Path(path)
        name = path.name.lower()
        if name.endswith((".parquet", ".pq")):
            kind = "parquet"
        elif name.endswith(".csv.gz"):
            kind = "csv.gz"
        elif name.endswith(".csv"):
            kind = "csv"
        else:
            raise InputError(
                f"cannot tell the format of {str(path)!r}: use .parquet, .csv or .csv.gz"
            )

        with file_output(path, what="table", overwrite=overwrite) as tmp:
            if kind == "parquet":
                import pyarrow.parquet as pq

                # min/max statistics of the ~14k item names cost half the write
                # time and help no reader; keep them for the sorted llm column
                pq.write_table(
                    pa.Table.from_pandas(self.responses, preserve_index=False),
                    tmp,
                    compression="zstd",
                    write_statistics=["llm", "domain", "correct"],
                )
            else:
                write_csv(self.responses, tmp, gzip=kind == "csv.gz")
        return path

    def write_truth(self, directory: str | Path, *, overwrite: bool = True) -> Path:
        """Write the generating truth to a folder.

        Files: ``domain_scores.csv`` (long: ``llm, domain, score``),
        ``overall.csv`` (``llm, score`` and ``score_2``, ... when rank > 1),
        ``items.csv`` (``item, domain, discrimination, intercept, difficulty,
        guessing, upper``), ``domains.csv`` (``domain, n_items,
        difficulty_shift, outlier``), ``llms.csv`` (``llm, chance_cluster,
        specialist_domains, domains_run``) and ``truth.json`` (rank, loadings
        as ``{domain: [...]}``, outlier domains, settings, seed). Scores are
        on the population scale of :func:`simulate` (every domain score and
        overall score has population mean 0 and variance 1).

        Parameters
        ----------
        directory : str or pathlib.Path
            A new folder, or a truth folder written earlier (with
            ``truth.json``), replaced when ``overwrite`` (the CLI's
            ``--force``); written atomically (:mod:`mtlirt.data.outputs`).
        overwrite : bool
            Replace an existing truth folder.

        Returns
        -------
        pathlib.Path
            The folder.
        """
        directory = Path(directory)
        with folder_output(directory, TRUTH_FOLDER, overwrite=overwrite) as tmp:
            self._write_truth_files(tmp)
        return directory

    def _write_truth_files(self, directory: Path) -> None:
        """The files of :meth:`write_truth`, into ``directory``."""
        ds = self.domain_scores
        long = pd.DataFrame(
            {
                "llm": np.repeat(ds.index.to_numpy(dtype=object), ds.shape[1]),
                "domain": np.tile(ds.columns.to_numpy(dtype=object), ds.shape[0]),
                "score": ds.to_numpy().ravel(),
            }
        )
        write_csv(long, directory / "domain_scores.csv")
        overall = self.overall.copy()
        overall.insert(0, "llm", overall.index.to_numpy(dtype=object))
        write_csv(overall, directory / "overall.csv")
        write_csv(self.items, directory / "items.csv")
        write_csv(self.domains, directory / "domains.csv")
        if self.llms is not None:
            write_csv(self.llms, directory / "llms.csv")
        truth = {
            "rank": self.rank,
            "loadings": {
                str(d): [float(x) for x in row]
                for d, row in zip(self.loadings.index, self.loadings.to_numpy())
            },
            "outlier_domains": list(self.outlier_domains),
            "settings": self.settings,
            "seed": self.seed,
        }
        with open(directory / "truth.json", "w", encoding="utf-8") as fh:
            json.dump(truth, fh, indent=2)
            fh.write("\n")


def _names(n_llms, domain_names, sizes) -> tuple[list[str], list[str]]:
    """LLM names ``llm0001, ...`` and item names ``<domain>_0001, ...``."""
    n_items = int(sizes.sum())
    llm_width = max(4, len(str(n_llms)))
    llm_names = [f"llm{i + 1:0{llm_width}d}" for i in range(n_llms)]
    item_width = max(4, len(str(int(sizes.max()))))
    item_names = [
        f"{d}_{j + 1:0{item_width}d}" for d, size in zip(domain_names, sizes) for j in range(size)
    ]
    if len(set(item_names)) != n_items:  # a domain name ending like "_0001" could clash
        item_names = [
            f"{d}/{j + 1:0{item_width}d}" for d, size in zip(domain_names, sizes) for j in range(size)
        ]
    return llm_names, item_names


def _truth_frames(llm_names, item_names, domain_names, item_domain, theta, eta, loadings, sizes, shift, outlier,
                  *, discrimination, intercept, difficulty, guess, upper):
    """The true domain scores, overall traits, loadings, items and domains as tables."""
    rank = eta.shape[1]
    factor_names = ["score"] + [f"score_{m + 1}" for m in range(1, rank)]
    domain_scores = pd.DataFrame(
        theta,
        index=pd.Index(llm_names, name="llm"),
        columns=pd.Index(domain_names, name="domain"),
    )
    overall = pd.DataFrame(eta, index=pd.Index(llm_names, name="llm"), columns=factor_names)
    loadings_df = pd.DataFrame(
        loadings, index=pd.Index(domain_names, name="domain"), columns=factor_names
    )
    items = pd.DataFrame(
        {
            "item": item_names,
            "domain": np.asarray(domain_names, dtype=object)[item_domain],
            "discrimination": discrimination,
            "intercept": intercept,
            "difficulty": difficulty,
            "guessing": guess,
            "upper": upper,
        }
    )
    domains = pd.DataFrame(
        {
            "domain": domain_names,
            "n_items": sizes,
            "difficulty_shift": shift,
            "outlier": outlier,
        }
    )
    return domain_scores, overall, loadings_df, items, domains


def _llm_table(llm_names, in_cluster, deviation, domain_names, observed, starts) -> pd.DataFrame:
    """``Simulation.llms``: per LLM, chance-cluster membership, specialist domains and domains run."""
    return pd.DataFrame(
        {
            "llm": llm_names,
            "chance_cluster": in_cluster,
            "specialist_domains": [
                ";".join(np.asarray(domain_names, dtype=object)[np.flatnonzero(row)]) for row in deviation != 0
            ],
            "domains_run": _domains_run(observed, starts),
        }
    )


def _domains_run(observed: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Number of domains with at least one observed response, per LLM."""
    return np.add.reduceat(observed, starts[:-1], axis=1).astype(bool).sum(axis=1)


def _small_int_dtype(n: int) -> type:
    for dt in (np.int8, np.int16, np.int32):
        if n <= np.iinfo(dt).max:
            return dt
    return np.int64


def _long_table(
    correct: np.ndarray,
    observed: np.ndarray,
    has_missing: bool,
    llm_names: list[str],
    item_names: list[str],
    domain_names: list[str],
    item_domain: np.ndarray,
) -> pd.DataFrame:
    """Long table of the observed cells in LLM-major order, with categorical codes."""
    n_llms, n_items = correct.shape
    llm_dt = _small_int_dtype(n_llms)
    item_dt = _small_int_dtype(n_items)
    dom_dt = _small_int_dtype(len(domain_names))
    item_domain_codes = item_domain.astype(dom_dt)
    if has_missing:
        flat = observed.reshape(-1)
        per_llm = observed.sum(axis=1)
        llm_codes = np.repeat(np.arange(n_llms, dtype=llm_dt), per_llm)
        item_codes = np.tile(np.arange(n_items, dtype=item_dt), n_llms)[flat]
        values = correct.reshape(-1)[flat]
    else:
        llm_codes = np.repeat(np.arange(n_llms, dtype=llm_dt), n_items)
        item_codes = np.tile(np.arange(n_items, dtype=item_dt), n_llms)
        values = correct.reshape(-1).copy()
    domain_codes = item_domain_codes[item_codes]

    def cat(codes: np.ndarray, names: list[str]) -> pd.Categorical:
        dtype = pd.CategoricalDtype(pd.Index(names), ordered=False)
        return pd.Categorical.from_codes(codes, dtype=dtype, validate=False)

    return pd.DataFrame(
        {
            "llm": cat(llm_codes, llm_names),
            "item": cat(item_codes, item_names),
            "domain": cat(domain_codes, domain_names),
            "correct": values,
        },
        copy=False,
    )
