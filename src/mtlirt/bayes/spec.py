"""Named model specifications for the Bayesian model (TOML files in ``models/``).

A model spec is a small TOML file; its file name (without ``.toml``) is its
name. Fields::

    description = "free text"
    item_model = "2pl"            # "1pl" | "2pl" | "3pl"
    guessing = 0.25               # 3pl only: a fixed lower asymptote in (0, 1)
                                  # or "estimate" (per-item, tight Beta prior)
    traits = "factor"             # "factor" | "correlated"
    rank = 1                      # factor only: number of overall traits
    item_parameterization = "auto"    # "noncentered" | "centered" | "auto"
    trait_parameterization = "auto"   # "noncentered" | "centered" | "auto" | "marginal"
    discrimination_spread = "auto"    # 2pl/3pl: sd s_k of log a_j around its domain level:
                                      # per domain, partially pooled ("pooled"), one for
                                      # all domains ("shared"), per domain ("domain"), or
                                      # pooled where domains have 5+ items, else shared ("auto")
    eta_raw_pin = "auto"          # factor, items sampled: narrow the mean and scale of the raw
                                  # overall traits, which the model ignores ("auto"), or
                                  # leave them to their N(0, 1) prior ("none"); same posterior

    [priors]                      # every key optional, defaults below
    loading_scale = 2.0           # v ~ N(0, s); Lambda = v / sqrt(1 + |v|^2)
    lkj_eta = 1.0                 # correlated: LKJ shape
    difficulty_mean_scale = 2.0   # beta_k ~ N(0, s)     (domain difficulty)
    difficulty_sd_scale = 2.0     # tau_k ~ HalfNormal(s)
    log_discrimination_mean = 0.0         # alpha_k ~ N(m, s)
    log_discrimination_mean_scale = 1.0
    log_discrimination_sd_scale = 0.5     # s ~ HalfNormal(scale)  (s_k ~ HalfNormal: "domain")
    log_discrimination_sd_spread = 0.25   # "pooled": s_k = s exp(spread u_k), u_k ~ N(0, 1)
    discrimination_max = 8.0      # a_j = exp(log a_j) smoothly capped at this (capped_discrimination)
    guessing_mean = 0.25          # guessing = "estimate": c_j ~ Beta(m k, (1-m) k)
    guessing_concentration = 50.0

The named specs are the repository's top-level ``models/`` folder, which the
build ships inside the package as ``mtlirt/models`` (read with
:mod:`importlib.resources`); run from a source checkout (an editable install,
or ``src`` on the path) they are read from ``models/`` itself. The environment
variable ``MTLIRT_MODELS`` names another folder to use instead. A path to a
TOML file works anywhere.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field, fields, replace
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

import numpy as np

from mtlirt.errors import InputError

__all__ = ["ModelSpec", "load_spec", "list_specs", "models_dir", "resolve_spread", "DEFAULT_SPEC",
           "POOLED_SPREAD_MIN_ITEMS", "capped_discrimination", "uncapped_log_discrimination"]

DEFAULT_SPEC = "factor-2pl"

_ITEM_MODELS = ("1pl", "2pl", "3pl")
_TRAITS = ("factor", "correlated")
_PARAMS = ("auto", "noncentered", "centered")
_TRAIT_PARAMS = _PARAMS + ("marginal",)
_SPREADS = ("auto", "pooled", "shared", "domain")
_PINS = ("auto", "none")


@dataclass(frozen=True)
class Priors:
    """Prior scales of the hierarchical model (see module docstring)."""

    loading_scale: float = 2.0
    lkj_eta: float = 1.0
    difficulty_mean_scale: float = 2.0
    difficulty_sd_scale: float = 2.0
    log_discrimination_mean: float = 0.0
    log_discrimination_mean_scale: float = 1.0
    log_discrimination_sd_scale: float = 0.5
    log_discrimination_sd_spread: float = 0.25
    discrimination_max: float = 8.0
    guessing_mean: float = 0.25
    guessing_concentration: float = 50.0


#: How sharply :func:`capped_discrimination` bends towards its cap.
CAP_SHARPNESS = 4.0


def _np_softplus(z):
    return np.logaddexp(0.0, z)


def capped_discrimination(log_a, cap: float, softplus=_np_softplus, exp=np.exp):
    """The discrimination ``a = cap (1 + (cap / e^{log a})^4)^(-1/4)``: ``exp(log a)`` where it is well
    below ``cap`` (within 0.1% up to a quarter of it, 1.6% at half) and never above it, computed as
    ``exp(log cap - softplus(4 (log cap - log a)) / 4)`` with the array library's ``softplus`` and
    ``exp`` (NumPy's by default, for the draws; PyTensor's in the model).

    A hierarchical normal prior on ``log a`` alone leaves an item that splits a few LLMs perfectly
    free to take discriminations in the hundreds, where the likelihood is a step and NUTS diverges
    (ChemBench and MMLU-Pro with 5-20 items per domain); the frequentist fits bound ``a`` by the
    same ``Penalties.a_max``."""
    lc = float(np.log(cap))
    return exp(lc - softplus(CAP_SHARPNESS * (lc - log_a)) / CAP_SHARPNESS)


def uncapped_log_discrimination(a, cap: float):
    """The ``log a`` whose :func:`capped_discrimination` is ``a`` (each below ``cap``)."""
    lc = np.log(cap)
    return lc - np.log(np.expm1(CAP_SHARPNESS * (lc - np.log(a)))) / CAP_SHARPNESS


_POSITIVE_PRIORS = {
    "loading_scale",
    "lkj_eta",
    "difficulty_mean_scale",
    "difficulty_sd_scale",
    "log_discrimination_mean_scale",
    "log_discrimination_sd_scale",
    "log_discrimination_sd_spread",
    "discrimination_max",
    "guessing_concentration",
}


@dataclass(frozen=True)
class ModelSpec:
    """A validated model specification.

    Attributes
    ----------
    name : str
        The spec's name (file stem) or ``"custom"``.
    item_model : {"1pl", "2pl", "3pl"}
        1PL: one discrimination per domain; 2PL: one per item; 3PL: 2PL with a
        lower asymptote.
    guessing : float or "estimate"
        Lower asymptote: 0 for 1PL/2PL; a fixed value in (0, 1) or
        ``"estimate"`` for 3PL.
    traits : {"factor", "correlated"}
        Factor structure with ``rank`` overall traits, or an LKJ correlation.
    rank : int
        Number of overall traits (factor models; 1 for correlated).
    item_parameterization, trait_parameterization : {"auto", "noncentered", "centered"}
        (``trait_parameterization`` also ``"marginal"``)
        Parameterisation of the item and trait hierarchies. ``"auto"``
        (default) centres where the data dominate the prior: the items when
        they have on average >= 100 observed responses, each domain's traits
        when its LLMs answered on average >= 40 of its items (non-centred
        otherwise); see :func:`mtlirt.bayes.model.trait_centering`. With
        the items fixed, ``"auto"`` factor models integrate the
        domain-specific parts out (``"marginal"``, see
        :mod:`mtlirt.bayes.marginal`); ``"marginal"`` needs fixed items.
    discrimination_spread : {"auto", "pooled", "shared", "domain"}
        2PL/3PL: the standard deviation ``s_k`` of the log discriminations
        around their domain's level ``alpha_k``. ``"pooled"``: one
        per domain, partially pooled, ``s_k = s exp(w u_k)`` with ``s ~
        HalfNormal(log_discrimination_sd_scale)``, ``u_k ~ N(0, 1)`` and ``w =
        log_discrimination_sd_spread`` (0.25: the domains' spreads within
        about a factor 1.6 of each other); ``"domain"``: independent ``s_k ~
        HalfNormal``; ``"shared"``: one ``s`` for all domains; ``"auto"``
        (default): ``"pooled"`` where the domains have a median of at least
        5 items, else ``"shared"`` (:func:`resolve_spread`):
        a domain of a few items says nothing of its own spread, and one
        spread is one parameter where there were dozens. An independent
        spread rests on a domain's own items only (10 in MMLU's smallest
        subjects) and mixes slowly: on the calibration design it had the
        model's largest R-hat (docs/results.md).
    eta_raw_pin : {"auto", "none"}
        Factor models with the items sampled: the overall traits are the raw
        ones ``eta_raw`` standardised over the LLMs, so the mean and scale of
        each column of ``eta_raw`` never reach the likelihood. ``"auto"``
        (default) narrows them to the size of the other directions (the
        potential ``eta_raw_pin``, :func:`mtlirt.bayes.model.add_factor_block`;
        the fixed-items factor model always does); ``"none"`` leaves them to
        the N(0, 1) prior, where they are long directions that NUTS crosses
        slowly. Both give the same posterior.
    priors : Priors
        Prior scales.
    description : str
        Free text.
    source : str or None
        The file it was read from.
    """

    name: str = DEFAULT_SPEC
    item_model: str = "2pl"
    guessing: float | str = 0.0
    traits: str = "factor"
    rank: int = 1
    item_parameterization: str = "auto"
    trait_parameterization: str = "auto"
    discrimination_spread: str = "auto"
    eta_raw_pin: str = "auto"
    priors: Priors = field(default_factory=Priors)
    description: str = ""
    source: str | None = None

    @property
    def estimate_guessing(self) -> bool:
        """True when the lower asymptote is a parameter."""
        return self.guessing == "estimate"

    @property
    def fixed_guessing(self) -> float:
        """The fixed lower asymptote (0 for 1PL/2PL); error if estimated."""
        if self.estimate_guessing:
            raise ValueError("guessing is estimated, not fixed")
        return float(self.guessing)

    @property
    def point_item_model(self) -> tuple[str, float | str | None]:
        """The frequentist item model of this spec, ``(model, guessing)`` as :func:`mtlirt.fit` takes them.

        A 1PL spec is ``("1pl", None)`` (one discrimination per domain), a 2PL spec ``("2pl", None)``,
        a 3PL spec ``("2pl", c)`` with its fixed floor ``c``, or ``("2pl", "estimate")`` when it
        estimates the floor (one per domain). The one mapping: the MTL fit that initialises and
        calibrates the Bayesian model, the fixed-items calibration and the model checks' refits
        all read it."""
        if self.item_model == "1pl":
            return "1pl", None
        if self.item_model == "3pl":
            return "2pl", ("estimate" if self.estimate_guessing else self.fixed_guessing)
        return "2pl", None

    def with_changes(self, **changes: Any) -> ModelSpec:
        """A copy with some fields changed (validated again)."""
        d = _spec_to_dict(replace(self, **changes))
        return _validate(d, name=self.name, source=self.source)


def models_dir() -> Traversable:
    """The folder holding the named model specs.

    Returns
    -------
    pathlib.Path or importlib.resources.abc.Traversable
        ``$MTLIRT_MODELS`` if set; else the specs shipped in the package
        (``mtlirt/models`` of an installed wheel, a plain folder unless the
        package is imported from a zip file); else, in a source checkout, the
        repository's ``models/`` beside ``src/`` (an editable install maps no
        folder of data into the package).
    """
    env = os.environ.get("MTLIRT_MODELS")
    if env:
        return Path(env)
    shipped = files("mtlirt") / "models"
    if shipped.is_dir():
        return shipped
    return Path(__file__).resolve().parents[3] / "models"


def list_specs() -> list[str]:
    """Names of the model specs available in :func:`models_dir`.

    Returns
    -------
    list of str
        Sorted spec names (file stems).
    """
    d = models_dir()
    if not d.is_dir():
        return []
    return sorted(p.name.removesuffix(".toml") for p in d.iterdir() if p.name.endswith(".toml"))


def load_spec(spec: str | os.PathLike | ModelSpec | dict | None = None) -> ModelSpec:
    """Load and validate a model spec.

    Parameters
    ----------
    spec : str, path, dict, ModelSpec or None
        A spec name in :func:`models_dir` (``"factor-2pl"``), a path to a TOML
        file, a dict with the TOML fields, or a ``ModelSpec`` (returned as is).
        ``None`` gives the default ``"factor-2pl"``.

    Returns
    -------
    ModelSpec

    Raises
    ------
    InputError
        Unknown spec name, unreadable TOML, unknown keys or bad values (the
        key is named in the message).
    """
    if spec is None:
        spec = DEFAULT_SPEC
    if isinstance(spec, ModelSpec):
        return spec
    if isinstance(spec, dict):
        return _validate(dict(spec), name=str(spec.get("name", "custom")), source=None)
    s = str(spec)
    path: Traversable = Path(s)
    if not (s.endswith(".toml") or path.is_file()):
        path = models_dir() / f"{s}.toml"
        if not path.is_file():
            raise InputError(
                f"unknown model spec {s!r}; available: {', '.join(list_specs()) or '(none)'} "
                f"(folder {models_dir()})"
            )
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        raise InputError(f"model spec file not found: {path}") from None
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"model spec {path}: invalid TOML: {exc}") from None
    data.pop("name", None)
    return _validate(data, name=Path(path.name).stem, source=str(path))


def _spec_to_dict(spec: ModelSpec) -> dict:
    d = {f.name: getattr(spec, f.name) for f in fields(ModelSpec)}
    d["priors"] = {f.name: getattr(spec.priors, f.name) for f in fields(Priors)}
    for k in ("name", "source"):
        d.pop(k)
    return d


def _validate(data: dict, *, name: str, source: str | None) -> ModelSpec:
    """A spec's keys checked, every default filled in (the error names the spec and the key at fault)."""
    where = f"model spec {name!r}"
    data, priors_in = _split_keys(data, where)
    pri = _check_priors(priors_in, where)

    def choice(key, options, default):
        v = data.get(key, default)
        if not isinstance(v, str) or v.lower() not in options:
            raise InputError(f"{where}: key {key!r} must be one of {', '.join(options)}; got {v!r}")
        return v.lower()

    item_model = choice("item_model", _ITEM_MODELS, "2pl")
    traits = choice("traits", _TRAITS, "factor")
    ipar = choice("item_parameterization", _PARAMS, "auto")
    tpar = choice("trait_parameterization", _TRAIT_PARAMS, "auto")
    if tpar == "marginal" and traits != "factor":
        raise InputError(f"{where}: trait_parameterization = 'marginal' needs traits = 'factor'")

    spread = choice("discrimination_spread", _SPREADS, "auto")
    pin = choice("eta_raw_pin", _PINS, "auto")

    rank = data.get("rank", 1)
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        raise InputError(f"{where}: key 'rank' must be an integer >= 1, got {rank!r}")
    if traits == "correlated" and rank != 1:
        raise InputError(f"{where}: key 'rank' must be 1 (or absent) when traits = 'correlated'")

    guessing = _check_guessing(data.get("guessing", 0.0 if item_model != "3pl" else None), item_model, where)
    desc = data.get("description", "")
    if not isinstance(desc, str):
        raise InputError(f"{where}: key 'description' must be a string")
    return ModelSpec(
        name=name,
        item_model=item_model,
        guessing=guessing,
        traits=traits,
        rank=int(rank),
        item_parameterization=ipar,
        trait_parameterization=tpar,
        discrimination_spread=spread,
        eta_raw_pin=pin,
        priors=Priors(**pri),
        description=desc.strip(),
        source=source,
    )


