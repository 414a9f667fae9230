"""A figure in the report: a plot function run and its figure embedded as inline SVG, with the links that
save it as SVG or PNG; the SVG ids numbered afresh for every page, so that a page is the same on every run."""

from __future__ import annotations

import itertools

from . import plots
from .html_blocks import _e, _slug

_FIG_IDS = itertools.count()


def restart_figure_ids() -> None:
    """Number the SVG ids of a new page from zero: unique within it, the same on every run."""
    global _FIG_IDS
    _FIG_IDS = itertools.count()


def _figure(make, caption: str, *, dpi: int = 100, alt: str = "", name: str = "figure") -> str:
    """Run a plot function and embed its figure as inline SVG, with links that save it as SVG or PNG
    (file ``name``); a failing plot leaves a note, not a broken report."""
    import matplotlib.pyplot as plt

    try:
        fig = make()
    except Exception as exc:  # noqa: BLE001 - the report must survive one bad plot
        plt.close("all")
        return f'<p class="note">plot not drawn: {_e(type(exc).__name__)}: {_e(exc)}</p>'
    svg = plots.figure_to_svg(fig, close=True, salt=f"mtlirt-{next(_FIG_IDS)}", dpi=dpi)
    svg = svg.replace("<svg ", f'<svg role="img" aria-label="{_e(alt or caption)}" ', 1)
    fname = _slug(name)
    return (f'<figure class="plot"><div class="figwrap" title="click to zoom">{svg}</div>'
            f"<figcaption>{_e(caption)} <span class=\"dl\">Save: "
            f'<a href="#" data-save="svg" data-name="{_e(fname)}.svg">SVG</a> · '
            f'<a href="#" data-save="png" data-name="{_e(fname)}.png">PNG</a></span></figcaption></figure>')
