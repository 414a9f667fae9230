"""Leaderboard simulator with known truth (the model of docs/model.md, the design of docs/simulation_study.md).

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
the sample; compare after aligning scales, as the simulation study does.

Random streams: ``numpy.random.default_rng(seed)`` is split with
``Generator.spawn`` into four independent streams (traits, items, responses,
missingness), so the same seed gives identical output, and changing, say,
``missing`` or ``guessing`` leaves the traits and items unchanged; changing
``similarity`` keeps the same ``eta`` and ``z`` (paired designs).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mtlirt.data.outputs import FolderKind
from mtlirt.errors import InputError

from .outputs import file_output, folder_output

__all__ = [
    "Simulation",
    "simulate",
    "simulate_paper",
    "mmlu_subjects",
    "preset_domain_sizes",
    "PRESETS",
]

#: Names accepted by ``preset``.
PRESETS = ("mmlu",)

#: The folder of :meth:`Simulation.write_truth`, recognised by its ``truth.json``.
TRUTH_FOLDER = FolderKind("truth folder", "truth.json",
                          ("domain_scores.csv", "overall.csv", "items.csv", "domains.csv", "llms.csv", "truth.json"))

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
        raise InputError("give either domain_sizes (--domain-sizes) or preset (--preset), not both")
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
    norms: np.ndarray | None = None,
    population=None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Return (theta N x K, eta N x r, loadings K x r, outlier mask K).

    ``norms`` (K) replaces the common loading norm ``sqrt(1 - h)`` per domain;
    ``population`` maps the normal ``eta`` to another population with mean 0
    and variance 1. Neither changes what ``rng`` draws.
    """
    n_out = int(math.floor(outlier_share * n_domains + 0.5))
    outlier = np.zeros(n_domains, dtype=bool)
    if n_out:
        outlier[rng.choice(n_domains, size=n_out, replace=False)] = True
    inliers = np.flatnonzero(~outlier)
    norm = np.full(inliers.size, math.sqrt(1.0 - similarity)) if norms is None else norms[inliers]
    loadings = np.zeros((n_domains, rank))
    loadings[inliers] = norm[:, None] * _loading_directions(inliers.size, rank, rng)
    eta = rng.standard_normal((n_llms, rank))
    z = rng.standard_normal((n_llms, n_domains))
    if population is not None:
        eta = population(eta)
    theta = z.copy()
    theta[:, inliers] = eta @ loadings[inliers].T + np.sqrt(1.0 - norm**2) * z[:, inliers]
    return theta, eta, loadings, outlier


def _population(skew: float, cluster: float, rng: np.random.Generator):
    """The overall trait's population: a skew-normal body (shape ``skew``, a long
    upper tail when positive) and a share ``cluster`` of LLMs in a tight lump 3
    body sds below the body's mean (near chance), standardised to mean 0 and
    variance 1 over the population (exact mixture moments). Acts on column 0
    of ``eta`` (the general factor); draws ``|u0|`` and the membership from ``rng``."""
    delta = skew / math.sqrt(1.0 + skew * skew)
    m_b = delta * math.sqrt(2.0 / math.pi)
    v_b = 1.0 - 2.0 * delta * delta / math.pi
    m_c, s_c = m_b - 3.0 * math.sqrt(v_b), 0.3 * math.sqrt(v_b)
    mean = (1 - cluster) * m_b + cluster * m_c
    var = (1 - cluster) * (v_b + m_b**2) + cluster * (s_c**2 + m_c**2) - mean**2

    def apply(eta: np.ndarray) -> np.ndarray:
        n = eta.shape[0]
        u0 = np.abs(rng.standard_normal(n))
        member = rng.random(n) < cluster
        u1 = eta[:, 0]
        raw = np.where(member, m_c + s_c * u1, delta * u0 + math.sqrt(1.0 - delta * delta) * u1)
        out = eta.copy()
        out[:, 0] = (raw - mean) / math.sqrt(var)
        apply.member = member
        return out

    apply.member = None
    return apply