def _split_keys(data: dict, where: str) -> tuple[dict, dict]:
    """The spec's keys apart from ``name`` and ``source``, and its ``[priors]`` table; an unknown key or
    a ``priors`` that is not a table raises."""
    allowed = {f.name for f in fields(ModelSpec)} - {"name", "source", "priors"}
    data = dict(data)
    data.pop("name", None)
    data.pop("source", None)
    priors_in = data.pop("priors", {}) or {}
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise InputError(
            f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; "
            f"allowed: {', '.join(sorted(allowed | {'priors'}))}"
        )
    if not isinstance(priors_in, dict):
        raise InputError(f"{where}: key 'priors' must be a table")
    return data, priors_in


def _check_priors(priors_in: dict, where: str) -> dict:
    """The ``[priors]`` table checked (known keys, numbers, positive scales, a guessing mean in (0, 1)),
    as floats by name."""
    prior_names = {f.name for f in fields(Priors)}
    unknown = sorted(set(priors_in) - prior_names)
    if unknown:
        raise InputError(
            f"{where}: unknown key(s) in [priors]: {', '.join('priors.' + u for u in unknown)}; "
            f"allowed: {', '.join(sorted(prior_names))}"
        )
    pri = {}
    for k, v in priors_in.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise InputError(f"{where}: key 'priors.{k}' must be a number, got {v!r}")
        v = float(v)
        if k in _POSITIVE_PRIORS and not v > 0:
            raise InputError(f"{where}: key 'priors.{k}' must be > 0, got {v!r}")
        if k == "guessing_mean" and not 0 < v < 1:
            raise InputError(f"{where}: key 'priors.guessing_mean' must be in (0, 1), got {v!r}")
        pri[k] = v
    return pri


