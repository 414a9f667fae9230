"""The Bayesian fit's inference settings: :class:`SamplerConfig`, with every rule of their valid combinations.

The model (items, traits, priors) is the spec (:class:`mtlirt.bayes.spec.ModelSpec`); how it is fitted is
a :class:`SamplerConfig`: algorithm, NUTS implementation, items sampled or fixed, the LLM side integrated
or sampled, run length, thinning, target acceptance. :meth:`SamplerConfig.validate` holds the rules, for
:func:`mtlirt.bayes.fit_bayes`, :func:`mtlirt.fit` and the command line alike; :meth:`SamplerConfig.resolve`
fills in the defaults a leaderboard calls for (:class:`Route`). A fit records the settings it ran with
(``fit.json``'s ``sampler_config``, the posterior's ``mtlirt_sampler_config``), and reading a fit back
checks them (:func:`check_recorded`). This module imports no sampler, so the command line checks its
options before reading a table.
"""

from __future__ import annotations

import json
import math
import warnings
from dataclasses import asdict, dataclass, field, fields, replace

import numpy as np

from .errors import InputError

__all__ = ["SamplerConfig", "Route", "check_recorded", "thinned_positions", "JOINT_MAX_LLMS", "JOINT_MAX_RESPONSES"]

ALGORITHMS = ("nuts", "advi", "map")
SAMPLERS = ("nutpie", "pymc", "numpyro", "imh")
ITEMS = ("auto", "joint", "fixed")
LLM_SIDES = ("auto", "integrated", "sampled")

# items="auto": the joint model where the item values' own uncertainty matters and its cost is modest (few
# LLMs: an item's values are then known only roughly), the items fixed at their calibration otherwise.
# Measured (docs/results.md): the joint model at 150 LLMs in under a minute ("Calibration on a small
# leaderboard"), at 300 LLMs x 1,126 items in 3.8-4.0 minutes ("The joint model at 300 LLMs");
# its cost grows with the responses, the item values' uncertainty shrinks with the LLMs.
JOINT_MAX_LLMS = 200
JOINT_MAX_RESPONSES = 60_000

#: Where a fit records its settings: the posterior's attribute (``posterior.nc``) and the info key (``fit.json``).
CONFIG_ATTR = "mtlirt_sampler_config"
CONFIG_KEY = "sampler_config"
#: Draws per chain of a NUTS run where the checks do not choose its length; the first checkpoint where they do.
NUTS_DRAWS = 1000
#: The most draws per chain a NUTS run whose length the checks choose may reach.
NUTS_DRAWS_MAX = 4000
#: Tuning steps per chain of a NUTS run where none are given. nutpie adapts its mass matrix from the
#: draws and their gradients in windows that scale with the tuning (its own default is 400 steps); a run
#: that is still poorly adapted fails the convergence checks, which then lengthen it. Measured
#: (docs/results.md, "The joint model at 300 LLMs"): 500 steps gave about the leapfrog steps and ESS per
#: draw of 1,000.
NUTS_TUNE = 500


def use_marginal(spec) -> bool:
    """Whether the fixed-items model integrates the domain-specific traits out:
    factor models with ``trait_parameterization`` ``"auto"`` or ``"marginal"``."""
    return spec.traits == "factor" and spec.trait_parameterization in ("auto", "marginal")


def check_numpyro() -> None:
    """``sampler="numpyro"`` needs the optional JAX extra: an ImportError naming what is missing."""
    import importlib.util

    missing = [m for m in ("jax", "numpyro") if importlib.util.find_spec(m) is None]
    if missing:
        raise ImportError(
            f"sampler='numpyro' needs {' and '.join(missing)}, which are not installed; "
            "install the optional extra: pip install 'mtlirt[jax]' (or use sampler='nutpie')"
        )


def _integer(name: str, v, lo: int, none: bool = False):
    if v is None and none:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
        raise InputError(f"{name} must be an integer >= {lo}{' or None' if none else ''}; got {v!r}")
    return int(v)


def _stride(name: str, v):
    """A thinning: ``None``, or a number >= 1 (``int`` where it is whole)."""
    if v is None:
        return None
    if (isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) or not math.isfinite(v)
            or v < 1):
        raise InputError(f"{name} must be a number >= 1 or None; got {v!r}")
    return int(v) if float(v).is_integer() else float(v)


def thinned_positions(draws: int, thin: float) -> np.ndarray:
    """The draws a chain of ``draws`` keeps at thinning ``thin`` (a number >= 1): the last of each run of
    ``thin``, ``floor(draws / thin)`` of them; where ``thin`` is not whole they are as evenly spaced as
    whole positions allow (``draws=372, thin=1.488``: 250 of the 372, one or two apart)."""
    n = math.floor(draws / thin + 1e-9)
    return np.floor(np.arange(1, n + 1) * thin + 1e-9).astype(np.int64) - 1


