"""Writing and reading a fit folder.

A fit folder holds ``domain_scores.csv``, ``overall.csv``, ``items.csv``,
``domain_correlation.csv``, ``fit.json`` and ``posterior.nc`` (the
:class:`~mtlirt.results.estimate.Estimate` as netCDF).  It is written to a temporary
folder beside the target and renamed into place only when everything is
written, so a failed fit leaves nothing half-written; it replaces only an
earlier fit folder (:mod:`mtlirt.data.outputs`).
"""

from __future__ import annotations

import json
import warnings
from importlib import metadata
from pathlib import Path

from ..config import check_recorded
from ..data.outputs import FolderKind, folder_output
from ..data.tables import write_csv
from ..errors import InputError
from .estimate import Estimate, _json_default, check_interval

FILES = ("domain_scores.csv", "overall.csv", "items.csv", "domain_correlation.csv", "fit.json", "posterior.nc")

#: A fit folder, recognised by its ``fit.json``.
FIT_FOLDER = FolderKind("fit folder", "fit.json", FILES)


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
        The folder to create: a new path, or an existing fit folder (one
        with ``fit.json``), replaced when ``overwrite``.  Anything else (a
        file, a folder mtlirt did not write) is an :class:`InputError`.
    interval
        Probability mass of the reported intervals.
    overwrite
        Replace an existing fit folder (the CLI's ``--force``).
    """
    check_interval(interval)
    out = Path(out)
    with folder_output(out, FIT_FOLDER, overwrite=overwrite) as tmp:
        write_csv(est.domain_scores(interval), tmp / "domain_scores.csv")
        write_csv(est.overall_scores(interval), tmp / "overall.csv")
        write_csv(est.item_parameters(), tmp / "items.csv")
        write_csv(est.domain_correlation(interval), tmp / "domain_correlation.csv")
        (tmp / "fit.json").write_text(json.dumps(fit_record(est, interval), indent=2, default=_json_default))
        est.save(tmp / "posterior.nc")
    return out


def read_fit(path: str | Path) -> Estimate:
    """Load the estimate of a fit folder (or of a ``posterior.nc`` file).

    A Bayesian fit's recorded inference settings are checked (:func:`mtlirt.config.check_recorded`):
    settings that break their rules are an :class:`InputError`, settings that do not match the
    posterior a warning."""
    path = Path(path)
    if path.is_dir():
        path = path / "posterior.nc"
    if not path.exists():
        raise InputError(f"cannot read {path}: no such file (is it a fit folder?)")
    est = Estimate.load(path)
    check_recorded(est.tree, str(path))
    return est


def read_record(path: str | Path) -> dict:
    """A fit's record: its folder's ``fit.json``, else the info stored in ``posterior.nc``.

    ``path`` is a fit folder or a ``posterior.nc`` file.  An unreadable
    record is an :class:`InputError`.
    """
    path = Path(path)
    folder = path if path.is_dir() else path.parent
    fj = folder / "fit.json"
    if fj.is_file() and (path.is_dir() or path.name == "posterior.nc"):
        try:
            record = json.loads(fj.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise InputError(f"cannot read {fj}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__} "
                             "(not a fit.json written by mtlirt fit)") from exc
        if not isinstance(record, dict):
            raise InputError(f"cannot read {fj}: not a fit.json written by mtlirt fit")
        return record
    return read_fit(path).info


def data_fingerprint(record: dict) -> str | None:
    """The fingerprint of the table a fit was made of (``None`` for a fit that does not record one)."""
    data = record.get("data")
    fp = data.get("fingerprint") if isinstance(data, dict) else None
    return str(fp) if fp else None


def check_same_data(fits, responses=None, *, allow_different_data: bool = False, data_name=None,
                    warn_missing: bool = True, hint: str | None = None) -> None:
    """Refuse fits of different tables, or a table that is not the fits' own.

    Parameters
    ----------
    fits : mapping name -> fit record (``fit.json``'s content or an estimate's info)
        The fits.
    responses : Responses, optional
        A table given with them (``mtlirt report --data``), checked against
        every fit that records a fingerprint.
    allow_different_data
        Let fits of different tables through (``mtlirt compare
        --allow-different-data``); a table given must still be each fit's.
    data_name
        The table's name in messages.
    warn_missing
        Warn about fits that record no fingerprint (written by an older
        mtlirt): they pass unchecked.
    hint
        The advice ending the message about fits of different tables.

    Raises
    ------
    InputError
        Naming the fits (and the table) whose fingerprints differ.
    """
    prints = {name: data_fingerprint(rec) for name, rec in fits.items()}
    old = [name for name, fp in prints.items() if fp is None]
    if old and warn_missing:
        warnings.warn(f"{', '.join(old)}: no fingerprint of the fitted table recorded (a fit of an older mtlirt), "
                      "so mtlirt cannot check that the inputs belong together", UserWarning, stacklevel=2)
    known = {name: fp for name, fp in prints.items() if fp is not None}
    if responses is not None:
        fp = responses.fingerprint()
        table = data_name or "the table"
        for name, rec_fp in known.items():
            if rec_fp != fp:
                size = fits[name].get("data", {})
                raise InputError(f"{table} is not the table {name} was fitted to (fingerprint {fp}, "
                                 f"{responses.n_llms} LLMs x {responses.n_items} items; the fit's {rec_fp}, "
                                 f"{size.get('llms', '?')} x {size.get('items', '?')}); give the fit's own table, "
                                 "read with the same --domain-column, --ignore-columns and --drop-unassigned")
    if not allow_different_data and len(set(known.values())) > 1:
        (a, fa), (b, fb) = next((x, y) for x in known.items() for y in known.items() if x[1] != y[1])
        if hint is None:
            hint = ("compare fits of one table, or pass --allow-different-data to compare the LLMs and domains "
                    "they share")
        raise InputError(f"{a} and {b} were fitted to different tables (fingerprints {fa} and {fb}); {hint}")