def _check_guessing(guessing, item_model: str, where: str):
    """The ``guessing`` key: a number in (0, 1) or ``"estimate"`` for the 3PL, else 0."""
    if item_model == "3pl":
        if guessing is None:
            raise InputError(f"{where}: key 'guessing' is required for item_model = '3pl' "
                             "(a number in (0, 1) or \"estimate\")")
        if isinstance(guessing, str):
            if guessing.lower() != "estimate":
                raise InputError(f"{where}: key 'guessing' must be a number in (0, 1) or "
                                 f"\"estimate\"; got {guessing!r}")
            guessing = "estimate"
        elif isinstance(guessing, bool) or not isinstance(guessing, (int, float)) or not 0 < guessing < 1:
            raise InputError(f"{where}: key 'guessing' must be a number in (0, 1) or "
                             f"\"estimate\"; got {guessing!r}")
        else:
            guessing = float(guessing)
    else:
        if isinstance(guessing, bool) or not isinstance(guessing, (int, float)) or guessing != 0:
            raise InputError(f"{where}: key 'guessing' must be 0 (or absent) for item_model = "
                             f"{item_model!r}; use item_model = '3pl' for a lower asymptote")
        guessing = 0.0
    return guessing


#: ``discrimination_spread = "auto"``: each domain's own spread ("pooled") where the domains have a median of at
#: least this many items, else one spread for all ("shared").
POOLED_SPREAD_MIN_ITEMS = 5


def resolve_spread(spec: ModelSpec, item_domain) -> ModelSpec:
    """The spec with ``discrimination_spread = "auto"`` resolved for the items' domains ``item_domain``:
    ``"pooled"`` where the domains have a median of at least ``POOLED_SPREAD_MIN_ITEMS`` items, else
    ``"shared"``. A domain's own spread ``s_k`` rests on its own items; with a few per domain the ``u_k``
    are their prior alone and only add curvature to the posterior."""
    if spec.discrimination_spread != "auto":
        return spec
    import numpy as np

    counts = np.bincount(np.asarray(item_domain, dtype=np.int64))
    counts = counts[counts > 0]
    pooled = len(counts) > 0 and float(np.median(counts)) >= POOLED_SPREAD_MIN_ITEMS
    return spec.with_changes(discrimination_spread="pooled" if pooled else "shared")
