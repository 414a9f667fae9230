"""Shared styling of the plots: colours, row heights, label widths, interval bars, PNG and SVG export."""

from __future__ import annotations

import base64
import io
import re

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure

_BLUE = "#1f5fa8"
_ORANGE = "#d9661f"
_GREY = "#7f7f7f"
_RED = "#b2182b"


def _row_style(n: int) -> tuple[float, float]:
    """Row height (inches) and label font size (points) for ``n`` labelled rows."""
    if n <= 15:
        return 0.30, 9.0
    if n <= 30:
        return 0.22, 8.0
    if n <= 60:
        return 0.17, 6.5
    if n <= 120:
        return 0.13, 5.0
    return 0.10, 4.0


def _shorten(name: str, width: int = 48) -> str:
    """Cut a long label inside (``abc…wxyz``, a third of the start, two thirds of the end)."""
    name = str(name)
    if len(name) <= width:
        return name
    keep = width - 1
    head = keep // 3
    return name[:head] + "…" + name[len(name) - (keep - head):]


def _label_width_in(labels, fontsize: float) -> float:
    """Rough width in inches of the longest label at ``fontsize``."""
    longest = max((len(str(s)) for s in labels), default=0)
    return longest * fontsize * 0.55 / 72


def _axes(ax, figsize) -> tuple[Figure, plt.Axes]:
    if ax is not None:
        return ax.figure, ax
    fig, ax = plt.subplots(figsize=figsize, layout="constrained")
    return fig, ax


def _interval_label(est, interval: float) -> str:
    src = est.uncertainty_source
    if src is None:
        return "no interval (point estimate without bootstrap)"
    return f"{interval:.0%} interval, {src}"


def _has_interval(lower, upper) -> bool:
    lower, upper = np.asarray(lower, float), np.asarray(upper, float)
    return bool(np.isfinite(lower).any() and np.isfinite(upper).any())


def _hbars(ax, y, lower, upper, color, lw=1.6, alpha=0.8):
    """Horizontal interval segments at heights ``y`` (NaN bounds skipped)."""
    lower, upper = np.asarray(lower, float), np.asarray(upper, float)
    ok = np.isfinite(lower) & np.isfinite(upper)
    if ok.any():
        segs = np.stack([np.c_[lower[ok], np.asarray(y)[ok]], np.c_[upper[ok], np.asarray(y)[ok]]], axis=1)
        ax.add_collection(LineCollection(segs, colors=color, linewidths=lw, alpha=alpha), autolim=True)
        ax.autoscale_view()


def figure_to_base64_png(fig, dpi: int = 100, close: bool = False) -> str:
    """Render a figure as PNG and return it base64-encoded (ASCII, no ``data:`` prefix).

    Parameters
    ----------
    fig : matplotlib.figure.Figure
        The figure.
    dpi : int
        Resolution.
    close : bool
        Close the figure afterwards (frees pyplot's memory in long reports).

    Returns
    -------
    str
        The base64 text, ready for ``<img src="data:image/png;base64,...">``.
    """
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, facecolor="white")
    if close:
        plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _without_font_family(match) -> str:
    """A ``<text style="...">`` opening without its font-family declaration."""
    kept = [d.strip() for d in match.group(1).split(";") if d.strip() and not d.strip().startswith("font-family")]
    return '<text style="' + "; ".join(kept) + '"'


#: Font stack of the SVG text (matplotlib's default sans-serif list, then the browser's).
SVG_FONTS = "'DejaVu Sans','Bitstream Vera Sans',Verdana,Arial,Helvetica,sans-serif"


def figure_to_svg(fig, close: bool = False, salt: str = "mtlirt", dpi: int = 100) -> str:
    """Render a figure as an SVG element for inline HTML (text kept as text).

    Parameters
    ----------
    fig : matplotlib.figure.Figure
        The figure.
    close : bool
        Close the figure afterwards.
    salt : str
        Seed of the SVG's internal ids (clip paths, markers): give every
        figure of one HTML page its own, so that the ids do not collide.
    dpi : int
        Resolution of the rasterized parts.

    Returns
    -------
    str
        ``<svg ...>...</svg>`` without XML prolog or metadata: the font is one
        style rule inside the element (not repeated on every label), so the
        element is also a valid stand-alone ``.svg`` file.  Dense artists
        (images, rasterized scatters) are embedded as PNG inside it.
    """
    buf = io.StringIO()
    with plt.rc_context({"svg.fonttype": "none", "svg.hashsalt": str(salt)}):
        fig.savefig(buf, format="svg", dpi=dpi, facecolor="white", metadata={"Date": None})
    if close:
        plt.close(fig)
    text = buf.getvalue()
    text = text[text.index("<svg"):]
    text = re.sub(r"\s*<metadata>.*?</metadata>", "", text, count=1, flags=re.DOTALL)
    text = re.sub(r"<text style=\"([^\"]*)\"", _without_font_family, text)
    return text.replace("<style type=\"text/css\">", f"<style type=\"text/css\">text{{font-family:{SVG_FONTS}}}", 1)