# specialist deviations: |D| ~ U(1.5, 3) trait sds in 1-3 domains, random sign
_SPEC_LO, _SPEC_HI, _SPEC_MAX_DOMAINS = 1.5, 3.0, 3


def _specialists(theta: np.ndarray, share: float, rng: np.random.Generator):
    """Add large deviations to a share of LLMs in 1-3 domains each, then rescale
    every domain to population variance 1 (exactly: ``1 + q E[D^2]``, ``q`` the
    chance that an LLM is a specialist in the domain). Returns
    ``(theta, deviation N x K, scale K)``."""
    n, k = theta.shape
    member = rng.random(n) < share
    dev = np.zeros((n, k))
    for i in np.flatnonzero(member):
        m = int(rng.integers(1, _SPEC_MAX_DOMAINS + 1))
        cols = rng.choice(k, size=min(m, k), replace=False)
        dev[i, cols] = rng.choice([-1.0, 1.0], size=cols.size) * rng.uniform(_SPEC_LO, _SPEC_HI, cols.size)
    e_m = np.mean([min(m, k) for m in range(1, _SPEC_MAX_DOMAINS + 1)])
    e_d2 = (_SPEC_LO**2 + _SPEC_LO * _SPEC_HI + _SPEC_HI**2) / 3.0
    scale = math.sqrt(1.0 + share * e_m / k * e_d2)
    return (theta + dev) / scale, dev / scale, np.full(k, scale)


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

        table = pa.Table.from_pandas(self.responses, preserve_index=False)
        with file_output(path, what="table", overwrite=overwrite) as tmp:
            if kind == "parquet":
                import pyarrow.parquet as pq

                # min/max statistics of the ~14k item names cost half the write
                # time and help no reader; keep them for the sorted llm column
                pq.write_table(
                    table,
                    tmp,
                    compression="zstd",
                    write_statistics=["llm", "domain", "correct"],
                )
            else:
                import pyarrow.csv as pacsv

                options = pacsv.WriteOptions(include_header=True, quoting_style="needed")
                if kind == "csv":
                    pacsv.write_csv(table, tmp, write_options=options)
                else:
                    with pa.CompressedOutputStream(str(tmp), "gzip") as sink:
                        pacsv.write_csv(table, sink, write_options=options)
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
        long.to_csv(directory / "domain_scores.csv", index=False)
        overall = self.overall.copy()
        overall.insert(0, "llm", overall.index.to_numpy(dtype=object))
        overall.to_csv(directory / "overall.csv", index=False)
        self.items.to_csv(directory / "items.csv", index=False)
        self.domains.to_csv(directory / "domains.csv", index=False)
        if self.llms is not None:
            self.llms.to_csv(directory / "llms.csv", index=False)
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


#: Levels of the departures from the ideal model per scenario (``None``: off).
#: The realistic levels and the real-data figures behind them are in
#: docs/simulation_study.md ("Realistic scenario"), measured by
#: benchmarks/real_data_profile.py.
SCENARIOS: dict[str, dict[str, Any]] = {
    "ideal": dict(loading_range=None, skew=0.0, chance_cluster=0.0, guessing=0.0, guessing_sd=0.0,
                  mc_share=1.0, flawed_share=0.0, specialist_share=0.0, block_missing=0.0, missing=0.0),
    "realistic": dict(loading_range=(0.6, 0.98), skew=4.0, chance_cluster=0.05, guessing=0.2, guessing_sd=0.05,
                      mc_share=0.75, flawed_share=0.04, specialist_share=0.03, block_missing=0.4, missing=0.05),
}


