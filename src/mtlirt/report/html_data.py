"""The report's "Data" section: the leaderboard the fits were made from, from the data or, without it, from a fit."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from .html_blocks import _howto, _kv_table, _table


def _data_section(responses, fits: dict, records: dict) -> str:
    out = ['<h2 id="data">Data</h2>', _howto(
        "The leaderboard the fits were made from. The observed share is the part of the LLM x item matrix "
        "that holds a response: an LLM that ran only some domains gets its other domain scores predicted from "
        "the domains it ran. Constant items (every LLM right, or every LLM wrong) tell the LLMs nothing apart.")]
    if responses is not None:
        s = responses.summary()
        acc = np.nanmean(s.accuracy.to_numpy()) if s.accuracy.size else float("nan")
        out.append(_kv_table(csv="data-summary.csv", d={
            "LLMs": s.n_llms, "items": s.n_items, "domains": s.n_domains, "responses": s.n_responses,
            "observed share of the LLM x item matrix": f"{s.observed_share:.1%}",
            "mean accuracy (over LLMs and domains)": f"{acc:.3f}",
            "domain sizes (items)": f"{int(s.domains['items'].min())}–{int(s.domains['items'].max())}",
            "constant items (all responses equal)": len(s.constant_items),
            "LLMs with every answer correct": len(s.perfect_llms),
            "LLMs with no answer correct": len(s.zero_llms),
        }))
        dom = s.domains.copy()
        dom.index.name = "domain"
        dom = dom.reset_index()
        out.append("<details><summary>Responses per domain</summary>" + _table(
            dom, num=("items", "responses", "observed", "accuracy"), name=("domain",),
            formats={"observed": lambda v: f"{v:.1%}", "accuracy": lambda v: f"{v:.3f}"}, cls="tall",
            csv="data-domains.csv") + "</details>")
    else:
        name, est = next(iter(fits.items()))
        p = est.posterior
        info = est.info
        extra = {}
        for src in (records.get(name, {}).get("sizes"), info.get("sizes"), info.get("data")):
            if isinstance(src, Mapping):
                extra.update(src)
        d = {"LLMs": p.sizes["llm"], "items": p.sizes["item"], "domains": p.sizes["domain"]}
        for k, v in extra.items():
            if k not in ("llms", "items", "domains", "draws") and not isinstance(v, (Mapping, list)):
                d[str(k).replace("_", " ")] = v
        items = est.item_parameters().groupby("domain").size()
        if len(items):
            d["domain sizes (items)"] = f"{int(items.min())}–{int(items.max())}"
        out.append('<p class="note">From the fit (pass the data, <code>--data</code> or <code>responses=</code>, '
                   "for the full data summary).</p>")
        out.append(_kv_table(d, csv="data-summary.csv"))
    return "\n".join(out)
