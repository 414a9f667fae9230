"""A fit's diagnostics in the report: the sampler diagnostics checked against their usual thresholds,
the rest of what the fitter recorded, and the warning of a fit that did not converge."""

from __future__ import annotations

import math
from collections.abc import Mapping

import pandas as pd

from .html_blocks import _e, _flat, _num, _readable, _slug, _table

#: (key, comparison, threshold, meaning) of the sampler diagnostics checked when present.
DIAGNOSTIC_RULES = (
    ("max_rhat", "<=", 1.01, "largest R-hat (rank-normalised split R-hat)"),
    ("min_ess_bulk", ">=", 400, "smallest bulk effective sample size"),
    ("min_ess_tail", ">=", 400, "smallest tail effective sample size"),
    ("divergences", "<=", 0, "divergent transitions"),
    ("min_bfmi", ">=", 0.3, "smallest Bayesian fraction of missing information"),
)


#: Meaning of the diagnostics a fitter records besides :data:`DIAGNOSTIC_RULES`.
_DIAG_MEANINGS = {
    "iterations": "EM sweeps of the item calibration",
    "calibrations": "calibration converged",
    "worst_rhat": "variable with the largest R-hat",
    "n_parameters": "scalars checked",
    "share_rhat_above": "share of them with R-hat above 1.01",
    "ess_threshold": "effective sample size required",
    "n_chains": "chains",
    "n_draws": "draws per chain",
    "algorithm": "algorithm",
    "pareto_khat": "Pareto k of the importance weights",
}


def _diagnostics(name: str, diag: dict) -> tuple[str, str | None]:
    """The diagnostics block of a fit, and the warning line for the report's top (None if fine)."""
    if not isinstance(diag, Mapping) or not diag:
        return '<p class="note">No diagnostics recorded for this fit.</p>', None
    failing = []
    rows = []
    for key, op, thr, meaning in DIAGNOSTIC_RULES:
        if key not in diag:
            continue
        v = diag[key]
        if key.startswith("min_ess") and isinstance(diag.get("ess_threshold"), (int, float)):
            thr = diag["ess_threshold"]
        try:
            fv = float(v)
            ok = (fv <= thr if op == "<=" else fv >= thr) if math.isfinite(fv) else None
        except (TypeError, ValueError):
            ok = None
        if ok is False:
            failing.append(f"{key} = {_num(v)} (should be {op} {thr})")
        status = "–" if ok is None else ("OK" if ok else "FAIL")
        rows.append({"diagnostic": key, "value": _num(v), "rule": f"{op} {thr}", "status": status, "meaning": meaning})
    known = {r[0] for r in DIAGNOSTIC_RULES} | {"converged", "checks"}  # the checks have their own section
    for k, v in diag.items():
        if k in known:
            continue
        meaning = _DIAG_MEANINGS.get(k, "")
        for key, val in (_flat({k: v}) if isinstance(v, Mapping) else [(k, v)]):
            rows.append({"diagnostic": key, "value": _readable(val) if not isinstance(val, (int, float)) else _num(val),
                         "rule": "", "status": "", "meaning": meaning})
    parts = []
    converged = diag.get("converged")
    warn = None
    if converged is False or (isinstance(converged, str) and converged.lower() in ("false", "no")):
        detail = "; ".join(failing) if failing else "the fitter reported non-convergence"
        parts.append('<div class="warning" role="alert"><strong class="big">⚠ NOT CONVERGED — '
                     f"do not trust the numbers of “{_e(name)}”</strong>{_e(detail)}. Run longer chains, "
                     "reparameterise or check the model before using these scores.</div>")
        warn = f"{name}: not converged ({detail})"
    elif converged is None and failing:
        parts.append('<div class="caution"><strong>Check the diagnostics:</strong> '
                     f"{_e('; '.join(failing))}.</div>")
        warn = f"{name}: diagnostics outside the usual thresholds ({'; '.join(failing)})"
    elif converged is True or converged in ("true", "yes"):
        parts.append('<div class="ok">✓ converged (by the fitter\'s criteria)</div>')
    if rows:
        tab = pd.DataFrame(rows)
        if not tab["rule"].astype(bool).any():
            tab = tab[["diagnostic", "value", "meaning"]]
        if not tab["meaning"].astype(bool).any():
            tab = tab.drop(columns="meaning")
        parts.append(_table(tab, num=("value",), formats={"value": str}, csv=f"{_slug(name)}-diagnostics.csv"))
    return "\n".join(parts), warn