def _draw_items(sizes, item_rng, guess_rng, flaw_rng, *, guessing, guessing_sd, mc_share, flawed_share,
                difficulty_mean, difficulty_sd, domain_shift_sd, discrimination_median, discrimination_sd):
    """Item parameters: domain shifts, difficulties, discriminations, guessing on the multiple-choice
    domains and the flawed items (each from its own stream)."""
    n_domains, n_items = sizes.size, int(sizes.sum())
    shift = difficulty_mean + domain_shift_sd * item_rng.standard_normal(n_domains)
    item_domain = np.repeat(np.arange(n_domains), sizes)
    difficulty = shift[item_domain] + difficulty_sd * item_rng.standard_normal(n_items)
    discrimination = discrimination_median * np.exp(
        discrimination_sd * item_rng.standard_normal(n_items)
    )
    # guessing on the items of multiple-choice domains (per item with a spread)
    mc = np.ones(n_domains, dtype=bool)
    if mc_share < 1:
        mc[:] = False
        mc[guess_rng.choice(n_domains, size=int(math.floor(mc_share * n_domains + 0.5)), replace=False)] = True
    guess = np.where(mc[item_domain], guessing, 0.0)
    if guessing_sd > 0 and guessing > 0:
        nu = guessing * (1 - guessing) / guessing_sd**2 - 1
        guess = np.where(mc[item_domain], guess_rng.beta(guessing * nu, (1 - guessing) * nu, n_items), 0.0)
    upper = np.ones(n_items)
    if flawed_share > 0:
        flawed = flaw_rng.choice(n_items, size=int(math.floor(flawed_share * n_items + 0.5)), replace=False)
        low_ceiling, reversed_ = flawed[: flawed.size // 2], flawed[flawed.size // 2:]
        upper[low_ceiling] = flaw_rng.uniform(0.5, 0.9, low_ceiling.size)
        discrimination[reversed_] *= -0.5
    intercept = -discrimination * difficulty
    return shift, item_domain, difficulty, discrimination, guess, upper, intercept


def _draw_responses(theta, discrimination, intercept, guess, upper, starts, response_rng) -> np.ndarray:
    """0/1 responses ``P = c + (u - c) sigmoid(a theta + d)``, one domain block at a time (float32)."""
    n_llms, n_items, n_domains = theta.shape[0], discrimination.size, theta.shape[1]
    correct = np.empty((n_llms, n_items), dtype=np.int8)
    theta32 = theta.astype(np.float32)
    a32 = discrimination.astype(np.float32)
    d32 = intercept.astype(np.float32)
    c32 = guess.astype(np.float32)
    span32 = (upper - guess).astype(np.float32)
    lift = bool(np.any(guess != 0) or np.any(upper != 1))
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
            if lift:
                e *= span32[sl]
                e += c32[sl]
            u = response_rng.random(e.shape, dtype=np.float32)
            np.less(u, e, out=correct[:, sl])
            del e, u
    return correct


def _mask_responses(correct, starts, missing, block_missing, missing_rng, block_rng) -> np.ndarray:
    """The observation mask: responses missing at random, and LLMs that ran only some domains
    (unobserved cells of ``correct`` are set to 0 in place)."""
    n_llms, n_items = correct.shape
    n_domains, sizes = starts.size - 1, np.diff(starts)
    observed = np.ones((n_llms, n_items), dtype=bool)
    if missing > 0:
        for k in range(n_domains):
            sl = slice(starts[k], starts[k + 1])
            u = missing_rng.random((n_llms, sizes[k]), dtype=np.float32)
            np.greater_equal(u, np.float32(missing), out=observed[:, sl])
            correct[:, sl] *= observed[:, sl]
            del u
    ran = np.ones((n_llms, n_domains), dtype=bool)
    if block_missing > 0:
        partial = np.flatnonzero(block_rng.random(n_llms) < block_missing)
        drop = block_rng.random((partial.size, n_domains)) < 0.5
        keep_one = block_rng.integers(0, n_domains, partial.size)
        drop[np.arange(partial.size), keep_one] &= ~drop.all(axis=1)
        ran[partial] = ~drop
        for k in range(n_domains):
            off = ~ran[:, k]
            if off.any():
                sl = slice(starts[k], starts[k + 1])
                observed[off, sl] = False
                correct[off, sl] = 0
    return observed


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


def _check_item_settings(discrimination_median, discrimination_sd, difficulty_mean, difficulty_sd, domain_shift_sd):
    """The item distribution's settings, checked, by name (the keywords of :func:`_draw_items`)."""
    inf = math.inf
    median = _check_number("discrimination_median", discrimination_median, 0.0, inf, hi_open=True)
    if median <= 0:
        raise InputError("discrimination_median must be positive")
    return dict(
        discrimination_median=median,
        discrimination_sd=_check_number("discrimination_sd", discrimination_sd, 0.0, inf, hi_open=True),
        difficulty_mean=_check_number("difficulty_mean", difficulty_mean, -inf, inf, hi_open=True),
        difficulty_sd=_check_number("difficulty_sd", difficulty_sd, 0.0, inf, hi_open=True),
        domain_shift_sd=_check_number("domain_shift_sd", domain_shift_sd, 0.0, inf, hi_open=True),
    )


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


def _check_departures(level: dict, given: dict) -> dict:
    """The scenario's departure levels, overridden by the ones given, checked."""
    dep = {k: level[k] if v is None else v for k, v in given.items()}
    dep["guessing"] = _check_number("guessing", dep["guessing"], 0.0, 1.0, hi_open=True)
    dep["missing"] = _check_number("missing", dep["missing"], 0.0, 1.0, hi_open=True)
    if dep["loading_range"] is not None:
        try:
            lo, hi = (float(v) for v in dep["loading_range"])
        except (TypeError, ValueError):
            raise InputError(f"loading_range must be two numbers, got {dep['loading_range']!r}") from None
        if not (0.0 <= lo <= hi <= 1.0):
            raise InputError(f"loading_range must satisfy 0 <= low <= high <= 1, got {dep['loading_range']!r}")
        dep["loading_range"] = (lo, hi)
    dep["skew"] = _check_number("skew", dep["skew"], -math.inf, math.inf, hi_open=True)
    dep["chance_cluster"] = _check_number("chance_cluster", dep["chance_cluster"], 0.0, 1.0, hi_open=True)
    dep["guessing_sd"] = _check_number("guessing_sd", dep["guessing_sd"], 0.0, 0.5, hi_open=True)
    g, gsd = dep["guessing"], dep["guessing_sd"]
    if gsd > 0 and gsd**2 >= g * (1 - g):
        raise InputError(f"guessing_sd must be below sqrt(guessing (1 - guessing)), got {gsd!r}")
    dep["mc_share"] = _check_number("mc_share", dep["mc_share"], 0.0, 1.0, hi_open=False)
    dep["flawed_share"] = _check_number("flawed_share", dep["flawed_share"], 0.0, 1.0, hi_open=False)
    dep["specialist_share"] = _check_number("specialist_share", dep["specialist_share"], 0.0, 1.0, hi_open=False)
    dep["block_missing"] = _check_number("block_missing", dep["block_missing"], 0.0, 1.0, hi_open=True)
    return dep


def simulate(
    n_llms: int = 1000,
    domain_sizes: Sequence[int] | Mapping[str, int] | None = None,
    *,
    preset: str | None = None,
    scale: float = 1.0,
    scenario: str = "ideal",
    rank: int = 1,
    similarity: float = 0.1,
    outlier_share: float = 0.0,
    guessing: float | None = None,
    missing: float | None = None,
    loading_range: tuple[float, float] | None = None,
    skew: float | None = None,
    chance_cluster: float | None = None,
    guessing_sd: float | None = None,
    mc_share: float | None = None,
    flawed_share: float | None = None,
    specialist_share: float | None = None,
    block_missing: float | None = None,
    discrimination_median: float = 1.2,
    discrimination_sd: float = 0.3,
    difficulty_mean: float = -0.3,
    difficulty_sd: float = 1.0,
    domain_shift_sd: float = 0.5,
    seed: int | None = 0,
) -> Simulation:
    """Simulate an item-level leaderboard with known truth (the model of docs/model.md).

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
    scenario : {"ideal", "realistic"}, default "ideal"
        Default levels of the departures below (:data:`SCENARIOS`).
        ``ideal`` is the model itself (every departure off); ``realistic``
        turns each on at a level measured on real leaderboards. An argument
        given explicitly overrides its scenario level, so each departure can
        also be set alone.
    rank : int, default 1
        Number ``r`` of overall traits.
    similarity : float, default 0.1
        ``h`` in [0, 1]: the share of an inlier domain trait's variance that the
        overall traits do not explain. 0 puts every inlier domain exactly on the
        shared subspace; 1 makes all domains independent.
    outlier_share : float, default 0.0
        ``eps`` in [0, 1]: ``round(eps * K)`` domains, chosen at random, get
        traits independent of the overall traits.
    guessing : float, optional
        Lower asymptote ``c`` in [0, 1) of the items of multiple-choice
        domains (e.g. 0.25 for four options); scenario level when omitted
        (ideal 0, realistic 0.2).
    missing : float, optional
        Probability in [0, 1) that a response is unobserved (missing at
        random, independently per LLM and item); ideal 0, realistic 0.05.
    loading_range : (float, float), optional
        Per-domain loading norms ``|w_k|`` drawn uniformly from this range in
        [0, 1] (domain traits then load unequally on the overall traits;
        ``similarity`` is ignored for inlier domains). Ideal: off (every
        inlier domain has ``|w_k| = sqrt(1 - h)``); realistic (0.6, 0.98).
    skew : float, optional
        Shape of a skew-normal population of the first overall trait (a long
        upper tail when positive); ideal 0 (normal), realistic 4.
    chance_cluster : float, optional
        Share in [0, 1) of LLMs in a tight lump 3 body sds below the rest of
        the population of the first overall trait (near chance on every
        domain); ideal 0, realistic 0.05.
    guessing_sd : float, optional
        Standard deviation of the per-item guessing ``c_j`` (a Beta with mean
        ``guessing``); 0 gives every multiple-choice item ``c_j = guessing``
        (ideal); realistic 0.05 (3PL truth).
    mc_share : float, optional
        Share of domains (chosen at random) that are multiple choice and so
        get guessing; the rest have ``c_j = 0`` (generative answers). Ideal
        1, realistic 0.75.
    flawed_share : float, optional
        Share of items that are flawed: half of them (rounded down) get an
        upper asymptote ``u_j ~ U(0.5, 0.9)``, the rest a negative
        discrimination ``-a_j / 2`` (e.g. a wrong key). Ideal 0, realistic 0.04.
    specialist_share : float, optional
        Share of LLMs that are specialists: a deviation ``+-U(1.5, 3)`` trait
        sds added in 1-3 random domains (each domain then rescaled to
        population variance 1). Ideal 0, realistic 0.03.
    block_missing : float, optional
        Share of LLMs that ran only some domains: each of their domains is
        dropped with probability 1/2 (at least one kept). Ideal 0, realistic 0.4.
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
    **The truth's scale.** Whatever the departures, every true domain score
    and overall score is on the *population scale*: mean 0 and variance 1
    over the population of LLMs (the mixture population is standardised by
    its exact moments, specialist domains by their exact variance), so over
    the simulated LLMs it is standardised up to ``O(1/sqrt(N))``. The
    overall score is the first overall trait ``eta``, the common factor of
    the domain traits (``theta_k = eta @ w_k + sqrt(1 - |w_k|^2) z_k``, plus
    specialist deviations); the responses follow
    ``P = c_j + (u_j - c_j) sigmoid(a_j theta_ik + d_j)``. Estimators
    standardise over the LLMs: compare after standardising the truth over
    the same LLMs.

    Each departure draws from its own random stream, so switching one on
    leaves everything else of the same seed unchanged (the skewed population
    changes ``eta`` and hence ``theta``; specialists rescale their domain).

    With the defaults and no guessing, the average accuracy is about 0.55 and
    domain accuracies spread over roughly 0.35-0.75, as on MMLU. The long
    table is compact (int16 codes for ``llm`` and ``item``, int8 for
    ``domain`` and ``correct``), so the flagship shape (4,272 LLMs x MMLU,
    6.0e7 responses) simulates in seconds and well under a GiB.

    Raises
    ------
    InputError
        An argument out of range.
    """
    n_llms = _check_int("n_llms", n_llms, 1)
    rank = _check_int("rank", rank, 1)
    similarity = _check_number("similarity", similarity, 0.0, 1.0, hi_open=False)
    outlier_share = _check_number("outlier_share", outlier_share, 0.0, 1.0, hi_open=False)
    if scenario not in SCENARIOS:
        raise InputError(f"unknown scenario {scenario!r}; choose one of {', '.join(SCENARIOS)}")
    given = dict(loading_range=loading_range, skew=skew, chance_cluster=chance_cluster, guessing=guessing,
                 guessing_sd=guessing_sd, mc_share=mc_share, flawed_share=flawed_share,
                 specialist_share=specialist_share, block_missing=block_missing, missing=missing)
    dep = _check_departures(SCENARIOS[scenario], given)
    item_settings = _check_item_settings(discrimination_median, discrimination_sd, difficulty_mean, difficulty_sd,
                                         domain_shift_sd)
    if seed is None:
        seed = int(np.random.SeedSequence().entropy)
    else:
        seed = _check_int("seed", seed, 0)

    sizes_by_name = _resolve_domains(domain_sizes, preset, scale)
    domain_names = list(sizes_by_name)
    sizes = np.array([sizes_by_name[d] for d in domain_names], dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(sizes)])

    rng = np.random.default_rng(seed)
    trait_rng, item_rng, response_rng, missing_rng = rng.spawn(4)
    # one more stream per departure, so that each changes only what it should
    load_rng, pop_rng, spec_rng, guess_rng, flaw_rng, block_rng = rng.spawn(6)

    # -- truth --------------------------------------------------------------
    theta, eta, loadings, outlier, in_cluster, deviation = _draw_llm_side(
        n_llms, sizes.size, rank, similarity, outlier_share, dep, trait_rng, load_rng, pop_rng, spec_rng)
    shift, item_domain, difficulty, discrimination, guess, upper, intercept = _draw_items(
        sizes, item_rng, guess_rng, flaw_rng, guessing=dep["guessing"], guessing_sd=dep["guessing_sd"],
        mc_share=dep["mc_share"], flawed_share=dep["flawed_share"], **item_settings)
    # -- responses, one domain block at a time --------------------------------
    correct = _draw_responses(theta, discrimination, intercept, guess, upper, starts, response_rng)
    observed = _mask_responses(correct, starts, dep["missing"], dep["block_missing"], missing_rng, block_rng)

    # -- names and tables --------------------------------------------------------
    llm_names, item_names = _names(n_llms, domain_names, sizes)
    responses = _long_table(correct, observed, dep["missing"] > 0 or dep["block_missing"] > 0, llm_names,
                            item_names, domain_names, item_domain)
    domain_scores, overall, loadings_df, items, domains = _truth_frames(
        llm_names, item_names, domain_names, item_domain, theta, eta, loadings, sizes, shift, outlier,
        discrimination=discrimination, intercept=intercept, difficulty=difficulty, guess=guess, upper=upper)
    settings = _settings_record(
        n_llms=n_llms, preset=None if domain_sizes is not None else str(preset or "mmlu").lower(), scale=scale,
        domain_names=domain_names, sizes=sizes, rank=rank, similarity=similarity, outlier_share=outlier_share,
        scenario=scenario, dep=dep, item_settings=item_settings, seed=seed)
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
        llms=_llm_table(llm_names, in_cluster, deviation, domain_names, observed, starts),
    )