def _choice(name: str, v, allowed: tuple, none: bool = False):
    if v is None and none:
        return None
    if v not in allowed:
        raise InputError(f"{name} must be one of {', '.join(allowed)}; got {v!r}")
    return v


@dataclass(frozen=True)
class SamplerConfig:
    """How the Bayesian model is fitted (the arguments of :func:`mtlirt.bayes.fit_bayes` of the same names).

    ``None`` and ``"auto"`` leave a setting to :meth:`resolve`. A fit records the settings it ran with,
    every default filled in (``sampler`` the one a pilot chose, ``draws`` the run length the convergence
    checks chose, ``thin`` the thinning applied, a number >= 1 (:func:`thinned_positions`); ``sampler``,
    ``tune`` and ``target_accept`` ``None`` where the algorithm has none).
    """

    algorithm: str = "nuts"
    sampler: str | None = None
    items: str = "auto"
    llm_side: str = "auto"
    draws: int | None = None
    tune: int | None = None
    chains: int = 4
    thin: int | float | None = None
    target_accept: float | None = None
    log_likelihood: bool | None = None
    advi_iterations: int = 30000
    map_maxiter: int = 3000

    def validate(self, spec=None) -> SamplerConfig:
        """Every rule of the settings and of their combinations, in one place: the settings with their
        integers as ``int``, or an :class:`~mtlirt.errors.InputError` naming the options at fault.

        A rule that needs a setting still ``"auto"`` (the items, the LLM side) waits for :meth:`resolve`,
        which validates the resolved settings again; ``spec`` (a :class:`~mtlirt.bayes.spec.ModelSpec`)
        adds the rules of the model's traits (the integrated route needs factor traits of rank 1-2)."""
        _choice("algorithm", self.algorithm, ALGORITHMS)
        _choice("sampler", self.sampler, SAMPLERS, none=True)
        _choice("items", self.items, ITEMS)
        _choice("llm_side", self.llm_side, LLM_SIDES)
        ta = self.target_accept
        if ta is not None and (isinstance(ta, bool) or not isinstance(ta, (int, float, np.number))
                               or not 0 < ta < 1):
            raise InputError(f"target_accept must be a number in (0, 1) or None; got {ta!r}")
        if self.log_likelihood not in (None, True, False):
            raise InputError(f"log_likelihood must be True, False or None; got {self.log_likelihood!r}")
        cfg = replace(self, draws=_integer("draws", self.draws, 1, none=True),
                      chains=_integer("chains", self.chains, 1), tune=_integer("tune", self.tune, 0, none=True),
                      thin=_stride("thin", self.thin),
                      advi_iterations=_integer("advi_iterations", self.advi_iterations, 1),
                      map_maxiter=_integer("map_maxiter", self.map_maxiter, 1),
                      target_accept=None if ta is None else float(ta))
        # the route with the whole LLM side integrated out: NUTS (or IMH), items fixed, factor traits of rank 1-2
        factor12 = spec is None or (spec.traits == "factor" and spec.rank in (1, 2))
        can_integrate = cfg.algorithm == "nuts" and cfg.items != "joint" and factor12
        cannot = (not can_integrate or cfg.llm_side == "sampled"
                  or (cfg.items == "fixed" and cfg.llm_side == "auto" and spec is not None
                      and spec.trait_parameterization != "auto"))
        if cfg.llm_side == "integrated" and not can_integrate:
            raise InputError("llm_side='integrated' needs algorithm='nuts', items='fixed' and factor traits of "
                             "rank 1 or 2")
        if cfg.sampler == "imh" and cannot:
            raise InputError("sampler='imh' samples the structure of the route with the whole LLM side integrated "
                             "out only (algorithm='nuts', items='fixed', llm_side='integrated', factor traits of "
                             "rank 1 or 2); use a NUTS sampler ('nutpie', 'pymc', 'numpyro') here")
        if cfg.sampler == "pymc" and cfg.llm_side == "integrated":
            raise InputError("the route with the whole LLM side integrated out samples its structure with "
                             "sampler='imh', 'nutpie' or 'numpyro' (default: chosen by a pilot), not 'pymc'")
        if cfg.thin is not None and cfg.thin > 1 and cannot:
            raise InputError("thin applies to llm_side='integrated' only (the structure's draws are thinned there, "
                             "after the convergence check on all of them)")
        if cfg.thin is not None and cfg.draws is not None and cfg.thin > cfg.draws:
            raise InputError(f"thin must be a number from 1 to draws; got {cfg.thin!r}")
        if (cfg.algorithm == "nuts" and cfg.sampler == "numpyro" and spec is not None and cfg.items == "fixed"
                and cfg.llm_side == "sampled"):
            if use_marginal(spec):
                raise InputError(
                    "sampler='numpyro' cannot sample the fixed-items factor model with sampled overall "
                    "traits: its domain traits are integrated out by a numba kernel that has no JAX version; "
                    "use llm_side='integrated' (rank 1 or 2) or sampler='nutpie' (the default)")
        return cfg

    def resolve(self, arr, spec) -> Route:
        """The route of a fit of ``arr`` (a Responses-like) under ``spec``, every default filled in.

        * ``items="auto"``: ``"joint"`` with at most ``JOINT_MAX_LLMS`` LLMs and ``JOINT_MAX_RESPONSES``
          observed responses (the item values' uncertainty matters there, and the joint model is affordable),
          else ``"fixed"``.
        * ``llm_side="auto"``: ``"integrated"`` wherever it applies (NUTS, items fixed, factor traits of rank
          1-2, the spec's ``trait_parameterization`` left at ``"auto"``), else ``"sampled"``. Both routes give
          the same posterior (docs/model.md, "The overall traits' prior, and the estimand of each route");
          the integrated one samples only the loadings. :func:`~mtlirt.bayes.fit_bayes` still takes the
          sampled route where the integrated route's quadrature check then fails.
        * ``sampler=None``: chosen by a pilot on the integrated route (IMH or nutpie), nutpie elsewhere.
        * ``draws=None``: on the integrated route, draws in blocks until the convergence checks pass
          (:func:`mtlirt.bayes.collapsed.sample_structure`); on the other nutpie routes, from ``NUTS_DRAWS``
          to ``NUTS_DRAWS_MAX`` per chain until they pass (:mod:`mtlirt.bayes.nuts_length`); ``NUTS_DRAWS``
          per chain with the other NUTS samplers; 1,000 draws of the ADVI approximation.
        * ``thin=None``: on the integrated route, ``KEEP_DRAWS`` of the structure draws kept, evenly spaced
          (:func:`mtlirt.bayes.collapsed.choose_thin`); 1 elsewhere.
        """
        cfg = self.validate(spec)
        reasons = {}
        items = cfg.items
        if items == "auto":
            n_resp = arr.n_responses
            small = arr.n_llms <= JOINT_MAX_LLMS and n_resp <= JOINT_MAX_RESPONSES
            items = "joint" if small else "fixed"
            reasons["items"] = (f"auto: {arr.n_llms:,} LLMs and {n_resp:,} responses "
                                + (f"(at most {JOINT_MAX_LLMS} and {JOINT_MAX_RESPONSES:,}): the item values are "
                                   "sampled with the LLMs" if small else
                                   f"(more than {JOINT_MAX_LLMS} LLMs or {JOINT_MAX_RESPONSES:,} responses): the "
                                   "items are fixed at their calibration"))
        else:
            reasons["items"] = "as asked"
        applies = cfg.algorithm == "nuts" and items == "fixed" and spec.traits == "factor" and spec.rank in (1, 2)
        if cfg.llm_side == "auto":
            integrated = applies and spec.trait_parameterization == "auto"
            if integrated:
                reasons["llm_side"] = ("auto: items fixed and factor traits of rank 1-2, so every LLM's traits are "
                                       "integrated out and only the loadings are sampled")
            elif items == "fixed" and spec.traits == "factor" and cfg.algorithm == "nuts":
                reasons["llm_side"] = ("auto: sampled, as the integrated route needs factor traits of rank 1-2 and "
                                       "the spec's trait_parameterization left at auto")
            else:
                reasons["llm_side"] = "auto: sampled (the integrated route needs NUTS, items fixed and factor traits)"
        else:
            integrated = cfg.llm_side == "integrated"
            reasons["llm_side"] = "as asked"
        # the settings resolved, checked again by the same rules
        cfg = replace(cfg, items=items, llm_side="integrated" if integrated else "sampled").validate(spec)
        if cfg.algorithm == "nuts" and cfg.sampler == "numpyro":
            check_numpyro()
        side = cfg.llm_side if items == "fixed" and spec.traits == "factor" else None
        draws, tune, thin = cfg.draws, cfg.tune, cfg.thin
        if tune is None and not integrated:
            tune = NUTS_TUNE
        if not integrated:
            thin = 1
        if draws is not None:
            reasons["draws"] = f"{draws:,} draws per chain, as asked"
        elif integrated:
            reasons["draws"] = "run length chosen by the convergence checks"
        elif cfg.algorithm == "nuts" and cfg.sampler in (None, "nutpie"):
            reasons["draws"] = (f"run length chosen by the convergence checks ({NUTS_DRAWS:,}-{NUTS_DRAWS_MAX:,} "
                                "draws per chain)")
        elif cfg.algorithm == "nuts":
            reasons["draws"] = f"{NUTS_DRAWS:,} draws per chain (the default)"
        else:
            reasons["draws"] = f"{NUTS_DRAWS:,} draws (the default)"
        if cfg.algorithm != "nuts" and draws is None:
            draws = NUTS_DRAWS
        cfg = replace(cfg, draws=draws, tune=tune, thin=thin)
        return Route(items=items, integrated=integrated, llm_side=side,
                     sampler=cfg.sampler or ("auto" if integrated else "nutpie"), tune=tune, draws=draws, thin=thin,
                     reasons=reasons, config=cfg)

    def to_dict(self) -> dict:
        """The settings as a JSON-ready dict (``fit.json``'s ``sampler_config``)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, record: dict, *, source: str = "the record") -> SamplerConfig:
        """The settings a fit recorded, validated; a name this version does not know is warned about and
        left out (a fit of another mtlirt), a value outside the rules is an :class:`~mtlirt.errors.InputError`
        naming ``source``."""
        if not isinstance(record, dict):
            raise InputError(f"{source}: the recorded inference settings are not a mapping: {record!r}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(record) - known)
        if unknown:
            warnings.warn(f"{source} records inference settings this mtlirt does not know ({', '.join(unknown)}; "
                          "written by another version?); they are ignored", UserWarning, stacklevel=3)
        try:
            return cls(**{k: v for k, v in record.items() if k in known}).validate()
        except InputError as exc:
            raise InputError(f"{source} records inference settings that break their rules: {exc}") from None


@dataclass(frozen=True)
class Route:
    """The fit's route with every default filled in (:meth:`SamplerConfig.resolve`).

    ``draws=None``: the run length is chosen by the convergence checks (draws in blocks until they pass,
    :mod:`mtlirt.bayes.collapsed`); ``thin=None``: the thinning is chosen from the structure draws'
    autocorrelation. ``sampler="auto"``: IMH or nutpie, chosen by a pilot on the integrated route.
    ``reasons`` says why each default was chosen, for the log and ``fit.json``; ``config`` holds the
    resolved settings."""

    items: str
    integrated: bool
    llm_side: str | None
    sampler: str | None
    tune: int | None
    draws: int | None
    thin: int | float | None
    reasons: dict
    config: SamplerConfig = field(default_factory=SamplerConfig)

    def record(self) -> dict:
        """The route as recorded in ``fit.json`` (``info["route"]``)."""
        return {"items": self.items, "llm_side": self.llm_side, "reasons": dict(self.reasons)}


def check_recorded(tree, source: str) -> SamplerConfig | None:
    """The inference settings a Bayesian fit records (its posterior's ``mtlirt_sampler_config``), checked
    when the fit is read back: by their rules (:meth:`SamplerConfig.from_dict`; a broken one is an
    :class:`~mtlirt.errors.InputError` naming ``source``) and against the posterior they describe (its
    chains and draws, the info's copy; a mismatch is warned about). ``None`` for a fit that records none
    (a point estimate, or a fit of an older mtlirt)."""
    if "posterior" not in tree.children:
        return None
    post = tree["posterior"]
    raw = post.attrs.get(CONFIG_ATTR)
    if raw is None:
        return None
    try:
        record = json.loads(raw)
    except (TypeError, ValueError):
        raise InputError(f"{source}: its recorded inference settings ({CONFIG_ATTR}) are not JSON: "
                         f"{str(raw)[:80]!r}") from None
    cfg = SamplerConfig.from_dict(record, source=source)
    chains, draws = int(post.sizes.get("chain", 0)), int(post.sizes.get("draw", 0))
    if cfg.algorithm == "map":
        want = (1, 1)
    elif cfg.algorithm == "advi":
        want = (1, cfg.draws)
    else:
        want = (cfg.chains, None if cfg.draws is None else len(thinned_positions(cfg.draws, cfg.thin or 1)))
    problems = []
    if (chains, draws) != want:
        problems.append(f"{chains} chains x {draws} draws where the settings give {want[0]} x {want[1]}")
    info = tree.attrs.get("mtlirt_info")
    try:
        info = json.loads(info) if info else {}
    except (TypeError, ValueError):
        info = {}
    recorded = info.get(CONFIG_KEY) if isinstance(info, dict) else None
    known = [f.name for f in fields(SamplerConfig)]
    if isinstance(recorded, dict) and any(recorded.get(k) != record.get(k) for k in known):
        problems.append("the info's copy of the settings differs from the posterior's")
    if problems:
        warnings.warn(f"{source}: its inference settings do not match its posterior ({'; '.join(problems)}); "
                      "the file may have been edited or combined from different fits", UserWarning, stacklevel=3)
    return cfg

