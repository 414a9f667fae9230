"""The simulator's settings: the scenarios' departure levels, the checks of every argument and the record
of the settings as used (``Simulation.settings``)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from mtlirt.errors import InputError


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


def _scenario_departures(scenario: str, given: dict) -> dict:
    """The departure levels of the named scenario, overridden by the ones given, checked."""
    if scenario not in SCENARIOS:
        raise InputError(f"unknown scenario {scenario!r}; choose one of {', '.join(SCENARIOS)}")
    return _check_departures(SCENARIOS[scenario], given)


def _resolve_seed(seed: int | None) -> int:
    """The seed as given, checked; ``None`` draws fresh entropy (recorded in the settings)."""
    if seed is None:
        return int(np.random.SeedSequence().entropy)
    return _check_int("seed", seed, 0)


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