def _draw_llm_side(n_llms, n_domains, rank, similarity, outlier_share, dep, trait_rng, load_rng, pop_rng, spec_rng):
    """The true traits with the LLM-side departures (unequal loadings, skewed or clustered population,
    specialists), each from its own stream: ``theta`` (N, K), ``eta`` (N, r), loadings (K, r), the outlier
    domains (K,), the chance cluster's members (N,) and the specialists' deviations (N, K)."""
    norms = None
    if dep["loading_range"] is not None:
        norms = load_rng.uniform(*dep["loading_range"], size=n_domains)
    skew, chance_cluster = dep["skew"], dep["chance_cluster"]
    population = _population(skew, chance_cluster, pop_rng) if (skew or chance_cluster) else None
    theta, eta, loadings, outlier = _draw_traits(
        n_llms, n_domains, rank, similarity, outlier_share, trait_rng, norms=norms, population=population
    )
    in_cluster = np.zeros(n_llms, bool) if population is None else population.member
    deviation = np.zeros_like(theta)
    if dep["specialist_share"] > 0:
        theta, deviation, spec_scale = _specialists(theta, dep["specialist_share"], spec_rng)
        loadings = loadings / spec_scale[:, None]
    return theta, eta, loadings, outlier, in_cluster, deviation


def _settings_record(*, n_llms, preset, scale, domain_names, sizes, rank, similarity, outlier_share, scenario, dep,
                     item_settings, seed) -> dict:
    """``Simulation.settings``: every setting as used (the scenario's levels filled in), JSON-ready."""
    return {
        "n_llms": n_llms,
        "preset": preset,
        "scale": float(scale),
        "domain_sizes": {d: int(s) for d, s in zip(domain_names, sizes)},
        "rank": rank,
        "similarity": similarity,
        "outlier_share": outlier_share,
        "guessing": dep["guessing"],
        "missing": dep["missing"],
        "scenario": scenario,
        "loading_range": None if dep["loading_range"] is None else list(dep["loading_range"]),
        **{k: dep[k] for k in ("skew", "chance_cluster", "guessing_sd", "mc_share", "flawed_share",
                               "specialist_share", "block_missing")},
        **item_settings,
        "seed": seed,
    }


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


