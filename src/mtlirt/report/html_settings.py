"""A fit's settings in the report: the settings with the values selected from the data, the timings and
the rest of what the fit recorded."""

from __future__ import annotations

from collections.abc import Mapping

from .compare import fit_timings
from .html_blocks import _e, _howto, _kv_table, _num


def _settings(info: Mapping) -> dict:
    """The recorded settings, each one left to the data shown with the value selected."""
    settings = dict(info.get("settings") or {})
    ev = info.get("rank_evidence")
    how = ev.get("method") if isinstance(ev, Mapping) else None
    if "rank" in settings and settings["rank"] is None and info.get("rank") is not None:
        settings["rank"] = f"{info['rank']} (selected from the data" + (f": {how})" if how else ")")
    if "gamma" in settings and settings["gamma"] is None and info.get("gamma") is not None:
        c = info.get("C")
        settings["gamma"] = (f"{_num(info['gamma'])} (tuned on held-out responses"
                             + (f": C = {_num(c)})" if c is not None else ")"))
    if "guessing" in settings and settings["guessing"] is None:
        settings["guessing"] = "none (no guessing floor)"
    ran = info.get("sampler_config")  # Bayes: the inference settings as run, every default filled in
    if isinstance(ran, Mapping):
        for name, value in ran.items():
            given = settings.get(name)
            if value is not None and value != given:
                settings[name] = f"{_num(value) if isinstance(value, float) else value} (" + (
                    "the default" if given is None else f"{given}") + ")"
    return settings


def _settings_section(aid: str, info: Mapping, record: Mapping, fname: str) -> str:
    """Settings (with the values selected from the data), timings and the rest of the record."""
    out = [f'<h3 id="{_e(aid)}-settings">Settings and timings</h3>']
    out.append(_howto(
        "The options the fit ran with; a setting left to the data (the rank, the shrinkage) shows the value "
        "selected. Timings are wall-clock seconds of each stage."))
    settings = _settings(info)
    timings = fit_timings(info)
    if settings or timings:
        out.append('<div class="grid2">')
        out.append("<div><h4>Settings</h4>" + (_kv_table(settings, csv=f"{fname}-settings.csv") if settings
                                                 else '<p class="note">none recorded</p>') + "</div>")
        out.append("<div><h4>Timings</h4>" + (_kv_table(timings, seconds=True, csv=f"{fname}-timings.csv")
                                                if timings else '<p class="note">none recorded</p>') + "</div></div>")
    else:
        out.append('<p class="note">No settings or timings recorded for this fit.</p>')
    skip = {"method", "settings", "timings", "seconds", "diagnostics"}
    rest = {k: v for k, v in info.items() if k not in skip}
    for k in ("interval", "sizes", "versions"):
        if k in record and k not in rest:
            rest[k] = record[k]
    if rest:
        out.append("<details><summary>Other recorded information</summary>"
                   + _kv_table(rest, csv=f"{fname}-recorded.csv") + "</details>")
    return "\n".join(out)
