"""The data summary of a leaderboard (what ``mtlirt validate`` prints): :class:`Summary`."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from . import validate


@dataclass
class Summary:
    """A data summary of a :class:`Responses` (what ``mtlirt validate`` prints)."""

    n_llms: int
    n_items: int
    n_domains: int
    n_responses: int
    observed_share: float
    domains: pd.DataFrame
    accuracy: pd.DataFrame
    constant_items: pd.DataFrame
    perfect_llms: list[str] = field(default_factory=list)
    zero_llms: list[str] = field(default_factory=list)
    constant_domains: dict[str, int] = field(default_factory=dict)
    thin_domains: dict[str, tuple[int, float]] = field(default_factory=dict)

    def __str__(self) -> str:
        lines = [
            f"{self.n_llms:,} LLMs x {self.n_items:,} items in {self.n_domains} domains; "
            f"{self.n_responses:,} responses ({self.observed_share:.1%} of the matrix observed)",
            f"mean accuracy {np.nanmean(self.accuracy.to_numpy()):.3f}; "
            f"domain sizes {int(self.domains['items'].min())}-{int(self.domains['items'].max())} items",
        ]
        if len(self.constant_items):
            n_all = int((self.constant_items["accuracy"] == 1).sum())
            lines.append(
                f"constant items: {len(self.constant_items)} "
                f"({n_all} all correct, {len(self.constant_items) - n_all} all wrong)"
            )
        if self.perfect_llms:
            lines.append(f"LLMs with every answer correct: {', '.join(self.perfect_llms[:5])}"
                         + (" ..." if len(self.perfect_llms) > 5 else ""))
        if self.zero_llms:
            lines.append(f"LLMs with no answer correct: {', '.join(self.zero_llms[:5])}"
                         + (" ..." if len(self.zero_llms) > 5 else ""))
        if self.constant_domains:
            lines.append("constant domains (every response the same; a fit predicts their scores): "
                         + validate.describe_constant(self.constant_domains))
        if self.thin_domains:
            lines.append(f"thin domains (under {validate.MIN_LLMS} LLMs, or under {validate.MIN_RESPONSES} responses "
                         "per LLM; rough scores): " + validate.describe_thin(self.thin_domains))
        table = self.domains.copy()
        table["observed"] = table["observed"].map(lambda v: f"{v:.1%}")
        table["accuracy"] = table["accuracy"].map(lambda v: f"{v:.3f}")
        lines.append(table.to_string())
        return "\n".join(lines)



def summarize(responses) -> Summary:
    """A :class:`Summary` of a :class:`~mtlirt.data.responses.Responses`: counts per domain, observed share,
    accuracy per LLM and domain, degenerate items, LLMs and domains."""
    right, seen = responses.counts()
    sizes = responses.domain_sizes.to_numpy()
    with np.errstate(invalid="ignore", divide="ignore"):
        acc = right / seen
    domains = pd.DataFrame(
        {
            "items": sizes,
            "responses": seen.sum(axis=0),
            "observed": seen.sum(axis=0) / np.maximum(sizes * responses.n_llms, 1),
            "accuracy": right.sum(axis=0) / np.maximum(seen.sum(axis=0), 1),
        },
        index=responses.domains,
    )
    constant, perfect, zero = responses.degenerate()
    args = (responses.correct, responses.mask, responses.domain_slices, responses.domains)
    const_domains = validate.constant_domains(*args)
    thin = {d: v for d, v in validate.thin_domains(*args).items() if d not in const_domains}
    return Summary(
        n_llms=responses.n_llms,
        n_items=responses.n_items,
        n_domains=responses.n_domains,
        n_responses=responses.n_responses,
        observed_share=responses.n_responses / max(responses.n_llms * responses.n_items, 1),
        domains=domains,
        accuracy=pd.DataFrame(acc, index=responses.llms, columns=responses.domains),
        constant_items=constant,
        perfect_llms=perfect,
        zero_llms=zero,
        constant_domains=const_domains,
        thin_domains=thin,
    )