# --------------------------------------------------------------------------
# the seed paper's simulation design (docs/model.md, "The seed paper's estimator")
# --------------------------------------------------------------------------

#: Domain sizes of the paper's design: 50, 60, ..., 100 items, three times over
#: (18 domains; the paper's code ``settings_unequalJ_T18_R100``).
PAPER_DOMAIN_SIZES = (50, 60, 70, 80, 90, 100) * 3


def _paper_tangents(centre: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` orthonormal directions (rows) orthogonal to the ones vector and to ``centre``."""
    u = centre / np.linalg.norm(centre)
    raw = rng.standard_normal((centre.size, n))
    for _ in range(2):  # centre and project out u, orthonormalise; twice for round-off
        raw -= raw.mean(axis=0)
        raw -= np.outer(u, u @ raw)
        raw, _ = np.linalg.qr(raw)
    return raw.T


def simulate_paper(similarity: float, *, n_llms: int = 100, domain_sizes: Sequence[int] = PAPER_DOMAIN_SIZES,
                   seed: int | None = 0, bound_check: Sequence[float] = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5)) -> Simulation:
    """The seed paper's simulation design (its ``random_alpha`` structure; docs/model.md).

    The generation centre ``c`` is an evenly spaced grid over ``[-1, 1]``,
    shuffled over LLMs, centred and scaled to norm ``sqrt(N)``.  Domain traits
    are ``theta_t = sqrt(1 - alpha_t^2) c + sqrt(N) alpha_t v_t`` with
    ``alpha_1 = h``, the other ``alpha_t = h U(-1, 1)`` and ``v_t`` orthonormal
    directions orthogonal to the ones vector and to ``c``; the directions are
    redrawn (at most 100 times) until ``|theta| <= 4`` for every ``h`` in
    ``bound_check`` with the same relative ``alpha``.  Items: ``a ~ U(0.5, 1.5)``,
    ``d ~ U(-1, 1)``; complete 2PL responses.  The true overall trait is, as in
    the paper, the *sine centre* of the true domain traits (the minimiser of
    ``sum_t sin angle(g, theta_t)``, started at ``c``); it equals ``c`` when
    ``h = 0``.

    Parameters
    ----------
    similarity : float
        ``h`` in ``[0, 1)``: the largest sine between a domain trait and the centre.
    n_llms : int, default 100
    domain_sizes : sequence of int, default ``PAPER_DOMAIN_SIZES`` (50, 60, ..., 100 items, three times over)
    seed : int or None, default 0
        Split into independent streams for traits, items and responses.
    bound_check : sequence of float
        The ``h`` values whose traits must all stay within ``|theta| <= 4``
        (the paper's grid of ``h``, so its designs are paired over ``h``).

    Returns
    -------
    Simulation
        Truth: ``domain_scores`` (each centred, variance 1), ``overall``
        (the sine centre, mean 0 and variance 1), ``loadings`` (``cos`` of
        each domain trait with it), ``settings["alpha"]``.
    """
    from ..estimators.paper import sine_centre

    h = _check_number("similarity", similarity, 0.0, 1.0, hi_open=True)
    n_llms = _check_int("n_llms", n_llms, 4)
    sizes = np.array([_check_int("domain size", s, 1) for s in domain_sizes], dtype=np.int64)
    K = len(sizes)
    if K < 2 or K > n_llms - 2:
        raise InputError(f"the paper design needs 2 <= domains <= n_llms - 2, got {K} domains and {n_llms} LLMs")
    if seed is None:
        seed = int(np.random.SeedSequence().entropy)
    else:
        seed = _check_int("seed", seed, 0)
    trait_rng, item_rng, response_rng = np.random.default_rng(seed).spawn(3)
    N = n_llms
    grid = np.linspace(-1.0, 1.0, N)[trait_rng.permutation(N)]
    centre = (grid - grid.mean()) * (math.sqrt(N) / np.linalg.norm(grid - grid.mean()))
    for _ in range(100):
        rel = trait_rng.uniform(-1.0, 1.0, K)
        rel[0] = 1.0
        v = _paper_tangents(centre, K, trait_rng)

        def traits(hh, rel=rel, v=v):
            al = hh * rel
            return np.sqrt(1.0 - al**2)[:, None] * centre + math.sqrt(N) * al[:, None] * v

        if max(np.abs(traits(x)).max() for x in (*bound_check, h)) <= 4.0 + 1e-10:
            break
    else:
        raise InputError(f"could not draw paper-design traits within |theta| <= 4 for h = {h}")
    theta = traits(h)  # K x N
    overall, _, _ = sine_centre(theta, start=centre)
    item_domain = np.repeat(np.arange(K), sizes)
    a = item_rng.uniform(0.5, 1.5, sizes.sum())
    d = item_rng.uniform(-1.0, 1.0, sizes.sum())
    p = 1.0 / (1.0 + np.exp(-(theta[item_domain].T * a + d)))
    correct = (response_rng.random(p.shape) < p).astype(np.int8)
    observed = np.ones(correct.shape, dtype=bool)

    width = max(4, len(str(N)))
    llm_names = [f"llm{i + 1:0{width}d}" for i in range(N)]
    domain_names = [f"d{k + 1:02d}" for k in range(K)]
    item_names = [f"{domain_names[k]}_{j + 1:04d}" for k in range(K) for j in range(sizes[k])]
    cos = theta @ overall / N
    settings = {"preset": "paper", "n_llms": N, "similarity": h,
                "domain_sizes": {nm: int(s) for nm, s in zip(domain_names, sizes)},
                "alpha": (h * rel).tolist(), "seed": seed}
    return Simulation(
        responses=_long_table(correct, observed, False, llm_names, item_names, domain_names, item_domain),
        correct=correct,
        observed=observed,
        domain_scores=pd.DataFrame(theta.T, index=pd.Index(llm_names, name="llm"),
                                   columns=pd.Index(domain_names, name="domain")),
        overall=pd.DataFrame({"score": overall}, index=pd.Index(llm_names, name="llm")),
        loadings=pd.DataFrame({"score": cos}, index=pd.Index(domain_names, name="domain")),
        outlier_domains=[],
        items=pd.DataFrame({"item": item_names, "domain": np.asarray(domain_names, dtype=object)[item_domain],
                            "discrimination": a, "intercept": d, "difficulty": -d / a,
                            "guessing": np.zeros(a.size), "upper": np.ones(a.size)}),
        domains=pd.DataFrame({"domain": domain_names, "n_items": sizes, "difficulty_shift": np.zeros(K),
                              "outlier": np.zeros(K, dtype=bool)}),
        settings=settings,
        llms=pd.DataFrame({"llm": llm_names, "chance_cluster": np.zeros(N, dtype=bool),
                           "specialist_domains": [""] * N, "domains_run": np.full(N, K)}),
    )
