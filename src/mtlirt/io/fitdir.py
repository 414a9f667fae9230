"""Writing and reading a fit folder.

A fit folder holds ``domain_scores.csv``, ``overall.csv``, ``items.csv``,
``domain_correlation.csv``, ``fit.json`` and ``posterior.nc`` (the
:class:`~mtlirt.estimate.Estimate` as netCDF).  It is written to a temporary
folder beside the target and renamed into place only when everything is
written, so a failed fit leaves nothing half-written.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from importlib import metadata
from pathlib import Path

from ..estimate import Estimate, _json_default

FILES = ("domain_scores.csv", "overall.csv", "items.csv", "domain_correlation.csv", "fit.json", "posterior.nc")


def package_versions() -> dict:
    """Versions of the packages a fit depends on."""
    out = {}
    for name in ("mtlirt", "numpy", "scipy", "pandas", "xarray", "pymc", "pytensor", "arviz", "nutpie"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out


def fit_record(est: Estimate, interval: float) -> dict:
    """The content of ``fit.json``: the estimate's info plus interval, sizes and versions."""
    p = est.posterior
    info = est.info
    record = {
        "method": info.get("method"),
        "interval": interval,
        "uncertainty": est.uncertainty_source,
        "sizes": {"llms": p.sizes["llm"], "items": p.sizes["item"], "domains": p.sizes["domain"], "draws": est.n_draws},
        **{k: v for k, v in info.items() if k != "method"},
        "versions": package_versions(),
    }
    return record


def write_fit(est: Estimate, out: str | Path, *, interval: float = 0.9, overwrite: bool = True) -> Path:
    """Write a fit folder atomically (temporary folder, then rename).

    Parameters
    ----------
    est
        The estimate.
    out
        The folder to create.  An existing folder is replaced when
        ``overwrite`` (the default), else an error.
    interval
        Probability mass of the reported intervals.
    """
    out = Path(out)
    if out.exists() and not overwrite:
        raise FileExistsError(f"{out} exists")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        est.domain_scores(interval).to_csv(tmp / "domain_scores.csv", index=False)
        est.overall_scores(interval).to_csv(tmp / "overall.csv", index=False)
        est.item_parameters().to_csv(tmp / "items.csv", index=False)
        est.domain_correlation(interval).to_csv(tmp / "domain_correlation.csv", index=False)
        (tmp / "fit.json").write_text(json.dumps(fit_record(est, interval), indent=2, default=_json_default))
        est.save(tmp / "posterior.nc")
        if out.exists():
            old = out.with_name(f".{out.name}.old")
            if old.exists():
                shutil.rmtree(old)
            os.replace(out, old)
            os.replace(tmp, out)
            shutil.rmtree(old)
        else:
            os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def read_fit(path: str | Path) -> Estimate:
    """Load the estimate of a fit folder (or of a ``posterior.nc`` file)."""
    path = Path(path)
    if path.is_dir():
        path = path / "posterior.nc"
    if not path.exists():
        from ..errors import InputError

        raise InputError(f"cannot read {path}: no such file (is it a fit folder?)")
    return Estimate.load(path)
