"""The simulated leaderboard's domains: named presets (MMLU's subjects), scaled, or the sizes a caller gives."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from importlib.resources import files

import numpy as np
import pandas as pd

from mtlirt.errors import InputError

__all__ = ["PRESETS", "MIN_PRESET_DOMAIN_SIZE", "mmlu_subjects", "preset_domain_sizes"]

#: Names accepted by ``preset``.
PRESETS = ("mmlu",)

#: Smallest domain size a scaled preset may produce (``scale=0.007`` gives
#: MMLU domains of 1-11 items, as on real leaderboards with tiny domains).
MIN_PRESET_DOMAIN_SIZE = 1


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
