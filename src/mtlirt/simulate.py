"""Leaderboard simulator with known truth (METHOD.md §2-3, §6).

The simulator draws overall traits, domain traits that lie near a shared
``rank``-dimensional subspace (with a similarity gap ``h`` and optional outlier
domains), 2PL items with an optional fixed guessing floor and per-domain
difficulty shifts, and binary responses, missing at random with a given share.

Generative model
----------------
For ``N`` LLMs, ``K`` domains and rank ``r``:

- overall traits ``eta`` (N x r), iid ``N(0, 1)``;
- loading directions ``u_k`` on the unit sphere of ``R^r`` (first component
  positive), loadings ``w_k = sqrt(1 - h) * u_k`` for inlier domains and
  ``w_k = 0`` for outlier domains;
- domain traits ``theta_k = eta @ w_k + sqrt(h) * z_k`` for inliers and
  ``theta_k = z_k`` for outliers, with ``z_k`` iid ``N(0, 1)``; every domain
  trait therefore has population mean 0 and variance 1, and
  ``corr(theta_k, theta_l) = w_k . w_l`` for ``k != l``;
- items: ``log a_j ~ N(log discrimination_median, discrimination_sd)``,
  ``b_j ~ N(beta_k, difficulty_sd)`` with a domain shift
  ``beta_k ~ N(difficulty_mean, domain_shift_sd)``, intercept
  ``d_j = -a_j * b_j``;
- responses ``y_ij ~ Bernoulli(c + (1 - c) * sigmoid(a_j * theta_ik + d_j))``;
- each ``(i, j)`` pair is unobserved with probability ``missing``.

The truth is the generating values themselves: traits are *not* re-standardised
on the realised sample, so they have mean 0 and variance 1 over the population
(the sample moments differ by ``O(1/sqrt(N))``). Estimators standardise over
the sample; compare after aligning scales, as METHOD.md §6 prescribes.

Random streams: ``numpy.random.default_rng(seed)`` is split with
``Generator.spawn`` into four independent streams (traits, items, responses,
missingness), so the same seed gives identical output, and changing, say,
``missing`` or ``guessing`` leaves the traits and items unchanged; changing
``similarity`` keeps the same ``eta`` and ``z`` (paired designs).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from mtlirt.errors import InputError

__all__ = [
    "Simulation",
    "simulate",
    "mmlu_subjects",
    "preset_domain_sizes",
    "PRESETS",
]

#: Names accepted by ``preset``.
PRESETS = ("mmlu",)

#: Smallest domain size a scaled preset may produce (``scale=0.007`` gives
#: MMLU domains of 1-11 items, as on real leaderboards with tiny domains).
MIN_PRESET_DOMAIN_SIZE = 1

# Largest polar angle of a loading direction away from the first (general)
# factor, for rank > 1. With pi/3 the first loading of every inlier domain is
# at least half of its norm, and for rank 2 the second factor carries about
# 30% of the loading variance (singular values of W about 0.84 : 0.54).
_MAX_LOADING_ANGLE = math.pi / 3


# --------------------------------------------------------------------------
# domains
# --------------------------------------------------------------------------


def mmlu_subjects() -> pd.Series:
    """MMLU's 57 subjects and their numbers of test items.

    Returns
    -------
    pandas.Series
        Integer sizes indexed by subject name (in the shipped order,
        alphabetical), named ``n_test_items``; they sum to 14,042.
    """
    resource = files("mtlirt") / "data" / "mmlu_subjects.csv"
    with resource.open("r", encoding="utf-8") as fh:
        table = pd.read_csv(fh)
    sizes = pd.Series(
        table["n_test_items"].to_numpy(dtype=np.int64),
        index=pd.Index(table["subject"].astype(str).to_numpy(), name="subject"),
        name="n_test_items",
    )
    return sizes


def preset_domain_sizes(preset: str, scale: float = 1.0) -> dict[str, int]:
    """Domain sizes of a named leaderboard, optionally scaled.

    Parameters
    ----------
    preset : str
        A name in :data:`PRESETS` (case-insensitive); ``"mmlu"`` gives MMLU's
        57 subjects.
    scale : float, default 1.0
        Multiplier of every size; the result is rounded half up and floored at
        :data:`MIN_PRESET_DOMAIN_SIZE` (1) item.

    Returns
    -------
    dict of str to int
        Domain name -> number of items, in the preset's order.

    Raises
    ------
    InputError
        Unknown preset or a scale that is not a positive finite number.
    """
    name = str(preset).lower()
    if name not in PRESETS:
        raise InputError(f"unknown preset {preset!r}; choose one of {', '.join(PRESETS)}")
    scale = float(scale)
    if not math.isfinite(scale) or scale <= 0:
        raise InputError(f"scale must be a positive number, got {scale!r}")
    sizes = mmlu_subjects()
    scaled = np.floor(sizes.to_numpy(dtype=np.float64) * scale + 0.5).astype(np.int64)
    scaled = np.maximum(scaled, MIN_PRESET_DOMAIN_SIZE)
    return {str(k): int(v) for k, v in zip(sizes.index, scaled)}


def _resolve_domains(
    domain_sizes: Sequence[int] | Mapping[str, int] | None,
    preset: str | None,
    scale: float,
) -> dict[str, int]:
    if domain_sizes is not None and preset is not None:
        raise InputError("give either domain_sizes or preset, not both")
    if domain_sizes is None:
        return preset_domain_sizes(preset if preset is not None else "mmlu", scale)
    if float(scale) != 1.0:
        raise InputError("scale applies to a preset only; scale domain_sizes yourself")
    if isinstance(domain_sizes, Mapping):
        names = [str(k) for k in domain_sizes.keys()]
        sizes = list(domain_sizes.values())
    else:
        sizes = list(domain_sizes)
        width = max(2, len(str(len(sizes))))
        names = [f"d{k + 1:0{width}d}" for k in range(len(sizes))]
    if not sizes:
        raise InputError("domain_sizes is empty: give at least one domain")
    if len(set(names)) != len(names):
        raise InputError("domain names must be unique")
    out: dict[str, int] = {}
    bad = []
    for name, size in zip(names, sizes):
        try:
            value = int(size)
            ok = value == size and value >= 1
        except (TypeError, ValueError):
            ok = False
        if not ok:
            bad.append(f"{name}={size!r}")
        else:
            out[name] = value
    if bad:
        raise InputError(f"domain sizes must be positive integers: {', '.join(bad)}")
    return out


# --------------------------------------------------------------------------
# truth
# --------------------------------------------------------------------------


def _loading_directions(n: int, rank: int, rng: np.random.Generator) -> np.ndarray:
    """Unit loading directions (n x rank) with a positive first component.

    Rank 1: all ones. Rank 2: angles from the first axis stratified over
    ``(-pi/3, pi/3)`` and shuffled, so both factors are strong even for a
    handful of domains. Rank >= 3: polar angle stratified over ``(0, pi/3)``,
    the remaining direction uniform on the sphere of the other axes.
    """
    if n == 0:
        return np.zeros((0, rank))
    if rank == 1:
        return np.ones((n, 1))
    strata = (rng.permutation(n) + rng.random(n)) / n  # stratified U(0, 1)
    if rank == 2:
        phi = _MAX_LOADING_ANGLE * (2.0 * strata - 1.0)
        return np.column_stack([np.cos(phi), np.sin(phi)])
    phi = _MAX_LOADING_ANGLE * strata
    rest = rng.standard_normal((n, rank - 1))
    rest /= np.linalg.norm(rest, axis=1, keepdims=True)
    return np.column_stack([np.cos(phi), np.sin(phi)[:, None] * rest])


def _draw_traits(
    n_llms: int,
    n_domains: int,
    rank: int,
    similarity: float,
    outlier_share: float,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Return (theta N x K, eta N x r, loadings K x r, outlier mask K)."""
    n_out = int(math.floor(outlier_share * n_domains + 0.5))
    outlier = np.zeros(n_domains, dtype=bool)
    if n_out:
        outlier[rng.choice(n_domains, size=n_out, replace=False)] = True
    inliers = np.flatnonzero(~outlier)
    loadings = np.zeros((n_domains, rank))
    loadings[inliers] = math.sqrt(1.0 - similarity) * _loading_directions(
        inliers.size, rank, rng
    )
    eta = rng.standard_normal((n_llms, rank))
    z = rng.standard_normal((n_llms, n_domains))
    theta = z.copy()
    theta[:, inliers] = eta @ loadings[inliers].T + math.sqrt(similarity) * z[:, inliers]
    return theta, eta, loadings, outlier


