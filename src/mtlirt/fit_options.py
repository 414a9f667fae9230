"""Every check of :func:`mtlirt.fitting.fit`'s settings that needs no data (:func:`check_options`), run
before any work: by ``fit()`` and by the command line before it reads the table."""

from __future__ import annotations

import numpy as np

from .config import SamplerConfig
from .errors import InputError

METHODS = ("mtl", "stl", "pooled", "accuracy", "bayes")
#: Variants of ``mtl``: the package's own estimator, and the seed paper's with its baselines
#: (:mod:`mtlirt.estimators.paper`).
MTL_VARIANTS = ("default", "paper", "paper-global", "paper-local")


#: The options of the Bayesian fit (:func:`mtlirt.bayes.fit_bayes`) beyond its inference settings, with
#: their command-line names where they have one.
_BAYES_OPTIONS = {"spec": "--model", "init": None, "item_values": None, "progress": None, "cores": None,
                  "keep_raw": None, "nuts_kwargs": None, "trace_dir": None, "warn": None}


def _option(name: str) -> str:
    """An option as a message names it: the API's name and, where it has one, the command line's."""
    flag = _BAYES_OPTIONS.get(name, "")
    if name in SamplerConfig.__dataclass_fields__:
        flag = "--" + name.replace("_", "-")
    return f"{name} ({flag})" if flag else name


def check_options(method: str = "mtl", *, rank: int | None = None, model: str = "2pl",
                  guessing: float | str | None = "auto", bootstrap: int = 0, variant: str | None = None,
                  optimizer: str | None = None, cv_seed: int | None = None, n_domains: int | None = None,
                  **bayes_options):
    """Every check of :func:`~mtlirt.fitting.fit`'s settings that needs no data, in one place: ``fit()`` runs
    it first, and the command line runs it before it reads the table, so a notebook and ``mtlirt fit`` refuse the
    same settings with the same :class:`~mtlirt.errors.InputError`, naming the options (the API's names,
    the command line's in brackets).

    The method and its variant (the paper's options to its variants only), the bootstrap and the rank
    (:func:`check_settings`), the options each method takes (``bayes_options`` to ``method="bayes"``
    only, None counting as not given; a name :func:`mtlirt.bayes.fit_bayes` does not take is a
    ``TypeError``), the frequentist methods' guessing floors, and, for ``method="bayes"``, the spec and
    the inference settings (:meth:`mtlirt.config.SamplerConfig.validate`). Returns the validated
    :class:`~mtlirt.config.SamplerConfig` of a Bayesian fit, else None."""
    if method not in METHODS:
        raise InputError(f"unknown method {method!r}: expected one of {', '.join(METHODS)}")
    if variant is not None:
        if variant not in MTL_VARIANTS:
            raise InputError(f"unknown variant {variant!r}: expected one of {', '.join(MTL_VARIANTS)}")
        if method != "mtl" and variant != "default":
            raise InputError(f"variant (--variant) applies to method 'mtl' only, not {method!r}")
        if variant != "default" and (model != "2pl" or guessing not in (None, "auto") or rank not in (None, 1)):
            raise InputError(f"the {variant} variant is the paper's rank-one 2PL without guessing: it takes no "
                             "rank (--rank), guessing (--guessing) or 1PL model (--item-model)")
    _check_paper_options(variant or "default", optimizer, cv_seed)
    check_settings(bootstrap=bootstrap, rank=rank, n_domains=n_domains)
    sampling = set(SamplerConfig.__dataclass_fields__)
    unknown = sorted(set(bayes_options) - sampling - set(_BAYES_OPTIONS))
    if unknown:
        raise TypeError(f"fit() got unexpected keyword argument{'s' if len(unknown) > 1 else ''} "
                        f"{', '.join(map(repr, unknown))}")
    given = {k: v for k, v in bayes_options.items() if v is not None}
    if method != "bayes":
        if given:
            names = [_option(k) for k in given]
            raise InputError(f"{', '.join(names)} appl{'y' if len(names) > 1 else 'ies'} to method 'bayes' only, "
                             f"not {method!r}")
        _check_guessing(guessing)
        return None
    from .bayes.spec import load_spec

    spec = load_spec(given.get("spec") or "factor-2pl")
    if guessing not in (None, "auto") or model not in ("2pl", spec.point_item_model[0]):
        raise InputError("the Bayesian fit takes its item model from its spec (spec, --model); "
                         "model (--item-model) and guessing (--guessing) are for the frequentist methods")
    return SamplerConfig(**{k: v for k, v in given.items() if k in sampling}).validate(spec)


def check_settings(*, bootstrap: int = 0, rank: int | None = None, n_domains: int | None = None) -> None:
    """The settings every method shares: the bootstrap's replicates and the rank against the domains.

    Part of :func:`check_options` (``n_domains`` None: before the table is read), and checked again by
    :func:`~mtlirt.fitting.fit` against the table's domains.
    """
    if isinstance(bootstrap, bool) or not isinstance(bootstrap, (int, np.integer)) or bootstrap < 0 or bootstrap == 1:
        raise InputError(f"bootstrap (--bootstrap) must be 0 (none) or at least 2 replicates, got {bootstrap!r}")
    if rank is not None:
        if isinstance(rank, bool) or not isinstance(rank, (int, np.integer)) or rank < 1:
            raise InputError(f"rank (--rank) must be an integer of at least 1, got {rank!r}")
        if n_domains is not None and rank > n_domains:
            raise InputError(f"rank (--rank) {rank} exceeds the number of domains ({n_domains})")


def _check_paper_options(variant: str, optimizer, cv_seed) -> None:
    """``optimizer`` and ``cv_seed`` given to the paper variants only, and valid."""
    if optimizer is not None:
        if variant == "default":
            raise InputError("optimizer (--optimizer) applies to the paper variants of mtl only (variant paper, "
                             "paper-global or paper-local)")
        if optimizer not in ("fast", "adam"):
            raise InputError(f"unknown optimizer {optimizer!r}: expected 'fast' or 'adam'")
    if cv_seed is not None:
        if variant != "paper":
            raise InputError("cv_seed (--cv-seed) applies to variant 'paper' only (its cross-validation folds; "
                             "the others have none)")
        if isinstance(cv_seed, bool) or not isinstance(cv_seed, (int, np.integer)) or cv_seed < 0:
            raise InputError(f"cv_seed must be an integer >= 0, got {cv_seed!r}")


def _check_guessing(guessing) -> None:
    """The frequentist methods' ``guessing``: None, a number in [0, 1), ``"estimate"`` or ``"auto"``."""
    if isinstance(guessing, str):
        if guessing not in ("estimate", "auto"):
            raise InputError(f"guessing must be a number in [0, 1), 'estimate', 'auto' or None, got {guessing!r}")
    elif guessing is not None and not 0 <= guessing < 1:
        raise InputError(f"guessing must be in [0, 1), got {guessing}")