# --------------------------------------------------------------------------
# result
# --------------------------------------------------------------------------


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
        ``item, domain, discrimination, intercept, difficulty, guessing``.
    domains : pandas.DataFrame
        Per domain: ``domain, n_items, difficulty_shift, outlier``.
    settings : dict
        The arguments of :func:`simulate` (JSON-serialisable), with the
        resolved ``domain_sizes`` and the ``seed`` used.
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

    def __repr__(self) -> str:
        n, k = self.domain_scores.shape
        return (
            f"Simulation({n} LLMs x {self.items.shape[0]} items in {k} domains, "
            f"rank {self.rank}, {len(self.responses)} responses, seed {self.seed})"
        )

    # -- writing ------------------------------------------------------------

    def write(self, path: str | Path) -> Path:
        """Write the long response table; the format follows the extension.

        Parameters
        ----------
        path : str or pathlib.Path
            ``*.parquet`` / ``*.pq`` (pyarrow; ``llm``, ``item``, ``domain``
            dictionary-encoded, ``correct`` int8, zstd-compressed; no
            statistics for ``item``),
            ``*.csv`` or ``*.csv.gz``.

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
        path.parent.mkdir(parents=True, exist_ok=True)
        table = pa.Table.from_pandas(self.responses, preserve_index=False)
        if kind == "parquet":
            import pyarrow.parquet as pq

            # min/max statistics of the ~14k item names cost half the write
            # time and help no reader; keep them for the sorted llm column
            pq.write_table(
                table,
                path,
                compression="zstd",
                write_statistics=["llm", "domain", "correct"],
            )
        else:
            import pyarrow.csv as pacsv

            options = pacsv.WriteOptions(include_header=True, quoting_style="needed")
            if kind == "csv":
                pacsv.write_csv(table, path, write_options=options)
            else:
                with pa.CompressedOutputStream(str(path), "gzip") as sink:
                    pacsv.write_csv(table, sink, write_options=options)
        return path

    def write_truth(self, directory: str | Path) -> Path:
        """Write the generating truth to a folder.

        Files: ``domain_scores.csv`` (long: ``llm, domain, score``),
        ``overall.csv`` (``llm, score`` and ``score_2``, ... when rank > 1),
        ``items.csv`` (``item, domain, discrimination, intercept, difficulty,
        guessing``), ``domains.csv`` (``domain, n_items, difficulty_shift,
        outlier``) and ``truth.json`` (rank, loadings as ``{domain: [...]}``,
        outlier domains, settings, seed).

        Parameters
        ----------
        directory : str or pathlib.Path
            Created if missing; existing files of these names are replaced.

        Returns
        -------
        pathlib.Path
            The folder.
        """
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        ds = self.domain_scores
        long = pd.DataFrame(
            {
                "llm": np.repeat(ds.index.to_numpy(dtype=object), ds.shape[1]),
                "domain": np.tile(ds.columns.to_numpy(dtype=object), ds.shape[0]),
                "score": ds.to_numpy().ravel(),
            }
        )
        long.to_csv(directory / "domain_scores.csv", index=False)
        overall = self.overall.copy()
        overall.insert(0, "llm", overall.index.to_numpy(dtype=object))
        overall.to_csv(directory / "overall.csv", index=False)
        self.items.to_csv(directory / "items.csv", index=False)
        self.domains.to_csv(directory / "domains.csv", index=False)
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
        return directory


# --------------------------------------------------------------------------
# simulate
# --------------------------------------------------------------------------


def _check_number(name: str, value: float, lo: float, hi: float, *, hi_open: bool) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise InputError(f"{name} must be a number, got {value!r}") from None
    ok = math.isfinite(v) and v >= lo and (v < hi if hi_open else v <= hi)
    if not ok:
        interval = f"[{lo:g}, {hi:g}{')' if hi_open else ']'}"
        raise InputError(f"{name} must lie in {interval}, got {value!r}")
    return v


def _check_int(name: str, value: int, lo: int) -> int:
    try:
        v = int(value)
        ok = v == value and v >= lo
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise InputError(f"{name} must be an integer >= {lo}, got {value!r}")
    return v


def simulate(
    n_llms: int = 1000,
    domain_sizes: Sequence[int] | Mapping[str, int] | None = None,
    *,
    preset: str | None = None,
    scale: float = 1.0,
    rank: int = 1,
    similarity: float = 0.1,
    outlier_share: float = 0.0,
    guessing: float = 0.0,
    missing: float = 0.0,
    discrimination_median: float = 1.2,
    discrimination_sd: float = 0.3,
    difficulty_mean: float = -0.3,
    difficulty_sd: float = 1.0,
    domain_shift_sd: float = 0.5,
    seed: int | None = 0,
) -> Simulation:
    """Simulate an item-level leaderboard with known truth (METHOD.md §2-3).

    Parameters
    ----------
    n_llms : int, default 1000
        Number of LLMs ``N`` (named ``llm0001``, ``llm0002``, ...).
    domain_sizes : sequence of int or mapping of str to int, optional
        Items per domain; a sequence gets names ``d01``, ``d02``, ...
        Exclusive with ``preset``. When both are omitted, ``preset="mmlu"``.
    preset : {"mmlu"}, optional
        Named domain sizes: MMLU's 57 subjects (14,042 items).
    scale : float, default 1.0
        Multiplier of the preset's sizes (rounded, at least 1 item each).
    rank : int, default 1
        Number ``r`` of overall traits.
    similarity : float, default 0.1
        ``h`` in [0, 1]: the share of an inlier domain trait's variance that the
        overall traits do not explain. 0 puts every inlier domain exactly on the
        shared subspace; 1 makes all domains independent.
    outlier_share : float, default 0.0
        ``eps`` in [0, 1]: ``round(eps * K)`` domains, chosen at random, get
        traits independent of the overall traits.
    guessing : float, default 0.0
        Lower asymptote ``c`` in [0, 1) of every item (e.g. 0.25 for four
        options).
    missing : float, default 0.0
        Probability in [0, 1) that a response is unobserved (missing at
        random, independently per LLM and item).
    discrimination_median : float, default 1.2
        Median of the lognormal discriminations ``a_j``.
    discrimination_sd : float, default 0.3
        Standard deviation of ``log a_j`` (about 90% of ``a_j`` in 0.7-2.0).
    difficulty_mean : float, default -0.3
        Mean of the domain difficulty shifts ``beta_k``.
    difficulty_sd : float, default 1.0
        Standard deviation of item difficulties ``b_j`` within a domain.
    domain_shift_sd : float, default 0.5
        Standard deviation of the domain difficulty shifts ``beta_k``.
    seed : int or None, default 0
        Seed of ``numpy.random.default_rng``; ``None`` draws fresh entropy and
        records it in ``settings["seed"]``.

    Returns
    -------
    Simulation
        Responses (long table and dense matrix) and the truth.

    Notes
    -----
    With the defaults and no guessing, the average accuracy is about 0.55 and
    domain accuracies spread over roughly 0.35-0.75, as on MMLU. The flagship
    shape (4,272 LLMs x MMLU, 6.0e7 responses) takes about a second on two
    cores with a peak resident memory of about 0.6 GiB (dense matrix and mask
    0.12 GiB, long table 0.34 GiB: int16 codes for ``llm`` and ``item``, int8
    for ``domain`` and ``correct``).

    Raises
    ------
    InputError
        An argument out of range.
    """
    n_llms = _check_int("n_llms", n_llms, 1)
    rank = _check_int("rank", rank, 1)
    similarity = _check_number("similarity", similarity, 0.0, 1.0, hi_open=False)
    outlier_share = _check_number("outlier_share", outlier_share, 0.0, 1.0, hi_open=False)
    guessing = _check_number("guessing", guessing, 0.0, 1.0, hi_open=True)
    missing = _check_number("missing", missing, 0.0, 1.0, hi_open=True)
    inf = math.inf
    discrimination_median = _check_number(
        "discrimination_median", discrimination_median, 0.0, inf, hi_open=True
    )
    if discrimination_median <= 0:
        raise InputError("discrimination_median must be positive")
    discrimination_sd = _check_number(
        "discrimination_sd", discrimination_sd, 0.0, inf, hi_open=True
    )
    difficulty_mean = _check_number("difficulty_mean", difficulty_mean, -inf, inf, hi_open=True)
    difficulty_sd = _check_number("difficulty_sd", difficulty_sd, 0.0, inf, hi_open=True)
    domain_shift_sd = _check_number("domain_shift_sd", domain_shift_sd, 0.0, inf, hi_open=True)
    if seed is None:
        seed = int(np.random.SeedSequence().entropy)
    else:
        seed = _check_int("seed", seed, 0)

    sizes_by_name = _resolve_domains(domain_sizes, preset, scale)
    domain_names = list(sizes_by_name)
    sizes = np.array([sizes_by_name[d] for d in domain_names], dtype=np.int64)
    n_domains = len(domain_names)
    n_items = int(sizes.sum())
    starts = np.concatenate([[0], np.cumsum(sizes)])

    rng = np.random.default_rng(seed)
    trait_rng, item_rng, response_rng, missing_rng = rng.spawn(4)

    # -- truth --------------------------------------------------------------
    theta, eta, loadings, outlier = _draw_traits(
        n_llms, n_domains, rank, similarity, outlier_share, trait_rng
    )
    shift = difficulty_mean + domain_shift_sd * item_rng.standard_normal(n_domains)
    item_domain = np.repeat(np.arange(n_domains), sizes)
    difficulty = shift[item_domain] + difficulty_sd * item_rng.standard_normal(n_items)
    discrimination = discrimination_median * np.exp(
        discrimination_sd * item_rng.standard_normal(n_items)
    )
    intercept = -discrimination * difficulty

    # -- responses, one domain block at a time --------------------------------
    correct = np.empty((n_llms, n_items), dtype=np.int8)
    observed = np.ones((n_llms, n_items), dtype=bool)
    theta32 = theta.astype(np.float32)
    a32 = discrimination.astype(np.float32)
    d32 = intercept.astype(np.float32)
    c = np.float32(guessing)
    with np.errstate(over="ignore"):
        for k in range(n_domains):
            sl = slice(starts[k], starts[k + 1])
            # e = exp(-(a theta + d)); P = c + (1 - c) / (1 + e)
            e = np.multiply.outer(theta32[:, k], a32[sl])
            e += d32[sl]
            np.negative(e, out=e)
            np.exp(e, out=e)
            e += 1.0
            np.reciprocal(e, out=e)
            if guessing:
                e *= 1.0 - c
                e += c
            u = response_rng.random(e.shape, dtype=np.float32)
            np.less(u, e, out=correct[:, sl])
            del e, u
    if missing > 0:
        for k in range(n_domains):
            sl = slice(starts[k], starts[k + 1])
            u = missing_rng.random((n_llms, sizes[k]), dtype=np.float32)
            np.greater_equal(u, np.float32(missing), out=observed[:, sl])
            correct[:, sl] *= observed[:, sl]
            del u

    # -- names ------------------------------------------------------------------
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

    responses = _long_table(
        correct, observed, missing > 0, llm_names, item_names, domain_names, item_domain
    )

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
            "guessing": np.full(n_items, guessing),
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
    settings = {
        "n_llms": n_llms,
        "preset": None if domain_sizes is not None else str(preset or "mmlu").lower(),
        "scale": float(scale),
        "domain_sizes": {d: int(s) for d, s in zip(domain_names, sizes)},
        "rank": rank,
        "similarity": similarity,
        "outlier_share": outlier_share,
        "guessing": guessing,
        "missing": missing,
        "discrimination_median": discrimination_median,
        "discrimination_sd": discrimination_sd,
        "difficulty_mean": difficulty_mean,
        "difficulty_sd": difficulty_sd,
        "domain_shift_sd": domain_shift_sd,
        "seed": seed,
    }
    return Simulation(
        responses=responses,
        correct=correct,
        observed=observed,
        domain_scores=domain_scores,
        overall=overall,
        loadings=loadings_df,
        outlier_domains=[d for d, o in zip(domain_names, outlier) if o],
        items=items,
        domains=domains,
        settings=settings,
    )


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
